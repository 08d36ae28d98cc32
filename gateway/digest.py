"""MD5 and ETags: the one place that computes them.

MD5 here is an integrity checksum (S3's ETag), not security. It must work on a FIPS-mode host,
so it is always asked for with the non-FIPS property query: `usedforsecurity=False` in hashlib,
`"fips=no"` in the openssl backend. On OpenSSL 3, fetching the algorithm (`EVP_MD_fetch`) takes
the provider store's lock; both backends fetch MD5 once per process and give every digest its
own reference (`EVP_MD_up_ref`), released when the digest is done (Ceph PR 71062's fix).

Two backends, chosen once at start by `configure()` (`--md5-backend`, `S3GW_MD5_BACKEND`):

- `hashlib` (default): `hashlib.md5(usedforsecurity=False)`. CPython's `_hashlib` already caches
  the fetched MD5 per process and up-refs it per object (`py_digest_by_name` in
  Modules/_hashopenssl.c, a separate cached fetch with the `-fips` query for
  `usedforsecurity=False`), and releases the GIL for updates of 2 KiB or more.
- `openssl`: libcrypto through ctypes, doing exactly what the Ceph fix does, explicitly. It costs
  a few microseconds more per object in Python call overhead (docs/md5.md has the numbers), so it
  is the reference implementation of the technique rather than the fast path.

A digest is finished by its first `digest()`/`hexdigest()` (the openssl backend frees its
context then; later calls return the cached result). Do not `update()` after that.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import hashlib
import os
import re
import ssl
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from types import SimpleNamespace
from typing import Protocol


class Digest(Protocol):
    def update(self, data: bytes | bytearray | memoryview, /) -> None: ...
    def digest(self) -> bytes: ...
    def hexdigest(self) -> str: ...


class DigestError(RuntimeError):
    """libcrypto reported an error (its error queue is in the message), or an MD5 backend
    cannot work on this host."""


BACKENDS = ("hashlib", "openssl")
# A known answer checked when a backend is selected (RFC 1321, appendix A.5).
_KNOWN = (b"abc", "900150983cd24fb0d6963f7d28e17f72")


def _hashlib_md5() -> Digest:
    return hashlib.md5(usedforsecurity=False)


_new: Callable[[], Digest] = _hashlib_md5
_backend = "hashlib"
_configure_lock = threading.Lock()


def md5() -> Digest:
    """A new MD5 digest from the configured backend."""
    return _new()


def md5_of(data: bytes | bytearray | memoryview) -> Digest:
    d = md5()
    d.update(data)
    return d


def backend() -> str:
    """The name of the backend `md5()` uses."""
    return _backend


def configure(backend: str) -> str:
    """Select the MD5 backend for this process (before the first request); returns a line
    describing it for the start-up log. Raises DigestError when the backend cannot work here:
    the gateway should not start with an ETag it cannot compute."""
    global _new, _backend
    with _configure_lock:
        if backend == "hashlib":
            new, line = _hashlib_md5, _describe_hashlib()
        elif backend == "openssl":
            lib = libcrypto()
            new, line = lib.new_md5, lib.describe()
        else:
            raise ValueError(f"unknown MD5 backend {backend!r} (choose from {', '.join(BACKENDS)})")
        d = new()
        d.update(_KNOWN[0])
        if d.hexdigest() != _KNOWN[1]:
            raise DigestError(f"the {backend} MD5 backend computes wrong digests on this host")
        _new, _backend = new, backend
    return line


def loaded_libcrypto() -> str | None:
    """The path of the libcrypto this process has mapped (Linux), or None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                path = fields[5].strip() if len(fields) == 6 else ""
                if os.path.basename(path).startswith("libcrypto.so"):
                    return path
    except OSError:
        pass
    return None


def _describe_hashlib() -> str:
    # The probe uses usedforsecurity=False like every digest: a plain hashlib.md5() raises on a
    # host whose OpenSSL is configured with `default_properties = fips=yes`.
    module = type(hashlib.md5(usedforsecurity=False)).__module__
    if module != "_hashlib":
        return (
            f"MD5 backend: hashlib; WARNING: hashlib fell back to its builtin MD5 ({module}) "
            "because OpenSSL offers none: ETags stay correct, but hashing is slower and holds "
            "the GIL (other requests wait while a large body is hashed)"
        )
    return (
        f"MD5 backend: hashlib on {ssl.OPENSSL_VERSION} ({loaded_libcrypto() or 'libcrypto'}); "
        "MD5 fetched once per process by _hashlib, non-FIPS property query"
    )


# --- the openssl backend ------------------------------------------------------------------------


class _PyBuffer(ctypes.Structure):
    """CPython's Py_buffer (part of the stable ABI since 3.11)."""

    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


# ctypes.pythonapi keeps the GIL and raises the Python error these set.
_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None
_PyBUF_SIMPLE = 0


@contextlib.contextmanager
def pinned(data: bytes | bytearray | memoryview) -> Iterator[tuple[int, int]]:
    """The address and length of a buffer, for a libcrypto call that works on it in place
    without the GIL: the export keeps a bytearray from being resized meanwhile."""
    view = _PyBuffer()
    _get_buffer(data, view, _PyBUF_SIMPLE)
    try:
        yield view.buf, view.len
    finally:
        _release_buffer(view)


_c_void_p, _c_char_p, _c_int, _c_size_t = (
    ctypes.c_void_p,
    ctypes.c_char_p,
    ctypes.c_int,
    ctypes.c_size_t,
)
# name -> (restype, argtypes): the libcrypto functions used here and by `python -m bench digest`.
_PROTOTYPES: dict[str, tuple[type | None, list[type]]] = {
    "OpenSSL_version": (_c_char_p, [_c_int]),
    "EVP_MD_fetch": (_c_void_p, [_c_void_p, _c_char_p, _c_char_p]),
    "EVP_MD_up_ref": (_c_int, [_c_void_p]),
    "EVP_MD_free": (None, [_c_void_p]),
    "EVP_md5": (_c_void_p, []),
    "EVP_MD_CTX_new": (_c_void_p, []),
    "EVP_MD_CTX_free": (None, [_c_void_p]),
    "EVP_DigestInit_ex": (_c_int, [_c_void_p, _c_void_p, _c_void_p]),
    "EVP_DigestUpdate": (_c_int, [_c_void_p, _c_char_p, _c_size_t]),
    "EVP_DigestFinal_ex": (_c_int, [_c_void_p, _c_char_p, _c_void_p]),
    "ERR_get_error": (ctypes.c_ulong, []),
    "ERR_error_string_n": (None, [ctypes.c_ulong, _c_char_p, _c_size_t]),
    "ERR_clear_error": (None, []),
}


# Updates of at least this many bytes release the GIL, smaller ones and the other calls (each
# well under a microsecond) keep it, as hashlib does (the threshold is CPython's
# HASHLIB_GIL_MINSIZE). Releasing it around every call would make the event loop's thread hand
# the GIL to pool threads several times per small digest, and measured up to twice as slow per
# object with small payloads and several threads (docs/md5.md).
GIL_MINSIZE = 2048


def bind(
    loader: type[ctypes.CDLL],
    path: str,
    prototypes: dict[str, tuple[type | None, list[type]]],
    user: str,
) -> SimpleNamespace:
    """libcrypto's functions with their prototypes, called through `loader`: ctypes.CDLL
    releases the GIL around each call, ctypes.PyDLL keeps it. `user` names what needs them,
    for the error (DigestError) when the library or a function is missing."""
    try:
        lib = loader(path)
    except OSError as exc:
        raise DigestError(f"{user} cannot load {path}: {exc}") from exc
    calls = SimpleNamespace()
    for name, (restype, argtypes) in prototypes.items():
        try:
            fn = lib[name]
        except AttributeError:
            raise DigestError(f"{path} has no {name}: {user} needs OpenSSL 3") from None
        fn.restype, fn.argtypes = restype, argtypes
        setattr(calls, name, fn)
    return calls


def _bind(loader: type[ctypes.CDLL], path: str) -> SimpleNamespace:
    calls = bind(loader, path, _PROTOTYPES, "the openssl MD5 backend")
    lib = loader(path)
    # EVP_DigestUpdate again, taking an address: bytearray, memoryview and other buffers are
    # hashed in place (bytes go through the c_char_p prototype, also without a copy).
    fn = lib["EVP_DigestUpdate"]
    fn.restype, fn.argtypes = _c_int, [_c_void_p, _c_void_p, _c_size_t]
    calls.EVP_DigestUpdate_at = fn
    return calls


class LibCrypto:
    """The system libcrypto through ctypes, and the MD5 it fetched once for this process.

    `released` has the functions as ctypes.CDLL calls them (the GIL released around each call),
    `held` as ctypes.PyDLL does (the GIL kept). Digests use `held`, except for updates of
    GIL_MINSIZE bytes or more, so pool threads hash large batches in parallel. Every digest
    takes its own reference on the shared EVP_MD (`EVP_MD_up_ref`) and gives it back
    (`EVP_MD_free`) when it finishes or is dropped; `references` counts the ones held, so that a
    leak shows (libcrypto exposes no reference count of its own).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.released = _bind(ctypes.CDLL, path)
        self.held = held = _bind(ctypes.PyDLL, path)
        self.version: str = held.OpenSSL_version(0).decode()
        held.ERR_clear_error()
        # The one fetch per process, before any request. It is never freed: digests may
        # outlive any owner.
        md = held.EVP_MD_fetch(None, b"MD5", b"fips=no")
        if not md:
            raise DigestError(
                f'the openssl MD5 backend cannot start: EVP_MD_fetch(NULL, "MD5", "fips=no") '
                f"found no MD5 in {self.version} ({path}): {self.errors()}. Is the default "
                "provider loaded (see OPENSSL_CONF)? --md5-backend hashlib may still work."
            )
        self.md: int = md
        # One entry per reference held. A deque's append and pop are atomic: counting takes no
        # lock, which under many threads would convoy on the GIL.
        self._refs: deque[None] = deque()

    @property
    def references(self) -> int:
        """EVP_MD_up_ref calls minus EVP_MD_free calls made for digests: the references the
        live digests hold (0 when none is alive, whatever the process's own reference)."""
        return len(self._refs)

    def errors(self) -> str:
        """Drain this thread's libcrypto error queue into one line."""
        lines = []
        buf = ctypes.create_string_buffer(256)
        while code := self.held.ERR_get_error():
            self.held.ERR_error_string_n(code, buf, len(buf))
            lines.append(buf.value.decode(errors="replace"))
        return "; ".join(lines) or "no error queued"

    def error(self, call: str) -> DigestError:
        return DigestError(f"{call} failed: {self.errors()}")

    def describe(self) -> str:
        return (
            f"MD5 backend: openssl on {self.version} ({self.path}); MD5 fetched once per "
            'process (EVP_MD_fetch "fips=no"), EVP_MD_up_ref per digest'
        )

    def new_md5(self) -> OpenSSLMD5:
        return OpenSSLMD5(self)

    def up_ref(self) -> int:
        """A new reference on the process's MD5, for one digest."""
        if not self.held.EVP_MD_up_ref(self.md):
            raise self.error("EVP_MD_up_ref")
        self._refs.append(None)
        return self.md

    def release(self, ctx: int, md: int) -> None:
        """Free a digest's context and give back its reference (once per digest)."""
        self.held.EVP_MD_CTX_free(ctx)
        self.held.EVP_MD_free(md)
        self._refs.pop()


class OpenSSLMD5:
    """One MD5 computation on libcrypto: a context of its own and a reference on the process's
    fetched MD5, both released at the first digest() or when the object is collected."""

    __slots__ = ("__weakref__", "_ctx", "_done", "_lib", "_result")

    def __init__(self, lib: LibCrypto) -> None:
        self._lib = lib
        self._ctx: int | None = None
        self._result: bytes | None = None
        held = lib.held
        ctx = held.EVP_MD_CTX_new()
        if not ctx:
            raise MemoryError("EVP_MD_CTX_new failed")
        try:
            md = lib.up_ref()
        except BaseException:
            held.EVP_MD_CTX_free(ctx)
            raise
        # Runs once: at the first digest(), or when the digest is dropped unfinished (a request
        # that failed half-way), so the reference is given back either way.
        self._done = weakref.finalize(self, lib.release, ctx, md)
        if not held.EVP_DigestInit_ex(ctx, md, None):
            error = lib.error("EVP_DigestInit_ex")
            self._done()
            raise error
        self._ctx = ctx

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        ctx = self._ctx
        if ctx is None:
            raise ValueError("update() on a finished MD5 (digest() was called)")
        lib = self._lib
        if type(data) is bytes:
            size = len(data)
            calls = lib.released if size >= GIL_MINSIZE else lib.held
            ok = calls.EVP_DigestUpdate(ctx, data, size)
        else:
            # In place, whatever the buffer: the export also keeps a bytearray from being
            # resized while libcrypto reads it without the GIL.
            view = _PyBuffer()
            _get_buffer(data, view, _PyBUF_SIMPLE)
            try:
                calls = lib.released if view.len >= GIL_MINSIZE else lib.held
                ok = calls.EVP_DigestUpdate_at(ctx, view.buf, view.len)
            finally:
                _release_buffer(view)
        if not ok:
            raise lib.error("EVP_DigestUpdate")

    def digest(self) -> bytes:
        if self._result is None:
            ctx = self._ctx
            if ctx is None:
                raise ValueError("MD5 digest failed earlier")
            self._ctx = None
            out = ctypes.create_string_buffer(16)
            ok = self._lib.held.EVP_DigestFinal_ex(ctx, out, None)
            error = None if ok else self._lib.error("EVP_DigestFinal_ex")
            self._done()
            if error is not None:
                raise error
            self._result = out.raw
        return self._result

    def hexdigest(self) -> str:
        return self.digest().hex()


_libcrypto: LibCrypto | None = None
_libcrypto_lock = threading.Lock()


def libcrypto_path() -> str:
    """The libcrypto every ctypes user here loads: the one hashlib and ssl already use, when
    there is one (one library, one provider store and one configuration for the process)."""
    with contextlib.suppress(ImportError):
        import _hashlib  # noqa: F401
    return loaded_libcrypto() or ctypes.util.find_library("crypto") or "libcrypto.so.3"


def libcrypto() -> LibCrypto:
    """The process's libcrypto binding, loaded (and MD5 fetched) on first use, thread-safely."""
    global _libcrypto
    lib = _libcrypto
    if lib is None:
        with _libcrypto_lock:
            lib = _libcrypto
            if lib is None:
                lib = _libcrypto = LibCrypto(libcrypto_path())
    return lib


# --- ETag rules -----------------------------------------------------------------------------

_PLAIN = re.compile(r"[0-9a-f]{32}")
_MULTIPART = re.compile(r"([0-9a-f]{32})-([1-9][0-9]*)")


def quote(etag: str) -> str:
    """ETags travel double-quoted in headers and XML (s3-tests test_object_write_check_etag)."""
    return f'"{etag}"'


def unquote(etag: str) -> str:
    """Clients send ETags quoted or not (If-Match, CompleteMultipartUpload); compare unquoted."""
    etag = etag.strip()
    if etag.startswith("W/"):
        etag = etag[2:]
    return etag.strip('"')


def is_plain(etag: str | None) -> bool:
    """A plain ETag is the MD5 of the object's bytes: no `-N` multipart suffix."""
    return etag is not None and _PLAIN.fullmatch(etag) is not None


def multipart_etag(part_md5s: Iterable[bytes]) -> str:
    """`md5(concat(binary part MD5s))-N`, the ETag of a completed multipart upload."""
    d = md5()
    n = 0
    for part in part_md5s:
        d.update(part)
        n += 1
    return f"{d.hexdigest()}-{n}"


class PartDigests:
    """One digest per part of a stream of bytes, given the parts' sizes in order: what a
    multipart object's `-N` ETag (and a COMPOSITE checksum) is made of. Feed the object's
    bytes with `update`; `digests()` then holds one entry per part that was filled."""

    def __init__(self, sizes: Iterable[int], new: Callable[[], Digest]) -> None:
        self._sizes = iter(sizes)
        self._new = new
        self._done: list[bytes] = []
        self._left = next(self._sizes, None)
        self._current = new()
        self._close_empty()

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        view = memoryview(data)
        while view and self._left is not None:
            take = min(self._left, len(view))
            self._current.update(view[:take])
            view, self._left = view[take:], self._left - take
            self._close_empty()

    def _close_empty(self) -> None:
        while self._left == 0:
            self._done.append(self._current.digest())
            self._current, self._left = self._new(), next(self._sizes, None)

    def digests(self) -> list[bytes]:
        return list(self._done)


def multipart_etag_of_hex(part_etags: Iterable[str]) -> str:
    """The multipart ETag from the parts' (plain, hex) ETags."""
    return multipart_etag(bytes.fromhex(e) for e in part_etags)


def matches(condition: str, etag: str) -> bool:
    """Does an If-Match / If-None-Match header value match this ETag? `*` matches anything."""
    for candidate in condition.split(","):
        candidate = unquote(candidate)
        if candidate == "*" or candidate == etag:
            return True
    return False
