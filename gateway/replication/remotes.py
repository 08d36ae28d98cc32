"""The operator's remote destinations: the TOML file of --replication-remotes
(S3GW_REPLICATION_REMOTES), `[[remote]]` tables naming a bucket on another S3 endpoint that a
replication rule may name as its destination (docs/replication.md).

    [[remote]]
    bucket_arn = "arn:aws:s3:::offsite"
    endpoint = "https://s3.eu-west-1.amazonaws.com"
    region = "eu-west-1"
    access_key = "AKIA..."
    secret_key = "..."
    ca_file = "/etc/s3gw/ca.pem"      # optional: CA certificates (PEM) to trust
    addressing_style = "virtual"      # optional: path (the default) or virtual

Read once at start-up; a mistake is one StartError line naming the file (an unknown field
would otherwise be dropped without a word, and a second entry for one bucket would replace the
first).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ..config import StartError, read_toml

BUCKET_ARN = "arn:aws:s3:::"
ADDRESSING_STYLES = ("path", "virtual")
_REQUIRED = ("bucket_arn", "endpoint", "region", "access_key", "secret_key")
_OPTIONAL = ("ca_file", "addressing_style")


@dataclass(frozen=True)
class Remote:
    bucket: str  # the destination bucket's name, as the rules' ARNs name it
    endpoint: str  # http(s)://HOST[:PORT]
    region: str
    access_key: str
    secret_key: str = field(repr=False)
    ca_file: Path | None = None
    addressing_style: str = "path"

    @property
    def bucket_arn(self) -> str:
        return BUCKET_ARN + self.bucket


@dataclass(frozen=True)
class Remotes(Mapping[str, Remote]):
    """The remotes by destination bucket name."""

    by_bucket: Mapping[str, Remote] = field(default_factory=dict)

    def __getitem__(self, bucket: str) -> Remote:
        return self.by_bucket[bucket]

    def __iter__(self) -> Iterator[str]:
        return iter(self.by_bucket)

    def __len__(self) -> int:
        return len(self.by_bucket)

    def __hash__(self) -> int:
        return hash(tuple(self.by_bucket))


NONE = Remotes()


def read_remotes(path: Path) -> Remotes:
    """The remotes of a --replication-remotes file, checked whole."""
    where, document = read_toml(path, "replication-remotes")
    unknown = sorted(set(document) - {"remote"})
    if unknown:
        raise StartError(f"{where}: unknown {unknown[0]!r}; remotes are [[remote]] tables")
    entries = document.get("remote", [])
    if not isinstance(entries, list):
        raise StartError(f"{where}: remotes are [[remote]] tables")
    found: dict[str, Remote] = {}
    first: dict[str, int] = {}
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise StartError(f"{where}: remotes are [[remote]] tables")
        extra = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
        if extra:
            raise StartError(
                f"{where}: remote {n} has an unknown field {extra[0]!r} "
                f"(a remote has {', '.join(_REQUIRED + _OPTIONAL)})"
            )
        for name in _REQUIRED:
            value = entry.get(name)
            if not isinstance(value, str) or not value.strip():
                raise StartError(f"{where}: remote {n} needs {name} (text)")
        arn = entry["bucket_arn"].strip()
        bucket = arn[len(BUCKET_ARN) :] if arn.startswith(BUCKET_ARN) else ""
        if not bucket or "/" in bucket:
            raise StartError(
                f"{where}: remote {n}: bucket_arn must be arn:aws:s3:::NAME, not {arn!r}"
            )
        endpoint = entry["endpoint"].strip().rstrip("/")
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path:
            raise StartError(
                f"{where}: remote {n}: endpoint must be http(s)://HOST[:PORT], not {endpoint!r}"
            )
        style = entry.get("addressing_style", "path")
        if style not in ADDRESSING_STYLES:
            raise StartError(
                f"{where}: remote {n}: addressing_style must be path or virtual, not {style!r}"
            )
        ca_file = entry.get("ca_file")
        if ca_file is not None and (not isinstance(ca_file, str) or not Path(ca_file).is_file()):
            raise StartError(f"{where}: remote {n}: ca_file {ca_file!r} is not a file")
        if bucket in found:
            raise StartError(
                f"{where}: remote {n}: bucket {bucket} is defined twice (remote {first[bucket]})"
            )
        first[bucket] = n
        found[bucket] = Remote(
            bucket,
            endpoint,
            entry["region"].strip(),
            entry["access_key"],
            entry["secret_key"],
            Path(ca_file) if ca_file is not None else None,
            style,
        )
    return Remotes(found)


@functools.lru_cache(maxsize=8)
def load(path: Path | None) -> Remotes:
    """The remotes of the configured file (none without one), read once per process: the
    start checked it (server.serve), so a failure here is the file changed since."""
    return NONE if path is None else read_remotes(path)
