"""The senders by scheme (gateway/notify/targets.py) and what every broker sender shares
(gateway/notify/brokers.py), without a broker: the registry, the extra a scheme needs said in
one line (at CreateTopic and by the worker's sender), --notify-networks judged before a
connection, and a reason that never carries the endpoint's secrets."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from gateway.notify import targets
from gateway.notify.networks import Networks, parse_cidrs
from gateway.notify.targets import Senders
from gateway.notify.to_amqp import AmqpSender
from gateway.notify.to_mqtt import MqttSender
from gateway.notify.to_nats import NatsSender
from gateway.notify.to_redis import RedisSender
from gateway.notify.topics import Topic, TopicError, check_endpoint


def _topic(url: str, **attributes: str) -> Topic:
    return Topic("acct", "t", "us-east-1", endpoint=url, attributes=attributes)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_scheme_has_a_sender_and_a_port() -> None:
    assert set(targets.TARGETS) == {
        *("http", "https", "nats", "mqtt", "mqtts", "redis", "rediss", "amqp", "amqps"),
    }
    assert targets.default_port("amqps") == 5671 and targets.default_port("nats") == 4222
    for target in targets.TARGETS.values():
        module, _, name = target.sender.partition(":")
        assert name and module.startswith("gateway.notify.")
    # The test extra has every client.
    assert all(targets.missing_extra(scheme) is None for scheme in targets.TARGETS)


def test_a_missing_extra_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(targets, "_installed", lambda module: module != "aiomqtt")
    line = targets.missing_extra("mqtts")
    assert line is not None and "s3gw[mqtt]" in line and "\n" not in line
    with pytest.raises(TopicError) as caught:
        check_endpoint("mqtts://broker.example:8883", secure=True)
    assert caught.value.code == "InvalidParameter" and "s3gw[mqtt]" in caught.value.message
    check_endpoint("nats://127.0.0.1:4222", secure=False)  # installed: accepted

    async def send() -> None:
        async with Senders(Networks()) as senders:
            delivery = await senders.send(_topic("mqtt://127.0.0.1:1"), b"{}")
            assert not delivery.acknowledged and "s3gw[mqtt]" in delivery.reason

    asyncio.run(send())


def test_unknown_schemes_and_attribute_values_are_refused() -> None:
    with pytest.raises(TopicError) as caught:
        check_endpoint("kafka://127.0.0.1:9092", secure=True)
    assert "'kafka' is not served" in caught.value.message
    topic = _topic("redis://127.0.0.1")
    assert topic.with_attribute("redis-type", "stream").attributes["redis-type"] == "stream"
    for name, value in [("redis-type", "hash"), ("amqp-ack-level", "always")]:
        with pytest.raises(TopicError):
            topic.with_attribute(name, value)


@pytest.mark.parametrize("sender", [NatsSender, MqttSender, RedisSender, AmqpSender])
async def test_a_broker_down_is_a_reason_without_the_secret(
    sender: type, caplog: pytest.LogCaptureFixture
) -> None:
    scheme = {NatsSender: "nats", MqttSender: "mqtt", RedisSender: "redis", AmqpSender: "amqp"}
    url = f"{scheme[sender]}://someone:sekrit-pw@127.0.0.1:{_closed_port()}/vhost?token=sekrit-tk"
    caplog.set_level(logging.DEBUG)
    instance = sender(Networks(), timeout=5.0)
    try:
        delivery = await instance.send(_topic(url), b"{}")
    finally:
        await instance.close()
    assert not delivery.acknowledged and delivery.reason
    assert "sekrit" not in delivery.reason and "someone" not in delivery.reason
    assert "sekrit" not in caplog.text


@pytest.mark.parametrize("sender", [NatsSender, MqttSender, RedisSender, AmqpSender])
async def test_the_bound_is_judged_before_connecting(sender: type) -> None:
    instance = sender(Networks(parse_cidrs("10.0.0.0/8")))
    try:
        delivery = await instance.send(_topic("nats://127.0.0.1:4222"), b"{}")
        assert not delivery.acknowledged
        assert delivery.reason == "127.0.0.1 resolves to 127.0.0.1, outside --notify-networks"
        # Link-local is outside the default bound.
        link_local = await sender(Networks()).send(_topic("redis://169.254.169.254:6379"), b"{}")
        assert "outside --notify-networks" in link_local.reason
    finally:
        await instance.close()
    assert instance._connections == {}
