from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres import PostgresServer, unavailable_reason
from tests.server import GatewayProcess


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One gateway shared by the tests that only need a running server."""
    server = GatewayProcess(tmp_path_factory.mktemp("gateway-data")).start()
    yield server
    server.stop()


@pytest.fixture
def fresh_gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway of the test's own, for tests that restart or kill it."""
    server = GatewayProcess(tmp_path / "data").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the test session's own (each user makes its databases on it).
    Where PostgreSQL is not installed its tests are skipped, except in CI, which must not
    pass by skipping them."""
    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs PostgreSQL: {reason}")
        pytest.skip(reason)
    server = PostgresServer().start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def s3(gateway: GatewayProcess):  # type: ignore[no-untyped-def]
    return gateway.client()


_names = itertools.count()


@pytest.fixture
def bucket(s3) -> str:  # type: ignore[no-untyped-def]
    """A new, empty bucket for one test."""
    name = f"test-bucket-{next(_names)}"
    s3.create_bucket(Bucket=name)
    return name
