"""The web console in a real browser (headless Chromium through chromedriver, as in
test_browser.py), against a gateway with its default worker count and two users of a users
file: sign in, create a bucket, upload a 20 MiB file (multipart, with progress) and a small
one, find them listed, open one, download both and compare bytes, make a share link and fetch
it without a session, delete, sign out; the second user does not see the first's bucket; a
request without the CSRF token is refused.

S3GW_CONSOLE_SCREENSHOTS=DIR saves the screenshots of docs/console.md into DIR (the docs'
own are docs/console/).
"""

from __future__ import annotations

import base64
import hashlib
import html
import http.cookiejar
import json
import os
import re
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.integration.test_startup import NO_KEYS, one_line
from tests.integration.test_startup import gateway as run_gateway
from tests.server import GatewayProcess
from tests.webdriver import Browser, browser_for_test

USERS = """
[[user]]
access_key = "CONSOLEALICE00000001"
secret_key = "alice-secret-alice"
display_name = "alice"
canonical_id = "a11ce00000000000000000000000000000000000000000000000000000000001"

[[user]]
access_key = "CONSOLEBOB0000000001"
secret_key = "bob-secret-bob-bob"
display_name = "bob"
canonical_id = "b0b0000000000000000000000000000000000000000000000000000000000002"
"""
ALICE = ("CONSOLEALICE00000001", "alice-secret-alice")
BOB = ("CONSOLEBOB0000000001", "bob-secret-bob-bob")
BOB_ID = "b0b0000000000000000000000000000000000000000000000000000000000002"
BIG = 20 * 1024 * 1024
_CONSOLE = re.compile(r"console on (https?://\S+)")


class Console:
    def __init__(self, server: GatewayProcess) -> None:
        self.server = server
        found = next(m for line in server.log if (m := _CONSOLE.search(line)))
        self.url = found.group(1)


def _start(tmp: Path, **env: str) -> GatewayProcess:
    """A gateway of the two users, its console on (and its default worker count)."""
    (tmp / "users.toml").write_text(USERS)
    users = {"S3GW_USERS": str(tmp / "users.toml"), "S3GW_ACCESS_KEY": "", "S3GW_SECRET_KEY": ""}
    return GatewayProcess(
        tmp / "data", {**users, "S3GW_CONSOLE_ADDRESS": "127.0.0.1:0", **env}
    ).start()


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    # SSE-C over HTTP: for the customer-key object the console cannot read.
    server = _start(tmp_path_factory.mktemp("console"), S3GW_SSE_C_OVER_HTTP="allow")
    yield Console(server)
    server.stop()


@pytest.fixture
def browser() -> Iterator[Browser]:
    opened = browser_for_test()
    opened.set_size(1280, 900)
    yield opened
    opened.close()


def _shoot(browser: Browser, name: str) -> None:
    where = os.environ.get("S3GW_CONSOLE_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        (Path(where) / f"{name}.png").write_bytes(browser.screenshot())


def _text(browser: Browser, selector: str = "main") -> str:
    return str(browser.run(f"return document.querySelector({selector!r}).innerText;"))


def _sign_in(browser: Browser, console: Console, keys: tuple[str, str], shot: bool = False) -> None:
    browser.get(console.url + "/signin")
    browser.type("input[name=access_key]", keys[0])
    browser.type("input[name=secret_key]", keys[1])
    if shot:
        _shoot(browser, "signin")
    browser.click("form[action='/signin'] button")
    browser.wait_for_url(console.url + "/buckets")


def _download(browser: Browser, href: str) -> dict[str, Any]:
    """Fetch `href` from the page (with its session), as bytes in base64 and their SHA-256."""
    return browser.run_async(
        """const done = arguments[arguments.length - 1];
        fetch(arguments[0]).then(async (r) => {
          const bytes = new Uint8Array(await r.arrayBuffer());
          const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
          const hex = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
          let small = null;
          if (bytes.length < 1000000) {
            let s = ""; for (const b of bytes) s += String.fromCharCode(b); small = btoa(s);
          }
          done({status: r.status, sha256: hex, base64: small,
                disposition: r.headers.get("Content-Disposition")});
        }, (e) => done({error: String(e)}));""",
        href,
    )


def _post(browser: Browser, path: str, fields: dict[str, str], csrf_header: bool = False) -> int:
    """A POST from the page's own origin, as a forged form would send it (no token)."""
    return int(
        browser.run_async(
            """const [path, fields, header, done] = arguments;
            const headers = {};
            if (header) headers["X-CSRF-Token"] = document.querySelector('meta[name=csrf]').content;
            fetch(path, {method: "POST", body: new URLSearchParams(fields), headers: headers,
                         redirect: "manual"})
              .then((r) => done(r.status), (e) => done(String(e)));""",
            path,
            fields,
            csrf_header,
        )
    )


def test_console_end_to_end_in_a_browser(console, browser, tmp_path):
    alice = console.server.client(*ALICE)
    bucket = "console-photos"

    # Sign-in refuses wrong keys, with a clear message.
    browser.get(console.url + "/buckets")
    browser.wait_for_url(console.url + "/signin")  # no session: to the sign-in page
    browser.type("input[name=access_key]", ALICE[0])
    browser.type("input[name=secret_key]", "wrong")
    browser.click("form[action='/signin'] button")
    browser.wait_for_text("not a user's of this gateway")

    _sign_in(browser, console, ALICE, shot=True)
    cookie = browser.run("return document.cookie;")
    assert "s3gw_console" not in cookie  # HttpOnly: the page's script cannot read it

    # Create a bucket.
    browser.type("input[name=bucket]", bucket)
    browser.click("form[action='/buckets'] button")
    browser.wait_for_url(f"{console.url}/bucket?name={bucket}")
    assert bucket in [b["Name"] for b in alice.list_buckets()["Buckets"]]

    # Upload a 20 MiB file and a small one, picked as a user picks them.
    big, small = tmp_path / "big.bin", tmp_path / "note.txt"
    big.write_bytes(os.urandom(BIG))
    small.write_bytes(b"a small note\n" * 10)
    browser.type("input[type=file]", f"{big}\n{small}")
    browser.click("#upload button")
    deadline = time.monotonic() + 120
    while True:
        items = browser.run(
            """return Array.from(document.querySelectorAll('#progress li[data-events]'),
                (li) => ({state: li.className, text: li.innerText, events: li.dataset.events,
                          value: li.querySelector('progress').value,
                          max: li.querySelector('progress').max}));"""
        )
        if len(items) == 2 and all(i["state"] for i in items):
            break
        assert time.monotonic() < deadline, items
        time.sleep(0.2)
    assert [i["state"] for i in items] == ["done", "done"], items
    _shoot(browser, "upload")
    assert items[0]["max"] == BIG and items[0]["value"] == BIG
    assert int(items[0]["events"]) >= 3  # progress reported as the parts went
    head = alice.head_object(Bucket=bucket, Key="big.bin")
    assert head["ContentLength"] == BIG
    assert head["ETag"].endswith('-3"')  # three 8 MiB parts: a multipart upload
    assert alice.get_object(Bucket=bucket, Key="note.txt")["Body"].read() == small.read_bytes()

    # Both are listed.
    browser.get(f"{console.url}/bucket?name={bucket}")
    listed = _text(browser, "#objects")
    assert "big.bin" in listed and "note.txt" in listed and "20.0 MiB" in listed
    _shoot(browser, "bucket")

    # Open one: its ETag and size are shown.
    browser.click("#objects a[href*='note.txt']")
    browser.wait_for_url(f"{console.url}/object?")
    page = _text(browser)
    assert head["ETag"] not in page
    assert alice.head_object(Bucket=bucket, Key="note.txt")["ETag"].strip('"') in page

    # Download both through the console and compare bytes.
    got = _download(browser, f"/download?bucket={bucket}&key=note.txt")
    assert got["status"] == 200 and base64.b64decode(got["base64"]) == small.read_bytes()
    assert "note.txt" in got["disposition"]
    got = _download(browser, f"/download?bucket={bucket}&key=big.bin")
    assert got["status"] == 200
    assert got["sha256"] == hashlib.sha256(big.read_bytes()).hexdigest()

    # A share link, fetched with no session and no keys.
    browser.run("document.querySelector('select[name=expires]').value = '3600';")
    browser.click("form[action='/object/share'] button")
    browser.wait_for("#share-link")
    link = str(browser.run("return document.getElementById('share-link').value;"))
    assert "X-Amz-Expires=3600" in link and link.startswith(console.server.url)
    with urllib.request.urlopen(link) as answer:
        assert answer.read() == small.read_bytes()
    _shoot(browser, "object")

    # Requests without the CSRF token are refused, and change nothing.
    assert _post(browser, "/buckets", {"bucket": "forged-bucket"}) == 403
    assert _post(browser, "/buckets", {"bucket": "forged-bucket", "csrf": "0" * 64}) == 403
    assert "forged-bucket" not in [b["Name"] for b in alice.list_buckets()["Buckets"]]
    refused = browser.run_async(
        """const done = arguments[arguments.length - 1];
        fetch(arguments[0], {method: "PUT", body: "x"}).then((r) => done(r.status));""",
        f"/api/object?bucket={bucket}&key=forged.txt",
    )
    assert refused == 403
    with pytest.raises(ClientError):
        alice.head_object(Bucket=bucket, Key="forged.txt")

    # Delete from the object page.
    browser.click("form[action='/object/delete'] button")
    browser.wait_for_url(f"{console.url}/bucket?name={bucket}")
    assert "note.txt" not in _text(browser, "#objects")
    with pytest.raises(ClientError):
        alice.head_object(Bucket=bucket, Key="note.txt")

    # Health, and the page at a phone's width: no horizontal scrolling.
    browser.get(console.url + "/health")
    assert "ready" in _text(browser)
    _shoot(browser, "health")
    browser.get(console.url + "/buckets")
    _shoot(browser, "buckets")
    browser.set_size(390, 844)
    browser.get(f"{console.url}/bucket?name={bucket}")
    overflow = browser.run(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth;"
    )
    assert overflow <= 0
    _shoot(browser, "phone")
    browser.set_size(1280, 900)

    # Sign out: the session is gone from the browser.
    browser.click("form[action='/signout'] button")
    browser.wait_for_url(console.url + "/signin")
    browser.get(console.url + "/buckets")
    browser.wait_for_url(console.url + "/signin")

    # The second user sees none of the first's buckets, and may not open it.
    _sign_in(browser, console, BOB)
    assert bucket not in _text(browser)
    browser.get(f"{console.url}/bucket?name={bucket}")
    assert "AccessDenied" in _text(browser)
    got = _download(browser, f"/download?bucket={bucket}&key=big.bin")
    assert got["status"] == 403

    # Every action is in the access log, with its user.
    log = "".join(console.server.log)
    assert re.search(r"ConsoleCompleteMultipartUpload POST \S+ 200 .* user=CONSOLEALICE", log)
    assert re.search(r"ConsoleDeleteObject POST /object/delete 303 .* user=CONSOLEALICE", log)
    assert re.search(r"ConsoleListObjectsV2 GET \S+ 403 .* user=CONSOLEBOB", log)


def test_console_is_off_unless_asked(gateway):
    assert not any("console on" in line for line in gateway.log)


def test_console_sign_in_needs_its_form_token(console):
    # A sign-in posted from elsewhere (no pre-session cookie, no token) signs no one in.
    data = f"access_key={ALICE[0]}&secret_key={ALICE[1]}".encode()
    request = urllib.request.Request(console.url + "/signin", data=data, method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request)
    assert refused.value.code == 403
    assert "s3gw_console=" not in (refused.value.headers.get("Set-Cookie") or "").split(";")[0]


# --- the same console without a browser: what the pages show and refuse ---------------------


class Session:
    """A signed-in console session over plain HTTP (urllib, with a cookie jar)."""

    def __init__(self, console: Console, keys: tuple[str, str]) -> None:
        self.url = console.url
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        form = self.get("/signin")[1]
        token = re.search(r'name="csrf" value="([^"]+)"', form)
        assert token is not None
        status, page = self.post(
            "/signin", {"csrf": token.group(1), "access_key": keys[0], "secret_key": keys[1]}
        )
        assert status == 200 and "Sign out" in page, page

    def _open(self, request: urllib.request.Request) -> tuple[int, str]:
        try:
            with self.opener.open(request) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def get(self, path: str, **query: str) -> tuple[int, str]:
        where = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        return self._open(urllib.request.Request(where))

    def csrf(self) -> str:
        found = re.search(r'<meta name="csrf" content="([^"]+)"', self.get("/buckets")[1])
        assert found is not None
        return found.group(1)

    def post(self, path: str, fields: dict[str, str]) -> tuple[int, str]:
        data = urllib.parse.urlencode(fields).encode()
        return self._open(urllib.request.Request(self.url + path, data=data, method="POST"))

    def act(self, path: str, **fields: str) -> tuple[int, str]:
        """A form of the console posted with its CSRF token."""
        return self.post(path, {"csrf": self.csrf(), **fields})


@pytest.fixture(scope="module")
def alice_s3(console: Console) -> Any:
    return console.server.client(*ALICE)


def _cells(page: str) -> list[str]:
    return [html.unescape(c) for c in re.findall(r"<td><a href=[^>]*>([^<]*)</a>", page)]


def test_folders_page_through_the_listing_and_search_by_prefix(console, alice_s3):
    alice_s3.create_bucket(Bucket="console-many")
    for n in range(120):
        alice_s3.put_object(Bucket="console-many", Key=f"many/{n:04}", Body=b"x")
    alice_s3.put_object(Bucket="console-many", Key="other/x", Body=b"x")
    alice_s3.put_object(Bucket="console-many", Key="top <&>.txt", Body=b"x")
    me = Session(console, ALICE)
    status, page = me.get("/bucket", name="console-many")
    assert status == 200
    assert _cells(page) == ["📁 many/", "📁 other/", "top <&>.txt"]  # escaped, shown as is
    # Counted through the listing (the catalog keeps no per-bucket totals).
    assert "122 objects · 122 B" in page
    status, page = me.get("/buckets")
    assert status == 200 and "122 objects · 122 B" in page
    status, page = me.get("/bucket", name="console-many", prefix="many/")
    assert _cells(page) == [f"{n:04}" for n in range(100)]
    after = re.search(r'rel="next" href="([^"]+)"', page)
    assert after is not None
    status, page = me.get(html.unescape(after.group(1)))
    assert _cells(page) == [f"{n:04}" for n in range(100, 120)]
    assert 'rel="next"' not in page
    status, page = me.get("/bucket", name="console-many", prefix="many/011")
    assert _cells(page) == [f"{n:04}" for n in range(110, 120)]


def test_versions_are_listed_and_one_is_deleted(console, alice_s3):
    alice_s3.create_bucket(Bucket="console-versions")
    alice_s3.put_bucket_versioning(
        Bucket="console-versions", VersioningConfiguration={"Status": "Enabled"}
    )
    first = alice_s3.put_object(Bucket="console-versions", Key="k", Body=b"one")["VersionId"]
    second = alice_s3.put_object(Bucket="console-versions", Key="k", Body=b"two")["VersionId"]
    me = Session(console, ALICE)
    status, page = me.get("/object", bucket="console-versions", key="k")
    assert status == 200 and first in page and second in page
    status, page = me.get("/object", bucket="console-versions", key="k", version=first)
    assert status == 200 and hashlib.md5(b"one").hexdigest() in page
    status, _ = me.act("/object/delete", bucket="console-versions", key="k", version=first)
    assert status == 200
    left = alice_s3.list_object_versions(Bucket="console-versions")["Versions"]
    assert [v["VersionId"] for v in left] == [second]


def test_copy_and_rename(console, alice_s3):
    alice_s3.create_bucket(Bucket="console-copy")
    put = alice_s3.put_object(Bucket="console-copy", Key="a.txt", Body=b"copied bytes")
    me = Session(console, ALICE)
    status, page = me.act(
        "/object/copy", bucket="console-copy", key="a.txt", target_bucket="console-copy",
        target_key="b.txt",
    )  # fmt: skip
    assert status == 200, page
    copy = alice_s3.get_object(Bucket="console-copy", Key="b.txt")
    assert copy["Body"].read() == b"copied bytes" and copy["ETag"] == put["ETag"]
    status, page = me.act(
        "/object/copy", bucket="console-copy", key="b.txt", target_bucket="console-copy",
        target_key="dir/c.txt", move="1",
    )  # fmt: skip
    assert status == 200, page
    keys = [o["Key"] for o in alice_s3.list_objects_v2(Bucket="console-copy")["Contents"]]
    assert keys == ["a.txt", "dir/c.txt"]


def _blob_files(console: Console) -> set[Path]:
    return {p for p in (console.server.data / "blobs").rglob("*") if p.is_file()}


def test_the_console_writes_as_s3_does(console, alice_s3):
    """The console writes through S3's one write path: a bucket it makes has S3's defaults
    (SSE-C refused), a copy of a multipart and of an encrypted object shares the source's
    blobs (no new blob file) with the source's ETag, and an upload gets the default
    CRC64NVME checksum that a PutObject without one gets."""
    me = Session(console, ALICE)
    status, page = me.act("/buckets", bucket="console-made")
    assert status == 200, page
    with pytest.raises(ClientError) as refused:
        alice_s3.put_object(
            Bucket="console-made", Key="k", Body=b"x", SSECustomerAlgorithm="AES256",
            SSECustomerKey="k" * 32,
        )  # fmt: skip
    error = refused.value.response["Error"]
    assert error["Code"] == "AccessDenied" and "blocked for this bucket" in error["Message"]
    assert "console-made" in [b["Name"] for b in alice_s3.list_buckets()["Buckets"]]
    # A two-part object and an SSE-S3 one, copied in the console.
    upload = alice_s3.create_multipart_upload(Bucket="console-made", Key="parts")["UploadId"]
    part = 5 * 1024 * 1024
    etags = [
        alice_s3.upload_part(
            Bucket="console-made",
            Key="parts",
            UploadId=upload,
            PartNumber=n,
            Body=bytes([n]) * part,
        )["ETag"]
        for n in (1, 2)
    ]
    alice_s3.complete_multipart_upload(
        Bucket="console-made", Key="parts", UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]},
    )  # fmt: skip

    def copied_in_the_console(key: str) -> None:
        before = _blob_files(console)
        source = alice_s3.head_object(Bucket="console-made", Key=key)
        status, page = me.act(
            "/object/copy", bucket="console-made", key=key, target_key=f"{key}-copy"
        )
        assert status == 200, page
        assert _blob_files(console) == before, key
        copy = alice_s3.head_object(Bucket="console-made", Key=f"{key}-copy")
        # The ETag S3's CopyObject gives the same source (a multipart one's: the MD5).
        s3_copy = alice_s3.copy_object(
            Bucket="console-made", Key=f"{key}-s3", CopySource=f"console-made/{key}"
        )["CopyObjectResult"]
        assert copy["ETag"] == s3_copy["ETag"]
        assert copy["ContentLength"] == source["ContentLength"]
        assert copy.get("ServerSideEncryption") == source.get("ServerSideEncryption")

    copied_in_the_console("parts")
    # SSE-S3 by default from here on: a copy of an SSE-S3 object then shares its blobs.
    alice_s3.put_bucket_encryption(
        Bucket="console-made",
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        },
    )
    # Larger than the catalog keeps inline: its bytes are a blob file.
    alice_s3.put_object(Bucket="console-made", Key="sealed", Body=b"s" * 200_000)
    copied_in_the_console("sealed")
    sealed = alice_s3.head_object(Bucket="console-made", Key="sealed-copy")
    assert sealed["ServerSideEncryption"] == "AES256"
    got = alice_s3.get_object(Bucket="console-made", Key="parts-copy")["Body"].read()
    assert got == bytes([1]) * part + bytes([2]) * part
    # An upload through the console's script API carries the default checksum.
    request = urllib.request.Request(
        f"{me.url}/api/object?bucket=console-made&key=uploaded.txt", data=b"uploaded",
        method="PUT", headers={"X-CSRF-Token": me.csrf()},
    )  # fmt: skip
    assert me._open(request)[0] == 200
    head = alice_s3.head_object(Bucket="console-made", Key="uploaded.txt", ChecksumMode="ENABLED")
    plain = alice_s3.put_object(
        Bucket="console-made", Key="plain.txt", Body=b"uploaded", ChecksumAlgorithm="CRC64NVME"
    )
    assert head["ChecksumCRC64NVME"] == plain["ChecksumCRC64NVME"]


def test_a_non_empty_bucket_is_not_deleted_and_says_why(console, alice_s3):
    alice_s3.create_bucket(Bucket="console-full")
    alice_s3.put_object(Bucket="console-full", Key="k", Body=b"x")
    status, page = Session(console, ALICE).act("/buckets/delete", bucket="console-full")
    assert status == 409 and "BucketNotEmpty" in page
    alice_s3.head_bucket(Bucket="console-full")


def test_the_bucket_policy_decides_what_another_user_may_do(console, alice_s3):
    alice_s3.create_bucket(Bucket="console-shared")
    alice_s3.put_object(Bucket="console-shared", Key="doc.txt", Body=b"for bob")
    bob = Session(console, BOB)
    assert bob.get("/bucket", name="console-shared")[0] == 403
    assert bob.get("/download", bucket="console-shared", key="doc.txt")[0] == 403
    statement = {
        "Effect": "Allow",
        "Principal": {"AWS": BOB_ID},
        "Action": ["s3:ListBucket", "s3:GetObject"],
        "Resource": ["arn:aws:s3:::console-shared", "arn:aws:s3:::console-shared/*"],
    }
    alice_s3.put_bucket_policy(
        Bucket="console-shared",
        Policy=json.dumps({"Version": "2012-10-17", "Statement": [statement]}),
    )
    status, page = bob.get("/bucket", name="console-shared")
    assert status == 200 and _cells(page) == ["doc.txt"]
    assert bob.get("/download", bucket="console-shared", key="doc.txt") == (200, "for bob")
    # Reading was allowed; deleting was not.
    status, page = bob.act("/object/delete", bucket="console-shared", key="doc.txt")
    assert status == 403 and "AccessDenied" in page
    alice_s3.head_object(Bucket="console-shared", Key="doc.txt")


def test_the_policy_judges_the_console_as_the_browsers_s3_request(console, alice_s3):
    """The console decides with the request context an S3 request from the same browser
    carries: a Deny over plain HTTP, or from outside a network, refuses the owner's listing,
    download, copy and delete through the console as through S3 (the review's H4)."""
    b = "console-conditional"
    alice_s3.create_bucket(Bucket=b)
    alice_s3.put_object(Bucket=b, Key="doc.txt", Body=b"kept")
    me = Session(console, ALICE)
    assert me.get("/download", bucket=b, key="doc.txt") == (200, "kept")
    resources = [f"arn:aws:s3:::{b}", f"arn:aws:s3:::{b}/*"]
    for condition in (
        {"Bool": {"aws:SecureTransport": "false"}},
        {"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}},
        {"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}},
        {"StringLike": {"s3:prefix": ""}},
    ):
        deny = {
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": resources,
            "Condition": condition,
        }
        if "s3:prefix" in condition.get("StringLike", {}):
            deny["Action"] = "s3:ListBucket"  # the top of the bucket, listed by prefix ""
        alice_s3.put_bucket_policy(Bucket=b, Policy=json.dumps({"Statement": [deny]}))
        with pytest.raises(ClientError) as refused:
            # Prefix="" sent, as aws-cli and the console send it: a request without the
            # parameter has no s3:prefix, which no StringLike matches (as on AWS).
            alice_s3.list_objects_v2(Bucket=b, Prefix="")
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
        assert me.get("/bucket", name=b)[0] == 403, condition
        if deny["Action"] == "s3:*":
            assert me.get("/download", bucket=b, key="doc.txt")[0] == 403, condition
            status, page = me.act("/object/delete", bucket=b, key="doc.txt")
            assert status == 403 and "AccessDenied" in page
            status, _ = me.act("/object/copy", bucket=b, key="doc.txt", target_key="copy.txt")
            assert status == 403
        alice_s3.delete_bucket_policy(Bucket=b)
        assert alice_s3.get_object(Bucket=b, Key="doc.txt")["Body"].read() == b"kept"
    assert [o["Key"] for o in alice_s3.list_objects_v2(Bucket=b)["Contents"]] == ["doc.txt"]
    # A copy whose source a Deny names by x-amz-copy-source is refused in the console too.
    deny = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:PutObject",
        "Resource": f"arn:aws:s3:::{b}/*",
        "Condition": {"StringLike": {"s3:x-amz-copy-source": f"{b}/doc*"}},
    }
    alice_s3.put_bucket_policy(Bucket=b, Policy=json.dumps({"Statement": [deny]}))
    status, _ = me.act("/object/copy", bucket=b, key="doc.txt", target_key="copy.txt")
    assert status == 403
    alice_s3.delete_bucket_policy(Bucket=b)
    status, _ = me.act("/object/copy", bucket=b, key="doc.txt", target_key="copy.txt")
    assert status == 200


def test_a_customer_key_object_is_not_downloaded(console, alice_s3):
    alice_s3.create_bucket(Bucket="console-ssec")
    # New buckets block SSE-C writes (AWS's default since April 2026): allowed on this one.
    allow = {"Rules": [{"BlockedEncryptionTypes": {"EncryptionType": ["NONE"]}}]}
    alice_s3.put_bucket_encryption(Bucket="console-ssec", ServerSideEncryptionConfiguration=allow)
    key = b"k" * 32
    alice_s3.put_object(
        Bucket="console-ssec", Key="secret", Body=b"x", SSECustomerAlgorithm="AES256",
        SSECustomerKey=key.decode(),
    )  # fmt: skip
    status, page = Session(console, ALICE).get("/download", bucket="console-ssec", key="secret")
    assert status == 400 and "customer-provided key" in page


# --- failed sign-ins --------------------------------------------------------------------------


def _attempt(console: Console, keys: tuple[str, str]) -> tuple[int, str, str | None]:
    """One sign-in, from a browser of its own: the status, the page and its Retry-After."""
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    with opener.open(console.url + "/signin") as answer:
        token = re.search(r'name="csrf" value="([^"]+)"', answer.read().decode())
    assert token is not None
    fields = {"csrf": token.group(1), "access_key": keys[0], "secret_key": keys[1]}
    data = urllib.parse.urlencode(fields).encode()
    try:
        with opener.open(urllib.request.Request(console.url + "/signin", data=data)) as answer:
            return answer.status, answer.read().decode(), answer.headers.get("Retry-After")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers.get("Retry-After")


def test_failed_sign_ins_are_bounded_per_access_key_and_per_address(tmp_path):
    # One worker: the counts are each worker's own (docs/security.md).
    server = _start(tmp_path, S3GW_WORKERS="1")
    try:
        console = Console(server)
        for _ in range(5):
            assert _attempt(console, (ALICE[0], "wrong-secret"))[0] == 403
        # The sixth is refused unchecked, even with the right secret.
        status, page, retry = _attempt(console, ALICE)
        assert status == 429, page
        assert "Too many failed sign-ins for this access key: try again in 15 minutes" in page
        assert retry is not None and 880 <= int(retry) <= 900

        # Another key from the same address goes on; its success clears its own count (four
        # failures, a sign-in, four more: not over five).
        for _ in range(2):
            for _ in range(4):
                assert _attempt(console, (BOB[0], "wrong-secret"))[0] == 403
            status, page, _ = _attempt(console, BOB)
            assert status == 200 and "Sign out" in page, page

        # But not the address's: 5 + 8 failures so far, 7 more make 20, from any keys.
        for n in range(7):
            assert _attempt(console, (f"NOBODY{n}", "wrong-secret"))[0] == 403
        status, page, retry = _attempt(console, BOB)
        assert status == 429, page
        assert "Too many failed sign-ins from this address" in page
        assert retry is not None and int(retry) > 0
        log = "".join(server.log)
        assert re.search(r"ConsoleSignInThrottled POST /signin 429 ", log), log
    finally:
        server.stop()


# --- start-up mistakes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "said"),
    [
        ("nonsense", "--console-address/S3GW_CONSOLE_ADDRESS must be HOST:PORT"),
        ("127.0.0.1:99999", "--console-address/S3GW_CONSOLE_ADDRESS must be HOST:PORT"),
        ("no.such.host.invalid:1", "--console-address/S3GW_CONSOLE_ADDRESS: cannot resolve"),
        ("S3", "is in use (--console-address/S3GW_CONSOLE_ADDRESS)"),
    ],
)
def test_a_console_address_mistake_is_one_line(tmp_path, address, said):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        if address == "S3":
            address = f"127.0.0.1:{taken.getsockname()[1]}"
        done = run_gateway(
            "serve", "--data", str(tmp_path), "--address", "127.0.0.1:0",
            "--console-address", address, env=NO_KEYS,
        )  # fmt: skip
    assert said in one_line(done)


def test_over_tls_the_session_cookie_is_secure(tmp_path):
    server = _start(tmp_path, S3GW_TLS_SELF_SIGNED="1")
    try:
        console = Console(server)
        assert console.url.startswith("https://")
        context = ssl.create_default_context(cafile=tmp_path / "data" / "tls" / "localhost.crt")
        context.check_hostname = False  # the certificate names localhost; we dial 127.0.0.1
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=context), urllib.request.HTTPCookieProcessor(jar)
        )
        with opener.open(console.url + "/signin") as answer:
            form = answer.read().decode()
        token = re.search(r'name="csrf" value="([^"]+)"', form)
        assert token is not None
        fields = {"csrf": token.group(1), "access_key": ALICE[0], "secret_key": ALICE[1]}
        request = urllib.request.Request(
            console.url + "/signin", data=urllib.parse.urlencode(fields).encode(), method="POST"
        )
        with opener.open(request) as answer:
            assert "Sign out" in answer.read().decode()
        (session,) = [c for c in jar if c.name == "s3gw_console"]
        assert session.secure
        assert session.has_nonstandard_attr("HttpOnly")
        assert session.get_nonstandard_attr("SameSite") == "Strict"
    finally:
        server.stop()
