"""The AMQP 0-9-1 sender (extra `amqp`, aio-pika): `amqp://[USER:PASSWORD@]HOST[:5672][/VHOST]`
or `amqps://...[:5671]` (TLS, verified unless `verify-ssl=false`). As Ceph RGW's: each message is
published to the exchange the topic's attribute `amqp-exchange` names (it must exist; none: the
default exchange, which routes to the queue of that name) with the topic's name as the routing
key, persistent, as JSON. `amqp-ack-level` (Ceph's values) says when it is acknowledged:
`broker` (the default) by the broker's publisher confirm; `routable` by the confirm of a
mandatory publish that reached a queue (one no queue takes is returned, not acknowledged);
`none` once written to the connection."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractConnection

from .brokers import BrokerSender, Refused, tls_context
from .topics import Topic

ACK_LEVELS = ("none", "broker", "routable")
# aiormq logs a broker going away, and each refused connection, as errors with tracebacks and
# the broker's URL: a failure is this sender's to say, once per destination, without it.
for _name in ("aiormq", "aio_pika"):
    logging.getLogger(_name).setLevel(logging.CRITICAL + 1)


@dataclass
class _Channel:
    connection: AbstractConnection
    channel: AbstractChannel


def _ack_level(topic: Topic) -> str:
    level = topic.attributes.get("amqp-ack-level", "broker").strip().lower()
    return level if level in ACK_LEVELS else "broker"


class AmqpSender(BrokerSender[_Channel]):
    broker = "the AMQP broker"

    def key(self, topic: Topic) -> tuple[str, ...]:
        return (*super().key(topic), _ack_level(topic))

    async def connect(self, topic: Topic) -> _Channel:
        secure = urlsplit(topic.endpoint).scheme == "amqps"
        extra = {"ssl_context": tls_context(topic.verify_ssl)} if secure else {}
        connection = await aio_pika.connect(topic.endpoint, timeout=self.timeout, **extra)
        level = _ack_level(topic)
        try:
            channel = await connection.channel(
                publisher_confirms=level != "none", on_return_raises=level == "routable"
            )
        except BaseException:
            await connection.close()
            raise
        return _Channel(connection, channel)

    def usable(self, connection: _Channel) -> bool:
        return not connection.connection.is_closed and not connection.channel.is_closed

    async def publish(self, connection: _Channel, topic: Topic, body: bytes) -> None:
        name = topic.attributes.get("amqp-exchange", "")
        channel = connection.channel
        exchange = (
            await channel.get_exchange(name, ensure=False) if name else channel.default_exchange
        )
        message = aio_pika.Message(
            body,
            content_type="application/json",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        )
        try:
            await exchange.publish(
                message,
                routing_key=topic.name,
                mandatory=_ack_level(topic) == "routable",
                timeout=self.timeout,
            )
        except aio_pika.exceptions.DeliveryError as exc:
            raise Refused("not confirmed (no queue took it, or a nack)") from exc

    async def disconnect(self, connection: _Channel) -> None:
        await connection.connection.close()
