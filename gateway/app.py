"""Builds the aiohttp application: store, users, the S3 handler, start-up and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from . import digest, metrics, tiers
from .config import Settings
from .iam.api import Services, is_service_request
from .iam.principals import Principals
from .keyring import load_keyring
from .notify import configuration
from .notify.networks import networks
from .notify.sns import TopicsApi
from .replication import matching, remotes
from .replication.copier import Replicator
from .s3.context import FLUSH_LOGS
from .s3.handler import log_observer, on_response_prepare, s3_handler, website_reads
from .s3.middleware import Observer
from .s3.protocol import S3_HANDLER
from .store import Store, StoreError, open_store
from .store.blobs import FolderInUse, FolderLock
from .users import load_users, read_users_file
from .website import ObjectReads
from .workers.lifecycle import LifecycleWorker
from .workers.logdelivery import LogDelivery
from .workers.notifications import NotificationWorker

log = logging.getLogger(__name__)

STORE = web.AppKey("store", Store)
RENDERER = web.AppKey("renderer", metrics.Renderer)
# Who an access key is (the roots, and IAM's keys kept briefly): the console signs in and
# acts through the same one, so a change made there counts at once for S3 on this worker.
PRINCIPALS = web.AppKey("principals", Principals)
# The S3 endpoint's reads of one object, through which the website endpoint serves its own.
OBJECT_READS = web.AppKey("object_reads", ObjectReads)
# What the website endpoint's requests record for server access logging (the S3 endpoint's
# delivery worker delivers them).
LOG_OBSERVER = web.AppKey("log_observer", Observer)


async def _ignore_expect(request: web.Request) -> None:
    """Expect is answered by the handler: `100-continue` once the request has passed its
    checks (Payload), any other value ignored as S3 does (aiohttp would answer 417)."""


def alone(settings: Settings) -> bool:
    """May this gateway hold the data folder alone now? Always expected with the SQLite
    catalog (a second gateway on its folder is a mistake). With a catalog that several nodes
    share, another node serving the folder is normal: then no sweep (a blob it is publishing
    is not in the catalog yet), and the folder is shared at once."""
    if settings.catalog == "sqlite":
        return True
    if settings.blobs is not None:
        # Each node has a data folder of its own, the blobs one bucket: no node can know that
        # no other is writing there. Intents reclaim what a crash left (intents.py).
        log.info("blobs on S3 with a shared catalog: no start-up sweep (the reclaimer's work)")
        return False
    lock = FolderLock(settings.data)
    try:
        lock.exclusive("sweep", wait=0)
        return True
    except FolderInUse:
        log.info("other nodes serve this data folder: no start-up sweep (a start alone does it)")
        return False
    finally:
        lock.close()


def sweep(settings: Settings) -> None:
    """What a crash left behind goes before anything is served (the folder held alone)."""
    store = open_store(
        settings.data, catalog_url=settings.catalog, blobs=tiers.blob_store(settings)
    )

    async def swept() -> tuple[int, int]:
        try:
            return await store.sweep()
        finally:
            store.files.close()  # its connections, on the loop they were made on

    try:
        tmp, orphans = asyncio.run(swept())
    finally:
        store.close()
    if tmp or orphans:
        log.info("start-up sweep removed %d tmp files and %d orphan blobs", tmp, orphans)


def build_app(settings: Settings, *, worker: bool = False) -> web.Application:
    """The application of one process. A `worker` shares a folder its parent swept; any other
    holds the folder alone until `app[STORE].start()` has swept it (await it before serving)."""
    line = digest.configure(settings.md5_backend)
    settings.data.mkdir(parents=True, exist_ok=True)
    # Logged once the folder is ours: a start refused for a folder in use is one line.
    keys = load_keyring(settings)
    store = open_store(
        settings.data,
        keys=keys,
        inline_max=settings.inline_max,
        shared=worker,
        catalog_url=settings.catalog,
        blob_lease=settings.blob_lease,
        blobs=tiers.blob_store(settings),
    )
    log.log(logging.WARNING if "WARNING" in line else logging.INFO, "%s", line)
    # Every write into a bucket with a notification configuration records the events it
    # fires in the outbox (store/outbox.py); the worker below delivers them.
    store.destinations = configuration.destinations
    # Likewise every write into a bucket with a replication configuration: the same worker
    # makes the copies (replication/copier.py), at remotes the operator named or here.
    store.replicas = matching.replicas
    users, _ = load_users(settings)
    notifier = NotificationWorker(
        store,
        settings.region,
        networks(settings.notify_networks),
        keys.open_topic_secret,
        settings.notify_retention,
        Replicator(
            store,
            remotes.load(settings.replication_remotes),
            networks(settings.notify_networks),
            keys.open_remote_secret,
        ),
        {u.account: u.canonical_id for u in users.values()},
    )
    delivery = LogDelivery(store, settings.region, settings.log_delivery_interval)
    principals = Principals(users, store, keys, settings.iam_cache_seconds)
    services = Services(store, principals, {"sns": TopicsApi(store, settings)})
    handler = s3_handler(
        store, settings, principals, delivery.take, principals, (is_service_request, services)
    )

    app = web.Application(client_max_size=1024**2)
    app[STORE] = store
    app[S3_HANDLER] = handler
    app[PRINCIPALS] = principals
    app[OBJECT_READS] = website_reads(handler)
    app[LOG_OBSERVER] = log_observer(delivery.take)
    app[FLUSH_LOGS] = delivery.flush
    # Health and metrics answer unsigned requests; a signed request to the same path is S3's
    # (a bucket may be called "health" or "metrics").
    for path, endpoint in (
        ("/health/live", _live),
        ("/health/ready", _ready),
        ("/metrics", _metrics),
    ):
        app.router.add_get(path, _unless_signed(endpoint, handler))
    app.router.add_route("*", r"/{path:[\s\S]*}", handler, expect_handler=_ignore_expect)
    metrics.STORED.scan = store.totals
    metrics.STORED.scan_errors = (OSError, StoreError)
    app[RENDERER] = metrics.Renderer()
    app.cleanup_ctx.append(_count_stored)
    app.cleanup_ctx.append(_lifecycle(LifecycleWorker(store, settings.lifecycle_day)))
    app.cleanup_ctx.append(_background(store.intents.run_forever))
    app.cleanup_ctx.append(_background(notifier.run_forever, after=notifier.release_lease))
    # After the lifecycle's: cleanup runs in reverse, so the logs go before the store closes.
    app.cleanup_ctx.append(delivery.cleanup_context)
    app.on_response_prepare.append(on_response_prepare)

    async def close_store(app: web.Application) -> None:
        store.close()

    app.on_cleanup.append(close_store)
    return app


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _unless_signed(endpoint: Handler, s3: Handler) -> Handler:
    async def dispatch(request: web.Request) -> web.StreamResponse:
        signed = "authorization" in request.headers or any(
            name in request.query for name in ("X-Amz-Credential", "AWSAccessKeyId")
        )
        return await (s3 if signed else endpoint)(request)

    return dispatch


async def _live(request: web.Request) -> web.StreamResponse:
    return web.json_response({"status": "live"})


async def _ready(request: web.Request) -> web.StreamResponse:
    store = request.app[STORE]
    ok = await store.writable()
    return web.json_response({"status": "ready" if ok else "not ready"}, status=200 if ok else 503)


async def _count_stored(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(metrics.STORED.keep_fresh())
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _lifecycle(worker: LifecycleWorker) -> Callable[[web.Application], AsyncIterator[None]]:
    # Its leases given back once it has stopped (before the store closes: cleanup contexts
    # run before on_cleanup), so that a restarted gateway's workers take the buckets at once.
    return _background(worker.run_forever, after=worker.release_leases)


def _background(
    work: Callable[[], Awaitable[None]],
    after: Callable[[], Awaitable[None]] | None = None,
) -> Callable[[web.Application], AsyncIterator[None]]:
    """A task that runs while the application serves (cancelled at shutdown, then `after`)."""

    async def run(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(work())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if after is not None:
            await after()

    return run


async def _metrics(request: web.Request) -> web.StreamResponse:
    body = await request.app[RENDERER].render()
    return web.Response(body=body, content_type="text/plain", charset="utf-8")


def describe(settings: Settings, url: str, generated: bool = False) -> list[str]:
    """The start-up banner. The secret key goes into logs that others read (docker compose
    logs, CI): it is shown only on the start that generated it, with where it is kept."""
    users, path = load_users(settings)
    user = next(iter(users.values()))
    again = f"`s3gw credentials --data {settings.data}` prints it"
    if settings.users is not None and user.access_key in {
        u.access_key for u in read_users_file(settings.users)
    }:
        kept = f"not shown; set in {settings.users}"
    elif path is None:
        kept = "not shown; set by S3GW_SECRET_KEY"
    elif generated:
        kept = f"{user.secret_key} (generated now, kept in {path}; {again} again)"
    else:
        kept = f"not shown; kept in {path} ({again})"
    lines = [
        f"data folder: {settings.data.resolve()}",
        f"access key: {user.access_key}",
        f"secret key: {kept}",
    ]
    if settings.users is not None:
        lines.append(f"users: {len(users)} (this one, and the others of {settings.users})")
    # "listening on" comes last: whoever waits for it has seen the rest.
    lines += [
        f"region: {settings.region}",
        f"workers: {settings.workers}",
        f"event loop: {settings.loop}",
        f"s3gw listening on {url}",
    ]
    return lines
