"""fsck: does the catalog agree with the blob files?

Checks that every extent names a blob that exists and covers it, that every file blob has its
file with the recorded size, that every blob file is known to the catalog, that each reference
count equals the references found in object and part manifests, and (deep) that every plain-MD5
ETag matches the bytes. `repair` removes orphans and stray tmp files and fixes counts; damage it
cannot repair (missing or short data, wrong ETags) is reported and makes the exit status 1.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .. import digest
from . import catalog
from .blobs import BlobFiles, FolderLock
from .model import Extent


@dataclass
class Report:
    objects: int = 0
    parts: int = 0
    blobs: int = 0
    tmp_files: list[str] = field(default_factory=list)
    orphan_files: list[str] = field(default_factory=list)
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
        if not self._fixed("orphans"):
            out += [f"orphan blob file {b}" for b in self.orphan_files]
            out += [f"stray tmp file {t}" for t in self.tmp_files]
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

        on_disk: set[str] = set()
        for _prefix, entries in files.walk():
            for entry in entries:
                on_disk.add(entry.name)
                known = blobs.get(entry.name)
                if known is None or known[2]:
                    report.orphan_files.append(entry.name)
                elif entry.stat().st_size != known[0]:
                    report.wrong_sizes.append((entry.name, known[0], entry.stat().st_size))
        report.missing_files = sorted(
            b for b, (_, _, inline) in blobs.items() if not inline and b not in on_disk
        )
        report.tmp_files = sorted(os.listdir(files.tmp))
        report.wrong_counts = sorted(
            (b, refs, found[b]) for b, (_, refs, _) in blobs.items() if refs != found[b]
        )
        if deep:
            _check_etags(conn, files, report)
        if repair:
            _repair(conn, files, report)
    finally:
        conn.close()
        lock.close()
    return report


def _check_etags(conn: sqlite3.Connection, files: BlobFiles, report: Report) -> None:
    """Hash the bytes of every object whose ETag (or remembered content MD5) is an MD5."""
    rows = conn.execute("SELECT bucket, key, etag, content_md5, manifest FROM objects")
    for bucket, key, etag, content_md5, manifest in rows:
        expected = etag if digest.is_plain(etag) else content_md5
        if expected is None:
            continue
        d = digest.md5()
        try:
            for e in catalog.decode_manifest(manifest):
                d.update(_read_extent(conn, files, e))
        except OSError:
            continue  # reported already as a missing or short blob
        if d.hexdigest() != expected:
            report.bad_etags.append((f"{bucket}/{key.decode()}", expected, d.hexdigest()))


def _read_extent(conn: sqlite3.Connection, files: BlobFiles, e: Extent) -> bytes:
    inline = catalog.read_inline(conn, [e.blob])
    if e.blob in inline:
        return inline[e.blob][e.offset : e.offset + e.length]
    with open(files.path(e.blob), "rb") as f:
        f.seek(e.offset)
        data = f.read(e.length)
    if len(data) != e.length:
        raise OSError("short blob")
    return data


def _repair(conn: sqlite3.Connection, files: BlobFiles, report: Report) -> None:
    if report.orphan_files or report.tmp_files:
        files.delete(report.orphan_files)
        files.empty_tmp()
        report.repaired.append("orphans")
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
