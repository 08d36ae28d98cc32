"""The console's pages and the endpoints its script calls: buckets, a bucket's objects, an
object, uploads (whole, or multipart from the browser), downloads, deletes, copies, share
links and health. Every action is decided by `authorize` as the S3 operation it amounts to,
for the signed-in user, before the store is touched."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import posixpath
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from urllib.parse import quote, urlencode

from aiohttp import web

from .. import limits
from ..notify import configuration
from ..replication import configuration as replication
from ..replication import resync
from ..s3 import policy_context, sse, website, writes
from ..s3.authorize import (
    Access,
    acls_enabled,
    authorize,
    decide,
    decide_account,
    needs_object,
    object_attrs,
    resolve_bucket,
)
from ..s3.errors import S3Error
from ..s3.names import valid_bucket_name
from ..s3.params import check_key
from ..s3.router import Op
from ..s3.sigv4 import MAX_EXPIRES_SECONDS, presigned_url
from ..store import Bucket, ObjectAttrs, ObjectInfo, Store, StoreError
from ..store.errors import NoSuchBucket
from ..store.model import Origin
from ..store.versions import DeleteMarker
from .page import csrf_field, error_box, form, h, hidden, render, size, url, when
from .state import ACTION, BUCKET, CONSOLE, KEY, SESSION, Console, redirect

log = logging.getLogger(__name__)

PAGE_SIZE = 100
CHUNK = 1024 * 1024
# Share links the form offers (X-Amz-Expires, at most the seven days SigV4 allows).
EXPIRIES = ((3600, "1 hour"), (86400, "1 day"), (MAX_EXPIRES_SECONDS, "7 days"))


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/buckets", buckets_page)
    router.add_post("/buckets", create_bucket)
    router.add_post("/buckets/delete", delete_bucket)
    router.add_get("/bucket", bucket_page)
    router.add_post("/bucket/website", bucket_website)
    router.add_post("/bucket/replication/resync", resync_bucket)
    router.add_get("/object", object_page)
    router.add_get("/download", download)
    router.add_post("/object/delete", delete_object)
    router.add_post("/object/copy", copy_object)
    router.add_post("/object/share", share)
    router.add_get("/health", health_page)
    router.add_put("/api/object", api_put_object)
    router.add_post("/api/uploads", api_create_upload)
    router.add_put("/api/part", api_upload_part)
    router.add_post("/api/complete", api_complete)
    router.add_post("/api/abort", api_abort)


def _console(request: web.Request) -> Console:
    return request.app[CONSOLE]


def _csrf(request: web.Request) -> str:
    return _console(request).sessions.csrf(request[SESSION].nonce)


def _page(request: web.Request, title: str, body: str, notice: str = "") -> web.Response:
    return render(title, body, request[SESSION], _csrf(request), notice=notice)


async def allowed(
    request: web.Request,
    operation: str,
    bucket_name: str,
    key: str | None = None,
    version_id: str | None = None,
    sent: Mapping[str, str] | None = None,
) -> Bucket:
    """The bucket, once `authorize` has allowed the user `operation` on it (and the key), as
    an S3 request of that operation from this browser would be judged (its address,
    transport and time; `sent`, the parameters and headers of that operation, as
    policy_context.for_console takes them); AccessDenied otherwise."""
    request[ACTION] = operation
    request[BUCKET] = bucket_name
    if key is not None:
        request[KEY] = key
    store = _console(request).store
    bucket = await resolve_bucket(store, bucket_name)
    obj = None
    if key is not None and needs_object(operation, bucket):
        obj = await object_attrs(store, bucket.name, key, version_id)
    user = request[SESSION].user
    conditions = policy_context.for_console(request, user, sent or {}, obj)
    authorize(Access(user, operation, bucket, key, version_id, obj, conditions))
    return bucket


def _may(request: web.Request, operation: str, bucket: Bucket) -> bool:
    user = request[SESSION].user
    return decide(
        Access(
            user, operation, bucket, conditions=policy_context.for_console(request, user, {}, None)
        )
    )


def _param(request: web.Request, name: str, required: bool = True) -> str:
    value = request.query.get(name, "")
    if required and not value:
        raise S3Error("InvalidArgument", f"{name} is missing")
    return value


async def _posted(request: web.Request) -> dict[str, str]:
    return {k: str(v) for k, v in (await request.post()).items()}


# --- buckets ---------------------------------------------------------------------------------


def _encryption(bucket: Bucket) -> str:
    rule = sse.default_rule(bucket.settings)
    return "none" if rule is None else rule.algorithm


# The catalog keeps no per-bucket totals: a bucket's count pages through its listing, up to a
# bound (one listing page per bucket on the buckets page, ten on a bucket's own), and says so
# past it, so a bucket of millions of keys costs what a few ListObjectsV2 pages cost.
_TALLY_PAGE = 1000


async def _tally(request: web.Request, bucket: str, pages: int) -> str:
    """The bucket's current objects: "N objects · SIZE", or "over N objects" past the bound."""
    store = _console(request).store
    count = total = 0
    after = ""
    for _ in range(pages):
        try:
            page = await store.list_objects(bucket, "", "", after, _TALLY_PAGE)
        except NoSuchBucket:
            return "deleted meanwhile"
        count += len(page.entries)
        total += sum(e.size for e in page.entries)
        if not page.truncated or page.last is None:
            return f"{count:,} object{'' if count == 1 else 's'} · {size(total)}"
        after = page.last
    return f"over {count:,} objects"


async def buckets_page(request: web.Request) -> web.Response:
    request[ACTION] = "ListBuckets"
    user = request[SESSION].user
    # As ListBuckets: an IAM user sees the account's buckets only if its policies allow it.
    listed = decide_account(user, "s3:ListAllMyBuckets", "arn:aws:s3:::*")
    buckets = await _console(request).store.list_buckets(user.canonical_id) if listed else []
    token = _csrf(request)
    # A bucket's count is a listing of it: shown only where the user may list it, as the S3
    # ListObjectsV2 would be judged (an explicit Deny of s3:ListBucket hides it).
    tallies = [
        await _tally(request, b.name, 1)
        if _may(request, Op.ListObjectsV2, b)
        else "not listed: your policies do not allow s3:ListBucket"
        for b in buckets
    ]
    rows = "".join(
        f'<tr><td><a href="{url("/bucket", name=b.name)}">{h(b.name)}</a></td>'
        f"<td>{h(tally)}</td>"
        f"<td>{h(when(b.created_ns))}</td><td>{h(b.versioning or 'off')}</td>"
        f"<td>{'on' if b.object_lock else 'off'}</td><td>{h(_encryption(b))}</td>"
        f"<td>{form('/buckets/delete', token, hidden('bucket', b.name), 'Delete', True)}</td>"
        "</tr>"
        for b, tally in zip(buckets, tallies, strict=True)
    )
    table = (
        '<div class="scroll"><table><caption>Your buckets</caption><thead><tr><th>Name</th>'
        "<th>Objects</th><th>Created</th><th>Versioning</th><th>Object Lock</th>"
        "<th>Default encryption</th>"
        f"<th>Actions</th></tr></thead><tbody>{rows}</tbody></table></div>"
        if buckets
        else "<p>No buckets yet.</p>"
        if listed
        else error_box("AccessDenied: your policies do not allow s3:ListAllMyBuckets.")
    )
    create = (
        f'<form method="post" action="/buckets" class="row">{csrf_field(token)}'
        '<label>New bucket <input name="bucket" required minlength="3" maxlength="63" '
        'pattern="[a-z0-9][a-z0-9.\\-]*[a-z0-9]"></label>'
        '<label><input type="checkbox" name="object_lock" value="1"> Object Lock</label>'
        "<button>Create</button></form>"
    )
    return _page(request, "Buckets", create + table)


async def create_bucket(request: web.Request) -> web.StreamResponse:
    posted = await _posted(request)
    name = posted.get("bucket", "").strip()
    request[ACTION], request[BUCKET] = "CreateBucket", name
    if not valid_bucket_name(name):
        raise S3Error("InvalidBucketName", BucketName=name)
    if not decide_account(request[SESSION].user, "s3:CreateBucket", f"arn:aws:s3:::{name}"):
        raise S3Error("AccessDenied")  # as the dispatcher judges CreateBucket
    console = _console(request)
    # As CreateBucket without headers: the same defaults, SSE-C block included.
    settings = writes.new_bucket_settings(console.settings)
    await console.store.create_bucket(
        name,
        request[SESSION].user.canonical_id,
        console.settings.region,
        posted.get("object_lock") == "1",
        settings,
    )
    return redirect("/bucket?" + _query(name=name))


async def delete_bucket(request: web.Request) -> web.StreamResponse:
    name = (await _posted(request)).get("bucket", "")
    await allowed(request, Op.DeleteBucket, name)
    await _console(request).store.delete_bucket(name)
    return redirect("/buckets")


def _query(**values: str) -> str:
    return urlencode({k: v for k, v in values.items() if v})


# --- a bucket's objects ------------------------------------------------------------------------


def _crumbs(bucket: str, prefix: str) -> str:
    parts = [
        f'<a href="{url("/buckets")}">Buckets</a>',
        f'<a href="{url("/bucket", name=bucket)}">{h(bucket)}</a>',
    ]
    at = ""
    for piece in prefix.split("/")[:-1]:
        at += piece + "/"
        parts.append(f'<a href="{url("/bucket", name=bucket, prefix=at)}">{h(piece)}/</a>')
    return '<p class="crumbs">' + " / ".join(parts) + "</p>"


async def bucket_page(request: web.Request) -> web.Response:
    name = _param(request, "name")
    prefix = request.query.get("prefix", "")
    after = request.query.get("after", "")

    listed = {"prefix": prefix, "delimiter": "/", "max-keys": str(PAGE_SIZE)}
    bucket = await allowed(request, Op.ListObjectsV2, name, sent=listed)
    listing = await _console(request).store.list_objects(name, prefix, "/", after, PAGE_SIZE)
    # Names are shown from the folder on: a search prefix may end inside a name.
    folder = prefix.rfind("/") + 1
    rows = [
        f'<tr><td><a href="{url("/bucket", name=name, prefix=p)}">'
        f"📁 {h(p[folder:])}</a></td><td></td><td></td></tr>"
        for p in listing.common_prefixes
    ]
    rows += [
        f'<tr><td><a href="{url("/object", bucket=name, key=e.key)}">{h(e.key[folder:])}'
        f"</a></td><td>{h(size(e.size))}</td><td>{h(when(e.mtime_ns))}</td></tr>"
        for e in listing.entries
    ]
    table = (
        '<div class="scroll"><table id="objects"><caption>Objects and folders'
        f"{' under ' + h(prefix) if prefix else ''}</caption><thead><tr><th>Name</th>"
        f"<th>Size</th><th>Last modified</th></tr></thead><tbody>{''.join(rows)}</tbody>"
        "</table></div>"
        if rows
        else "<p>Nothing here.</p>"
    )
    more = ""
    if listing.truncated and listing.last:
        more = (
            f'<p><a rel="next" href="{url("/bucket", name=name, prefix=prefix, after=listing.last)}'
            '">Next page →</a></p>'
        )
    search = (
        '<form method="get" action="/bucket" class="row" role="search">'
        f'{hidden("name", name)}<label>Prefix <input name="prefix" value="{h(prefix)}" '
        'placeholder="photos/2024-"></label><button>Search</button></form>'
    )
    upload = (
        f'<section aria-labelledby="up"><h2 id="up">Upload</h2>'
        f'<form id="upload" class="row" data-bucket="{h(name)}" data-prefix="{h(prefix)}">'
        '<label>Files <input type="file" name="files" multiple required></label>'
        "<button>Upload</button></form>"
        '<ul id="progress" aria-live="polite"></ul></section>'
    )
    status = (
        f'<p class="hint">{h(await _tally(request, name, 10))} · '
        f"Versioning: {h(bucket.versioning or 'off')} · Object Lock: "
        f"{'on' if bucket.object_lock else 'off'} · Default encryption: "
        f"{h(_encryption(bucket))}</p>"
    )
    site = _website_section(request, bucket) if _may(request, Op.GetBucketWebsite, bucket) else ""
    events = ""
    if _may(request, Op.GetBucketNotificationConfiguration, bucket):
        events = await _notification_section(request, bucket)
    copies = ""
    if _may(request, Op.GetBucketReplication, bucket):
        copies = await _replication_section(request, bucket)
    notice = ""
    if request.query.get("resync") == "queued":
        notice = "Replicating existing objects: queued in the background (see the backlog)."
    return _page(
        request,
        name,
        _crumbs(name, prefix) + status + search + table + more + upload + site + events + copies,
        notice,
    )


# --- a bucket's replication --------------------------------------------------------------------


async def _replication_section(request: web.Request, bucket: Bucket) -> str:
    """The bucket's replication rules (read-only: set with PutBucketReplication), each with its
    destination's backlog: the outbox's rows whose copy there is still to make (the same
    bounded read as a topic's, docs/replication.md)."""
    document = bucket.settings.get(replication.SETTING)
    if document is None:
        return ""
    rules = replication.Configuration.from_document(document).rules
    store = _console(request).store
    arns = {r.destination.arn for r in rules}
    backlogs = {arn: await store.outbox_backlog(arn) for arn in arns}
    rows = []
    for r in rules:
        tags = ", ".join(f"{k}={v}" for k, v in r.tags)
        cells = (
            h(r.id),
            "Enabled" if r.enabled else "Disabled",
            h(" and ".join(x for x in (f"prefix {r.prefix}" if r.prefix else "", tags) if x))
            or "every key",
            f"<code>{h(r.destination.arn)}</code>",
            h(backlogs[r.destination.arn]),
        )
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    button = ""
    if _may(request, Op.PutBucketReplication, bucket) and any(r.enabled for r in rules):
        button = form(
            "/bucket/replication/resync",
            _csrf(request),
            hidden("bucket", bucket.name),
            "Replicate existing objects",
        ) + (
            '<p class="hint">Queues the versions made before the rules, and the ones that '
            "failed, as <code>s3gw replicate resync</code> does; they count in the backlog "
            "until they are copied.</p>"
        )
    return (
        '<section aria-labelledby="copies"><h2 id="copies">Replication</h2>'
        '<div class="scroll"><table id="replication"><caption>Rules</caption><thead><tr>'
        "<th>Id</th><th>Status</th><th>Filter</th><th>Destination</th><th>Backlog</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        '<p class="hint">Backlog: new versions, delete markers and tag changes recorded for a '
        "destination and not copied there yet (a version says PENDING until they are).</p>"
        f"{button}</section>"
    )


async def resync_bucket(request: web.Request) -> web.StreamResponse:
    """The bucket's existing versions queued for its rules (replication/resync.py), as who may
    PutBucketReplication on it; in the background, since a large bucket takes a while: the
    backlog on the bucket's page counts what it queued, and the summary is a log line."""
    name = (await _posted(request)).get("bucket", "")
    await allowed(request, Op.PutBucketReplication, name)
    store = _console(request).store
    try:
        await resync.check(store, name, None)
    except resync.ResyncError as exc:
        raise S3Error("InvalidRequest", str(exc)) from None
    task = asyncio.get_running_loop().create_task(_resync(store, name))
    _RESYNCS.add(task)
    task.add_done_callback(_RESYNCS.discard)
    return redirect("/bucket?" + _query(name=name, resync="queued"))


# The resyncs under way in this process (a reference each, so that none is collected early).
_RESYNCS: set[asyncio.Task[None]] = set()


async def _resync(store: Store, name: str) -> None:
    try:
        summary = await resync.resync(store, name)
    except (resync.ResyncError, StoreError, OSError) as exc:
        log.warning("replication resync of %s from the console stopped: %s", name, exc)
        return
    log.info("replication resync from the console: %s", summary.render())


# --- a bucket's notifications ------------------------------------------------------------------


async def _notification_section(request: web.Request, bucket: Bucket) -> str:
    """The bucket's notification configuration (read-only: it is set with
    PutBucketNotificationConfiguration) and each destination's backlog: the outbox's rows that
    still name it (store/outbox.py's Backlog; "N+" past the rows it looks at)."""
    config = configuration.stored(bucket.settings.get(configuration.SETTING))
    head = '<section aria-labelledby="events"><h2 id="events">Event notifications</h2>'
    if not config.targets:
        return head + "<p>No notification configuration.</p></section>"
    store = _console(request).store
    backlogs = {arn: await store.outbox_backlog(arn) for arn in {t.arn for t in config.targets}}
    rows = []
    for t in config.targets:
        rules = [f"prefix {t.prefix}" if t.prefix is not None else ""]
        rules.append(f"suffix {t.suffix}" if t.suffix is not None else "")
        cells = (
            h(t.id),
            h(configuration.KINDS[t.kind]),
            "<br>".join(h(e) for e in t.events),
            h(", ".join(r for r in rules if r) or "every key"),
            f"<code>{h(t.arn)}</code>",
            h(backlogs[t.arn]),
        )
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return (
        head + '<div class="scroll"><table id="notifications"><caption>Configurations'
        "</caption><thead><tr><th>Id</th><th>Kind</th><th>Events</th><th>Filter</th>"
        "<th>Destination</th><th>Backlog</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
        '<p class="hint">Backlog: the events recorded for a destination and not yet '
        'delivered to every destination they name. <a href="/topics">Topics</a></p></section>'
    )


# --- a bucket's website ------------------------------------------------------------------------


def site_address(request: web.Request, bucket: str) -> str | None:
    """Where the website endpoint serves `bucket` (docs/website.md): BUCKET.DOMAIN on its port
    under --website-domain, else its own address with `Host: BUCKET` (a CNAME's way); None
    without a website endpoint."""
    settings = _console(request).settings
    if settings.website is None:
        return None
    host, port = settings.website
    scheme = "https" if request.secure else "http"
    if settings.website_domain:
        return f"{scheme}://{bucket}.{settings.website_domain}:{port}/"
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}/ (with Host: {bucket})"


def _website_section(request: web.Request, bucket: Bucket) -> str:
    stored = bucket.settings.get(website.SETTING)
    config = website.configuration_of(stored) if stored is not None else None
    token = _csrf(request)
    if config is None:
        state = "<p>Website hosting is off.</p>"
    elif config.redirect_all is not None:
        target = config.redirect_all
        state = (
            f"<p>Every request is redirected to {h(target.protocol or 'http')}://"
            f"{h(target.host_name or '')}.</p>"
        )
    else:
        address = site_address(request, bucket.name)
        state = (
            f"<p>Website hosting is on: index document <code>{h(config.index_suffix or '')}"
            "</code>"
            + (
                f", error document <code>{h(config.error_key)}</code>"
                if config.error_key
                else ", no error document"
            )
            + (f", {len(config.routing_rules)} routing rules" if config.routing_rules else "")
            + ".</p>"
            + (
                f'<p id="site-address">Its address: {h(address)}</p>'
                if address
                else "<p>No website endpoint is running (--website-address).</p>"
            )
            + '<p class="hint">Only what anyone may read is served: lift the bucket\'s '
            "public access block and allow s3:GetObject to everyone in its policy.</p>"
        )
    index = config.index_suffix if config is not None and config.index_suffix else "index.html"
    error = config.error_key if config is not None and config.error_key else ""
    edit = (
        # Stacked: two labelled fields in a row overflow a phone's width.
        f'<form method="post" action="/bucket/website" class="stack">{csrf_field(token)}'
        f"{hidden('bucket', bucket.name)}"
        f'<label>Index document <input name="index" value="{h(index)}" required></label>'
        f'<label>Error document <input name="error" value="{h(error)}" '
        'placeholder="error.html"></label>'
        "<button>Save</button></form>"
    )
    off = (
        form(
            "/bucket/website",
            token,
            hidden("bucket", bucket.name) + hidden("off", "1"),
            "Turn website hosting off",
            True,
        )
        if config is not None
        else ""
    )
    return f'<section aria-labelledby="site"><h2 id="site">Website</h2>{state}{edit}{off}</section>'


async def bucket_website(request: web.Request) -> web.StreamResponse:
    """Turn a bucket's website on with an index (and error) document, or off: as
    PutBucketWebsite and DeleteBucketWebsite would be judged and checked."""
    posted = await _posted(request)
    name = posted.get("bucket", "")
    store = _console(request).store
    if posted.get("off") == "1":
        await allowed(request, Op.DeleteBucketWebsite, name)
        await store.set_bucket_setting(name, website.SETTING, None)
        return redirect("/bucket?" + _query(name=name))
    await allowed(request, Op.PutBucketWebsite, name)
    error = posted.get("error", "").strip()
    # Checked as PutBucketWebsite checks the document it would send (the suffix's rules).
    document = website.render_configuration(
        website.WebsiteConfiguration(
            index_suffix=posted.get("index", "").strip(), error_key=error or None
        )
    )
    config = website.parse_configuration(document)
    bucket = await resolve_bucket(store, name)
    stored = bucket.settings.get(website.SETTING)
    if stored is not None:
        # The routing rules set through the API are kept.
        config = replace(config, routing_rules=website.configuration_of(stored).routing_rules)
    await store.set_bucket_setting(
        name, website.SETTING, website.render_configuration(config).decode()
    )
    return redirect("/bucket?" + _query(name=name))


# --- one object --------------------------------------------------------------------------------


def _table(rows: list[tuple[str, str]], caption: str) -> str:
    body = "".join(f'<tr><th scope="row">{h(k)}</th><td>{v}</td></tr>' for k, v in rows)
    return (
        f'<div class="scroll"><table class="facts"><caption>{h(caption)}</caption>{body}'
        "</table></div>"
    )


def _facts(obj: ObjectInfo) -> str:
    attrs = obj.attrs
    rows = [
        ("Size", h(f"{size(obj.size)} ({obj.size} bytes)")),
        ("ETag", f"<code>{h(obj.etag)}</code>"),
        ("Last modified", h(when(obj.mtime_ns))),
        ("Content type", h(attrs.content_type)),
        ("Version", f"<code>{h(obj.version_id)}</code>"),
    ]
    rows += [(name, f"<code>{h(v)}</code>") for name, v in attrs.checksums.items()]
    rows += [(f"x-amz-meta-{k}", h(v)) for k, v in attrs.meta.items()]
    rows += [(k, h(v)) for k, v in attrs.headers.items()]
    encryption = ", ".join(f"{k}: {v}" for k, v in attrs.sse.items()) or "none"
    rows.append(("Encryption", h(encryption)))
    tags = ", ".join(f"{k}={v}" for k, v in attrs.tags) or "none"
    rows.append(("Tags", h(tags)))
    if obj.lock.mode or obj.lock.legal_hold:
        until = when(obj.lock.retain_until_ns) if obj.lock.retain_until_ns else "-"
        rows.append(("Object Lock", h(f"{obj.lock.mode or '-'} until {until}, legal hold "
                                      f"{obj.lock.legal_hold or 'OFF'}")))  # fmt: skip
    return _table(rows, "Object")


async def object_page(request: web.Request) -> web.Response:
    name, key = _param(request, "bucket"), _param(request, "key")
    return await _object_view(request, name, key, request.query.get("version") or None)


async def _object_view(
    request: web.Request, name: str, key: str, version: str | None, notice: str = ""
) -> web.Response:
    bucket = await allowed(request, Op.HeadObject, name, key, version)
    store = _console(request).store
    token = _csrf(request)
    parts = [_crumbs(name, key)]
    obj: ObjectInfo | None
    try:
        obj = await store.head_object(name, key, version)
    except DeleteMarker:
        obj = None
        parts.append("<p>The latest version is a delete marker: the key reads as deleted.</p>")
    if obj is not None:
        parts.append(_facts(obj))
        target = {"bucket": name, "key": key, "version": version}
        actions = [
            f'<a class="button" href="{url("/download", **target)}" download>Download</a>',
            form(
                "/object/delete",
                token,
                _hiddens(target),
                "Delete this version" if version else "Delete",
                True,
            ),
        ]
        parts.append('<div class="row">' + " ".join(actions) + "</div>")
        expiry = "".join(f'<option value="{s}">{h(t)}</option>' for s, t in EXPIRIES)
        parts.append(
            '<section aria-labelledby="share"><h2 id="share">Share link</h2>'
            f'<form method="post" action="/object/share" class="row">{csrf_field(token)}'
            f'{_hiddens(target)}<label>Expires in <select name="expires">{expiry}</select>'
            "</label><button>Make link</button></form></section>"
        )
        parts.append(
            '<section aria-labelledby="copy"><h2 id="copy">Copy or rename</h2>'
            f'<form method="post" action="/object/copy" class="row">{csrf_field(token)}'
            f'{_hiddens(target)}<label>To bucket <input name="target_bucket" '
            f'value="{h(name)}" required></label><label>Key <input name="target_key" '
            f'value="{h(key)}" required></label><label><input type="checkbox" name="move" '
            'value="1"> Rename (delete the original)</label><button>Copy</button></form>'
            "</section>"
        )
    if bucket.versioning is not None and _may(request, Op.ListObjectVersions, bucket):
        parts.append(await _versions(request, bucket, key, token))
    return _page(request, key, "".join(parts), notice)


def _hiddens(values: dict[str, str | None]) -> str:
    return "".join(hidden(k, v) for k, v in values.items() if v)


async def _versions(request: web.Request, bucket: Bucket, key: str, token: str) -> str:
    page = await _console(request).store.list_versions(bucket.name, key, "", "", "", PAGE_SIZE)
    rows = []
    for e in page.entries:
        if e.key != key:
            continue
        target = {"bucket": bucket.name, "key": key, "version": e.version_id}
        label = "delete marker" if e.delete_marker else size(e.size)
        link = (
            h(e.version_id)
            if e.delete_marker
            else f'<a href="{url("/object", **target)}">{h(e.version_id)}</a>'
        )
        rows.append(
            f"<tr><td><code>{link}</code>{' (latest)' if e.is_latest else ''}</td>"
            f"<td>{h(label)}</td><td>{h(when(e.mtime_ns))}</td>"
            f"<td>{form('/object/delete', token, _hiddens(target), 'Delete version', True)}</td>"
            "</tr>"
        )
    return (
        '<section aria-labelledby="versions"><h2 id="versions">Versions</h2>'
        '<div class="scroll"><table><thead><tr><th>Version id</th><th>Size</th><th>Date</th>'
        f"<th>Actions</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _readable(obj: ObjectInfo) -> bytes | None:
    if obj.attrs.sse_key is not None:
        raise S3Error(
            "InvalidRequest",
            "This object is encrypted with a customer-provided key (SSE-C): only a request "
            "that brings the key can read it, and the console holds none.",
        )
    return None


async def download(request: web.Request) -> web.StreamResponse:
    name, key = _param(request, "bucket"), _param(request, "key")
    version = request.query.get("version") or None
    await allowed(request, Op.GetObject, name, key, version)
    reader = await _console(request).store.open_object(name, key, version, _readable)
    try:
        obj = reader.info
        filename = posixpath.basename(key) or "download"
        response = web.StreamResponse(
            headers={
                "Content-Type": obj.attrs.content_type,
                "Content-Length": str(obj.size),
                "ETag": f'"{obj.etag}"',
                "Content-Disposition": f"attachment; filename*=UTF-8''{quote(filename)}",
                "X-Content-Type-Options": "nosniff",
            }
        )
        await response.prepare(request)
        async for chunk in reader.chunks(0, obj.size):
            await response.write(chunk)
        await response.write_eof()
        return response
    finally:
        reader.close()


async def delete_object(request: web.Request) -> web.StreamResponse:
    posted = await _posted(request)
    name, key = posted.get("bucket", ""), posted.get("key", "")
    version = posted.get("version") or None
    await allowed(request, Op.DeleteObject, name, key, version)
    store = _console(request).store
    if version is None:
        await store.delete_objects(name, [key], _origin(request))
    else:
        (done,) = await store.delete_versions(name, [(key, version)], origin=_origin(request))
        if isinstance(done, Exception):
            raise done
    folder = key.rpartition("/")[0]
    return redirect("/bucket?" + _query(name=name, prefix=folder + "/" if folder else ""))


async def copy_object(request: web.Request) -> web.StreamResponse:
    posted = await _posted(request)
    name, key = posted.get("bucket", ""), posted.get("key", "")
    version = posted.get("version") or None
    target_bucket = posted.get("target_bucket", "").strip() or name
    target_key = check_key(posted.get("target_key", ""))
    move = posted.get("move") == "1"
    if not target_key:
        raise S3Error("InvalidArgument", "The new key is empty")
    if (target_bucket, target_key) == (name, key):
        raise S3Error("InvalidRequest", "Copy to a different key or bucket")
    await allowed(request, Op.GetObject, name, key, version)
    if move:
        await allowed(request, Op.DeleteObject, name, key, version)
    source_name = f"{name}/{quote(key)}" + (f"?versionId={version}" if version else "")
    copying = {"x-amz-copy-source": source_name, "x-amz-metadata-directive": "COPY"}
    dest = await allowed(request, Op.CopyObject, target_bucket, target_key, sent=copying)
    console = _console(request)
    store = console.store
    # As a CopyObject without headers (metadata COPY, the destination bucket's default
    # encryption): over the source's blobs wherever S3's copy would share them.
    encryption = sse.for_write({}, dest.settings, store.keys, request.secure, True)

    async def attempt() -> None:
        source = await store.head_object(name, key, version)
        _readable(source)
        attrs = replace(source.attrs, owner=_writer(request, dest), acl=None, sse={}, sse_key=None)
        await writes.copy(
            store,
            source,
            None,
            target_bucket,
            target_key,
            attrs,
            encryption,
            origin=_origin(request),
        )

    await writes.retry_copy(attempt)
    if move:
        await store.delete_versions(name, [(key, version)], origin=_origin(request))
    request[ACTION] = "RenameObject" if move else "CopyObject"
    return redirect("/object?" + _query(bucket=target_bucket, key=target_key))


def _origin(request: web.Request) -> Origin:
    """What an event record says of a console request: the signed-in user, from where."""
    return Origin(request[SESSION].user.requester, request.remote or "")


def _writer(request: web.Request, bucket: Bucket) -> str | None:
    """Who owns an object the user writes: the writer where ACLs are on, else the bucket's
    owner (None), as the dispatcher decides it for a PutObject without ACL headers."""
    return request[SESSION].user.canonical_id if acls_enabled(bucket) else None


async def share(request: web.Request) -> web.StreamResponse:
    posted = await _posted(request)
    name, key = posted.get("bucket", ""), posted.get("key", "")
    version = posted.get("version") or None
    await allowed(request, Op.GetObject, name, key, version)
    request[ACTION] = "ShareObject"
    try:
        expires = int(posted.get("expires", ""))
    except ValueError:
        expires = 0
    if not 1 <= expires <= MAX_EXPIRES_SECONDS:
        raise S3Error("InvalidArgument", "Choose an expiry from 1 second to 7 days")
    settings = _console(request).settings
    host = request.url.host or settings.host
    if ":" in host:
        host = f"[{host}]"
    scheme = "https" if request.secure else "http"
    default = {"http": 80, "https": 443}[scheme]
    authority = host if settings.port == default else f"{host}:{settings.port}"
    link = presigned_url(
        f"{scheme}://{authority}",
        authority,
        f"/{name}/{key}",
        request[SESSION].user,
        settings.region,
        expires,
        version_id=version,
    )
    label = dict(EXPIRIES).get(expires, f"{expires} s")
    notice = (
        f"Share link, valid for {h(label)} without signing in:<br>"
        f'<input id="share-link" class="link" readonly value="{h(link)}" aria-label="Share link">'
    )
    page = await _object_view(request, name, key, version, notice)
    request[ACTION] = "ShareObject"
    return page


# --- health --------------------------------------------------------------------------------


_SAMPLE = re.compile(r"^(s3gw_[a-z_]+)(?:\{([^}]*)\})? ([0-9.eE+-]+|NaN)$")


async def health_page(request: web.Request) -> web.Response:
    request[ACTION] = "Health"
    console = _console(request)
    ready = await console.store.writable()
    text = (await console.renderer.render()).decode()
    requests = errors = 0.0
    totals: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None:
            continue
        metric, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        if metric == "s3gw_requests_total":
            if 'operation="Console' in labels:
                continue
            requests += value
            if re.search(r'status="[45]', labels):
                errors += value
        else:
            totals[metric] = value

    def shown(metric: str, as_size: bool = False) -> str:
        if metric not in totals:
            return "not counted yet"
        return size(int(totals[metric])) if as_size else f"{int(totals[metric])}"

    rows = [
        ("Status", "ready" if ready else "<strong>not ready</strong> (storage not writable)"),
        ("S3 requests", f"{int(requests)}"),
        ("S3 errors (4xx, 5xx)", f"{int(errors)}"),
        ("Bytes received", shown("s3gw_received_bytes_total", True)),
        ("Bytes sent", shown("s3gw_sent_bytes_total", True)),
        ("Objects stored", shown("s3gw_objects")),
        ("Bytes stored", shown("s3gw_stored_bytes", True)),
        ("Workers", f"{console.settings.workers}"),
    ]
    body = "".join(f'<tr><th scope="row">{h(k)}</th><td>{v}</td></tr>' for k, v in rows)
    note = (
        '<p class="hint">All workers together, since the gateway started; every metric is at '
        "<code>/metrics</code> on the S3 port.</p>"
    )
    return _page(request, "Health", f'<table class="facts">{body}</table>' + note)


# --- the upload endpoints (console.js) -----------------------------------------------------


def _json(value: object, status: int = 200) -> web.Response:
    return web.json_response(value, status=status)


async def _body(request: web.Request, limit: int) -> AsyncIterator[bytes]:
    """The request body in chunks, refused past `limit` bytes."""
    if request.content_length is not None and request.content_length > limit:
        raise S3Error("EntityTooLarge", MaxSizeAllowed=limit)
    seen = 0
    async for chunk in request.content.iter_chunked(CHUNK):
        seen += len(chunk)
        if seen > limit:
            raise S3Error("EntityTooLarge", MaxSizeAllowed=limit)
        yield chunk


def _new_object(request: web.Request, bucket: Bucket) -> tuple[sse.Requested, ObjectAttrs]:
    """How a new object the user uploads is encrypted (the bucket's default), and its attrs:
    the Content-Type the script sent, the writer as owner where ACLs are on."""
    sent = request.headers.get("Content-Type", "")
    content_type = sent if sent and len(sent) < 256 else "binary/octet-stream"
    store = _console(request).store
    encryption = sse.for_write({}, bucket.settings, store.keys, request.secure, True)
    attrs = ObjectAttrs(content_type=content_type, owner=_writer(request, bucket))
    return encryption, attrs


async def api_put_object(request: web.Request) -> web.StreamResponse:
    name, key = _param(request, "bucket"), check_key(_param(request, "key"))
    bucket = await allowed(request, Op.PutObject, name, key)
    store = _console(request).store
    encryption, attrs = _new_object(request, bucket)
    body = _body(request, _console(request).settings.max_object_size)
    obj = await writes.put_body(store, name, key, body, attrs, encryption, _origin(request))
    return _json({"key": obj.key, "etag": obj.etag, "size": obj.size})


async def api_create_upload(request: web.Request) -> web.StreamResponse:
    name, key = _param(request, "bucket"), check_key(_param(request, "key"))
    bucket = await allowed(request, Op.CreateMultipartUpload, name, key)
    store = _console(request).store
    encryption, attrs = _new_object(request, bucket)
    owner = request[SESSION].user.canonical_id
    upload = await store.create_upload(name, key, owner, encryption.attrs(attrs))
    return _json({"upload_id": upload.id})


async def api_upload_part(request: web.Request) -> web.StreamResponse:
    name, key = _param(request, "bucket"), check_key(_param(request, "key"))
    upload_id, number = _param(request, "upload_id"), _param(request, "part")
    if not number.isdigit() or not 1 <= int(number) <= 10_000:
        raise S3Error("InvalidArgument", "Part number must be an integer between 1 and 10000")
    await allowed(request, Op.UploadPart, name, key)
    store = _console(request).store
    upload = await store.get_upload(upload_id, name, key)
    encryption = sse.for_upload(upload.attrs, store.keys, None)
    # Each part's default checksum, unannounced, which Complete combines, as UploadPart's.
    checksum = writes.default_checksum()
    blob = await writes.stage(store, _body(request, limits.MAX_PART_SIZE), encryption, [checksum])
    part = await writes.upload_part(store, upload, int(number), blob, checksum.value(), encryption)
    return _json({"part": part.number, "etag": part.etag})


async def api_complete(request: web.Request) -> web.StreamResponse:
    name, key = _param(request, "bucket"), check_key(_param(request, "key"))
    upload_id = _param(request, "upload_id")
    await allowed(request, Op.CompleteMultipartUpload, name, key)
    try:
        sent = json.loads(await request.read())
        chosen = [(int(n), str(etag)) for n, etag in sent["parts"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise S3Error("MalformedXML", "The list of parts is not [[number, etag], ...]") from exc
    if not chosen or any(a[0] >= b[0] for a, b in itertools.pairwise(chosen)):
        raise S3Error("InvalidPartOrder", UploadId=upload_id)
    # The console's uploads name no algorithm: the object's checksum is the parts' default
    # combined, as S3's Complete gives such an upload.
    store = _console(request).store
    obj = await writes.complete(store, upload_id, name, key, chosen, origin=_origin(request))
    return _json({"key": obj.key, "etag": obj.etag, "size": obj.size})


async def api_abort(request: web.Request) -> web.StreamResponse:
    name, key = _param(request, "bucket"), check_key(_param(request, "key"))
    upload_id = _param(request, "upload_id")
    await allowed(request, Op.AbortMultipartUpload, name, key)
    await _console(request).store.abort_upload(upload_id, name, key)
    return _json({"aborted": upload_id})


__all__ = ["add_routes", "allowed", "error_box"]
