"""Scrapes share renders, and a scrape still sees every count made before it arrived."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gateway import metrics


async def test_concurrent_scrapes_share_renders(monkeypatch: pytest.MonkeyPatch) -> None:
    renders = 0

    def counting_render() -> bytes:
        nonlocal renders
        renders += 1
        return b"rendered %d" % renders

    monkeypatch.setattr(metrics, "render", counting_render)
    renderer = metrics.Renderer()
    texts = await asyncio.gather(*(renderer.render() for _ in range(200)))
    # The first scrape starts a render; those that arrive while it runs share the next one.
    assert renders <= 2
    assert set(texts) <= {b"rendered 1", b"rendered 2"}


async def test_a_scrape_sees_what_was_counted_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    rendered, release = threading.Event(), threading.Event()
    real = metrics.render

    def held_render() -> bytes:
        text = real()
        rendered.set()
        release.wait(10)  # a render that has read the counts but not answered yet
        return text

    monkeypatch.setattr(metrics, "render", held_render)
    renderer = metrics.Renderer()
    counter = metrics.COPY_ETAGS.labels("reused")
    first = asyncio.create_task(renderer.render())
    await asyncio.to_thread(rendered.wait, 10)
    counter.inc()
    second = asyncio.create_task(renderer.render())  # arrives after the count
    await asyncio.sleep(0.1)
    release.set()
    line = f's3gw_copy_etags_total{{how="reused"}} {counter._value.get()}'.encode()
    assert line not in await first
    assert line in await second
