"""Command line: ``python -m rcteach check`` runs the theory checks, ``bench`` the benchmark.

Exit status (set once, in :func:`main`): 0 success, 1 a check failed, a mutant survived or a
submission could not be graded, 2 a usage error, 3 an internal error (``--verbose``: the traceback),
130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import sys
import time
import traceback
from dataclasses import dataclass

from .. import __version__
from ..checks import all_checks, mutants_table, results_table, run_check
from ..checks.registry import Check
from . import _args as arg
from ._args import UsageError

PROG = "rcteach" if os.path.basename(sys.argv[0]) == "rcteach" else "python -m rcteach"  # the console script, or -m


@dataclass(frozen=True)
class CheckError:
    """A check that raised: a row of the results with verdict ERROR instead of a lost run."""

    check: Check
    error: str  # "<type>: <message>"
    passed = False
    verdict = "ERROR"
    skipped = None
    mutants = ()
    rules = ()

    def as_dict(self) -> dict:
        return {"name": self.check.name, "claim": self.check.claim, "source": self.check.source, "setting": {},
                "seeds": list(self.check.base_seeds), "seed": None, "prediction": None, "measured": None,
                "tolerance": None, "relative": None, "tolerance_note": self.check.tolerance_note,
                "coarse": self.check.coarse, "passed": False, "seconds": None, "resolves": None, "per_seed": [],
                "mutants": [], "rules": [], "verdict": "ERROR", "error": self.error}


def _run(name: str, mode: str, device: str):
    try:
        return run_check(name, mode, device=device)
    except Exception as err:  # a check that raises is reported, and the others still run
        return CheckError(all_checks()[name], f"{type(err).__name__}: {err}")


def _strict(value):
    """``value`` with every non-finite float replaced by None, and the non-finite values met (as text)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None, [str(value)]
    if isinstance(value, (list, tuple)):
        pairs = [_strict(v) for v in value]
        return [v for v, _ in pairs], [n for _, notes in pairs for n in notes]
    if isinstance(value, dict):
        pairs = {k: _strict(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, [n for _, notes in pairs.values() for n in notes]
    return value, []


def strict_row(row: dict) -> dict:
    """A result row as strict JSON data: a non-finite number becomes null, and the field ``<key>_note``
    says what it was (``"inf"``, ``"-inf"``, ``"nan"``; several, comma-separated, for a list)."""
    out = {}
    for key, value in row.items():
        out[key], notes = _strict(value)
        if notes:
            out[f"{key}_note"] = ", ".join(dict.fromkeys(notes))
    return out


def _text(results, mutants: bool) -> str:
    """The results (or mutants) table, with a row per check that raised and their count."""
    ok = [r for r in results if not isinstance(r, CheckError)]
    errors = [r for r in results if isinstance(r, CheckError)]
    lines = (mutants_table(ok) if mutants else results_table(ok)).split("\n")
    if not errors:
        return "\n".join(lines)
    width = max(len(r.check.name) for r in errors)
    return "\n".join(lines[:-1] + [f"{r.check.name.ljust(width)}  ERROR  {r.error}" for r in errors]
                     + [f"{lines[-1]}; {len(errors)} raised (ERROR)"])


def _check(args) -> int:
    device = args.device or arg.checked_device()
    globs = args.k or ["*"]
    names = [n for n in all_checks() if any(fnmatch.fnmatch(n, glob) for glob in globs)]
    if not names:
        shown = " -k ".join(map(repr, globs))
        raise UsageError(f"-k {shown} matches no check; registered: {', '.join(all_checks())}")
    if not args.json:
        from tqdm.auto import tqdm

        names = tqdm(names, desc=f"theory checks ({args.mode})", unit="check")
    try:
        results = [_run(n, args.mode, device) for n in names]
    finally:
        getattr(names, "close", lambda: None)()  # the progress bar ends its line, also on Ctrl-C
    if args.json:
        rows = [{"verdict": r.verdict, **r.as_dict()} for r in results]
        print(json.dumps([strict_row(row) for row in rows], indent=2, allow_nan=False))
    else:
        print(f"theory checks, {args.mode} mode, device {device}" + (", mutants" if args.mutants else ""))
        print(_text(results, args.mutants))
    passed = all(r.verdict in ("PASS", "SKIPPED") for r in results)  # a missing optional extra fails nothing
    if args.mutants:  # a mutant run also needs the checks themselves to pass, and the registration rules kept
        passed = passed and all(m["killed"] for r in results for m in r.mutants) and not any(r.rules for r in results)
    return 0 if passed else 1


def _bench(args) -> int:
    from .bench import main as bench_main

    return bench_main(args)


def _sweep(args) -> int:
    import importlib.util

    from ..grid import run_grid
    from ..sweep_store import DiskFull

    if args.dask and importlib.util.find_spec("distributed") is None:
        raise UsageError("--dask needs dask: pip install 'rcteach[cluster]' (or -r requirements-cluster.txt)")
    if args.device is not None and (args.dask is None or args.dask.startswith("local:")):
        arg.checked_device(args.device)  # the points run on this machine
    start = time.perf_counter()
    try:
        table = run_grid(args.out, args.configs, T=arg.distinct("--T", args.T),
                         gamma=arg.distinct("--gamma", args.gamma),
                         depth=args.depth, seeds=args.seeds, base_seed=args.base_seed, authors_skip=args.authors_skip,
                         dtype=args.dtype, device=args.device, executor=args.dask, force=args.force,
                         progress=not args.quiet)
    except DiskFull as err:  # the points finished so far are stored: rerun with space
        print(f"{PROG} sweep: {err.strerror}", file=sys.stderr)
        return 1
    except ValueError as err:  # bad settings, other settings in OUT, OUT in use or damaged: exit 2
        raise UsageError(str(err)) from err
    print(f"grid: {len(table)} rows in {args.out}/depth.csv ({time.perf_counter() - start:.1f} s)")
    return 0


DESCRIPTION = ("rcteach: rank collapse in attention layers, taught and checked. Run the theory checks, time the "
               "kit, run the authors' depth grid, write the book's chapters as notebooks, build and grade assignments.")
EPILOG = ("exit status: 0 success; 1 a check failed, a mutant survived or a submission could not be graded; "
          "2 a usage error; 3 an internal error (--verbose shows the traceback); 130 interrupted (Ctrl-C). "
          "Threads: one torch thread unless RCTEACH_THREADS or OMP_NUM_THREADS says otherwise.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"rcteach {__version__}")
    parser.add_argument("--verbose", action="store_true", help="show the traceback of an internal error (exit 3)")
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser("check", help="run the theory checks; exit 1 if any fails")
    mode = check.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick", help="small settings (default)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full", help="large settings")
    check.set_defaults(mode="quick", func=_check)
    check.add_argument("--device", type=arg.device, default=None,
                       help="torch device (default: $RCTEACH_DEVICE, else cuda if available, else cpu)")
    check.add_argument("--json", action="store_true", help="print the results as JSON")
    check.add_argument("-k", action="append", metavar="GLOB",
                       help="run only the checks whose name matches GLOB (repeated: any of the GLOBs)")
    check.add_argument("--mutants", action="store_true",
                       help=("also test each check against its mutants (declared wrong predictions, and the prediction "
                             "off by 1.5 x resolves and by 5%%, generated) on every base seed; exit 1 if any survives "
                             "or a check lacks a declared mutant within 2 x resolves on a side"))

    bench = sub.add_parser("bench", help="time rcteach against the bare torch kernels (see rcteach.tools.bench)")
    preset = bench.add_mutually_exclusive_group()
    preset.add_argument("--quick", action="store_true", help="small sizes (T <= 256), a few seconds")
    preset.add_argument("--gpu-suite", action="store_true",
                        help="CUDA, T up to 16384 within --budget seconds (scripts/gpu_benchmark.sh)")
    bench.add_argument("--sizes", type=arg.token_count, nargs="+", default=None,
                       help="values of T (default: the preset's)")
    bench.add_argument("--depths", type=arg.positive_int, nargs="+", default=None, help="depths of the depth section")
    bench.add_argument("--batch", type=arg.positive_int, default=None, help="batch of independent matrices")
    bench.add_argument("--repeats", type=arg.positive_int, default=None, help="timed repeats (median reported)")
    bench.add_argument("--device", type=arg.device, default=None, help="torch device")
    bench.add_argument("--dtype", choices=["float32", "float64"], default=None,
                       help="default: float64 on the CPU, float32 on CUDA")
    bench.add_argument("--budget", type=arg.positive_float, default=None,
                       help="seconds: skip sizes predicted to overrun (default: none; 360 with --gpu-suite)")
    bench.add_argument("--csv", type=arg.file_in_existing_dir, default=None,
                       help="also write every section to this CSV file")
    bench.add_argument("--grid", action="store_true",
                       help="time the authors' 25-configuration grid (rcteach.grid), side by side with --official")
    bench.add_argument("--official", type=arg.existing_dir, default=None, metavar="PATH",
                       help="with --grid: a checkout of the official Mind-the-Gap code, timed in the same run")
    bench.add_argument("--threads", action="store_true",
                       help="time the README's `check` with no thread variable set against OMP_NUM_THREADS=1, each "
                            "in fresh processes (--repeats pairs; target ratio <= 1.2)")
    bench.set_defaults(func=_bench)

    sweep = sub.add_parser("sweep",
                           help="run the authors' 25-configuration depth grid (rcteach.grid) into OUT/depth.csv")
    sweep.add_argument("out", type=arg.output_dir,
                       help="folder for depth.csv, its settings depth.json and its store depth.points/ "
                            "(rerun: resumes)")
    sweep.add_argument("--configs", default="all", help="'all' (default) or NAME,NAME,... of rcteach.grid.CONFIGS")
    sweep.add_argument("--T", type=arg.token_count, nargs="+", default=None,
                       help="token counts (default 20 40 60 80 100 150)")
    sweep.add_argument("--gamma", type=arg.ratio, nargs="+", default=None,
                       help="T/d ratios in (0, 1] (default 1 0.5 0.2)")
    sweep.add_argument("--seeds", type=arg.positive_int, default=5, help="runs per point (default 5, as the authors)")
    sweep.add_argument("--depth", type=arg.positive_int, default=10, help="layers, every one recorded (default 10)")
    sweep.add_argument("--base-seed", type=arg.seed, default=0, help="another independent replicate of the grid")
    sweep.add_argument("--authors-skip", action="store_true",
                       help="reproduce the authors' doubled skip block (output x 2 in the '+ skip' configurations)")
    sweep.add_argument("--dtype", choices=["float32", "float64"], default="float32", help="working precision")
    sweep.add_argument("--device", type=arg.device_name, default=None,
                       help="torch device of each worker (e.g. cuda; checked here unless --dask names a scheduler)")
    sweep.add_argument("--dask", type=arg.dask_address, default=None, metavar="ADDRESS",
                       help="run the points on a dask scheduler at ADDRESS, or 'local:N' for N local workers "
                            "(pip install rcteach[cluster])")
    sweep.add_argument("--force", action="store_true", help="start a new table if OUT holds one with other settings")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep.set_defaults(func=_sweep)

    # assign, grade (need otter-grader); grading's sandbox loads only to grade
    from . import grading, notebooks, student

    notebooks.add_subcommand(sub)
    student.add_subcommand(sub)
    grading.add_subcommands(sub)
    for command in sub.choices.values():  # --verbose after the command too (SUPPRESS keeps one given before it)
        command.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


def main(argv=None) -> int:
    """Run the command line; returns the exit status.

    0 success; 1 a check failed, a mutant survived or a submission could not be graded; 2 a usage
    error (argparse's convention; also a bad value found after parsing, :class:`UsageError`); 3 an
    internal error (an unexpected exception: one line on stderr, the traceback with ``--verbose``);
    130 (128 + SIGINT, the shell's convention) when interrupted with Ctrl-C: one line, no traceback.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse: 2 after a usage error, 0 after --help
        return stop.code or 0
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130
    except UsageError as err:
        print(f"{PROG} {args.command}: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:
        print(f"{PROG} {args.command}: internal error: {type(err).__name__}: {err}"
              + ("" if args.verbose else " (--verbose shows the traceback)"), file=sys.stderr)
        if args.verbose:
            traceback.print_exc()
        return 3
