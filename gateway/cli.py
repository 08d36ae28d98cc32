"""Command line: `s3gw serve`, `s3gw credentials`."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import signal
import ssl
import sys
from pathlib import Path

from aiohttp import web

from . import bench, config, logs, tls
from .app import build_app, describe


def _serve(settings: config.Settings) -> None:
    asyncio.run(_run(settings))


async def _run(settings: config.Settings) -> None:
    app = build_app(settings)
    context, cert = _tls(settings)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(
        runner, settings.host, settings.port, reuse_address=True, ssl_context=context
    )
    await site.start()
    host, port = runner.addresses[0][:2]
    scheme = "https" if context else "http"
    url = f"{scheme}://{host}:{port}" if ":" not in host else f"{scheme}://[{host}]:{port}"
    if cert is not None:
        print(f"TLS certificate: {cert} (trust it with AWS_CA_BUNDLE={cert})", file=sys.stderr)
    # The banner is for the person (or test) that started us: printed whatever the log level.
    for line in describe(settings, app, url):
        print(line, file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def _tls(settings: config.Settings) -> tuple[ssl.SSLContext | None, Path | None]:
    if settings.tls_self_signed:
        cert, key = tls.self_signed(settings.data)
    elif settings.tls_cert and settings.tls_key:
        cert, key = settings.tls_cert, settings.tls_key
    elif settings.tls_cert or settings.tls_key:
        raise SystemExit("--tls-cert and --tls-key go together")
    else:
        return None, None
    return tls.server_context(cert, key), cert


def _credentials(settings: config.Settings) -> None:
    users, _ = config.load_users(settings)
    user = next(iter(users.values()))
    print(f"export AWS_ACCESS_KEY_ID={shlex.quote(user.access_key)}")
    print(f"export AWS_SECRET_ACCESS_KEY={shlex.quote(user.secret_key)}")
    print(f"export AWS_DEFAULT_REGION={shlex.quote(settings.region)}")


def _fsck(args: argparse.Namespace) -> int:
    from .store.blobs import FolderInUse
    from .store.fsck import check

    try:
        report = check(Path(args.data), deep=args.deep, repair=args.repair)
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
        _serve(settings)
    else:
        _credentials(settings)
