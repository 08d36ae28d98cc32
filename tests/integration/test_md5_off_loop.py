"""The request path never hashes a large body on the event loop: a 256 MiB PUT streams through
the real application, served in this test's own loop, and every MD5 update is counted by the
thread that makes it. A count, not a timing (DESIGN.md: never block the event loop; the lag table
of `python -m bench digest` shows what a hashed batch on the loop would cost).
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gateway import digest
from gateway.app import build_app
from gateway.config import Settings
from gateway.store import open_store
from gateway.store.blobs import FolderInUse
from tests.server import ACCESS_KEY, SECRET_KEY

MIB = 1 << 20
SIZE = 256 * MIB


class Counted:
    """A digest that records, for each update, whether the event loop's thread made it."""

    def __init__(self, inner: digest.Digest, loop_thread: int, tally: dict[bool, int]) -> None:
        self.inner, self.loop_thread, self.tally = inner, loop_thread, tally

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        on_loop = threading.get_ident() == self.loop_thread
        self.tally[on_loop] += len(data)
        self.inner.update(data)

    def digest(self) -> bytes:
        return self.inner.digest()

    def hexdigest(self) -> str:
        return self.inner.hexdigest()


def _body() -> bytes:
    # 256 distinct MiB (a repeated block would hide a batch hashed twice or skipped).
    block = bytes(range(256)) * (MIB // 256)
    return b"".join(i.to_bytes(8, "big") + block[8:] for i in range(SIZE // MIB))


def _client(url: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


@pytest.fixture
def restore_backend() -> Iterator[None]:
    yield
    digest.configure("hashlib")


@pytest.mark.parametrize("backend", digest.BACKENDS)
async def test_256mib_put_is_hashed_off_the_loop(
    tmp_path: Path, backend: str, restore_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    settings = Settings(
        data=data,
        host="127.0.0.1",
        port=0,
        access_key=ACCESS_KEY,
        secret_key=SECRET_KEY,
        md5_backend=backend,
        log_level="warning",
    )
    app = build_app(settings)
    assert digest.backend() == backend
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        s3 = _client(f"http://{host}:{port}")
        await asyncio.to_thread(s3.create_bucket, Bucket="lag")
        body = _body()
        expected = hashlib.md5(body).hexdigest()

        # Every digest the store makes from here on counts its bytes by thread.
        tally = {True: 0, False: 0}
        configured = digest._new
        loop_thread = threading.get_ident()
        monkeypatch.setattr(digest, "_new", lambda: Counted(configured(), loop_thread, tally))
        answer = await asyncio.wait_for(
            asyncio.to_thread(s3.put_object, Bucket="lag", Key="big", Body=body), 300
        )

        assert answer["ETag"] == f'"{expected}"'
        head = await asyncio.to_thread(s3.head_object, Bucket="lag", Key="big")
        assert head["ContentLength"] == SIZE and head["ETag"] == f'"{expected}"'
        # Each byte was hashed once, and none of them on the event loop's thread.
        assert tally == {True: 0, False: SIZE}
        # While the app runs, its store holds the data folder.
        with pytest.raises(FolderInUse):
            open_store(data)
    finally:
        await runner.cleanup()
    # The app's cleanup closed the store: the folder can be opened exclusively again.
    open_store(data).close()
