"""CopyObject and UploadPartCopy latency by source size: a copy writes metadata, not bytes.

Sources of each size are uploaded once; each copy is then timed end to end from a boto3
client (request, commit with fsync, response). DESIGN.md's claim is that the cost does not
depend on the size: the 256 MiB / 1 MiB ratio should be close to 1. A multipart source shows
the ETag rule: its first copy reads and hashes the bytes, later copies reuse the remembered MD5.
A copy from an old version (CopyObject with ?versionId= of a source overwritten since, in a
versioned bucket) must cost the same: its ratio to the 1 MiB copy should be close to 1 too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.process import GatewayProcess

MIB = 2**20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="1,8,64,256", help="source sizes in MiB")
    parser.add_argument("--repeats", type=int, default=7, help="copies timed per size")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _body(size_mib: int) -> bytes:
    block = os.urandom(MIB)
    return b"".join(i.to_bytes(8, "big") + block[8:] for i in range(size_mib))


def _timed(call: Any, *args: Any) -> float:
    start = time.perf_counter()
    call(*args)
    return (time.perf_counter() - start) * 1000


def _median_ms(call: Any, repeats: int, first: int = 0) -> float:
    """Median latency of call(i) for i in first .. first + repeats - 1."""
    return statistics.median(_timed(call, i) for i in range(first, first + repeats))


def _copies(s3: Any, size: int, repeats: int) -> dict[str, Any]:
    key = f"src-{size}"
    s3.put_object(Bucket="bench", Key=key, Body=_body(size))
    source = {"Bucket": "bench", "Key": key}
    copy_ms = _median_ms(
        lambda i: s3.copy_object(Bucket="bench", Key=f"c-{size}-{i}", CopySource=source), repeats
    )
    upload = s3.create_multipart_upload(Bucket="bench", Key=f"u-{size}")["UploadId"]
    part_ms = _median_ms(
        lambda i: s3.upload_part_copy(
            Bucket="bench", Key=f"u-{size}", UploadId=upload, PartNumber=i + 1, CopySource=source
        ),
        repeats,
    )
    s3.abort_multipart_upload(Bucket="bench", Key=f"u-{size}", UploadId=upload)
    return {"size_mib": size, "copy_object_ms": copy_ms, "upload_part_copy_ms": part_ms}


def _old_version_copies(s3: Any, size: int, repeats: int) -> float:
    """Median CopyObject latency from a noncurrent version of `size` MiB."""
    key = f"old-{size}"
    old = s3.put_object(Bucket="bench-versioned", Key=key, Body=_body(size))
    s3.put_object(Bucket="bench-versioned", Key=key, Body=b"newer")
    source = {"Bucket": "bench-versioned", "Key": key, "VersionId": old["VersionId"]}

    def copy(i: int) -> None:
        done = s3.copy_object(Bucket="bench-versioned", Key=f"c-{key}-{i}", CopySource=source)
        # Timed only if it copied the old version: its id named, its plain-MD5 ETag reused.
        if (done["CopySourceVersionId"], done["CopyObjectResult"]["ETag"]) != (
            old["VersionId"],
            old["ETag"],
        ):
            raise RuntimeError(f"the copy of {key} did not come from its old version: {done}")

    return _median_ms(copy, repeats)


def measure(s3: Any, sizes: list[int], repeats: int) -> dict[str, Any]:
    s3.create_bucket(Bucket="bench")
    rows = [_copies(s3, size, repeats) for size in sizes]
    # A multipart source: the first copy hashes its bytes, the next ones do not.
    size = max(sizes)
    upload = s3.create_multipart_upload(Bucket="bench", Key="mp")["UploadId"]
    body = _body(size)
    parts = []
    for n, start in enumerate(range(0, len(body), 8 * MIB), 1):
        etag = s3.upload_part(
            Bucket="bench",
            Key="mp",
            UploadId=upload,
            PartNumber=n,
            Body=body[start : start + 8 * MIB],
        )["ETag"]
        parts.append({"PartNumber": n, "ETag": etag})
    s3.complete_multipart_upload(
        Bucket="bench", Key="mp", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    source = {"Bucket": "bench", "Key": "mp"}
    first = _timed(lambda: s3.copy_object(Bucket="bench", Key="mp-1", CopySource=source))
    later = _median_ms(
        lambda i: s3.copy_object(Bucket="bench", Key=f"mp-{i}", CopySource=source), repeats, 2
    )
    by_size = {r["size_mib"]: r for r in rows}
    smallest, largest = by_size[min(sizes)], by_size[max(sizes)]
    s3.create_bucket(Bucket="bench-versioned")
    s3.put_bucket_versioning(
        Bucket="bench-versioned", VersioningConfiguration={"Status": "Enabled"}
    )
    old_small = _old_version_copies(s3, min(sizes), repeats)
    old_large = _old_version_copies(s3, max(sizes), repeats)
    return {
        "rows": rows,
        "ratio_copy_object": largest["copy_object_ms"] / smallest["copy_object_ms"],
        "ratio_upload_part_copy": largest["upload_part_copy_ms"] / smallest["upload_part_copy_ms"],
        "multipart_source_mib": size,
        "multipart_first_copy_ms": first,
        "multipart_later_copy_ms": later,
        "old_version_copy_ms": {str(min(sizes)): old_small, str(max(sizes)): old_large},
        # The figure: the largest old-version copy against the smallest plain copy.
        "ratio_old_version_copy": old_large / smallest["copy_object_ms"],
        "ratio_old_version_copy_same_kind": old_large / old_small,
    }


def render(result: dict[str, Any], sizes: list[int]) -> str:
    lines = [
        "CopyObject / UploadPartCopy (whole source), median latency from a boto3 client",
        f"{'source':>10} {'CopyObject':>12} {'UploadPartCopy':>15}",
    ]
    for r in result["rows"]:
        copy, part = r["copy_object_ms"], r["upload_part_copy_ms"]
        lines.append(f"{r['size_mib']:>6} MiB {copy:>9.2f} ms {part:>12.2f} ms")
    lo, hi = min(sizes), max(sizes)
    lines += [
        f"ratio {hi} MiB / {lo} MiB: CopyObject {result['ratio_copy_object']:.2f}, "
        f"UploadPartCopy {result['ratio_upload_part_copy']:.2f}",
        f"multipart source of {result['multipart_source_mib']} MiB: first copy "
        f"{result['multipart_first_copy_ms']:.1f} ms (reads and hashes), later copies "
        f"{result['multipart_later_copy_ms']:.2f} ms (MD5 remembered)",
        f"copy from an old version (versioned bucket, source overwritten): "
        f"{lo} MiB {result['old_version_copy_ms'][str(lo)]:.2f} ms, "
        f"{hi} MiB {result['old_version_copy_ms'][str(hi)]:.2f} ms",
        f"ratio {hi} MiB old version / {lo} MiB CopyObject: "
        f"{result['ratio_old_version_copy']:.2f} "
        f"(/ {lo} MiB old version: {result['ratio_old_version_copy_same_kind']:.2f})",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="s3gw-bench-") as tmp:
        server = GatewayProcess(Path(tmp) / "data", {"S3GW_LOG_LEVEL": "warning"}).start()
        try:
            result = measure(server.client(), sizes, args.repeats)
        finally:
            server.stop()
    print(json.dumps(result, indent=2) if args.json else render(result, sizes))
    return 0
