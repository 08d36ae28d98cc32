"""The S3 request handler: the middleware (request id, errors, access log, metrics) around
the dispatcher (route, authenticate, authorise, body, operation)."""

from __future__ import annotations

from collections.abc import Mapping

from ..config import Settings
from ..store import Store
from ..users import User
from .dispatch import OPERATIONS, Dispatcher
from .middleware import Handler, Observer, S3Middleware, on_response_prepare

__all__ = ["OPERATIONS", "on_response_prepare", "s3_handler"]


def s3_handler(
    store: Store, settings: Settings, users: Mapping[str, User], observe: Observer | None = None
) -> Handler:
    return S3Middleware(Dispatcher(store, settings, users), store.get_bucket, observe)
