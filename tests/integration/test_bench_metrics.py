"""`python -m bench metrics` end to end, small: it runs, floods, and reports what it measured."""

from __future__ import annotations

import json
import subprocess
import sys

from tests import REPOSITORY


def test_bench_metrics_json_end_to_end():
    out = subprocess.run(
        [sys.executable, "-m", "bench", "metrics", "--objects", "500",
         "--seconds", "1", "--puts", "3", "--flood", "4", "--json"],
        capture_output=True, text=True, timeout=300, cwd=REPOSITORY,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["puts_quiet"] == 9 and result["put_p50_quiet_ms"] > 0
    assert [f["path"] for f in result["floods"]] == ["/metrics", "/health/live"]
    for flood in result["floods"]:
        assert flood["errors"] == {}
        assert flood["requests_per_s"] > 0 and flood["puts"] > 0 and flood["ratio"] > 0
        # A background scan may fall in the flood; scrapes cause none.
        assert flood["catalog_scans"] <= 2
