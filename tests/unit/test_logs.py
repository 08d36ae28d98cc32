"""The access log's own path writes the line logging's formatters would have written."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from gateway import logs

NOW = 1764556800.987654  # a fixed instant, with milliseconds to format
MESSAGE = "0123456789ABCDEF PutObject PUT /b/a%20key 200 1.2ms"
FIELDS = {
    "request_id": "0123456789ABCDEF",
    "user": "s3gw",
    "operation": "PutObject",
    "bucket": "b",
    "key": "a key",
    "status": 200,
    "bytes_in": 5,
    "bytes_out": 0,
    "ms": 1.23,
}


def _through_logging(fmt: str) -> str:
    """The line the configured formatter makes of the same record."""
    if fmt == "json":
        formatter: logging.Formatter = logs.JsonFormatter()
        formatter.converter = time.gmtime
    else:
        formatter = logging.Formatter(logs.TEXT_FORMAT)
    record = logging.LogRecord(logs.ACCESS_LOGGER, logging.INFO, "", 0, "%s", (MESSAGE,), None)
    record.created = NOW
    record.msecs = int((NOW - int(NOW)) * 1000)
    record.__dict__.update(FIELDS)
    return formatter.format(record) + "\n"


@pytest.mark.parametrize("fmt", ["text", "json"])
async def test_access_line_is_the_formatters_line(
    fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logs.time, "time", lambda: NOW)
    with open(tmp_path / "log", "w") as stream:
        lines = logs.AccessLines(stream, fmt)
        lines.add(MESSAGE, dict(FIELDS))
        assert (tmp_path / "log").read_text() == ""  # waiting in memory for the loop's flush
        lines.flush()
    written = (tmp_path / "log").read_text()
    assert written == _through_logging(fmt)
    if fmt == "json":
        assert json.loads(written)["key"] == "a key"


def test_many_lines_are_written_whole_and_in_order(tmp_path: Path) -> None:
    with open(tmp_path / "log", "w") as stream:
        lines = logs.AccessLines(stream, "text")
        for i in range(500):  # more than one atomic write's worth, and past FLUSH_BYTES
            lines.add(f"line {i:03d} " + "x" * 200, {})
        lines.flush()
    written = (tmp_path / "log").read_text().splitlines()
    assert [line.split(" ")[5] for line in written] == [f"{i:03d}" for i in range(500)]
    assert all(line.endswith("x" * 200) for line in written)
