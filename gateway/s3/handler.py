"""The S3 request handler: the middleware (request id, errors, access log, metrics) around
the dispatcher (route, authenticate, authorise, body, operation)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from aiohttp import web

from ..config import Settings
from ..store import Store
from ..users import User
from . import logrecords
from .auth import KeySource
from .dispatch import OPERATIONS, Dispatcher, Services
from .logrecords import Logged
from .middleware import Handler, Observer, S3Middleware, on_response_prepare

__all__ = ["OPERATIONS", "log_observer", "on_response_prepare", "s3_handler", "website_reads"]


def s3_handler(
    store: Store,
    settings: Settings,
    users: Mapping[str, User],
    deliver: Callable[[list[Logged]], None] | None = None,
    keys: KeySource | None = None,
    services: tuple[Callable[[web.Request, str | None], bool], Services] | None = None,
) -> Handler:
    """`deliver`: takes the server access log records each request makes (the log delivery
    worker's `take`); `keys` and `services`: IAM's (Dispatcher)."""
    observe = None if deliver is None else log_observer(deliver)
    dispatcher = Dispatcher(store, settings, users, keys, services)
    return S3Middleware(dispatcher, store.get_bucket, observe)


def website_reads(handler: Handler) -> Dispatcher:
    """The dispatcher behind an `s3_handler`: the website endpoint reads objects through it
    (Dispatcher.judge_anonymous_read, send_object), judged and sent as S3's GetObject."""
    assert isinstance(handler, S3Middleware) and isinstance(handler.dispatch, Dispatcher)
    return handler.dispatch


def log_observer(deliver: Callable[[list[Logged]], None]) -> Observer:
    """Hands the server access log records each answered request makes to `deliver` (the
    S3 endpoint's, and the website endpoint's: WEBSITE.GET.OBJECT records)."""

    def observe(
        request: web.Request, response: web.StreamResponse, sent: int, seconds: float
    ) -> None:
        made = logrecords.records(request, response, sent, seconds)
        if made:
            deliver(made)

    return observe
