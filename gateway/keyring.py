"""The data folder's keyring at start-up: its master key and S3 keys (store/crypto.py makes
them on first use), and the KMS keys an operator declares in the --kms-keys file. Read once,
before the Store is built, and given to it: the protocol's half of encryption (s3/sse.py)
only asks the Store's keyring for keys."""

from __future__ import annotations

from pathlib import Path

from .config import Settings, StartError, read_toml
from .store import crypto

_KMS_KEY_FIELDS = ("id", "arn", "enabled")


def read_kms_keys(path: Path, region: str) -> list[crypto.KmsKey]:
    """The keys of a --kms-keys file: `[[key]]` tables of id, and optionally arn and enabled.
    A mistake is one StartError line naming the file (checked before the start logs
    anything): a misspelt field or table would otherwise be dropped without a word (a key
    meant disabled left enabled), and a second key of one id or ARN would replace the first."""
    where, document = read_toml(path, "kms-keys")
    entries = document.get("key", [])
    if not isinstance(entries, list):
        raise StartError(f"{where}: keys are [[key]] tables")
    unknown = sorted(set(document) - {"key"})
    if unknown:
        raise StartError(f"{where}: unknown {unknown[0]!r}; keys are [[key]] tables")
    declared: list[crypto.KmsKey] = []
    ids: dict[str, int] = {}
    arns: dict[str, int] = {}
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise StartError(f"{where}: keys are [[key]] tables")
        key_id = entry.get("id")
        if not isinstance(key_id, str) or not key_id or "/" in key_id or ":" in key_id:
            raise StartError(f"{where}: key {n} needs an id (no '/' or ':')")
        extra = sorted(set(entry) - set(_KMS_KEY_FIELDS))
        if extra:
            raise StartError(
                f"{where}: key {key_id} has an unknown field {extra[0]!r} "
                f"(a key has {', '.join(_KMS_KEY_FIELDS)})"
            )
        arn = entry.get("arn", f"arn:aws:kms:{region}:000000000000:key/{key_id}")
        enabled = entry.get("enabled", True)
        if not isinstance(arn, str) or not isinstance(enabled, bool):
            raise StartError(f"{where}: key {key_id}: arn is text and enabled true or false")
        if key_id in ids:
            raise StartError(f"{where}: key {n}: id {key_id} is defined twice (key {ids[key_id]})")
        if arn in arns:
            raise StartError(f"{where}: key {n}: arn {arn} is defined twice (key {arns[arn]})")
        ids[key_id], arns[arn] = n, n
        declared.append(crypto.KmsKey(key_id, arn, enabled))
    return declared


def load_keyring(settings: Settings) -> crypto.Keyring:
    """The data folder's keyring with the KMS keys of --kms-keys (read_kms_keys)."""
    path = settings.kms_keys
    declared = [] if path is None else read_kms_keys(path, settings.region)
    try:
        return crypto.Keyring.load(settings.data, declared, settings.region)
    except (OSError, ValueError, KeyError) as exc:
        raise StartError(f"the keys of data folder {settings.data}: {exc}") from None
