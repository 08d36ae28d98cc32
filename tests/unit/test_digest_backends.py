"""The MD5 backends: identical digests, balanced references, thread safety, FIPS-mode hosts.

The openssl backend binds the system libcrypto through ctypes; hashlib is checked against it
and both against independent known answers.
"""

from __future__ import annotations

import array
import gc
import hashlib
import itertools
import json
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway import digest

MIB = 1 << 20
ROOT = Path(__file__).resolve().parents[2]
# RFC 1321, appendix A.5.
KNOWN = {
    b"": "d41d8cd98f00b204e9800998ecf8427e",
    b"a": "0cc175b9c0f1b6a831c399e269772661",
    b"abc": "900150983cd24fb0d6963f7d28e17f72",
    b"message digest": "f96b697d7cb7938d525a2f31aaf161d0",
    b"12345678901234567890123456789012345678901234567890123456789012345678901234567890": (
        "57edf4a22be3c955ac49da2e2107b67a"
    ),
}
# Around MD5's 64-byte block, hashlib's 2 KiB GIL threshold, 64 KiB reads and 1 MiB batches.
SIZES = [0, 1, 55, 56, 63, 64, 65, 127, 128, 2047, 2048, 2049, 4096, 65535, 65536, 65537]
SIZES += [MIB - 1, MIB, MIB + 1, 3 * MIB + 17]


def reference(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


@pytest.fixture(autouse=True)
def default_backend() -> Iterator[None]:
    """Tests that select a backend leave the process on the default one."""
    yield
    digest.configure("hashlib")


@pytest.fixture(params=digest.BACKENDS)
def new(request: pytest.FixtureRequest) -> Callable[[], digest.Digest]:
    """A new-digest function for each backend, as configure() installs it."""
    digest.configure(request.param)
    assert digest.backend() == request.param
    return digest.md5


def openssl_refs() -> int:
    return digest.libcrypto().references


# --- selecting a backend --------------------------------------------------------------------


def test_configure_selects_the_backend() -> None:
    line = digest.configure("openssl")
    assert isinstance(digest.md5(), digest.OpenSSLMD5)
    assert digest.libcrypto().version in line and "fips=no" in line
    line = digest.configure("hashlib")
    assert type(digest.md5()) is type(hashlib.md5(usedforsecurity=False))
    assert "WARNING" not in line and ssl.OPENSSL_VERSION in line
    with pytest.raises(ValueError, match="unknown MD5 backend"):
        digest.configure("md5sum")
    assert digest.backend() == "hashlib"


def test_hashlib_is_openssl_backed_here() -> None:
    # What configure() checks at start; the warning below is for hosts where this fails.
    assert type(hashlib.md5(usedforsecurity=False)).__module__ == "_hashlib"


def test_builtin_fallback_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = pytest.importorskip("_md5")
    monkeypatch.setattr(digest.hashlib, "md5", lambda **_: builtin.md5())
    line = digest.configure("hashlib")
    assert "WARNING" in line and "builtin MD5 (_md5)" in line
    assert digest.md5_of(b"abc").hexdigest() == KNOWN[b"abc"]


def test_one_fetch_per_process() -> None:
    lib = digest.libcrypto()
    digest.configure("openssl")
    digest.configure("openssl")
    assert digest.libcrypto() is lib
    # Every digest takes a reference on that one EVP_MD.
    a, b = digest.md5(), digest.md5()
    assert openssl_refs() >= 2
    a.digest(), b.digest()


def test_libcrypto_errors_become_exceptions() -> None:
    lib = digest.libcrypto()
    assert not lib.held.EVP_MD_fetch(None, b"NO-SUCH-DIGEST", None)
    error = lib.error("EVP_MD_fetch")
    assert isinstance(error, digest.DigestError)
    assert "EVP_MD_fetch failed" in str(error) and "unsupported" in str(error)
    assert lib.errors() == "no error queued"  # the queue was drained


# --- identical digests ----------------------------------------------------------------------


@pytest.mark.parametrize(("data", "md5"), KNOWN.items())
def test_known_answers(new: Callable[[], digest.Digest], data: bytes, md5: str) -> None:
    d = new()
    d.update(data)
    assert d.hexdigest() == md5
    assert d.digest() == bytes.fromhex(md5)


@pytest.mark.parametrize("size", SIZES)
def test_sizes_around_boundaries(new: Callable[[], digest.Digest], size: int) -> None:
    data = os.urandom(size)
    expected = reference(data)
    one = new()
    one.update(data)
    assert one.hexdigest() == expected
    # The same bytes as bytearray, memoryview, a view at an offset, and in pieces.
    for buffer in (bytearray(data), memoryview(data), memoryview(b"xyz" + data)[3:]):
        d = new()
        d.update(buffer)
        assert d.hexdigest() == expected
    d = new()
    for start in range(0, size, 4093):
        d.update(memoryview(data)[start : start + 4093])
    assert d.hexdigest() == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=20_000), st.lists(st.integers(0, 20_000), max_size=12))
def test_many_updates_equal_one(data: bytes, cuts: list[int]) -> None:
    expected = reference(data)
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    for new in (digest._hashlib_md5, digest.libcrypto().new_md5):
        whole = new()
        whole.update(data)
        pieces = new()
        for lo, hi in itertools.pairwise(bounds):
            pieces.update(data[lo:hi])
        assert whole.hexdigest() == pieces.hexdigest() == expected


def test_other_buffers_and_bad_input(new: Callable[[], digest.Digest]) -> None:
    numbers = array.array("I", range(1000))
    d = new()
    d.update(numbers)
    assert d.hexdigest() == reference(numbers.tobytes())
    with pytest.raises(TypeError):
        new().update("text")  # type: ignore[arg-type]
    with pytest.raises(BufferError):
        new().update(memoryview(b"abcdef")[::2])


def test_finished_digest_is_cached_and_final() -> None:
    d = digest.libcrypto().new_md5()
    d.update(b"abc")
    first = d.digest()
    assert d.digest() is first
    assert d.hexdigest() == KNOWN[b"abc"]
    with pytest.raises(ValueError, match="finished"):
        d.update(b"more")
    assert d.hexdigest() == KNOWN[b"abc"]


def test_ETag_rules_on_both_backends(new: Callable[[], digest.Digest]) -> None:
    parts = [b"a" * 5 * MIB, b"tail"]
    md5s = [hashlib.md5(p).digest() for p in parts]
    assert digest.md5_of(parts[1]).hexdigest() == reference(parts[1])
    assert digest.multipart_etag(md5s) == f"{reference(b''.join(md5s))}-2"


# --- references --------------------------------------------------------------------------------


def test_references_balanced_when_finished_dropped_or_failed() -> None:
    lib = digest.libcrypto()
    gc.collect()
    base = lib.references
    held = [lib.new_md5() for _ in range(1000)]
    assert lib.references == base + 1000
    for d in held[:500]:
        d.update(b"x")
        d.digest()
    assert lib.references == base + 500
    # Dropped unfinished (a request that failed half-way), one in a reference cycle.
    cycle: list[object] = [lib.new_md5()]
    cycle.append(cycle)
    with pytest.raises(TypeError):
        held[600].update("not bytes")  # type: ignore[arg-type]
    del held, cycle
    gc.collect()
    assert lib.references == base


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_a_million_digests_leak_nothing() -> None:
    lib = digest.libcrypto()
    new, data = lib.new_md5, b"0123456789abcdef" * 4
    expected = bytes.fromhex(reference(data))

    def run(n: int) -> None:
        for i in range(n):
            d = new()
            d.update(data)
            if i % 10:  # and one in ten dropped unfinished, freed by its finalizer
                assert d.digest() == expected

    run(20_000)  # the allocator's steady state
    gc.collect()
    base, rss = lib.references, _rss_kib()
    run(1_000_000)
    gc.collect()
    assert lib.references == base
    # A leaked EVP_MD_CTX (with its MD5 state) per digest would be well over 100 MiB here.
    assert _rss_kib() - rss < 16 * 1024


# --- threads -----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", digest.BACKENDS)
def test_32_threads_of_10000_digests(backend: str) -> None:
    digest.configure(backend)
    payloads = [os.urandom(n) for n in range(1, 129, 2)]
    expected = [bytes.fromhex(reference(p)) for p in payloads]
    gc.collect()
    base = openssl_refs()
    start = threading.Barrier(32)
    wrong = [0] * 32

    def worker(t: int) -> None:
        start.wait()
        md5 = digest.md5
        for i in range(10_000):
            k = (t * 7 + i) % len(payloads)
            d = md5()
            d.update(payloads[k])
            if d.digest() != expected[k]:
                wrong[t] += 1

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not [t for t in threads if t.is_alive()]
    assert wrong == [0] * 32
    gc.collect()
    assert openssl_refs() == base


def test_large_updates_in_parallel_threads(new: Callable[[], digest.Digest]) -> None:
    blocks = [os.urandom(MIB) for _ in range(4)]
    results: dict[int, str] = {}

    def worker(t: int) -> None:
        d = new()
        for i in range(8):
            d.update(blocks[(t + i) % 4])
        results[t] = d.hexdigest()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not [t for t in threads if t.is_alive()]
    for t in range(4):
        assert results[t] == reference(b"".join(blocks[(t + i) % 4] for i in range(8)))


def _others_ran_during(update: Callable[[bytes], object], block: bytes) -> int:
    """How many times this thread advanced a counter while another thread ran `update(block)`
    once. The switch interval is made a whole second (the update takes a small part of one):
    an update that holds the GIL cannot then be interrupted, so the counter stands still; one
    that releases it lets this thread run at once."""
    counter = [0]
    advanced: list[int] = []
    done = threading.Event()

    def hash_it() -> None:
        before = counter[0]
        update(block)
        advanced.append(counter[0] - before)
        done.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        worker = threading.Thread(target=hash_it)
        worker.start()
        while not done.is_set():
            counter[0] += 1
        worker.join(timeout=60)
    finally:
        sys.setswitchinterval(interval)
    return advanced[0]


def test_large_updates_release_the_gil(new: Callable[[], digest.Digest]) -> None:
    # A pool thread hashing a 1 MiB batch must let the event loop's thread run meanwhile.
    assert _others_ran_during(new().update, os.urandom(MIB) * 8) > 0


def test_the_gil_measure_sees_a_holder() -> None:
    # The control: bytes.count scans in C holding the GIL, and the counter stands still.
    block = os.urandom(MIB) * 8
    assert _others_ran_during(lambda b: b.count(b"\x00\x01\x02\x03"), block) == 0


# --- FIPS-mode hosts and hosts without MD5 -----------------------------------------------------

PROBE = """
import ctypes, hashlib, json
from gateway import digest
out = {"hashlib_module": type(hashlib.md5(usedforsecurity=False)).__module__}
try:
    out["plain_hashlib"] = hashlib.md5(b"abc").hexdigest()
except Exception as exc:
    out["plain_hashlib"] = type(exc).__name__
for backend in digest.BACKENDS:
    try:
        line = digest.configure(backend)
        etag = digest.md5_of(b"abc").hexdigest()
        parts = digest.multipart_etag([digest.md5_of(b"a").digest(), digest.md5_of(b"b").digest()])
        out[backend] = {"line": line, "etag": etag, "multipart": parts}
    except Exception as exc:
        out[backend] = {"error": f"{type(exc).__name__}: {exc}"}
# Is the configuration in force? Under default_properties = fips=yes, a fetch without
# properties finds no MD5 (no FIPS provider offers one).
fetch = ctypes.CDLL(digest.loaded_libcrypto()).EVP_MD_fetch
fetch.restype, fetch.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
out["default_query_finds_md5"] = bool(fetch(None, b"MD5", None))
print(json.dumps(out))
"""


def _probe(tmp_path: Path, config: str) -> dict[str, object]:
    conf = tmp_path / "openssl.cnf"
    conf.write_text(config)
    env = {**os.environ, "OPENSSL_CONF": str(conf), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


MULTIPART_AB = hashlib.md5(hashlib.md5(b"a").digest() + hashlib.md5(b"b").digest()).hexdigest()


def test_fips_default_properties(tmp_path: Path) -> None:
    out = _probe(
        tmp_path,
        "openssl_conf = openssl_init\n"
        "[openssl_init]\nalg_section = evp_properties\n"
        "[evp_properties]\ndefault_properties = fips=yes\n",
    )
    assert out["default_query_finds_md5"] is False  # the FIPS-mode configuration is in force
    for backend in digest.BACKENDS:
        assert out[backend] == {
            "line": out[backend]["line"],  # type: ignore[index]
            "etag": KNOWN[b"abc"],
            "multipart": f"{MULTIPART_AB}-2",
        }
    if out["hashlib_module"] == "_hashlib":
        # The difference the non-FIPS query makes: hashlib without usedforsecurity=False has
        # no MD5 on such a host.
        assert out["plain_hashlib"] == "UnsupportedDigestmodError"


def test_host_without_md5(tmp_path: Path) -> None:
    # Only the base provider: OpenSSL offers no MD5 at all. hashlib falls back to its builtin
    # MD5 (and says so); the openssl backend refuses to start, with the reason.
    out = _probe(
        tmp_path,
        "openssl_conf = openssl_init\n"
        "[openssl_init]\nproviders = provider_sect\n"
        "[provider_sect]\nbase = base_sect\n[base_sect]\nactivate = 1\n",
    )
    assert out["default_query_finds_md5"] is False
    assert out["hashlib_module"] != "_hashlib"
    assert "WARNING" in out["hashlib"]["line"]  # type: ignore[index]
    assert out["hashlib"]["etag"] == KNOWN[b"abc"]  # type: ignore[index]
    error = out["openssl"]["error"]  # type: ignore[index]
    assert error.startswith("DigestError: the openssl MD5 backend cannot start")
    assert 'EVP_MD_fetch(NULL, "MD5", "fips=no")' in error and "unsupported" in error
