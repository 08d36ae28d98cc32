"""`python -m bench s3`'s plan and its CPU ratios, from a made-up result (the end-to-end run is in
tests/integration/test_bench.py)."""

from __future__ import annotations

from typing import Any

from bench import s3


def test_single_feature_configurations_run_the_small_c64_workloads_only() -> None:
    names = ["gateway_1_worker", "gateway_policy", "gateway_log_off", "gateway_replicating"]
    plan = s3._plan(names, 1)
    ran = {name: {w for _, w, n in plan if n == name} for name in (*s3.SERVERS, s3.TRIVIAL)}
    assert (
        ran["gateway_1_worker"] == set(s3.DEFAULT_WORKLOADS) == set(s3.WORKLOADS) - {"replication"}
    )
    assert ran["gateway_replicating"] == {"replication"}
    assert ran["gateway_policy"] == ran["gateway_log_off"] == {"put_c64", "get_c64"}
    assert ran[s3.TRIVIAL] == set(s3.TRIVIAL_WORKLOADS)


def _small(ops: float, cpu: float, p99: float) -> dict[str, Any]:
    return {
        "ops_per_s": ops,
        "server_cpu_us_per_op": cpu,
        "client_cpu_us_per_op": 10.0,
        "p50_ms": p99 / 2,
        "p99_ms": p99,
        "rss_sum_mib": 50.0,
        "rss_max_process_mib": 50.0,
    }


def _result() -> dict[str, Any]:
    def server(put_cpu: float, get_cpu: float, p99: float) -> dict[str, Any]:
        return {
            "workloads": {
                "put_c64": _small(1000, put_cpu, p99),
                "get_c64": _small(2000, get_cpu, p99),
            }
        }

    result: dict[str, Any] = {
        "config": {
            "seconds": 1,
            "repeats": 1,
            "large_mib": 8,
            "copy_sizes_mib": [1, 8],
            "servers": ["gateway_1_worker", "gateway_log_off", "SeaweedFS"],
            "cpus": 2,
        },
        "elapsed_s": 1.0,
        "servers": {
            "gateway_1_worker": server(150.0, 100.0, 20.0),
            "gateway_log_off": server(120.0, 80.0, 18.0),
            "SeaweedFS": server(300.0, 150.0, 33.3),
            s3.TRIVIAL: server(50.0, 40.0, 5.0),
        },
        "ceilings": {},
        "load_generator": {},
        "load_average": "1.00 2.00 3.00",
        "errors": [],
    }
    result["ratios"] = s3._ratios(result)
    return result


def test_cpu_per_request_is_judged_against_the_trivial_servers() -> None:
    ratios = {(r["name"], r["key"]): r for r in _result()["ratios"]}
    put = ratios[
        "server CPU per 4 KiB PUT c64 gateway 1w / trivial aiohttp", "put_c64_cpu_vs_trivial"
    ]
    assert put["value"] == 3.0 and put["met"] is True  # target <= 3
    get = ratios[
        "server CPU per 4 KiB GET c64 gw log off / trivial aiohttp", "get_c64_cpu_vs_trivial"
    ]
    assert get["value"] == 2.0 and get["met"] is True
    get = ratios[
        "server CPU per 4 KiB GET c64 gateway 1w / trivial aiohttp", "get_c64_cpu_vs_trivial"
    ]
    assert get["value"] == 2.5 and get["met"] is True
    assert not any("SeaweedFS /" in name for name, _ in ratios)  # gateways only


def test_the_table_shows_every_configuration_and_the_logs_cost() -> None:
    table = s3._small_c64_table(_result(), ["gateway_1_worker", "gateway_log_off", "SeaweedFS"])
    rows = {line.split("  ")[1].strip(): line for line in table[2:] if line.startswith("  gw")}
    assert "gw log off" in rows and "120" in rows["gw log off"]
    seaweed = next(line for line in table if line.startswith("  SeaweedFS"))
    assert "33.3" in seaweed  # its p99 beside the gateway's
    assert table[-1].endswith("PUT 1.25, GET 1.25")  # 150/120 and 100/80
