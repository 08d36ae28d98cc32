"""The NATS sender (extra `nats`, nats-py): `nats://[USER:PASSWORD@ | TOKEN@]HOST[:4222]`; each
message is published on the subject named as the topic. Acknowledged once the server has it:
a publish and a flush (a PING answered after it), or, on a topic whose `persistent` is true,
JetStream's own ack (a stream must take the subject, else it is not acknowledged)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import nats
from nats.aio.client import Client

from .brokers import BrokerSender
from .topics import Topic


async def _quiet(*_: Any) -> None:
    """nats-py's default callbacks log errors themselves; a failure is this sender's to say
    (once, without the endpoint)."""


class NatsSender(BrokerSender[Client]):
    broker = "the NATS server"

    async def connect(self, topic: Topic) -> Client:
        parts = urlsplit(topic.endpoint)
        return await nats.connect(
            servers=[urlunsplit((parts.scheme, parts.netloc, "", "", ""))],
            name="s3gw",
            connect_timeout=int(self.timeout),
            # Neither reconnecting nor the servers a cluster gossips: each connection is one
            # this sender opened after checking --notify-networks.
            allow_reconnect=False,
            max_reconnect_attempts=0,
            error_cb=_quiet,
            disconnected_cb=_quiet,
            closed_cb=_quiet,
        )

    def usable(self, connection: Client) -> bool:
        return connection.is_connected

    async def publish(self, connection: Client, topic: Topic, body: bytes) -> None:
        if topic.attributes.get("persistent", "").strip().lower() == "true":
            await connection.jetstream().publish(topic.name, body, timeout=self.timeout)
        else:
            await connection.publish(topic.name, body)
            await connection.flush(timeout=int(self.timeout))

    async def disconnect(self, connection: Client) -> None:
        await connection.close()
