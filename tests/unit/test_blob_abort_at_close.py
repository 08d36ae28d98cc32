"""A write aborted once the store's thread pool is shut down (the gateway stopping under a
request in flight, the catalog gone): its clean-up runs at once instead of raising
RuntimeError out of the request (a 500 with a traceback), and leaves no file behind."""

from __future__ import annotations

import asyncio
import concurrent.futures
from pathlib import Path

from gateway.store.blobs import BlobFiles


def test_an_abort_after_the_pool_shut_down_cleans_up_in_place(tmp_path: Path) -> None:
    pool = concurrent.futures.ThreadPoolExecutor(2)
    files = BlobFiles(tmp_path, pool)

    async def write_then_abort() -> None:
        writer = files.writer()
        await writer.append(b"half a body")
        pool.shutdown(wait=True)
        writer.abort()  # raised RuntimeError: cannot schedule new futures after shutdown

    asyncio.run(write_then_abort())
    left = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert left == []
