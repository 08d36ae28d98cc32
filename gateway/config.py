"""One settings object, from command-line flags and S3GW_* environment variables.

Every flag `--some-name` also reads `S3GW_SOME_NAME`; a flag given on the command line wins.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import string
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .s3.auth import User

CREDENTIALS_FILE = "credentials.json"
MAX_OBJECT_SIZE = 5 * 1024**3  # PutObject's limit (AWS: 5 GiB in one PUT)


@dataclass(frozen=True)
class Settings:
    data: Path
    host: str
    port: int
    region: str = "us-east-1"
    domain: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    users: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_self_signed: bool = False
    inline_max: int = 64 * 1024
    body_timeout: float = 20.0
    min_body_rate: int = 500
    max_header_size: int = 8190
    idle_timeout: float = 20.0
    max_xml_size: int = 4 * 1024 * 1024
    max_uploads: int = 256
    workers: int = 1
    md5_backend: str = "hashlib"
    loop: str = "asyncio"
    log_level: str = "info"
    log_format: str = "text"
    max_object_size: int = MAX_OBJECT_SIZE


# (flag, environment variable suffix, type, default, help)
_OPTIONS: list[tuple[str, type, object, str]] = [
    ("data", str, "./data", "data folder (catalog, blobs)"),
    ("address", str, "127.0.0.1:9000", "HOST:PORT to listen on"),
    ("region", str, "us-east-1", "the region this endpoint answers for"),
    ("domain", str, None, "serve virtual-hosted style too: BUCKET.DOMAIN names the bucket"),
    ("access-key", str, None, "access key of the gateway's user"),
    ("secret-key", str, None, "secret key of the gateway's user"),
    ("users", str, None, "TOML file of users ([[user]] access_key, secret_key, display_name)"),
    ("tls-cert", str, None, "serve HTTPS with this certificate (PEM; with --tls-key)"),
    ("tls-key", str, None, "the private key of --tls-cert (PEM)"),
    ("workers", int, 0, "processes serving the port (SO_REUSEPORT); 0: one per core"),
    ("max-header-size", int, 8190, "longest request line or header line, in bytes"),
    # Also bounds a client that never finishes its headers (aiohttp's keep-alive timer runs
    # until a request is complete); S3 itself drops idle connections after about 20 s.
    (
        "max-xml-size",
        int,
        4 * 1024 * 1024,
        "largest XML request body (operations that need less have lower limits)",
    ),
    ("idle-timeout", float, 20.0, "seconds a connection may sit idle or in unfinished headers"),
    ("max-uploads", int, 256, "request bodies received at once per worker; more: 503 SlowDown"),
    # AWS answers RequestTimeout after about 20 s without a byte of the body.
    ("body-timeout", float, 20.0, "seconds a request body may stall before RequestTimeout"),
    # Apache's mod_reqtimeout default (body MinRate=500): below any real client, even on a
    # bad link, while a body that trickles a byte at a time no longer holds an upload slot.
    (
        "min-body-rate",
        int,
        500,
        "bytes a second a request body must average over each --body-timeout of waiting "
        "for it, or RequestTimeout; 0: no minimum",
    ),
    ("inline-max", int, 64 * 1024, "bodies up to this many bytes are kept in the catalog"),
    ("md5-backend", str, "hashlib", "how ETags are hashed: hashlib or openssl"),
    ("loop", str, "asyncio", "event loop: asyncio, or uvloop (the fast extra)"),
    ("log-level", str, "info", "debug, info, warning or error"),
    ("log-format", str, "text", "text, or json: one JSON object per line"),
]


def env_name(flag: str) -> str:
    return "S3GW_" + flag.upper().replace("-", "_")


def env_default(flag: str, env: Mapping[str, str] | None = None) -> object:
    """A flag's default: its S3GW_ variable if set, else the built-in default."""
    env = os.environ if env is None else env
    for name, kind, default, _text in _OPTIONS:
        if name == flag:
            value = env.get(env_name(flag), default)
            return kind(value) if value is not None else None
    raise KeyError(flag)


def add_options(parser: argparse.ArgumentParser, env: Mapping[str, str] | None = None) -> None:
    for flag, kind, default, text in _OPTIONS:
        parser.add_argument(
            f"--{flag}",
            type=kind,
            default=env_default(flag, env),
            help=f"{text} (env {env_name(flag)}; default {default})",
        )
    parser.add_argument(
        "--tls-self-signed",
        action="store_true",
        default=_flag((os.environ if env is None else env).get(env_name("tls-self-signed"), "")),
        help="serve HTTPS with a certificate for localhost made on first start and kept in "
        "DATA/tls (env S3GW_TLS_SELF_SIGNED)",
    )


def _flag(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def settings_from(args: argparse.Namespace) -> Settings:
    host, sep, port = args.address.rpartition(":")
    if not sep or not port.isdigit():
        raise SystemExit(f"--address must be HOST:PORT, not {args.address!r}")
    return Settings(
        data=Path(args.data),
        host=host.strip("[]") or "127.0.0.1",
        port=int(port),
        region=args.region,
        domain=args.domain or None,
        access_key=args.access_key,
        secret_key=args.secret_key,
        users=Path(args.users) if args.users else None,
        tls_cert=Path(args.tls_cert) if args.tls_cert else None,
        tls_key=Path(args.tls_key) if args.tls_key else None,
        tls_self_signed=args.tls_self_signed,
        inline_max=args.inline_max,
        body_timeout=args.body_timeout,
        min_body_rate=args.min_body_rate,
        max_header_size=args.max_header_size,
        idle_timeout=args.idle_timeout,
        max_xml_size=args.max_xml_size,
        max_uploads=args.max_uploads,
        workers=args.workers if args.workers > 0 else (os.cpu_count() or 1),
        md5_backend=args.md5_backend,
        loop=args.loop,
        log_level=args.log_level,
        log_format=args.log_format,
    )


def _random(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _user(access: str, secret: str, display_name: str = "s3gw", canonical_id: str = "") -> User:
    # The default canonical id is derived from the access key: stable across restarts.
    return User(
        access_key=access,
        secret_key=secret,
        display_name=display_name,
        canonical_id=canonical_id or hashlib.sha256(b"s3gw-user:" + access.encode()).hexdigest(),
    )


def read_users_file(path: Path) -> list[User]:
    """A TOML users file: `[[user]]` tables with access_key, secret_key, and optionally
    display_name and canonical_id."""
    try:
        entries = tomllib.loads(path.read_text()).get("user", [])
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SystemExit(f"cannot read users file {path}: {exc}") from exc
    users = []
    for i, entry in enumerate(entries, 1):
        try:
            users.append(
                _user(
                    str(entry["access_key"]),
                    str(entry["secret_key"]),
                    str(entry.get("display_name", entry["access_key"])),
                    str(entry.get("canonical_id", "")),
                )
            )
        except KeyError as exc:
            raise SystemExit(f"{path}: user {i} has no {exc.args[0]}") from exc
    return users


def load_users(settings: Settings) -> tuple[dict[str, User], Path | None]:
    """The users the gateway accepts, keyed by access key, and the credentials file used.

    The users file and the S3GW_ACCESS_KEY/S3GW_SECRET_KEY pair; with neither, the pair kept in
    the data folder, created (random, mode 0600) on first start.
    """
    users: list[User] = []
    path: Path | None = None
    if settings.users is not None:
        users += read_users_file(settings.users)
        path = settings.users
    if settings.access_key and settings.secret_key:
        users.insert(0, _user(settings.access_key, settings.secret_key))
    elif settings.access_key or settings.secret_key:
        raise SystemExit("set both S3GW_ACCESS_KEY and S3GW_SECRET_KEY, or neither")
    elif not users:
        path = settings.data / CREDENTIALS_FILE
        users.append(_generated_user(path))
    by_key: dict[str, User] = {}
    for user in users:
        if user.access_key in by_key:
            raise SystemExit(f"access key {user.access_key} is defined twice")
        by_key[user.access_key] = user
    return by_key, path


def _generated_user(path: Path) -> User:
    if path.exists():
        stored = json.loads(path.read_text())
        return _user(stored["access_key"], stored["secret_key"])
    path.parent.mkdir(parents=True, exist_ok=True)
    access = "S3GW" + _random(string.ascii_uppercase + string.digits, 16)
    secret = _random(string.ascii_letters + string.digits, 40)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"access_key": access, "secret_key": secret}, f)
        f.flush()
        os.fsync(f.fileno())
    return _user(access, secret)
