"""crypto.py and the store's encrypted path, on a real data folder: chunks authenticate their
place, ranges decrypt only what they need and read back right, sealed keys open only with
their key, the keyring survives a restart and a master key rotation, and no plaintext reaches
the blob files or the catalog."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.store import ObjectAttrs, crypto, open_store
from gateway.store.crypto import CHUNK, SEALED_CHUNK, DataKey, Keyring
from gateway.store.model import NO_LOCK


def test_chunks_round_trip_and_detect_moves_and_flips() -> None:
    key = DataKey.generate()
    data = os.urandom(3 * CHUNK + 100)
    sealed = key.seal(data, 0)
    assert len(sealed) == crypto.stored_size(len(data))
    assert key.open(sealed, 0) == data
    # Any chunk alone, at its index.
    assert key.open(sealed[SEALED_CHUNK : 2 * SEALED_CHUNK], 1) == data[CHUNK : 2 * CHUNK]
    # The same chunk presented at another index: its nonce differs, the tag fails.
    with pytest.raises(crypto.Tampered):
        key.open(sealed[SEALED_CHUNK : 2 * SEALED_CHUNK], 2)
    # Two chunks swapped.
    swapped = sealed[SEALED_CHUNK : 2 * SEALED_CHUNK] + sealed[:SEALED_CHUNK]
    with pytest.raises(crypto.Tampered):
        key.open(swapped, 0)
    # One bit flipped.
    flipped = bytearray(sealed)
    flipped[10] ^= 1
    with pytest.raises(crypto.Tampered):
        key.open(bytes(flipped), 0)
    # Another blob's key.
    with pytest.raises(crypto.Tampered):
        DataKey.generate().open(sealed, 0)


def test_openssl_and_cryptography_gcm_make_the_same_bytes() -> None:
    """The libcrypto path (crypto.OpenSSLGcm, the one used here) and the `cryptography`
    fallback are the same AES-256-GCM: what one seals the other opens, byte for byte, and both
    refuse a moved, swapped, flipped or cut chunk."""
    assert crypto.gcm_backend() == "openssl"
    openssl, fallback = crypto.OpenSSLGcm(), crypto.CryptographyGcm()
    key = DataKey.generate()
    for size in (0, 1, 4096, CHUNK - 1, CHUNK, CHUNK + 1, 5 * CHUNK + 333):
        data = os.urandom(size)
        sealed = key.seal(data, 7, openssl)
        assert sealed == key.seal(data, 7, fallback)
        assert len(sealed) == crypto.stored_size(size)
        assert key.open(sealed, 7, fallback) == data
        assert key.open(sealed, 7, openssl) == data
        # In place from a memoryview, as staging hands a batch over.
        assert key.seal(memoryview(b"x" + data)[1:], 7, openssl) == sealed
    sealed = key.seal(os.urandom(3 * CHUNK + 10), 0, fallback)
    swapped = sealed[SEALED_CHUNK : 2 * SEALED_CHUNK] + sealed[:SEALED_CHUNK]
    flipped = bytearray(sealed)
    flipped[-1] ^= 1
    for gcm in (openssl, fallback):
        for bad, first in (
            (sealed[SEALED_CHUNK : 2 * SEALED_CHUNK], 2),
            (swapped, 0),
            (bytes(flipped), 0),
            (sealed[:-20], 0),
            (sealed[: 3 * SEALED_CHUNK + 5], 0),
        ):
            with pytest.raises(crypto.Tampered):
                key.open(bad, first, gcm)
        with pytest.raises(crypto.Tampered):
            DataKey.generate().open(sealed, 0, gcm)
    # The chunk named in the error is the one that failed.
    with pytest.raises(crypto.Tampered, match="chunk 3 "):
        key.open(bytes(flipped), 0, openssl)


def test_one_chunk_bodies_take_one_call_and_keep_the_format() -> None:
    """A body of one chunk (a small object, sealed and opened on the event loop) goes through
    one `cryptography` call rather than libcrypto's six: the stored bytes are the ones
    libcrypto makes (objects written before open, and these open there), and a flipped,
    moved, cut or foreign chunk still fails."""
    openssl, fallback = crypto.OpenSSLGcm(), crypto.CryptographyGcm()
    for key in (DataKey.generate(), DataKey.generate(dual=True)):
        for size in (1, 4096, CHUNK - 1, CHUNK):
            data = os.urandom(size)
            sealed = key.seal(data, 3)
            assert sealed == key.seal(data, 3, openssl) == key.seal(data, 3, fallback)
            assert key.seal(memoryview(b"x" + data)[1:], 3) == sealed
            assert key.open(sealed, 3) == data
            assert key.open(sealed, 3, openssl) == data
            flipped = bytearray(sealed)
            flipped[size // 2] ^= 1
            for bad, first in ((bytes(flipped), 3), (sealed, 4), (sealed[: crypto.TAG - 1], 3)):
                with pytest.raises(crypto.Tampered, match=f"chunk {first} "):
                    key.open(bad, first)
            with pytest.raises(crypto.Tampered):
                DataKey.generate(dual=bool(key.outer)).open(sealed, 3)


def test_keyring_keeps_its_own_opened_keys_and_never_a_customers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A data key sealed under the gateway's own keys is unwrapped once and kept (a small
    object read again costs no unwrap), up to a bound; one sealed under a customer's key is
    unwrapped every time and never opens without that key."""
    unwraps: list[str] = []
    unwrap = crypto._unwrap

    def counted(kek: object, sealed: str) -> bytes:
        unwraps.append(sealed)
        return unwrap(kek, sealed)  # type: ignore[arg-type]

    monkeypatch.setattr(crypto, "_unwrap", counted)
    ring = Keyring.load(tmp_path)
    key, sealed = ring.sse_s3().new_key()
    kms_key, kms_sealed = ring.kms(ring.kms_key(None)).new_key()
    for _ in range(3):
        assert ring.opener()(sealed) == key
        assert ring.opener()(kms_sealed) == kms_key
    assert unwraps == [sealed, kms_sealed]

    customer = os.urandom(32)
    c_key, c_sealed = crypto.customer(customer).new_key()
    unwraps.clear()
    assert ring.opener(customer)(c_sealed) == c_key
    assert ring.opener(customer)(c_sealed) == c_key
    assert unwraps == [c_sealed, c_sealed]
    with pytest.raises(crypto.WrongKey):
        ring.opener()(c_sealed)

    # Bounded: past OPENED_MAX the oldest goes (and is unwrapped again when next read).
    ring.OPENED_MAX = 3
    fresh = [ring.sse_s3().new_key() for _ in range(4)]
    unwraps.clear()
    for k, s in fresh:
        assert ring.opener()(s) == k
    assert len(ring._opened) == 3
    assert ring.opener()(fresh[-1][1]) == fresh[-1][0]
    assert ring.opener()(fresh[0][1]) == fresh[0][0]
    assert unwraps == [s for _, s in fresh] + [fresh[0][1]]


def test_dual_layer_keys_encrypt_twice_and_still_detect_tampering(tmp_path: Path) -> None:
    """DSSE-KMS: a second, independent key encrypts the first layer's stored chunks again
    (AES-256-CTR over them as one stream, no bytes added); chunks still open from any index,
    a flipped bit still fails, and the sealed form carries both keys."""
    key = DataKey.generate(dual=True)
    assert len(key.outer) == crypto.KEY_BYTES and key.outer != key.key
    inner = DataKey(key.key, key.prefix)
    data = os.urandom(3 * CHUNK + 77)
    stored = key.seal(data, 0)
    one_layer = inner.seal(data, 0)
    assert len(stored) == len(one_layer) == crypto.stored_size(len(data))
    assert stored != one_layer
    assert crypto._outer_layer(key.outer, 0, stored) == one_layer
    assert key.open(stored, 0) == data
    assert key.open(stored[2 * SEALED_CHUNK :], 2) == data[2 * CHUNK :]
    assert key.seal(data[CHUNK:], 1) == stored[SEALED_CHUNK:]
    with pytest.raises(crypto.Tampered):
        inner.open(stored, 0)
    flipped = bytearray(stored)
    flipped[SEALED_CHUNK + 5] ^= 1
    with pytest.raises(crypto.Tampered):
        key.open(bytes(flipped), 0)
    ring = Keyring.load(tmp_path)
    dsse = ring.kms(ring.kms_key(None), dual=True)
    new, sealed = dsse.new_key()
    assert new.outer and ring.opener()(sealed) == new
    assert not ring.kms(ring.kms_key(None)).new_key()[0].outer


def test_sealed_keys_open_only_with_their_key(tmp_path: Path) -> None:
    ring = Keyring.load(tmp_path)
    customer = os.urandom(32)
    key, sealed = crypto.customer(customer).new_key()
    assert ring.opener(customer)(sealed) == key
    with pytest.raises(crypto.WrongKey):
        ring.opener(os.urandom(32))(sealed)
    with pytest.raises(crypto.WrongKey):
        ring.opener()(sealed)
    s3_key, s3_sealed = ring.sse_s3().new_key()
    assert ring.opener()(s3_sealed) == s3_key
    # The label is authenticated: a sealed key relabelled as another kind does not open.
    forged = "c:" + s3_sealed.partition(":")[2]
    with pytest.raises(crypto.WrongKey):
        ring.opener(ring.s3[ring.s3_current])(forged)


def test_keyring_persists_rotates_and_keeps_its_files_private(tmp_path: Path) -> None:
    declared = [crypto.KmsKey("testkey-1", "arn:aws:kms:us-east-1:000000000000:key/testkey-1")]
    ring = Keyring.load(tmp_path, declared)
    key, sealed = ring.sse_s3().new_key()
    kms_key, kms_sealed = ring.kms(ring.kms_key("testkey-1")).new_key()
    for name in ("keys.json", "master.key"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
    old_master = (tmp_path / "master.key").read_bytes()
    ring.rotate(tmp_path)
    assert (tmp_path / "master.key").read_bytes() != old_master
    again = Keyring.load(tmp_path, declared)
    # Data keys sealed before the rotation still open: only keys.json was re-wrapped.
    assert again.opener()(sealed) == key
    assert again.opener()(kms_sealed) == kms_key
    assert again.kms_key(None).id == ring.aws_s3
    assert again.kms_key(crypto.AWS_S3_ALIAS).id == ring.aws_s3
    with pytest.raises(crypto.UnknownKmsKey):
        again.kms_key("nope")


async def _chunks(data: bytes, piece: int = 300_000) -> AsyncIterator[bytes]:
    for at in range(0, len(data), piece):
        yield data[at : at + piece]


MARKER = b"PLAINTEXT-MARKER-0123456789"


def test_store_writes_only_ciphertext_and_reads_ranges(tmp_path: Path) -> None:
    big = (MARKER + os.urandom(1000)) * 3000  # about 3 MiB: several batches, several chunks
    small = MARKER * 10

    async def run() -> None:
        store = open_store(tmp_path)
        store.keys = Keyring.load(tmp_path)
        try:
            await store.start()
            await store.create_bucket("b", "owner", "us-east-1")
            enc = store.keys.sse_s3()
            for name, data in (("big", big), ("small", small)):
                blob = await store.stage(_chunks(data), encryption=enc)
                assert blob.key is not None
                obj = await store.put_object("b", name, blob, ObjectAttrs(), lock=NO_LOCK)
                assert obj.etag == hashlib.md5(data).hexdigest()
                reader = await store.open_object("b", name)
                try:
                    ranges = ((0, len(data)), (1, 1), (CHUNK - 3, 7), (len(data) - 5, 5))
                    for start, length in ranges:
                        got = b"".join([p async for p in reader.chunks(start, length)])
                        assert got == data[start : start + length]
                    assert reader.inline_bytes(0, len(data)) in (None, data)
                finally:
                    reader.close()
        finally:
            store.close()

    asyncio.run(run())
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert MARKER not in path.read_bytes(), path
