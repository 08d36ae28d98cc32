"""What the broker senders (to_nats.py, to_mqtt.py, to_redis.py, to_amqp.py) share: a
connection per endpoint, opened at the first delivery after every address the broker's host
resolves to was checked against --notify-networks, kept across deliveries, dropped when a
delivery on it fails (the next one opens a new one, checked again) and closed at the worker's
stop. No client reconnects on its own (a reconnection would go unchecked).

A reason never carries the endpoint (its user and password, its path): only what failed, in
the sender's words, and the client's exception's class name."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Generic, TypeVar
from urllib.parse import urlsplit

from .delivery import Delivery
from .networks import Networks, OutsideNetworks, check_host
from .targets import default_port
from .topics import Topic

TIMEOUT = 10.0  # seconds for one delivery, connection included
Connection = TypeVar("Connection")


class Refused(Exception):
    """The broker answered, and not with an acknowledgement (a nack, a message returned)."""


class BrokerSender(Generic[Connection]):
    broker = "the broker"

    def __init__(self, networks: Networks, timeout: float = TIMEOUT) -> None:
        self.networks = networks
        self.timeout = timeout
        # By the topic's connection settings (its endpoint, open: in memory only).
        self._connections: dict[tuple[str, ...], Connection] = {}
        self._using: dict[tuple[str, ...], asyncio.Lock] = {}

    def key(self, topic: Topic) -> tuple[str, ...]:
        """What makes two topics share a connection."""
        return (topic.endpoint, str(topic.verify_ssl))

    async def connect(self, topic: Topic) -> Connection:
        raise NotImplementedError

    async def publish(self, connection: Connection, topic: Topic, body: bytes) -> None:
        """Returns once the broker acknowledged; raises otherwise."""
        raise NotImplementedError

    async def disconnect(self, connection: Connection) -> None:
        raise NotImplementedError

    def usable(self, connection: Connection) -> bool:
        return True

    async def send(self, topic: Topic, body: bytes) -> Delivery:
        key = self.key(topic)
        try:
            async with asyncio.timeout(self.timeout):
                # The worker delivers several keys at once; a broker's connection takes one
                # message at a time (a client's connection is not made for concurrent
                # commands): the others wait their turn, and a failure drops the connection
                # before the next one opens another.
                async with self._using.setdefault(key, asyncio.Lock()):
                    connection = self._connections.get(key)
                    if connection is not None and not self.usable(connection):
                        await self._drop(key)
                        connection = None
                    if connection is None:
                        parts = urlsplit(topic.endpoint)
                        host = parts.hostname or ""
                        port = parts.port or default_port(parts.scheme)
                        await check_host(self.networks, host, port)
                        connection = await self.connect(topic)
                        self._connections[key] = connection
                    try:
                        await self.publish(connection, topic, body)
                    except BaseException:
                        await self._drop(key)
                        raise
            return Delivery(True)
        except OutsideNetworks as exc:
            return Delivery(False, str(exc))
        except TimeoutError:
            return Delivery(False, f"{self.broker} did not acknowledge in time")
        except Refused as exc:
            return Delivery(False, f"{self.broker} refused the message: {exc}")
        except Exception as exc:  # the client's own errors; their text may name the endpoint
            return Delivery(False, self.failure(exc))

    def failure(self, exc: BaseException) -> str:
        """The reason for a client's error, from the errors it wraps (a client raises its own
        class over the socket's or TLS's error) without their text."""
        found: BaseException | None = exc
        while found is not None:
            if isinstance(found, ssl.SSLCertVerificationError):
                return f"{self.broker}'s TLS certificate was not trusted"
            if isinstance(found, OSError) and found.strerror:
                return f"cannot connect: {found.strerror}"
            found = found.__cause__ or found.__context__
        return f"{self.broker} failed: {type(exc).__name__}"

    async def _drop(self, key: tuple[str, ...]) -> None:
        connection = self._connections.pop(key, None)
        if connection is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await self.disconnect(connection)

    async def close(self) -> None:
        for key in list(self._connections):
            await self._drop(key)


def tls_context(verify: bool) -> ssl.SSLContext:
    """The system's trust, or none at all when the topic says verify-ssl=false."""
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
