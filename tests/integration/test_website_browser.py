"""A small site from a bucket in a real browser (headless Chromium, as the console's test runs
it): HTML, a stylesheet, a script, an image, a relative link into a folder and a routing rule's
redirect, on the website endpoint. Chromium resolves every `*.localhost` name to loopback, so
`--website-domain localhost` makes `BUCKET.localhost` the site's address without a DNS entry.
The screenshot is checked for the rendered page: the stylesheet's background and the image's
pixels where the stylesheet put them. Where the browser cannot run it skips, saying why, except
under CI=1, where it fails."""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Iterator

import pytest

from tests.process import GatewayProcess
from tests.webdriver import Browser, browser_for_test

BUCKET = "www-browser"
GREEN = (0, 128, 0)
RED = (255, 0, 0)

INDEX = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>s3gw website</title>
<link rel="stylesheet" href="style.css"></head>
<body>
<p id="status">waiting for the script</p>
<img id="logo" src="logo.png" alt="logo">
<a id="guide" href="guide/">the guide</a>
<script src="app.js"></script>
</body></html>
"""
STYLE = b"""html, body { margin: 0; background: rgb(0, 128, 0); }
#logo { position: fixed; left: 100px; top: 100px; width: 40px; height: 40px; }
#status { color: white; }
"""
SCRIPT = b"""document.getElementById("status").textContent = "script ran";"""
GUIDE = b"""<!doctype html><html><head><meta charset="utf-8"><title>guide</title></head>
<body><h1>The guide</h1></body></html>
"""


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A PNG of one colour (8-bit RGB, no filter)."""
    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """A screenshot's rows of RGB(A) bytes (8-bit RGB or RGBA, non-interlaced: what
    Chromium's screenshots are), its filters undone."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, data, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, body = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            data += body
    raw = zlib.decompress(data)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up = previous[x]
            corner = previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                pa, pb, pc = abs(guess - left), abs(guess - up), abs(guess - corner)
                nearest = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[x] = (line[x] + nearest) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, channels, rows


def _pixel(shot: tuple[int, int, list[bytes]], x: int, y: int) -> tuple[int, int, int]:
    _, channels, rows = shot
    at = x * channels
    r, g, b = rows[y][at : at + 3]
    return r, g, b


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = GatewayProcess(
        tmp_path_factory.mktemp("website-browser"),
        None,
        "--website-address",
        "127.0.0.1:0",
        "--website-domain",
        "localhost",
    ).start()
    try:
        found = re.search(r"website endpoint on http://127\.0\.0\.1:(\d+)", "".join(server.log))
        assert found, server.log
        s3 = server.client()
        s3.create_bucket(Bucket=BUCKET)
        s3.delete_public_access_block(Bucket=BUCKET)
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": "*",
                    "Action": "s3:GetObject",
                    "Resource": f"arn:aws:s3:::{BUCKET}/*",
                }
            ],
        }
        s3.put_bucket_policy(Bucket=BUCKET, Policy=json.dumps(policy))
        files = {
            "index.html": (INDEX, "text/html"),
            "style.css": (STYLE, "text/css"),
            "app.js": (SCRIPT, "text/javascript"),
            "logo.png": (_png(8, 8, RED), "image/png"),
            "guide/index.html": (GUIDE, "text/html"),
        }
        for key, (body, kind) in files.items():
            s3.put_object(Bucket=BUCKET, Key=key, Body=body, ContentType=kind)
        s3.put_bucket_website(
            Bucket=BUCKET,
            WebsiteConfiguration={
                "IndexDocument": {"Suffix": "index.html"},
                "RoutingRules": [
                    {
                        "Condition": {"KeyPrefixEquals": "old/"},
                        "Redirect": {"ReplaceKeyPrefixWith": "guide/"},
                    }
                ],
            },
        )
        yield f"http://{BUCKET}.localhost:{found.group(1)}"
    finally:
        server.stop()


@pytest.fixture
def browser() -> Iterator[Browser]:
    opened = browser_for_test()
    yield opened
    opened.close()


def test_a_site_from_a_bucket_in_a_browser(site, browser):
    browser.set_size(800, 600)
    browser.get(site + "/")
    browser.wait_for_text("script ran", "#status")
    loaded = browser.run(
        "const img = document.getElementById('logo');"
        "return [img.complete, img.naturalWidth, getComputedStyle(document.body).backgroundColor,"
        " window.devicePixelRatio];"
    )
    assert loaded[:3] == [True, 8, "rgb(0, 128, 0)"]
    ratio = loaded[3]
    shot = _pixels(browser.screenshot())
    # The stylesheet's background, away from the text; the image where the stylesheet put it.
    assert _pixel(shot, int(400 * ratio), int(400 * ratio)) == GREEN
    assert _pixel(shot, int(120 * ratio), int(120 * ratio)) == RED

    # A relative link into a folder: its index document.
    browser.click("#guide")
    browser.wait_for_url(site + "/guide/")
    browser.wait_for_text("The guide", "h1")

    # A routing rule's redirect, followed by the browser.
    browser.get(site + "/old/")
    browser.wait_for_url(site + "/guide/")
    browser.wait_for_text("The guide", "h1")
