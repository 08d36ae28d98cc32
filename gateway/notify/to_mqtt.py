"""The MQTT sender (extra `mqtt`, aiomqtt): `mqtt://[USER:PASSWORD@]HOST[:1883]` or
`mqtts://...[:8883]` (TLS, verified unless `verify-ssl=false`); each message is published at QoS
1 on the MQTT topic named as the topic, and acknowledged by the broker's PUBACK."""

from __future__ import annotations

import secrets
from urllib.parse import unquote, urlsplit

import aiomqtt

from .brokers import BrokerSender, tls_context
from .targets import default_port
from .topics import Topic


class MqttSender(BrokerSender[aiomqtt.Client]):
    broker = "the MQTT broker"

    async def connect(self, topic: Topic) -> aiomqtt.Client:
        parts = urlsplit(topic.endpoint)
        secure = parts.scheme == "mqtts"
        client = aiomqtt.Client(
            parts.hostname or "",
            parts.port or default_port(parts.scheme),
            username=unquote(parts.username) if parts.username is not None else None,
            password=unquote(parts.password) if parts.password is not None else None,
            identifier=f"s3gw-{secrets.token_hex(6)}",
            clean_session=True,
            timeout=self.timeout,
            tls_context=tls_context(topic.verify_ssl) if secure else None,
            tls_insecure=(not topic.verify_ssl) if secure else None,
        )
        await client.__aenter__()
        return client

    def usable(self, connection: aiomqtt.Client) -> bool:
        # aiomqtt sets this future when the connection is lost (it does not reconnect).
        return not connection._disconnected.done()

    async def publish(self, connection: aiomqtt.Client, topic: Topic, body: bytes) -> None:
        await connection.publish(topic.name, body, qos=1, timeout=self.timeout)

    async def disconnect(self, connection: aiomqtt.Client) -> None:
        await connection.__aexit__(None, None, None)
