"""Every catalog backend runs the contract suite: the Store service over it must behave as S3
says. Backends are the `harness` fixture's parameters: the SQLite catalog in a data folder, a
PostgreSQL database on the test session's server (tests/postgres.py), and another whose writes
run SERIALIZABLE (`s3gw_isolation=serializable`, as on CockroachDB or a YugabyteDB without
read committed: every race a serialization failure, 40001, that the adapter runs again)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from gateway.store import Store, open_catalog
from gateway.store.api import CatalogTx

T = TypeVar("T")

# name -> the catalog URL of a new, empty catalog (open_catalog's `url`) for a test module.
BACKENDS: dict[str, Callable[[pytest.FixtureRequest], str | None]] = {
    "sqlite": lambda request: None,  # the data folder's own
    "postgresql": lambda request: request.getfixturevalue("postgres").database(),
    "postgresql-serializable": lambda request: (
        request.getfixturevalue("postgres").database() + "?s3gw_isolation=serializable"
    ),
}


class Harness:
    """A Store over one backend, driven from synchronous tests (hypothesis runs examples
    synchronously) through one event loop."""

    def __init__(self, root: Path, url: str | None) -> None:
        self.runner = asyncio.Runner()
        self.url = url
        # Inline up to 4 bytes: most test bodies become blob files, as large objects do.
        self.store = Store(root, lambda pool: open_catalog(root, pool, url), inline_max=4)
        self.root = root
        self._names = (f"bucket-{n}" for n in itertools.count())

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coro)

    def write(self, fn: Callable[[CatalogTx], Awaitable[T]]) -> tuple[T, list[str]]:
        """A transaction straight through the catalog protocol."""

        async def go() -> tuple[T, list[str]]:
            return await self.store.catalog.write(fn)

        return self.run(go())

    def new_bucket(self, owner: str = "owner") -> str:
        name = next(self._names)
        self.run(self.store.create_bucket(name, owner, "us-east-1"))
        return name

    def close(self) -> None:
        self.store.close()
        self.runner.close()


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def harness(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Harness]:
    url = BACKENDS[request.param](request)
    h = Harness(tmp_path_factory.mktemp(f"store-{request.param}"), url)
    yield h
    h.close()
