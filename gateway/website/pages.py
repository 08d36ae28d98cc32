"""The website endpoint's error pages: HTML, as AWS's website endpoints answer ("Website
endpoints": "returns an HTML document"), with the error's code and message in headers too."""

from __future__ import annotations

from http import HTTPStatus

from aiohttp import web

from ..s3.errors import S3Error
from ..s3.xmltext import escape


def _items(exc: S3Error) -> list[str]:
    return [
        f"<li>Code: {escape(exc.code)}</li>",
        f"<li>Message: {escape(exc.message)}</li>",
        *(f"<li>{escape(name)}: {escape(value)}</li>" for name, value in exc.fields.items()),
    ]


def error_page(
    exc: S3Error,
    request_id: str,
    host_id: str,
    method: str,
    document_error: S3Error | None = None,
) -> web.Response:
    """The page of `exc`; `document_error`: why the bucket's error document could not be sent
    instead (AWS adds that section to its own page)."""
    try:
        reason = HTTPStatus(exc.status).phrase
    except ValueError:
        reason = ""
    title = escape(f"{exc.status} {reason}".strip())
    lines = [
        "<html>",
        f"<head><title>{title}</title></head>",
        "<body>",
        f"<h1>{title}</h1>",
        "<ul>",
        *_items(exc),
        f"<li>RequestId: {escape(request_id)}</li>",
        f"<li>HostId: {escape(host_id)}</li>",
        "</ul>",
    ]
    if document_error is not None:
        lines += [
            "<h3>An Error Occurred While Attempting to Retrieve a Custom Error Document</h3>",
            "<ul>",
            *_items(document_error),
            "</ul>",
        ]
    lines += ["<hr/>", "</body>", "</html>", ""]
    headers = {"x-amz-error-code": exc.code, "x-amz-error-message": _header(exc.message)}
    for name, value in exc.fields.items():
        headers["x-amz-error-detail-" + name] = _header(value)
    if exc.code == "MethodNotAllowed":
        headers["Allow"] = "GET, HEAD"
    body = None if method == "HEAD" else "\n".join(lines).encode("utf-8", "replace")
    response = web.Response(status=exc.status, headers=headers, body=body)
    response.content_type = "text/html"
    response.charset = "utf-8"
    return response


def _header(value: str) -> str:
    """A value as a header can carry it: printable ASCII (a key may hold anything)."""
    return "".join(c if " " <= c <= "~" else "?" for c in value)
