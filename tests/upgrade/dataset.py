"""The fixed data set an upgrade fixture holds, and the checks that read it back.

`write` puts the data set into a running gateway of any version, through the S3 and IAM APIs,
as far as that version goes: each kind of thing is tried, and what the version refuses
(NotImplemented, an unknown operation) is left out. `record` then reads everything back from
that same gateway and keeps what it answered as a list of `Check`s: the fixture's expectations
are what the old gateway said of its own data, not what this file thinks it wrote (an old
version may have ignored a header it did not know). `verify` asks a newer gateway the same
questions and lists every answer that lost or changed something the old one said; a field the
old gateway did not answer may be new, and is not compared.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from gateway.users import ACCOUNT_NUMBER, account_number, numbered

PLAIN = "upgrade-plain"
VERSIONED = "upgrade-versioned"
LOCKED = "upgrade-locked"
KiB = 1024
MiB = 1024 * KiB
# The gateway keeps bodies up to --inline-max (64 KiB by default, at every version) in the
# catalog; the others are blob files.
INLINE_SIZE = 1000
BLOB_SIZE = 300 * KiB
PART_SIZE = 5 * MiB  # S3's smallest part but the last
# SSE-C's key: a test key, kept here so that a reader of any version can give it again.
SSE_C_KEY = bytes(range(32))
RETAIN_UNTIL = dt.datetime(2099, 1, 1, tzinfo=dt.UTC)
ALICE_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"arn:aws:s3:::{PLAIN}/*"]}
    ],
}
TRUST_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
}


def body(size: int, seed: int) -> bytes:
    """`size` bytes of a 4 KiB random block repeated: the same at every run, and compressed
    well in the fixture's archive (a blob file holds them as they are)."""
    block = random.Random(seed).randbytes(4 * KiB)
    return (block * (size // len(block) + 1))[:size]


@dataclass
class Check:
    """One read call and what the old gateway answered: `expect`, the response (a GET's body
    as its length and SHA-256), or `error`, its error code."""

    client: str  # "s3", "iam", or "s3:<user>": an S3 client signing with that user's key
    call: str
    args: dict[str, Any]
    expect: dict[str, Any] | None = None
    error: str | None = None


@dataclass
class Manifest:
    """What a fixture holds: the version that wrote it and the checks that read it."""

    catalog: str
    schema: int
    commit: str
    credentials: dict[str, dict[str, str]]  # client name -> access_key, secret_key
    features: list[str] = field(default_factory=list)
    pending_upload: dict[str, str] | None = None  # bucket, key, upload_id: completed by the test
    checks: list[Check] = field(default_factory=list)

    def dumps(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def loads(cls, text: str) -> Manifest:
        raw = json.loads(text)
        raw["checks"] = [Check(**c) for c in raw["checks"]]
        return cls(**raw)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def plain(value: Any) -> Any:
    """A boto3 response as JSON values: dates as ISO text, bodies as length and SHA-256, the
    transport's metadata (request ids, dates of the answer) left out."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if hasattr(value, "read"):
        data = value.read()
        return {"length": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return value


def call(clients: dict[str, Any], check: Check) -> tuple[dict[str, Any] | None, str | None]:
    args = dict(check.args)
    if "SSECustomerKey" in args:
        args["SSECustomerKey"] = bytes.fromhex(args["SSECustomerKey"])
    try:
        return plain(getattr(clients[check.client], check.call)(**args)), None
    except ClientError as exc:
        return None, _code(exc)


# What a newer gateway answers differently on purpose, following AWS, with no data changed:
# owners and grantees without DisplayName (AWS since November 2025), times in listings at
# whole seconds (AWS's form), and accounts by their 12-digit id in ARNs and GetCallerIdentity
# where the canonical id was. Each is compared as the newer form would have said the old value.
PRESENTATION_ONLY = frozenset({"DisplayName"})
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00")


def _same_time(old: Any, new: Any) -> bool:
    return (
        isinstance(old, str)
        and isinstance(new, str)
        and bool(_ISO_TIME.fullmatch(old))
        and bool(_ISO_TIME.fullmatch(new))
        and old[:19] == new[:19]
    )


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Where `new` lost or changed something `old` holds (a key `old` lacks is not compared;
    PRESENTATION_ONLY changes are not differences)."""
    if isinstance(old, dict):
        if not isinstance(new, dict):
            return [f"{where}: {old!r} became {new!r}"]
        found = []
        for k, v in old.items():
            if k in PRESENTATION_ONLY and k not in new:
                continue
            if k not in new:
                found.append(f"{where}.{k}: {v!r} is gone")
            else:
                found += differences(v, new[k], f"{where}.{k}")
        return found
    if isinstance(old, list):
        if not isinstance(new, list) or len(old) != len(new):
            return [f"{where}: {old!r} became {new!r}"]
        return [
            d
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for d in differences(a, b, f"{where}[{i}]")
        ]
    same = old == new or _same_time(old, new) or _same_account(old, new)
    return [] if same else [f"{where}: {old!r} became {new!r}"]


def _same_account(old: Any, new: Any) -> bool:
    """An account (or an ARN's account) named by its number where the canonical id was."""
    if not isinstance(old, str) or not isinstance(new, str):
        return False
    return numbered(old) == new or (
        bool(ACCOUNT_NUMBER.fullmatch(new)) and account_number(old) == new
    )


def verify(clients: dict[str, Any], checks: list[Check]) -> list[str]:
    """Every check the gateway behind `clients` answers differently, in one line each."""
    found = []
    for check in checks:
        got, error = call(clients, check)
        name = f"{check.client} {check.call}({_args_text(check.args)})"
        if check.error is not None or error is not None:
            if error != check.error:
                found.append(f"{name}: error {check.error!r} became {error!r} ({got!r})")
            continue
        found += [f"{name}{d}" for d in differences(check.expect, got)]
    return found


def _args_text(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items() if k != "SSECustomerKey")


class Writer:
    """Writes the data set into a gateway of any version; `features` names what it took."""

    def __init__(self, clients: dict[str, Any]) -> None:
        self.clients = clients
        self.s3 = clients["s3"]
        self.features: list[str] = []
        self.keys: dict[str, list[str]] = {PLAIN: [], VERSIONED: [], LOCKED: []}
        self.reads: list[tuple[str, str, dict[str, Any]]] = []
        self.pending: dict[str, str] | None = None

    def attempt(self, feature: str, fn: Callable[[], Any]) -> bool:
        """Run one write; a version without the feature refuses it and it is left out."""
        try:
            fn()
        except ClientError as exc:
            if _code(exc) in ("NotImplemented", "MethodNotAllowed", "InvalidRequest", "501"):
                return False
            raise
        self.features.append(feature)
        return True

    def read(self, client: str, name: str, **args: Any) -> None:
        self.reads.append((client, name, args))

    def put(self, bucket: str, key: str, data: bytes, feature: str, **kw: Any) -> bool:
        def run() -> None:
            self.s3.put_object(Bucket=bucket, Key=key, Body=data, **kw)

        if not self.attempt(feature, run):
            return False
        sse_c = _sse_c_args(kw)
        if feature.startswith("sse"):
            head = self.s3.head_object(Bucket=bucket, Key=key, **sse_c)
            if not (head.get("ServerSideEncryption") or head.get("SSECustomerAlgorithm")):
                # The version ignored the headers: a plain object, read as one (today's
                # gateway refuses SSE-C headers for an object not encrypted with them, as AWS).
                self.features.remove(feature)
                sse_c = {}
        self.object_reads(bucket, key, **sse_c)
        return True

    def object_reads(self, bucket: str, key: str, **kw: Any) -> None:
        self.read("s3", "head_object", Bucket=bucket, Key=key, **kw)
        self.read("s3", "get_object", Bucket=bucket, Key=key, **kw)
        self.read("s3", "get_object_tagging", Bucket=bucket, Key=key)
        self.read("s3", "get_object_acl", Bucket=bucket, Key=key)

    def write(self) -> None:
        s3 = self.s3
        for bucket in (PLAIN, VERSIONED):
            s3.create_bucket(Bucket=bucket)
        self._plain()
        self._versioned()
        self._locked()
        self._settings()
        self._iam()
        for bucket in (PLAIN, VERSIONED, LOCKED):
            self.read("s3", "head_bucket", Bucket=bucket)
            self.read("s3", "list_objects_v2", Bucket=bucket)
            self.read("s3", "list_object_versions", Bucket=bucket)
            self.read("s3", "list_multipart_uploads", Bucket=bucket)
        self.read("s3", "list_buckets")

    def _plain(self) -> None:
        s3 = self.s3
        meta = {"colour": "blue", "note": "written by an old gateway"}
        self.put(
            PLAIN,
            "inline.txt",
            body(INLINE_SIZE, 1),
            "inline",
            ContentType="text/plain",
            Metadata=meta,
            CacheControl="max-age=60",
            ContentDisposition='attachment; filename="inline.txt"',
        )
        self.put(PLAIN, "blob.bin", body(BLOB_SIZE, 2), "blob", Metadata=meta)
        self.put(PLAIN, "dir/odd key ü+%.txt", body(10, 3), "odd key")
        self.put(PLAIN, "tagged.txt", body(20, 4), "tagging header", Tagging="team=storage&tier=a")
        self.put(
            PLAIN, "crc.bin", body(70 * KiB, 5), "flexible checksum", ChecksumAlgorithm="CRC32"
        )
        for key in ("blob.bin", "inline.txt"):
            self.attempt(
                "copy",
                lambda key=key: s3.copy_object(
                    Bucket=PLAIN, Key=f"copy-of-{key}", CopySource={"Bucket": PLAIN, "Key": key}
                ),
            )
            self.object_reads(PLAIN, f"copy-of-{key}")
        tags = {"TagSet": [{"Key": "kind", "Value": "blob"}]}
        self.attempt(
            "object tagging",
            lambda: s3.put_object_tagging(Bucket=PLAIN, Key="blob.bin", Tagging=tags),
        )
        self.attempt(
            "object acl",
            lambda: s3.put_object_acl(Bucket=PLAIN, Key="inline.txt", ACL="public-read"),
        )
        self._multipart()
        self.put(PLAIN, "sse-s3.bin", body(70 * KiB, 6), "sse-s3", ServerSideEncryption="AES256")
        self.put(PLAIN, "sse-s3-small.txt", body(30, 7), "sse-s3", ServerSideEncryption="AES256")
        self.put(PLAIN, "sse-kms.bin", body(70 * KiB, 8), "sse-kms", ServerSideEncryption="aws:kms")
        ssec = {
            "SSECustomerAlgorithm": "AES256",
            "SSECustomerKey": SSE_C_KEY,
        }
        self.put(PLAIN, "sse-c.bin", body(70 * KiB, 9), "sse-c", **ssec)
        self.put(PLAIN, "sse-c-small.txt", body(40, 10), "sse-c", **ssec)

    def _multipart(self) -> None:
        s3 = self.s3
        made: dict[str, Any] = {}

        def create() -> None:
            made.update(
                s3.create_multipart_upload(
                    Bucket=PLAIN, Key="multipart.bin", ContentType="application/x-parts"
                )
            )

        if not self.attempt("multipart", create):
            return
        upload = made["UploadId"]
        first = s3.upload_part(
            Bucket=PLAIN,
            Key="multipart.bin",
            UploadId=upload,
            PartNumber=1,
            Body=body(PART_SIZE, 11),
        )
        # The last part a copy of a blob object: it shares that object's blob.
        second = s3.upload_part_copy(
            Bucket=PLAIN,
            Key="multipart.bin",
            UploadId=upload,
            PartNumber=2,
            CopySource={"Bucket": PLAIN, "Key": "blob.bin"},
        )
        parts = [
            {"PartNumber": 1, "ETag": first["ETag"]},
            {"PartNumber": 2, "ETag": second["CopyPartResult"]["ETag"]},
        ]
        s3.complete_multipart_upload(
            Bucket=PLAIN, Key="multipart.bin", UploadId=upload, MultipartUpload={"Parts": parts}
        )
        self.object_reads(PLAIN, "multipart.bin")
        self.read("s3", "get_object", Bucket=PLAIN, Key="multipart.bin", PartNumber=1)
        # An upload left in progress: the test completes it with today's gateway.
        pending = s3.create_multipart_upload(Bucket=PLAIN, Key="pending.bin", Metadata={"p": "1"})
        pending_id = pending["UploadId"]
        s3.upload_part(
            Bucket=PLAIN,
            Key="pending.bin",
            UploadId=pending_id,
            PartNumber=1,
            Body=body(PART_SIZE, 12),
        )
        self.features.append("upload in progress")
        self.pending = {"bucket": PLAIN, "key": "pending.bin", "upload_id": pending_id}
        self.read("s3", "list_parts", Bucket=PLAIN, Key="pending.bin", UploadId=pending_id)

    def _versioned(self) -> None:
        s3 = self.s3
        if not self.attempt(
            "versioning",
            lambda: s3.put_bucket_versioning(
                Bucket=VERSIONED, VersioningConfiguration={"Status": "Enabled"}
            ),
        ):
            s3.put_object(Bucket=VERSIONED, Key="doc.txt", Body=body(50, 20))
            self.object_reads(VERSIONED, "doc.txt")
            return
        self.read("s3", "get_bucket_versioning", Bucket=VERSIONED)
        ids = []
        for data in (body(50, 20), body(BLOB_SIZE, 21), body(60, 22)):
            ids.append(s3.put_object(Bucket=VERSIONED, Key="doc.txt", Body=data)["VersionId"])
        s3.delete_object(Bucket=VERSIONED, Key="doc.txt")  # a delete marker on top
        s3.put_object(Bucket=VERSIONED, Key="kept.txt", Body=body(70, 23))
        s3.copy_object(
            Bucket=VERSIONED, Key="kept.txt", CopySource={"Bucket": PLAIN, "Key": "blob.bin"}
        )
        self.features.append("delete marker")
        for version in ids:
            self.read("s3", "get_object", Bucket=VERSIONED, Key="doc.txt", VersionId=version)
            self.read("s3", "head_object", Bucket=VERSIONED, Key="doc.txt", VersionId=version)
        self.read("s3", "get_object", Bucket=VERSIONED, Key="doc.txt")
        self.object_reads(VERSIONED, "kept.txt")

    def _locked(self) -> None:
        s3 = self.s3
        if not self.attempt(
            "object lock", lambda: s3.create_bucket(Bucket=LOCKED, ObjectLockEnabledForBucket=True)
        ):
            # A version without Object Lock: the bucket, with nothing to lock in it.
            s3.create_bucket(Bucket=LOCKED)
            s3.put_object(Bucket=LOCKED, Key="held.txt", Body=body(80, 30))
            self.object_reads(LOCKED, "held.txt")
            return
        self.read("s3", "get_object_lock_configuration", Bucket=LOCKED)
        s3.put_object(
            Bucket=LOCKED, Key="held.txt", Body=body(80, 30), ObjectLockLegalHoldStatus="ON"
        )
        s3.put_object(
            Bucket=LOCKED,
            Key="retained.bin",
            Body=body(BLOB_SIZE, 31),
            ObjectLockMode="GOVERNANCE",
            ObjectLockRetainUntilDate=RETAIN_UNTIL,
        )
        for key in ("held.txt", "retained.bin"):
            self.object_reads(LOCKED, key)
            self.read("s3", "get_object_legal_hold", Bucket=LOCKED, Key=key)
            self.read("s3", "get_object_retention", Bucket=LOCKED, Key=key)

    def _settings(self) -> None:
        s3 = self.s3
        settings: list[tuple[str, str, dict[str, Any]]] = [
            (
                "bucket tagging",
                "bucket_tagging",
                {"Tagging": {"TagSet": [{"Key": "project", "Value": "upgrade"}]}},
            ),
            (
                "cors",
                "bucket_cors",
                {
                    "CORSConfiguration": {
                        "CORSRules": [
                            {"AllowedMethods": ["GET"], "AllowedOrigins": ["https://example.com"]}
                        ]
                    }
                },
            ),
            (
                "lifecycle",
                "bucket_lifecycle_configuration",
                {
                    "LifecycleConfiguration": {
                        "Rules": [
                            {
                                "ID": "old-logs",
                                "Status": "Enabled",
                                "Filter": {"Prefix": "logs/"},
                                "Expiration": {"Days": 3650},
                            }
                        ]
                    }
                },
            ),
            (
                "bucket policy",
                "bucket_policy",
                {
                    "Policy": json.dumps(
                        {
                            "Version": "2012-10-17",
                            "Statement": [
                                {
                                    "Effect": "Allow",
                                    "Principal": "*",
                                    "Action": "s3:GetObject",
                                    "Resource": f"arn:aws:s3:::{PLAIN}/public/*",
                                }
                            ],
                        }
                    )
                },
            ),
            (
                "bucket encryption",
                "bucket_encryption",
                {
                    "ServerSideEncryptionConfiguration": {
                        "Rules": [
                            {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                        ]
                    }
                },
            ),
            ("bucket acl", "bucket_acl", {"ACL": "public-read"}),
        ]
        for feature, name, args in settings:
            # The settings go on the versioned bucket (the plain one's writes are done, so its
            # default encryption changes nothing written).
            bucket = PLAIN if feature == "bucket policy" else VERSIONED
            if self.attempt(
                feature, lambda n=name, a=args, b=bucket: getattr(s3, f"put_{n}")(Bucket=b, **a)
            ):
                self.read("s3", f"get_{name}", Bucket=bucket)

    def _iam(self) -> None:
        iam = self.clients["iam"]
        try:
            iam.create_user(UserName="alice", Path="/staff/")
        except Exception:
            return
        key = iam.create_access_key(UserName="alice")["AccessKey"]
        self.alice = {"access_key": key["AccessKeyId"], "secret_key": key["SecretAccessKey"]}
        iam.put_user_policy(
            UserName="alice", PolicyName="read-plain", PolicyDocument=json.dumps(ALICE_POLICY)
        )
        iam.create_group(GroupName="readers")
        iam.add_user_to_group(GroupName="readers", UserName="alice")
        made = iam.create_policy(PolicyName="managed-read", PolicyDocument=json.dumps(ALICE_POLICY))
        arn = made["Policy"]["Arn"]
        iam.attach_group_policy(GroupName="readers", PolicyArn=arn)
        iam.create_role(RoleName="reader", AssumeRolePolicyDocument=json.dumps(TRUST_POLICY))
        iam.attach_role_policy(RoleName="reader", PolicyArn=arn)
        self.features.append("iam")
        self.read("iam", "get_user", UserName="alice")
        self.read("iam", "list_users")
        self.read("iam", "list_access_keys", UserName="alice")
        self.read("iam", "get_user_policy", UserName="alice", PolicyName="read-plain")
        self.read("iam", "list_groups_for_user", UserName="alice")
        self.read("iam", "list_attached_group_policies", GroupName="readers")
        self.read("iam", "get_policy", PolicyArn=arn)
        self.read("iam", "get_role", RoleName="reader")
        self.read("iam", "list_attached_role_policies", RoleName="reader")
        # Alice's old key still signs, and her policies still decide.
        self.read("s3:alice", "get_object", Bucket=PLAIN, Key="inline.txt")
        self.read("s3:alice", "put_object", Bucket=PLAIN, Key="alice-may-not.txt", Body="x")

    def record(self, leave_out: set[str] | frozenset[str] = frozenset()) -> list[Check]:
        """Ask the gateway every read of the data set (but the calls named in `leave_out`);
        what it answers is the expectation."""
        checks = []
        for client, name, args in self.reads:
            if name in leave_out:
                continue
            stored = dict(args)
            if "SSECustomerKey" in stored:
                stored["SSECustomerKey"] = stored["SSECustomerKey"].hex()
            check = Check(client, name, stored)
            check.expect, check.error = call(self.clients, check)
            if check.error in ("NotImplemented", "MethodNotAllowed"):
                continue  # this version could not say: nothing of it to keep
            checks.append(check)
        return checks


def _sse_c_args(kw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if k.startswith("SSECustomer")}
