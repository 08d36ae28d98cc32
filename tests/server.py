"""The gateway process the integration tests drive (shared with the benchmarks)."""

from gateway.bench.process import ACCESS_KEY, SECRET_KEY, GatewayProcess

__all__ = ["ACCESS_KEY", "SECRET_KEY", "GatewayProcess"]
