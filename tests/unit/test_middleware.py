"""The middleware's answer to a catalog database out of reach: 503 ServiceUnavailable, which
clients retry, with nothing of what the database said (its address) sent to the client."""

from __future__ import annotations

import logging

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.s3.middleware import S3Middleware
from gateway.store import errors

LOST = "cannot reach the catalog postgresql://gw@10.1.2.3:5432/s3: Connection refused"


@pytest.mark.parametrize(
    "exc", [errors.CatalogUnavailable(LOST), errors.CommitOutcomeUnknown(LOST)], ids=type
)
async def test_a_lost_catalog_is_503_without_its_details(
    exc: errors.StoreError, caplog: pytest.LogCaptureFixture
) -> None:
    async def dispatch(request: web.Request) -> web.StreamResponse:
        raise exc

    with caplog.at_level(logging.WARNING, "gateway.s3.middleware"):
        response = await S3Middleware(dispatch)(make_mocked_request("GET", "/bucket/key"))
    assert response.status == 503
    body = response.body.decode()  # type: ignore[union-attr]
    assert "<Code>ServiceUnavailable</Code>" in body and "<Resource>" not in body
    assert "10.1.2.3" not in body and "postgresql" not in body
    # The operator's log has the reason, as a warning, without a traceback.
    (record,) = [r for r in caplog.records if r.name == "gateway.s3.middleware"]
    assert record.levelno == logging.WARNING and "10.1.2.3" in record.getMessage()
    assert record.exc_info is None
