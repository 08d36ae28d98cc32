"""Health, metrics and the access log, as an operator sees them."""

from __future__ import annotations

import json
import re
import time
import urllib.request

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
