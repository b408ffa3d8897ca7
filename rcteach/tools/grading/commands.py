"""The ``assign`` and ``grade`` commands of ``python -m rcteach`` (argument checks, output, exit status).

``assign [MASTER ...] [--source DIR] [-o OUT] [--check]`` builds the student notebooks and
autograders (``--check``: and checks each new master, :func:`.authoring.check_assignment`);
``grade NOTEBOOK_OR_FOLDER ... -a AUTOGRADER [-o OUT] [-j N | --dask ADDRESS] [--replay] [--backend B]`` grades a
class into the gradebook ``OUT`` (:mod:`.gradebook`); ``gradescope -a AUTOGRADER -o ZIP`` writes a
Gradescope autograder and ``gradescope-run ROOT`` grades inside it (:mod:`.gradescope`).  Exit status
1 when an assignment does not build or fails its check, or a submission could not be graded; 2 on a
usage error.  What a submission chose (its file name, its output) is printed escaped
(:func:`.answers.printable`): it cannot rewrite the instructor's terminal.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from .. import _args as arg
from .._args import UsageError
from .answers import printable

__all__ = ["add_subcommands"]


def _grading():
    from rcteach.tools import grading  # looked up when a command runs (tests replace its functions)

    return grading


def _masters(args) -> list[pathlib.Path]:
    """The masters named on the command line (checked), else those under ``--source``."""
    grading = _grading()
    for master in map(pathlib.Path, args.masters):
        named = master.suffix == ".ipynb" and master.stem == master.parent.name
        if not named or not (master.parent / grading.KEY).is_file():
            raise UsageError(f"{master} is not a master notebook <name>/<name>.ipynb with {grading.KEY} next to it")
    found = [pathlib.Path(m) for m in args.masters] or grading.masters(args.source)
    if not found:
        raise UsageError(f"--source {args.source} holds no master notebooks <name>/<name>.ipynb")
    return found


def _main_assign(args) -> int:
    from . import authoring

    grading = _grading()
    masters = _masters(args)
    try:
        built = {m.parent.name: grading.assign(m, args.output, run_tests=not args.no_run_tests) for m in masters} \
            if args.masters else grading.assign_all(args.output, source=args.source, run_tests=not args.no_run_tests)
    except RuntimeError as e:  # otter missing, or a master whose solutions fail its tests
        print(f"rcteach assign: {e}", file=sys.stderr)
        return 1
    failed = 0
    for name, paths in built.items():
        print(f"{name}: student notebook {paths['student']}, autograder {paths['autograder']}")
        if args.check:
            problems = authoring.check_assignment(paths, unsafe_no_sandbox=args.unsafe_no_sandbox, progress=print)
            print(f"{name}: " + ("check passed" if not problems else f"check FAILED ({len(problems)} problems)"))
            for problem in problems:
                print(f"  - {problem}")
            failed += bool(problems)
    return 1 if failed else 0


def _line(r: dict) -> str:
    """The terminal line of one result (escaped: the file name and the notes are the student's)."""
    if not r["graded"]:
        return printable(f"{r['notebook']}: {r['notes'][0]}")
    notes = "; ".join(r["notes"])
    return printable(f"{r['notebook']}: {r['score']:g} / {r['possible']:g}" + (f"  ({notes})" if notes else ""))


def _main_grade(args) -> int:
    """Grade each submission into the gradebook; one that cannot be graded is a row saying why, and the exit status
    is 1."""
    from tqdm.auto import tqdm

    from . import gradebook, submissions

    if args.replay and args.output is None:
        raise UsageError("--replay needs -o OUT, the gradebook that holds the seeds")
    grading = _grading()
    try:
        sandbox = grading._sandbox()
    except ImportError as err:  # Windows, macOS: the same for every submission
        raise UsageError(str(err)) from err
    assignment = grading.load(args.autograder)
    subs = submissions.collect(args.submissions, assignment.name)
    if not subs:
        raise UsageError(f"no notebooks ({submissions.NOTEBOOK_SUFFIX}) found in {', '.join(args.submissions)}")
    book = None
    if args.output is not None:
        try:
            book = gradebook.Gradebook(args.output, assignment.name, assignment.points)
        except ValueError as err:
            raise UsageError(str(err)) from None
        subs = book.match(subs)
    seeds = {s.student: seed for s in subs if (seed := book.seed(s.student)) is not None} if args.replay else {}
    executor = None
    if args.dask:
        from ...sweep import executor_from

        try:
            executor = executor_from(args.dask)
        except ValueError as err:
            raise UsageError(f"--dask: {err}") from None
    failed = 0
    try:
        results = grading.grade_all(subs, args.autograder, jobs=args.jobs, executor=executor, timeout=args.timeout,
                                    cell_timeout=args.cell_timeout, backend=args.backend,
                                    unsafe_no_sandbox=args.unsafe_no_sandbox, seeds=seeds)
        for r in tqdm(results, total=len(subs), desc="grading", unit="notebook", disable=None, file=sys.stderr):
            tqdm.write(_line(r))
            if not r["graded"]:
                print(printable(f"{r['notebook']}: could not be graded: {r['error']}"), file=sys.stderr)
                failed += 1
            if book is not None:
                book.add(r)
    except sandbox.SandboxUnavailable as e:  # the same for every submission: install bwrap or pass the flag
        raise UsageError(str(e)) from e
    finally:
        if executor is not None:
            executor.close()
    if book is not None and book.rows:
        for s in book.finish():
            print(f"{s['question']}: mean {s['mean'] or '-'} / {s['points']} over {s['graded']} graded "
                  f"({s['full']} full marks, {s['none']} none)")
        print(f"-> {args.output}/: {gradebook.SCORES} ({len(book.rows)} students), {gradebook.CANVAS}, "
              f"{gradebook.QUESTIONS}, results/, feedback/")
    return 1 if failed else 0


def _main_gradescope(args) -> int:
    from . import gradescope

    print(gradescope.autograder_zip(args.autograder, args.output, timeout=args.timeout))
    return 0


def _main_gradescope_run(args) -> int:
    """Always exit 0 with a results.json written: a failure is a result (see :func:`.gradescope.run_submission`)."""
    from . import gradescope

    gradescope.run_submission(args.root, timeout=args.timeout, backend=args.backend)
    return 0


def _autograder_arg(text: str) -> str:
    """``-a``: an autograder folder built by ``assign`` (argparse ``type=``)."""
    try:
        _grading()._autograder_dir(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def add_subcommands(sub) -> None:
    """Register ``assign`` and ``grade`` on the rcteach CLI's subparsers."""
    grading = _grading()
    a = sub.add_parser("assign", help="build student notebooks and autograders from assignments/ (otter assign)")
    a.add_argument("masters", nargs="*", type=arg.existing_file,
                   help="master notebooks <name>/<name>.ipynb (default: every one under --source)")
    a.add_argument("-o", "--output", type=arg.output_dir, default="_build/assignments",
                   help="build folder (default _build/assignments)")
    a.add_argument("--source", type=arg.existing_dir, default=str(grading.ASSIGNMENTS_DIR),
                   help="folder of <name>/<name>.ipynb masters")
    a.add_argument("--no-run-tests", action="store_true", help="do not check the solutions against the tests")
    a.add_argument("--check", action="store_true",
                   help="also check each master: solutions score full marks, the blank notebook 0, and the public "
                        "tests and the key reject the key's WRONG answers")
    a.add_argument("--unsafe-no-sandbox", action="store_true", help="with --check: grade without bwrap")
    a.set_defaults(func=_main_assign)
    g = sub.add_parser("grade", help="grade submissions, each in a fresh sandbox; the verdict is computed outside it")
    g.add_argument("submissions", type=arg.existing_path, nargs="+",
                   help="student notebooks (.ipynb), or folders of them (flat, per student, or nbgrader's submitted/)")
    g.add_argument("-a", "--autograder", type=_autograder_arg, required=True,
                   help="the autograder folder built by `assign`")
    g.add_argument("--timeout", type=arg.positive_float, default=600,
                   help="wall-clock (and CPU) limit per submission in seconds")
    g.add_argument("--cell-timeout", type=arg.positive_float, default=None,
                   help="soft limit per cell and per answer in seconds (default: --timeout)")
    g.add_argument("--backend", choices=grading.BACKENDS, default="auto",
                   help="bwrap (user namespaces), container (root in a fresh container: runs the submission as an "
                        "unprivileged user), or auto (bwrap where it works, else container as root)")
    g.add_argument("-o", "--output", default=None,
                   help="gradebook folder: scores.csv (merged by student), canvas.csv, questions.csv, results/, "
                        "feedback/")
    at_once = g.add_mutually_exclusive_group()
    at_once.add_argument("-j", "--jobs", type=arg.positive_int, default=None,
                         help="submissions graded at once, each in its own sandbox (default: the number of cores)")
    at_once.add_argument("--dask", default=None, metavar="ADDRESS",
                         help="run the sandboxes on a dask scheduler at ADDRESS, or 'local:N' for N local workers "
                              "(each needs bwrap; pip install rcteach[cluster])")
    g.add_argument("--replay", action="store_true",
                   help="ask each student the same inputs as in the gradebook's last grading (its seeds)")
    g.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="grade even where no bwrap sandbox works: a submission can then read the answers and change "
                        "files")
    g.set_defaults(func=_main_grade)
    z = sub.add_parser("gradescope",
                       help="write a Gradescope autograder zip (setup.sh, run_autograder) for an assignment")
    z.add_argument("-a", "--autograder", type=_autograder_arg, required=True,
                   help="the autograder folder built by `assign`")
    z.add_argument("-o", "--output", required=True, help="the zip to write")
    z.add_argument("--timeout", type=arg.positive_float, default=600,
                   help="wall-clock (and CPU) limit per submission in seconds")
    z.set_defaults(func=_main_gradescope)
    r = sub.add_parser("gradescope-run", help="(inside Gradescope's container) grade ROOT/submission into ROOT/results")
    r.add_argument("root", type=arg.existing_dir, help="the autograder root (/autograder on Gradescope)")
    r.add_argument("--timeout", type=arg.positive_float, default=600, help="wall-clock (and CPU) limit in seconds")
    r.add_argument("--backend", choices=grading.BACKENDS, default="auto", help="the sandbox backend (default auto)")
    r.set_defaults(func=_main_gradescope_run)
