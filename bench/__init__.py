"""`python -m bench NAME`, from the repository's root (`make bench` runs them all): the
benchmarks, kept out of the package users install. Figures are medians and ratios measured
within one run, on one machine, because absolute numbers on a shared machine mean little."""

from __future__ import annotations

import argparse
import importlib

# name -> module; each has add_arguments(parser) and run(args) -> exit status. Modules import
# their heavy dependencies (boto3, ...) inside run(), so the CLI starts fast.
BENCHMARKS = {
    "copy": "bench.copy",
    "digest": "bench.digest",
    "list": "bench.listing",
    "metrics": "bench.scrapes",
    "s3": "bench.s3",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    which = parser.add_subparsers(dest="benchmark", required=True)
    for name, module_name in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        command = which.add_parser(name, help=(module.__doc__ or "").strip().splitlines()[0])
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    args = parser.parse_args(argv)
    return int(args.run(args))
