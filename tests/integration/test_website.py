"""The static website endpoint (docs/website.md) on a real gateway: set up with boto3 on the S3
endpoint, read with plain HTTP and `Host` headers on the website port, rule by rule of AWS's
pages ("Website endpoints", "Configuring an index document", "Configuring a custom error
document", "Configuring a webpage redirect")."""

from __future__ import annotations

import http.client
import json
import re
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests import raw
from tests.integration.test_console import ALICE, USERS, Console, Session
from tests.process import GatewayProcess

DOMAIN = "web.test"
_WEBSITE = re.compile(r"website endpoint on (https?://\S+)")


@dataclass
class Site:
    server: GatewayProcess
    url: str  # the website endpoint's http://127.0.0.1:PORT
    s3: Any
    bucket: str  # a public site with index, error document and routing rules
    everything: str  # a bucket whose website redirects every request

    def get(
        self, path: str, host: str | None = None, method: str = "GET", **headers: str
    ) -> raw.Reply:
        host = host or f"{self.bucket}.{DOMAIN}"
        return raw.send(method, self.url + path, {"Host": host, **headers})


def _public(s3: Any, bucket: str, listed: bool = True) -> None:
    """Anyone may read the bucket's objects but those under private/ (a policy's Deny), and,
    when `listed`, list it: then a missing key is a 404, else a 403 (as AWS answers)."""
    s3.delete_public_access_block(Bucket=bucket)
    listing = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:ListBucket",
        "Resource": f"arn:aws:s3:::{bucket}",
    }
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            *([listing] if listed else []),
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{bucket}/*",
            },
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{bucket}/private/*",
            },
        ],
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))


_CONFIGURATION = {
    "IndexDocument": {"Suffix": "index.html"},
    "ErrorDocument": {"Key": "error.html"},
    "RoutingRules": [
        {
            "Condition": {"KeyPrefixEquals": "old/"},
            "Redirect": {"ReplaceKeyPrefixWith": "docs/"},
        },
        {
            "Condition": {"KeyPrefixEquals": "moved"},
            "Redirect": {
                "HostName": "example.com",
                "Protocol": "https",
                "ReplaceKeyWith": "docs/page.html",
                "HttpRedirectCode": "302",
            },
        },
        {
            "Condition": {"HttpErrorCodeReturnedEquals": "404", "KeyPrefixEquals": "gone/"},
            "Redirect": {"HostName": "archive.example.com"},
        },
    ],
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, module_catalog: str | None) -> Iterator[Site]:
    server = GatewayProcess(
        tmp_path_factory.mktemp("website"),
        None,
        "--website-address",
        "127.0.0.1:0",
        "--website-domain",
        DOMAIN,
        catalog=module_catalog,
    ).start()
    try:
        found = _WEBSITE.search("".join(server.log))
        assert found, server.log
        s3 = server.client()
        bucket, everything = "www-site", "www-elsewhere"
        s3.create_bucket(Bucket=bucket)
        _public(s3, bucket)
        put = {
            "index.html": b"<h1>home</h1>",
            "docs/index.html": b"<h1>docs</h1>",
            "docs/page.html": b"<p>a page</p>",
            "error.html": b"<p>not here</p>",
            "private/secret.html": b"top secret bytes",
            "data.bin": bytes(range(256)),
        }
        for key, body in put.items():
            s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="text/html")
        s3.put_object(
            Bucket=bucket, Key="redir.html", Body=b"", WebsiteRedirectLocation="/docs/page.html"
        )
        s3.put_bucket_website(Bucket=bucket, WebsiteConfiguration=_CONFIGURATION)
        s3.create_bucket(Bucket=everything)
        s3.put_bucket_website(
            Bucket=everything,
            WebsiteConfiguration={
                "RedirectAllRequestsTo": {"HostName": "example.org", "Protocol": "https"}
            },
        )
        yield Site(server, found.group(1), s3, bucket, everything)
    finally:
        server.stop()


# --- the S3 API -------------------------------------------------------------------------------


def test_get_bucket_website_answers_what_was_put(site):
    got = site.s3.get_bucket_website(Bucket=site.bucket)
    assert got["IndexDocument"] == {"Suffix": "index.html"}
    assert got["ErrorDocument"] == {"Key": "error.html"}
    assert got["RoutingRules"] == _CONFIGURATION["RoutingRules"]


def test_website_configuration_deleted_is_no_such_website_configuration(site):
    s3 = site.s3
    s3.create_bucket(Bucket="www-deleted")
    s3.put_bucket_website(
        Bucket="www-deleted", WebsiteConfiguration={"IndexDocument": {"Suffix": "index.html"}}
    )
    s3.delete_bucket_website(Bucket="www-deleted")
    with pytest.raises(ClientError) as caught:
        s3.get_bucket_website(Bucket="www-deleted")
    assert caught.value.response["Error"]["Code"] == "NoSuchWebsiteConfiguration"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    # No website there now: the endpoint says so, as an HTML page.
    reply = site.get("/", host=f"www-deleted.{DOMAIN}")
    assert reply.status == 404
    assert reply.headers["x-amz-error-code"] == "NoSuchWebsiteConfiguration"


def test_put_bucket_website_refuses_what_aws_refuses(site):
    s3 = site.s3
    with pytest.raises(ClientError) as caught:
        s3.put_bucket_website(
            Bucket=site.bucket, WebsiteConfiguration={"IndexDocument": {"Suffix": "a/b"}}
        )
    error = caught.value.response["Error"]
    assert (error["Code"], error["Message"]) == (
        "InvalidArgument",
        "The IndexDocument Suffix is not well formed",
    )
    with pytest.raises(ClientError) as caught:
        s3.put_bucket_website(
            Bucket=site.bucket,
            WebsiteConfiguration={
                "IndexDocument": {"Suffix": "index.html"},
                "RedirectAllRequestsTo": {"HostName": "example.org"},
            },
        )
    assert caught.value.response["Error"]["Code"] == "InvalidArgument"
    # The bucket's configuration is unchanged.
    assert s3.get_bucket_website(Bucket=site.bucket)["ErrorDocument"] == {"Key": "error.html"}


def test_website_redirect_location_is_returned_by_head_and_get(site):
    head = site.s3.head_object(Bucket=site.bucket, Key="redir.html")
    assert head["WebsiteRedirectLocation"] == "/docs/page.html"


def test_a_redirect_location_is_a_path_or_an_absolute_url(site):
    for refused in ("elsewhere.html", "ftp://example.com/"):
        with pytest.raises(ClientError) as caught:
            site.s3.put_object(
                Bucket=site.bucket, Key="bad.html", Body=b"", WebsiteRedirectLocation=refused
            )
        error = caught.value.response["Error"]
        assert (error["Code"], error["Message"]) == (
            "InvalidRedirectLocation",
            "The website redirect location must have a prefix of 'http://' or 'https://' or '/'.",
        )
    site.s3.put_object(
        Bucket=site.bucket,
        Key="abs.html",
        Body=b"",
        WebsiteRedirectLocation="https://example.net/x",
    )
    reply = site.get("/abs.html")
    assert (reply.status, reply.headers["location"]) == (301, "https://example.net/x")


def test_redirect_location_of_a_multipart_upload_and_a_copy(site):
    s3 = site.s3
    upload = s3.create_multipart_upload(
        Bucket=site.bucket, Key="mp.html", WebsiteRedirectLocation="/docs/"
    )
    part = s3.upload_part(
        Bucket=site.bucket, Key="mp.html", UploadId=upload["UploadId"], PartNumber=1, Body=b"x"
    )
    s3.complete_multipart_upload(
        Bucket=site.bucket,
        Key="mp.html",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert s3.head_object(Bucket=site.bucket, Key="mp.html")["WebsiteRedirectLocation"] == "/docs/"
    s3.copy_object(
        Bucket=site.bucket,
        Key="copied.html",
        CopySource={"Bucket": site.bucket, "Key": "docs/page.html"},
        WebsiteRedirectLocation="/",
    )
    head = s3.head_object(Bucket=site.bucket, Key="copied.html")
    assert head["WebsiteRedirectLocation"] == "/"
    reply = site.get("/mp.html")
    assert (reply.status, reply.headers["location"]) == (301, "/docs/")


def test_redirect_location_of_a_post_form(site):
    post = site.s3.generate_presigned_post(
        site.bucket,
        "form.html",
        Fields={"x-amz-website-redirect-location": "/docs/page.html"},
        Conditions=[{"x-amz-website-redirect-location": "/docs/page.html"}],
    )
    boundary = "s3gw-website-form"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        for name, value in post["fields"].items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\n'
        f"x\r\n--{boundary}--\r\n"
    )
    reply = raw.send(
        "POST",
        post["url"],
        {"Content-Type": f"multipart/form-data; boundary={boundary}"},
        "".join(parts).encode(),
    )
    assert reply.status == 204, reply.body
    head = site.s3.head_object(Bucket=site.bucket, Key="form.html")
    assert head["WebsiteRedirectLocation"] == "/docs/page.html"
    reply = site.get("/form.html", method="HEAD")
    assert (reply.status, reply.headers["location"]) == (301, "/docs/page.html")


# --- the website endpoint ---------------------------------------------------------------------


def test_root_serves_the_index_document(site):
    reply = site.get("/")
    assert reply.status == 200
    assert reply.body == b"<h1>home</h1>"
    assert reply.headers["content-type"].startswith("text/html")


def test_a_folder_serves_its_index_document(site):
    reply = site.get("/docs/")
    assert (reply.status, reply.body) == (200, b"<h1>docs</h1>")
    assert site.get("/docs/page.html").body == b"<p>a page</p>"


def test_a_folder_without_its_slash_is_redirected_there(site):
    reply = site.get("/docs")
    assert reply.status == 302
    assert reply.headers["location"] == "/docs/"


def test_a_host_that_is_the_bucket_name_serves_it(site):
    reply = site.get("/", host=site.bucket)
    assert (reply.status, reply.body) == (200, b"<h1>home</h1>")


def test_a_missing_key_gets_the_error_document_with_404(site):
    reply = site.get("/nothing/here.html")
    assert reply.status == 404
    assert reply.body == b"<p>not here</p>"


def test_a_missing_key_is_403_where_no_one_may_list_the_bucket(site):
    # "If you don't have the s3:ListBucket permission, Amazon S3 returns an HTTP status code
    # 403" (GetObject): the website's anonymous reads are judged alike.
    s3 = site.s3
    s3.create_bucket(Bucket="www-unlisted")
    _public(s3, "www-unlisted", listed=False)
    s3.put_object(Bucket="www-unlisted", Key="index.html", Body=b"unlisted home")
    s3.put_object(Bucket="www-unlisted", Key="docs/index.html", Body=b"unlisted docs")
    s3.put_bucket_website(
        Bucket="www-unlisted", WebsiteConfiguration={"IndexDocument": {"Suffix": "index.html"}}
    )
    host = f"www-unlisted.{DOMAIN}"
    reply = site.get("/missing.html", host=host)
    assert reply.status == 403
    assert reply.headers["x-amz-error-code"] == "AccessDenied"
    assert site.get("/", host=host).body == b"unlisted home"
    reply = site.get("/docs", host=host)  # the folder's index is found all the same
    assert (reply.status, reply.headers["location"]) == (302, "/docs/")
    # The S3 endpoint answers the same anonymous GetObject alike.
    reply = raw.send("GET", f"{site.server.url}/www-unlisted/missing.html")
    assert (reply.status, reply.code) == (403, "AccessDenied")
    reply = raw.send("GET", f"{site.server.url}/{site.bucket}/missing.html")
    assert (reply.status, reply.code) == (404, "NoSuchKey")


def test_a_private_object_is_403_without_its_bytes(site):
    reply = site.get("/private/secret.html")
    assert reply.status == 403
    assert b"top secret" not in reply.body
    assert reply.body == b"<p>not here</p>"  # the error document, with the original status


def test_html_error_page_when_there_is_no_error_document(site):
    s3 = site.s3
    s3.create_bucket(Bucket="www-plain")
    _public(s3, "www-plain")
    s3.put_bucket_website(
        Bucket="www-plain", WebsiteConfiguration={"IndexDocument": {"Suffix": "index.html"}}
    )
    reply = site.get("/missing.html", host=f"www-plain.{DOMAIN}")
    assert reply.status == 404
    assert reply.headers["x-amz-error-code"] == "NoSuchKey"
    assert reply.headers["x-amz-error-message"] == "The specified key does not exist."
    assert reply.headers["content-type"].startswith("text/html")
    assert b"<h1>404 Not Found</h1>" in reply.body
    assert b"Code: NoSuchKey" in reply.body
    # Never a listing: an empty site's root is the index document's 404.
    reply = site.get("/", host=f"www-plain.{DOMAIN}")
    assert reply.status == 404
    assert b"ListBucketResult" not in reply.body


def test_a_bucket_that_blocks_public_access_serves_nothing(site):
    # The website configuration does not make a bucket public: authorisation decides, and a
    # new bucket blocks public access (AWS's defaults) whatever its policy says.
    s3 = site.s3
    s3.create_bucket(Bucket="www-blocked")
    s3.put_object(Bucket="www-blocked", Key="index.html", Body=b"blocked bytes")
    s3.put_bucket_website(
        Bucket="www-blocked", WebsiteConfiguration={"IndexDocument": {"Suffix": "index.html"}}
    )
    reply = site.get("/", host=f"www-blocked.{DOMAIN}")
    assert reply.status == 403
    assert reply.headers["x-amz-error-code"] == "AccessDenied"
    assert b"blocked bytes" not in reply.body


def test_the_error_document_goes_without_the_requests_range_or_conditions(site):
    reply = site.get("/nothing.html", Range="bytes=0-1", **{"If-None-Match": "*"})
    assert (reply.status, reply.body) == (404, b"<p>not here</p>")


def test_unknown_bucket_is_no_such_bucket(site):
    reply = site.get("/", host=f"no-such-bucket.{DOMAIN}")
    assert reply.status == 404
    assert reply.headers["x-amz-error-code"] == "NoSuchBucket"


def test_routing_rule_by_key_prefix_replaces_the_prefix(site):
    reply = site.get("/old/page.html")
    assert reply.status == 301
    assert reply.headers["location"] == f"http://{site.bucket}.{DOMAIN}/docs/page.html"


def test_routing_rule_replacing_the_key_with_host_protocol_and_code(site):
    reply = site.get("/moved-away")
    assert reply.status == 302
    assert reply.headers["location"] == "https://example.com/docs/page.html"


def test_routing_rule_by_error_code(site):
    reply = site.get("/gone/thing.html")
    assert reply.status == 301
    assert reply.headers["location"] == "http://archive.example.com/gone/thing.html"


def test_an_object_redirect_location_is_a_301(site):
    reply = site.get("/redir.html")
    assert reply.status == 301
    assert reply.headers["location"] == "/docs/page.html"


def test_redirect_all_requests(site):
    reply = site.get("/a/b.html", host=f"{site.everything}.{DOMAIN}")
    assert reply.status == 301
    assert reply.headers["location"] == "https://example.org/a/b.html"


def test_methods_other_than_get_and_head_are_405(site):
    for method in ("PUT", "POST", "DELETE"):
        reply = site.get("/index.html", method=method)
        assert reply.status == 405, method
        assert reply.headers["x-amz-error-code"] == "MethodNotAllowed"
    assert site.s3.get_object(Bucket=site.bucket, Key="index.html")["Body"].read() == (
        b"<h1>home</h1>"
    )


def test_head(site):
    reply = site.get("/docs/page.html", method="HEAD")
    assert reply.status == 200
    assert reply.body == b""
    assert reply.headers["content-length"] == str(len(b"<p>a page</p>"))
    assert reply.headers["etag"]
    missing = site.get("/nothing.html", method="HEAD")
    assert (missing.status, missing.body) == (404, b"")


def test_conditional_get_is_304(site):
    etag = site.get("/docs/page.html").headers["etag"]
    reply = site.get("/docs/page.html", **{"If-None-Match": etag})
    assert reply.status == 304
    assert reply.body == b""


def test_a_range(site):
    reply = site.get("/data.bin", Range="bytes=10-19")
    assert reply.status == 206
    assert reply.body == bytes(range(10, 20))
    assert reply.headers["content-range"] == "bytes 10-19/256"


def test_cors_rules_apply_as_on_the_s3_endpoint(site):
    site.s3.put_bucket_cors(
        Bucket=site.bucket,
        CORSConfiguration={
            "CORSRules": [{"AllowedOrigins": ["https://app.example"], "AllowedMethods": ["GET"]}]
        },
    )
    try:
        reply = site.get("/docs/page.html", Origin="https://app.example")
        assert reply.headers["access-control-allow-origin"] == "https://app.example"
        other = site.get("/docs/page.html", Origin="https://other.example")
        assert "access-control-allow-origin" not in other.headers
    finally:
        site.s3.delete_bucket_cors(Bucket=site.bucket)


def test_the_rest_endpoint_is_unchanged(site):
    s3 = site.s3
    listed = s3.list_objects_v2(Bucket=site.bucket)["Contents"]
    assert "index.html" in {o["Key"] for o in listed}
    # The object with a redirect location is an object there, not a redirect.
    got = s3.get_object(Bucket=site.bucket, Key="redir.html")
    assert got["WebsiteRedirectLocation"] == "/docs/page.html"
    # An anonymous GET of the bucket's root on the S3 endpoint is S3's answer (a listing,
    # since anyone may list this bucket), never the index document.
    reply = raw.send("GET", f"{site.server.url}/{site.bucket}/")
    assert reply.status == 200
    assert b"<ListBucketResult" in reply.body
    assert site.get("/").body == b"<h1>home</h1>"
    assert raw.send("GET", f"{site.server.url}/{site.bucket}/index.html").body == b"<h1>home</h1>"


def test_https_with_the_gateways_tls_settings(tmp_path):
    # The website endpoint speaks TLS when the S3 endpoint does, with the same certificate.
    data = tmp_path / "data"
    server = GatewayProcess(
        data, None, "--tls-self-signed", "--website-address", "127.0.0.1:0"
    ).start()
    try:
        found = re.search(r"website endpoint on https://127\.0\.0\.1:(\d+)", "".join(server.log))
        assert found, server.log
        cert = data / "tls" / "localhost.crt"
        s3 = server.client(verify=str(cert))
        s3.create_bucket(Bucket="www-tls")
        _public(s3, "www-tls")
        s3.put_object(Bucket="www-tls", Key="index.html", Body=b"over tls")
        s3.put_bucket_website(
            Bucket="www-tls", WebsiteConfiguration={"IndexDocument": {"Suffix": "index.html"}}
        )
        context = ssl.create_default_context(cafile=str(cert))
        context.check_hostname = False  # the certificate names localhost, not the bucket
        conn = http.client.HTTPSConnection("127.0.0.1", int(found.group(1)), context=context)
        try:
            conn.request("GET", "/", headers={"Host": "www-tls"})
            reply = conn.getresponse()
            assert (reply.status, reply.read()) == (200, b"over tls")
        finally:
            conn.close()
    finally:
        server.stop()


def test_server_access_log_records_website_requests(tmp_path):
    # One process: the flush (RGW's POST ?logging) writes what the process answering it holds.
    server = GatewayProcess(
        tmp_path / "data", None, "--workers", "1", "--website-address", "127.0.0.1:0"
    ).start()
    try:
        found = _WEBSITE.search("".join(server.log))
        assert found, server.log
        s3 = server.client()
        s3.create_bucket(Bucket="www-logged")
        s3.create_bucket(Bucket="www-logs")
        _public(s3, "www-logged")
        s3.put_object(Bucket="www-logged", Key="index.html", Body=b"logged")
        s3.put_bucket_website(
            Bucket="www-logged", WebsiteConfiguration={"IndexDocument": {"Suffix": "index.html"}}
        )
        s3.put_bucket_logging(
            Bucket="www-logged",
            BucketLoggingStatus={
                "LoggingEnabled": {"TargetBucket": "www-logs", "TargetPrefix": "log/"}
            },
        )
        site = Site(server, found.group(1), s3, "www-logged", "")
        assert site.get("/", host="www-logged").status == 200
        assert site.get("/missing.html", host="www-logged", method="HEAD").status == 404
        url = f"{server.url}/www-logged?logging"
        reply = raw.send("POST", url, raw.sign("POST", url))
        assert reply.status == 200, reply.body
        written = re.search(rb"<FlushedLoggingObject>(.*)</FlushedLoggingObject>", reply.body)
        assert written is not None and written[1], reply.body
        text = s3.get_object(Bucket="www-logs", Key=written[1].decode())["Body"].read().decode()
        assert 'WEBSITE.GET.OBJECT - "GET / HTTP/1.1" 200' in text
        assert "WEBSITE.HEAD.OBJECT missing.html" in text
        assert " 404 NoSuchKey " in text
    finally:
        server.stop()


def test_the_console_turns_a_bucket_website_on_and_off(tmp_path):
    (tmp_path / "users.toml").write_text(USERS)
    env = {
        "S3GW_USERS": str(tmp_path / "users.toml"),
        "S3GW_ACCESS_KEY": "",
        "S3GW_SECRET_KEY": "",
        "S3GW_CONSOLE_ADDRESS": "127.0.0.1:0",
        "S3GW_WEBSITE_ADDRESS": "127.0.0.1:0",
        "S3GW_WEBSITE_DOMAIN": DOMAIN,
    }
    server = GatewayProcess(tmp_path / "data", env).start()
    try:
        found = _WEBSITE.search("".join(server.log))
        assert found, server.log
        s3 = server.client(*ALICE)
        s3.create_bucket(Bucket="www-console")
        _public(s3, "www-console")
        s3.put_object(Bucket="www-console", Key="home.html", Body=b"console home")
        session = Session(Console(server), ALICE)
        page = session.get("/bucket", name="www-console")[1]
        assert "Website hosting is off." in page
        # A suffix with a slash is refused as PutBucketWebsite refuses it; nothing is set.
        status, page = session.act("/bucket/website", bucket="www-console", index="a/b.html")
        assert status == 400 and "The IndexDocument Suffix is not well formed" in page
        with pytest.raises(ClientError):
            s3.get_bucket_website(Bucket="www-console")
        status, page = session.act(
            "/bucket/website", bucket="www-console", index="home.html", error="oops.html"
        )
        assert status == 200
        port = found.group(1).rsplit(":", 1)[1]
        assert f"Its address: http://www-console.{DOMAIN}:{port}/" in page
        got = s3.get_bucket_website(Bucket="www-console")
        assert got["IndexDocument"] == {"Suffix": "home.html"}
        assert got["ErrorDocument"] == {"Key": "oops.html"}
        site = Site(server, found.group(1), s3, "www-console", "")
        assert site.get("/").body == b"console home"
        status, page = session.act("/bucket/website", bucket="www-console", off="1")
        assert status == 200 and "Website hosting is off." in page
        assert site.get("/").headers["x-amz-error-code"] == "NoSuchWebsiteConfiguration"
    finally:
        server.stop()
