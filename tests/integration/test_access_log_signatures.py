"""The access log records a presigned URL's request without its signature: the line keeps the
method, the path and every other query parameter, with `X-Amz-Signature=***` (SigV4) or
`Signature=***` (SigV2). A signature in a log is a credential for whoever reads it, until the
URL expires."""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.server import GatewayProcess


@pytest.fixture
def server(tmp_path):
    gateway = GatewayProcess(tmp_path / "data", {"S3GW_WORKERS": "1"}).start()
    yield gateway
    gateway.stop()


def _access_line(server: GatewayProcess, needle: str) -> str:
    """The access log line that has `needle` (lines are written within half a second)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = [line for line in list(server.log) if needle in line and "GetObject" in line]
        if found:
            (line,) = found
            return line
        time.sleep(0.1)
    raise AssertionError(f"no access line with {needle!r}:\n" + "".join(server.log))


@pytest.mark.parametrize(
    ("version", "parameter", "kept"),
    [
        ("s3v4", "X-Amz-Signature", ("X-Amz-Credential=", "X-Amz-Expires=600", "X-Amz-Date=")),
        ("s3", "Signature", ("AWSAccessKeyId=", "Expires=")),
    ],
)
def test_a_presigned_get_is_logged_with_its_signature_masked(server, version, parameter, kept):
    s3 = server.client()
    s3.create_bucket(Bucket="shared")
    s3.put_object(Bucket="shared", Key=f"report-{version}.txt", Body=b"quarterly")
    presigner = server.client(signature_version=version)
    url = presigner.generate_presigned_url(
        "get_object", Params={"Bucket": "shared", "Key": f"report-{version}.txt"}, ExpiresIn=600
    )
    with urllib.request.urlopen(url, timeout=30) as reply:
        assert reply.status == 200 and reply.read() == b"quarterly"
    query = urllib.parse.urlsplit(url).query
    (signature,) = urllib.parse.parse_qs(query)[parameter]
    assert len(signature) >= 20

    line = _access_line(server, f"/shared/report-{version}.txt?")
    assert f"{parameter}=***" in line, line
    log = "".join(server.log)
    for form in {signature, urllib.parse.quote(signature, safe=""), urllib.parse.quote(signature)}:
        assert form not in log, f"the signature is in the log: {line}"
    for parameter_kept in kept:
        assert parameter_kept in line, line
    assert " GET " in line and " 200 " in line, line


@pytest.mark.parametrize(
    ("parameter", "encoded", "status"),
    [
        # Decoded, the name is X-Amz-Signature: the URL is served, as AWS decodes it.
        ("X-Amz-Signature", "X-Amz-Signatur%65", 200),
        # Names are case-sensitive: without X-Amz-Signature the query is no SigV4 proof.
        ("X-Amz-Signature", "x-amz-%53ignature", 400),
    ],
)
def test_a_percent_encoded_parameter_name_is_masked_too(server, parameter, encoded, status):
    """Authentication reads a parameter's name decoded: the log masks it decoded as well (a
    URL sent with `X-Amz-Signatur%65=` was served and logged with its signature)."""
    s3 = server.client()
    s3.create_bucket(Bucket="encoded")
    s3.put_object(Bucket="encoded", Key="k.txt", Body=b"secret")
    url = server.client(signature_version="s3v4").generate_presigned_url(
        "get_object", Params={"Bucket": "encoded", "Key": "k.txt"}, ExpiresIn=600
    )
    (signature,) = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)[parameter]
    sent = url.replace(f"{parameter}=", f"{encoded}=")
    try:
        with urllib.request.urlopen(sent, timeout=30) as reply:
            answered = reply.status
    except urllib.error.HTTPError as refused:
        answered = refused.code
    assert answered == status
    line = _access_line(server, "/encoded/k.txt?")
    assert f"{encoded}=***" in line, line
    assert signature not in "".join(server.log)
