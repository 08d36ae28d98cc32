"""The gateway on either event loop: asyncio (the default) and uvloop (`--loop uvloop`, the
`fast` extra). GETs of file blobs go by sendfile on asyncio and by reads in the pool on uvloop,
which has no sendfile: both must give the bytes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from tests.server import GatewayProcess


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_objects_on_each_event_loop(tmp_path, loop):
    server = GatewayProcess(tmp_path / "data", {"S3GW_LOOP": loop, "S3GW_WORKERS": "1"}).start()
    try:
        assert f"event loop: {loop}\n" in server.log
        s3 = server.client()
        s3.create_bucket(Bucket="loops")
        small, large = os.urandom(4096), os.urandom(3 * 1024 * 1024 + 17)  # inline, a file
        for key, body in (("small", small), ("large", large)):
            put = s3.put_object(Bucket="loops", Key=key, Body=body)
            assert put["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'
            assert s3.get_object(Bucket="loops", Key=key)["Body"].read() == body
            part = s3.get_object(Bucket="loops", Key=key, Range="bytes=100-4000")
            assert part["Body"].read() == body[100:4001]
    finally:
        server.stop()


def _loop_factory(setting: str, block_uvloop: bool) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        + ("sys.modules['uvloop'] = None\n" if block_uvloop else "")
        + "from gateway.server import _loop_factory\n"
        + f"f = _loop_factory({setting!r})\n"
        + "print('asyncio' if f is None else f.__module__)\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_loop_setting():
    assert _loop_factory("uvloop", False).stdout.strip() == "uvloop"
    assert _loop_factory("asyncio", False).stdout.strip() == "asyncio"
    assert _loop_factory("asyncio", True).stdout.strip() == "asyncio"  # no extra needed
    # Without the extra, asking for uvloop fails and says why.
    missing = _loop_factory("uvloop", True)
    assert missing.returncode != 0 and "uvloop is not installed" in missing.stderr
    bad = _loop_factory("tokio", False)
    assert bad.returncode != 0 and "--loop must be asyncio or uvloop" in bad.stderr
