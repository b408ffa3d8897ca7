"""Command line: ``python -m rcteach check`` runs the theory checks, ``bench`` the benchmark."""

from __future__ import annotations

import argparse
import json
import sys
import time

from ..checks import mutants_table, results_table, run_checks
from ..device import resolve


def _check(args) -> int:
    device, _ = resolve(args.device)
    results = run_checks(args.mode, device=device, pattern=args.k, progress=not args.json)
    if args.json:
        json.dump([r.as_dict() for r in results], sys.stdout, indent=2)
        print()
    else:
        print(f"theory checks, {args.mode} mode, device {device}" + (", mutants" if args.mutants else ""))
        print(mutants_table(results) if args.mutants else results_table(results))
    passed = all(r.passed for r in results)
    if args.mutants:  # a mutant run also needs the checks themselves to pass
        passed = passed and all(m["killed"] for r in results for m in r.mutants)
    return 0 if passed else 1


def _bench(args) -> int:
    from .bench import main as bench_main

    return bench_main(args)


def _sweep(args) -> int:
    from ..grid import run_grid
    from .sweep import executor_from

    client = executor_from(args.dask) if args.dask else None
    start = time.perf_counter()
    try:
        table = run_grid(args.out, args.configs, T=args.T, gamma=args.gamma, depth=args.depth, seeds=args.seeds,
                         base_seed=args.base_seed, authors_skip=args.authors_skip, dtype=args.dtype,
                         device=args.device, executor=client, force=args.force, progress=not args.quiet)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        if client is not None:
            client.close()
    print(f"grid: {len(table)} rows in {args.out}/depth.csv ({time.perf_counter() - start:.1f} s)")
    return 0


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
    check.add_argument("--mutants", action="store_true",
                       help="also test each check against its mutants (named wrong predictions); exit 1 if any survives")

    bench = sub.add_parser("bench", help="time rcteach against the bare torch kernels (see rcteach.tools.bench)")
    preset = bench.add_mutually_exclusive_group()
    preset.add_argument("--quick", action="store_true", help="small sizes (T <= 256), a few seconds")
    preset.add_argument("--gpu-suite", action="store_true",
                        help="CUDA, T up to 16384 within --budget seconds (scripts/gpu_benchmark.sh)")
    bench.add_argument("--sizes", type=int, nargs="+", default=None, help="values of T (default: the preset's)")
    bench.add_argument("--depths", type=int, nargs="+", default=None, help="depths of the depth section")
    bench.add_argument("--batch", type=int, default=None, help="batch of independent matrices")
    bench.add_argument("--repeats", type=int, default=None, help="timed repeats (median reported)")
    bench.add_argument("--device", default=None, help="torch device")
    bench.add_argument("--dtype", choices=["float32", "float64"], default=None,
                       help="default: float64 on the CPU, float32 on CUDA")
    bench.add_argument("--budget", type=float, default=None,
                       help="seconds: skip sizes predicted to overrun (default: none; 360 with --gpu-suite)")
    bench.add_argument("--csv", default=None, help="also write every section to this CSV file")
    bench.add_argument("--grid", action="store_true",
                       help="time the authors' 25-configuration grid (rcteach.grid), side by side with --official")
    bench.add_argument("--official", default=None, metavar="PATH",
                       help="with --grid: a checkout of the official Mind-the-Gap code, timed in the same run")
    bench.set_defaults(func=_bench)

    sweep = sub.add_parser("sweep", help="run the authors' 25-configuration depth grid (rcteach.grid) into OUT/depth.csv")
    sweep.add_argument("out", help="folder for depth.csv and its settings depth.json (rerun: resumes)")
    sweep.add_argument("--configs", default="all", help="'all' (default) or NAME,NAME,... of rcteach.grid.CONFIGS")
    sweep.add_argument("--T", type=int, nargs="+", default=None, help="token counts (default 20 40 60 80 100 150)")
    sweep.add_argument("--gamma", type=float, nargs="+", default=None, help="T/d ratios (default 1 0.5 0.2)")
    sweep.add_argument("--seeds", type=int, default=5, help="runs per point (default 5, as the authors)")
    sweep.add_argument("--depth", type=int, default=10, help="layers, every one recorded (default 10)")
    sweep.add_argument("--base-seed", type=int, default=0, help="another independent replicate of the grid")
    sweep.add_argument("--authors-skip", action="store_true",
                       help="reproduce the authors' doubled skip block (output x 2 in the '+ skip' configurations)")
    sweep.add_argument("--dtype", choices=["float32", "float64"], default="float32", help="working precision")
    sweep.add_argument("--device", default=None, help="torch device of each worker (e.g. cuda)")
    sweep.add_argument("--dask", default=None, metavar="ADDRESS",
                       help="run the points on a dask scheduler at ADDRESS, or 'local:N' for N local workers "
                            "(pip install rcteach[cluster])")
    sweep.add_argument("--force", action="store_true", help="start a new table if OUT holds one with other settings")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep.set_defaults(func=_sweep)

    from . import grading, student  # student-copy (needs jupytext); assign, grade (need otter-grader)

    student.add_subcommand(sub)
    grading.add_subcommands(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
