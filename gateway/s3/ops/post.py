"""PostObject: a browser's form upload (`POST /bucket`, multipart/form-data).

Its credentials are form fields, not headers (auth.Authenticator.post_form says who signed
them). So the dispatcher lets this operation past header authentication and its
authorisation: both happen here, once the fields before the file have been read, and before a
byte of the file is stored. The file then streams into the store by the same path as
PutObject's body (same ETag, checksums and durability).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from urllib.parse import quote, urlencode, urlsplit

from aiohttp import web
from multidict import CIMultiDict

from ... import digest
from ...store.model import NULL_VERSION, StagedBlob
from .. import checksums, policy_context, postform, postpolicy, retention, sse, tagging, writes, xml
from ..authorize import Access, authorize, is_anonymous
from ..context import Context
from ..errors import S3Error
from ..middleware import REQUESTER, USER
from ..params import attrs_from_headers, check_key
from .acl import object_acl_for_write


def _key(fields: Mapping[str, str], filename: str | None) -> str:
    key = fields.get("key")
    if not key:
        raise postform.missing("key")
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
    signed = await ctx.authenticator.identify_form(fields)
    key = _key(fields, form.filename)
    policy = None
    if not is_anonymous(signed.user):
        policy = postpolicy.decode(fields["policy"])
        checked = {**fields, "key": key}
        postpolicy.check(policy, checked, ctx.bucket, dt.datetime.now(dt.UTC))
        ctx.user = signed.user
        ctx.request[USER] = signed.user.name
        ctx.request[REQUESTER] = signed.user.requester
    bucket = ctx.bucket_record
    assert bucket is not None  # the dispatcher found it
    headers = _headers(fields)
    # The form's signer, or the anonymous caller, as any PutObject is decided: with the
    # request's condition values (address, TLS, time) and the form's fields as its headers.
    anonymous = is_anonymous(signed.user)
    caller = policy_context.Caller(
        signed.user,
        ctx.request.remote,
        ctx.request.secure,
        headers,
        ctx.request.query,
        signature_version=None if anonymous else "AWS4-HMAC-SHA256" if signed.scope else "AWS",
        auth_type=None if anonymous else "POST",
    )
    values = policy_context.values(caller, None)
    authorize(Access(ctx.user, "PostObject", bucket, key, conditions=values))

    owner, acl = object_acl_for_write(headers, ctx.user, bucket, ctx.users_by_id.__contains__)
    acl = ctx.resolve_stored_emails(acl)
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
    obj = await writes.put(
        ctx.store, ctx.bucket, key, blob, attrs, encryption, lock=lock, origin=ctx.origin(True)
    )
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
