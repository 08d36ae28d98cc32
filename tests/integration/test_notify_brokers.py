"""The broker targets (docs/notifications.md, "The broker targets") against real brokers started
by the tests (tests/brokers.py): for each of NATS, MQTT, Redis and AMQP, the gateway's records
arrive as AWS's, read back with the same client library; and a broker down while objects are
written, then started again: every record arrives (the outbox retries). One gateway, on
SQLite: the catalogs' outbox is tested in test_notification_delivery.py."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aio_pika
import aiomqtt
import boto3
import nats
import pytest
import redis
from botocore.config import Config
from botocore.exceptions import ClientError

from gateway.notify.networks import Networks
from gateway.notify.to_amqp import AmqpSender
from gateway.notify.to_mqtt import MqttSender
from gateway.notify.to_nats import NatsSender
from gateway.notify.topics import Topic
from tests.brokers import Broker, Mosquitto, Nats, RabbitMQ, Redis
from tests.integration.test_notifications import _client
from tests.server import ACCESS_KEY, SECRET_KEY, GatewayProcess

WAIT = 60.0  # seconds a test waits for records (a retry's backoff is 10 s at most)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gateway = GatewayProcess(tmp_path_factory.mktemp("brokers") / "data").start()
    yield gateway
    gateway.stop()


def _broker(kind: type[Broker], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    broker = kind(tmp_path_factory.mktemp(kind.__name__.lower())).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    yield from _broker(Nats, tmp_path_factory)


@pytest.fixture(scope="module")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    yield from _broker(Mosquitto, tmp_path_factory)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    yield from _broker(Redis, tmp_path_factory)


@pytest.fixture(scope="module")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    # Started once for the module: RabbitMQ takes seconds to boot.
    yield from _broker(RabbitMQ, tmp_path_factory)


def _configure(
    server: GatewayProcess, bucket: str, topic: str, endpoint: str, **attributes: str
) -> str:
    """A bucket whose created objects go to a new topic at `endpoint`; its ARN."""
    s3, sns = _client(server, "s3"), _client(server, "sns")
    s3.create_bucket(Bucket=bucket)
    arn = sns.create_topic(Name=topic, Attributes={"push-endpoint": endpoint, **attributes})[
        "TopicArn"
    ]
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "TopicConfigurations": [
                {"Id": f"{topic}-c", "TopicArn": arn, "Events": ["s3:ObjectCreated:*"]}
            ]
        },
        # No test event: each test reads only the records of its PUTs (the test event to a
        # broker is test_the_test_event_goes_to_the_broker's).
        SkipDestinationValidation=True,
    )
    return arn


def _put(server: GatewayProcess, bucket: str, *keys: str) -> dict[str, str]:
    """PUTs each key (its body the key itself); their ETags by key."""
    s3 = _client(server, "s3")
    return {k: s3.put_object(Bucket=bucket, Key=k, Body=k.encode())["ETag"] for k in keys}


def _check(messages: list[bytes], bucket: str, topic: str, etags: dict[str, str]) -> None:
    """One message per PUT, each `{"Records": [AWS's record]}` (each key's in the order of its
    changes; the keys here are distinct, and delivered side by side: in any order)."""
    bodies = [json.loads(m) for m in messages]
    assert [len(b["Records"]) for b in bodies] == [1] * len(etags)
    order = list(etags)
    records = sorted(
        (b["Records"][0] for b in bodies), key=lambda r: order.index(r["s3"]["object"]["key"])
    )
    assert [r["s3"]["object"]["key"] for r in records] == order
    for record, (key, etag) in zip(records, etags.items(), strict=True):
        assert record["eventVersion"] == "2.1" and record["eventSource"] == "aws:s3"
        assert record["awsRegion"] == "us-east-1"
        assert record["eventName"] == "ObjectCreated:Put"
        assert record["s3"]["configurationId"] == f"{topic}-c"
        assert record["s3"]["bucket"]["name"] == bucket
        assert record["s3"]["bucket"]["arn"] == f"arn:aws:s3:::{bucket}"
        assert record["s3"]["object"]["size"] == len(key)
        assert record["s3"]["object"]["eTag"] == etag.strip('"')
        assert len(record["s3"]["object"]["sequencer"]) == 18
    sequencers = [r["s3"]["object"]["sequencer"] for r in records]
    assert sequencers == sorted(sequencers)


async def _until(count: int, found: list[Any], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and len(found) < count:
        await asyncio.sleep(0.1)
    assert len(found) >= count, f"{len(found)} of {count} {what} within {WAIT} s"


# NATS


async def test_nats_records_arrive(server: GatewayProcess, nats_server: Broker) -> None:
    received: list[bytes] = []
    client = await nats.connect(nats_server.url)

    async def got(message: Any) -> None:
        received.append(message.data)

    await client.subscribe("nats-events", cb=got)
    await client.flush()
    _configure(server, "nats-bucket", "nats-events", nats_server.url)
    etags = await asyncio.to_thread(_put, server, "nats-bucket", "a.txt", "red flower.jpg")
    await _until(2, received, "NATS messages")
    await client.close()
    _check(
        received,
        "nats-bucket",
        "nats-events",
        {"a.txt": etags["a.txt"], "red+flower.jpg": etags["red flower.jpg"]},
    )


async def _jetstream_stream(url: str, subject: str) -> None:
    client = await nats.connect(url)
    await client.jetstream().add_stream(name=subject.upper(), subjects=[subject])
    await client.close()


async def _jetstream_read(url: str, subject: str, count: int) -> list[bytes]:
    client = await nats.connect(url)
    consumer = await client.jetstream().pull_subscribe(subject, durable="probe")
    found: list[bytes] = []
    deadline = time.monotonic() + WAIT
    while len(found) < count and time.monotonic() < deadline:
        try:
            for message in await consumer.fetch(count - len(found), timeout=1):
                await message.ack()
                found.append(message.data)
        except nats.errors.TimeoutError:
            pass
    await client.close()
    return found


def test_nats_down_then_up_persistent(server: GatewayProcess, nats_server: Broker) -> None:
    """A persistent topic: JetStream acks each message; none is acked while the server is down,
    and each arrives once it is back (its stream kept in the server's store folder)."""
    asyncio.run(_jetstream_stream(nats_server.url, "nats-kept"))
    _configure(server, "nats-kept", "nats-kept", nats_server.url, persistent="true")
    nats_server.stop()
    keys = [f"k{i}" for i in range(5)]
    etags = _put(server, "nats-kept", *keys)
    nats_server.start()
    found = asyncio.run(_jetstream_read(nats_server.url, "nats-kept", len(keys)))
    _check(found, "nats-kept", "nats-kept", etags)


async def test_nats_persistent_without_a_stream_is_not_acknowledged(nats_server: Broker) -> None:
    sender = NatsSender(Networks(), timeout=5.0)
    try:
        topic = Topic(
            "acct", "no-stream", "us-east-1", nats_server.url, True, {"persistent": "true"}
        )
        refused = await sender.send(topic, b"{}")
        assert not refused.acknowledged
        assert refused.reason.startswith("the NATS server failed: ")
        # The same server, a core publish: acknowledged by its flush.
        assert (await sender.send(replace(topic, attributes={}), b"{}")).acknowledged
    finally:
        await sender.close()


# MQTT


async def test_mqtt_records_arrive(server: GatewayProcess, mosquitto: Broker) -> None:
    received: list[bytes] = []
    async with aiomqtt.Client("127.0.0.1", mosquitto.port) as client:
        await client.subscribe("mqtt-events", qos=1)
        _configure(server, "mqtt-bucket", "mqtt-events", mosquitto.url)
        etags = await asyncio.to_thread(_put, server, "mqtt-bucket", "a.txt", "b.txt")

        async def read() -> None:
            async for message in client.messages:
                received.append(bytes(message.payload))
                if len(received) == 2:
                    return

        await asyncio.wait_for(read(), WAIT)
    _check(received, "mqtt-bucket", "mqtt-events", etags)


async def _mqtt_session(port: int, count: int) -> list[bytes]:
    """A subscriber whose session the broker keeps (clean_session false): QoS 1 messages
    published while it is away wait for it."""
    received: list[bytes] = []
    async with aiomqtt.Client("127.0.0.1", port, identifier="probe", clean_session=False) as client:
        await client.subscribe("mqtt-kept", qos=1)
        if count:

            async def read() -> None:
                async for message in client.messages:
                    received.append(bytes(message.payload))
                    if len(received) == count:
                        return

            await asyncio.wait_for(read(), WAIT)
    return received


def test_mqtt_down_then_up(server: GatewayProcess, tmp_path: Path) -> None:
    # A broker of its own that keeps sessions across its restart (persistence on).
    broker = Mosquitto(tmp_path / "mqtt", persistence=True).start()
    try:
        asyncio.run(_mqtt_session(broker.port, 0))
        _configure(server, "mqtt-kept", "mqtt-kept", broker.url)
        broker.stop()
        keys = [f"k{i}" for i in range(5)]
        etags = _put(server, "mqtt-kept", *keys)
        broker.start()
        found = asyncio.run(_mqtt_session(broker.port, len(keys)))
    finally:
        broker.stop()
    _check(found, "mqtt-kept", "mqtt-kept", etags)


async def test_mqtts_verifies_the_broker_unless_told(tmp_path: Path) -> None:
    """mqtts:// to a broker whose certificate nobody trusts: refused while verify-ssl holds,
    delivered (and read back over TLS) with verify-ssl=false."""
    broker = Mosquitto(tmp_path / "mqtts", tls=True).start()
    sender = MqttSender(Networks(), timeout=10.0)
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    try:
        topic = Topic("acct", "tls-events", "us-east-1", endpoint=broker.url)
        refused = await sender.send(topic, b'{"Records": []}')
        assert not refused.acknowledged
        assert refused.reason == "the MQTT broker's TLS certificate was not trusted"
        async with aiomqtt.Client("127.0.0.1", broker.port, tls_context=insecure) as client:
            await client.subscribe("tls-events", qos=1)
            told = replace(topic, verify_ssl=False)
            assert (await sender.send(told, b'{"Records": []}')).acknowledged
            message = await asyncio.wait_for(anext(aiter(client.messages)), WAIT)
            assert message.payload == b'{"Records": []}'
    finally:
        await sender.close()
        broker.stop()


# Redis


def _redis_read(url: str, key: str, count: int, stream: bool = False) -> list[bytes]:
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + WAIT
    found: list[bytes] = []
    while time.monotonic() < deadline:
        if stream:
            found = [fields[b"message"] for _, fields in client.xrange(key)]
        else:
            found = client.lrange(key, 0, -1)
        if len(found) >= count:
            break
        time.sleep(0.1)
    client.close()
    return found


def test_redis_list_and_stream(server: GatewayProcess, redis_server: Broker) -> None:
    _configure(server, "redis-list", "redis-list", f"{redis_server.url}/0")
    _configure(server, "redis-stream", "redis-stream", redis_server.url, **{"redis-type": "stream"})
    listed = _put(server, "redis-list", "a.txt", "b.txt")
    streamed = _put(server, "redis-stream", "c.txt")
    _check(_redis_read(redis_server.url, "redis-list", 2), "redis-list", "redis-list", listed)
    found = _redis_read(redis_server.url, "redis-stream", 1, stream=True)
    _check(found, "redis-stream", "redis-stream", streamed)


def test_the_test_event_goes_to_the_broker(server: GatewayProcess, redis_server: Broker) -> None:
    """PutBucketNotificationConfiguration sends AWS's s3:TestEvent to a broker topic as to a
    webhook, and refuses the configuration while the broker cannot take it."""
    s3, sns = _client(server, "s3"), _client(server, "sns")
    s3.create_bucket(Bucket="redis-tested")
    arn = sns.create_topic(Name="redis-tested", Attributes={"push-endpoint": redis_server.url})[
        "TopicArn"
    ]
    config = {
        "TopicConfigurations": [{"Id": "tested", "TopicArn": arn, "Events": ["s3:ObjectCreated:*"]}]
    }
    s3.put_bucket_notification_configuration(
        Bucket="redis-tested", NotificationConfiguration=config
    )
    [message] = _redis_read(redis_server.url, "redis-tested", 1)
    event = json.loads(message)
    assert event["Event"] == "s3:TestEvent" and event["Bucket"] == "redis-tested"
    redis_server.stop()
    try:
        config["TopicConfigurations"][0]["Id"] = "again"
        with pytest.raises(ClientError) as refused:
            s3.put_bucket_notification_configuration(
                Bucket="redis-tested", NotificationConfiguration=config
            )
        assert refused.value.response["Error"]["Code"] == "InvalidArgument"
        kept = s3.get_bucket_notification_configuration(Bucket="redis-tested")
        assert [c["Id"] for c in kept["TopicConfigurations"]] == ["tested"]
    finally:
        redis_server.start()


def test_redis_down_then_up(server: GatewayProcess, redis_server: Broker) -> None:
    _configure(server, "redis-kept", "redis-kept", redis_server.url)
    redis_server.stop()
    keys = [f"k{i}" for i in range(5)]
    etags = _put(server, "redis-kept", *keys)
    redis_server.start()
    found = _redis_read(redis_server.url, "redis-kept", len(keys))
    _check(found, "redis-kept", "redis-kept", etags)


# AMQP


async def _amqp_queue(url: str, queue: str, exchange: str = "") -> None:
    """A durable queue (bound to a topic exchange `exchange`, by the routing key `queue`)."""
    connection = await aio_pika.connect(url)
    channel = await connection.channel()
    declared = await channel.declare_queue(queue, durable=True)
    if exchange:
        found = await channel.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC, durable=True)
        await declared.bind(found, routing_key=queue)
    await connection.close()


async def _amqp_read(url: str, queue: str, count: int) -> list[bytes]:
    connection = await aio_pika.connect(url)
    channel = await connection.channel()
    found: list[bytes] = []
    declared = await channel.declare_queue(queue, durable=True)
    deadline = time.monotonic() + WAIT
    while len(found) < count and time.monotonic() < deadline:
        message = await declared.get(fail=False)
        if message is None:
            await asyncio.sleep(0.1)
            continue
        assert message.content_type == "application/json"
        found.append(message.body)
        await message.ack()
    await connection.close()
    return found


def test_amqp_records_arrive_through_the_exchange(server: GatewayProcess, rabbitmq: Broker) -> None:
    asyncio.run(_amqp_queue(rabbitmq.url, "amqp-events", exchange="s3gw"))
    _configure(
        server,
        "amqp-bucket",
        "amqp-events",
        rabbitmq.url,
        **{"amqp-exchange": "s3gw", "amqp-ack-level": "routable"},
    )
    etags = _put(server, "amqp-bucket", "a.txt", "b.txt")
    found = asyncio.run(_amqp_read(rabbitmq.url, "amqp-events", 2))
    _check(found, "amqp-bucket", "amqp-events", etags)


def test_amqp_down_then_up(server: GatewayProcess, rabbitmq: Broker) -> None:
    asyncio.run(_amqp_queue(rabbitmq.url, "amqp-kept"))  # durable: it outlives the restart
    _configure(server, "amqp-kept", "amqp-kept", rabbitmq.url)  # the default exchange
    rabbitmq.stop()
    keys = [f"k{i}" for i in range(5)]
    etags = _put(server, "amqp-kept", *keys)
    rabbitmq.start()
    found = asyncio.run(_amqp_read(rabbitmq.url, "amqp-kept", len(keys)))
    _check(found, "amqp-kept", "amqp-kept", etags)


# Secrets


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_a_password_in_the_endpoint_is_never_shown_nor_logged(tmp_path: Path) -> None:
    """Over HTTPS (a password is accepted only there): a Redis that requires one receives the
    records; GetTopicAttributes shows scheme, host and port; and neither the deliveries nor the
    failures while the server is down write the password to the gateway's log."""
    secret = "sekrit-4b1d"
    broker = Redis(tmp_path / "redis", password=secret).start()
    gateway = GatewayProcess(tmp_path / "data", {}, "--tls-self-signed").start()
    try:
        assert gateway.url.startswith("https://")
        sns = boto3.client(
            "sns",
            endpoint_url=gateway.url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
            verify=False,
            config=Config(retries={"max_attempts": 1}),
        )
        s3 = boto3.client(
            "s3",
            endpoint_url=gateway.url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
            verify=False,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )
        endpoint = f"redis://:{secret}@127.0.0.1:{broker.port}/0"
        arn = sns.create_topic(Name="secret", Attributes={"push-endpoint": endpoint})["TopicArn"]
        shown = sns.get_topic_attributes(TopicArn=arn)["Attributes"]["push-endpoint"]
        assert shown == f"redis://127.0.0.1:{broker.port}"
        s3.create_bucket(Bucket="secret")
        s3.put_bucket_notification_configuration(
            Bucket="secret",
            NotificationConfiguration={
                "TopicConfigurations": [
                    {"Id": "secret-c", "TopicArn": arn, "Events": ["s3:ObjectCreated:*"]}
                ]
            },
            SkipDestinationValidation=True,
        )
        etags = {"a.txt": s3.put_object(Bucket="secret", Key="a.txt", Body=b"a.txt")["ETag"]}
        url = f"redis://:{secret}@127.0.0.1:{broker.port}/0"
        _check(_redis_read(url, "secret", 1), "secret", "secret", etags)
        broker.stop()
        s3.put_object(Bucket="secret", Key="b.txt", Body=b"b.txt")
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and not any(arn in line for line in gateway.log):
            time.sleep(0.1)
        failure = [line for line in gateway.log if arn in line]
        assert failure and "tried again" in failure[0]
        broker.start()
        assert len(_redis_read(url, "secret", 1)) == 1  # b.txt's (the list began anew)
        # The worker's connection, kept across deliveries, is closed when the gateway stops:
        # only this test's own client is left.
        probe = redis.Redis.from_url(url)
        assert len(probe.client_list()) == 2
        gateway.stop()
        assert len(probe.client_list()) == 1
        probe.close()
    finally:
        gateway.stop()
        broker.stop()
    assert not [line for line in gateway.log if secret in line]


async def test_amqp_ack_levels(rabbitmq: Broker) -> None:
    """`routable`: a message no queue takes is returned, not acknowledged; an exchange that does
    not exist is not either (the broker closes the channel; the next delivery opens another);
    `none` and `broker` acknowledge what the broker was given."""
    await _amqp_queue(rabbitmq.url, "amqp-levels", exchange="levels")
    sender = AmqpSender(Networks(), timeout=10.0)

    def topic(name: str, **attributes: str) -> Topic:
        return Topic("acct", name, "us-east-1", rabbitmq.url, True, attributes)

    try:
        unroutable = await sender.send(
            topic("nobody", **{"amqp-exchange": "levels", "amqp-ack-level": "routable"}), b"{}"
        )
        assert not unroutable.acknowledged
        assert unroutable.reason.startswith("the AMQP broker refused the message")
        missing = await sender.send(topic("amqp-levels", **{"amqp-exchange": "none-such"}), b"{}")
        assert not missing.acknowledged
        for level in ("none", "broker", "routable"):
            chosen = topic("amqp-levels", **{"amqp-exchange": "levels", "amqp-ack-level": level})
            assert (await sender.send(chosen, level.encode())).acknowledged, level
    finally:
        await sender.close()
    found = await _amqp_read(rabbitmq.url, "amqp-levels", 3)
    assert found == [b"none", b"broker", b"routable"]
