"""The webhook sender (gateway/notify/webhook.py) against a real HTTP server on 127.0.0.1: a 2xx
acknowledges, anything else does not, and --notify-networks is judged on what a name resolves
to at the connection (aiohttp resolves `localhost` through the sender's resolver)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from gateway.notify.networks import Networks, parse_cidrs
from gateway.notify.topics import Topic
from gateway.notify.webhook import WebhookSender


async def _serve(status: int, seen: list[bytes]) -> tuple[web.AppRunner, int]:
    async def hook(request: web.Request) -> web.Response:
        seen.append(await request.read())
        return web.Response(status=status)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port


def _topic(url: str) -> Topic:
    return Topic("acct", "t", "us-east-1", endpoint=url)


def test_acknowledged_refused_and_out_of_bounds() -> None:
    async def run() -> None:
        seen: list[bytes] = []
        ok, ok_port = await _serve(200, seen)
        down, down_port = await _serve(503, seen)
        try:
            async with WebhookSender(Networks()) as sender:
                sent = await sender.send(_topic(f"http://127.0.0.1:{ok_port}/hook"), b'{"a":1}')
                assert sent.acknowledged
                sent = await sender.send(_topic(f"http://127.0.0.1:{down_port}/hook"), b"{}")
                assert (sent.acknowledged, sent.reason) == (False, "the endpoint answered 503")
            assert seen == [b'{"a":1}', b"{}"]
            # Outside the bound: by name (through the resolver) and by address literal;
            # nothing reaches the server.
            async with WebhookSender(Networks(parse_cidrs("10.0.0.0/8"))) as sender:
                for host in ("localhost", "127.0.0.1"):
                    sent = await sender.send(_topic(f"http://{host}:{ok_port}/hook"), b"{}")
                    assert not sent.acknowledged and "--notify-networks" in sent.reason, host
            assert len(seen) == 2
        finally:
            await ok.cleanup()
            await down.cleanup()

    asyncio.run(run())
