"""PostObject: a browser's form upload (`POST /bucket`, multipart/form-data).

Its credentials are form fields, not headers: SigV4 (`x-amz-algorithm`, `x-amz-credential`,
`x-amz-date`, `x-amz-signature`: the hex HMAC-SHA256 of the base64 policy under the day's
signing key) or SigV2 (`AWSAccessKeyId`, `signature`: the base64 HMAC-SHA1 of the policy), or
none at all (anonymous). So the dispatcher lets this operation past header authentication and
its authorisation: both happen here, once the fields before the file have been read, and
before a byte of the file is stored. The file then streams into the store by the same path as
PutObject's body (same ETag, checksums and durability).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from urllib.parse import quote, urlencode, urlsplit

from aiohttp import web
from multidict import CIMultiDict

from ... import digest
from ...store.model import NULL_VERSION, StagedBlob
from ...users import User
from .. import checksums, postform, postpolicy, retention, sigv2, sse, tagging, writes, xml
from ..auth import ALGORITHM, SERVICE, TERMINATOR, UNSIGNED_PAYLOAD, AuthResult, _signing_key
from ..authorize import Access, authorize
from ..context import Context
from ..errors import S3Error
from ..middleware import USER
from ..params import attrs_from_headers, check_key
from .acl import object_acl_for_write

# Who sent a form until its fields say: nobody (the dispatcher's placeholder caller).
ANONYMOUS = User(access_key="", secret_key="", display_name="anonymous", canonical_id="")
FORM_AUTH = AuthResult(
    user=ANONYMOUS,
    payload_hash=UNSIGNED_PAYLOAD,  # the form's signature covers its policy, not the body
    signature="",
    signing_key=b"",
    amz_date="",
    scope="",
)
_SIGV4_FIELDS = ("x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-signature")
_SIGV2_FIELDS = ("awsaccesskeyid", "signature")
# How AWS names a missing field in its message (LS s3.snap: "X-Amz-Signature", "Signature").
_SHOWN = {
    "x-amz-algorithm": "X-Amz-Algorithm",
    "x-amz-credential": "X-Amz-Credential",
    "x-amz-date": "X-Amz-Date",
    "x-amz-signature": "X-Amz-Signature",
    "awsaccesskeyid": "AWSAccessKeyId",
    "signature": "Signature",
    "policy": "Policy",
    "key": "key",
}


def _missing(name: str) -> S3Error:
    shown = _SHOWN[name]
    # Two spaces before "If": AWS's text.
    return S3Error(
        "InvalidArgument",
        f"Bucket POST must contain a field named '{shown}'.  If it is specified, please check "
        "the order of the fields.",
        ArgumentName=shown,
        ArgumentValue="",
    )


def _signer(ctx: Context, fields: Mapping[str, str]) -> User | None:
    """The user whose signature the form carries (None: an anonymous form); the signature
    and the credential's scope verified."""
    v4 = [name for name in _SIGV4_FIELDS if name in fields]
    v2 = [name for name in _SIGV2_FIELDS if name in fields]
    if not v4 and not v2:
        if "policy" in fields:
            raise S3Error("AccessDenied")  # a policy nobody signed
        return None
    wanted = _SIGV4_FIELDS if v4 else _SIGV2_FIELDS
    for name in (*wanted, "policy"):
        if name not in fields:
            raise _missing(name)
    users = {u.access_key: u for u in ctx.users_by_id.values()}
    policy = fields["policy"].encode()
    if not v4:
        user = _user(users, fields["awsaccesskeyid"])
        expected = sigv2.signature(user.secret_key, fields["policy"])
        provided = fields["signature"]
    else:
        if fields["x-amz-algorithm"] != ALGORITHM:
            raise S3Error(
                "InvalidArgument",
                f"Only {ALGORITHM} is supported",
                ArgumentName="X-Amz-Algorithm",
                ArgumentValue=fields["x-amz-algorithm"],
            )
        credential = fields["x-amz-credential"]
        parts = credential.split("/")
        if len(parts) != 5 or parts[3] != SERVICE or parts[4] != TERMINATOR:
            raise S3Error(
                "InvalidArgument",
                "The credential is malformed: AKID/yyyymmdd/region/s3/aws4_request",
                ArgumentName="X-Amz-Credential",
                ArgumentValue=credential,
            )
        access_key, date, region = parts[:3]
        user = _user(users, access_key)
        if region != ctx.settings.region:
            raise S3Error(
                "InvalidArgument",
                f"the region '{region}' is wrong; expecting '{ctx.settings.region}'",
                ArgumentName="X-Amz-Credential",
                ArgumentValue=credential,
            )
        if fields["x-amz-date"][:8] != date:
            raise S3Error(
                "InvalidArgument",
                "Invalid credential date. Date is not the same as X-Amz-Date.",
                ArgumentName="X-Amz-Date",
                ArgumentValue=fields["x-amz-date"],
            )
        key = _signing_key(user.secret_key, date, region, SERVICE)
        expected = hmac.new(key, policy, hashlib.sha256).hexdigest()
        provided = fields["x-amz-signature"]
    if not hmac.compare_digest(expected.encode(), provided.encode("utf-8", "replace")):
        raise S3Error("SignatureDoesNotMatch", AWSAccessKeyId=user.access_key)
    return user


def _user(users: Mapping[str, User], access_key: str) -> User:
    user = users.get(access_key)
    if user is None:
        raise S3Error("InvalidAccessKeyId", AWSAccessKeyId=access_key)
    return user


def _key(fields: Mapping[str, str], filename: str | None) -> str:
    key = fields.get("key")
    if not key:
        raise _missing("key")
    if filename is not None:
        # The name without the browser's path (some send C:\\dir\\name).
        key = key.replace("${filename}", filename.replace("\\", "/").rsplit("/", 1)[-1])
    return check_key(key)


def _headers(fields: Mapping[str, str]) -> CIMultiDict[str]:
    """The form's fields as the request headers a PutObject would carry."""
    headers = CIMultiDict(fields)
    if "acl" in fields:
        headers["x-amz-acl"] = fields["acl"]
    return headers


async def _sized(chunks: AsyncIterator[bytes], maximum: int) -> AsyncIterator[bytes]:
    """The file's chunks, cut off as soon as they pass the policy's or the gateway's maximum
    (ProposedSize is then what had arrived: the rest is never read)."""
    received = 0
    async for chunk in chunks:
        received += len(chunk)
        if received > maximum:
            raise S3Error("EntityTooLarge", ProposedSize=received, MaxSizeAllowed=maximum)
        yield chunk


async def post_object(ctx: Context) -> web.StreamResponse:
    boundary = postform.boundary_of(ctx.headers.get("Content-Type"))
    if boundary is None:
        raise S3Error(
            "PreconditionFailed",
            Condition="Bucket POST must be of the enclosure-type multipart/form-data",
        )
    reader = postform.FormReader(aiter(ctx.payload.chunks()), boundary)
    form = await reader.read_fields()
    fields = form.fields
    user = _signer(ctx, fields)
    key = _key(fields, form.filename)
    policy = None
    if user is not None:
        policy = postpolicy.decode(fields["policy"])
        checked = {**fields, "key": key}
        postpolicy.check(policy, checked, ctx.bucket, dt.datetime.now(dt.UTC))
        ctx.user = user
        ctx.request[USER] = user.display_name
    bucket = ctx.bucket_record
    assert bucket is not None  # the dispatcher found it
    # The form's signer, or the anonymous caller, as any PutObject is decided.
    authorize(Access(ctx.user, "PostObject", bucket, key))

    headers = _headers(fields)
    owner, acl = object_acl_for_write(headers, ctx.user, bucket, ctx.users_by_id.__contains__)
    attrs = replace(attrs_from_headers(headers), owner=owner, acl=acl)
    if "tagging" in fields:  # a <Tagging> document here, not the header's query form
        attrs = replace(
            attrs, tags=tagging.from_xml(fields["tagging"].encode(), tagging.MAX_OBJECT_TAGS)
        )
    checksum = checksums.parse_request(headers)
    named = checksums.requested(headers)
    if named is not None and checksum is not None and checksum.algorithm is not named:
        # The form's x-amz-checksum-algorithm names another algorithm than its value's: refused
        # as PutObject refuses x-amz-sdk-checksum-algorithm naming another one.
        raise S3Error("InvalidRequest", "Value for x-amz-checksum-algorithm header is invalid.")
    lock = retention.lock_from_headers(headers, bucket)
    # A form without a checksum value gets the checksum its x-amz-checksum-algorithm field names
    # (computed by S3, as CopyObject's x-amz-checksum-algorithm asks), else AWS's default one;
    # either in the MD5's pass.
    if checksum is not None:
        computed = checksum.new()
    else:
        computed = named.new() if named is not None else writes.default_checksum()
    low, high = policy.length_range if policy and policy.length_range else (0, None)
    maximum = (
        ctx.settings.max_object_size if high is None else min(high, ctx.settings.max_object_size)
    )
    # Encrypted as a PUT with the same fields would be (or by the bucket's default).
    encryption = sse.for_write(
        headers,
        bucket.settings,
        ctx.store.keys,
        ctx.request.secure,
        ctx.settings.sse_c_over_http == "allow",
    )
    stored: dict[str, str] = {}

    def check(blob: StagedBlob) -> None:
        nonlocal stored
        if blob.size < low:
            raise S3Error("EntityTooSmall", ProposedSize=blob.size, MinSizeAllowed=low)
        if checksum is not None:
            stored = writes.whole_object_checksum(checksum.algorithm, checksum.check(computed, {}))
        else:
            stored = writes.whole_object_checksum(computed.algorithm, computed.value())

    blob = await writes.stage(
        ctx.store, _sized(reader.file_chunks(), maximum), encryption, [computed], check
    )
    attrs = replace(attrs, checksums=stored)
    obj = await writes.put(ctx.store, ctx.bucket, key, blob, attrs, encryption, lock=lock)
    # A null version (unversioned or suspended bucket) is not named, as on PutObject.
    made = obj.version_id if obj.version_id != NULL_VERSION else None
    return _answer(ctx, fields, key, obj.etag, made, {**stored, **sse.echo(obj.attrs, True)})


def _answer(
    ctx: Context,
    fields: Mapping[str, str],
    key: str,
    etag: str,
    version_id: str | None,
    checksum: Mapping[str, str],
) -> web.Response:
    """AWS's success answers: a 303 to success_action_redirect, or success_action_status 200,
    201 (the PostResponse document) or, by default and for any other value, 204."""
    quoted = digest.quote(etag)
    path = ctx.request.raw_path.partition("?")[0].rstrip("/")
    location = f"{ctx.request.scheme}://{ctx.request.host}{path}/{quote(key, safe='/')}"
    headers = {"ETag": quoted, "Location": location, **checksum}
    if version_id is not None:
        headers["x-amz-version-id"] = version_id
    redirect = fields.get("success_action_redirect") or fields.get("redirect")
    if redirect:
        url = urlsplit(redirect)
        if url.scheme in ("http", "https") and url.netloc:
            query = urlencode({"bucket": ctx.bucket, "key": key, "etag": quoted})
            headers["Location"] = redirect + ("&" if url.query else "?") + query
            return web.Response(status=303, headers=headers)
        # A URL S3 cannot use is ignored.
    status = fields.get("success_action_status")
    if status == "200":
        return web.Response(status=200, headers=headers)
    if status == "201":
        body = xml.render(
            "PostResponse",
            [("Location", location), ("Bucket", ctx.bucket), ("Key", key), ("ETag", quoted)],
            namespace=False,  # AWS's PostResponse has none (clients find("Key") on it)
        )
        return web.Response(status=201, headers=headers, body=body, content_type="application/xml")
    return web.Response(status=204, headers=headers)


OPERATIONS = {"PostObject": post_object}
