"""XML 1.0 text as S3 writes it: one escaping for every document, the error document
included (errors.py and xml.py both use it; neither imports the other for it)."""

from __future__ import annotations

# Escape markup, keep \r from being normalised to \n by the reader, and write what XML 1.0
# cannot carry (the C0 controls but tab and newline, U+FFFE, U+FFFF) as hexadecimal character
# references, as S3 does (a key "a\x1bb" is listed as "a&#x1b;b"). Strict parsers refuse
# those references; EncodingType=url is how clients list such keys (botocore asks for it).
_ESCAPES = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;", ord("\r"): "&#13;"}
_ESCAPES.update({c: f"&#x{c:x};" for c in range(0x20) if c not in (0x09, 0x0A, 0x0D)})
_ESCAPES.update({c: f"&#x{c:x};" for c in (0xFFFE, 0xFFFF)})


def escape(text: str) -> str:
    return text.translate(_ESCAPES)
