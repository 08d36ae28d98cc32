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

An account may also name remotes of its own at runtime (the console's Remotes page): documents
of the catalog, their secret key sealed (KIND, to_doc, from_doc), checked by the same `check`;
their endpoints are bound by --notify-networks, as a topic's are.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping
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
    # Made by an account (the catalog's), not the operator (the file's): its endpoint is a
    # request the gateway makes on a tenant's behalf, bound by --notify-networks.
    bounded: bool = False

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


def check(fields: Mapping[str, object]) -> Remote:
    """A remote from its fields (the file's table, the console's form), checked; ValueError
    says what is wrong with it."""
    extra = sorted(set(fields) - set(_REQUIRED) - set(_OPTIONAL))
    if extra:
        raise ValueError(
            f"unknown field {extra[0]!r} (a remote has {', '.join(_REQUIRED + _OPTIONAL)})"
        )
    for name in _REQUIRED:
        value = fields.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"it needs {name} (text)")
    arn = str(fields["bucket_arn"]).strip()
    bucket = arn[len(BUCKET_ARN) :] if arn.startswith(BUCKET_ARN) else ""
    if not bucket or "/" in bucket:
        raise ValueError(f"bucket_arn must be arn:aws:s3:::NAME, not {arn!r}")
    endpoint = str(fields["endpoint"]).strip().rstrip("/")
    try:
        parts = urlsplit(endpoint)
        parts.port  # noqa: B018 -- a port that is no number raises here
    except ValueError:
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path:
        raise ValueError(f"endpoint must be http(s)://HOST[:PORT], not {endpoint!r}")
    if parts.username is not None or parts.query or parts.fragment:
        raise ValueError(f"endpoint must be http(s)://HOST[:PORT], not {endpoint!r}")
    style = fields.get("addressing_style", "path")
    if style not in ADDRESSING_STYLES:
        raise ValueError(f"addressing_style must be path or virtual, not {style!r}")
    ca_file = fields.get("ca_file")
    if ca_file is not None and (not isinstance(ca_file, str) or not Path(ca_file).is_file()):
        raise ValueError(f"ca_file {ca_file!r} is not a file")
    return Remote(
        bucket,
        endpoint,
        str(fields["region"]).strip(),
        str(fields["access_key"]).strip(),
        str(fields["secret_key"]),
        Path(ca_file) if isinstance(ca_file, str) else None,
        str(style),
    )


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
        try:
            remote = check(entry)
        except ValueError as exc:
            raise StartError(f"{where}: remote {n}: {exc}") from None
        if remote.bucket in found:
            raise StartError(
                f"{where}: remote {n}: bucket {remote.bucket} is defined twice "
                f"(remote {first[remote.bucket]})"
            )
        first[remote.bucket] = n
        found[remote.bucket] = remote
    return Remotes(found)


# An account's own remotes, made at runtime (the console's Remotes page), are documents of the
# catalog (Store.get_docs of this kind, by the destination bucket's name): every node sees
# them. The secret key is sealed under the gateway's keys; the file's remotes win over them.
KIND = "remotes"


def to_doc(remote: Remote, seal: Callable[[bytes], str]) -> str:
    return json.dumps(
        {
            "endpoint": remote.endpoint,
            "region": remote.region,
            "access_key": remote.access_key,
            "secret_key": seal(remote.secret_key.encode()),
            "addressing_style": remote.addressing_style,
        }
    )


def from_doc(bucket: str, doc: str, open_: Callable[[str], bytes] | None) -> Remote:
    """The remote a document keeps; its secret key opened by `open_` (None: left out, for
    showing the rest)."""
    found = json.loads(doc)
    return Remote(
        bucket,
        str(found["endpoint"]),
        str(found["region"]),
        str(found["access_key"]),
        "" if open_ is None else open_(str(found["secret_key"])).decode(),
        None,
        str(found.get("addressing_style", "path")),
        bounded=True,
    )


@functools.lru_cache(maxsize=8)
def load(path: Path | None) -> Remotes:
    """The remotes of the configured file (none without one), read once per process: the
    start checked it (server.serve), so a failure here is the file changed since."""
    return NONE if path is None else read_remotes(path)
