"""One settings object, from command-line flags and S3GW_* environment variables.

Every flag `--some-name` also reads `S3GW_SOME_NAME`; a flag given on the command line wins.
"""

from __future__ import annotations

import argparse
import configparser
import ipaddress
import os
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import limits


@dataclass(frozen=True)
class Settings:
    data: Path
    host: str
    port: int
    catalog: str = "sqlite"  # or a postgresql:// URL (catalog_url checked it)
    blob_lease: float = 300.0
    # --blobs: None (the data folder) or s3://BUCKET[/PREFIX] (blobs_url checked it).
    blobs: str | None = None
    blobs_endpoint: str | None = None
    blobs_region: str = "us-east-1"
    blobs_access_key: str | None = None
    blobs_secret_key: str | None = None
    blobs_addressing: str = "path"
    blobs_ca: Path | None = None
    region: str = "us-east-1"
    domain: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    users: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_self_signed: bool = False
    inline_max: int = 64 * 1024  # INLINE_MAX
    body_timeout: float = 20.0
    min_body_rate: int = 500
    max_header_size: int = 8190
    idle_timeout: float = 20.0
    max_xml_size: int = 4 * 1024 * 1024
    max_uploads: int = 256
    shutdown_timeout: float = 25.0
    drain_seconds: float = 5.0
    iam_cache_seconds: float = 1.0
    workers: int = 1
    md5_backend: str = "hashlib"
    loop: str = "uvloop"
    log_level: str = "info"
    log_format: str = "text"
    max_object_size: int = limits.MAX_PUT_SIZE
    lifecycle_day: float = 86_400.0
    log_delivery_interval: float = 300.0
    bucket_defaults: str = "aws"
    default_encryption: str = "sse-s3"
    kms_keys: Path | None = None
    # --replication-remotes: the TOML file of remote replication destinations (None: none).
    replication_remotes: Path | None = None
    sse_c_over_http: str = "refuse"
    email_grants: str = "refuse"
    # --notify-networks as given (CIDRs); empty: every address but link-local ones.
    notify_networks: tuple[str, ...] = ()
    notify_retention: float = 604_800.0
    # The web console's HOST and PORT (None: no console).
    console: tuple[str, int] | None = None
    # The website endpoint's HOST and PORT (None: none), and the domain whose BUCKET.DOMAIN
    # names a bucket there (docs/website.md).
    website: tuple[str, int] | None = None
    website_domain: str | None = None


# (flag, environment variable suffix, type, default, help)
_OPTIONS: list[tuple[str, type, object, str]] = [
    ("data", str, "./data", "data folder (blobs; and the catalog, with --catalog sqlite)"),
    (
        "catalog",
        str,
        "sqlite",
        "sqlite (a file in the data folder), or postgresql://USER:PASSWORD@HOST:PORT/DB for "
        "several nodes sharing the data folder",
    ),
    # Far above --body-timeout: a body that streams in renews it; one stalled for this long
    # is answered 503 and its blob reclaimed (docs/scaling.md).
    (
        "blob-lease",
        float,
        300.0,
        "seconds a blob being written may go without news before any node reclaims it",
    ),
    # The blob tier (docs/scaling.md, "Blobs on S3"): unset, blob files in the data folder.
    (
        "blobs",
        str,
        None,
        "where blobs are kept: unset, files in the data folder; s3://BUCKET[/PREFIX], objects "
        "in a bucket of an S3 store (SeaweedFS, Ceph RGW, a cloud's) that keeps them redundant",
    ),
    ("blobs-endpoint", str, None, "URL of the S3 store of --blobs; unset: AWS's in the region"),
    ("blobs-region", str, "us-east-1", "the region --blobs is signed for"),
    ("blobs-access-key", str, None, "access key for the S3 store of --blobs"),
    ("blobs-secret-key", str, None, "secret key for the S3 store of --blobs"),
    # For Docker and Kubernetes secrets, which are files (docs/scaling.md, "Blobs on S3").
    (
        "blobs-credentials",
        str,
        None,
        "file of the keys for --blobs, as AWS's shared credentials file writes them "
        "([default] aws_access_key_id, aws_secret_access_key)",
    ),
    ("blobs-addressing", str, "path", "path (/BUCKET/KEY) or virtual (BUCKET.HOST/KEY) style"),
    ("blobs-ca", str, None, "CA certificates (PEM) to trust for --blobs-endpoint over HTTPS"),
    ("address", str, "127.0.0.1:9000", "HOST:PORT to listen on"),
    (
        "console-address",
        str,
        None,
        "HOST:PORT of the web console (docs/console.md), its own port; unset: no console",
    ),
    (
        "website-address",
        str,
        None,
        "HOST:PORT of the static website endpoint (docs/website.md), its own port; unset: none",
    ),
    ("website-domain", str, None, "on the website endpoint, BUCKET.DOMAIN names the bucket"),
    ("region", str, "us-east-1", "the region this endpoint answers for"),
    ("domain", str, None, "serve virtual-hosted style too: BUCKET.DOMAIN names the bucket"),
    ("access-key", str, None, "access key of the gateway's user"),
    ("secret-key", str, None, "secret key of the gateway's user"),
    ("users", str, None, "TOML file of users ([[user]] access_key, secret_key, display_name)"),
    ("tls-cert", str, None, "serve HTTPS with this certificate (PEM; with --tls-key)"),
    ("tls-key", str, None, "the private key of --tls-cert (PEM)"),
    ("workers", int, 0, "processes sharing the listening socket; 0: one per core"),
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
    # Below compose's stop_grace_period (30 s), after which docker sends SIGKILL.
    (
        "shutdown-timeout",
        float,
        25.0,
        "on SIGTERM, seconds requests in flight get to finish before connections are closed",
    ),
    # Above a load balancer's time to notice (HAProxy's in deploy/: 2 failed checks 1 s apart).
    (
        "drain-seconds",
        float,
        5.0,
        "on SIGTERM, seconds /health/ready answers 503 while every other request is still "
        "served (a load balancer stops sending here) before the port closes; 0: no drain",
    ),
    # IAM's keys are read from the catalog; each worker keeps what it read this long.
    (
        "iam-cache-seconds",
        float,
        1.0,
        "seconds a worker keeps an IAM key and its policies once read: a key deactivated or "
        "deleted, or a policy changed, on another node or worker counts within this time",
    ),
    # Apache's mod_reqtimeout default (body MinRate=500): below any real client, even on a
    # bad link, while a body that trickles a byte at a time no longer holds an upload slot.
    (
        "min-body-rate",
        int,
        500,
        "bytes a second a request body must average over each --body-timeout of waiting "
        "for it, or RequestTimeout; 0: no minimum",
    ),
    # Unset: INLINE_MAX, or TIER_INLINE_MAX with blobs on S3 (inline_max_for).
    (
        "inline-max",
        int,
        None,
        "bodies up to this many bytes are kept in the catalog; unset: 65536, or 262144 with "
        "--blobs s3://",
    ),
    ("md5-backend", str, "hashlib", "how ETags are hashed: hashlib or openssl"),
    ("kms-keys", str, None, "TOML file of local KMS keys for SSE-KMS ([[key]] id, arn, enabled)"),
    (
        "replication-remotes",
        str,
        None,
        "TOML file of remote replication destinations ([[remote]] bucket_arn, endpoint, "
        "region, access_key, secret_key, ca_file, addressing_style)",
    ),
    # AWS refuses SSE-C over HTTP; the s3-tests runner, like the suite's home server, allows it.
    ("sse-c-over-http", str, "refuse", "SSE-C requests over plain HTTP: refuse (as AWS) or allow"),
    # AWS has refused grants by e-mail address since 1 October 2025 (API_PutBucketAcl.html);
    # ceph's s3-tests still grant by one.
    (
        "email-grants",
        str,
        "refuse",
        "ACL grants by emailAddress: refuse (405, as AWS since October 2025) or resolve (to "
        "the users file's user with that email)",
    ),
    # A topic's endpoint is a request made on a tenant's behalf (gateway/notify/networks.py).
    (
        "notify-networks",
        str,
        None,
        "CIDRs a notification topic's endpoint may resolve to, checked at CreateTopic and at "
        "each connection; unset: every address except link-local ones (169.254.0.0/16, "
        "fe80::/10)",
    ),
    (
        "notify-retention",
        float,
        604_800.0,
        "seconds an event waits for its destination before it is dropped (and counted in "
        "s3gw_notifications_dropped); a week by default",
    ),
    ("loop", str, "uvloop", "event loop: uvloop, or asyncio (the standard library's)"),
    ("log-level", str, "info", "debug, info, warning or error"),
    ("log-format", str, "text", "text, or json: one JSON object per line"),
    # The conformance suite's lifecycle tests wait "days" of a few seconds.
    (
        "lifecycle-day",
        float,
        86_400.0,
        "seconds a day lasts for lifecycle rules (for tests; a real day is 86400)",
    ),
    # Server access logs: AWS delivers batches within hours; five minutes here by default.
    (
        "log-delivery-interval",
        float,
        300.0,
        "seconds a bucket's server access log records wait before they are written, as one "
        "object, into its target bucket",
    ),
    # AWS's defaults since April 2023 (SSE-C blocked since April 2026); the older ones are
    # what ceph's s3-tests assume.
    (
        "bucket-defaults",
        str,
        "aws",
        "access settings of a new bucket: aws (ACLs disabled by BucketOwnerEnforced, public "
        "access blocked, SSE-C blocked), or legacy (ACLs on, no ownership controls, nothing "
        "blocked)",
    ),
    # AWS encrypts every new object with SSE-S3 since January 2023; `none` keeps new
    # buckets' objects in plaintext unless a request or a bucket's own rule asks (a little
    # less CPU: docs/encryption.md has the figures).
    (
        "default-encryption",
        str,
        "sse-s3",
        "a new bucket's default encryption under the aws bucket defaults: sse-s3 (AWS's: "
        "every object encrypted at rest with the gateway's keys), or none (plaintext unless "
        "asked)",
    ),
]


class StartError(Exception):
    """A mistake in the settings or the environment found at start-up: one line for the
    operator (naming the setting), exit status 2, no traceback."""


# The range each number may take (one not listed here: at least 1); out of range is a
# start-up error, where a zero or a negative would otherwise fail every request, or none.
_RANGES: dict[str, tuple[float, float]] = {
    "workers": (0, 256),
    # Below 1 KiB a signed request's Authorization header alone does not fit.
    "max-header-size": (1024, 1024**2),
    "max-xml-size": (512, 256 * 1024**2),
    "idle-timeout": (0.5, 3600),
    "max-uploads": (1, 100_000),
    "body-timeout": (0.5, 3600),
    "min-body-rate": (0, 1024**3),
    # Inline bodies are held in memory and in the catalog's pages.
    "inline-max": (0, 1024**2),
    "shutdown-timeout": (0, 3600),
    "drain-seconds": (0, 3600),
    "iam-cache-seconds": (0, 300),
    "lifecycle-day": (1, 86_400),
    "blob-lease": (1, 86_400),
    "log-delivery-interval": (0.1, 86_400),
    "notify-retention": (1, 366 * 86_400),
}
# Settings that take one of a few words.
_CHOICES: dict[str, tuple[str, ...]] = {
    "md5-backend": ("hashlib", "openssl"),
    "sse-c-over-http": ("refuse", "allow"),
    "email-grants": ("refuse", "resolve"),
    "loop": ("asyncio", "uvloop"),
    "log-level": ("debug", "info", "warning", "error"),
    "log-format": ("text", "json"),
    "bucket-defaults": ("aws", "legacy"),
    "default-encryption": ("sse-s3", "none"),
    "blobs-addressing": ("path", "virtual"),
}
_FLAG_WORDS = {"1": True, "true": True, "yes": True, "on": True}
_FLAG_WORDS |= {"0": False, "false": False, "no": False, "off": False, "": False}


def _number(x: float) -> str:
    """A bound as a person writes it: 268435456, 0.5."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def env_name(flag: str) -> str:
    return "S3GW_" + flag.upper().replace("-", "_")


def setting_name(flag: str) -> str:
    """How an error names a setting: both ways of giving it."""
    return f"--{flag}/{env_name(flag)}"


def _convert(flag: str, kind: type, value: str) -> object:
    if kind is str:
        if flag not in _CHOICES:
            return value
        if value.strip().lower() not in _CHOICES[flag]:
            raise StartError(
                f"{setting_name(flag)} must be one of {', '.join(_CHOICES[flag])}, not {value!r}"
            )
        return value.strip().lower()
    low, high = _RANGES.get(flag, (1, float("inf")))
    what = "a whole number" if kind is int else "a number"
    bounds = (
        f"from {_number(low)} to {_number(high)}"
        if high != float("inf")
        else f"of at least {_number(low)}"
    )
    try:
        number = kind(value)
    except ValueError:
        raise StartError(f"{setting_name(flag)} must be {what} {bounds}, not {value!r}") from None
    if not low <= number <= high:  # also refuses nan
        raise StartError(f"{setting_name(flag)} must be {what} {bounds}, not {value!r}")
    return number


def env_default(flag: str, env: Mapping[str, str] | None = None) -> object:
    """A flag's default: its S3GW_ variable if set (and not empty), else the built-in one."""
    env = os.environ if env is None else env
    for name, kind, default, _text in _OPTIONS:
        if name == flag:
            value = env.get(env_name(flag), "")
            if value == "":
                return default
            return _convert(flag, kind, value)
    raise KeyError(flag)


def add_options(parser: argparse.ArgumentParser, only: Collection[str] | None = None) -> None:
    """Every setting's flag, or only those named (a command that reads a few settings lists
    only them in its help; the others still come from S3GW_* or their defaults)."""
    # Values are checked by settings_from, not argparse: an error names the setting in one
    # line, whether it came from a flag or from S3GW_*.
    for flag, _kind, default, text in _OPTIONS:
        if only is not None and flag not in only:
            continue
        parser.add_argument(
            f"--{flag}", default=None, help=f"{text} (env {env_name(flag)}; default {default})"
        )
    if only is not None and "tls-self-signed" not in only:
        return
    parser.add_argument(
        "--tls-self-signed",
        action="store_const",
        const="1",
        default=None,
        help="serve HTTPS with a certificate for localhost made on first start and kept in "
        "DATA/tls (env S3GW_TLS_SELF_SIGNED)",
    )


def _value(args: argparse.Namespace, flag: str, env: Mapping[str, str]) -> object:
    given = getattr(args, flag.replace("-", "_"), None)
    if given is None:
        return env_default(flag, env)
    kind = next(kind for name, kind, *_ in _OPTIONS if name == flag)
    return _convert(flag, kind, given)


def _self_signed(args: argparse.Namespace, env: Mapping[str, str]) -> bool:
    value = getattr(args, "tls_self_signed", None) or env.get(env_name("tls-self-signed"), "")
    try:
        return _FLAG_WORDS[value.strip().lower()]
    except KeyError:
        raise StartError(
            f"{env_name('tls-self-signed')} must be 1 or 0 (true/false, yes/no, on/off), "
            f"not {value!r}"
        ) from None


def _address(address: str, flag: str = "address") -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise StartError(
            f"{setting_name(flag)} must be HOST:PORT with a port from 0 to 65535, not {address!r}"
        )
    return host.strip("[]") or "127.0.0.1", int(port)


def _cidrs(value: str | None) -> tuple[str, ...]:
    """--notify-networks: CIDRs, by commas or spaces; each checked here, once."""
    found = tuple((value or "").replace(",", " ").split())
    for part in found:
        try:
            ipaddress.ip_network(part, strict=False)
        except ValueError:
            raise StartError(
                f"{setting_name('notify-networks')} must be CIDRs (10.0.0.0/8, fd00::/8), "
                f"not {part!r}"
            ) from None
    return found


_PATHS = (
    "users",
    "tls-cert",
    "tls-key",
    "kms-keys",
    "blobs-ca",
    "blobs-credentials",
    "replication-remotes",
)
# The section and keys of --blobs-credentials: what `aws configure` writes to
# ~/.aws/credentials, so a file made for the AWS CLI or an SDK serves as it is.
CREDENTIALS_SECTION = "default"
CREDENTIALS_KEYS = ("aws_access_key_id", "aws_secret_access_key")


def read_blobs_credentials(path: Path) -> tuple[str, str]:
    """The access key and secret key of --blobs-credentials (an AWS shared credentials file,
    its [default] profile); one StartError line for a file that cannot give them."""
    where = f"{setting_name('blobs-credentials')} {path}"
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(path.read_text(), source=str(path))
    except OSError as exc:
        raise StartError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, configparser.Error) as exc:
        first = str(exc).splitlines()[0]
        raise StartError(f"{where}: not an INI file of [default] keys: {first}") from None
    if not parser.has_section(CREDENTIALS_SECTION):
        raise StartError(f"{where}: no [{CREDENTIALS_SECTION}] section")
    section = parser[CREDENTIALS_SECTION]
    missing = [k for k in CREDENTIALS_KEYS if not section.get(k, "").strip()]
    if missing:
        raise StartError(f"{where}: [{CREDENTIALS_SECTION}] has no {' and no '.join(missing)}")
    access, secret = (section[k].strip() for k in CREDENTIALS_KEYS)
    return access, secret


def _blobs_keys(values: Mapping[str, Any], file: Path | None) -> tuple[str | None, str | None]:
    """--blobs' keys: from --blobs-credentials, or --blobs-access-key and --blobs-secret-key.
    Both ways at once only if they agree: two places that disagree would leave the operator
    guessing which one a gateway uses."""
    given = (values["blobs-access-key"] or None, values["blobs-secret-key"] or None)
    if file is None:
        return given
    found = read_blobs_credentials(file)
    for flag, value, read in zip(
        ("blobs-access-key", "blobs-secret-key"), given, found, strict=True
    ):
        if value is not None and value != read:
            raise StartError(
                f"{setting_name(flag)} and {setting_name('blobs-credentials')} {file} give "
                "different keys: give one of them"
            )
    return found


# --inline-max when not given. With blobs on S3 a body below costs a round trip to the store
# at every read (a HEAD and a ranged GET) and two at a write, where a file costs an open: more
# bodies stay in the catalog (figures: docs/scaling.md, "Blobs on S3").
INLINE_MAX = 64 * 1024
TIER_INLINE_MAX = 256 * 1024


def inline_max_for(given: int | None, blobs: str | None) -> int:
    """--inline-max as given, else the default of the blob tier in use."""
    if given is not None:
        return given
    return INLINE_MAX if blobs is None else TIER_INLINE_MAX


def blobs_url(value: str | None) -> str | None:
    """--blobs: unset, or s3://BUCKET[/PREFIX]."""
    if not value or not value.strip():
        return None
    value = value.strip()
    scheme, sep, rest = value.partition("://")
    if sep and scheme.lower() == "s3" and rest.split("/")[0]:
        return f"s3://{rest}"
    raise StartError(
        f"{setting_name('blobs')} must be unset or s3://BUCKET[/PREFIX], not {value!r}"
    )


def catalog_url(value: str) -> str:
    """`sqlite`, or a PostgreSQL URL (its password is never repeated in a message)."""
    value = value.strip()
    if value.lower() == "sqlite":
        return "sqlite"
    scheme, sep, _ = value.partition("://")
    if sep and scheme.lower() in ("postgresql", "postgres"):
        return value
    shown = f"{scheme}://…" if sep else repr(value)
    raise StartError(
        f"{setting_name('catalog')} must be sqlite or a postgresql://USER:PASSWORD@HOST:PORT/DB "
        f"URL, not {shown}"
    )


def settings_from(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    values: dict[str, Any] = {flag: _value(args, flag, env) for flag, *_ in _OPTIONS}
    host, port = _address(values["address"])
    paths = {name: Path(values[name]) if values[name] else None for name in _PATHS}
    blobs = blobs_url(values["blobs"])
    blobs_access_key = blobs_secret_key = None
    if blobs is not None:
        blobs_access_key, blobs_secret_key = _blobs_keys(values, paths["blobs-credentials"])
        if not (blobs_access_key and blobs_secret_key):
            raise StartError(
                f"{setting_name('blobs')} needs {setting_name('blobs-access-key')} and "
                f"{setting_name('blobs-secret-key')}, or {setting_name('blobs-credentials')}"
            )
    return Settings(
        data=Path(values["data"]),
        catalog=catalog_url(values["catalog"]),
        blobs=blobs,
        blobs_endpoint=values["blobs-endpoint"] or None,
        blobs_region=values["blobs-region"],
        blobs_access_key=blobs_access_key,
        blobs_secret_key=blobs_secret_key,
        blobs_addressing=values["blobs-addressing"],
        blobs_ca=paths["blobs-ca"],
        host=host,
        port=port,
        region=values["region"],
        domain=values["domain"] or None,
        access_key=values["access-key"] or None,
        secret_key=values["secret-key"] or None,
        users=paths["users"],
        tls_cert=paths["tls-cert"],
        tls_key=paths["tls-key"],
        tls_self_signed=_self_signed(args, env),
        inline_max=inline_max_for(values["inline-max"], blobs),
        body_timeout=values["body-timeout"],
        min_body_rate=values["min-body-rate"],
        max_header_size=values["max-header-size"],
        idle_timeout=values["idle-timeout"],
        max_xml_size=values["max-xml-size"],
        max_uploads=values["max-uploads"],
        shutdown_timeout=values["shutdown-timeout"],
        drain_seconds=values["drain-seconds"],
        iam_cache_seconds=values["iam-cache-seconds"],
        workers=values["workers"] or os.cpu_count() or 1,
        md5_backend=values["md5-backend"],
        loop=values["loop"],
        log_level=values["log-level"],
        log_format=values["log-format"],
        lifecycle_day=values["lifecycle-day"],
        blob_lease=values["blob-lease"],
        log_delivery_interval=values["log-delivery-interval"],
        bucket_defaults=values["bucket-defaults"],
        default_encryption=values["default-encryption"],
        kms_keys=paths["kms-keys"],
        replication_remotes=paths["replication-remotes"],
        sse_c_over_http=values["sse-c-over-http"],
        email_grants=values["email-grants"],
        notify_networks=_cidrs(values["notify-networks"]),
        notify_retention=values["notify-retention"],
        console=(
            _address(values["console-address"], "console-address")
            if values["console-address"]
            else None
        ),
        website=(
            _address(values["website-address"], "website-address")
            if values["website-address"]
            else None
        ),
        website_domain=values["website-domain"] or None,
    )


def read_toml(path: Path, setting: str) -> tuple[str, dict[str, Any]]:
    """The TOML file `setting` names (the users file, the KMS keys file), and how a mistake in
    it is introduced (its setting and path); one StartError line if it cannot be read."""
    where = f"{setting_name(setting)} {path}"
    try:
        return where, tomllib.loads(path.read_text())
    except OSError as exc:
        raise StartError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise StartError(f"{where}: not a TOML file: {exc}") from None
