"""Command line: `s3gw serve`, `s3gw credentials`."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from . import bench, config, digest, logs, server
from .store.blobs import FolderInUse


def _credentials(settings: config.Settings) -> None:
    users, _ = config.load_users(settings)
    user = next(iter(users.values()))
    print(f"export AWS_ACCESS_KEY_ID={shlex.quote(user.access_key)}")
    print(f"export AWS_SECRET_ACCESS_KEY={shlex.quote(user.secret_key)}")
    print(f"export AWS_DEFAULT_REGION={shlex.quote(settings.region)}")


def _fsck(args: argparse.Namespace) -> int:
    from .s3.checksums import stored_checksum
    from .store.fsck import check

    try:
        report = check(
            Path(args.data), deep=args.deep, repair=args.repair, checksum_of=stored_checksum
        )
    except (FolderInUse, FileNotFoundError) as exc:
        print(f"s3gw fsck: {exc}", file=sys.stderr)
        return 2
    print(report.render())
    return 1 if report.damage else 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="s3gw", description="An S3-compatible gateway")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the S3 API")
    config.add_options(serve)
    creds = commands.add_parser(
        "credentials", help="print the gateway's credentials as shell exports"
    )
    config.add_options(creds)
    fsck = commands.add_parser("fsck", help="check the catalog against the blob files")
    fsck.add_argument("--data", default=config.env_default("data"), help="data folder")
    fsck.add_argument("--deep", action="store_true", help="also hash every plain-MD5 object")
    fsck.add_argument(
        "--repair", action="store_true", help="remove orphans and fix reference counts"
    )
    bench.add_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "fsck":
        raise SystemExit(_fsck(args))
    if args.command == "bench":
        raise SystemExit(args.run(args))
    settings = config.settings_from(args)
    logs.configure(settings.log_level, settings.log_format)
    if args.command == "serve":
        try:
            server.serve(settings)
        except (digest.DigestError, FolderInUse) as exc:
            raise SystemExit(f"s3gw serve: {exc}") from None
    else:
        _credentials(settings)
