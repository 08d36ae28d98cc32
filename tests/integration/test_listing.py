"""ListObjects v1 and v2 through the real server, against a model of S3 listing."""

from __future__ import annotations

import contextlib
import os
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote_plus

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import awscli, raw


def model(keys: list[str], prefix: str, delimiter: str) -> list[tuple[str, str]]:
    """Every ("key" | "prefix", name) a full listing yields, in order (UTF-8 byte order)."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for key in sorted(keys, key=lambda k: k.encode()):
        if not key.startswith(prefix):
            continue
        cut = key.find(delimiter, len(prefix)) if delimiter else -1
        if cut < 0:
            out.append(("key", key))
        else:
            common = key[: cut + len(delimiter)]
            if common not in seen:
                seen.add(common)
                out.append(("prefix", common))
    return out


def list_v2(s3, bucket, prefix, delimiter, max_keys, start_after=""):
    got, token, pages = [], None, 0
    while True:
        kw = {"Prefix": prefix, "MaxKeys": max_keys}
        if delimiter:
            kw["Delimiter"] = delimiter
        if token:
            kw["ContinuationToken"] = token
        elif start_after:
            kw["StartAfter"] = start_after
        page = s3.list_objects_v2(Bucket=bucket, **kw)
        pages += 1
        items = [("key", o["Key"]) for o in page.get("Contents", [])]
        items += [("prefix", p["Prefix"]) for p in page.get("CommonPrefixes", [])]
        assert page["KeyCount"] == len(items)
        got += sorted(items, key=lambda item: item[1].encode())
        if not page["IsTruncated"]:
            return got, pages
        assert items, "a truncated page must not be empty"
        token = page["NextContinuationToken"]


def list_v1(s3, bucket, prefix, delimiter, max_keys):
    got, marker = [], ""
    while True:
        kw = {"Prefix": prefix, "MaxKeys": max_keys, "Marker": marker}
        if delimiter:
            kw["Delimiter"] = delimiter
        page = s3.list_objects(Bucket=bucket, **kw)
        items = [("key", o["Key"]) for o in page.get("Contents", [])]
        items += [("prefix", p["Prefix"]) for p in page.get("CommonPrefixes", [])]
        items.sort(key=lambda item: item[1].encode())
        got += items
        if not page["IsTruncated"]:
            return got
        # AWS gives NextMarker only with a delimiter; otherwise the last key is the marker.
        marker = page.get("NextMarker") or items[-1][1]


ALPHABET = st.sampled_from(["a", "b", "/", "-", ".", "é", "😀", "\ue000", " ", "+", "%"])
KEYS = st.lists(st.text(ALPHABET, min_size=1, max_size=6), min_size=1, max_size=25, unique=True)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    keys=KEYS,
    prefix=st.text(ALPHABET, max_size=2),
    delimiter=st.sampled_from(["", "/", "-", "ab", "😀", "é/"]),
    max_keys=st.integers(1, 6),
)
def test_listing_matches_the_model(s3, keys, prefix, delimiter, max_keys):
    bucket = "listing-model"
    with contextlib.suppress(ClientError):  # made by an earlier example
        s3.create_bucket(Bucket=bucket)
    existing = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    if existing:
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": o["Key"]} for o in existing]})
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"")
    expected = model(keys, prefix, delimiter)
    got, _ = list_v2(s3, bucket, prefix, delimiter, max_keys)
    assert got == expected
    assert list_v1(s3, bucket, prefix, delimiter, max_keys) == expected


def test_paginator_over_5000_keys(s3, bucket):
    keys = [f"k/{i:05d}" for i in range(5000)]
    # Eight at a time: the order of the PUTs must not matter to the listing's.
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda key: s3.put_object(Bucket=bucket, Key=key, Body=b""), keys))
    listed = [
        o["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in page["Contents"]
    ]
    assert listed == keys
    v1 = [
        o["Key"]
        for page in s3.get_paginator("list_objects").paginate(Bucket=bucket)
        for o in page["Contents"]
    ]
    assert v1 == keys


def test_page_shape(s3, bucket):
    for key in ["a/1", "a/2", "b", "c/3"]:
        s3.put_object(Bucket=bucket, Key=key, Body=b"12345")
    page = s3.list_objects_v2(Bucket=bucket, Delimiter="/", MaxKeys=2, FetchOwner=True)
    assert page["IsTruncated"] is True
    assert page["KeyCount"] == 2
    assert [p["Prefix"] for p in page["CommonPrefixes"]] == ["a/"]
    (entry,) = page["Contents"]
    assert entry["Key"] == "b" and entry["Size"] == 5
    assert entry["StorageClass"] == "STANDARD"
    assert entry["ETag"] == '"827ccb0eea8a706c4c34a16891f84e7b"'
    assert entry["Owner"]["ID"] == s3.list_buckets()["Owner"]["ID"]
    assert "Owner" not in s3.list_objects_v2(Bucket=bucket)["Contents"][0]
    v1 = s3.list_objects(Bucket=bucket, Delimiter="/", MaxKeys=2)
    assert v1["IsTruncated"] is True and v1["NextMarker"] == "b"
    assert "Owner" in v1["Contents"][0]
    assert s3.list_objects_v2(Bucket=bucket, MaxKeys=0)["IsTruncated"] is False


def test_start_after_and_invalid_arguments(s3, bucket):
    for key in ["a", "b", "c"]:
        s3.put_object(Bucket=bucket, Key=key, Body=b"")
    page = s3.list_objects_v2(Bucket=bucket, StartAfter="a")
    assert [o["Key"] for o in page["Contents"]] == ["b", "c"]
    assert page["StartAfter"] == "a"
    with pytest.raises(ClientError) as exc:
        s3.list_objects_v2(Bucket=bucket, ContinuationToken="!!!not-a-token")
    assert exc.value.response["Error"]["Code"] == "InvalidArgument"


def test_url_encoding_of_odd_keys(s3, bucket):
    # boto3 asks for encoding-type=url and decodes: keys that XML cannot carry survive.
    keys = ["ctrl\x01char", "new\nline", "cr\rreturn", "tab\tkey", "amp&lt;"]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"")
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert listed == sorted(keys, key=str.encode)


def test_listobjects_v1_encodes_its_prefix(gateway, s3, bucket):
    """With encoding-type=url, ListObjects encodes "Delimiter, Marker, Prefix, NextMarker,
    Key" (API_ListObjects.html, EncodingType). boto3 asks for it on every list_objects and
    decodes all of them but the top-level Prefix (ceph/s3-tests#327), so it reads "%0A"."""
    s3.put_object(Bucket=bucket, Key="quux", Body=b"")
    reply = raw.signed("GET", f"{gateway.url}/{bucket}?prefix=%0A&encoding-type=url")
    assert reply.status == 200 and b"<Prefix>%0A</Prefix>" in reply.body
    assert s3.list_objects(Bucket=bucket, Prefix="\n")["Prefix"] == "%0A"
    assert s3.list_objects_v2(Bucket=bucket, Prefix="\n")["Prefix"] == "\n"


# Keys XML 1.0 cannot carry (NUL, other C0 controls, U+FFFE, U+FFFF), and a few that need care.
UNCARRIABLE = ["nul\x00key", "esc\x1bkey", "cr\rkey", "not-a-char\ufffe", "max\uffff"]
ODD = ["space key", "plus+key", "percent%41key", "amp&lt;key"]


def test_keys_xml_cannot_carry(gateway, s3, bucket):
    """Stored, and listed as S3 lists them: without encoding-type, as hexadecimal character
    references (never raw bytes); with encoding-type=url, percent-encoded, which any XML parser
    reads and which boto3 (asking for it itself) decodes back to the very keys."""
    keys = sorted(UNCARRIABLE + ODD, key=str.encode)
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"k")
    # boto3 cannot read this answer (nor AWS's: botocore#3496): the upload id is read here.
    started = raw.signed("POST", f"{gateway.url}/{bucket}/nul%00upload?uploads")
    assert b"<Key>nul&#x0;upload</Key>" in started.body
    upload = started.body.split(b"<UploadId>")[1].split(b"</UploadId>")[0].decode()
    try:
        assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == keys
        assert [o["Key"] for o in s3.list_objects(Bucket=bucket)["Contents"]] == keys
        versions = s3.list_object_versions(Bucket=bucket)["Versions"]
        assert [v["Key"] for v in versions] == keys
        # Here boto3 asks for no encoding by itself: asked for, it hands back what S3 sent.
        uploads = s3.list_multipart_uploads(Bucket=bucket, EncodingType="url")["Uploads"]
        assert [unquote_plus(u["Key"]) for u in uploads] == ["nul\x00upload"]
        for key in keys:
            assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"k"

        url = f"{gateway.url}/{bucket}?list-type=2"
        plain = raw.signed("GET", url)
        assert plain.status == 200
        for ref in (b"nul&#x0;key", b"esc&#x1b;key", b"cr&#13;key", b"&#xfffe;", b"&#xffff;"):
            assert ref in plain.body
        for byte in (b"\x00", b"\x1b", b"\r", "\ufffe".encode(), "\uffff".encode()):
            assert byte not in plain.body

        encoded = raw.signed("GET", url + "&encoding-type=url")
        root = ET.fromstring(encoded.body)  # a strict XML 1.0 parser
        ns = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}
        assert root.findtext("s3:EncodingType", namespaces=ns) == "url"
        listed = [unquote_plus(k.text or "") for k in root.iterfind("s3:Contents/s3:Key", ns)]
        assert listed == keys
    finally:
        s3.abort_multipart_upload(Bucket=bucket, Key="nul\x00upload", UploadId=upload)


def test_error_naming_a_key_xml_cannot_carry(gateway, bucket):
    """NoSuchKey echoes the key: as a character reference, not as a raw control byte."""
    reply = raw.signed("GET", f"{gateway.url}/{bucket}/nul%00key%1B%EF%BF%BE")
    assert (reply.status, reply.code) == (404, "NoSuchKey")
    assert b"<Key>nul&#x0;key&#x1b;&#xfffe;</Key>" in reply.body
    assert b"\x00" not in reply.body and b"\x1b" not in reply.body


def test_aws_cli_ls_and_sync(gateway, s3, bucket, tmp_path):
    source = tmp_path / "src"
    for rel in ["a.txt", "dir/b.txt", "dir/sub/c.txt", "space name.txt"]:
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(rel)
        # Files older than their upload, as files to sync are: a listing's LastModified is
        # in whole seconds (as AWS's), and aws-cli takes a local file modified later within
        # the same second as newer than its copy.
        os.utime(source / rel, (time.time() - 60,) * 2)
    out = awscli.run(gateway.url, "s3", "sync", str(source), f"s3://{bucket}/tree")
    assert out.returncode == 0, out.stderr
    out = awscli.run(gateway.url, "s3", "ls", "--recursive", f"s3://{bucket}")
    assert out.returncode == 0, out.stderr
    listed = sorted(line.split(None, 3)[3] for line in out.stdout.splitlines())
    assert listed == ["tree/a.txt", "tree/dir/b.txt", "tree/dir/sub/c.txt", "tree/space name.txt"]
    # A second sync has nothing to do; a changed file is uploaded again; sync back down.
    again = awscli.run(gateway.url, "s3", "sync", str(source), f"s3://{bucket}/tree")
    assert again.returncode == 0 and "upload:" not in again.stdout
    (source / "a.txt").write_text("changed, and longer")
    changed = awscli.run(gateway.url, "s3", "sync", str(source), f"s3://{bucket}/tree")
    assert "upload:" in changed.stdout and "a.txt" in changed.stdout
    target = tmp_path / "dst"
    down = awscli.run(gateway.url, "s3", "sync", f"s3://{bucket}/tree", str(target))
    assert down.returncode == 0, down.stderr
    assert (target / "dir" / "sub" / "c.txt").read_text() == "dir/sub/c.txt"
    assert (target / "a.txt").read_text() == "changed, and longer"
