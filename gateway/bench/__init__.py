"""`s3gw bench NAME`: benchmarks. Figures are medians and ratios measured within one run, on
one machine, because absolute numbers on a shared machine mean little."""

from __future__ import annotations

import argparse
import importlib

# name -> module; each has add_arguments(parser) and run(args) -> exit status. Modules import
# their heavy dependencies (boto3, ...) inside run(), so the CLI starts fast.
BENCHMARKS = {
    "copy": "gateway.bench.copy",
    "digest": "gateway.bench.digest",
    "list": "gateway.bench.listing",
    "metrics": "gateway.bench.scrapes",
    "s3": "gateway.bench.s3",
}


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    bench = commands.add_parser("bench", help="run a benchmark (needs the test extra)")
    which = bench.add_subparsers(dest="benchmark", required=True)
    for name, module_name in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        parser = which.add_parser(name, help=(module.__doc__ or "").strip().splitlines()[0])
        module.add_arguments(parser)
        parser.set_defaults(run=module.run)
