"""The console's HTML: one layout and a few escaping helpers. Pages are small and few, so
f-strings over `html.escape` stay shorter than a template engine and its dependency."""

from __future__ import annotations

import datetime as dt
from html import escape
from urllib.parse import urlencode

from aiohttp import web

from .session import Session


def h(value: object) -> str:
    return escape(str(value), quote=True)


def url(path: str, **query: object) -> str:
    """A console URL with its query (None values left out), escaped for an attribute."""
    pairs = {k: v for k, v in query.items() if v is not None and v != ""}
    return h(path + ("?" + urlencode(pairs) if pairs else ""))


def size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def when(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def csrf_field(token: str) -> str:
    return f'<input type="hidden" name="csrf" value="{h(token)}">'


def form(action: str, token: str, fields: str, button: str, danger: bool = False) -> str:
    kind = ' class="danger"' if danger else ""
    return (
        f'<form method="post" action="{action}" class="inline">{csrf_field(token)}{fields}'
        f"<button{kind}>{h(button)}</button></form>"
    )


def hidden(name: str, value: object) -> str:
    return f'<input type="hidden" name="{h(name)}" value="{h(value)}">'


def render(
    title: str,
    body: str,
    session: Session | None = None,
    csrf: str = "",
    status: int = 200,
    notice: str = "",
) -> web.Response:
    nav = ""
    if session is not None:
        nav = (
            '<nav aria-label="main"><a href="/buckets">Buckets</a> <a href="/iam/users">IAM</a>'
            ' <a href="/topics">Topics</a> <a href="/remotes">Remotes</a>'
            ' <a href="/health">Health</a>'
            # An IAM user by its ARN, a root by its account's name.
            f' <span class="who">{h(session.user.name)} ({h(session.user.access_key)})'
            f"</span> {form('/signout', csrf, '', 'Sign out')}</nav>"
        )
    shown = f'<p class="notice" role="status">{notice}</p>' if notice else ""
    text = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf" content="{h(csrf)}">
<title>{h(title)} · s3gw console</title>
<link rel="stylesheet" href="/static/console.css">
<script src="/static/console.js" defer></script>
</head><body>
<header><a class="brand" href="/buckets">s3gw console</a>{nav}</header>
<main><h1>{h(title)}</h1>{shown}{body}</main>
</body></html>"""
    return web.Response(
        text=text,
        status=status,
        content_type="text/html",
        headers={
            # Nothing from elsewhere, no framing by other sites.
            "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store",
        },
    )


def error_box(message: str) -> str:
    return f'<p class="error" role="alert">{h(message)}</p>'
