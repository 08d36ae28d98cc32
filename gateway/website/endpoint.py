"""The website endpoint's requests, by AWS's pages "Website endpoints", "Configuring an index
document", "Configuring a custom error document" and "Configuring a webpage redirect".

`Host: BUCKET.DOMAIN` (--website-domain), or a Host that is a bucket's name (a CNAME), names
the bucket; its website configuration (s3/website.py) says what is served. Every read is an
anonymous GetObject (HeadObject) judged and sent by the S3 endpoint's own machinery
(`ObjectReads`: the dispatcher's), so Block Public Access, policies and ACLs decide what is
public, and conditions, ranges and CORS behave as there. Nothing is ever listed.
"""

from __future__ import annotations

from typing import Protocol
from urllib.parse import quote, unquote

from aiohttp import web
from multidict import CIMultiDict

from ..config import Settings
from ..s3 import website
from ..s3.errors import S3Error
from ..s3.middleware import (
    BUCKET,
    ERROR_CODE,
    HOST_ID,
    OPERATION,
    REQUEST_ID,
    TARGET,
    Observer,
    S3Middleware,
    on_response_prepare,
)
from ..s3.router import Endpoint, Op, bucket_from_host
from ..store import Bucket, Store, StoreError
from ..store.store import Latest
from .pages import error_page

REDIRECT_LOCATION = "x-amz-website-redirect-location"
# What a request asks of the object it names, not of the error document sent in its place.
_OF_THE_OBJECT = (
    "Range",
    "If-Match",
    "If-None-Match",
    "If-Modified-Since",
    "If-Unmodified-Since",
    "x-amz-checksum-mode",
)


class ObjectReads(Protocol):
    """The S3 endpoint's reads of one object (gateway/s3/dispatch.py's Dispatcher)."""

    async def judge_anonymous_read(
        self, request: web.Request, bucket: Bucket, key: str
    ) -> Latest: ...

    async def send_object(
        self,
        request: web.Request,
        bucket: Bucket,
        key: str,
        latest: Latest,
        status: int | None = None,
    ) -> web.StreamResponse: ...


def build_website(
    store: Store, settings: Settings, reads: ObjectReads, observe: Observer | None = None
) -> web.Application:
    """The website endpoint's application: its requests counted, logged and given request
    ids by the S3 middleware (which renders only what escapes the pages: an internal error);
    `observe`: their server access log records (WEBSITE.GET.OBJECT)."""
    site = Website(store, settings, reads)
    handler = S3Middleware(site.handle, store.get_bucket, observe)
    app = web.Application()
    app.router.add_route("*", r"/{path:[\s\S]*}", handler)
    app.on_response_prepare.append(on_response_prepare)  # request ids, Server, CORS headers
    return app


def _redirect(status: int, location: str) -> web.Response:
    return web.Response(status=status, headers={"Location": location})


class Website:
    def __init__(self, store: Store, settings: Settings, reads: ObjectReads) -> None:
        self.store = store
        self.domain = settings.website_domain
        self.reads = reads

    async def handle(self, request: web.Request) -> web.StreamResponse:
        request[OPERATION] = "WebsiteHeadObject" if request.method == "HEAD" else "WebsiteGetObject"
        try:
            return await self._serve(request)
        except S3Error as exc:
            return self._page(request, exc)
        except StoreError as exc:
            error = _as_s3(exc)
            if error is None:
                raise  # the S3 middleware's to answer (storage unavailable, internal)
            return self._page(request, error)

    def _page(
        self, request: web.Request, exc: S3Error, document_error: S3Error | None = None
    ) -> web.Response:
        request[ERROR_CODE] = exc.code  # for the access log's records
        return error_page(
            exc, request[REQUEST_ID], request[HOST_ID], request.method, document_error
        )

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise S3Error("MethodNotAllowed", Method=request.method, ResourceType="OBJECT")
        host = request.headers.get("Host", "")
        name = bucket_from_host(host, self.domain) or _hostname(host)
        bucket = await self.store.get_bucket(name) if name else None
        if bucket is None:
            raise S3Error("NoSuchBucket", BucketName=name)
        request[BUCKET] = bucket  # its CORS rules shape every answer, as on the S3 endpoint
        stored = bucket.settings.get(website.SETTING)
        if stored is None:
            raise S3Error("NoSuchWebsiteConfiguration", BucketName=bucket.name)
        config = website.configuration_of(stored)
        raw_path = request.raw_path.partition("?")[0]
        try:
            path = unquote(raw_path, errors="strict")
        except UnicodeDecodeError as exc:
            raise S3Error("InvalidURI") from exc
        if not path.startswith("/"):
            raise S3Error("InvalidURI")
        scheme = request.scheme
        if config.redirect_all is not None:
            location = website.redirect_all_location(config.redirect_all, path, host, scheme)
            return _redirect(301, location)
        key = path[1:]
        # For the access log line: the bucket and key asked for.
        read = Op.HeadObject if request.method == "HEAD" else Op.GetObject
        request[TARGET] = Endpoint(read, bucket.name, key or None)
        rule = config.rule_for(key)
        if rule is not None:
            return _redirect(*website.location(rule, key, host, scheme))
        try:
            return await self._object(request, bucket, config, key)
        except (S3Error, StoreError) as exc:
            error = exc if isinstance(exc, S3Error) else _as_s3(exc)
            if error is None or error.status >= 500:
                raise
            rule = config.rule_for(key, error.status)
            if rule is not None:
                return _redirect(*website.location(rule, key, host, scheme))
            if config.error_key is not None:
                return await self._error_document(request, bucket, config.error_key, error)
            raise error from None

    async def _object(
        self, request: web.Request, bucket: Bucket, config: website.WebsiteConfiguration, key: str
    ) -> web.StreamResponse:
        """The object a key names: the index document for `` and every `…/`; a key without
        its slash whose `key/INDEX` exists is sent there (302); an object's redirect location
        is a 301."""
        suffix = config.index_suffix or ""
        lookup = key + suffix if key == "" or key.endswith("/") else key
        try:
            latest = await self.reads.judge_anonymous_read(request, bucket, lookup)
            if latest is None:
                raise S3Error("NoSuchKey", Key=lookup)
        except S3Error as exc:
            if lookup != key or exc.code not in ("NoSuchKey", "AccessDenied"):
                raise
            # "Configuring an index document": a request for `photos` finds `photos/INDEX`
            # and is told to ask for `photos/`.
            try:
                folder = await self.reads.judge_anonymous_read(request, bucket, f"{key}/{suffix}")
            except S3Error:
                folder = None
            if folder is None:
                raise exc from None
            return _redirect(302, quote(f"/{key}/", safe="/!$&'()*+,;=:@~"))
        redirect = latest[0].attrs.headers.get(REDIRECT_LOCATION)
        if redirect is not None:
            return _redirect(301, redirect)
        return await self.reads.send_object(request, bucket, lookup, latest)

    async def _error_document(
        self, request: web.Request, bucket: Bucket, error_key: str, error: S3Error
    ) -> web.StreamResponse:
        """The bucket's error document, sent with the error's status ("Configuring a custom
        error document"); AWS's page, saying why, when it cannot be read either."""
        headers = CIMultiDict(request.headers)
        for name in _OF_THE_OBJECT:
            headers.popall(name, None)
        plain = request.clone(headers=headers)
        try:
            latest = await self.reads.judge_anonymous_read(plain, bucket, error_key)
            if latest is None:
                raise S3Error("NoSuchKey", Key=error_key)
        except S3Error as exc:
            return self._page(request, error, exc)
        return await self.reads.send_object(plain, bucket, error_key, latest, error.status)


# The store's errors a website request answers as S3 would (a key vanished between the
# judgement and the read, a key that is too long).
_S3_CODES = frozenset({"NoSuchKey", "NoSuchBucket", "KeyTooLongError", "InvalidObjectState"})


def _as_s3(exc: StoreError) -> S3Error | None:
    if exc.code not in _S3_CODES:
        return None
    return S3Error(exc.code, exc.message or None, **exc.fields)


def _hostname(host: str) -> str:
    """The Host header without its port: a CNAME that is a bucket's name."""
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name.lower().rstrip(".")
