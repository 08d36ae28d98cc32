"""fsck: does the catalog agree with the blob files?

Checks that every extent names a blob that exists and covers it, that every file blob has its
file with the recorded size, that each reference count equals the references found in object
and part manifests, and (deep) that the bytes hash to what the catalog says: plain ETags,
multipart `-N` ETags part by part, pending parts. Damage makes the exit status 1.

Blob files the catalog does not know, and files under tmp/ and trash/, are leftovers of a
crash, not damage: the next start sweeps exactly those (catalog.leftover_files decides for
both). They are listed; `repair` removes them, and fixes counts.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .. import digest
from . import catalog
from .blobs import BlobFiles, FolderLock
from .model import Extent

READ_CHUNK = 1 << 20


@dataclass
class Report:
    objects: int = 0
    parts: int = 0
    blobs: int = 0
    tmp_files: list[str] = field(default_factory=list)  # under tmp/ and trash/
    orphan_files: list[str] = field(default_factory=list)  # blob files the catalog lacks
    missing_files: list[str] = field(default_factory=list)
    wrong_sizes: list[tuple[str, int, int]] = field(default_factory=list)
    dangling: list[tuple[str, str]] = field(default_factory=list)  # (owner, blob)
    short_extents: list[tuple[str, Extent]] = field(default_factory=list)
    wrong_counts: list[tuple[str, int, int]] = field(default_factory=list)  # blob, stored, found
    bad_etags: list[tuple[str, str, str]] = field(default_factory=list)  # owner, stored, actual
    repaired: list[str] = field(default_factory=list)

    @property
    def damage(self) -> list[str]:
        """Problems that remain (after repair, if any was made)."""
        out = []
        if not self._fixed("counts"):
            out += [f"blob {b}: count {s}, references {f}" for b, s, f in self.wrong_counts]
        out += [f"blob {b}: file missing" for b in self.missing_files]
        out += [f"blob {b}: file has {a} bytes, catalog says {e}" for b, e, a in self.wrong_sizes]
        out += [f"{o}: extent names unknown blob {b}" for o, b in self.dangling]
        out += [f"{o}: extent {e} runs past its blob" for o, e in self.short_extents]
        out += [f"{o}: ETag {s} but bytes hash to {a}" for o, s, a in self.bad_etags]
        return out

    def _fixed(self, what: str) -> bool:
        return what in self.repaired

    def render(self) -> str:
        lines = [
            f"checked {self.objects} objects, {self.parts} parts, {self.blobs} blobs",
        ]
        lines += [f"repaired: {what}" for what in self.repaired]
        if not self._fixed("leftovers"):
            lines += [f"leftover: orphan blob file {b}" for b in self.orphan_files]
            lines += [f"leftover: stray tmp file {t}" for t in self.tmp_files]
            if self.orphan_files or self.tmp_files:
                lines.append(
                    "leftovers are what a crash left; the next start (or --repair) removes them"
                )
        damage = self.damage
        lines += [f"DAMAGE: {d}" for d in damage]
        lines.append("no damage found" if not damage else f"{len(damage)} problems remain")
        return "\n".join(lines)


def check(root: Path, *, deep: bool = False, repair: bool = False) -> Report:
    """Check (and optionally repair) the data folder at `root`. The gateway must be stopped:
    raises FolderInUse otherwise (its uncommitted blobs would look like orphans)."""
    if not (root / "catalog.sqlite3").exists():
        raise FileNotFoundError(f"{root} holds no catalog")
    lock = FolderLock(root)
    lock.exclusive("fsck", wait=0)
    files = BlobFiles(root)
    conn = catalog.connect(root / "catalog.sqlite3")
    report = Report()
    try:
        blobs = {
            blob_id: (size, refs, inline)
            for blob_id, size, refs, inline in conn.execute(
                "SELECT id, size, refs, data IS NOT NULL FROM blobs"
            )
        }
        report.blobs = len(blobs)
        found: Counter[str] = Counter()

        def walk(owner: str, extents: tuple[Extent, ...]) -> None:
            for e in extents:
                found[e.blob] += 1
                known = blobs.get(e.blob)
                if known is None:
                    report.dangling.append((owner, e.blob))
                elif e.offset + e.length > known[0]:
                    report.short_extents.append((owner, e))

        for bucket, key, manifest in conn.execute("SELECT bucket, key, manifest FROM objects"):
            report.objects += 1
            walk(f"{bucket}/{key.decode()}", catalog.decode_manifest(manifest))
        for upload_id, number, manifest in conn.execute(
            "SELECT upload_id, number, manifest FROM parts"
        ):
            report.parts += 1
            walk(f"upload {upload_id} part {number}", catalog.decode_manifest(manifest))

        leftovers = [entry for stale in catalog.leftover_files(conn, files) for entry in stale]
        report.orphan_files = sorted(entry.name for entry in leftovers)
        for blob_id, (size, _, inline) in blobs.items():
            if inline:
                continue
            try:
                actual = files.path(blob_id).stat().st_size
            except FileNotFoundError:
                report.missing_files.append(blob_id)
                continue
            if actual != size:
                report.wrong_sizes.append((blob_id, size, actual))
        report.missing_files.sort()
        report.tmp_files = sorted([*os.listdir(files.tmp), *os.listdir(files.trash)])
        report.wrong_counts = sorted(
            (b, refs, found[b]) for b, (_, refs, _) in blobs.items() if refs != found[b]
        )
        if deep:
            _check_etags(conn, files, report)
        if repair:
            _repair(conn, files, report, leftovers)
    finally:
        conn.close()
        lock.close()
    return report


def _check_etags(conn: sqlite3.Connection, files: BlobFiles, report: Report) -> None:
    """Hash the bytes of every object and pending part and compare them with what the catalog
    says they hash to: a plain ETag, a remembered content MD5, and for a multipart object each
    part's MD5 folded into its `-N` ETag (a flipped byte in any part's blob changes it)."""
    rows = conn.execute("SELECT bucket, key, etag, content_md5, manifest, parts FROM objects")
    for bucket, key, etag, content_md5, manifest, parts in rows:
        owner = f"{bucket}/{key.decode()}"
        part_sizes = json.loads(parts) if parts and not digest.is_plain(etag) else []
        try:
            whole, part_md5s = _hash(conn, files, catalog.decode_manifest(manifest), part_sizes)
        except OSError:
            continue  # reported already as a missing or short blob
        if digest.is_plain(etag) and whole != etag:
            report.bad_etags.append((owner, etag, whole))
        if part_sizes:
            actual = digest.multipart_etag(part_md5s)
            if actual != etag:
                report.bad_etags.append((owner, etag, actual))
        if content_md5 is not None and content_md5 != whole:
            report.bad_etags.append((f"{owner} (content MD5)", content_md5, whole))
    for upload_id, number, etag, manifest in conn.execute(
        "SELECT upload_id, number, etag, manifest FROM parts"
    ):
        try:
            whole, _ = _hash(conn, files, catalog.decode_manifest(manifest), [])
        except OSError:
            continue
        if whole != etag:
            report.bad_etags.append((f"upload {upload_id} part {number}", etag, whole))


def _hash(
    conn: sqlite3.Connection,
    files: BlobFiles,
    extents: tuple[Extent, ...],
    part_sizes: list[int],
) -> tuple[str, list[bytes]]:
    """(MD5 of the bytes, binary MD5 of each run of `part_sizes` bytes), read once."""
    whole = digest.md5()
    part_md5s: list[bytes] = []
    sizes = iter(part_sizes)
    part = digest.md5()
    left = next(sizes, None)
    for chunk in _read(conn, files, extents):
        whole.update(chunk)
        view = memoryview(chunk)
        while left is not None and (left == 0 or view):
            take = min(left, len(view))
            part.update(view[:take])
            view, left = view[take:], left - take
            if left == 0:
                part_md5s.append(part.digest())
                part, left = digest.md5(), next(sizes, None)
    while left == 0:  # empty parts at the end (a one-part object of zero bytes)
        part_md5s.append(part.digest())
        part, left = digest.md5(), next(sizes, None)
    return whole.hexdigest(), part_md5s


def _read(
    conn: sqlite3.Connection, files: BlobFiles, extents: tuple[Extent, ...]
) -> Iterator[bytes]:
    """The bytes of `extents` in chunks of at most READ_CHUNK: memory stays bounded whatever
    the object's size. Raises OSError if a blob file is missing or short."""
    inline = catalog.read_inline(conn, [e.blob for e in extents])
    for e in extents:
        if e.blob in inline:
            yield inline[e.blob][e.offset : e.offset + e.length]
            continue
        with open(files.path(e.blob), "rb") as f:
            f.seek(e.offset)
            left = e.length
            while left:
                data = f.read(min(left, READ_CHUNK))
                if not data:
                    raise OSError(f"blob {e.blob} is short")
                left -= len(data)
                yield data


def _repair(
    conn: sqlite3.Connection, files: BlobFiles, report: Report, leftovers: list[os.DirEntry[str]]
) -> None:
    if report.orphan_files or report.tmp_files:
        files.purge(Path(entry.path) for entry in leftovers)
        files.empty_tmp()
        report.repaired.append("leftovers")
    if report.wrong_counts:
        conn.execute("BEGIN IMMEDIATE")
        gone: list[str] = []
        for blob, _stored, found in report.wrong_counts:
            if found == 0:
                row = conn.execute(
                    "DELETE FROM blobs WHERE id = ? RETURNING data IS NULL", (blob,)
                ).fetchone()
                if row and row[0]:
                    gone.append(blob)
            else:
                conn.execute("UPDATE blobs SET refs = ? WHERE id = ?", (found, blob))
        conn.execute("COMMIT")
        files.delete(gone)
        report.repaired.append("counts")
