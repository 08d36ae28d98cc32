"""The tests' PostgreSQL server: gateway/bench/postgres.py (the benchmarks start the same one)."""

from __future__ import annotations

from gateway.bench.postgres import USER, PostgresServer, _free_port, find_bin, unavailable_reason

__all__ = ["USER", "PostgresServer", "_free_port", "find_bin", "unavailable_reason"]
