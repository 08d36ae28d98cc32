"""Command line: `s3gw serve`, `s3gw credentials`, `s3gw fsck`, `s3gw migrate`,
`s3gw replicate` and `s3gw keys`. (The benchmarks are the repository's `python -m bench`,
not shipped.)"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
from pathlib import Path

from . import config, digest, logs, server, tiers, users
from .store.blobs import FolderInUse
from .store.errors import StoreError

# What the gateway creates is its user's alone: the catalog holds small objects' bytes, the
# blobs the rest, and the folder the keys. One umask covers every file and folder, SQLite's
# -wal and -shm files included, where chmods would have to find each place that creates one.
PRIVATE = 0o077
# The settings `s3gw credentials` reads: where the keys are, and the region it exports.
CREDENTIALS_OPTIONS = ("data", "access-key", "secret-key", "users", "region")
FSCK_OPTIONS = (
    "data",
    "catalog",
    "blobs",
    "blobs-endpoint",
    "blobs-region",
    "blobs-addressing",
    "blobs-ca",
    "blobs-credentials",
)


def _credentials(settings: config.Settings) -> None:
    if not (settings.access_key or settings.secret_key):
        path = settings.data / users.CREDENTIALS_FILE
        if not path.exists():
            # Making a pair here would print keys no gateway knows, in a folder made for them.
            where = f"{settings.data} ({config.setting_name('data')})"
            if settings.data.is_dir() and any(settings.data.iterdir()):
                raise config.StartError(
                    f"{where} holds no {users.CREDENTIALS_FILE}: its gateway takes its keys "
                    "from S3GW_ACCESS_KEY and S3GW_SECRET_KEY"
                )
            raise config.StartError(
                f"there is no gateway in {where}: `s3gw serve --data {settings.data}` starts "
                "one, which makes its keys"
            )
    known, _ = users.load_users(settings)
    user = next(iter(known.values()))
    print(f"export AWS_ACCESS_KEY_ID={shlex.quote(user.access_key)}")
    print(f"export AWS_SECRET_ACCESS_KEY={shlex.quote(user.secret_key)}")
    print(f"export AWS_DEFAULT_REGION={shlex.quote(settings.region)}")


def _fsck(args: argparse.Namespace) -> int:
    from .s3.checksums import stored_checksum
    from .store.fsck import check

    try:
        settings = config.settings_from(args)
        report = check(
            settings.data,
            deep=args.deep,
            repair=args.repair,
            checksum_of=stored_checksum,
            catalog_url=settings.catalog,
            blobs=tiers.blob_store(settings),
        )
    except (FolderInUse, FileNotFoundError, StoreError, config.StartError) as exc:
        print(f"s3gw fsck: {exc}", file=sys.stderr)
        return 2
    print(report.render())
    return 1 if report.damage else 0


def _migrate(args: argparse.Namespace) -> int:
    from .store.migrate import migrate

    if args.blobs_to is not None:
        return _migrate_blobs(args)
    try:
        if not args.to:
            raise config.StartError("--to is required: the postgresql:// URL to move into")
        url = config.catalog_url(args.to)
        if url == "sqlite":
            raise config.StartError("--to must be a postgresql:// URL: the catalog is SQLite now")
        summary = migrate(
            Path(args.data or config.env_default("data")), url, batch=args.batch, sample=args.sample
        )
    except (FolderInUse, StoreError, config.StartError) as exc:
        print(f"s3gw migrate: {exc}", file=sys.stderr)
        return 2
    print(summary.render())
    return 0


def _migrate_blobs(args: argparse.Namespace) -> int:
    from .tiers import FOLDER
    from .tiers.migrate import move_blobs

    try:
        if args.to:
            raise config.StartError("--to and --blobs-to: move the catalog or the blobs, not both")
        to = args.blobs_to.strip()
        to = FOLDER if to == FOLDER else config.blobs_url(to)
        if to is None:
            raise config.StartError("--blobs-to must be folder or s3://BUCKET[/PREFIX]")
        settings = config.settings_from(args)
        tiers.check_moved(settings)
        # The new tier's settings: the same ones, --blobs changed (its keys read and checked).
        if to == FOLDER:
            target = dataclasses.replace(settings, blobs=None)
        else:
            target = config.settings_from(argparse.Namespace(**{**vars(args), "blobs": to}))
        summary = move_blobs(settings, target)
    except (FolderInUse, StoreError, config.StartError, OSError) as exc:
        print(f"s3gw migrate: {exc}", file=sys.stderr)
        return 2
    print(summary.render())
    return 0


def _replicate(args: argparse.Namespace) -> int:
    import asyncio

    from .replication import matching
    from .replication.resync import ResyncError, Summary, resync
    from .store import has_catalog, open_store

    tty = sys.stderr.isatty()
    latest: list[Summary] = []

    def progress(summary: Summary) -> None:
        latest[:] = [summary]
        # A one-line counter on a terminal, redrawn every 100 versions; nothing in a log.
        if tty and summary.seen % 100 == 0:
            print(f"\r{summary.render()}", end="", file=sys.stderr, flush=True)

    async def run(settings: config.Settings) -> Summary:
        # Shared, as a gateway's workers hold the folder: a resync writes catalog rows only,
        # never a blob, so it runs beside a gateway serving it (fsck's exclusive hold is for
        # blobs being published, which a resync does not touch).
        store = open_store(
            settings.data,
            shared=True,
            io_threads=2,
            catalog_url=settings.catalog,
            blobs=tiers.blob_store(settings),
        )
        try:
            store.replicas = matching.replicas
            return await resync(store, args.bucket, args.rule, progress)
        finally:
            store.close()

    try:
        settings = config.settings_from(args)
        if settings.catalog in (None, "sqlite") and not has_catalog(settings.data):
            raise config.StartError(f"{settings.data} holds no catalog")
        summary = asyncio.run(run(settings))
    except (ResyncError, StoreError, config.StartError) as exc:
        print(f"s3gw replicate resync: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Each version was queued in its own transaction: what is done stays done.
        done = f" ({latest[0].render()})" if latest else ""
        print(
            f"\ns3gw replicate resync: interrupted{done}; run it again to resume", file=sys.stderr
        )
        return 130
    finally:
        if tty:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
    print(summary.render())
    return 0


def _keys(args: argparse.Namespace) -> int:
    from .store.crypto import rotate_master

    try:
        new = rotate_master(Path(args.data))
    except (OSError, ValueError) as exc:
        print(f"s3gw keys rotate: {exc}", file=sys.stderr)
        return 2
    print(f"master key rotated: now {new}; no object was rewritten")
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="s3gw", description="An S3-compatible gateway")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the S3 API")
    config.add_options(serve)
    creds = commands.add_parser(
        "credentials", help="print the gateway's credentials as shell exports"
    )
    config.add_options(creds, only=CREDENTIALS_OPTIONS)
    fsck = commands.add_parser("fsck", help="check the catalog against the blob files")
    # The gateways' own settings of where the catalog and the blobs are.
    config.add_options(fsck, only=FSCK_OPTIONS)
    fsck.add_argument("--deep", action="store_true", help="also hash every plain-MD5 object")
    fsck.add_argument(
        "--repair", action="store_true", help="remove orphans and fix reference counts"
    )
    move = commands.add_parser(
        "migrate",
        help="move the data folder's SQLite catalog into an empty PostgreSQL database, or "
        "(--blobs-to) its blobs between the folder and an S3 store",
    )
    # With --blobs-to, where the catalog and the blobs are now, as fsck reads them.
    config.add_options(move, only=FSCK_OPTIONS)
    move.add_argument(
        "--blobs-to",
        default=None,
        help="instead of the catalog, move the blobs: to folder (the data folder) or "
        "s3://BUCKET[/PREFIX] (with the --blobs-* settings), every gateway on them stopped",
    )
    move.add_argument(
        "--to", default="", help="postgresql://USER:PASSWORD@HOST:PORT/DB (an empty database)"
    )
    move.add_argument("--batch", type=_positive, default=1000, help="rows per batch")
    move.add_argument(
        "--sample", type=_positive, default=100, help="objects read back through both catalogs"
    )
    replicate = commands.add_parser(
        "replicate", help="bucket replication: `replicate resync` queues existing objects"
    )
    actions = replicate.add_subparsers(dest="action", required=True)
    resync = actions.add_parser(
        "resync",
        help="queue a bucket's existing versions for its replication rules",
        description="Queue a bucket's existing versions for its replication rules (those not "
        "COMPLETED yet); a gateway serving the folder, or the next one started, copies them.",
    )
    config.add_options(resync, only=FSCK_OPTIONS)
    resync.add_argument("bucket", help="the source bucket")
    resync.add_argument("--rule", default=None, help="only this rule's ID")
    keys = commands.add_parser("keys", help="encryption keys: `keys rotate` the master key")
    keys.add_argument("action", choices=["rotate"])
    keys.add_argument("--data", default=config.env_default("data"), help="data folder")
    args = parser.parse_args(argv)
    if args.command == "keys":
        os.umask(PRIVATE)
        raise SystemExit(_keys(args))
    if args.command == "fsck":
        os.umask(PRIVATE)
        raise SystemExit(_fsck(args))
    if args.command == "migrate":
        os.umask(PRIVATE)
        raise SystemExit(_migrate(args))
    if args.command == "replicate":
        os.umask(PRIVATE)
        raise SystemExit(_replicate(args))
    try:
        settings = config.settings_from(args)
        if args.command == "serve":
            os.umask(PRIVATE)
            logs.configure(settings.log_level, settings.log_format)
            try:
                server.serve(settings)
            except digest.DigestError as exc:
                raise config.StartError(f"{config.setting_name('md5-backend')}: {exc}") from None
            except FolderInUse as exc:
                raise config.StartError(f"{exc} ({settings.data})") from None
        else:
            _credentials(settings)
    except config.StartError as exc:
        # One line, no traceback: the operator's mistake, not the gateway's.
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None
