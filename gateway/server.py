"""Serving: one process, or a parent and N worker processes sharing one listening socket.

Python runs one thread of Python at a time, so both cores need two processes. The parent binds
the port and listens once (a port another gateway holds is refused here, whatever the worker
counts), holds the data folder, sweeps what a crash left, then forks the workers before any
thread exists (a fork copies only the calling thread); each worker inherits the listening
socket and accepts from it, and the kernel hands each connection to one of them. They share the
SQLite catalog, which takes one writer at a time (the workers' writers take turns:
catalog.CatalogWriter), and the blob files, which are immutable. The parent restarts a worker
that dies, and on SIGTERM or SIGINT tells them all to stop gracefully.

A graceful stop: first a drain of --drain-seconds, in which /health/ready answers 503 and
everything else is served as before, so that a load balancer checking it stops sending requests
here while the port still accepts them; then no new connections; requests in flight (an upload
whose body is still coming, a download) get --shutdown-timeout seconds to finish, their
connections closed after the answer; then whatever is left is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import errno
import gc
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import ssl
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from aiohttp import web

from . import digest, logs, metrics, tiers, tls
from .app import (
    LOG_OBSERVER,
    OBJECT_READS,
    PRINCIPALS,
    RENDERER,
    STORE,
    alone,
    build_app,
    describe,
    sweep,
)
from .config import Settings, StartError, setting_name
from .console import build_console, missing_file
from .keyring import read_kms_keys
from .replication.remotes import read_remotes
from .s3.protocol import S3AppRunner  # S3's XML answers to what the HTTP parser refuses
from .store import StoreError
from .store.blobs import FolderLock
from .users import main_user, read_users_file
from .website import build_website

log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_BACKLOG = 128


def serve(settings: Settings) -> None:
    """Check everything a start needs, each failure one StartError, before anything is
    logged; then serve until SIGTERM or SIGINT."""
    _loop_factory(settings.loop)
    digest.configure(settings.md5_backend)  # DigestError: an ETag this host cannot compute
    if settings.users is not None:
        read_users_file(settings.users)
    if settings.kms_keys is not None:
        read_kms_keys(settings.kms_keys, settings.region)
    if settings.replication_remotes is not None:
        read_remotes(settings.replication_remotes)
    if settings.access_key or settings.secret_key:
        main_user(settings, create=False)  # both or neither, and usable keys
    _tls_files(settings)
    _console_files(settings)
    tiers.check_moved(settings)
    listeners = _listen(settings)
    try:
        settings = replace(settings, port=listeners[0].getsockname()[1])
        if settings.console is not None:
            # The console's sockets travel with S3's (to every worker), told apart by port.
            console = _listen(settings, settings.console, "console-address")
            listeners += console
            settings = replace(settings, console=(settings.console[0], console[0].getsockname()[1]))
        if settings.website is not None:
            # So do the website endpoint's.
            website = _listen(settings, settings.website, "website-address")
            listeners += website
            settings = replace(settings, website=(settings.website[0], website[0].getsockname()[1]))
        _prepare_data(settings.data)
        _, _, generated = main_user(settings, create=True)
        context, cert = _tls(settings)
        banner = _banner_lines(settings, context, cert, generated)
        if settings.workers <= 1:
            _run(settings, _serve_one(settings, listeners, context, banner))
        else:
            _serve_workers(settings, listeners, context, banner)
    finally:
        for sock in listeners:
            sock.close()


def _loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop (the default: about 12 % less CPU per small PUT than asyncio's, and large
    GETs go by sendfile on either, gateway/s3/sendfile.py), or asyncio's (None)."""
    if name == "asyncio":
        return None
    if name != "uvloop":
        raise StartError(f"--loop must be asyncio or uvloop, not {name!r}")
    try:
        import uvloop
    except ImportError:
        raise StartError(
            "--loop uvloop: uvloop is not installed (pip install uvloop, or --loop asyncio)"
        ) from None
    return uvloop.new_event_loop


def _run(settings: Settings, main: Coroutine[Any, Any, None]) -> None:
    with asyncio.Runner(loop_factory=_loop_factory(settings.loop)) as runner:
        runner.run(main)


# --- checks before the start -----------------------------------------------------------------


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _listen(
    settings: Settings, where: tuple[str, int] | None = None, flag: str = "address"
) -> list[socket.socket]:
    """Bind and listen on every address the host names (`where`, by default the S3 address),
    once for the whole gateway. No SO_REUSEPORT: a second gateway on this port must fail, not
    take part of its connections. Port 0 resolves once, on the first address; the others take
    the same port."""
    host, port = where or (settings.host, settings.port)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise StartError(
            f"{setting_name(flag)}: cannot resolve host {host!r}: "
            f"{getattr(exc, 'strerror', None) or exc}"
        ) from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(found):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT only
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            where = _host_port(address[0], port)
            try:
                sock.bind((address[0], port, *address[2:]))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    named = "" if flag == "address" else f" ({setting_name(flag)})"
                    raise StartError(f"address {where} is in use{named}") from None
                raise StartError(
                    f"cannot listen on {where} ({setting_name(flag)}): {exc.strerror or exc}"
                ) from None
            port = sock.getsockname()[1]
            sock.listen(_BACKLOG)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _prepare_data(data: Path) -> None:
    """The data folder exists (made 0700 by the umask) and this user can write in it."""
    name = setting_name("data")
    try:
        data.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise StartError(f"the data folder {data} ({name}) is not a folder") from None
    except OSError as exc:
        raise StartError(
            f"cannot create the data folder {data} ({name}): {exc.strerror or exc}"
        ) from None
    if not data.is_dir():
        raise StartError(f"the data folder {data} ({name}) is not a folder")
    blocked = _unwritable(data)
    if blocked is None:
        return
    path, reason = blocked
    uid, gid = os.geteuid(), os.getegid()
    with contextlib.suppress(OSError):
        owner = path.stat().st_uid
        if owner != uid:
            # A bind mount made by another user (or root) is the usual cause.
            raise StartError(
                f"the data folder {data} ({name}) is not writable: {path} belongs to uid "
                f"{owner}, the gateway runs as uid {uid}; chown -R {uid}:{gid} {data.resolve()}"
            )
    raise StartError(f"the data folder {data} ({name}) is not writable: {path}: {reason}")


def _unwritable(data: Path) -> tuple[Path, str] | None:
    """The first thing in the data folder this process cannot write, and why; or None."""
    try:
        fd, probe = tempfile.mkstemp(dir=data, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return data, exc.strerror or str(exc)
    try:
        entries = list(os.scandir(data))
    except OSError as exc:
        return data, exc.strerror or str(exc)
    for entry in entries:
        mode = os.R_OK | os.W_OK | (os.X_OK if entry.is_dir(follow_symlinks=False) else 0)
        if not os.access(entry.path, mode):
            return Path(entry.path), "permission denied"
    return None


def _tls_files(settings: Settings) -> None:
    """Given certificate files exist and are readable (checked before the port is taken)."""
    if settings.tls_self_signed:
        return
    if bool(settings.tls_cert) != bool(settings.tls_key):
        raise StartError(
            f"{setting_name('tls-cert')} and {setting_name('tls-key')} go together: set both"
        )
    for flag, path in (("tls-cert", settings.tls_cert), ("tls-key", settings.tls_key)):
        if path is None:
            continue
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise StartError(
                f"{setting_name(flag)}: cannot read {path}: {exc.strerror or exc}"
            ) from None


def _console_files(settings: Settings) -> None:
    """The console's static files are installed (checked before the port is taken: without
    them aiohttp refuses the console's routes in every worker, naming only a folder)."""
    if settings.console is None:
        return
    missing = missing_file()
    if missing is not None:
        raise StartError(
            f"{setting_name('console-address')}: the console's file {missing} is not "
            "installed (reinstall s3gw from a wheel that has its package data), or unset "
            "the setting to serve without a console"
        )


def _tls(settings: Settings) -> tuple[ssl.SSLContext | None, Path | None]:
    if settings.tls_self_signed:
        cert, key = tls.self_signed(settings.data, settings.domain)
    elif settings.tls_cert and settings.tls_key:
        cert, key = settings.tls_cert, settings.tls_key
    else:
        return None, None
    try:
        return tls.server_context(cert, key), cert
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise StartError(
            f"{setting_name('tls-cert')} {cert} and {setting_name('tls-key')} {key}: not a PEM "
            f"certificate and its private key ({getattr(exc, 'reason', None) or exc})"
        ) from None


@contextlib.contextmanager
def _opening(data: Path) -> Iterator[None]:
    """A data folder the checks passed but that cannot be opened (a damaged catalog, a file
    deep inside that is not ours) is still a start-up error: one line, no traceback."""
    try:
        yield
    except (OSError, StoreError) as exc:
        raise StartError(
            f"cannot open the data folder {data} ({setting_name('data')}): {exc}"
        ) from None


# --- serving ---------------------------------------------------------------------------------


def _banner_lines(
    settings: Settings, context: ssl.SSLContext | None, cert: Path | None, generated: bool
) -> list[str]:
    # For the person (or test) that started us: printed whatever the log level, "listening
    # on" last, so that whoever waits for it has seen the rest.
    scheme = "https" if context else "http"
    lines = describe(settings, f"{scheme}://{_host_port(settings.host, settings.port)}", generated)
    if cert is not None:
        lines.insert(0, f"TLS certificate: {cert} (trust it with AWS_CA_BUNDLE={cert})")
    if settings.console is not None:
        lines.insert(-1, f"console on {scheme}://{_host_port(*settings.console)}")
    if settings.website is not None:
        lines.insert(-1, f"website endpoint on {scheme}://{_host_port(*settings.website)}")
    return lines


def _print_banner(lines: list[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr, flush=True)


class InFlight:
    """The requests a process is answering, so that a graceful stop can wait for them; while
    draining, the readiness probe says 503; once stopping, every answer closes its connection."""

    def __init__(self) -> None:
        self.count = 0
        self.draining = False
        self.stopping = False

    @web.middleware
    async def readiness(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        # The probe is an unsigned GET /health/ready (app.py: a signed one is S3's, for a
        # bucket called "health"); S3 requests go on being answered.
        if (
            self.draining
            and request.path == "/health/ready"
            and request.method in ("GET", "HEAD")
            and "authorization" not in request.headers
            and not {"X-Amz-Credential", "AWSAccessKeyId"} & request.query.keys()
        ):
            return web.json_response({"status": "draining"}, status=503)
        return await handler(request)

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        self.count += 1
        try:
            return await handler(request)
        finally:
            self.count -= 1

    async def on_response_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        if self.stopping:
            response.force_close()
            response.headers["Connection"] = "close"


async def _start(
    settings: Settings,
    app: web.Application,
    listeners: list[socket.socket],
    context: ssl.SSLContext | None,
) -> tuple[web.AppRunner, InFlight]:
    inflight = InFlight()
    app.middlewares.append(inflight.middleware)
    app.middlewares.append(inflight.readiness)
    app.on_response_prepare.append(inflight.on_response_prepare)
    console = [s for s in listeners if _is_console(settings, s)]
    website = [s for s in listeners if _is_website(settings, s)]
    listeners = [s for s in listeners if s not in console and s not in website]
    if console:
        try:
            console_app = build_console(app[STORE], settings, app[RENDERER], app[PRINCIPALS])
        except (OSError, ValueError) as exc:  # its files, its key in the data folder
            raise StartError(
                f"{setting_name('console-address')}: the console cannot start: {exc}"
            ) from None
        await _serve_beside(app, console_app, console, settings, context, inflight)
    if website:
        website_app = build_website(app[STORE], settings, app[OBJECT_READS], app[LOG_OBSERVER])
        await _serve_beside(app, website_app, website, settings, context, inflight)
    # lingering_time: after an answer sent before the body was read, aiohttp reads what the
    # client still sends for this long before closing; its 10 s default holds sockets (and a
    # graceful stop) for nothing. shutdown_timeout: what aiohttp's own shutdown grants a
    # request still running after our grace period (ceil_timeout takes 0 as "no limit").
    # auto_decompress: S3 stores a body as it was sent, whatever its Content-Encoding (kept
    # as metadata, returned on GET); aiohttp would inflate a gzip body before the payload
    # hash, Content-Length and Content-MD5 checks saw it (test_content_encoding.py).
    runner = S3AppRunner(
        app,
        access_log=None,
        auto_decompress=False,
        handle_signals=False,
        lingering_time=2.0,
        shutdown_timeout=0.1,
        max_line_size=settings.max_header_size,
        max_field_size=settings.max_header_size,
        keepalive_timeout=settings.idle_timeout,
    )
    await runner.setup()
    for sock in listeners:
        await web.SockSite(runner, sock, ssl_context=context, backlog=_BACKLOG).start()
    # What start-up made (modules, the application, the store) lives as long as the process:
    # moved out of the cyclic collector's sight, so that its full collections, which came
    # every few thousand requests, no longer walk it (a 4 KiB PUT's p99 at 64 connections
    # 44-58 ms -> 20-35 ms, docs/performance.md).
    gc.collect()
    gc.freeze()
    return runner, inflight


async def _serve_beside(
    app: web.Application,
    beside: web.Application,
    sockets: list[socket.socket],
    settings: Settings,
    context: ssl.SSLContext | None,
    inflight: InFlight,
) -> None:
    """An application on a port of its own in this process (the console, the website
    endpoint). Its requests count as in flight too: a graceful stop waits for them.
    auto_decompress off, as for S3: a body is what was sent."""
    beside.middlewares.append(inflight.middleware)
    beside.on_response_prepare.append(inflight.on_response_prepare)
    runner = web.AppRunner(
        beside,
        access_log=None,
        auto_decompress=False,
        handle_signals=False,
        shutdown_timeout=0.1,
        keepalive_timeout=settings.idle_timeout,
    )
    await runner.setup()
    for sock in sockets:
        await web.SockSite(runner, sock, ssl_context=context, backlog=_BACKLOG).start()

    async def stop(app: web.Application) -> None:
        await runner.cleanup()

    app.on_cleanup.insert(0, stop)  # before the store it uses is closed


def _is_website(settings: Settings, sock: socket.socket) -> bool:
    return settings.website is not None and sock.getsockname()[1] == settings.website[1]


def _is_console(settings: Settings, sock: socket.socket) -> bool:
    return settings.console is not None and sock.getsockname()[1] == settings.console[1]


class _Signals:
    """SIGTERM or SIGINT: stop gracefully; a second one: stop now."""

    def __init__(self) -> None:
        self.stop = asyncio.Event()
        self.hurry = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._received)

    def _received(self) -> None:
        (self.hurry if self.stop.is_set() else self.stop).set()


async def _not_ready(inflight: InFlight, signals: _Signals, seconds: float) -> None:
    """The drain before the stop: /health/ready answers 503 for `seconds` (a second signal
    ends it) while the port still accepts and every other request is served, so that a load
    balancer's checks take this process out before its port closes under them."""
    if seconds <= 0 or signals.hurry.is_set():
        return
    inflight.draining = True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(signals.hurry.wait(), seconds)


async def _drain(runner: web.AppRunner, inflight: InFlight, signals: _Signals, grace: float) -> int:
    """Stop accepting, give requests in flight `grace` seconds, then close every connection.
    Returns how many requests were cut off.

    aiohttp's own cleanup marks every connection closing at once, and a closing connection
    drops the body bytes still arriving: an upload in flight would end in RequestTimeout.
    So connections stay as they are until their requests are answered."""
    inflight.stopping = True
    for site in list(runner.sites):
        await site.stop()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while inflight.count and loop.time() < deadline and not signals.hurry.is_set():
        await asyncio.sleep(0.05)
    cut = inflight.count
    await runner.cleanup()
    return cut


async def _serve_one(
    settings: Settings,
    listeners: list[socket.socket],
    context: ssl.SSLContext | None,
    banner: list[str],
) -> None:
    with _opening(settings.data):
        if alone(settings):
            app = build_app(settings)
            tmp, orphans = await app[STORE].start()
            if tmp or orphans:
                log.info("start-up sweep removed %d tmp files and %d orphan blobs", tmp, orphans)
        else:
            app = build_app(settings, worker=True)
            await app[STORE].check_folder()
        # IAM secrets of an older folder moved under the keyring's IAM key, so that a
        # rotation of the master key keeps them (once: the workers after the first find none).
        await app[PRINCIPALS].reseal()
    runner, inflight = await _start(settings, app, listeners, context)
    signals = _Signals()
    _print_banner(banner)
    try:
        await signals.stop.wait()
    except BaseException:
        await runner.cleanup()
        raise
    started = time.monotonic()
    if settings.drain_seconds > 0:
        log.info(
            "draining for %g s: /health/ready answers 503, requests are still served",
            settings.drain_seconds,
        )
    await _not_ready(inflight, signals, settings.drain_seconds)
    log.info(
        "shutting down: no new connections; %d requests in flight get up to %g s",
        inflight.count,
        settings.shutdown_timeout,
    )
    cut = await _drain(runner, inflight, signals, settings.shutdown_timeout)
    log.info("shut down in %.1f s; %d requests cut off", time.monotonic() - started, cut)


# --- several workers -------------------------------------------------------------------------


async def _work(
    settings: Settings,
    listeners: list[socket.socket],
    context: ssl.SSLContext | None,
    ready: Connection,
) -> None:
    try:
        with _opening(settings.data):
            app = build_app(settings, worker=True)
            await app[STORE].check_folder()  # its parent may not have swept (another node's)
        runner, inflight = await _start(settings, app, listeners, context)
        signals = _Signals()
    except Exception as exc:
        # The parent reports it (one line) and stops; the traceback is for debugging.
        log.debug("worker %d did not start", os.getpid(), exc_info=True)
        ready.send(str(exc) or type(exc).__name__)
        ready.close()
        return
    ready.send(os.getpid())
    ready.close()
    try:
        await signals.stop.wait()
    except BaseException:
        await runner.cleanup()
        raise
    await _not_ready(inflight, signals, settings.drain_seconds)
    cut = await _drain(runner, inflight, signals, settings.shutdown_timeout)
    if cut:
        log.warning("worker %d: %d requests cut off by the shutdown", os.getpid(), cut)


def _die_with(parent: int) -> None:
    """A worker must not outlive its parent (even one killed with SIGKILL): the folder and
    the port are the gateway's, and a restarted gateway needs both."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)


def _worker(
    settings: Settings,
    listeners: list[socket.socket],
    context: ssl.SSLContext | None,
    metrics_dir: Path,
    ready: Connection,
    parent: int,
) -> None:
    _die_with(parent)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler, until ours
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us with SIGTERM
    metrics.use_directory(metrics_dir)
    try:
        _run(settings, _work(settings, listeners, context, ready))
    finally:  # a worker leaves by os._exit: no atexit writes what it holds in memory
        metrics.TALLY.fold()
        logs.flush()


def _serve_workers(
    settings: Settings,
    listeners: list[socket.socket],
    context: ssl.SSLContext | None,
    banner: list[str],
) -> None:
    with _opening(settings.data):
        if alone(settings):
            sweep(settings)
    hold = FolderLock(settings.data)
    hold.shared()  # no fsck or second gateway while the workers run
    metrics_dir = Path(tempfile.mkdtemp(prefix="s3gw-metrics-"))
    fork = multiprocessing.get_context("fork")
    workers: dict[int, multiprocessing.Process] = {}

    def start() -> None:
        receive, send = fork.Pipe(duplex=False)
        process = fork.Process(
            target=_worker,
            args=(settings, listeners, context, metrics_dir, send, os.getpid()),
            daemon=True,
        )
        process.start()
        send.close()
        if not receive.poll(60):
            raise StartError("a worker did not start within 60 s")
        try:
            started = receive.recv()
        except EOFError:
            process.join(5)
            started = f"a worker exited with status {process.exitcode} as it started"
        if not isinstance(started, int):
            process.join(5)
            raise StartError(str(started))
        workers[started] = process

    signals = 0

    def received(signum: int, frame: object) -> None:
        nonlocal signals
        signals += 1
        if signals > 1:  # a second one: the workers stop now
            for process in workers.values():
                with contextlib.suppress(OSError):
                    os.kill(process.pid, signal.SIGTERM)  # type: ignore[arg-type]

    signal.signal(signal.SIGTERM, received)
    signal.signal(signal.SIGINT, received)
    try:
        for _ in range(settings.workers):
            start()
        _print_banner(banner)
        while not signals:
            time.sleep(0.2)
            for pid, process in list(workers.items()):
                if not process.is_alive() and not signals:
                    log.error("worker %d exited with %s; starting another", pid, process.exitcode)
                    del workers[pid]
                    start()
        log.info(
            "shutting down: %g s of draining (/health/ready answers 503, requests are still "
            "served), then no new connections; requests in flight get up to %g s",
            settings.drain_seconds,
            settings.shutdown_timeout,
        )
        started = time.monotonic()
        for sock in listeners:
            sock.close()  # the port closes once every worker has closed its copy too
        for process in workers.values():
            process.terminate()
        deadline = started + settings.drain_seconds + settings.shutdown_timeout + 5
        for process in workers.values():
            process.join(max(0.0, deadline - time.monotonic()))
        log.info("shut down in %.1f s", time.monotonic() - started)
    finally:
        for process in workers.values():
            if process.is_alive():
                process.kill()
                process.join(5)
        hold.close()
        shutil.rmtree(metrics_dir, ignore_errors=True)
