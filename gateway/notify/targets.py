"""The targets by a push-endpoint's scheme: which sender delivers to it (each one a Sender,
delivery.py), its default port, and the optional extra whose client it needs. The worker holds
one Senders, which opens a scheme's sender at its first delivery and keeps it (and so its
connections) until the worker stops.

A broker's client is an optional dependency in an extra of its own (`pip install 's3gw[nats]'`):
a topic whose scheme needs one that is not installed is refused at CreateTopic with one line
naming it (topics.check_endpoint), and a topic kept before the extra went away is said once by
the worker (its failing destination), not per retry."""

from __future__ import annotations

import functools
import importlib
import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .delivery import Delivery, Sender
from .networks import Networks

if TYPE_CHECKING:
    from .topics import Topic


@dataclass(frozen=True)
class Target:
    port: int  # the scheme's default port
    sender: str  # "module:Class", imported at the first delivery (the extra's client with it)
    extra: str = ""  # the extra that installs `client` ("" : the base install has it)
    client: str = ""  # the module the extra installs


_NATS = "gateway.notify.to_nats:NatsSender"
_MQTT = "gateway.notify.to_mqtt:MqttSender"
_REDIS = "gateway.notify.to_redis:RedisSender"
_AMQP = "gateway.notify.to_amqp:AmqpSender"

TARGETS: dict[str, Target] = {
    "http": Target(80, "gateway.notify.webhook:WebhookSender"),
    "https": Target(443, "gateway.notify.webhook:WebhookSender"),
    "nats": Target(4222, _NATS, "nats", "nats"),
    "mqtt": Target(1883, _MQTT, "mqtt", "aiomqtt"),
    "mqtts": Target(8883, _MQTT, "mqtt", "aiomqtt"),
    "redis": Target(6379, _REDIS, "redis", "redis.asyncio"),
    "rediss": Target(6379, _REDIS, "redis", "redis.asyncio"),
    "amqp": Target(5672, _AMQP, "amqp", "aio_pika"),
    "amqps": Target(5671, _AMQP, "amqp", "aio_pika"),
}


@functools.cache
def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def missing_extra(scheme: str) -> str | None:
    """The one line saying which extra a scheme needs, when it is not installed; else None."""
    target = TARGETS[scheme]
    if not target.client or _installed(target.client):
        return None
    return (
        f"a {scheme}:// push-endpoint needs the gateway's extra s3gw[{target.extra}] "
        f"(pip install 's3gw[{target.extra}]'), not installed here"
    )


def default_port(scheme: str) -> int:
    target = TARGETS.get(scheme)
    return target.port if target else 0


class Senders:
    """The registry's senders, one per sender class, opened at first use and kept: send()
    delivers through the one the topic's scheme names."""

    def __init__(self, networks: Networks) -> None:
        self.networks = networks
        self._open: dict[str, Sender] = {}

    async def __aenter__(self) -> Senders:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def send(self, topic: Topic, body: bytes) -> Delivery:
        scheme = urlsplit(topic.endpoint).scheme
        target = TARGETS.get(scheme)
        if target is None:
            return Delivery(False, f"no sender for the scheme {scheme!r}")
        if (missing := missing_extra(scheme)) is not None:
            return Delivery(False, missing)
        sender = self._open.get(target.sender)
        if sender is None:
            module, _, name = target.sender.partition(":")
            sender = getattr(importlib.import_module(module), name)(self.networks)
            self._open[target.sender] = sender
        return await sender.send(topic, body)

    async def close(self) -> None:
        opened, self._open = list(self._open.values()), {}
        for sender in opened:
            await sender.close()
