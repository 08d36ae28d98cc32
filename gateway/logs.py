"""Logging set-up: plain lines, or one JSON object per line for log collectors.

The access log (one line per request at info, the default) has a path of its own: logging's
machinery (a LogRecord per call, the formatter, a write and a flush per line) cost a fifth of a
small request's CPU. `access` formats the same line itself (the time's text made once a
second) and `AccessLines` writes the lines in batches, within FLUSH_S of the first one, before
any other log line, and when the process stops (`flush`: at exit, and by a worker process as
it ends). Lines still in memory are lost only if the process is killed.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import select
import sys
import threading
import time
from typing import Any, TextIO
from urllib.parse import unquote_plus

ACCESS_LOGGER = "gateway.access"
access_logger = logging.getLogger(ACCESS_LOGGER)
FLUSH_S = 0.5
FLUSH_BYTES = 64 * 1024
# Several worker processes write to one stderr, often a pipe: a write of up to PIPE_BUF bytes
# to a pipe is never interleaved with another's, so no line is torn by another worker's.
_ATOMIC_WRITE = select.PIPE_BUF

# LogRecord attributes that are not fields a caller passed with `extra=`.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# json.dumps(line, default=str), without a new encoder per line.
_encode_json = json.JSONEncoder(default=str).encode


class AccessLines:
    """Access log lines, formatted as the configured formatter would format them (the same
    text, or the same JSON object), kept in memory and written in batches."""

    def __init__(self, stream: TextIO, fmt: str) -> None:
        self.stream = stream
        self.json = fmt == "json"
        self._pending: list[bytes] = []
        self._size = 0
        self._lock = threading.Lock()  # a flush from another thread's log line, or at exit
        self._second = -1
        self._stamp = ""
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        # A worker writes its own lines, not copies of its parent's; and a lock held by one of
        # the parent's threads at the fork would never be released in the child.
        self._pending, self._size = [], 0
        self._lock = threading.Lock()

    def add(self, message: str, fields: dict[str, Any]) -> None:
        now = time.time()
        second = int(now)
        if second != self._second:
            if self.json:
                self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            else:  # logging.Formatter's default asctime: local time
                self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
            self._second = second
        msecs = int((now - second) * 1000)
        if self.json:
            line = {
                "time": f"{self._stamp}.{msecs:03d}Z",
                "level": "info",
                "logger": ACCESS_LOGGER,
                "message": message,
            }
            line.update(fields)
            text = _encode_json(line) + "\n"
        else:
            text = f"{self._stamp},{msecs:03d} INFO {ACCESS_LOGGER} {message}\n"
        # As stderr encodes: a path's undecodable bytes are escaped, never an error.
        data = text.encode("utf-8", "backslashreplace")
        first = not self._pending
        self._pending.append(data)
        self._size += len(data)
        if self._size >= FLUSH_BYTES:
            self.flush()
        elif first:
            try:
                asyncio.get_running_loop().call_later(FLUSH_S, self.flush)
            except RuntimeError:  # no event loop here to flush later: now
                self.flush()

    def flush(self) -> None:
        with self._lock:
            pending, self._pending, self._size = self._pending, [], 0
            if not pending:
                return
            try:
                self.stream.flush()  # what was written before through the stream goes first
                fd = self.stream.fileno()
            except (OSError, ValueError):
                return  # no stderr left to write to: as logging does, nothing to report to
            chunk: list[bytes] = []
            size = 0
            for line in pending:
                if chunk and size + len(line) > _ATOMIC_WRITE:
                    _write(fd, b"".join(chunk))
                    chunk, size = [], 0
                chunk.append(line)
                size += len(line)
            _write(fd, b"".join(chunk))


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass  # stderr closed (a reader gone): the lines have nowhere to go


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """stderr, where the access lines waiting in memory are written before any other line."""

    def __init__(self, lines: AccessLines) -> None:
        super().__init__(lines.stream)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.flush()
        super().emit(record)


_lines: AccessLines | None = None


def configure(level: str, fmt: str) -> None:
    global _lines
    if fmt == "json":
        formatter: logging.Formatter = JsonFormatter()
        formatter.converter = time.gmtime
    elif fmt == "text":
        formatter = logging.Formatter(TEXT_FORMAT)
    else:
        raise SystemExit(f"--log-format must be text or json, not {fmt!r}")
    flush()
    _lines = AccessLines(sys.stderr, fmt)
    handler = _Handler(_lines)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


# A presigned URL's query holds its signature (SigV4's X-Amz-Signature, SigV2's Signature) and
# a temporary credential's token: whoever reads the log could replay the URL until it expires.
# The request line keeps every other parameter (X-Amz-Credential names the key, not its secret).
# Names are compared decoded, as authentication reads them: `X-Amz-Signatur%65=` is the
# signature too.
_SECRET_NAMES = frozenset(("x-amz-signature", "signature", "x-amz-security-token"))


def masked_target(target: str) -> str:
    """A request target (path and query) as logged: the signature's value is `***`."""
    path, sep, query = target.partition("?")
    if not sep:
        return target
    fields = query.split("&")
    for i, field in enumerate(fields):
        name, eq, _ = field.partition("=")
        if eq and unquote_plus(name).lower() in _SECRET_NAMES:
            fields[i] = f"{name}=***"
    return f"{path}?{'&'.join(fields)}"


def access_enabled() -> bool:
    """Whether the access log is on (the level is info or lower)."""
    return access_logger.isEnabledFor(logging.INFO)


def access(message: str, fields: dict[str, Any]) -> None:
    """One access log line: `message` is its text, `fields` the JSON format's own fields."""
    lines = _lines
    root = logging.root
    if (
        lines is not None
        and not access_logger.handlers
        and len(root.handlers) == 1
        and isinstance(root.handlers[0], _Handler)
    ):
        lines.add(message, fields)
    else:  # logging set up by someone else (an embedding program, a test): its way
        access_logger.info("%s", message, extra=fields)


def flush() -> None:
    """Write the access lines waiting in memory (a worker process calls it as it ends: it
    leaves by os._exit, without atexit)."""
    if _lines is not None:
        _lines.flush()


atexit.register(flush)
