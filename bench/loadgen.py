"""The benchmarks' load generator: S3 requests over kept-alive connections, at little CPU cost.

A closed loop: each of N connections sends one request, waits for its response and sends the
next, until the time is up. Each request's bytes (request line, headers signed by botocore's
SigV4 signer over UNSIGNED-PAYLOAD, body) are built once and sent again and again: a signature
stays valid while its x-amz-date is within the 15 minutes of clock skew S3 allows, so a built
request is reused for `SIGNATURE_REUSE_S` and then signed again. Responses are parsed only as
far as framing needs (status line, Content-Length or chunked, Connection: close); a server
that closes the connection gets a new one. Every status is checked: what is not 2xx, a body of
the wrong length and a lost connection are counted as errors, never as operations.

The aiohttp client and botocore's signer per request cost 80-135 us of CPU per request, a large
share of a 2-core machine; this costs about a fifth of that (`python -m bench s3` measures and
prints it against a trivial server). `Client` is the same idea for one request at a time
(http.client, 1 MiB sends), for large bodies and for latencies.

botocore comes with the test extra, not with the gateway: it is imported when a `Signer` is
made.
"""

from __future__ import annotations

import asyncio
import http.client
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tests.process import ACCESS_KEY, SECRET_KEY

KIB = 1024
MIB = 1024 * KIB
# Well inside the 15 minutes of skew S3 allows: a request built this long ago is signed again.
SIGNATURE_REUSE_S = 300.0
CONNECT_TIMEOUT_S = 5.0
# A response still missing this long after the run's end is counted as an error ("timeout"):
# a stalled server ends the run instead of hanging it.
RESPONSE_TIMEOUT_S = 30.0


class Signer:
    """SigV4 headers by botocore's signer over UNSIGNED-PAYLOAD, for one endpoint."""

    def __init__(
        self,
        endpoint: str,
        access_key: str = ACCESS_KEY,
        secret_key: str = SECRET_KEY,
        region: str = "us-east-1",
    ) -> None:
        from botocore.auth import S3SigV4Auth
        from botocore.credentials import Credentials

        class UnsignedPayload(S3SigV4Auth):
            def payload(self, request: Any) -> str:
                return "UNSIGNED-PAYLOAD"

        parts = urlsplit(endpoint)
        self.endpoint = endpoint.rstrip("/")
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.netloc = parts.netloc
        self.auth = UnsignedPayload(Credentials(access_key, secret_key), "s3", region)

    def headers(
        self, method: str, target: str, headers: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """Every header of a request to `target` (path and query), Host and signature included."""
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method=method, url=self.endpoint + target, headers=dict(headers or {}))
        self.auth.add_auth(request)
        return {"Host": self.netloc, **dict(request.headers.items())}

    def request(
        self,
        method: str,
        target: str,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> bytes:
        """The request's bytes as sent on the wire: ready to be written again and again."""
        signed = self.headers(method, target, headers)
        lines = [f"{method} {target} HTTP/1.1"]
        lines += [f"{name}: {value}" for name, value in signed.items()]
        if body or method in ("PUT", "POST"):
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


# --- the closed loop ------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """What a run did: operations (2xx responses), their latencies, errors by kind, client CPU."""

    seconds: float
    latencies: Sequence[float]  # sorted, seconds, successful requests only
    errors: Mapping[str, int]  # "503": 12, "connection": 1, "body length": 3
    client_cpu_s: float
    reconnects: int = 0  # connections the server closed (Connection: close, or dropped)

    @property
    def ops(self) -> int:
        return len(self.latencies)

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    def percentile_ms(self, fraction: float) -> float:
        count = len(self.latencies)
        return self.latencies[min(count - 1, int(count * fraction))] * 1e3 if count else 0.0

    @property
    def client_cpu_us_per_op(self) -> float:
        requests = self.ops + self.error_count
        return self.client_cpu_s / requests * 1e6 if requests else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "ops": self.ops,
            "seconds": self.seconds,
            "ops_per_s": self.ops_per_s,
            "p50_ms": self.percentile_ms(0.50),
            "p99_ms": self.percentile_ms(0.99),
            "errors": dict(self.errors),
            "client_cpu_us_per_op": self.client_cpu_us_per_op,
            "reconnects": self.reconnects,
        }


@dataclass
class _Run:
    expect_length: int | None
    deadline: float = float("inf")
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    active: int = 0
    reconnects: int = 0
    tasks: set[asyncio.Future[Any]] = field(default_factory=set)
    live: set[_Connection] = field(default_factory=set)
    finished: asyncio.Future[None] | None = None

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def abandon(self) -> None:
        """Give up on what is still waiting: each request in flight is a "timeout" error."""
        for task in self.tasks:
            task.cancel()
        for connection in list(self.live):
            if connection.in_flight:
                self.error("timeout")
            connection.stopped = True
            if connection.transport is not None:
                connection.transport.close()

    def connection_done(self) -> None:
        self.active -= 1
        if self.active == 0 and self.finished is not None and not self.finished.done():
            self.finished.set_result(None)


_HEAD, _LENGTH, _CHUNKED, _UNTIL_CLOSE = range(4)


class _Connection(asyncio.Protocol):
    """One kept-alive connection sending its requests in turn, one at a time."""

    def __init__(
        self,
        run: _Run,
        address: tuple[str, int],
        requests: Sequence[bytes],
        first: int,
        remaining: float,
    ) -> None:
        self.run = run
        self.address = address
        self.requests = requests
        self.next = first
        self.remaining = remaining  # requests still to send (inf: until the deadline)
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.state = _HEAD
        self.in_flight = False
        self.sent_at = 0.0
        self.status = 0
        self.need = 0  # body bytes still expected (_LENGTH)
        self.body_length = 0
        self.close_after = False
        self.stopped = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.run.live.add(self)

    def send(self) -> None:
        if self.remaining <= 0 or time.perf_counter() >= self.run.deadline:
            self.stop()
            return
        self.remaining -= 1
        request = self.requests[self.next]
        self.next = (self.next + 1) % len(self.requests)
        self.state = _HEAD
        self.in_flight = True
        self.sent_at = time.perf_counter()
        assert self.transport is not None
        self.transport.write(request)

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.run.live.discard(self)
            if self.transport is not None:
                self.transport.close()
            self.run.connection_done()

    def data_received(self, data: bytes) -> None:
        if not self.in_flight:  # nothing asked: what a closing connection still sends
            return
        if self.buffer:
            data, self.buffer = self.buffer + data, b""
        if self.state == _HEAD:
            end = data.find(b"\r\n\r\n")
            if end < 0:
                self.buffer = data
                return
            self._head(data[:end])
            data = data[end + 4 :]
            if self.state == _HEAD:  # no body
                self._complete()
                return
        if self.state == _LENGTH:
            self.need -= len(data)
            self.body_length += len(data)
            if self.need <= 0:
                self._complete()
        elif self.state == _CHUNKED:
            self.buffer = data
            length = _chunked_length(data)
            if length is not None:
                self.buffer = b""
                self.body_length = length
                self._complete()
        else:  # _UNTIL_CLOSE
            self.body_length += len(data)

    def _head(self, head: bytes) -> None:
        lower = head.lower()
        try:
            self.status = int(head[9:12])
        except ValueError:
            self.status = 0
        self.close_after = b"\r\nconnection: close" in lower or (
            head.startswith(b"HTTP/1.0") and b"\r\nconnection: keep-alive" not in lower
        )
        self.body_length = 0
        start = lower.find(b"\r\ncontent-length:")
        if self.status in (204, 304) or 100 <= self.status < 200:
            self.state = _HEAD
        elif start >= 0:
            end = lower.find(b"\r\n", start + 2)
            self.need = int(lower[start + 17 : end if end >= 0 else None])
            self.state = _LENGTH if self.need > 0 else _HEAD
        elif b"\r\ntransfer-encoding: chunked" in lower:
            self.state = _CHUNKED
        else:
            self.state = _UNTIL_CLOSE
            self.close_after = True

    def _complete(self) -> None:
        now = time.perf_counter()
        self.in_flight = False
        self.state = _HEAD
        run = self.run
        if not 200 <= self.status < 300:
            run.error(str(self.status))
        elif run.expect_length is not None and self.body_length != run.expect_length:
            run.error("body length")
        else:
            run.latencies.append(now - self.sent_at)
        if self.remaining <= 0 or now >= run.deadline:
            self.stop()
        elif self.close_after:
            self._reconnect()
        else:
            self.send()

    def _reconnect(self) -> None:
        # This object is done; a new connection takes its place (and its share of `active`).
        self.stopped = True
        self.run.live.discard(self)
        self.run.reconnects += 1
        if self.transport is not None:
            self.transport.close()
        task = asyncio.ensure_future(
            _connect(
                self.run, self.address, self.requests, self.next, self.remaining, reconnect=True
            )
        )
        self.run.tasks.add(task)
        task.add_done_callback(self.run.tasks.discard)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.stopped:
            return
        if self.in_flight and self.state == _UNTIL_CLOSE:  # the body ends with the connection
            self.close_after = True
            self._complete()
            return
        if self.in_flight:
            self.run.error("connection")
            self.in_flight = False
        if time.perf_counter() >= self.run.deadline or self.remaining <= 0:
            self.stop()
        else:
            self._reconnect()


def _chunked_length(data: bytes) -> int | None:
    """The length of a complete chunked body at the start of `data`; None while incomplete."""
    pos = length = 0
    while True:
        end = data.find(b"\r\n", pos)
        if end < 0:
            return None
        size = int(data[pos:end].split(b";")[0], 16)
        if size == 0:  # the last chunk, then trailers up to an empty line
            return length if data.find(b"\r\n\r\n", end) >= 0 else None
        pos = end + 2 + size + 2
        if pos > len(data):
            return None
        length += size


async def _connect(
    run: _Run,
    address: tuple[str, int],
    requests: Sequence[bytes],
    first: int,
    remaining: float,
    reconnect: bool = False,
) -> _Connection | None:
    """A new connection (a reconnection sends its next request at once); None once the run is
    over or the server has refused connections for CONNECT_TIMEOUT_S."""
    loop = asyncio.get_running_loop()
    give_up = time.perf_counter() + CONNECT_TIMEOUT_S
    while True:
        try:
            _, connection = await loop.create_connection(
                lambda: _Connection(run, address, requests, first, remaining), *address
            )
        except OSError:
            now = time.perf_counter()
            if now < run.deadline and now < give_up:
                await asyncio.sleep(0.05)
                continue
            run.error("connect")
            if reconnect:
                run.connection_done()
            return None
        if reconnect:
            connection.send()
        return connection


async def _run(
    addresses: Sequence[tuple[str, int]],
    connections: Sequence[Sequence[bytes]],
    seconds: float | None,
    expect_length: int | None,
) -> Result:
    run = _Run(expect_length)
    if not connections:
        return Result(0.0, [], {}, 0.0)
    run.finished = asyncio.get_running_loop().create_future()
    opened = []
    for i, requests in enumerate(connections):  # every one is open before the clock starts
        remaining = float("inf") if seconds is not None else len(requests)
        host, port = address = addresses[i % len(addresses)]
        connection = await _connect(run, address, requests, 0, remaining)
        if connection is None:
            raise ConnectionError(f"cannot connect to {host}:{port}")
        opened.append(connection)
    run.active = len(opened)
    cpu = time.process_time()
    start = time.perf_counter()
    run.deadline = start + seconds if seconds is not None else float("inf")
    for connection in opened:
        connection.send()
    # A run of each request once has no deadline: it gets a generous one for the whole batch.
    limit = seconds + RESPONSE_TIMEOUT_S if seconds is not None else 4 * RESPONSE_TIMEOUT_S
    try:
        await asyncio.wait_for(asyncio.shield(run.finished), limit)
    except TimeoutError:
        run.abandon()
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    run.latencies.sort()
    return Result(elapsed, run.latencies, run.errors, cpu, run.reconnects)


def run(
    endpoint: str | Sequence[str],
    connections: Sequence[Sequence[bytes]],
    seconds: float | None,
    expect_length: int | None = None,
) -> Result:
    """Send each connection's requests in turn (cycling) for `seconds`, or each once (None).

    `endpoint`: one URL, or the URLs of several nodes of one cluster, which the connections
    take in turn (a request signed for one node's Host is valid on any node).
    `expect_length`: the body length every 2xx response must have (GETs)."""
    urls = [endpoint] if isinstance(endpoint, str) else endpoint
    addresses = [(u.hostname or "127.0.0.1", u.port or 80) for u in map(urlsplit, urls)]
    return asyncio.run(_run(addresses, connections, seconds, expect_length))


# --- small-object workloads -------------------------------------------------------------------


def small_key(connection: int, n: int) -> str:
    return f"small-{connection:03d}-{n:03d}"


def put_requests(
    signer: Signer, bucket: str, concurrency: int, keys_per_connection: int, body: bytes
) -> list[list[bytes]]:
    """PUTs of `body`, each connection over keys of its own (overwritten in turn: a steady
    state, and the bucket does not grow with the run's length)."""
    return [
        [
            signer.request("PUT", f"/{bucket}/{small_key(c, n)}", body)
            for n in range(keys_per_connection)
        ]
        for c in range(concurrency)
    ]


def get_requests(
    signer: Signer, bucket: str, keys: Iterable[str], concurrency: int
) -> list[list[bytes]]:
    """GETs of `keys`, each connection starting at a different key; one signature per key."""
    built = [signer.request("GET", f"/{bucket}/{key}") for key in keys]
    return [built[c % len(built) :] + built[: c % len(built)] for c in range(concurrency)]


# --- one request at a time --------------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]  # names in lower case
    body: bytes  # empty when the body was counted, not kept
    body_length: int
    seconds: float  # from the first byte sent to the last byte received (signing excluded)


class Client:
    """One kept-alive http.client connection with SigV4 (UNSIGNED-PAYLOAD) requests; large
    bodies are sent as one buffer repeated (1 MiB sends) and received into one reused buffer,
    so that its CPU is spent on the socket."""

    def __init__(self, signer: Signer, timeout: float = 600) -> None:
        self.signer = signer
        self.conn = http.client.HTTPConnection(signer.host, signer.port, timeout=timeout)
        self.sink = memoryview(bytearray(MIB))

    def request(
        self,
        method: str,
        target: str,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        repeat: int = 1,
        keep_body: bool = True,
    ) -> Response:
        """`body` is sent `repeat` times (Content-Length: len(body) * repeat)."""
        signed = self.signer.headers(method, target, headers)
        length = len(body) * repeat
        start = time.perf_counter()
        self.conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for name, value in signed.items():
            self.conn.putheader(name, value)
        if length or method in ("PUT", "POST"):
            self.conn.putheader("Content-Length", str(length))
        self.conn.endheaders()
        for _ in range(repeat if body else 0):
            self.conn.send(body)
        response = self.conn.getresponse()
        kept = b""
        received = 0
        if keep_body:
            kept = response.read()
            received = len(kept)
        else:
            while n := response.readinto(self.sink):
                received += n
        seconds = time.perf_counter() - start
        if response.will_close:
            self.conn.close()  # http.client reconnects on the next request
        headers = {name.lower(): value for name, value in response.getheaders()}
        return Response(response.status, headers, kept, received, seconds)

    def close(self) -> None:
        self.conn.close()
