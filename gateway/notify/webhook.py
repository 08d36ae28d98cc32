"""The webhook sender: a topic whose push-endpoint is `http://` or `https://` receives each message
as a POST of its JSON, on aiohttp's client. TLS is verified unless the topic says
`verify-ssl=false`; no redirect is followed and no proxy from the environment is used (either
would take the request somewhere --notify-networks did not judge); every address a name
resolves to is checked against --notify-networks at each connection (an address literal, which
aiohttp does not resolve, before it). A 2xx answer acknowledges the message.

The endpoint is never logged: a failure names the topic's ARN and the reason only."""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from .delivery import Delivery
from .networks import Networks, OutsideNetworks, literal
from .topics import Topic

__all__ = ["BoundResolver", "Delivery", "WebhookSender"]

TIMEOUT = 10.0  # seconds for one delivery, connection included


class BoundResolver(AbstractResolver):
    """aiohttp's resolver, refusing a name any of whose addresses is outside the bound (all of
    them, not only the one tried first: a later retry would try the next)."""

    def __init__(self, networks: Networks) -> None:
        self.networks = networks
        self.inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self.inner.resolve(host, port, family)
        self.networks.check(host, [r["host"] for r in found])
        return found

    async def close(self) -> None:
        await self.inner.close()


class WebhookSender:
    """One client session for many deliveries (the connection pool is per session)."""

    def __init__(self, networks: Networks, timeout: float = TIMEOUT) -> None:
        self.networks = networks
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> WebhookSender:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(resolver=BoundResolver(self.networks)),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                trust_env=False,
            )
        return self._session

    async def send(self, topic: Topic, body: bytes) -> Delivery:
        host = urlsplit(topic.endpoint).hostname or ""
        try:
            address = literal(host)
            if address is not None:
                self.networks.check(host, [address])
            async with self._client().post(
                topic.endpoint,
                data=body,
                headers={"Content-Type": "application/json"},
                ssl=None if topic.verify_ssl else False,
                allow_redirects=False,
            ) as response:
                await response.read()
                if 200 <= response.status < 300:
                    return Delivery(True)
                return Delivery(False, f"the endpoint answered {response.status}")
        except OutsideNetworks as exc:
            return Delivery(False, str(exc))
        except TimeoutError:
            return Delivery(False, "the endpoint did not answer in time")
        except aiohttp.ClientConnectorCertificateError:
            return Delivery(False, "the endpoint's TLS certificate was not trusted")
        except aiohttp.ClientConnectorError as exc:
            # Its message names the host and port (not the endpoint's user, path or query).
            return Delivery(False, f"cannot connect: {exc.strerror or type(exc).__name__}")
        except aiohttp.ClientError as exc:
            return Delivery(False, f"the request failed: {type(exc).__name__}")
