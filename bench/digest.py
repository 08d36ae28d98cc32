"""MD5 per object (fetch, cached, implicit; in C and from Python), large-payload throughput and
the event-loop lag of the request path's hashing.

Reproduces the microbenchmark of Ceph PR 71062: each iteration allocates a digest context,
obtains MD5 in one of three modes, inits, hashes a 4 KiB payload, finalizes and frees:

- fetch: `EVP_MD_fetch(NULL, "MD5", "fips=no")` and `EVP_MD_free` per iteration;
- cached: one fetch per process, `EVP_MD_up_ref` and `EVP_MD_free` per iteration;
- implicit: the legacy static `EVP_md5()`, which OpenSSL 3 fetches inside every init.

The modes run twice: in a small C loop (bench/native/md5_modes.c, built with the system
compiler into a temporary folder, so that Python's call overhead does not hide the difference),
and from Python through ctypes. Rows for the gateway's backends (hashlib, the openssl backend
object) and for the `cryptography` package follow. ns/op is the wall-clock time per operation
seen by one thread (elapsed / operations per thread); ops/s counts all threads together.

The second part hashes large payloads (GiB/s, next to `openssl speed -evp md5`) and streams
256 MiB through the request path's hashing policy while a 1 ms ticker measures how late the
event loop runs, next to hashing on the loop itself.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from gateway import digest

MIB = 1 << 20
NATIVE_SOURCE = Path(__file__).with_name("native") / "md5_modes.c"
MODES = ("fetch", "cached", "implicit")
TICK = 0.001


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", default="1,2,8,32", help="thread counts, comma-separated")
    parser.add_argument("--repeats", type=int, default=5, help="runs per figure (median)")
    parser.add_argument("--payload", type=int, default=4096, help="bytes hashed per object")
    parser.add_argument(
        "--seconds", type=float, default=0.2, help="target duration of one per-object run"
    )
    parser.add_argument(
        "--large-mib", type=int, default=64, help="MiB hashed per thread for the GiB/s table"
    )
    parser.add_argument(
        "--stream-mib", type=int, default=256, help="MiB streamed for the event-loop lag table"
    )
    parser.add_argument("--no-native", action="store_true", help="skip the C loop")
    parser.add_argument(
        "--parts",
        default="per-object,large,lag",
        help="which tables to measure: per-object, large, lag (comma-separated)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def make_payload(size: int) -> bytes:
    """The bytes the C loop hashes too (md5_modes.c fills its buffer the same way)."""
    return bytes((i * 131 + 7) & 0xFF for i in range(size))


# --- per-object cost: threads ---------------------------------------------------------------------


def run_threads(
    loop: Callable[[int], bytes], threads: int, iterations: int, expected: bytes
) -> int:
    """Run loop(iterations) in `threads` threads released together; the nanoseconds from the
    first thread's start to the last one's end. Every thread's last digest must be `expected`."""
    barrier = threading.Barrier(threads + 1)
    results: list[bytes | BaseException | None] = [None] * threads
    spans: list[tuple[int, int]] = [(0, 0)] * threads

    def worker(i: int) -> None:
        barrier.wait()
        start = time.perf_counter_ns()
        try:
            results[i] = loop(iterations)
        except BaseException as exc:
            results[i] = exc
        spans[i] = (start, time.perf_counter_ns())

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    # The workers time themselves: this thread may get the GIL late once they run.
    barrier.wait()
    for t in pool:
        t.join()
    for r in results:
        if isinstance(r, BaseException):
            raise r
        if r != expected:
            raise RuntimeError(f"wrong MD5 from a benchmark loop: {r!r} != {expected!r}")
    return max(end for _, end in spans) - min(start for start, _ in spans)


def ctypes_loops(payload: bytes) -> dict[str, Callable[[int], bytes]]:
    """The three modes from Python through ctypes.CDLL, as a plain ctypes user would call them
    (the GIL released around every call). Written out one per mode, so that each pays only the
    calls its mode needs."""
    lib = digest.libcrypto()
    c = lib.released
    new, free_ctx = c.EVP_MD_CTX_new, c.EVP_MD_CTX_free
    init, update, final = c.EVP_DigestInit_ex, c.EVP_DigestUpdate, c.EVP_DigestFinal_ex
    fetch, up_ref, free_md, static_md5 = c.EVP_MD_fetch, c.EVP_MD_up_ref, c.EVP_MD_free, c.EVP_md5
    cached, size = lib.md, len(payload)

    def fetch_loop(n: int) -> bytes:
        out = ctypes.create_string_buffer(16)
        for _ in range(n):
            ctx = new()
            md = fetch(None, b"MD5", b"fips=no")
            ok = init(ctx, md, None) and update(ctx, payload, size) and final(ctx, out, None)
            free_ctx(ctx)
            free_md(md)
            if not ok:
                raise lib.error("fetch-mode digest")
        return out.raw

    def cached_loop(n: int) -> bytes:
        out = ctypes.create_string_buffer(16)
        for _ in range(n):
            ctx = new()
            up_ref(cached)
            ok = init(ctx, cached, None) and update(ctx, payload, size) and final(ctx, out, None)
            free_ctx(ctx)
            free_md(cached)
            if not ok:
                raise lib.error("cached-mode digest")
        return out.raw

    def implicit_loop(n: int) -> bytes:
        out = ctypes.create_string_buffer(16)
        for _ in range(n):
            ctx = new()
            md = static_md5()
            ok = init(ctx, md, None) and update(ctx, payload, size) and final(ctx, out, None)
            free_ctx(ctx)
            if not ok:
                raise lib.error("implicit-mode digest")
        return out.raw

    return {"fetch": fetch_loop, "cached": cached_loop, "implicit": implicit_loop}


def backend_loops(payload: bytes) -> tuple[dict[str, Callable[[int], bytes]], list[str]]:
    """Whole digests as the gateway and other Python code make them: (loops, notes)."""
    lib = digest.libcrypto()

    def hashlib_loop(n: int) -> bytes:
        md5 = hashlib.md5
        out = b""
        for _ in range(n):
            h = md5(usedforsecurity=False)
            h.update(payload)
            out = h.digest()
        return out

    def openssl_loop(n: int) -> bytes:
        new = lib.new_md5
        out = b""
        for _ in range(n):
            h = new()
            h.update(payload)
            out = h.digest()
        return out

    loops = {"hashlib": hashlib_loop, "openssl backend": openssl_loop}
    notes = []
    try:
        from cryptography.hazmat.primitives import hashes
    except ImportError:
        notes.append("cryptography: skipped (the package is not installed)")
    else:

        def cryptography_loop(n: int) -> bytes:
            out = b""
            for _ in range(n):
                h = hashes.Hash(hashes.MD5())
                h.update(payload)
                out = h.finalize()
            return out

        loops["cryptography"] = cryptography_loop
        notes.append(f"cryptography: {_cryptography_openssl()}")
    return loops, notes


def _cryptography_openssl() -> str:
    """Which OpenSSL the cryptography package hashes with (its wheels bring their own)."""
    from cryptography.hazmat.backends.openssl.backend import backend

    return f"hashes with its own {backend.openssl_version_text()}"


# --- per-object cost: the native loop -----------------------------------------------------------


class NativeLoop:
    """md5_modes.c, compiled at run time. `why_not` says why it could not be (None if built)."""

    def __init__(self, folder: Path) -> None:
        self.exe = folder / "md5_modes"
        self.how = ""
        self.why_not: str | None = None
        cc = os.environ.get("CC", "cc")
        if shutil.which(cc) is None:
            self.why_not = f"no C compiler ({cc}) on this machine: the C rows are skipped"
            return
        base = [cc, "-O2", "-pthread", "-o", str(self.exe), str(NATIVE_SOURCE)]
        library = digest.loaded_libcrypto() or digest.libcrypto().path
        attempts = [
            ("OpenSSL headers, -lcrypto", [*base, "-lcrypto"]),
            # No libssl-dev: no headers and no libcrypto.so link name. The C file then declares
            # the few prototypes itself and links against the runtime library by path.
            (
                f"no OpenSSL headers: own prototypes, linked against {library}",
                [*base, "-DS3GW_NO_OPENSSL_HEADERS", library],
            ),
        ]
        errors = []
        for how, cmd in attempts:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode == 0:
                self.how = f"built with {cc} ({how})"
                return
            errors.append(f"{how}: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
        self.why_not = "the C loop did not compile; " + "; ".join(map(str, errors))

    def run(self, mode: str, threads: int, iterations: int, payload: int, expected: str) -> int:
        proc = subprocess.run(
            [str(self.exe), mode, str(threads), str(iterations), str(payload)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"md5_modes {mode} failed: {proc.stdout}{proc.stderr}")
        result = json.loads(proc.stdout)
        if result["md5"] != expected or not result["agree"] or result["failures"]:
            raise RuntimeError(f"md5_modes computed a wrong MD5: {result}")
        return int(result["elapsed_ns"])


# --- per-object cost: measuring -------------------------------------------------------------------


Runner = Callable[[int, int], int]  # (threads, iterations per thread) -> elapsed ns


def _calibrate(runner: Runner, seconds: float) -> int:
    """Total operations that take about `seconds` on one thread."""
    n = 200
    while True:
        elapsed = runner(1, n)
        if elapsed > 20_000_000 or n >= 1 << 24:
            return max(64, int(n * seconds * 1e9 / elapsed))
        n *= 4


def per_object(args: argparse.Namespace, threads: list[int], tmp: Path) -> dict[str, Any]:
    payload = make_payload(args.payload)
    expected = hashlib.md5(payload, usedforsecurity=False).digest()
    runners: dict[str, Runner] = {}
    notes: list[str] = []
    native: NativeLoop | None = None
    if not args.no_native:
        native = NativeLoop(tmp)
        if native.why_not is not None:
            notes.append(f"C loop: {native.why_not}")
        else:
            notes.append(f"C loop: {native.how}")
            for mode in MODES:
                runners[f"C {mode}"] = lambda t, n, m=mode, nat=native: nat.run(
                    m, t, n, args.payload, expected.hex()
                )
    for mode, loop in ctypes_loops(payload).items():
        runners[f"py {mode} (ctypes)"] = lambda t, n, f=loop: run_threads(f, t, n, expected)
    loops, more_notes = backend_loops(payload)
    for name, loop in loops.items():
        runners[f"py {name}"] = lambda t, n, f=loop: run_threads(f, t, n, expected)
    notes += more_notes

    totals = {name: _calibrate(runner, args.seconds) for name, runner in runners.items()}
    samples: dict[str, dict[int, list[float]]] = {n: {t: [] for t in threads} for n in runners}
    # Repeats outermost and the rows interleaved: a slow spell of a shared machine spreads
    # over every row instead of landing on one.
    for _ in range(args.repeats):
        for t in threads:
            for name, runner in runners.items():
                per_thread = max(1, totals[name] // t)
                samples[name][t].append(runner(t, per_thread) / per_thread)
    rows: dict[str, dict[int, dict[str, float]]] = {}
    for name, by_threads in samples.items():
        rows[name] = {}
        for t, values in by_threads.items():
            ns = statistics.median(values)
            rows[name][t] = {"ns_per_op": ns, "ops_per_s": t * 1e9 / ns}
    ratios: dict[str, dict[int, float]] = {}
    for prefix, suffix in (("C ", ""), ("py ", " (ctypes)")):
        fetch = rows.get(f"{prefix}fetch{suffix}")
        if fetch is None:
            continue
        for mode in ("cached", "implicit"):
            row = rows[f"{prefix}{mode}{suffix}"]
            ratios[f"{prefix}{mode}/fetch"] = {
                t: row[t]["ns_per_op"] / fetch[t]["ns_per_op"] for t in threads
            }
    return {
        "payload": args.payload,
        "threads": threads,
        "rows": rows,
        "ratios": ratios,
        "notes": notes,
    }


# --- large payloads ---------------------------------------------------------------------------


def _gil_released(make: Callable[[], Any], block: bytes, tries: int = 3) -> bool:
    """Does one large update let another Python thread run? This thread spins while a worker
    hashes `block` in one update: holding the GIL, the update stops the spinning for its whole
    duration; released, the longest pause stays a small part of it. A busy machine can also
    pause the spinning thread, never shorten a pause: one short pause in `tries` settles it."""
    for _ in range(tries):
        h = make()
        done = threading.Event()
        span = [0.0, 0.0]

        def hash_it(h: Any = h, done: threading.Event = done, span: list[float] = span) -> None:
            span[0] = time.perf_counter()
            h.update(block)
            span[1] = time.perf_counter()
            done.set()

        worker = threading.Thread(target=hash_it)
        longest, last = 0.0, time.perf_counter()
        worker.start()
        while not done.is_set():
            now = time.perf_counter()
            longest, last = max(longest, now - last), now
        worker.join()
        if longest < (span[1] - span[0]) / 2:
            return True
    return False


def large(args: argparse.Namespace) -> dict[str, Any]:
    block = os.urandom(MIB)
    updates = args.large_mib
    makers: dict[str, Callable[[], Any]] = {
        "hashlib": lambda: hashlib.md5(usedforsecurity=False),
        "openssl backend": digest.libcrypto().new_md5,
    }
    notes = []
    try:
        from cryptography.hazmat.primitives import hashes

        makers["cryptography"] = lambda: hashes.Hash(hashes.MD5())
    except ImportError:
        notes.append("cryptography: skipped (the package is not installed)")

    def loop_for(make: Callable[[], Any]) -> Callable[[int], bytes]:
        def loop(n: int) -> bytes:
            h = make()
            for _ in range(n):
                h.update(block)
            return h.finalize() if hasattr(h, "finalize") else h.digest()

        return loop

    expected = hashlib.md5(block * updates, usedforsecurity=False).digest()
    rows: dict[str, dict[str, Any]] = {}
    for name, make in makers.items():
        loop = loop_for(make)
        by_threads = {}
        for t in (1, 2):
            elapsed = statistics.median(
                run_threads(loop, t, updates, expected) for _ in range(args.repeats)
            )
            by_threads[t] = t * updates * MIB / (elapsed / 1e9) / 2**30
        rows[name] = {"gib_per_s": by_threads, "gil_released": _gil_released(make, block * 64)}
    return {
        "mib_per_thread": updates,
        "rows": rows,
        "openssl_speed": openssl_speed(),
        "notes": notes,
    }


def openssl_speed() -> dict[str, Any]:
    """`openssl speed -evp md5 -bytes 1048576`, one process and two: GiB/s, or why not."""
    exe = shutil.which("openssl")
    if exe is None:
        return {"skipped": "openssl speed: skipped (no openssl command on this machine)"}
    result: dict[str, Any] = {}
    for processes in (1, 2):
        cmd = [exe, "speed", "-seconds", "1", "-bytes", str(MIB), "-evp", "md5"]
        if processes > 1:
            cmd[2:2] = ["-multi", str(processes)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"skipped": f"openssl speed: skipped ({exc})"}
        m = re.search(r"^md5\s+([0-9.]+)k\s*$", proc.stdout, re.MULTILINE)
        if m is None:
            return {"skipped": f"openssl speed: skipped (no md5 line in: {proc.stdout[-200:]!r})"}
        result[processes] = float(m.group(1)) * 1000 / 2**30
    return {"gib_per_s": result}


# --- event-loop lag -------------------------------------------------------------------------------


async def _with_ticker(work: Callable[[], Awaitable[None]]) -> dict[str, float]:
    """Run `work` while a ticker sleeps about 1 ms in a loop: the worst and p99 lateness (ms)."""
    late: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        # The sleeps are jittered around TICK: with a fixed period the ticker can lock onto the
        # rhythm of periodic work (a batch every n pieces) and see only part of each stall.
        while not stop.is_set():
            nap = TICK * (0.5 + random.random())
            start = time.perf_counter()
            await asyncio.sleep(nap)
            late.append(time.perf_counter() - start - nap)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.02)
    late.clear()
    start = time.perf_counter()
    await work()
    elapsed = time.perf_counter() - start
    stop.set()
    await task
    late.sort()
    return {
        "worst_ms": late[-1] * 1000 if late else 0.0,
        "p99_ms": late[int(len(late) * 0.99)] * 1000 if late else 0.0,
        "seconds": elapsed,
    }


async def _stream(block: bytes, total: int, piece: int = 64 * 1024) -> AsyncIterator[bytes]:
    """A body arriving in `piece`-sized reads, as aiohttp hands them over."""
    sent = 0
    while sent < total:
        offset = sent % len(block)
        chunk = block[offset : offset + min(piece, total - sent)]
        sent += len(chunk)
        yield chunk
        await asyncio.sleep(0)


def lag(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from gateway.store import BATCH, open_store

    total = args.stream_mib * MIB
    block = os.urandom(8 * MIB)
    expected = hashlib.md5(usedforsecurity=False)
    for offset in range(0, total, len(block)):
        expected.update(block[: min(len(block), total - offset)])
    want = expected.digest()

    async def store_stage(backend: str) -> None:
        # The request path's own staging (Store.stage: batches hashed and written in the pool
        # while the loop receives the next), with each MD5 backend.
        previous = digest.backend()
        digest.configure(backend)
        store = open_store(tmp / f"lag-data-{backend}")
        try:
            blob = await store.stage(_stream(block, total))
            await store.discard(blob)
        finally:
            store.close()
            digest.configure(previous)
        if blob.md5 != want:
            raise RuntimeError("Store.stage computed a wrong MD5")

    async def inline(update_size: int) -> None:
        h, buf = hashlib.md5(usedforsecurity=False), bytearray()
        async for chunk in _stream(block, total):
            buf += chunk
            if len(buf) >= update_size:
                h.update(buf)
                buf.clear()
        h.update(buf)
        if h.digest() != want:
            raise RuntimeError("inline hashing computed a wrong MD5")

    batches = f"{BATCH // MIB} MiB batches"
    scenarios: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        (f"Store.stage, hashlib: {batches}, MD5 + write + fsync", lambda: store_stage("hashlib")),
        (f"Store.stage, openssl: {batches}, MD5 + write + fsync", lambda: store_stage("openssl")),
        ("on the loop, 1 MiB updates, hashlib", lambda: inline(MIB)),
        ("on the loop, 8 MiB updates, hashlib", lambda: inline(8 * MIB)),
    ]
    rows = []
    for name, work in scenarios:
        runs = [asyncio.run(_with_ticker(work)) for _ in range(max(1, min(args.repeats, 3)))]
        runs.sort(key=lambda r: r["worst_ms"])
        median = runs[len(runs) // 2]
        rows.append({"scenario": name, **median})
    return {"stream_mib": args.stream_mib, "piece_kib": 64, "rows": rows}


# --- output -------------------------------------------------------------------------------------


class _MachineShare:
    """How much of the machine other processes used while the benchmark ran: the busy CPU
    time of the whole machine (/proc/stat) minus this process's and its children's."""

    def __init__(self) -> None:
        self.start = (time.perf_counter(), self._busy(), self._ours())

    @staticmethod
    def _busy() -> float | None:
        try:
            with open("/proc/stat") as stat:
                fields = [int(v) for v in stat.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _ours() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def others_share(self) -> float | None:
        """Other processes' CPU time as a share of all the CPUs over the run (0..1)."""
        wall0, busy0, ours0 = self.start
        busy = self._busy()
        if busy is None or busy0 is None:
            return None
        others = (busy - busy0) - (self._ours() - ours0)
        return max(0.0, others / ((time.perf_counter() - wall0) * (os.cpu_count() or 1)))


def _share_line(share: float | None) -> str:
    if share is None:
        return "other processes' CPU use during the run: unknown (no /proc/stat)"
    return (
        f"other processes used {share:.0%} of the machine's CPU time during the run "
        "(a large share means the thread rows competed with them)"
    )


def render(result: dict[str, Any]) -> str:
    lines = [
        f"python -m bench digest: {result['openssl']} ({result['libcrypto']}), "
        f"Python {result['python']}, {result['cpus']} CPUs",
        _share_line(result["others_cpu_share"]),
    ]
    if "per_object" in result:
        lines += _render_per_object(result)
    if "large" in result:
        lines += _render_large(result)
    if "lag" in result:
        lines += _render_lag(result)
    return "\n".join(lines)


def _render_per_object(result: dict[str, Any]) -> list[str]:
    po = result["per_object"]
    threads = po["threads"]
    lines = [
        *po["notes"],
        "",
        f"MD5 per object: {po['payload']}-byte payload, median of {result['repeats']} runs; "
        "ns/op = wall time per operation seen by one thread, ops/s = all threads",
        f"{'':24}" + "".join(f"{f'{t} thread' + ('s' if t > 1 else ''):>21}" for t in threads),
        f"{'':24}" + "".join(f"{'ns/op':>10} {'ops/s':>10}" for _ in threads),
    ]
    for name, by_threads in po["rows"].items():
        cells = "".join(
            f"{by_threads[t]['ns_per_op']:>10,.0f} {by_threads[t]['ops_per_s']:>10,.0f}"
            for t in threads
        )
        lines.append(f"{name:24}{cells}")
    if po["ratios"]:
        lines += [
            "",
            "ns/op ratios (below 1: cheaper than a fetch per object)",
            f"{'':24}" + "".join(f"{t:>8}" for t in threads),
        ]
        for name, by_threads in po["ratios"].items():
            lines.append(f"{name:24}" + "".join(f"{by_threads[t]:>8.3f}" for t in threads))
    return lines


def _render_large(result: dict[str, Any]) -> list[str]:
    lg = result["large"]
    lines = [
        "",
        f"Large payloads: {lg['mib_per_thread']} MiB per thread in 1 MiB updates, GiB/s of all "
        f"threads, median of {result['repeats']} runs",
        f"{'':24}{'1 thread':>10}{'2 threads':>11}  GIL released during an update",
    ]
    for name, row in lg["rows"].items():
        g = row["gib_per_s"]
        lines.append(
            f"{name:24}{g[1]:>10.2f}{g[2]:>11.2f}  {'yes' if row['gil_released'] else 'no'}"
        )
    speed = lg["openssl_speed"]
    if "skipped" in speed:
        lines.append(speed["skipped"])
    else:
        g = speed["gib_per_s"]
        lines.append(
            f"{'openssl speed -evp md5':24}{g[1]:>10.2f}{g[2]:>11.2f}  (2 threads: -multi 2)"
        )
    return lines + lg["notes"]


def _render_lag(result: dict[str, Any]) -> list[str]:
    lag_result = result["lag"]
    lines = [
        "",
        f"Event-loop lag while {lag_result['stream_mib']} MiB streams in "
        f"{lag_result['piece_kib']} KiB pieces (a ticker sleeping 0.5-1.5 ms; median of the "
        "runs' worst lateness)",
        f"{'':48}{'worst ms':>10}{'p99 ms':>10}{'seconds':>10}",
    ]
    for row in lag_result["rows"]:
        lines.append(
            f"{row['scenario']:48}{row['worst_ms']:>10.2f}{row['p99_ms']:>10.2f}"
            f"{row['seconds']:>10.2f}"
        )
    return lines


def run(args: argparse.Namespace) -> int:
    import platform

    threads = [int(t) for t in args.threads.split(",")]
    lib = digest.libcrypto()
    parts = set(args.parts.split(","))
    unknown = parts - {"per-object", "large", "lag"}
    if unknown:
        raise SystemExit(f"--parts: unknown {', '.join(sorted(unknown))}")
    machine = _MachineShare()
    result: dict[str, Any] = {
        "openssl": lib.version,
        "libcrypto": lib.path,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "repeats": args.repeats,
    }
    with tempfile.TemporaryDirectory(prefix="s3gw-bench-digest-") as tmp:
        if "per-object" in parts:
            result["per_object"] = per_object(args, threads, Path(tmp))
        if "large" in parts:
            result["large"] = large(args)
        if "lag" in parts:
            result["lag"] = lag(args, Path(tmp))
    result["others_cpu_share"] = machine.others_share()
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0
