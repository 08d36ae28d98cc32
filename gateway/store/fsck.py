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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

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
    bad_checksums: list[tuple[str, str, str]] = field(default_factory=list)  # likewise
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
        out += [f"{o}: checksum {s} but bytes give {a}" for o, s, a in self.bad_checksums]
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


def check(
    root: Path,
    *,
    deep: bool = False,
    repair: bool = False,
    checksum_of: ChecksumOf | None = None,
) -> Report:
    """Check (and optionally repair) the data folder at `root`. The gateway must be stopped:
    raises FolderInUse otherwise (its uncommitted blobs would look like orphans). `deep`
    reads every byte; `checksum_of` also checks the stored flexible checksums then."""
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
            _check_bytes(conn, files, report, checksum_of)
        if repair:
            _repair(conn, files, report, leftovers)
    finally:
        conn.close()
        lock.close()
    return report


class ChecksumCheck(Protocol):
    """Recomputes one stored checksum from the bytes fed to it."""

    expected: str

    def update(self, data: bytes | bytearray | memoryview, /) -> None: ...

    def actual(self) -> str: ...


# From what the store kept (an object's checksums, or a pending part's `{"algorithm", "value"}`)
# and the part sizes, a checker, or None: the protocol layer knows the algorithms.
ChecksumOf = Callable[[Mapping[str, str], Sequence[int]], ChecksumCheck | None]


@dataclass(frozen=True)
class _Stored:
    """What the catalog says the bytes of an object or a pending part hash to."""

    owner: str
    extents: tuple[Extent, ...]
    md5s: list[tuple[str, str]]  # (label, MD5 of all the bytes)
    multipart_etag: str | None  # `-N`, folded from the MD5 of each run of `part_sizes`
    part_sizes: list[int]
    checksums: dict[str, str]  # for ChecksumOf


def _stored(conn: sqlite3.Connection) -> Iterator[_Stored]:
    rows = conn.execute(
        "SELECT bucket, key, etag, content_md5, manifest, parts, attrs FROM objects"
    )
    for bucket, key, etag, content_md5, manifest, parts, attrs in rows:
        owner = f"{bucket}/{key.decode()}"
        plain = digest.is_plain(etag)
        md5s = [(owner, etag)] if plain else []
        if content_md5 is not None:
            md5s.append((f"{owner} (content MD5)", content_md5))
        sizes = json.loads(parts) if parts else []
        yield _Stored(
            owner,
            catalog.decode_manifest(manifest),
            md5s,
            etag if not plain and sizes else None,
            sizes,
            json.loads(attrs).get("checksums", {}),
        )
    rows = conn.execute(
        "SELECT p.upload_id, p.number, p.etag, p.manifest, p.checksum, u.attrs "
        "FROM parts p LEFT JOIN uploads u ON u.id = p.upload_id"
    )
    for upload_id, number, etag, manifest, checksum, attrs in rows:
        owner = f"upload {upload_id} part {number}"
        algorithm = json.loads(attrs or "{}").get("checksums", {}).get("algorithm")
        stored = {"algorithm": algorithm, "value": checksum} if algorithm and checksum else {}
        yield _Stored(owner, catalog.decode_manifest(manifest), [(owner, etag)], None, [], stored)


def _check_bytes(
    conn: sqlite3.Connection, files: BlobFiles, report: Report, checksum_of: ChecksumOf | None
) -> None:
    """Read the bytes of every object and pending part once and compare them with what the
    catalog says they hash to: a plain ETag, a remembered content MD5, a multipart object's
    `-N` ETag part by part (a flipped byte in any part's blob changes it), stored checksums."""
    for stored in _stored(conn):
        whole = digest.md5()
        parts = digest.PartDigests(stored.part_sizes if stored.multipart_etag else (), digest.md5)
        checksum = checksum_of(stored.checksums, stored.part_sizes) if checksum_of else None
        try:
            for chunk in _read(conn, files, stored.extents):
                whole.update(chunk)
                parts.update(chunk)
                if checksum:
                    checksum.update(chunk)
        except OSError:
            continue  # reported already as a missing or short blob
        actual = whole.hexdigest()
        report.bad_etags += [(label, md5, actual) for label, md5 in stored.md5s if md5 != actual]
        if stored.multipart_etag:
            folded = digest.multipart_etag(parts.digests())
            if folded != stored.multipart_etag:
                report.bad_etags.append((stored.owner, stored.multipart_etag, folded))
        if checksum and checksum.actual() != checksum.expected:
            report.bad_checksums.append((stored.owner, checksum.expected, checksum.actual()))


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
