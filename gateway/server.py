"""Serving: one process, or a parent and N worker processes on one port (SO_REUSEPORT).

Python runs one thread of Python at a time, so both cores need two processes. The parent holds
the data folder, sweeps what a crash left, then forks the workers before any thread exists (a
fork copies only the calling thread); each worker opens the folder shared and listens on the
same port, and the kernel spreads connections over them. They share the SQLite catalog, which
takes one writer at a time (the workers' writers take turns: catalog.CatalogWriter), and the
blob files, which are immutable. The parent restarts a worker that dies, and stops them all on
SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
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
from collections.abc import Callable, Coroutine
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from aiohttp import web

from . import metrics, tls
from .app import build_app, describe, sweep
from .config import Settings, load_users
from .store.blobs import FolderLock

log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def serve(settings: Settings) -> None:
    _loop_factory(settings.loop)  # a bad --loop fails here, before anything starts
    if settings.workers <= 1:
        _run(settings, _serve_one(settings))
    else:
        _serve_workers(settings)


def _loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """asyncio's loop (None), or uvloop's (the `fast` extra). uvloop costs about 10 % less CPU
    per small request but has no sendfile, so large GETs go through Python buffers at about
    half the speed (s3gw bench s3): asyncio is the default."""
    if name == "asyncio":
        return None
    if name != "uvloop":
        raise SystemExit(f"--loop must be asyncio or uvloop, not {name!r}")
    try:
        import uvloop
    except ImportError:
        raise SystemExit(
            "--loop uvloop: uvloop is not installed (pip install 's3gw[fast]')"
        ) from None
    return uvloop.new_event_loop


def _run(settings: Settings, main: Coroutine[Any, Any, None]) -> None:
    with asyncio.Runner(loop_factory=_loop_factory(settings.loop)) as runner:
        runner.run(main)


def _tls(settings: Settings) -> tuple[ssl.SSLContext | None, Path | None]:
    if settings.tls_self_signed:
        cert, key = tls.self_signed(settings.data)
    elif settings.tls_cert and settings.tls_key:
        cert, key = settings.tls_cert, settings.tls_key
    elif settings.tls_cert or settings.tls_key:
        raise SystemExit("--tls-cert and --tls-key go together")
    else:
        return None, None
    return tls.server_context(cert, key), cert


def _url(settings: Settings, port: int, context: ssl.SSLContext | None) -> str:
    scheme = "https" if context else "http"
    host = settings.host
    return f"{scheme}://{host}:{port}" if ":" not in host else f"{scheme}://[{host}]:{port}"


def _banner(settings: Settings, url: str, cert: Path | None) -> None:
    # For the person (or test) that started us: printed whatever the log level, "listening
    # on" last, so that whoever waits for it has seen the rest.
    if cert is not None:
        print(f"TLS certificate: {cert} (trust it with AWS_CA_BUNDLE={cert})", file=sys.stderr)
    for line in describe(settings, url):
        print(line, file=sys.stderr, flush=True)


async def _site(
    settings: Settings, app: web.Application, context: ssl.SSLContext | None, *, shared: bool
) -> tuple[web.AppRunner, int]:
    # lingering_time: after an answer sent before the body was read, aiohttp reads what the
    # client still sends for this long before closing; its 10 s default holds sockets (and a
    # graceful stop) for nothing.
    from .s3.protocol import S3AppRunner  # S3's XML answers to what the HTTP parser refuses

    runner = S3AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        lingering_time=2.0,
        max_line_size=settings.max_header_size,
        max_field_size=settings.max_header_size,
        keepalive_timeout=settings.idle_timeout,
    )
    await runner.setup()
    site = web.TCPSite(
        runner,
        settings.host,
        settings.port,
        reuse_address=True,
        reuse_port=shared,
        ssl_context=context,
    )
    await site.start()
    return runner, runner.addresses[0][1]


async def _until_stopped() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def _serve_one(settings: Settings) -> None:
    app = build_app(settings)
    context, cert = _tls(settings)
    runner, port = await _site(settings, app, context, shared=False)
    _banner(settings, _url(settings, port, context), cert)
    try:
        await _until_stopped()
    finally:
        await runner.cleanup()


# --- several workers -------------------------------------------------------------------------


async def _work(settings: Settings, ready: Connection) -> None:
    app = build_app(settings, worker=True)
    context, _ = _tls(settings)
    runner, _ = await _site(settings, app, context, shared=True)
    ready.send(os.getpid())
    ready.close()
    try:
        await _until_stopped()
    finally:
        await runner.cleanup()


def _die_with(parent: int) -> None:
    """A worker must not outlive its parent (even one killed with SIGKILL): the folder and
    the port are the gateway's, and a restarted gateway needs both."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)


def _worker(settings: Settings, metrics_dir: Path, ready: Connection, parent: int) -> None:
    _die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us with SIGTERM
    metrics.use_directory(metrics_dir)
    _run(settings, _work(settings, ready))


def _reserve_port(settings: Settings) -> tuple[socket.socket, int]:
    """A port for every worker to share: bound (with SO_REUSEPORT) but never listening, so
    that port 0 resolves once and the port stays ours while workers come and go."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((settings.host, settings.port))
    return sock, sock.getsockname()[1]


def _serve_workers(settings: Settings) -> None:
    settings.data.mkdir(parents=True, exist_ok=True)
    sweep(settings)
    load_users(settings)  # a generated credentials file is made once, here
    hold = FolderLock(settings.data)
    hold.shared()  # no fsck or second gateway while the workers run
    reserved, port = _reserve_port(settings)
    settings = replace(settings, port=port)
    context, cert = _tls(settings)
    metrics_dir = Path(tempfile.mkdtemp(prefix="s3gw-metrics-"))
    fork = multiprocessing.get_context("fork")
    workers: dict[int, multiprocessing.Process] = {}

    def start() -> None:
        receive, send = fork.Pipe(duplex=False)
        process = fork.Process(
            target=_worker, args=(settings, metrics_dir, send, os.getpid()), daemon=True
        )
        process.start()
        send.close()
        if not receive.poll(60):
            raise SystemExit("a worker did not start")
        receive.recv()
        workers[process.pid] = process  # type: ignore[index]

    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        for _ in range(settings.workers):
            start()
        _banner(settings, _url(settings, port, context), cert)
        while not stopping:
            time.sleep(0.2)
            for pid, process in list(workers.items()):
                if not process.is_alive() and not stopping:
                    log.error("worker %d exited with %s; starting another", pid, process.exitcode)
                    del workers[pid]
                    start()
    finally:
        for process in workers.values():
            if process.is_alive():
                process.terminate()
        for process in workers.values():
            process.join(30)
        reserved.close()
        hold.close()
        shutil.rmtree(metrics_dir, ignore_errors=True)
