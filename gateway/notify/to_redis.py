"""The Redis sender (extra `redis`, redis.asyncio): `redis://[[USER]:PASSWORD@]HOST[:6379][/DB]`
or `rediss://` (TLS, verified unless `verify-ssl=false`). The key is the topic's name; the topic's
attribute `redis-type` says what it is: `list` (the default: RPUSH of the JSON message, a
consumer BLPOPs) or `stream` (XADD with one field, `message`, the JSON). Acknowledged by the
command's reply."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from .brokers import BrokerSender
from .topics import Topic


class RedisSender(BrokerSender[aioredis.Redis]):
    broker = "the Redis server"

    async def connect(self, topic: Topic) -> aioredis.Redis:
        parts = urlsplit(topic.endpoint)
        extra = {} if parts.scheme != "rediss" or topic.verify_ssl else {"ssl_cert_reqs": "none"}
        client = aioredis.Redis.from_url(
            urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")),
            # One connection, never retried nor reopened by the client on its own: a failure
            # drops it, and the next delivery opens one checked against --notify-networks.
            single_connection_client=True,
            retry=Retry(NoBackoff(), 0),
            socket_connect_timeout=self.timeout,
            socket_timeout=self.timeout,
            **extra,
        )
        try:
            await client.ping()
        except BaseException:
            await client.aclose()  # a client that never connected is closed all the same
            raise
        return client

    async def publish(self, connection: aioredis.Redis, topic: Topic, body: bytes) -> None:
        if topic.attributes.get("redis-type", "list") == "stream":
            await connection.xadd(topic.name, {"message": body})
        else:
            await connection.rpush(topic.name, body)

    async def disconnect(self, connection: aioredis.Redis) -> None:
        await connection.aclose()
