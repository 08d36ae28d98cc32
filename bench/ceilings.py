"""Ceilings for `python -m bench s3`, measured in the same run as the servers they bound.

- MD5: a large PUT hashes every byte once (the ETag). `openssl speed -evp md5` over 1 MiB
  blocks, and hashlib's MD5 over the same 1 MiB updates the gateway makes.
- Write with fsync: 1 MiB writes to a file in the temporary folder that holds the servers'
  data folders, then fsync, as a durable PUT does.
- A trivial aiohttp server, one process, the same framework as the gateway with nothing in it:
  `/discard/...` reads a body and answers 200 (the ceiling of a Python server receiving
  PUTs); `/ok/...` answers at once (GET: 4 KiB), so that the load generator's own cost shows;
  `/file/...` returns a file with web.FileResponse (sendfile: the ceiling of a large GET).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

MIB = 1024 * 1024

TRIVIAL_SERVER = """
import socket, sys
from aiohttp import web

FILE = sys.argv[1]
SMALL = bytes(4096)

async def discard(request):
    while await request.content.readany():
        pass
    return web.Response()

async def ok(request):
    return web.Response(body=SMALL if request.method == "GET" else b"")

async def file(request):
    return web.FileResponse(FILE)

app = web.Application()
app.router.add_route("*", "/discard/{key:.*}", discard)
app.router.add_route("*", "/ok/{key:.*}", ok)
app.router.add_route("GET", "/file/{key:.*}", file)
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
web.run_app(app, sock=sock, access_log=None, print=None)
"""


class TrivialServer:
    """The trivial aiohttp server as a child process, serving `file` under /file/."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> TrivialServer:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", TRIVIAL_SERVER, str(self.file)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        port = self.proc.stdout.readline().strip()
        if not port:
            raise RuntimeError("the trivial aiohttp server did not start")
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait()
            self.proc = None


def write_file(path: Path, mib: int) -> None:
    block = os.urandom(MIB)
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(block)


def openssl_md5_mib_s(seconds: int = 2) -> float | None:
    """`openssl speed -evp md5 -bytes 1048576 -seconds N`, in MiB/s (None without openssl)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    out = subprocess.run(
        [openssl, "speed", "-evp", "md5", "-bytes", str(MIB), "-seconds", str(seconds)],
        capture_output=True,
        text=True,
        timeout=seconds + 30,
    ).stdout
    # The last line: "md5   880487.69k", in 1000s of bytes per second.
    m = re.search(r"^md5\s+([\d.]+)k\s*$", out, re.MULTILINE)
    return float(m.group(1)) * 1000 / MIB if m else None


def hashlib_md5_mib_s(mib: int) -> float:
    block = os.urandom(MIB)
    md5 = hashlib.md5()
    start = time.perf_counter()
    for _ in range(mib):
        md5.update(block)
    md5.hexdigest()
    return mib / (time.perf_counter() - start)


def fsync_write_mib_s(folder: Path, mib: int) -> float:
    """`mib` MiB in 1 MiB writes to a new file in `folder`, then fsync; the file is removed."""
    block = os.urandom(MIB)
    path = folder / "fsync-ceiling"
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(mib):
            os.write(fd, block)
        os.fsync(fd)
    finally:
        os.close(fd)
    seconds = time.perf_counter() - start
    path.unlink()
    return mib / seconds


def aes_gcm_mib_s(mib: int) -> float:
    """AES-256-GCM as the gateway's encryption runs it (crypto.py: 64 KiB chunks), one core."""
    from gateway.store.crypto import DataKey

    key = DataKey.generate()
    block = os.urandom(MIB)
    start = time.perf_counter()
    for index in range(mib):
        key.seal(block, index * (MIB // (64 * 1024)))
    return mib / (time.perf_counter() - start)
