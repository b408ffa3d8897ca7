"""Command line: ``python -m rcteach check`` runs the theory checks, ``bench`` the benchmark."""

from __future__ import annotations

import argparse
import json
import sys

from .checks import results_table, run_checks
from .device import resolve


def _check(args) -> int:
    device, _ = resolve(args.device)
    results = run_checks(args.mode, device=device, pattern=args.k, progress=not args.json)
    if args.json:
        json.dump([r.as_dict() for r in results], sys.stdout, indent=2)
        print()
    else:
        print(f"theory checks, {args.mode} mode, device {device}")
        print(results_table(results))
    return 0 if all(r.passed for r in results) else 1


def _bench(args) -> int:
    from .bench import main as bench_main

    return bench_main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rcteach", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser("check", help="run the theory checks; exit 1 if any fails")
    mode = check.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick", help="small settings (default)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full", help="large settings")
    check.set_defaults(mode="quick", func=_check)
    check.add_argument("--device", default=None, help="torch device (default: $RCTEACH_DEVICE, else cuda if available, else cpu)")
    check.add_argument("--json", action="store_true", help="print the results as JSON")
    check.add_argument("-k", default="*", metavar="GLOB", help="run only the checks whose name matches GLOB")

    bench = sub.add_parser("bench", help="time rcteach against the bare torch kernels")
    bench.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512, 1024], help="values of T")
    bench.add_argument("--batch", type=int, default=8, help="batch of independent matrices")
    bench.add_argument("--repeats", type=int, default=5, help="timed repeats (median reported)")
    bench.add_argument("--device", default=None, help="torch device")
    bench.add_argument("--csv", default=None, help="also write the table to this CSV file")
    bench.set_defaults(func=_bench)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
