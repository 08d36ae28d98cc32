"""Random sequences of writes against the real server, checked step by step against a model.

PUT, CopyObject, CreateMultipartUpload, UploadPart, UploadPartCopy, Complete, Abort and
DELETE in any order; after every step each object's bytes and ETag must be the model's, and at
the end `s3gw fsck --deep` must find the catalog and the blob files in agreement.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import os

import pytest
from botocore.exceptions import ClientError
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from tests.datadir import inspect
from tests.server import GatewayProcess

MIB = 2**20
KEYS = st.sampled_from(["a", "b", "dir/c"])
# Bodies around the inline limit (64 KiB) and one of several MiB; 5 MiB parts are reused
# from a small pool so that multipart steps stay cheap.
SIZES = st.sampled_from([0, 1, 1000, 64 * 1024, 64 * 1024 + 1, 300_000, 5 * MIB + 7])
PART_POOL = [os.urandom(5 * MIB) for _ in range(3)]
DONE: collections.Counter[str] = collections.Counter()  # steps that succeeded, by kind


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def multipart_etag(parts: list[bytes]) -> str:
    return md5(b"".join(hashlib.md5(p).digest() for p in parts)) + f"-{len(parts)}"


@pytest.fixture(scope="module")
def model_gateway(tmp_path_factory, module_catalog):
    data = tmp_path_factory.mktemp("model") / "data"
    server = GatewayProcess(data, catalog=module_catalog).start()
    yield server
    server.stop()


_buckets = itertools.count()


class GatewayModel(RuleBasedStateMachine):
    server: GatewayProcess

    def __init__(self) -> None:
        super().__init__()
        self.s3 = self.server.client()
        self.bucket = f"model-{next(_buckets)}"
        self.s3.create_bucket(Bucket=self.bucket)
        self.objects: dict[str, tuple[bytes, str]] = {}  # key -> (bytes, etag)
        self.uploads: dict[str, tuple[str, dict[int, tuple[bytes, str]]]] = {}

    uploads_bundle = Bundle("uploads")

    @initialize()
    def start_with_each_kind(self) -> None:
        """Every sequence starts from objects of each origin (put, copy of a put, a multipart
        copy of a copy), so the random steps that follow meet all of them."""
        self.put("a", 300_000)
        self.copy("a", "b")
        self.multipart_object("dir/c", 1, 0, "b")

    @rule(key=KEYS, size=SIZES)
    def put(self, key: str, size: int) -> None:
        data = os.urandom(size)
        etag = self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)["ETag"]
        assert etag == f'"{md5(data)}"'
        self.objects[key] = (data, md5(data))
        DONE["put"] += 1

    @rule(source=KEYS, destination=KEYS)
    def copy(self, source: str, destination: str) -> None:
        kw = {"MetadataDirective": "REPLACE"} if source == destination else {}
        try:
            result = self.s3.copy_object(
                Bucket=self.bucket, Key=destination, CopySource=f"{self.bucket}/{source}", **kw
            )
        except ClientError as exc:
            assert source not in self.objects
            assert exc.response["Error"]["Code"] == "NoSuchKey"
            return
        data, _ = self.objects[source]
        # A copy's ETag is the MD5 of its bytes, whatever the source's was.
        assert result["CopyObjectResult"]["ETag"] == f'"{md5(data)}"'
        self.objects[destination] = (data, md5(data))
        DONE["copy"] += 1

    @rule(target=uploads_bundle, key=KEYS)
    def create_upload(self, key: str) -> str:
        upload = self.s3.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        self.uploads[upload] = (key, {})
        return upload

    @rule(upload=uploads_bundle, number=st.integers(1, 3), big=st.booleans(), size=SIZES)
    def upload_part(self, upload: str, number: int, big: bool, size: int) -> None:
        data = PART_POOL[number - 1] if big else os.urandom(min(size, 300_000))
        key = self.uploads[upload][0] if upload in self.uploads else "a"
        try:
            etag = self.s3.upload_part(
                Bucket=self.bucket, Key=key, UploadId=upload, PartNumber=number, Body=data
            )["ETag"]
        except ClientError as exc:
            assert upload not in self.uploads
            assert exc.response["Error"]["Code"] == "NoSuchUpload"
            return
        assert etag == f'"{md5(data)}"'
        self.uploads[upload][1][number] = (data, md5(data))

    @rule(upload=uploads_bundle, number=st.integers(1, 3), source=KEYS, data=st.data())
    def upload_part_copy(self, upload: str, number: int, source: str, data: st.DataObject):
        if upload not in self.uploads or source not in self.objects:
            return
        key, parts = self.uploads[upload]
        body, _ = self.objects[source]
        kw = {}
        if body and data.draw(st.booleans()):
            first = data.draw(st.integers(0, len(body) - 1))
            last = data.draw(st.integers(first, len(body) - 1))
            kw["CopySourceRange"] = f"bytes={first}-{last}"
            body = body[first : last + 1]
        etag = self.s3.upload_part_copy(
            Bucket=self.bucket,
            Key=key,
            UploadId=upload,
            PartNumber=number,
            CopySource=f"{self.bucket}/{source}",
            **kw,
        )["CopyPartResult"]["ETag"]
        assert etag == f'"{md5(body)}"'
        parts[number] = (body, md5(body))
        DONE["upload_part_copy"] += 1

    @precondition(lambda self: self.uploads)
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        upload = data.draw(st.sampled_from(sorted(self.uploads)))
        key, parts = self.uploads[upload]
        numbers = sorted(parts)
        chosen = [n for n in numbers if data.draw(st.booleans())] or numbers[-1:]
        request = [{"PartNumber": n, "ETag": f'"{parts[n][1]}"'} for n in chosen]
        valid = bool(chosen) and all(len(parts[n][0]) >= 5 * MIB for n in chosen[:-1])
        try:
            result = self.s3.complete_multipart_upload(
                Bucket=self.bucket,
                Key=key,
                UploadId=upload,
                MultipartUpload={"Parts": request},
            )
        except ClientError as exc:
            assert not valid, exc
            expected = "MalformedXML" if not chosen else "EntityTooSmall"
            assert exc.response["Error"]["Code"] == expected
            return
        assert valid
        bodies = [parts[n][0] for n in chosen]
        assert result["ETag"] == f'"{multipart_etag(bodies)}"'
        self.objects[key] = (b"".join(bodies), multipart_etag(bodies))
        del self.uploads[upload]
        DONE["complete"] += 1

    @rule(key=KEYS, count=st.integers(1, 3), last=SIZES, copy_from=st.none() | KEYS)
    def multipart_object(self, key: str, count: int, last: int, copy_from: str | None) -> None:
        """A whole upload in one step: full-size parts, a last part of any size, and (when the
        source exists) a first part copied from another object."""
        upload = self.s3.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        bodies = [*PART_POOL[: count - 1], os.urandom(min(last, 300_000))]
        done = []
        for number, body in enumerate(bodies, 1):
            if number == 1 and copy_from in self.objects and count == 1:
                body = self.objects[copy_from][0]
                etag = self.s3.upload_part_copy(
                    Bucket=self.bucket,
                    Key=key,
                    UploadId=upload,
                    PartNumber=1,
                    CopySource=f"{self.bucket}/{copy_from}",
                )["CopyPartResult"]["ETag"]
                bodies[0] = body
                DONE["upload_part_copy"] += 1
            else:
                etag = self.s3.upload_part(
                    Bucket=self.bucket, Key=key, UploadId=upload, PartNumber=number, Body=body
                )["ETag"]
            done.append({"PartNumber": number, "ETag": etag})
        result = self.s3.complete_multipart_upload(
            Bucket=self.bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": done}
        )
        assert result["ETag"] == f'"{multipart_etag(bodies)}"'
        self.objects[key] = (b"".join(bodies), multipart_etag(bodies))
        DONE["complete"] += 1

    @rule(upload=uploads_bundle)
    def abort(self, upload: str) -> None:
        key = self.uploads[upload][0] if upload in self.uploads else "a"
        try:
            self.s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload)
        except ClientError as exc:
            assert upload not in self.uploads
            assert exc.response["Error"]["Code"] == "NoSuchUpload"
            return
        del self.uploads[upload]

    @rule(key=KEYS)
    def delete(self, key: str) -> None:
        self.s3.delete_object(Bucket=self.bucket, Key=key)
        self.objects.pop(key, None)

    @invariant()
    def objects_match(self) -> None:
        listed = self.s3.list_objects_v2(Bucket=self.bucket).get("Contents", [])
        assert {o["Key"]: o["ETag"] for o in listed} == {
            k: f'"{etag}"' for k, (_, etag) in self.objects.items()
        }
        for key, (data, etag) in self.objects.items():
            got = self.s3.get_object(Bucket=self.bucket, Key=key)
            assert got["ETag"] == f'"{etag}"'
            assert md5(got["Body"].read()) == md5(data)


def test_random_operations_match_the_model(model_gateway):
    GatewayModel.server = model_gateway
    run = GatewayModel.TestCase
    run.settings = settings(max_examples=8, stateful_step_count=15, deadline=None)
    run().runTest()
    # The sequences did reach the interesting steps (a run that never did would prove little).
    assert {"put", "copy", "upload_part_copy", "complete"} <= set(DONE), DONE
    # Every example's bucket is left as it ended, uploads in progress included: the store
    # must account for all of it.
    inspect(model_gateway.data, model_gateway.catalog).assert_clean()
    model_gateway.stop()
    fsck = model_gateway.s3gw("fsck", "--deep")
    assert fsck.returncode == 0, fsck.stdout
    assert "no damage found" in fsck.stdout
