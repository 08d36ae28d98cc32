"""Virtual-hosted style: with --domain, `bucket.DOMAIN` in the Host header names the bucket."""

from __future__ import annotations

import pytest
from botocore.auth import HmacV1Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests import raw
from tests.server import ACCESS_KEY, SECRET_KEY, GatewayProcess


@pytest.fixture
def vhost(tmp_path):
    server = GatewayProcess(tmp_path / "data", {"S3GW_DOMAIN": "s3.localhost"}).start()
    yield server
    server.stop()


def test_virtual_hosted_requests(vhost):
    port = vhost.url.rsplit(":", 1)[1]
    base = f"http://vbucket.s3.localhost:{port}"
    assert raw.signed_to(base + "/", "PUT").status == 200  # CreateBucket
    put = raw.send(
        "PUT",
        f"{base}/dir/key.txt",
        raw.sign("PUT", f"{base}/dir/key.txt", body=b"hosted"),
        b"hosted",
        connect="127.0.0.1",
    )
    assert put.status == 200
    # The same object, path style, through the same server.
    s3 = vhost.client()
    assert s3.get_object(Bucket="vbucket", Key="dir/key.txt")["Body"].read() == b"hosted"
    listing = raw.signed_to(base + "/?list-type=2", "GET")
    assert b"<Key>dir/key.txt</Key>" in listing.body
    got = raw.signed_to(base + "/dir/key.txt", "GET")
    assert got.body == b"hosted"


def test_virtual_hosted_signature_v2(vhost):
    port = vhost.url.rsplit(":", 1)[1]
    vhost.client().create_bucket(Bucket="v2bucket")
    vhost.client().put_object(Bucket="v2bucket", Key="k", Body=b"v2 hosted")
    url = f"http://v2bucket.s3.localhost:{port}/k"
    request = AWSRequest(method="GET", url=url)
    # botocore signs "/bucket/key" for virtual-hosted requests (its auth_path).
    request.auth_path = "/v2bucket/k"
    HmacV1Auth(Credentials(ACCESS_KEY, SECRET_KEY)).add_auth(request)
    reply = raw.send("GET", url, dict(request.headers.items()), connect="127.0.0.1")
    assert reply.status == 200 and reply.body == b"v2 hosted"
