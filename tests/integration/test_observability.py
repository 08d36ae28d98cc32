"""Health, metrics and the access log, as an operator sees them."""

from __future__ import annotations

import concurrent.futures
import json
import re
import time
import urllib.request

import botocore.exceptions
import pytest

from tests.server import GatewayProcess


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def metric(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = rf"^{name}(?:\{{{re.escape(want)}\}})? (\S+)$" if want else rf"^{name} (\S+)$"
    match = re.search(pattern, text, re.M)
    return float(match.group(1)) if match else 0.0


def test_health_without_credentials(gateway):
    assert fetch(f"{gateway.url}/health/live")[0] == 200
    status, body = fetch(f"{gateway.url}/health/ready")
    assert status == 200 and json.loads(body)["status"] == "ready"


def test_health_paths_are_still_s3_when_signed(s3):
    s3.create_bucket(Bucket="health")
    s3.put_object(Bucket="health", Key="live", Body=b"an object, not a probe")
    assert s3.get_object(Bucket="health", Key="live")["Body"].read() == b"an object, not a probe"


def test_metrics_move(gateway, s3, bucket):
    before = fetch(f"{gateway.url}/metrics")[1]
    s3.put_object(Bucket=bucket, Key="k", Body=b"x" * 1000)
    s3.get_object(Bucket=bucket, Key="k")["Body"].read()
    s3.put_object(Bucket=bucket, Key="file", Body=b"y" * 200_000)  # a blob file: sendfile
    s3.get_object(Bucket=bucket, Key="file")["Body"].read()
    s3.copy_object(Bucket=bucket, Key="copy", CopySource=f"{bucket}/k")
    after = fetch(f"{gateway.url}/metrics")[1]

    def delta(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert delta("s3gw_requests_total", operation="PutObject", status="200") == 2
    assert delta("s3gw_requests_total", operation="GetObject", status="200") == 2
    assert delta("s3gw_copy_etags_total", how="reused") == 1
    assert delta("s3gw_md5_hashed_bytes_total") >= 1000
    assert delta("s3gw_received_bytes_total") >= 1000
    assert delta("s3gw_sent_bytes_total") >= 201_000
    assert delta("s3gw_request_seconds_count", operation="CopyObject") == 1
    # The stored totals are refreshed in the background every few seconds.
    deadline = time.monotonic() + 60
    while metric(after, "s3gw_objects") < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        after = fetch(f"{gateway.url}/metrics")[1]
    assert metric(after, "s3gw_objects") >= 2


def test_json_access_log(tmp_path):
    server = GatewayProcess(tmp_path / "data", {"S3GW_LOG_FORMAT": "json"}).start()
    try:
        s3 = server.client()
        s3.create_bucket(Bucket="logged")
        s3.put_object(Bucket="logged", Key="a/b", Body=b"12345")
        deadline = time.monotonic() + 10
        entries = []
        while time.monotonic() < deadline and not entries:
            lines = [line for line in server.log if line.startswith("{")]
            entries = [e for e in map(json.loads, lines) if e.get("operation") == "PutObject"]
            time.sleep(0.05)
    finally:
        server.stop()
    (entry,) = entries
    assert entry["bucket"] == "logged" and entry["key"] == "a/b"
    assert entry["status"] == 200 and entry["bytes_in"] == 5
    assert entry["user"] == "s3gw" and entry["request_id"]
    assert entry["ms"] >= 0


_TEXT_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO gateway\.access "
    r"(?P<id>[0-9A-F]{16}) (?P<operation>\w+) (?P<method>[A-Z]+) (?P<path>\S+) "
    r"(?P<status>\d{3}) \d+\.\dms$"
)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_access_log_has_every_line_after_a_clean_stop(tmp_path, workers):
    """The access log's lines wait in memory for a moment before they are written: a clean
    stop right after the requests still writes each one, once, whole, in the documented
    format (with several workers writing to one pipe too). No shutdown grace: the event loop
    ends at once, before the lines' timed write."""
    env = {"S3GW_WORKERS": workers, "S3GW_SHUTDOWN_TIMEOUT": "0"}
    server = GatewayProcess(tmp_path / "data", env).start()
    try:
        s3 = server.client(max_pool_connections=8)
        s3.create_bucket(Bucket="logged")
        keys = [f"k/{i:02d}" for i in range(40)]

        def put(key: str) -> str:
            answer = s3.put_object(Bucket="logged", Key=key, Body=key.encode())
            return answer["ResponseMetadata"]["RequestId"]

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            ids = dict(zip(pool.map(put, keys), keys, strict=True))
    finally:
        server.stop()  # SIGTERM at once, while the last lines are still in memory
    lines = [m for line in server.log if (m := _TEXT_LINE.match(line.rstrip("\n")))]
    logged = [m for m in lines if m["id"] in ids]
    assert sorted(m["id"] for m in logged) == sorted(ids)  # each one, once
    for m in logged:
        assert m["operation"] == "PutObject" and m["method"] == "PUT"
        assert m["path"] == f"/logged/{ids[m['id']]}" and m["status"] == "200"


def test_metrics_count_every_request_of_every_worker(fresh_gateway):
    """Requests are tallied per process and folded into the counters: a scrape right after
    them, whichever worker answers it, counts each one exactly, in every series."""
    s3 = fresh_gateway.client(max_pool_connections=8)
    s3.create_bucket(Bucket="counted")
    before = fetch(f"{fresh_gateway.url}/metrics")[1]
    bodies = 60

    def put(i: int) -> None:
        s3.put_object(Bucket="counted", Key=f"k{i}", Body=b"x" * 100)
        if i % 3 == 0:
            with pytest.raises(botocore.exceptions.ClientError):
                s3.head_object(Bucket="counted", Key=f"missing-{i}")

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(bodies)))  # each one's failure raised here
    # One scrape per connection: each may be answered by either worker.
    scrapes = [fetch(f"{fresh_gateway.url}/metrics")[1] for _ in range(4)]
    for after in scrapes:

        def delta(name: str, after: str = after, **labels: str) -> float:
            return metric(after, name, **labels) - metric(before, name, **labels)

        assert delta("s3gw_requests_total", operation="PutObject", status="200") == bodies
        assert delta("s3gw_requests_total", operation="HeadObject", status="404") == bodies // 3
        assert delta("s3gw_request_seconds_count", operation="PutObject") == bodies
        assert delta("s3gw_request_seconds_bucket", le="+Inf", operation="PutObject") == bodies
        assert delta("s3gw_request_seconds_sum", operation="PutObject") > 0
        assert delta("s3gw_received_bytes_total") == bodies * 100
