"""Hostile input: every abuse is answered with S3's error (never a 500) and changes nothing.

Requests are written byte by byte on raw sockets (http.client refuses to send most of this),
signed with botocore's signer where the abuse is not in the signature itself. After each one the
gateway's state is compared with a snapshot (buckets, listings, uploads and their parts) and
the data folder is checked: no tmp file, no orphan blob, counts right.

The gateway is one of this module's own (tests that deliberately leave a body half sent would
otherwise show up as tmp files in other tests' checks). Expected codes are AWS's where AWS is
known to answer them; what aiohttp's HTTP parser refuses before any handler sees it gets S3's
400 BadRequest (or RequestHeaderSectionTooLarge), as XML, and the connection is closed.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import select
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError

from tests import raw
from tests.datadir import inspect
from tests.server import GatewayProcess

BUCKET = "hostile"
VICTIM = b"0123456789"
PART = b"part one"
UNSIGNED = "UNSIGNED-PAYLOAD"
STREAMING_UNSIGNED = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
# How long the test waits for the server to let a stalled client go: its defaults (20 s, as
# AWS's RequestTimeout; tests/unit/test_cli.py holds the values) time it out well within this,
# and a server that holds the client for ever fails here rather than hanging the test. The
# event is asserted (the answer and the close), not how soon it came.
LET_GO_SECONDS = 120


# --- the wire ----------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int | None  # None: the connection closed (or was reset) without an answer
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def code(self) -> str | None:
        start = self.body.find(b"<Code>")
        if start < 0:
            return None
        return self.body[start + 6 : self.body.find(b"</Code>")].decode()

    def __str__(self) -> str:
        return f"{self.status} {self.code or self.body[:120]!r}"


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except (ConnectionResetError, TimeoutError):
        return b""


class Replies:
    """The responses on one connection, in order. Bytes read past one response are the start of
    the next: two answers can come in one read (a busy server writes both before the client
    reads), and a reader that dropped the rest of its read would lose the second."""

    def __init__(self, sock: socket.socket, timeout: float = 15) -> None:
        self.sock = sock
        self.pending = b""  # read from the socket, not yet part of an answer
        sock.settimeout(timeout)

    def _more(self) -> bool:
        data = _recv(self.sock)
        self.pending += data
        return bool(data)

    def next(self) -> Answer:
        """One HTTP response (a 100 Continue is skipped), its body by Content-Length."""
        while True:
            while b"\r\n\r\n" not in self.pending:
                if not self._more():
                    return Answer(None)
            head, _, self.pending = self.pending.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            if status != 100:
                break
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(self.pending) < length and self._more():
            pass
        body, self.pending = self.pending[:length], self.pending[length:]
        return Answer(status, headers, body)

    def until_closed(self) -> bytes:
        """Everything not yet read as an answer, up to the server's closing the connection."""
        while self._more():
            pass
        rest, self.pending = self.pending, b""
        return rest


def read_answer(sock: socket.socket, timeout: float = 15) -> Answer:
    """The one response a connection is expected to carry."""
    return Replies(sock, timeout).next()


def wire(
    method: str, target: str, headers: list[tuple[str, str | bytes]], body: bytes = b""
) -> bytes:
    """A request exactly as given: nothing added, nothing checked."""
    lines = [f"{method} {target} HTTP/1.1".encode()]
    for name, value in headers:
        lines.append(
            name.encode() + b": " + (value if isinstance(value, bytes) else value.encode())
        )
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def connect(base: str, timeout: float = 15) -> socket.socket:
    parts = urlsplit(base)
    assert parts.hostname is not None and parts.port is not None
    return socket.create_connection((parts.hostname, parts.port), timeout=timeout)


def exchange(base: str, request: bytes, timeout: float = 15) -> Answer:
    with connect(base, timeout) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(request)
        return read_answer(sock, timeout)


# --- the gateway and its state ----------------------------------------------------------------


@dataclass
class World:
    server: GatewayProcess
    s3: Any
    upload_id: str  # a pending upload of "mp" with one part

    @property
    def base(self) -> str:
        return self.server.url

    @property
    def netloc(self) -> str:
        return urlsplit(self.server.url).netloc

    def signed(
        self,
        method: str,
        target: str,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        payload_hash: str | None = None,
        length: bool = True,
        extra: list[tuple[str, str | bytes]] | None = None,
    ) -> bytes:
        """A SigV4-signed request; `extra` headers are added unsigned, after the signed ones."""
        signed = raw.sign(method, self.base + target, dict(headers or {}), body, payload_hash)
        lines: list[tuple[str, str | bytes]] = [("Host", self.netloc), *signed.items()]
        if length:
            lines.append(("Content-Length", str(len(body))))
        return wire(method, target, [*lines, *(extra or [])], body)

    def send(self, request: bytes, timeout: float = 15) -> Answer:
        return exchange(self.base, request, timeout)

    def snapshot(self) -> tuple[Any, ...]:
        """What a client can see: buckets, every object (key, size, ETag), uploads and parts."""
        s3 = self.s3
        buckets = sorted(b["Name"] for b in s3.list_buckets()["Buckets"])
        objects, uploads = {}, {}
        for name in buckets:
            listed = s3.list_objects_v2(Bucket=name, EncodingType="url").get("Contents", [])
            objects[name] = sorted((o["Key"], o["Size"], o["ETag"]) for o in listed)
            for upload in s3.list_multipart_uploads(Bucket=name).get("Uploads", []):
                parts = s3.list_parts(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
                uploads[upload["UploadId"]] = sorted(
                    (p["PartNumber"], p["Size"], p["ETag"]) for p in parts.get("Parts", [])
                )
        return buckets, objects, uploads

    def settled(self, seconds: float = 10) -> None:
        """Wait until no body is being received (tmp/ empty), then check the folder."""
        deadline = time.monotonic() + seconds
        while True:
            state = inspect(self.server.data, self.server.catalog)
            if not state.tmp_files or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        state.assert_clean()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, module_catalog: str | None) -> Iterator[World]:
    data = tmp_path_factory.mktemp("hostile") / "data"
    server = GatewayProcess(data, catalog=module_catalog).start()
    s3 = server.client()
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="victim", Body=VICTIM)
    upload_id = s3.create_multipart_upload(Bucket=BUCKET, Key="mp")["UploadId"]
    s3.upload_part(Bucket=BUCKET, Key="mp", UploadId=upload_id, PartNumber=1, Body=PART)
    yield World(server, s3, upload_id)
    server.stop()


@pytest.fixture
def unchanged(world: World) -> Iterator[World]:
    """The test's requests must leave every visible thing, and the data folder, as they were."""
    before = world.snapshot()
    yield world
    world.settled()
    assert world.snapshot() == before
    assert world.s3.get_object(Bucket=BUCKET, Key="victim")["Body"].read() == VICTIM


def by_first(rows: list[tuple[Any, ...]]) -> list[Any]:
    """Parameter rows named by their first field."""
    return [pytest.param(*row, id=str(row[0])) for row in rows]


def md5_header(body: bytes) -> str:
    return base64.b64encode(hashlib.md5(body).digest()).decode()


# What each test got, written to $HOSTILE_REPORT (if set) at the end: the table of input
# classes and answers for the closing note.
ANSWERS: list[tuple[str, str]] = []
_current: list[str] = [""]


@pytest.fixture(autouse=True)
def _name_the_answers(request: pytest.FixtureRequest) -> None:
    _current[0] = request.node.name


@pytest.fixture(scope="module", autouse=True)
def _report_the_answers() -> Iterator[None]:
    yield
    path = os.environ.get("HOSTILE_REPORT")
    if path:
        with open(path, "w") as f:
            f.writelines(f"{name}\t{answer}\n" for name, answer in ANSWERS)


def expect(answer: Answer, status: int | set[int], code: str | set[str] | None) -> None:
    ANSWERS.append((_current[0], f"{answer.status} {answer.code or ''}".strip()))
    statuses = {status} if isinstance(status, int) else status
    assert answer.status in statuses, str(answer)
    if code is not None:
        codes = {code} if isinstance(code, str) else code
        assert answer.code in codes, str(answer)


# --- the stalled clients: opened first, judged last (so the wait overlaps the other tests) ---


@dataclass
class Stalled:
    server: GatewayProcess
    sockets: dict[str, socket.socket]


@pytest.fixture(scope="module", autouse=True)
def stalled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stalled]:
    """Clients that stop sending half way, against a gateway of their own, configured with
    nothing: its defaults must time them out."""
    server = GatewayProcess(tmp_path_factory.mktemp("stalled") / "data").start()
    server.client().create_bucket(Bucket="stalled")
    base, netloc = server.url, urlsplit(server.url).netloc

    def put(key: str, length: int, sent: bytes) -> bytes:
        headers = raw.sign("PUT", f"{base}/stalled/{key}", payload_hash=UNSIGNED)
        lines = [("Host", netloc), *headers.items(), ("Content-Length", str(length))]
        return wire("PUT", f"/stalled/{key}", lines, sent)

    requests = {
        # 3 MiB of 10: past the first write batch, so a tmp file holds them.
        "body": put("body", 10 * 2**20, os.urandom(3 * 2**20)),
        # Headers that never end (slowloris).
        "headers": f"GET /stalled/x HTTP/1.1\r\nHost: {netloc}\r\nX-Partial: ".encode(),
    }
    sockets = {}
    for name, request in requests.items():
        sock = connect(base)
        sock.sendall(request)
        sockets[name] = sock
    yield Stalled(server, sockets)
    for sock in sockets.values():
        sock.close()
    server.stop()


def _let_go(stalled: Stalled, name: str) -> tuple[Answer | None, bool]:
    """The answer (or the close: status None) the server gave the stalled client, or None if
    it still holds it after LET_GO_SECONDS; and whether the connection was closed after it."""
    sock = stalled.sockets[name]
    sock.settimeout(LET_GO_SECONDS)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
        closed = True
    except TimeoutError:
        closed = False
    except ConnectionResetError:
        closed = True
    if not received:
        return (Answer(None) if closed else None), closed
    status = int(received.split(b" ", 2)[1])
    return Answer(status, body=received.partition(b"\r\n\r\n")[2]), closed


# --- XML bodies ---------------------------------------------------------------------------------

LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
    b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">'
    b'<!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">]>'
    b"<ROOT><Object><Key>&lol4;</Key></Object></ROOT>"
)
XXE = (
    b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    b"<ROOT><Object><Key>&x;</Key></Object></ROOT>"
)
EXTERNAL_DTD = (
    b'<?xml version="1.0"?><!DOCTYPE ROOT SYSTEM "http://127.0.0.1:9/evil.dtd">'
    b"<ROOT><Object><Key>victim</Key></Object></ROOT>"
)
PARAMETER_ENTITY = (
    b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY % p SYSTEM "http://127.0.0.1:9/p"> %p;]>'
    b"<ROOT><Object><Key>victim</Key></Object></ROOT>"
)
QUADRATIC = (
    b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "' + b"x" * 50_000 + b'">]>'
    b"<ROOT><Object><Key>" + b"&a;" * 1000 + b"</Key></Object></ROOT>"
)
DEEP = b"<ROOT>" + b"<a>" * 200_000 + b"</a>" * 200_000 + b"</ROOT>"
DEEP_UNCLOSED = b"<ROOT>" + b"<a>" * 500_000
# 214,000 empty elements, 1.5 MB: under DeleteObjects' 2 MiB (it held the event loop for seconds
# when each element called back into Python).
FLAT = b"<ROOT>" + b"<a></a>" * 214_000 + b"</ROOT>"

# (id, body with ROOT for the operation's root element, status, code)
XML_ABUSE: list[tuple[str, bytes, int, str]] = [
    ("unclosed", b"<ROOT><Object>", 400, "MalformedXML"),
    ("empty", b"", 400, "MalformedXML"),
    ("not-xml", b"hello", 400, "MalformedXML"),
    ("billion-laughs", LAUGHS, 400, "MalformedXML"),
    ("quadratic-blowup", QUADRATIC, 400, "MalformedXML"),
    ("external-entity", XXE, 400, "MalformedXML"),
    ("external-dtd", EXTERNAL_DTD, 400, "MalformedXML"),
    ("parameter-entity", PARAMETER_ENTITY, 400, "MalformedXML"),
    ("deep-nesting", DEEP, 400, "MalformedXML"),
    ("deep-unclosed", DEEP_UNCLOSED, 400, "MalformedXML"),
    ("flat-elements", FLAT, 400, "MalformedXML"),
    ("invalid-utf8", b"<ROOT><Object><Key>\xff\xfe</Key></Object></ROOT>", 400, "MalformedXML"),
    ("nul-byte", b"<ROOT><Object><Key>a\x00b</Key></Object></ROOT>", 400, "MalformedXML"),
    ("nul-charref", b"<ROOT><Object><Key>a&#0;b</Key></Object></ROOT>", 400, "MalformedXML"),
    ("wrong-root", b"<Foo/>", 400, "MalformedXML"),
    ("two-roots", b"<ROOT/><ROOT/>", 400, "MalformedXML"),
]


@pytest.mark.parametrize(
    ("case", "body", "status", "code"), XML_ABUSE, ids=[c[0] for c in XML_ABUSE]
)
@pytest.mark.parametrize("operation", ["DeleteObjects", "CompleteMultipartUpload", "CreateBucket"])
def test_hostile_xml(
    unchanged: World, operation: str, case: str, body: bytes, status: int, code: str
) -> None:
    world = unchanged
    if operation == "DeleteObjects":
        body = body.replace(b"ROOT", b"Delete")
        request = world.signed("POST", f"/{BUCKET}?delete", {"Content-MD5": md5_header(body)}, body)
    elif operation == "CompleteMultipartUpload":
        body = body.replace(b"ROOT", b"CompleteMultipartUpload")
        request = world.signed("POST", f"/{BUCKET}/mp?uploadId={world.upload_id}", body=body)
    else:
        body = body.replace(b"ROOT", b"CreateBucketConfiguration")
        if not body:
            return  # an empty CreateBucket body is the normal case, not an abuse
        request = world.signed("PUT", "/hostile-new-bucket", body=body)
    # A body over the operation's size limit is refused for its size before it is parsed.
    codes = {code, "MaxMessageLengthExceeded"} if len(body) > XML_LIMITS[operation] else code
    expect(world.send(request), status, codes)


def _utf16(body: bytes) -> bytes:
    """The body in UTF-16 with a BOM, its declaration saying so."""
    text = body.decode().replace('<?xml version="1.0"?>', "")
    return ('<?xml version="1.0" encoding="UTF-16"?>' + text).encode("utf-16")


@pytest.mark.parametrize(
    "body",
    [LAUGHS, XXE, EXTERNAL_DTD, PARAMETER_ENTITY, QUADRATIC, None],
    ids=[
        "billion-laughs",
        "external-entity",
        "external-dtd",
        "parameter-entity",
        "quadratic",
        "no-dtd",
    ],
)
def test_hostile_xml_in_utf16(unchanged: World, body: bytes | None) -> None:
    """A DTD is refused in UTF-16 too; the same document without one is read (the control:
    UTF-16 itself is not what is refused). The DTD bodies name the key "victim"."""
    world = unchanged
    if body is None:
        document = _utf16(
            b'<?xml version="1.0"?><Delete><Object><Key>absent</Key></Object></Delete>'
        )
    else:
        document = _utf16(body.replace(b"ROOT", b"Delete"))
    request = world.signed(
        "POST", f"/{BUCKET}?delete", {"Content-MD5": md5_header(document)}, document
    )
    answer = world.send(request)
    if body is None:
        expect(answer, 200, None)
        assert b"<Key>absent</Key>" in answer.body
    else:
        expect(answer, 400, "MalformedXML")


def test_lifecycle_nested_deeper_than_any_s3_document(unchanged: World) -> None:
    """A valid rule holding an unknown element 5,000 levels deep: refused as MalformedXML, not
    a 500 from a recursion (the document is kept, so it was written back out), nothing kept."""
    world = unchanged
    body = (
        b"<LifecycleConfiguration><Rule><ID>r</ID><Status>Enabled</Status><Prefix/>"
        b"<Expiration><Days>1</Days></Expiration>"
        + b"<X>" * 5000
        + b"</X>" * 5000
        + b"</Rule></LifecycleConfiguration>"
    )
    request = world.signed("PUT", f"/{BUCKET}?lifecycle", {"Content-MD5": md5_header(body)}, body)
    expect(world.send(request), 400, "MalformedXML")
    expect(
        world.send(world.signed("GET", f"/{BUCKET}?lifecycle")), 404, "NoSuchLifecycleConfiguration"
    )


XML_LIMITS = {
    "DeleteObjects": 2 * 2**20,
    "CompleteMultipartUpload": 4 * 2**20,
    "CreateBucket": 2**16,
}


@pytest.mark.parametrize(
    ("operation", "limit"),
    [
        ("DeleteObjects", 2 * 2**20),
        ("CompleteMultipartUpload", 4 * 2**20),
        ("CreateBucket", 64 * 2**10),
    ],
)
def test_xml_over_the_size_limit(unchanged: World, operation: str, limit: int) -> None:
    """A body one byte over each operation's limit (padding in a comment: well-formed XML)."""
    world = unchanged
    root = {"DeleteObjects": b"Delete", "CreateBucket": b"CreateBucketConfiguration"}.get(
        operation, b"CompleteMultipartUpload"
    )
    head = b"<" + root + b"><!--"
    tail = b"--></" + root + b">"
    body = head + b"x" * (limit + 1 - len(head) - len(tail)) + tail
    assert len(body) == limit + 1
    if operation == "DeleteObjects":
        request = world.signed("POST", f"/{BUCKET}?delete", {"Content-MD5": md5_header(body)}, body)
    elif operation == "CompleteMultipartUpload":
        request = world.signed("POST", f"/{BUCKET}/mp?uploadId={world.upload_id}", body=body)
    else:
        request = world.signed("PUT", "/hostile-new-bucket", body=body)
    expect(world.send(request), 400, "MaxMessageLengthExceeded")


def test_xml_body_announced_huge_is_not_read_to_the_end(unchanged: World) -> None:
    """Content-Length of 1 GiB, 3 MiB sent: refused once past the limit, not buffered."""
    world = unchanged
    body = b"<Delete>" + b" " * (3 * 2**20)
    request = world.signed(
        "POST",
        f"/{BUCKET}?delete",
        {"Content-MD5": md5_header(b"x")},
        payload_hash=UNSIGNED,
        length=False,
        extra=[("Content-Length", str(2**30))],
    )
    expect(world.send(request + body), 400, "MaxMessageLengthExceeded")


@pytest.mark.parametrize(
    ("case", "headers", "status", "code"),
    by_first(
        [
            ("no-content-md5", {}, 400, "InvalidRequest"),
            ("wrong-content-md5", {"Content-MD5": md5_header(b"other")}, 400, "BadDigest"),
            ("content-md5-not-base64", {"Content-MD5": "!!!"}, 400, "InvalidDigest"),
            ("content-md5-short", {"Content-MD5": "AAAA"}, 400, "InvalidDigest"),
        ]
    ),
)
def test_delete_objects_integrity_header(
    unchanged: World, case: str, headers: dict[str, str], status: int, code: str
) -> None:
    body = b"<Delete><Object><Key>victim</Key></Object></Delete>"
    expect(
        unchanged.send(unchanged.signed("POST", f"/{BUCKET}?delete", headers, body)), status, code
    )


def test_delete_objects_over_1000_keys(unchanged: World) -> None:
    body = b"<Delete>" + b"<Object><Key>victim</Key></Object>" * 1001 + b"</Delete>"
    request = unchanged.signed("POST", f"/{BUCKET}?delete", {"Content-MD5": md5_header(body)}, body)
    expect(unchanged.send(request), 400, "MalformedXML")


def test_xinclude_is_not_processed(unchanged: World) -> None:
    """XInclude is not an entity: the element is just an element, and no file is read."""
    body = (
        b'<Delete xmlns:xi="http://www.w3.org/2001/XInclude"><Object><Key>'
        b'<xi:include href="/etc/passwd" parse="text"/></Key></Object><Quiet>true</Quiet></Delete>'
    )
    request = unchanged.signed("POST", f"/{BUCKET}?delete", {"Content-MD5": md5_header(body)}, body)
    answer = unchanged.send(request)
    # The include element is an element, not an entity: the Key's text is empty, which names
    # no object, and the quiet answer lists nothing; above all, nothing was read from a file.
    assert answer.status == 200, str(answer)
    assert answer.body.endswith(b"></DeleteResult>") and b"<Deleted>" not in answer.body
    assert b"root:" not in answer.body


@pytest.mark.parametrize("operation", ["DeleteObjects", "CompleteMultipartUpload", "CreateBucket"])
def test_xml_declaring_an_unknown_encoding(unchanged: World, operation: str) -> None:
    world = unchanged
    decl = b'<?xml version="1.0" encoding="x-no-such-encoding"?>'
    if operation == "DeleteObjects":
        body = decl + b"<Delete><Object><Key>victim</Key></Object></Delete>"
        request = world.signed("POST", f"/{BUCKET}?delete", {"Content-MD5": md5_header(body)}, body)
    elif operation == "CompleteMultipartUpload":
        body = decl + b"<CompleteMultipartUpload/>"
        request = world.signed("POST", f"/{BUCKET}/mp?uploadId={world.upload_id}", body=body)
    else:
        body = decl + b"<CreateBucketConfiguration/>"
        request = world.signed("PUT", "/hostile-new-bucket", body=body)
    expect(world.send(request), 400, "MalformedXML")


def _complete(parts: list[tuple[bytes, bytes]]) -> bytes:
    items = b"".join(
        b"<Part><PartNumber>%s</PartNumber><ETag>%s</ETag></Part>" % (n, e) for n, e in parts
    )
    return b"<CompleteMultipartUpload>" + items + b"</CompleteMultipartUpload>"


PART_ETAG = b'"' + hashlib.md5(PART).hexdigest().encode() + b'"'


@pytest.mark.parametrize(
    ("case", "body", "code"),
    by_first(
        [
            ("no-parts", b"<CompleteMultipartUpload/>", "MalformedXML"),
            ("part-0", _complete([(b"0", PART_ETAG)]), {"InvalidPart", "InvalidArgument"}),
            ("part-10001", _complete([(b"10001", PART_ETAG)]), {"InvalidPart", "InvalidArgument"}),
            ("part-negative", _complete([(b"-1", PART_ETAG)]), {"MalformedXML", "InvalidArgument"}),
            ("part-not-a-number", _complete([(b"one", PART_ETAG)]), "MalformedXML"),
            ("part-huge", _complete([(b"9" * 30, PART_ETAG)]), {"InvalidPart", "InvalidArgument"}),
            (
                "wrong-etag",
                _complete([(b"1", b'"00000000000000000000000000000000"')]),
                "InvalidPart",
            ),
            ("descending", _complete([(b"2", PART_ETAG), (b"1", PART_ETAG)]), "InvalidPartOrder"),
            ("repeated", _complete([(b"1", PART_ETAG), (b"1", PART_ETAG)]), "InvalidPartOrder"),
            (
                "10001-parts",
                _complete([(str(n).encode(), PART_ETAG) for n in range(1, 10_002)]),
                {"InvalidPart", "InvalidArgument", "MalformedXML"},
            ),
            (
                "missing-etag",
                b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>"
                b"</CompleteMultipartUpload>",
                "MalformedXML",
            ),
        ]
    ),
)
def test_complete_with_bad_parts(
    unchanged: World, case: str, body: bytes, code: str | set[str]
) -> None:
    target = f"/{BUCKET}/mp?uploadId={unchanged.upload_id}"
    expect(unchanged.send(unchanged.signed("POST", target, body=body)), 400, code)


# --- aws-chunked framing ------------------------------------------------------------------------

# (id, body, x-amz-decoded-content-length, status, code): STREAMING-UNSIGNED-PAYLOAD-TRAILER, so
# the framing alone is judged (chunk signatures are checked in the signed cases below).
CHUNKED_ABUSE: list[tuple[str, bytes, str, int, str]] = [
    ("size-not-hex", b"zz\r\nhello\r\n0\r\n\r\n", "5", 400, "IncompleteBody"),
    ("size-0x-prefix", b"0x5\r\nhello\r\n0\r\n\r\n", "5", 400, "IncompleteBody"),
    ("size-negative", b"-5\r\nhello\r\n0\r\n\r\n", "5", 400, "IncompleteBody"),
    ("size-17-digits", b"00000000000000005\r\nhello\r\n0\r\n\r\n", "5", 400, "IncompleteBody"),
    ("size-huge", b"ffffffffffffffff\r\nhello\r\n0\r\n\r\n", "5", 400, "IncompleteBody"),
    ("size-line-empty", b"\r\nhello\r\n0\r\n\r\n", "5", 400, "IncompleteBody"),
    (
        "size-line-2000-bytes",
        b"5" + b" " * 2000 + b"\r\nhello\r\n0\r\n\r\n",
        "5",
        400,
        "IncompleteBody",
    ),
    ("size-with-nul", b"5\x00\r\nhello\r\n0\r\n\r\n", "5", 400, "IncompleteBody"),
    ("missing-crlf-after-data", b"5\r\nhello0\r\n\r\n", "5", 400, "IncompleteBody"),
    ("lf-line-endings", b"5\nhello\n0\n\n", "5", 400, "IncompleteBody"),
    ("cr-line-endings", b"5\rhello\r0\r\r", "5", 400, "IncompleteBody"),
    ("chunk-longer-than-announced", b"3\r\nhello\r\n0\r\n\r\n", "5", 400, "IncompleteBody"),
    ("chunk-shorter-than-announced", b"7\r\nhello\r\n0\r\n\r\n", "5", 400, "IncompleteBody"),
    ("truncated-in-data", b"5\r\nhel", "5", 400, "IncompleteBody"),
    ("truncated-before-final-chunk", b"5\r\nhello\r\n", "5", 400, "IncompleteBody"),
    ("empty-body", b"", "5", 400, "IncompleteBody"),
    ("zero-chunk-first", b"0\r\n\r\n", "5", 400, "IncompleteBody"),
    ("data-after-zero-chunk", b"0\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "5", 400, "IncompleteBody"),
    ("bytes-after-the-end", b"5\r\nhello\r\n0\r\n\r\ngarbage", "5", 400, "IncompleteBody"),
    ("decoded-length-smaller", b"5\r\nhello\r\n0\r\n\r\n", "4", 400, "IncompleteBody"),
    ("decoded-length-larger", b"5\r\nhello\r\n0\r\n\r\n", "6", 400, "IncompleteBody"),
    (
        "many-zero-chunks",
        b"5\r\nhello\r\n" + b"0\r\n" * 100 + b"\r\n",
        "5",
        400,
        "MalformedTrailerError",
    ),
    (
        "trailer-not-announced",
        b"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n",
        "5",
        400,
        "MalformedTrailerError",
    ),
    (
        "trailer-without-colon",
        b"5\r\nhello\r\n0\r\nnocolon\r\n\r\n",
        "5",
        400,
        "MalformedTrailerError",
    ),
    ("decoded-length-missing", b"5\r\nhello\r\n0\r\n\r\n", "", 411, "MissingContentLength"),
    ("decoded-length-not-a-number", b"5\r\nhello\r\n0\r\n\r\n", "abc", 411, "MissingContentLength"),
    ("decoded-length-negative", b"5\r\nhello\r\n0\r\n\r\n", "-5", 411, "MissingContentLength"),
    ("decoded-length-huge", b"5\r\nhello\r\n0\r\n\r\n", "9" * 30, 400, "EntityTooLarge"),
]


@pytest.mark.parametrize(
    ("case", "body", "decoded", "status", "code"), CHUNKED_ABUSE, ids=[c[0] for c in CHUNKED_ABUSE]
)
def test_malformed_aws_chunked(
    unchanged: World, case: str, body: bytes, decoded: str, status: int, code: str
) -> None:
    world = unchanged
    headers = {"Content-Encoding": "aws-chunked"}
    if decoded:
        headers["x-amz-decoded-content-length"] = decoded
    request = world.signed(
        "PUT", f"/{BUCKET}/chunked-{case}", headers, body, payload_hash=STREAMING_UNSIGNED
    )
    expect(world.send(request), status, code)


def _signed_chunked(world: World, key: str, mutate: Callable[[bytes], bytes]) -> bytes:
    headers, body = raw.signed_chunked_put(f"{world.base}/{BUCKET}/{key}", [b"hello", b"world"])
    body = mutate(body)
    lines = [("Host", world.netloc), *headers.items(), ("Content-Length", str(len(body)))]
    return wire("PUT", f"/{BUCKET}/{key}", lines, body)


@pytest.mark.parametrize(
    ("case", "mutate", "code"),
    by_first(
        [
            (
                "chunk-signature-too-long",
                lambda b: b.replace(b"chunk-signature=", b"chunk-signature=0", 1),
                {"SignatureDoesNotMatch", "IncompleteBody"},
            ),
            (
                "chunk-signature-missing",
                lambda b: b"5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n",
                "IncompleteBody",
            ),
            ("data-changed", lambda b: b.replace(b"hello", b"jello"), "SignatureDoesNotMatch"),
            (
                "chunks-swapped",
                lambda b: (
                    b.replace(b"hello", b"HOLD")
                    .replace(b"world", b"hello")
                    .replace(b"HOLD", b"world")
                ),
                "SignatureDoesNotMatch",
            ),
            ("final-chunk-dropped", lambda b: b[: b.index(b"0;chunk-signature")], "IncompleteBody"),
        ]
    ),
)
def test_malformed_signed_aws_chunked(
    unchanged: World, case: str, mutate: Callable[[bytes], bytes], code: str | set[str]
) -> None:
    request = _signed_chunked(unchanged, f"signed-{case}", mutate)
    expect(unchanged.send(request), {400, 403}, code)


def _wrong_signature(body: bytes) -> bytes:
    """The first chunk signature with its first hex digit changed."""
    marker = b"chunk-signature="
    at = body.index(marker) + len(marker)
    digit = b"1" if body[at : at + 1] != b"1" else b"2"
    return body[:at] + digit + body[at + 1 :]


def test_wrong_chunk_signature(unchanged: World) -> None:
    answer = unchanged.send(_signed_chunked(unchanged, "signed-bad", _wrong_signature))
    expect(answer, 403, "SignatureDoesNotMatch")


@pytest.mark.parametrize(
    ("case", "body"),
    by_first(
        [
            ("size-not-hex", b"zz\r\nhello\r\n0\r\n\r\n"),
            ("missing-crlf", b"5\r\nhello0\r\n\r\n"),
            ("chunk-longer-than-announced", b"3\r\nhello\r\n0\r\n\r\n"),
            ("size-overflow", b"fffffffffffffffffff\r\nhello\r\n0\r\n\r\n"),
        ]
    ),
)
def test_malformed_http_chunked(unchanged: World, case: str, body: bytes) -> None:
    """Transfer-Encoding: chunked framing errors: aiohttp's parser refuses them (400)."""
    world = unchanged
    request = world.signed(
        "PUT",
        f"/{BUCKET}/te-{case}",
        payload_hash=UNSIGNED,
        length=False,
        extra=[("Transfer-Encoding", "chunked")],
    )
    expect(world.send(request + body), 400, None)


def test_http_chunked_without_a_length(unchanged: World) -> None:
    """A well-formed Transfer-Encoding: chunked PUT: AWS implements no HTTP-chunked upload and
    answers 501 NotImplemented naming the header (Automattic/knox#43, chilts/awssum#30)."""
    world = unchanged
    request = world.signed(
        "PUT",
        f"/{BUCKET}/te",
        payload_hash=UNSIGNED,
        length=False,
        extra=[("Transfer-Encoding", "chunked")],
    )
    reply = world.send(request + b"5\r\nhello\r\n0\r\n\r\n")
    expect(reply, 501, "NotImplemented")
    assert b"<Header>Transfer-Encoding</Header>" in reply.body


# --- headers ------------------------------------------------------------------------------------

HEADER_ABUSE: list[tuple[str, Callable[[World], bytes], set[int], str | None]] = [
    # aiohttp's limit is 8190 bytes per line (request line and each header) and 128 headers;
    # what its parser refuses is answered as S3 answers it (s3/protocol.py).
    (
        "header-value-8200",
        lambda w: w.signed("GET", f"/{BUCKET}/victim", extra=[("x-junk", "a" * 8200)]),
        {400},
        "RequestHeaderSectionTooLarge",
    ),
    (
        "header-value-1mib",
        lambda w: w.signed("GET", f"/{BUCKET}/victim", extra=[("x-junk", "a" * 2**20)]),
        {400},
        "RequestHeaderSectionTooLarge",
    ),
    (
        "header-name-9000",
        lambda w: w.signed("GET", f"/{BUCKET}/victim", extra=[("x-" + "a" * 9000, "1")]),
        {400},
        "RequestHeaderSectionTooLarge",
    ),
    (
        "200-headers",
        lambda w: w.signed(
            "GET", f"/{BUCKET}/victim", extra=[(f"x-h{i}", "1") for i in range(200)]
        ),
        {400},
        "RequestHeaderSectionTooLarge",
    ),
    (
        "url-9000",
        lambda w: w.signed("GET", f"/{BUCKET}/" + "k" * 9000),
        {400},
        "RequestHeaderSectionTooLarge",
    ),
    (
        "query-9000",
        lambda w: w.signed("GET", f"/{BUCKET}?prefix=" + "k" * 9000),
        {400},
        "RequestHeaderSectionTooLarge",
    ),
    (
        "control-char-in-value",
        lambda w: w.signed("GET", f"/{BUCKET}/victim", extra=[("x-a", "a\x01b")]),
        {400},
        "BadRequest",
    ),
    (
        "nul-in-value",
        lambda w: w.signed("GET", f"/{BUCKET}/victim", extra=[("x-a", "a\x00b")]),
        {400},
        "BadRequest",
    ),
    (
        "metadata-over-2kb",
        lambda w: w.signed("PUT", f"/{BUCKET}/meta", {"x-amz-meta-a": "b" * 3000}, b"x"),
        {400},
        "MetadataTooLarge",
    ),
    (
        "content-length-twice",
        lambda w: w.signed("PUT", f"/{BUCKET}/cl", body=b"abc", extra=[("Content-Length", "5")]),
        {400},
        "BadRequest",
    ),
    (
        "content-length-and-chunked",
        lambda w: w.signed(
            "PUT",
            f"/{BUCKET}/cl",
            body=b"3\r\nabc\r\n0\r\n\r\n",
            extra=[("Transfer-Encoding", "chunked")],
        ),
        {400},
        "BadRequest",
    ),
    (
        "content-length-negative",
        lambda w: w.signed("PUT", f"/{BUCKET}/cl", length=False, extra=[("Content-Length", "-1")]),
        {400},
        "BadRequest",
    ),
    (
        "content-length-not-a-number",
        lambda w: w.signed("PUT", f"/{BUCKET}/cl", length=False, extra=[("Content-Length", "1e3")]),
        {400},
        "BadRequest",
    ),
    (
        "content-length-overflow",
        lambda w: w.signed(
            "PUT", f"/{BUCKET}/cl", length=False, extra=[("Content-Length", "9" * 30)]
        ),
        {400},
        "BadRequest",
    ),
    (
        "content-length-6gib",
        lambda w: w.signed(
            "PUT", f"/{BUCKET}/cl", length=False, extra=[("Content-Length", str(6 * 2**30))]
        ),
        {400},
        "EntityTooLarge",
    ),
    (
        "put-without-length",
        lambda w: w.signed("PUT", f"/{BUCKET}/cl", length=False),
        {411},
        "MissingContentLength",
    ),
    (
        "authorization-twice",
        lambda w: w.signed(
            "GET", f"/{BUCKET}/victim", extra=[("Authorization", "AWS4-HMAC-SHA256 Credential=x")]
        ),
        {400, 403},
        None,
    ),
    (
        "host-twice",
        lambda w: w.signed("GET", f"/{BUCKET}/victim", extra=[("Host", "evil.example")]),
        {400},
        "BadRequest",
    ),
    (
        "x-amz-date-twice",
        lambda w: w.signed("GET", f"/{BUCKET}/victim", extra=[("X-Amz-Date", "20000101T000000Z")]),
        {400, 403},
        None,
    ),
    (
        "content-sha256-twice",
        lambda w: w.signed("GET", f"/{BUCKET}/victim", extra=[("X-Amz-Content-SHA256", UNSIGNED)]),
        {400, 403},
        None,
    ),
    (
        "copy-source-twice",
        lambda w: w.signed(
            "PUT",
            f"/{BUCKET}/cp",
            {"x-amz-copy-source": f"/{BUCKET}/victim"},
            extra=[("x-amz-copy-source", f"/{BUCKET}/mp")],
        ),
        {400, 403},
        None,
    ),
    (
        "copy-source-invalid-utf8",
        lambda w: w.signed("PUT", f"/{BUCKET}/cp", {"x-amz-copy-source": f"/{BUCKET}/%FF"}),
        {400},
        "InvalidArgument",
    ),
    (
        "copy-source-empty",
        lambda w: w.signed("PUT", f"/{BUCKET}/cp", {"x-amz-copy-source": ""}),
        {400},
        "InvalidArgument",
    ),
    (
        "copy-source-no-key",
        lambda w: w.signed("PUT", f"/{BUCKET}/cp", {"x-amz-copy-source": BUCKET}),
        {400},
        "InvalidArgument",
    ),
    (
        "copy-source-key-too-long",
        lambda w: w.signed(
            "PUT", f"/{BUCKET}/cp", {"x-amz-copy-source": f"/{BUCKET}/" + "k" * 1025}
        ),
        {400},
        "KeyTooLongError",
    ),
    (
        "copy-source-missing-bucket",
        lambda w: w.signed("PUT", f"/{BUCKET}/cp", {"x-amz-copy-source": "/no-such-bucket/k"}),
        {404},
        "NoSuchBucket",
    ),
    ("method-unknown-to-http", lambda w: w.signed("FOO", f"/{BUCKET}/victim"), {400}, "BadRequest"),
    ("method-patch", lambda w: w.signed("PATCH", f"/{BUCKET}/victim"), {405}, "MethodNotAllowed"),
    (
        "tls-on-the-http-port",
        lambda w: b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(range(100)),
        {400},
        "BadRequest",
    ),
    ("not-http", lambda w: b"\x00\xff" * 100 + b"\r\n\r\n", {400}, "BadRequest"),
    (
        "no-host-header",
        lambda w: wire("GET", f"/{BUCKET}/victim", [("x-a", "1")]),
        {400},
        "BadRequest",
    ),
]


@pytest.mark.parametrize(
    ("case", "build", "status", "code"), HEADER_ABUSE, ids=[c[0] for c in HEADER_ABUSE]
)
def test_header_abuse(
    unchanged: World,
    case: str,
    build: Callable[[World], bytes],
    status: set[int],
    code: str | None,
) -> None:
    expect(unchanged.send(build(unchanged)), status, code)


def _until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    return Replies(sock).until_closed()


def _logged_once(world: World, request_id: str) -> list[str]:
    """The gateway's log lines naming a request, once its line has been written."""
    deadline = time.monotonic() + 10
    while True:
        lines = [line for line in world.server.log if request_id in line]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


# (id, bytes, code): what aiohttp's parser refuses before any handler runs.
PARSE_ERRORS: list[tuple[str, Callable[[World], bytes], str]] = [
    (
        "content-length-empty",
        lambda w: w.signed("PUT", f"/{BUCKET}/cl", length=False, extra=[("Content-Length", "")]),
        "BadRequest",
    ),
    (
        "content-length-negative",
        lambda w: w.signed("PUT", f"/{BUCKET}/cl", length=False, extra=[("Content-Length", "-1")]),
        "BadRequest",
    ),
    (
        "method-not-a-token",
        lambda w: b"F@O /hostile/victim HTTP/1.1\r\nHost: x\r\n\r\n",
        "BadRequest",
    ),
    ("request-line-malformed", lambda w: b"GET\r\n\r\n", "BadRequest"),
    ("version-unknown", lambda w: b"GET / HTTP/9.9\r\nHost: x\r\n\r\n", "BadRequest"),
    (
        "header-line-too-long",
        lambda w: w.signed("GET", f"/{BUCKET}/victim", extra=[("x-junk", "a" * 9000)]),
        "RequestHeaderSectionTooLarge",
    ),
    (
        "too-many-headers",
        lambda w: w.signed(
            "GET", f"/{BUCKET}/victim", extra=[(f"x-h{i}", "1") for i in range(200)]
        ),
        "RequestHeaderSectionTooLarge",
    ),
]


@pytest.mark.parametrize(("case", "build", "code"), PARSE_ERRORS, ids=[c[0] for c in PARSE_ERRORS])
def test_http_parse_error_is_an_s3_error(
    unchanged: World, case: str, build: Callable[[World], bytes], code: str
) -> None:
    """S3's XML error over HTTP/1.1, a Server header naming no library, the connection closed;
    in the log one line at info, no traceback (it was aiohttp's plain-text HTTP/1.0 400 with
    `Server: Python/... aiohttp/...` and an ERROR with a traceback)."""
    with connect(unchanged.base) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(build(unchanged))
        sent = _until_closed(sock)
    head, _, body = sent.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    answer = Answer(int(lines[0].split()[1]), headers, body)
    expect(answer, 400, code)
    assert lines[0].startswith("HTTP/1.1 400"), lines[0]
    assert headers["server"] == "s3gw"
    assert headers["content-type"] == "application/xml"
    assert headers["connection"] == "close"
    assert body.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>')
    logged = _logged_once(unchanged, headers["x-amz-request-id"])
    assert len(logged) == 1 and " INFO " in logged[0], logged
    assert not [line for line in unchanged.server.log if "Traceback" in line]


def test_extra_body_bytes_after_an_error_close_the_connection(unchanged: World) -> None:
    """s3-tests' bad_contentlength_mismatch_below_aws2: "bar" sent with Content-Length 2 and the
    MD5 of "bar". The answer is BadDigest and the connection closes: the "r" left over is
    never parsed as a request (which logged a traceback)."""
    world = unchanged
    head = world.signed(
        "PUT",
        f"/{BUCKET}/mismatch",
        {"Content-MD5": md5_header(b"bar")},
        payload_hash=UNSIGNED,
        length=False,
        extra=[("Content-Length", "2"), ("Expect", "100-continue")],
    )
    with connect(world.base) as sock:
        sock.sendall(head)
        # The headers are read on their own (aiohttp drops a request parsed in the same
        # read as a parse error that follows it): wait for the invitation to send the body.
        assert sock.recv(65536).startswith(b"HTTP/1.1 100")
        sock.sendall(b"bar")
        replies = Replies(sock)
        answer = replies.next()
        expect(answer, 400, "BadDigest")
        assert answer.headers.get("connection") == "close"
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(world.signed("GET", f"/{BUCKET}/victim"))
        assert replies.until_closed() == b""
    logged = _logged_once(world, answer.headers["x-amz-request-id"])
    assert not [line for line in world.server.log if "Traceback" in line], logged


def test_extra_body_bytes_after_a_success_are_a_bad_request(world: World) -> None:
    """Without an MD5 the short body is stored (as AWS stores it) and the byte left over begins
    the next request, which S3 answers 400 BadRequest "An error occurred when parsing the HTTP
    request." (seen from AWS in aristidb/aws#205): XML, connection closed, no traceback."""
    head = world.signed(
        "PUT",
        f"/{BUCKET}/short",
        payload_hash=UNSIGNED,
        length=False,
        extra=[("Content-Length", "2"), ("Expect", "100-continue")],
    )
    try:
        with connect(world.base) as sock:
            sock.sendall(head)
            assert sock.recv(65536).startswith(b"HTTP/1.1 100")
            sock.sendall(b"bar")
            replies = Replies(sock)
            expect(replies.next(), 200, None)
            # The parser may refuse the leftover byte on its own (no method starts so), answer
            # and close at once (the answer may have come in the same read as the 200), or wait
            # for the rest of its line: a request sent after such an answer meets a closed
            # connection (a reset, and the answer lost with it). So the next request goes only
            # if nothing has come back.
            if not replies.pending and not select.select([sock], [], [], 5)[0]:
                sock.sendall(world.signed("GET", f"/{BUCKET}/victim"))
            answer = replies.next()
            expect(answer, 400, "BadRequest")
            assert answer.headers["server"] == "s3gw"
            assert answer.headers.get("connection") == "close"
            assert replies.until_closed() == b""
        logged = _logged_once(world, answer.headers["x-amz-request-id"])
        assert len(logged) == 1 and " INFO " in logged[0], logged
        assert not [line for line in world.server.log if "Traceback" in line]
        assert world.s3.get_object(Bucket=BUCKET, Key="short")["Body"].read() == b"ba"
    finally:
        world.s3.delete_object(Bucket=BUCKET, Key="short")
    world.settled()


def test_metadata_value_not_utf8(unchanged: World) -> None:
    request = unchanged.signed(
        "PUT", f"/{BUCKET}/meta", body=b"x", extra=[("x-amz-meta-a", b"\xff\xfe")]
    )
    expect(unchanged.send(request), {400, 403}, None)


@pytest.mark.parametrize(
    "header",
    [
        ("x-amz-copy-source", f"/{BUCKET}/victim"),
        ("x-amz-meta-injected", "1"),
        ("x-amz-storage-class", "GLACIER"),
    ],
    ids=lambda h: h[0],
)
def test_unsigned_amz_header_is_refused(world: World, header: tuple[str, str]) -> None:
    before = world.snapshot()
    try:
        answer = world.send(world.signed("PUT", f"/{BUCKET}/injected", body=b"", extra=[header]))
        after = world.snapshot()
    finally:
        world.s3.delete_object(Bucket=BUCKET, Key="injected")  # what the bug wrote
    expect(answer, 403, "AccessDenied")
    assert b"<HeadersNotSigned>" in answer.body
    assert after == before


@pytest.mark.parametrize("expect_continue", [True, False], ids=["expect-100", "body-sent"])
def test_early_error_lets_the_connection_go(unchanged: World, expect_continue: bool) -> None:
    world = unchanged
    request = world.signed(
        "PUT",
        "/no-such-bucket/key",
        payload_hash=UNSIGNED,
        length=False,
        extra=[("Content-Length", str(2**20))]
        + ([("Expect", "100-continue")] if expect_continue else []),
    )
    with connect(world.base) as sock:
        sock.sendall(request if expect_continue else request + b"x" * 1000)
        answer = read_answer(sock)
        expect(answer, 404, "NoSuchBucket")
        assert answer.headers.get("connection", "").lower() == "close"
        # The server closes the connection (its unread body would be the next request): the
        # reads end rather than time out (a bound far beyond any close).
        sock.settimeout(60)
        with contextlib.suppress(ConnectionResetError):
            while sock.recv(65536):
                pass


# --- keys, queries and paths -------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "a%FF",  # not UTF-8
        "%C0%AF",  # an overlong encoding of "/"
        "%ED%A0%80",  # a UTF-16 surrogate, encoded as UTF-8
        "%F4%90%80%80",  # past U+10FFFF
        "a%80b",  # a lone continuation byte
    ],
)
@pytest.mark.parametrize("method", ["PUT", "GET", "DELETE"])
def test_key_not_utf8(unchanged: World, method: str, path: str) -> None:
    body = b"x" if method == "PUT" else b""
    expect(
        unchanged.send(unchanged.signed(method, f"/{BUCKET}/{path}", body=body)), 400, "InvalidURI"
    )


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("a%00b", "a\x00b"),  # NUL
        ("%01%1f%7f", "\x01\x1f\x7f"),  # control characters
        ("a%zz", "a%zz"),  # invalid percent-encodings: kept as they are
        ("%", "%"),
        ("a%4", "a%4"),
        ("%%41", "%A"),
    ],
)
def test_odd_percent_encodings_store_a_key_or_refuse(world: World, path: str, key: str) -> None:
    """Stored under exactly the key the bytes spell (GET, listing and DELETE agree), or refused
    with a 400 that stores nothing; never a 500, never a key that cannot be deleted."""
    answer = world.send(world.signed("PUT", f"/{BUCKET}/odd-{path}", body=b"odd"))
    if answer.status == 400:
        expect(answer, 400, {"InvalidURI", "InvalidArgument"})
        world.settled()
        return
    expect(answer, 200, None)
    got = world.send(world.signed("GET", f"/{BUCKET}/odd-{path}"))
    assert (got.status, got.body) == (200, b"odd"), str(got)
    listed = world.s3.list_objects_v2(Bucket=BUCKET, Prefix="odd-")["Contents"]
    assert [o["Key"] for o in listed] == ["odd-" + key]
    assert world.send(world.signed("DELETE", f"/{BUCKET}/odd-{path}")).status == 204
    assert "Contents" not in world.s3.list_objects_v2(Bucket=BUCKET, Prefix="odd-")
    world.settled()


@pytest.mark.parametrize(
    ("query", "status", "code"),
    by_first(
        [
            ("max-keys=-1", 400, "InvalidArgument"),
            ("max-keys=abc", 400, "InvalidArgument"),
            ("max-keys=" + "9" * 30, 200, None),  # capped at 1000, as AWS does
            ("encoding-type=foo", 400, "InvalidArgument"),
            ("prefix=%FF", {200, 400}, None),
            ("prefix=%00", 200, None),
            ("delimiter=%FF%FE", {200, 400}, None),
            ("list-type=2&continuation-token=%FF%FE", {200, 400}, None),
            ("list-type=2&max-keys=1&max-keys=2", 200, None),
            ("uploads&max-uploads=-5", 400, "InvalidArgument"),
            ("uploads&key-marker=%FF", {200, 400}, None),
        ]
    ),
)
def test_query_abuse(
    unchanged: World, query: str, status: int | set[int], code: str | None
) -> None:
    expect(unchanged.send(unchanged.signed("GET", f"/{BUCKET}?{query}")), status, code)


def test_continuation_token_garbage(unchanged: World) -> None:
    query = "list-type=2&continuation-token=!!!"
    expect(unchanged.send(unchanged.signed("GET", f"/{BUCKET}?{query}")), 400, "InvalidArgument")


# --- ranges ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "status", "body"),
    by_first(
        [
            ("bytes=", 200, VICTIM),
            ("bytes=0-1,3-4", 200, VICTIM),  # several ranges: S3 sends the whole object
            ("bytes=5-2", 200, VICTIM),
            # last < first, both past 20 digits: ignored like any last < first
            ("bytes=100000000000000000001-100000000000000000000", 200, VICTIM),
            ("items=0-1", 200, VICTIM),
            ("bytes=\u0661-\u0662", 200, VICTIM),  # Arabic-Indic digits are not digits here
            ("bytes = 0-1", 200, VICTIM),
            ("bytes=9-", 206, b"9"),
            ("bytes=-1", 206, b"9"),
            ("bytes=0-" + "9" * 40, 206, VICTIM),
            ("bytes=-" + "9" * 40, 206, VICTIM),
            ("bytes=" + "0" * 40 + "1-2", 206, b"12"),
            ("bytes=10-", 416, None),
            ("bytes=-0", 416, None),
            ("bytes=" + "9" * 40 + "-", 416, None),
        ]
    ),
)
def test_range_abuse(unchanged: World, header: str, status: int, body: bytes | None) -> None:
    request = unchanged.signed("GET", f"/{BUCKET}/victim", extra=[("Range", header.encode())])
    answer = unchanged.send(request)
    ANSWERS.append((_current[0], f"{answer.status} {answer.code or ''}".strip()))
    assert answer.status == status, str(answer)
    if body is None:
        assert answer.code == "InvalidRange"
    else:
        assert answer.body == body


def test_range_with_nul(unchanged: World) -> None:
    request = unchanged.signed("GET", f"/{BUCKET}/victim", extra=[("Range", "bytes=0-1\x00")])
    expect(unchanged.send(request), 400, None)


# --- response-* overrides ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["%00", "%0A", "text%0D%0AX-Injected:%201", "%7F", "a%1Fb"])
@pytest.mark.parametrize("size", ["inline", "file"])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_response_override_with_a_control_character(
    world: World, value: str, size: str, method: str
) -> None:
    """A header cannot carry it: 400 InvalidArgument before anything is sent (it was a cut
    connection for bytes kept in the catalog, a 500 and a traceback for a file)."""
    key = "victim"
    if size == "file":
        key = "override-file"
        world.s3.put_object(Bucket=BUCKET, Key=key, Body=os.urandom(300_000))
    logged = len(world.server.log)
    try:
        for param in ("response-content-type", "response-content-disposition"):
            answer = world.send(world.signed(method, f"/{BUCKET}/{key}?{param}={value}"))
            assert answer.status == 400, str(answer)
            assert "x-injected" not in answer.headers
            if method == "GET":
                expect(answer, 400, "InvalidArgument")
                assert f"<ArgumentName>{param}</ArgumentName>".encode() in answer.body
    finally:
        if size == "file":
            world.s3.delete_object(Bucket=BUCKET, Key=key)
    logged_now = world.server.log[logged:]
    assert not [line for line in logged_now if "ERROR" in line or "Traceback" in line]
    world.settled()


# --- part numbers ---------------------------------------------------------------------------

BAD_PART_NUMBERS = ["0", "10001", "-1", "abc", "", "9" * 30, "1.5", "+1", "0x1"]


@pytest.mark.parametrize("number", BAD_PART_NUMBERS)
@pytest.mark.parametrize("operation", ["UploadPart", "UploadPartCopy", "GetObject"])
def test_part_number_outside_1_to_10000(unchanged: World, operation: str, number: str) -> None:
    world = unchanged
    if operation == "GetObject":
        request = world.signed("GET", f"/{BUCKET}/victim?partNumber={number}")
    else:
        headers = (
            {"x-amz-copy-source": f"/{BUCKET}/victim"} if operation == "UploadPartCopy" else {}
        )
        body = b"" if headers else b"abc"
        target = f"/{BUCKET}/mp?partNumber={number}&uploadId={world.upload_id}"
        request = world.signed("PUT", target, headers, body)
    expect(world.send(request), 400, "InvalidArgument")


def test_part_number_past_the_parts_of_an_object(unchanged: World) -> None:
    expect(
        unchanged.send(unchanged.signed("GET", f"/{BUCKET}/victim?partNumber=2")),
        416,
        "InvalidPartNumber",
    )


@pytest.mark.parametrize("upload_id", ["%FF", "no-such-upload", "a" * 5000, "..%2F..%2Fx"])
def test_upload_id_garbage(unchanged: World, upload_id: str) -> None:
    target = f"/{BUCKET}/mp?partNumber=1&uploadId={upload_id}"
    expect(unchanged.send(unchanged.signed("PUT", target, body=b"abc")), 404, "NoSuchUpload")


# --- bucket names and keys at and past their limits ------------------------------------------


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("abc", True),  # 3 characters: the shortest
        ("a" * 63, True),  # the longest
        ("a.b-c1", True),
        ("ab", False),
        ("a" * 64, False),
        ("a" * 300, False),
        ("Abc", False),
        ("a_b", False),
        ("-abc", False),
        ("abc-", False),
        (".abc", False),
        ("a..b", False),
        ("192.168.5.4", False),
        ("xn--abc", False),
        ("abc-s3alias", False),
        ("abc--ol-s3", False),
        ("foo-.bar", False),  # a label ends with "-"
        ("foo.-bar", False),  # a label starts with "-"
        ("999.1.1.1", False),  # formatted as an IP address, if not a real one
        ("sthree-abc", False),
        ("amzn-s3-demo-abc", False),
        ("abc.mrap", False),
        ("abc--x-s3", False),
        ("abc--table-s3", False),
        ("a-b.c-d.e1", True),
        ("a%C3%A9b", False),
        ("a%00b", False),
        ("a%20b", False),
    ],
)
def test_bucket_name_limits(world: World, name: str, valid: bool) -> None:
    before = world.snapshot()
    answer = world.send(world.signed("PUT", f"/{name}"))
    if valid:
        expect(answer, 200, None)
        assert any(b["Name"] == name for b in world.s3.list_buckets()["Buckets"])
        assert world.send(world.signed("DELETE", f"/{name}")).status == 204
    else:
        expect(answer, 400, "InvalidBucketName")
    assert world.snapshot() == before
    world.settled()


@pytest.mark.parametrize(
    ("name", "status", "code"),
    [
        ("a", 400, "InvalidBucketName"),  # no bucket, old or new, has a 1-letter name
        ("a" * 256, 400, "InvalidBucketName"),
        ("a%20b", 400, "InvalidBucketName"),
        ("a%2Ab", 400, "InvalidBucketName"),
        # Names a bucket from before AWS's DNS rules may have: it is just not there.
        ("Old_Style.Bucket", 404, "NoSuchBucket"),
        ("foo-.bar", 404, "NoSuchBucket"),
    ],
)
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_request_to_a_bucket_name_that_cannot_exist(
    unchanged: World, name: str, status: int, code: str, method: str
) -> None:
    target = f"/{name}/key" if method != "DELETE" else f"/{name}"
    body = b"x" if method == "PUT" else b""
    expect(unchanged.send(unchanged.signed(method, target, body=body)), status, code)


def test_bucket_name_not_utf8(unchanged: World) -> None:
    expect(unchanged.send(unchanged.signed("PUT", "/a%FFb")), 400, "InvalidURI")


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("k" * 1024, True),
        ("é" * 512, True),  # 1024 bytes of UTF-8
        ("€" * 341 + "k", True),  # 1024 bytes
        ("😀" * 256, True),  # 1024 bytes
        ("k" * 1025, False),
        ("é" * 512 + "k", False),
        ("😀" * 256 + "k", False),
        ("k" * 2000, False),
    ],
    ids=[
        "1024-ascii",
        "1024-2-byte",
        "1024-3-byte",
        "1024-4-byte",
        "1025-ascii",
        "1025-2-byte",
        "1025-4-byte",
        "2000-ascii",
    ],
)
def test_key_length_limits(world: World, key: str, valid: bool) -> None:
    """PUT, copy onto, multipart to, GET and DELETE of a key at and past 1024 bytes."""
    s3 = world.s3
    before = world.snapshot()
    operations: list[tuple[str, Callable[[], Any]]] = [
        ("PutObject", lambda: s3.put_object(Bucket=BUCKET, Key=key, Body=b"k")),
        (
            "CopyObject",
            lambda: s3.copy_object(
                Bucket=BUCKET, Key=key, CopySource={"Bucket": BUCKET, "Key": "victim"}
            ),
        ),
        ("CreateMultipartUpload", lambda: s3.create_multipart_upload(Bucket=BUCKET, Key=key)),
    ]
    for name, call in operations:
        if valid:
            result = call()
            if name == "CreateMultipartUpload":
                s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=result["UploadId"])
            else:
                assert s3.get_object(Bucket=BUCKET, Key=key)["ContentLength"] in (1, len(VICTIM))
                s3.delete_object(Bucket=BUCKET, Key=key)
        else:
            with pytest.raises(ClientError) as info:
                call()
            assert info.value.response["Error"]["Code"] == "KeyTooLongError", name
            assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert world.snapshot() == before
    world.settled()


# --- clients that go away -------------------------------------------------------------------


def _reset(sock: socket.socket) -> None:
    """Close with a TCP RST (SO_LINGER 0) rather than a FIN: the rudest way to leave."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _wait_for_tmp(data: Path, present: bool) -> None:
    deadline = time.monotonic() + 10
    while bool(os.listdir(data / "tmp")) != present:
        assert time.monotonic() < deadline, f"tmp/ never became {'busy' if present else 'empty'}"
        time.sleep(0.02)


@pytest.mark.parametrize("how", ["fin", "rst"])
@pytest.mark.parametrize(
    "operation",
    ["PutObject-large", "PutObject-small", "UploadPart", "aws-chunked", "DeleteObjects"],
)
def test_client_disconnects_mid_body(unchanged: World, operation: str, how: str) -> None:
    world = unchanged
    total, sent = 8 * 2**20, 3 * 2**20  # past the first write batch: a tmp file exists
    if operation == "PutObject-small":
        total, sent = 50_000, 20_000
    if operation == "DeleteObjects":
        body = b"<Delete><Object><Key>victim</Key></Object></Delete>"
        request = world.signed(
            "POST",
            f"/{BUCKET}?delete",
            {"Content-MD5": md5_header(body)},
            body,
        )[: -len(body) + 20]
    elif operation == "aws-chunked":
        headers, body = raw.signed_chunked_put(f"{world.base}/{BUCKET}/cut", [b"x" * total])
        lines = [("Host", world.netloc), *headers.items(), ("Content-Length", str(len(body)))]
        request = wire("PUT", f"/{BUCKET}/cut", lines, body)[: -(total - sent)]
    else:
        target = f"/{BUCKET}/cut"
        if operation == "UploadPart":
            target = f"/{BUCKET}/mp?partNumber=2&uploadId={world.upload_id}"
        head = world.signed(
            "PUT",
            target,
            payload_hash=UNSIGNED,
            length=False,
            extra=[("Content-Length", str(total))],
        )
        request = head + os.urandom(sent)
    sock = connect(world.base)
    sock.sendall(request)
    if operation in ("PutObject-large", "UploadPart", "aws-chunked"):
        _wait_for_tmp(world.server.data, True)  # the server is writing the body
    else:
        time.sleep(0.2)
    if how == "rst":
        _reset(sock)
    else:
        sock.close()
    _wait_for_tmp(world.server.data, False)


# --- stalled clients (judged last: the wait overlaps everything above) ---------------------


def test_stalled_body_is_timed_out_and_freed(stalled: Stalled) -> None:
    answer, closed = _let_go(stalled, "body")
    assert answer is not None, f"still waiting for the body after {LET_GO_SECONDS} s"
    # AWS: 400 RequestTimeout, then the connection is closed (the body's rest would be taken
    # for the next request).
    assert (answer.status, answer.code, closed) == (400, "RequestTimeout", True), str(answer)
    data = stalled.server.data
    _wait_for_tmp(data, False)
    inspect(data).assert_clean()
    assert stalled.server.client().list_objects_v2(Bucket="stalled")["KeyCount"] == 0


def test_stalled_headers_are_timed_out(stalled: Stalled) -> None:
    answer, closed = _let_go(stalled, "headers")
    assert answer is not None, f"still waiting for the headers after {LET_GO_SECONDS} s"
    # Headers never finished are not a request to answer: the connection is closed, as S3
    # closes a connection idle for about 20 s.
    assert (answer.status, closed) == (None, True), str(answer)


def test_the_gateway_still_serves(world: World) -> None:
    """After all of the above: the same process answers, its folder is clean, and once it is
    stopped `fsck --deep` finds nothing wrong."""
    assert world.s3.get_object(Bucket=BUCKET, Key="victim")["Body"].read() == VICTIM
    world.settled()
    world.server.stop()
    command = [sys.executable, "-m", "gateway", "fsck", "--data", str(world.server.data)]
    if world.server.catalog is not None:
        command += ["--catalog", world.server.catalog]
    done = subprocess.run(
        [*command, "--deep"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
