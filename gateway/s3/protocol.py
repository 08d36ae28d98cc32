"""What aiohttp's HTTP parser refuses before any handler sees a request, answered as S3 does.

A malformed request line, a method that is not a token, an empty or negative Content-Length,
a header line over the limit, or the bytes that a body longer than its Content-Length leaves
behind (parsed as the next request): S3 answers these with its XML error, `400 BadRequest`
"An error occurred when parsing the HTTP request." (`RequestHeaderSectionTooLarge`, with
`<MaxSizeAllowed>`, for headers over the limit), and closes the connection. aiohttp would answer
a plain-text HTTP/1.0 400 naming its version in `Server`, and log the client's bad bytes as an
ERROR with a traceback; here the log gets one line at info.

And what it accepts, made one: a header sent twice reaches every reader as one joined value.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from aiohttp import web
from aiohttp.http import HttpVersion11, RawRequestMessage
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_urldispatcher import PlainResource, UrlMappingMatchInfo
from multidict import CIMultiDict, CIMultiDictProxy

from .. import metrics
from .errors import S3Error
from .middleware import SERVER, Handler, new_host_id, new_request_id

log = logging.getLogger(__name__)


def parse_error(exc: BaseException | None) -> S3Error:
    """The S3 error for what the parser refused."""
    if isinstance(exc, LineTooLong):
        return S3Error("RequestHeaderSectionTooLarge", MaxSizeAllowed=exc.args[1])
    if isinstance(exc, HttpProcessingError) and exc.message.startswith("Too many headers"):
        return S3Error("RequestHeaderSectionTooLarge")
    return S3Error("BadRequest")


def _one_line(exc: BaseException | None) -> str:
    """The parser's reason without its caret line; the bytes it quotes are a repr already."""
    text = exc.message if isinstance(exc, HttpProcessingError) else repr(exc)
    lines = [line.strip() for line in text.splitlines()]
    return " ".join(line for line in lines if line.strip("^ "))[:300]


class S3RequestHandler(RequestHandler):
    """aiohttp's connection handler, with S3's answers to the errors it handles itself."""

    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:
            # An answer is under way: nothing more can be said. Whoever started it logged why.
            raise ConnectionError("the response had started; the connection is dropped")
        request_id, host_id = new_request_id(), new_host_id()
        if status == 400:
            error = parse_error(exc)
            log.info(
                "request %s from %s: %s (%s)",
                request_id,
                request.remote,
                error.code,
                _one_line(exc),
            )
        else:
            # The gateway's own failure outside the S3 handler (which answers its own).
            log.error("request %s failed", request_id, exc_info=exc)
            error = S3Error("InternalError")
        metrics.REQUESTS.labels("Unknown", str(error.status)).inc()
        # The request line may not have been read: answer in the version the gateway speaks.
        request._version = HttpVersion11
        response = web.Response(
            status=error.status,
            body=error.to_xml(request_id, host_id),
            content_type="application/xml",
            headers={"Server": SERVER, "x-amz-request-id": request_id, "x-amz-id-2": host_id},
        )
        # What follows on this connection cannot be framed: close it (Connection: close).
        response.force_close()
        return response


def join_repeated_headers(message: RawRequestMessage) -> RawRequestMessage:
    """A header sent more than once becomes one value, its values joined with ",": what
    HTTP means by a repeated field (RFC 9110 5.3), what SigV4 signs, and what AWS receives.
    Done as the request is made, before anything reads it, so the signature, the policy's
    condition keys and the operation all see the one value: two `x-amz-acl` lines are
    `private,bucket-owner-full-control`, which is no canned ACL, and no check can pass on
    one occurrence while the operation uses another."""
    headers = message.headers
    if len(headers) == len({name.lower() for name in headers}):
        return message
    joined: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        joined[name] = f"{joined[name]},{value}" if name in joined else value
    return message._replace(headers=CIMultiDictProxy(joined))


class S3Server(web.Server):
    def __call__(self) -> RequestHandler:
        return S3RequestHandler(self, loop=self._loop, **self._kwargs)


# The application's S3 handler, its catch-all route's (app.py sets it): S3AppRunner sends S3's
# requests to it directly.
S3_HANDLER = web.AppKey("s3_handler", Handler)


class S3AppRunner(web.AppRunner):
    """An AppRunner whose connections answer parse errors as S3 does, and whose S3 requests
    go to the S3 handler directly, through the application's middlewares, without aiohttp's
    router: a request for a path that names no other route of the application (its plain
    paths: /health/live, /health/ready, /metrics) can only be S3's, so resolving it, making
    its match info and chaining its middlewares anew would be work for nothing (about 5 %
    of a 4 KiB request's CPU, docs/performance.md). Its match info is the catch-all route's,
    made once, so that `request.app` and the application's on_response_prepare hold."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = S3Server  # the same object, with S3's connection handler
        make_request = server.request_factory

        def request_factory(message: RawRequestMessage, *args: Any) -> web.BaseRequest:
            return make_request(join_repeated_headers(message), *args)

        server.request_factory = request_factory
        s3 = self.app.get(S3_HANDLER)
        if s3 is not None:
            server.request_handler = _direct(self.app, s3, server.request_handler)
        return server


def _direct(app: web.Application, s3: Handler, routed: Handler) -> Handler:
    plain = {r.canonical for r in app.router.resources() if isinstance(r, PlainResource)}
    catch_all = [r for r in app.router.routes() if not isinstance(r.resource, PlainResource)]
    assert len(catch_all) == 1, "the S3 handler's is the application's one catch-all route"
    info = UrlMappingMatchInfo({}, catch_all[0])
    info.add_app(app)
    info.freeze()
    handler = s3
    for middleware in reversed(app.middlewares):  # frozen by now; all new-style (@middleware)
        handler = partial(middleware, handler=handler)

    async def direct(request: web.BaseRequest) -> web.StreamResponse:
        if request.path in plain:
            return await routed(request)
        request._match_info = info  # type: ignore[attr-defined]
        return await handler(request)  # type: ignore[arg-type]

    return direct
