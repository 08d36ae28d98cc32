"""A browser form upload's body (multipart/form-data, RFC 7578), read as it streams.

The fields before the file are read into memory (AWS caps them: "The form data and boundaries
(excluding the contents of the file) cannot exceed 20 KB"); the file is passed on chunk by
chunk, never held whole; what follows the file is not read ("Any fields below it are
ignored", HTTPPOSTForms). The file is the part named `file`, and it must be the last field.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ..limits import KiB
from .errors import S3Error, invalid_argument

# "The form data and boundaries (excluding the contents of the file) cannot exceed 20 KB."
MAX_PRE_DATA = 20 * KiB
FILE_FIELD = "file"
# The fields whose URL the success answer sends back as its Location header.
_REDIRECT_FIELDS = ("success_action_redirect", "redirect")
# Browsers send a `"` of a name as %22 and no backslash escapes (HTML's multipart/form-data
# encoding): a quoted value ends at the next quote, and a backslash is a character of it.
_PARAM = re.compile(r';\s*([^\s=;]+)\s*=\s*("[^"]*"|[^;]*)')
_BOUNDARY = re.compile(r'boundary=("(?:[^"\\]|\\.)*"|[^;\s]+)', re.IGNORECASE)


def malformed() -> S3Error:
    return S3Error("MalformedPOSTRequest")


def boundary_of(content_type: str | None) -> bytes | None:
    """The boundary of a multipart/form-data Content-Type; None for any other type."""
    if not content_type:
        return None
    kind = content_type.partition(";")[0].strip().lower()
    if kind != "multipart/form-data":
        return None
    found = _BOUNDARY.search(content_type)
    if found is None:
        return None
    value = found.group(1)
    if value.startswith('"'):
        value = value[1:-1]
    if not 1 <= len(value) <= 70:  # RFC 2046 5.1.1
        return None
    try:
        return value.encode("ascii")
    except UnicodeEncodeError:
        return None


@dataclass
class Form:
    """The fields before the file (names lowercased: AWS reads them without case, the first of
    a repeated name counts) and the file's name as the browser sent it."""

    fields: dict[str, str] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)  # every field name, as sent, in order
    filename: str | None = None
    file_content_type: str | None = None


class FormReader:
    """Reads a multipart/form-data body from its chunks: `read_fields()` up to the file, then
    `file_chunks()` for the file's bytes, which ends at the boundary that closes it."""

    def __init__(self, chunks: AsyncIterator[bytes], boundary: bytes) -> None:
        self._chunks = chunks
        self._buf = bytearray()
        self._eof = False
        self._delimiter = b"\r\n--" + boundary
        self._consumed = 0  # bytes of pre-data (everything before the file's content)
        self.form = Form()

    async def _fill(self) -> bool:
        """One more chunk into the buffer; False at the body's end."""
        if self._eof:
            return False
        try:
            chunk = await anext(self._chunks)
        except StopAsyncIteration:
            self._eof = True
            return False
        self._buf += chunk
        return True

    def _take(self, n: int) -> bytes:
        data = bytes(self._buf[:n])
        del self._buf[:n]
        self._consumed += n
        if self._consumed > MAX_PRE_DATA:
            raise S3Error("MaxPostPreDataLengthExceededError")
        return data

    async def _until(self, marker: bytes) -> bytes:
        """The pre-data up to `marker` (which is consumed too)."""
        while True:
            at = self._buf.find(marker)
            if at >= 0:
                data = self._take(at)
                self._take(len(marker))
                return data
            if len(self._buf) + self._consumed > MAX_PRE_DATA:
                raise S3Error("MaxPostPreDataLengthExceededError")
            if not await self._fill():
                raise malformed()

    async def _after_delimiter(self) -> bool:
        """After a delimiter: True if a part follows, False at the closing `--`."""
        while len(self._buf) < 2:
            if not await self._fill():
                raise malformed()
        if self._buf[:2] == b"--":
            return False
        # Transport padding (RFC 2046 5.1.1) before the line break.
        line = await self._until(b"\r\n")
        if line.strip(b" \t"):
            raise malformed()
        return True

    async def read_fields(self) -> Form:
        """Every field up to the file; raises IncorrectNumberOfFilesInPostRequest if none."""
        # The first delimiter may open the body without a line break before it.
        self._buf += b"\r\n"
        self._consumed -= 2
        await self._until(self._delimiter)
        while await self._after_delimiter():
            headers = await self._until(b"\r\n\r\n")
            name, filename, content_type = _part_headers(headers)
            self.form.names.append(name)
            if name.lower() == FILE_FIELD:
                self.form.filename = filename
                self.form.file_content_type = content_type
                _check_redirects(self.form.fields)
                return self.form
            value = await self._until(self._delimiter)
            try:
                text = value.decode()
            except UnicodeDecodeError as exc:
                raise malformed() from exc
            self.form.fields.setdefault(name.lower(), text)
        raise S3Error("IncorrectNumberOfFilesInPostRequest")

    async def file_chunks(self) -> AsyncIterator[bytes]:
        """The file's bytes as they arrive, up to the delimiter that closes it. A body that
        ends before it is malformed (nothing is stored of a truncated file)."""
        keep = len(self._delimiter) - 1  # a delimiter may straddle two chunks
        while True:
            at = self._buf.find(self._delimiter)
            if at >= 0:
                if at:
                    yield bytes(self._buf[:at])
                del self._buf[: at + len(self._delimiter)]
                return
            if len(self._buf) > keep:
                n = len(self._buf) - keep
                yield bytes(self._buf[:n])
                del self._buf[:n]
            if not await self._fill():
                raise malformed()


def _check_redirects(fields: dict[str, str]) -> None:
    """A redirect URL with a line break cannot go out as a Location header (it would split
    the answer's headers): refused now, before the file is read and stored, not once the
    object exists and the answer fails (tests/integration/test_post_object.py)."""
    for name in _REDIRECT_FIELDS:
        value = fields.get(name, "")
        if "\r" in value or "\n" in value:
            raise invalid_argument(f"{name} must not hold a line break", name, value)


def _part_headers(raw: bytes) -> tuple[str, str | None, str | None]:
    """A part's field name, file name and Content-Type, from its header lines."""
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise malformed() from exc
    disposition = content_type = None
    for line in text.split("\r\n"):
        name, sep, value = line.partition(":")
        if not sep:
            raise malformed()
        name = name.strip().lower()
        if name == "content-disposition":
            disposition = value.strip()
        elif name == "content-type":
            content_type = value.strip()
    if disposition is None or disposition.partition(";")[0].strip().lower() != "form-data":
        raise malformed()
    params: dict[str, str] = {}
    for key, value in _PARAM.findall(disposition):
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = value[1:-1]
        params.setdefault(key.lower(), value.strip())
    field_name = params.get("name")
    if not field_name:
        raise malformed()
    return field_name, params.get("filename"), content_type


# How AWS names a missing field in its message (LS s3.snap: "X-Amz-Signature", "Signature").
_SHOWN = {
    "x-amz-algorithm": "X-Amz-Algorithm",
    "x-amz-credential": "X-Amz-Credential",
    "x-amz-date": "X-Amz-Date",
    "x-amz-signature": "X-Amz-Signature",
    "awsaccesskeyid": "AWSAccessKeyId",
    "signature": "Signature",
    "policy": "Policy",
    "key": "key",
}


def missing(name: str) -> S3Error:
    """The form lacks field `name` (lower-case)."""
    shown = _SHOWN[name]
    # Two spaces before "If": AWS's text.
    return S3Error(
        "InvalidArgument",
        f"Bucket POST must contain a field named '{shown}'.  If it is specified, please check "
        "the order of the fields.",
        ArgumentName=shown,
        ArgumentValue="",
    )
