"""Encryption at rest: AES-256-GCM in 64 KiB chunks under per-blob data keys, the data keys
wrapped (sealed) by the key an object's mode names, and the keyring that holds the gateway's
own keys. docs/encryption.md gives the format and the reasons; this is the one module that
encrypts or decrypts anything.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import ctypes
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .. import digest

CHUNK = 64 * 1024  # plaintext bytes per chunk
TAG = 16
SEALED_CHUNK = CHUNK + TAG  # stored bytes per full chunk
KEY_BYTES = 32
PREFIX_BYTES = 8  # the per-blob part of every chunk nonce; the chunk index is the rest
MAX_CHUNKS = 1 << 32

S3 = "s3"
KMS = "kms"
CUSTOMER = "c"


class WrongKey(Exception):
    """A sealed data key that the key offered does not open (another customer key, a master
    key that is not this gateway's)."""


class Tampered(OSError):
    """Stored ciphertext that fails its tag: flipped, moved, swapped or cut short. An OSError,
    so a read that meets it fails as an I/O error does."""


def stored_size(size: int) -> int:
    """Bytes on disk for `size` bytes of plaintext."""
    return size + TAG * -(-size // CHUNK)


# --- AES-256-GCM ----------------------------------------------------------------------------

_c_void_p, _c_char_p, _c_int = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
_GCM_PROTOTYPES: dict[str, tuple[type | None, list[type]]] = {
    "EVP_CIPHER_fetch": (_c_void_p, [_c_void_p, _c_char_p, _c_char_p]),
    "EVP_CIPHER_CTX_new": (_c_void_p, []),
    "EVP_CIPHER_CTX_free": (None, [_c_void_p]),
    "EVP_CIPHER_CTX_ctrl": (_c_int, [_c_void_p, _c_int, _c_int, _c_void_p]),
    "EVP_EncryptInit_ex": (_c_int, [_c_void_p, _c_void_p, _c_void_p, _c_char_p, _c_char_p]),
    "EVP_EncryptUpdate": (_c_int, [_c_void_p, _c_void_p, _c_void_p, _c_void_p, _c_int]),
    "EVP_EncryptFinal_ex": (_c_int, [_c_void_p, _c_void_p, _c_void_p]),
    "EVP_DecryptInit_ex": (_c_int, [_c_void_p, _c_void_p, _c_void_p, _c_char_p, _c_char_p]),
    "EVP_DecryptUpdate": (_c_int, [_c_void_p, _c_void_p, _c_void_p, _c_void_p, _c_int]),
    "EVP_DecryptFinal_ex": (_c_int, [_c_void_p, _c_void_p, _c_void_p]),
    "ERR_clear_error": (None, []),
}
_GET_TAG, _SET_TAG = 0x10, 0x11  # EVP_CTRL_AEAD_GET_TAG / EVP_CTRL_AEAD_SET_TAG
# An update of at least this many bytes lets the GIL go. digest.py's 2 KiB is hashlib's
# threshold for MD5; AES-GCM runs about three times as fast here, so the work that pays for a
# GIL hand-over is proportionally larger (every 64 KiB chunk of a large body still lets it go).
GIL_MINSIZE = 8 * 1024
# A new bytes object of a given size that libcrypto fills in place before anyone else sees it
# (PyBytes_FromStringAndSize(NULL, n), as C extensions make results): no copy of the output.
_new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
_new_bytes.argtypes, _new_bytes.restype = [_c_void_p, ctypes.c_ssize_t], ctypes.py_object


class OpenSSLGcm:
    """AES-256-GCM on the system libcrypto (the one digest.py loads), through ctypes.

    Encryption must overlap with MD5, the disk and the event loop (docs/encryption.md,
    "AES-GCM through libcrypto", has the figures against `cryptography`). The updates that do
    the work, one per 64 KiB chunk, are ctypes.CDLL calls, which release the GIL; the short
    calls around them (IV, final, tag: about a microsecond each) keep it, as digest.py does,
    so that a chunk costs one GIL hand-over, not four. The cipher is fetched once per process
    (EVP_CIPHER_fetch takes the provider store's lock, as MD5's fetch does); each call gets
    its own context with the key schedule set once, then only the IV changes per chunk."""

    def __init__(self) -> None:
        path = digest.libcrypto_path()
        user = "AES-GCM on libcrypto"
        self.released = digest.bind(ctypes.CDLL, path, _GCM_PROTOTYPES, user)
        self.held = held = digest.bind(ctypes.PyDLL, path, _GCM_PROTOTYPES, user)
        held.ERR_clear_error()
        cipher = held.EVP_CIPHER_fetch(None, b"AES-256-GCM", None)
        if not cipher:
            held.ERR_clear_error()
            raise digest.DigestError(f"{path} offers no AES-256-GCM")
        self.cipher: int = cipher  # never freed: used until the process ends

    @contextlib.contextmanager
    def _keyed(self, init: Callable[..., int], key: bytes) -> Iterator[int]:
        """A new context with `key`'s schedule set by `init` (EVP_EncryptInit_ex or
        EVP_DecryptInit_ex), freed afterwards."""
        held = self.held
        ctx = held.EVP_CIPHER_CTX_new()
        if not ctx:
            raise MemoryError("EVP_CIPHER_CTX_new failed")
        try:
            if not init(ctx, self.cipher, None, key, None):
                held.ERR_clear_error()
                raise OSError("libcrypto refused an AES-256-GCM key")
            yield ctx
        finally:
            held.EVP_CIPHER_CTX_free(ctx)

    def seal(self, key: bytes, nonces: Sequence[bytes], data: bytes | memoryview) -> bytes:
        """Chunk n of `data` encrypted under nonces[n], each followed by its tag."""
        size = len(data)
        if not size:
            return b""
        out = _new_bytes(None, stored_size(size))
        held, released = self.held, self.released
        outl = ctypes.byref(_c_int())
        with (
            self._keyed(held.EVP_EncryptInit_ex, key) as ctx,
            digest.pinned(data) as (src, _),
            digest.pinned(out) as (dst, _),
        ):
            for n, at in enumerate(range(0, size, CHUNK)):
                length = min(CHUNK, size - at)
                put = dst + n * SEALED_CHUNK
                update = released if length >= GIL_MINSIZE else held
                if not (
                    held.EVP_EncryptInit_ex(ctx, None, None, None, nonces[n])
                    and update.EVP_EncryptUpdate(ctx, put, outl, src + at, length)
                    and held.EVP_EncryptFinal_ex(ctx, put + length, outl)
                    and held.EVP_CIPHER_CTX_ctrl(ctx, _GET_TAG, TAG, put + length)
                ):
                    held.ERR_clear_error()
                    raise OSError("AES-GCM encryption failed in libcrypto")
        return out

    def open(self, key: bytes, nonces: Sequence[bytes], sealed: bytes | memoryview) -> bytes:
        """The plaintext of stored chunks (_ChunkFailed names the first that fails its tag)."""
        size = len(sealed)
        count = -(-size // SEALED_CHUNK)
        if count and size - (count - 1) * SEALED_CHUNK < TAG:
            raise _ChunkFailed(count - 1)
        out = _new_bytes(None, size - TAG * count)
        held, released = self.held, self.released
        outl = ctypes.byref(_c_int())
        with (
            self._keyed(held.EVP_DecryptInit_ex, key) as ctx,
            digest.pinned(sealed) as (src, _),
            digest.pinned(out) as (dst, _),
        ):
            for n in range(count):
                get = src + n * SEALED_CHUNK
                put = dst + n * CHUNK
                length = min(SEALED_CHUNK, size - n * SEALED_CHUNK) - TAG
                update = released if length >= GIL_MINSIZE else held
                if not (
                    held.EVP_DecryptInit_ex(ctx, None, None, None, nonces[n])
                    and update.EVP_DecryptUpdate(ctx, put, outl, get, length)
                    and held.EVP_CIPHER_CTX_ctrl(ctx, _SET_TAG, TAG, get + length)
                    and held.EVP_DecryptFinal_ex(ctx, put + length, outl) > 0
                ):
                    held.ERR_clear_error()
                    raise _ChunkFailed(n)
        return out


class _ChunkFailed(Exception):
    def __init__(self, n: int) -> None:
        self.n = n


class CryptographyGcm:
    """AES-256-GCM through `cryptography`: only where libcrypto cannot serve (it brings its
    own OpenSSL, and measured slower in the write path here)."""

    def seal(self, key: bytes, nonces: Sequence[bytes], data: bytes | memoryview) -> bytes:
        aead = AESGCM(key)
        view = memoryview(data)
        return b"".join(
            aead.encrypt(nonces[n], view[at : at + CHUNK], None)
            for n, at in enumerate(range(0, len(view), CHUNK))
        )

    def open(self, key: bytes, nonces: Sequence[bytes], sealed: bytes | memoryview) -> bytes:
        aead = AESGCM(key)
        view = memoryview(sealed)
        out = []
        for n, at in enumerate(range(0, len(view), SEALED_CHUNK)):
            try:
                out.append(aead.decrypt(nonces[n], view[at : at + SEALED_CHUNK], None))
            except InvalidTag:
                raise _ChunkFailed(n) from None
        return b"".join(out)


Gcm = OpenSSLGcm | CryptographyGcm


def _choose_gcm() -> tuple[Gcm, str]:
    try:
        return OpenSSLGcm(), "openssl"
    except (digest.DigestError, OSError, AttributeError) as exc:
        return CryptographyGcm(), f"cryptography ({exc})"


_gcm, GCM_BACKEND = _choose_gcm()


def gcm_backend() -> str:
    """Which AES-GCM encrypts chunks here: `openssl`, or `cryptography (why not openssl)`."""
    return GCM_BACKEND


@dataclass(frozen=True)
class DataKey:
    """The key of one blob and its nonce prefix: chunk i is sealed under prefix ‖ i. A
    dual-layer (DSSE-KMS) blob has a second, independent key, `outer` (see _outer_layer)."""

    key: bytes
    prefix: bytes
    outer: bytes = b""

    @staticmethod
    def generate(dual: bool = False) -> DataKey:
        return DataKey.from_bytes(secrets.token_bytes(_raw_size(dual)))

    @staticmethod
    def from_bytes(raw: bytes) -> DataKey:
        end = KEY_BYTES + PREFIX_BYTES
        return DataKey(raw[:KEY_BYTES], raw[KEY_BYTES:end], raw[end:])

    def to_bytes(self) -> bytes:
        return self.key + self.prefix + self.outer

    def _nonce(self, index: int) -> bytes:
        if not 0 <= index < MAX_CHUNKS:
            raise ValueError("a blob has at most 2**32 chunks")
        return self.prefix + index.to_bytes(4, "big")

    def _nonces(self, first: int, count: int) -> list[bytes]:
        if first < 0 or first + count > MAX_CHUNKS:
            raise ValueError("a blob has at most 2**32 chunks")
        prefix = self.prefix
        return [prefix + i.to_bytes(4, "big") for i in range(first, first + count)]

    @property
    def _aead(self) -> AESGCM:
        # Made once and kept with the key: a data key the keyring keeps opened
        # (Keyring._open_own) then costs no key set-up on the next GET of its object. (Not
        # functools.cached_property: on Python 3.11 it takes a lock on every first use.)
        aead = self.__dict__.get("_gcm")
        if aead is None:
            aead = AESGCM(self.key)
            object.__setattr__(self, "_gcm", aead)
        return aead

    def seal(self, data: bytes | memoryview, first: int, gcm: Gcm | None = None) -> bytes:
        """Encrypt `data`, whose chunk 0 is the blob's chunk `first` (every chunk full but
        possibly the last)."""
        if gcm is None and 0 < len(data) <= CHUNK:
            # One chunk (a small body, sealed on the event loop): one call of `cryptography`
            # where libcrypto through ctypes takes six (docs/encryption.md, "Small objects").
            sealed = self._aead.encrypt(self._nonce(first), data, None)
        else:
            nonces = self._nonces(first, -(-len(data) // CHUNK))
            sealed = (gcm or _gcm).seal(self.key, nonces, data)
        return _outer_layer(self.outer, first, sealed) if self.outer else sealed

    def open(self, sealed: bytes | memoryview, first: int, gcm: Gcm | None = None) -> bytes:
        """Decrypt stored chunks that start with the blob's chunk `first`."""
        size = len(sealed)
        if self.outer:
            sealed = _outer_layer(self.outer, first, sealed)
        try:
            if gcm is None and 0 < size <= SEALED_CHUNK:
                # One chunk (a small object read back from the catalog): as in seal.
                try:
                    return self._aead.decrypt(self._nonce(first), sealed, None)
                except InvalidTag:
                    raise _ChunkFailed(0) from None
            nonces = self._nonces(first, -(-size // SEALED_CHUNK))
            return (gcm or _gcm).open(self.key, nonces, sealed)
        except _ChunkFailed as failed:
            raise Tampered(f"chunk {first + failed.n} of an encrypted blob fails its tag") from None


def _raw_size(dual: bool) -> int:
    """The bytes of a data key, its nonce prefix and (dual) its outer key."""
    return KEY_BYTES * (2 if dual else 1) + PREFIX_BYTES


def _outer_layer(key: bytes, first: int, data: bytes | memoryview) -> bytes:
    """DSSE-KMS's second layer, over the stored chunks of the first: AWS's "two independent
    layers of AES-256 encryption", the second over the already-encrypted data with a separate
    key (UserGuide/UsingDSSEncryption.html). Here it is AES-256-CTR under a second random key
    of the blob, computed by `cryptography`'s own OpenSSL, where the first layer is the system
    libcrypto's AES-256-GCM: two keys and two implementations.

    The stored bytes are one CTR stream: a stored chunk is 4,097 AES blocks, so the chunk
    `first` starts at counter `first * 4097`, a range reads back from any chunk, and nothing
    is added to the stored size. The key encrypts one blob only, so the counter never repeats
    under it; the inner GCM tags still authenticate every byte, flips of the outer ciphertext
    included."""
    counter = (first * SEALED_CHUNK // 16).to_bytes(16, "big")
    cipher = Cipher(algorithms.AES(key), modes.CTR(counter)).encryptor()
    return cipher.update(data) + cipher.finalize()


# --- wrapping data keys ---------------------------------------------------------------------


WRAP_NONCE = 12


def _wrap(kek: bytes | AESGCM, label: str, secret: bytes, nonce: bytes | None = None) -> str:
    """`kek` as bytes, or as the AESGCM a Keyring keeps prepared for one of its own keys (a
    customer's key is never kept). `nonce`: 12 fresh random bytes, when the caller drew them
    with the secret (Encryption.new_key)."""
    aead = kek if isinstance(kek, AESGCM) else AESGCM(kek)
    if nonce is None:
        nonce = secrets.token_bytes(WRAP_NONCE)
    sealed = aead.encrypt(nonce, secret, label.encode())
    return f"{label}:{binascii.b2a_base64(nonce + sealed, newline=False).decode()}"


def _unwrap(kek: bytes | AESGCM, sealed: str) -> bytes:
    label, _, text = sealed.rpartition(":")
    raw = binascii.a2b_base64(text)
    aead = kek if isinstance(kek, AESGCM) else AESGCM(kek)
    try:
        return aead.decrypt(raw[:12], raw[12:], label.encode())
    except InvalidTag:
        raise WrongKey(label) from None


def seal_secret(kek: bytes, label: str, secret: bytes) -> str:
    """`secret` sealed under `kek` (AES-GCM, `label` authenticated): IAM's secret keys and
    session tokens, under the master key."""
    return _wrap(kek, label, secret)


def open_secret(kek: bytes, sealed: str) -> bytes:
    """What seal_secret sealed; WrongKey if `kek` did not seal it or it was altered."""
    try:
        return _unwrap(kek, sealed)
    except (ValueError, binascii.Error):
        raise WrongKey(label_of(sealed)) from None


def label_of(sealed: str) -> str:
    """`s3/<id>`, `kms/<key id>` or `c`: what wraps a sealed data key."""
    return sealed.rpartition(":")[0]


@dataclass(frozen=True)
class Encryption:
    """How new blobs of an object are encrypted: their data keys are wrapped by `kek` and
    labelled `label` (which names the kek, never holds it)."""

    label: str
    kek: bytes = b""
    # The kek's prepared AESGCM, for the gateway's own keys (Keyring builds these once; a
    # request's Encryption then costs no key set-up).
    aead: AESGCM | None = field(default=None, compare=False, repr=False)
    dual: bool = False  # DSSE-KMS: every new blob gets two layers (DataKey.outer)

    def new_key(self) -> tuple[DataKey, str]:
        """A fresh data key and its sealed form for the manifest (the key, its prefix and the
        wrapping's nonce from one draw of the system's random source)."""
        size = _raw_size(self.dual)
        raw = secrets.token_bytes(size + WRAP_NONCE)
        secret = raw[:size]
        key = DataKey.from_bytes(secret)
        return key, _wrap(self.aead or self.kek, self.label, secret, raw[size:])

    def seal(self, key: DataKey) -> str:
        return _wrap(self.aead or self.kek, self.label, key.to_bytes())

    @property
    def kind(self) -> str:
        return self.label.partition("/")[0]


def open_sealed(sealed: str, kek: bytes | AESGCM) -> DataKey:
    return DataKey.from_bytes(_unwrap(kek, sealed))


def customer(key: bytes) -> Encryption:
    """SSE-C: data keys wrapped by the customer's key, which is never stored."""
    return Encryption(CUSTOMER, key)


def key_fingerprint(key: bytes, salt: bytes | None = None) -> str:
    """`salt ‖ HMAC-SHA256(key, salt)`, base64: recognises a customer key without keeping it."""
    salt = secrets.token_bytes(16) if salt is None else salt
    mac = hmac.new(key, salt, hashlib.sha256).digest()
    return base64.b64encode(salt + mac).decode()


def customer_etag(key: bytes, md5: bytes) -> str:
    """An SSE-C object's or part's ETag: not the MD5 of the data (AWS), yet the same for the
    same bytes under the same key (a part sent twice keeps its ETag, as clients expect), and
    no use to anyone without the key for confirming a guess of the content."""
    return hmac.new(key, b"s3gw etag" + md5, hashlib.sha256).hexdigest()[:32]


def fingerprint_matches(key: bytes, fingerprint: str) -> bool:
    raw = base64.b64decode(fingerprint)
    return hmac.compare_digest(key_fingerprint(key, raw[:16]), fingerprint)


# --- the keyring ----------------------------------------------------------------------------


@dataclass(frozen=True)
class KmsKey:
    id: str
    arn: str
    enabled: bool = True


class UnknownKmsKey(Exception):
    pass


class DisabledKmsKey(Exception):
    pass


AWS_S3_ALIAS = "alias/aws/s3"


# IAM's secret keys in the catalog: sealed under the Keyring's `iam` key (which a rotation of
# the master re-wraps, so they outlive it) with this label; `iam` alone names one sealed
# under the master itself, as before that key existed (Keyring.open_iam_secret).
IAM_SECRET = "iam-key"
# The label of a topic's push-endpoint sealed under the same key (gateway/notify/topics.py): a
# label of its own, so that neither kind of secret can stand in for the other.
TOPIC_SECRET = "topic-endpoint"
# The label of a replication remote's secret key (gateway/replication/remotes.py), likewise.
REMOTE_SECRET = "remote-secret"
_LEGACY_IAM_SECRET = "iam"


class Keyring:
    """The gateway's own keys: the master key (DATA/master.key), and, wrapped by it in
    DATA/keys.json, the SSE-S3 key-encryption keys, the local KMS keys' material and the key
    of IAM's secret keys.

    Rotating the master key re-wraps the few keys of keys.json: no sealed data key in the
    catalog and no blob changes. What is sealed under the master itself (session tokens) is
    refused once a running gateway sees the rotation (`refresh`).
    """

    def __init__(
        self,
        master: bytes,
        s3: Sequence[tuple[str, bytes]],
        kms: Mapping[str, bytes],
        aws_s3: str,
        iam: bytes | None = None,
    ) -> None:
        self.master = master
        self.iam = iam if iam is not None else secrets.token_bytes(KEY_BYTES)
        self.root: Path | None = None  # the data folder, once loaded from one
        self._seen: tuple[int, int] | None = None  # keys.json's (inode, mtime) last read
        self.aws_s3 = aws_s3  # the id of the default KMS key (alias/aws/s3)
        self.s3 = dict(s3)
        self.s3_current = s3[0][0]
        self.kms_material = dict(kms)
        self.kms_keys: dict[str, KmsKey] = {}
        self.aliases: dict[str, str] = {}
        self._prepared: dict[str, Encryption] = {}
        # Data keys under the gateway's own keys, opened lately (see _open_own).
        self._opened: dict[str, DataKey] = {}

    # --- loading ---

    @staticmethod
    def load(root: Path, kms_keys: Sequence[KmsKey] = (), region: str = "us-east-1") -> Keyring:
        """The keyring of a data folder, created on first use; KMS keys declared in
        `kms_keys` get their material on first sight (under a lock: workers start at once)."""
        lock = os.open(root / "keys.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            ring = _read_or_create(root)
            default = KmsKey(ring.aws_s3, _arn(region, ring.aws_s3))
            declared = [default, *kms_keys]
            missing = [k for k in declared if k.id not in ring.kms_material]
            for k in missing:
                ring.kms_material[k.id] = secrets.token_bytes(KEY_BYTES)
            if missing:
                ring.save(root)
        finally:
            os.close(lock)
        for k in declared:
            ring.kms_keys[k.id] = k
            ring.aliases[k.arn] = k.id
        ring.aliases[AWS_S3_ALIAS] = default.id
        ring.aliases[_arn(region, AWS_S3_ALIAS)] = default.id
        ring.root = root
        ring.refresh()  # notes keys.json as read
        return ring

    def save(self, root: Path) -> None:
        """Write keys.json and master.key atomically (tmp, fsync, rename), master last: a
        crash leaves keys.json naming a master fingerprint that one of the two files has."""
        doc = {
            "master": _master_id(self.master),
            "aws_s3": self.aws_s3,
            "s3": [[i, _wrap(self.master, "keyring", k)] for i, k in self.s3.items()],
            "kms": {i: _wrap(self.master, "keyring", k) for i, k in self.kms_material.items()},
            "iam": _wrap(self.master, "keyring", self.iam),
        }
        _write_secret(root / "master.key.new", base64.b64encode(self.master) + b"\n")
        _write_secret(root / "keys.json", json.dumps(doc, indent=1).encode())
        os.replace(root / "master.key.new", root / "master.key")

    def rotate(self, root: Path) -> None:
        """A new master key; keys.json re-wrapped under it (see `rotate_master`)."""
        self.master = secrets.token_bytes(KEY_BYTES)
        self.save(root)

    def refresh(self) -> None:
        """Take up a master key rotated meanwhile (`s3gw keys rotate`, by any node sharing
        the folder): what was sealed under the retired one (session tokens) is refused from
        now on. keys.json is read again only when it changed; the keys it wraps do not change
        with a rotation, so only the master is replaced."""
        if self.root is None:
            return
        try:
            st = os.stat(self.root / "keys.json")
        except OSError:
            return
        seen = (st.st_ino, st.st_mtime_ns)
        if seen == self._seen:
            return
        self._seen = seen
        try:
            wanted = json.loads((self.root / "keys.json").read_bytes())["master"]
            if wanted == _master_id(self.master):
                return
            for candidate in ("master.key", "master.key.new"):
                value = _read_master(self.root / candidate)
                if value is not None and _master_id(value) == wanted:
                    self.master = value
                    return
        except (OSError, ValueError, KeyError):
            self._seen = None  # a rotation half done: read again next time

    def seal_iam_secret(self, secret: bytes) -> str:
        return _wrap(self.iam, IAM_SECRET, secret)

    def open_iam_secret(self, sealed: str) -> bytes:
        """An IAM secret key; one sealed under the master (before the `iam` key) too."""
        legacy = label_of(sealed) == _LEGACY_IAM_SECRET
        return open_secret(self.master if legacy else self.iam, sealed)

    def seal_topic_secret(self, secret: bytes) -> str:
        """A topic's push-endpoint, which may carry a password or a token: under the key of
        IAM's secrets (wrapped by the master, so a rotation leaves it readable)."""
        return _wrap(self.iam, TOPIC_SECRET, secret)

    def open_topic_secret(self, sealed: str) -> bytes:
        return self._open_labelled(TOPIC_SECRET, sealed)

    def seal_remote_secret(self, secret: bytes) -> str:
        """A replication remote's secret key: as a topic's endpoint, with a label of its own."""
        return _wrap(self.iam, REMOTE_SECRET, secret)

    def open_remote_secret(self, sealed: str) -> bytes:
        return self._open_labelled(REMOTE_SECRET, sealed)

    def _open_labelled(self, label: str, sealed: str) -> bytes:
        if label_of(sealed) != label:
            raise WrongKey(label_of(sealed))
        return open_secret(self.iam, sealed)

    def reseal_iam_secret(self, sealed: str) -> str | None:
        """One sealed under the master, sealed under the `iam` key instead (None: it is
        already), so that a rotation of the master leaves it readable."""
        if label_of(sealed) != _LEGACY_IAM_SECRET:
            return None
        return self.seal_iam_secret(self.open_iam_secret(sealed))

    # --- using ---

    def _own(self, label: str, kek: bytes, dual: bool = False) -> Encryption:
        """The Encryption of one of the gateway's own keys, its AESGCM prepared once: the
        key set-up is not paid again by every request (data keys and nonces stay fresh)."""
        name = f"{label} dual" if dual else label
        found = self._prepared.get(name)
        if found is None or found.kek != kek:
            found = self._prepared[name] = Encryption(label, kek, AESGCM(kek), dual)
        return found

    def sse_s3(self) -> Encryption:
        return self._own(f"{S3}/{self.s3_current}", self.s3[self.s3_current])

    def kms_key(self, name: str | None) -> KmsKey:
        """The KMS key a request names by id, ARN or alias (None: the default aws/s3 key)."""
        key_id = self.aliases.get(name or AWS_S3_ALIAS, name)
        key = self.kms_keys.get(key_id or "")
        if key is None:
            raise UnknownKmsKey(name)
        if not key.enabled:
            raise DisabledKmsKey(key.arn)
        return key

    def kms(self, key: KmsKey, dual: bool = False) -> Encryption:
        """SSE-KMS under `key`; `dual`: DSSE-KMS, two layers (the same key wraps both)."""
        return self._own(f"{KMS}/{key.id}", self.kms_material[key.id], dual)

    def opener(self, customer_key: bytes | None = None) -> Callable[[str], DataKey]:
        """What opens the sealed data keys of an object: the gateway's keys, and the
        customer's key for SSE-C objects (WrongKey without it or with another)."""

        def open_key(sealed: str) -> DataKey:
            found = self._opened.get(sealed)
            if found is not None:
                return found
            label = label_of(sealed)
            kind, _, ident = label.partition("/")
            if kind == S3 and ident in self.s3:
                return self._open_own(sealed, label, self.s3[ident])
            if kind == KMS and ident in self.kms_material:
                return self._open_own(sealed, label, self.kms_material[ident])
            if kind == CUSTOMER and customer_key is not None:
                return open_sealed(sealed, customer_key)
            raise WrongKey(label_of(sealed))

        return open_key

    # Opened data keys kept: enough for the objects a busy gateway reads again and again
    # (each entry is a few hundred bytes), and bounded.
    OPENED_MAX = 4096

    def _open_own(self, sealed: str, label: str, kek: bytes) -> DataKey:
        """A data key sealed under one of the gateway's own keys, kept once opened: a small
        object read again costs no unwrap and no key set-up. Keeping it adds nothing to
        what this process holds, since the key that opens it is held here anyway; a key
        sealed under a customer's key is never kept (the customer must bring theirs every
        time). A sealed key always opens to the same data key (no key of keys.json changes
        under its id; a rotation re-wraps them only), so nothing kept goes stale."""
        own = self._own(label, kek)
        key = open_sealed(sealed, own.aead or own.kek)
        opened = self._opened
        if len(opened) >= self.OPENED_MAX:
            del opened[next(iter(opened))]  # the oldest
        opened[sealed] = key
        return key


def rotate_master(root: Path) -> str:
    """`s3gw keys rotate`: a new master key for the data folder at `root`. The key-encryption
    keys and KMS key material are re-wrapped; no sealed data key and no blob changes, so a
    running gateway (which holds the unwrapped keys) carries on. Returns the new key's id."""
    if not (root / "keys.json").exists():
        raise FileNotFoundError(f"{root} holds no keys.json")
    lock = os.open(root / "keys.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ring = _read_or_create(root)
        ring.rotate(root)
        return _master_id(ring.master)
    finally:
        os.close(lock)


def _arn(region: str, key_id: str) -> str:
    """A key's ARN in this gateway's (single, made-up) account."""
    resource = key_id if key_id.startswith("alias/") else f"key/{key_id}"
    return f"arn:aws:kms:{region}:000000000000:{resource}"


def _master_id(master: bytes) -> str:
    return hmac.new(master, b"s3gw master key", hashlib.sha256).hexdigest()[:16]


def _write_secret(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dirfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dirfd)
    finally:
        os.close(dirfd)


def _read_master(path: Path) -> bytes | None:
    try:
        raw = base64.b64decode(path.read_bytes().strip(), validate=True)
    except FileNotFoundError:
        return None
    if len(raw) != KEY_BYTES:
        raise ValueError(f"{path} does not hold a base64 256-bit key")
    return raw


def _read_or_create(root: Path) -> Keyring:
    path = root / "keys.json"
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        s3 = [(secrets.token_hex(4), secrets.token_bytes(KEY_BYTES))]
        ring = Keyring(secrets.token_bytes(KEY_BYTES), s3, {}, str(uuid.uuid4()))
        ring.save(root)
        return ring
    master = None
    for candidate in (root / "master.key", root / "master.key.new"):
        value = _read_master(candidate)
        if value is not None and _master_id(value) == doc["master"]:
            master = value
            if candidate.name.endswith(".new"):  # a rotation that stopped between renames
                os.replace(candidate, root / "master.key")
            break
    if master is None:
        raise ValueError(f"{root / 'master.key'} is not the master key {path} was wrapped with")
    s3 = [(i, _unwrap(master, w)) for i, w in doc["s3"]]
    kms = {i: _unwrap(master, w) for i, w in doc["kms"].items()}
    with contextlib.suppress(FileNotFoundError):
        (root / "master.key.new").unlink()
    iam = _unwrap(master, doc["iam"]) if "iam" in doc else None
    ring = Keyring(master, s3, kms, doc["aws_s3"], iam)
    if iam is None:  # a folder from before the IAM secrets' key: given one (callers lock)
        ring.save(root)
    return ring
