"""Builds the aiohttp application: store, users, the S3 handler, start-up and shutdown."""

from __future__ import annotations

import logging
from pathlib import Path

from aiohttp import web

from . import digest
from .config import Settings, load_users
from .s3.handler import S3Handler, on_response_prepare
from .store import Store

log = logging.getLogger(__name__)

STORE = web.AppKey("store", Store)
CREDENTIALS = web.AppKey("credentials", tuple)


async def _ignore_expect(request: web.Request) -> None:
    """Expect is answered by the handler: `100-continue` once the request has passed its
    checks (Payload), any other value ignored as S3 does (aiohttp would answer 417)."""


def build_app(settings: Settings) -> web.Application:
    log.info("%s", digest.configure(settings.md5_backend))
    settings.data.mkdir(parents=True, exist_ok=True)
    store = Store(settings.data, inline_max=settings.inline_max)
    tmp, orphans = store.start()
    if tmp or orphans:
        log.info("start-up sweep removed %d tmp files and %d orphan blobs", tmp, orphans)
    users, credentials_path = load_users(settings)
    handler = S3Handler(store, settings, users)

    app = web.Application(client_max_size=1024**2)
    app[STORE] = store
    app[CREDENTIALS] = (next(iter(users.values())), credentials_path)
    app.router.add_route("*", r"/{path:[\s\S]*}", handler, expect_handler=_ignore_expect)
    app.on_response_prepare.append(on_response_prepare)

    async def close_store(app: web.Application) -> None:
        store.close()

    app.on_cleanup.append(close_store)
    return app


def describe(settings: Settings, app: web.Application, url: str) -> list[str]:
    user, path = app[CREDENTIALS]
    source: Path | str = path if path is not None else "S3GW_ACCESS_KEY / S3GW_SECRET_KEY"
    if settings.users is not None and settings.access_key:
        source = f"{settings.users} and S3GW_ACCESS_KEY / S3GW_SECRET_KEY"
    # "listening on" comes last: whoever waits for it has seen the rest.
    return [
        f"data folder: {settings.data.resolve()}",
        f"credentials: {source}",
        f"access key: {user.access_key}",
        f"secret key: {user.secret_key}",
        f"region: {settings.region}",
        f"s3gw listening on {url}",
    ]
