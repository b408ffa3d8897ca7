"""Course assignments: build them with otter-grader, grade them so that a submission cannot change its verdict.

The master notebooks live in ``assignments/<name>/<name>.ipynb`` (Otter Assign format: solutions,
public and hidden tests) next to ``key.py``, the answer key of the trusted grader; an installed
rcteach ships them (:data:`ASSIGNMENTS_DIR`).  Needs the optional extra ``pip install
'rcteach[assign]'`` (otter-grader, ipykernel) and, to grade, Linux with bubblewrap (``bwrap``).

* :func:`assign_all` runs ``otter assign`` on every master notebook and writes, per assignment,
  ``<build>/<name>/student/`` (the notebook handed out; students run the public tests with
  ``grader.check``) and ``<build>/<name>/autograder/`` (the solutions notebook, otter's zip, and
  for this grader the answer key and the points: the folder is the AUTOGRADER of ``grade``; and
  ``<name>-gradescope.zip``, this grader as a Gradescope autograder, see :mod:`.gradescope`).
* :func:`grade` runs a submission in a fresh sandbox (:mod:`.sandbox`, :mod:`.harness`) that sees
  no answer key, no solutions and no tests; the submission answers the key's asks (values, and its
  functions on inputs drawn for this run) as plain data, which this process marks (:mod:`.verdict`)
  against the solutions' answers to the same asks, computed here.

Command line: ``python -m rcteach assign [-o _build/assignments]``,
``python -m rcteach grade NOTEBOOK_OR_FOLDER... -a AUTOGRADER_FOLDER [--timeout 600] [-o DIR] [--backend auto]``,
``python -m rcteach gradescope -a AUTOGRADER_FOLDER -o ZIP`` and (inside Gradescope's container)
``python -m rcteach gradescope-run /autograder``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import importlib.util
import json
import math
import os
import pathlib
import platform
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import zipfile

from ... import _extras, _files
from .._args import UsageError, existing_dir, existing_path, output_dir, positive_float
from . import answers, gradescope, harness, intake, verdict

__all__ = ["ASSIGNMENTS_DIR", "masters", "assign", "assign_all", "grade", "question_points"]

#: The masters: shipped with an installed rcteach, the repository's ``assignments/`` in a checkout.
ASSIGNMENTS_DIR = _files.assignments_dir()
#: The sandbox backends of :mod:`.sandbox` (``auto`` chooses by a probe).
BACKENDS = ("auto", "bwrap", "container")


def _sandbox():
    """:mod:`.sandbox`, imported when grading (it needs Linux: ``resource``, bubblewrap), so that every
    other command works on Windows and macOS.  An ImportError saying so where it cannot load."""
    try:
        from . import sandbox
    except ImportError as err:
        raise ImportError(f"grading runs each submission in a bubblewrap sandbox, which needs Linux; this system "
                          f"({platform.system()}) lacks the module {err.name or err}") from err
    return sandbox


def _otter() -> list[str]:
    """The otter command of this interpreter's environment."""
    exe = pathlib.Path(sys.executable).with_name("otter")
    if not exe.exists():
        raise RuntimeError(f"otter-grader is not installed: {_extras.install_line('assign')}")
    return [str(exe)]


def masters(source=ASSIGNMENTS_DIR) -> list[pathlib.Path]:
    """The master notebooks ``<source>/*/*.ipynb``, sorted."""
    return sorted(pathlib.Path(source).glob("*/*.ipynb"))


def assign(master, build="_build/assignments", *, run_tests=True, timeout=600) -> dict:
    """Run ``otter assign`` on one master notebook into ``build/<name>/`` (``<name>``: its folder).

    ``run_tests=True`` lets otter check that the master's solutions pass all its tests; ``timeout``:
    seconds ``otter assign`` may take.  Returns ``{"student": student notebook, "autograder":
    autograder folder}`` (with the master's ``key.py``, ``questions.json`` (the points of each
    question) and ``<name>-gradescope.zip``, see :mod:`.gradescope`; otter's own zip also installs
    torch and rcteach).  Raises ``RuntimeError`` with otter's output if the assignment fails to build.
    """
    master = pathlib.Path(master)
    if not master.is_file() or not (master.parent / KEY).is_file():
        raise ValueError(f"master {master} does not exist or has no {KEY} next to it")
    target = pathlib.Path(build) / master.parent.name
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    cmd = _otter() + ["assign", "--no-pdfs"] + ([] if run_tests else ["--no-run-tests"]) + [str(master), str(target)]
    for _ in range(KERNEL_START_ATTEMPTS):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env())
        if not _kernel_port_race(proc.stdout + proc.stderr):
            break
    zips = sorted((target / "autograder").glob("*.zip"))
    if proc.returncode != 0 or not zips:
        raise RuntimeError(f"otter assign failed for {master}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    autograder = target / "autograder"
    shutil.copyfile(master.parent / KEY, autograder / KEY)
    (autograder / QUESTIONS).write_text(json.dumps({"name": master.stem, "points": question_points(master)}))
    _add_rcteach_to_otter_zip(zips[0])
    gradescope.autograder_zip(autograder, autograder / f"{master.stem}-gradescope.zip")  # 600 s per submission
    return {"student": target / "student" / master.name, "autograder": autograder}


def _add_rcteach_to_otter_zip(path: pathlib.Path) -> None:
    """Make otter's Gradescope zip install what the notebooks import: torch (CPU build) and rcteach
    (its source, added under ``files/``), pinned, in the pip list of its ``environment.yml``."""
    import yaml

    with zipfile.ZipFile(path) as zf:
        entries = {info.filename: (info, zf.read(info)) for info in zf.infolist()}
    env = yaml.safe_load(entries["environment.yml"][1])
    pip = next(d for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)["pip"]
    pip[:0] = [f"--extra-index-url {gradescope.TORCH_INDEX}", *gradescope.requirements().split()]
    pip.append(f"/autograder/source/files/{gradescope.PROJECT}")
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, (info, data) in entries.items():
            zf.writestr(info, yaml.safe_dump(env, sort_keys=False) if name == "environment.yml" else data)
        gradescope.add_project(zf, f"files/{gradescope.PROJECT}")
    tmp.replace(path)


def assign_all(build="_build/assignments", *, source=ASSIGNMENTS_DIR, run_tests=True, timeout=600) -> dict:
    """:func:`assign` every master notebook of ``source`` into ``build``: ``{name: {"student", "autograder"}}``."""
    return {m.parent.name: assign(m, build, run_tests=run_tests, timeout=timeout) for m in masters(source)}


#: Runs of otter that lost the kernel's TCP ports to another process are repeated, up to this many
#: runs in all: jupyter_client picks free ports and the kernel binds them a moment later, so a kernel
#: started at the same moment elsewhere can take one (jupyter/jupyter_client#487).
KERNEL_START_ATTEMPTS = 3


def _kernel_port_race(output: str) -> bool:
    """Whether otter's output shows a kernel that could not bind its ports (the race above)."""
    return "Address already in use" in output


def _env() -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    return env


#: What ``assign`` adds to otter's autograder folder for the trusted grader (none of it is ever
#: visible to a submission): the answer key and the points of each question.
KEY, QUESTIONS = "key.py", "questions.json"
#: The rcteach package (visible and importable, read-only, in the sandbox) and the folder of the harness in it.
PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[2]
HARNESS_DIR = pathlib.Path(__file__).resolve().parent
#: Imported in the sandbox before a notebook's first cell (if the notebook names them), so that their
#: import time does not count against the per-cell limit.
PRELOAD = ["torch", "sympy", "numpy", "rcteach"]


def question_points(master) -> dict:
    """``{question: points}`` from the ``# BEGIN QUESTION`` cells of an Otter Assign master, in order."""
    import yaml

    points = {}
    for cell in json.loads(pathlib.Path(master).read_text())["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "raw" and source.startswith("# BEGIN QUESTION"):
            config = yaml.safe_load(source.split("\n", 1)[1])
            points[config["name"]] = float(config["points"])
    return points


def _autograder_dir(autograder) -> pathlib.Path:
    """The autograder folder built by :func:`assign` (a file in it, e.g. otter's zip, names it too)."""
    path = pathlib.Path(autograder)
    folder = path if path.is_dir() else path.parent
    if not (folder / KEY).is_file() or not (folder / QUESTIONS).is_file():
        raise ValueError(f"autograder {autograder} is not an autograder folder built by `python -m rcteach assign` "
                         f"(it needs {KEY} and {QUESTIONS})")
    return folder


def _load_key_module(path):
    """An answer key ``key.py`` as a module (its ``asks(rng, ask)`` lists each question's asks)."""
    spec = importlib.util.spec_from_file_location(f"_rcteach_key_{pathlib.Path(path).parent.name}", path)
    key = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(key)
    return key


@functools.lru_cache(maxsize=8)
def _load(folder: pathlib.Path):
    """The assignment's points, its ``asks(rng, ask)`` and the namespace of its solutions notebook,
    executed here, in the grader's process (trusted code: the instructor's solutions)."""
    meta = json.loads((folder / QUESTIONS).read_text())
    key = _load_key_module(folder / KEY)
    namespace = {"__name__": "__solutions__"}
    solutions = json.loads((folder / f"{meta['name']}.ipynb").read_text())
    for source in harness.code_cells(solutions):
        if not (harness.is_otter_cell(source) or harness.CHECK.match(source)):
            exec(compile(source, "<solutions>", "exec"), namespace)
    return meta["points"], key.asks, namespace


#: Starts :mod:`.harness` in the sandbox without running the package's ``__init__`` (which imports
#: torch): the notebook imports what it needs.  ``argv[1]``: this package's folder.
_HARNESS = ("import sys, types; pkg = types.ModuleType('_rcteach_grading'); pkg.__path__ = [sys.argv[1]]; "
            "sys.modules[pkg.__name__] = pkg; from _rcteach_grading import harness; sys.exit(harness.main(sys.argv[2:]))")


def _reference(namespace, ask):
    """The solutions' answer to ``ask``, through the same plain-data round trip as a submission's."""
    return answers.decode(json.loads(json.dumps(answers.evaluate(namespace, ask))))


def grade(submission, autograder, *, timeout=600, output_dir=None, cell_timeout=None, limits=None,
          backend="auto", unsafe_no_sandbox=False) -> dict:
    """Grade one notebook: run it in a fresh sandbox (:mod:`.sandbox`), mark its answers outside.

    The submission is read here first (:func:`.intake.code_cells`: a regular file, not a link to
    the autograder's files, notebook format 4 or 3) and only its code cells go into the sandbox.
    The answer key draws this run's inputs (fresh seeds, sizes) with a secret random generator; the
    submission answers them inside the sandbox (:mod:`.harness`); the reference answers come from
    the solutions notebook executed in this process.  ``timeout``: wall-clock seconds for the whole
    run (also its CPU-time limit); ``cell_timeout`` (default: ``timeout``): soft limit per cell and
    per answer, so that one hanging cell does not cost the questions after it (a cell it stops is
    named in ``notes``).  ``limits`` (a :class:`.sandbox.Limits`) overrides all limits.
    ``backend``: ``"auto"``, ``"bwrap"`` or ``"container"`` (see :mod:`.sandbox`).  Raises
    :class:`.sandbox.SandboxUnavailable` if that sandbox does not work here, unless
    ``unsafe_no_sandbox=True`` (the submission can then read and change the grader's files).

    Returns ``score``, ``possible``, ``tests`` (per question: ``name``, ``score``, ``max_score``,
    ``feedback``), ``limits_hit`` (as seen from outside), ``notes`` (the harness's, e.g. a cell
    stopped at the per-cell limit), ``output`` (the run's first output, untrusted, control
    characters escaped), ``seconds``, ``backend`` and ``error`` (None, or why the run failed: see
    :func:`_failure`; a file that is not a runnable notebook scores 0 with the reason here).
    ``output_dir`` also keeps this as JSON.
    """
    submission, folder = pathlib.Path(submission), _autograder_dir(autograder)
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    sandbox = _sandbox()
    if cell_timeout is not None and not (isinstance(cell_timeout, (int, float)) and cell_timeout > 0):
        raise ValueError(f"cell_timeout must be a number of seconds > 0, got {cell_timeout!r}")
    protected = [folder, ASSIGNMENTS_DIR]
    try:
        cells, unreadable = intake.code_cells(submission, protected=protected), None
    except intake.NotANotebook as e:
        cells, unreadable = None, f"not a notebook that can be run: {e}"
    kind = "unsafe"
    if not unsafe_no_sandbox:
        try:
            kind = sandbox.resolve(backend)
        except sandbox.SandboxUnavailable as e:
            raise sandbox.SandboxUnavailable(f"{e}. Refusing to grade without a sandbox: a submission could read the "
                                             "reference answers and change the grader's files (--unsafe-no-sandbox "
                                             "grades anyway)") from None
        if kind == "container":
            _hidden_from_other_users(protected)
    limits = limits or sandbox.Limits(wall=float(timeout), cpu=math.ceil(timeout))
    points, make_asks, solutions = _load(folder.resolve())
    asks = make_asks(random.Random(secrets.randbits(64)), answers.ASK)
    if set(asks) != set(points) or not all(asks.values()):  # a question without asks would be free points
        raise ValueError(f"the answer key must ask about every question {sorted(points)} (it asks about "
                         f"{sorted(q for q, a in asks.items() if a)})")
    if cells is None:
        out = sandbox.Outcome(b"", "", None, [], 0.0, backend=kind)
        marks = [verdict.Mark(q, 0.0, float(p), [f"no answer: the submission is {unreadable}"]) for q, p in points.items()]
    else:
        want = {q: [_reference(solutions, a) for a in asks[q]] for q in asks}
        out = _run_cells(cells, asks, limits, cell_timeout or timeout, kind)
        got = verdict.read_answers(out.answers, asks)
        marks = [verdict.mark(q, p, asks[q], got.get(q), want[q]) for q, p in points.items()]
    result = {"score": sum(m.score for m in marks), "possible": float(sum(points.values())),
              "tests": [dataclasses.asdict(m) for m in marks], "limits_hit": out.limits_hit,
              "notes": verdict.read_notes(out.answers), "output": out.output, "seconds": out.seconds,
              "backend": out.backend, "error": unreadable or _failure(out)}
    if output_dir is not None:
        pathlib.Path(output_dir).mkdir(parents=True, exist_ok=True)
        name = "__".join(submission.with_suffix("").parts[-2:]) + "-results.json"
        pathlib.Path(output_dir, name).write_text(json.dumps(result, indent=1))
    return result


def _run_cells(cells, asks, limits, cell_seconds, kind) -> sandbox.Outcome:
    """Run the code ``cells`` in a fresh sandbox of backend ``kind`` and collect its answers to ``asks``."""
    sandbox = _sandbox()
    with tempfile.TemporaryDirectory(prefix="rcteach-grade-") as tmp:
        notebook = {"nbformat": 4, "nbformat_minor": 4, "metadata": {},
                    "cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None}
                              for c in cells]}
        for name, content in (("submission.ipynb", notebook), ("asks.json", {"questions": asks, "preload": PRELOAD})):
            pathlib.Path(tmp, name).write_text(json.dumps(content))
            os.chmod(pathlib.Path(tmp, name), 0o644)
        os.chmod(tmp, 0o711)  # the container backend's user reads these two files, and lists nothing
        argv = [sys.executable, "-c", _HARNESS, str(HARNESS_DIR), f"{tmp}/submission.ipynb", f"{tmp}/asks.json",
                "{answers_fd}", str(cell_seconds)]
        return sandbox.run(argv, read_only=[tmp], packages=[PACKAGE_DIR], limits=limits,
                           backend="auto" if kind == "unsafe" else kind, unsafe_no_sandbox=kind == "unsafe")


def _hidden_from_other_users(folders) -> None:
    """The container backend protects files by their modes only: refuse to grade while a file of a
    folder holding solutions can be read by other users (readable, and every folder on its path
    searchable by them)."""
    for folder in map(pathlib.Path, folders):
        if not folder.is_dir():
            continue
        path = folder.resolve()
        if not all(p.stat().st_mode & 0o001 for p in (path, *path.parents)):
            continue
        readable = [p for p in path.rglob("*") if p.is_file() and p.stat().st_mode & 0o004]
        if readable:
            raise _sandbox().SandboxUnavailable(
                f"{path} holds solutions and other users can read {readable[0]}, so the container backend's sandbox "
                f"user could: make it private first (chmod -R go-rwx {path})")


def _failure(out) -> str | None:
    """Why a sandboxed run failed: None when it exited 0 or stopped at a limit (``limits_hit`` says
    which), else its exit status and the last line of its (untrusted, shortened) output."""
    if out.returncode == 0 or out.limits_hit:
        return None
    last = out.output.strip().splitlines()[-1:] or ["no output"]
    return f"exit status {out.returncode}: {last[0][:300]}"


def _main_assign(args) -> int:
    if not masters(args.source):
        raise UsageError(f"--source {args.source} holds no master notebooks <name>/<name>.ipynb")
    try:
        built = assign_all(args.output, source=args.source, run_tests=not args.no_run_tests)
    except RuntimeError as e:  # otter missing, or a master whose solutions fail its tests
        print(f"rcteach assign: {e}", file=sys.stderr)
        return 1
    for name, paths in built.items():
        print(f"{name}: student notebook {paths['student']}, autograder {paths['autograder']}")
    return 0


def _submissions(paths) -> list[pathlib.Path]:
    """The notebooks named, a folder standing for every ``.ipynb`` under it."""
    found = []
    for p in map(pathlib.Path, paths):
        found += sorted(q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts) if p.is_dir() else [p]
    return found


def _main_grade(args) -> int:
    """Grade each submission; one that cannot be graded is reported (why) and the exit status is 1."""
    try:
        sandbox = _sandbox()
    except ImportError as err:  # Windows: the same for every submission
        raise UsageError(str(err)) from err
    rows, failed = [], 0
    try:
        for sub in _submissions(args.submissions):
            try:
                r = grade(sub, args.autograder, timeout=args.timeout, output_dir=args.output,
                          cell_timeout=args.cell_timeout, backend=args.backend, unsafe_no_sandbox=args.unsafe_no_sandbox)
            except sandbox.SandboxUnavailable as e:  # the same for every submission: install bwrap or pass the flag
                raise UsageError(str(e)) from e
            except (ValueError, RuntimeError, OSError) as e:  # names and messages escaped: a file name is the student's
                print(answers.printable(f"{sub}: could not be graded: {type(e).__name__}: {e}"), file=sys.stderr)
                failed += 1
                continue
            notes = "; ".join((["stopped: " + "; ".join(r["limits_hit"])] if r["limits_hit"] else [])
                              + ([f"run failed: {r['error']}"] if r["error"] else []) + r.get("notes", []))
            print(answers.printable(f"{sub}: {r['score']:g} / {r['possible']:g}" + (f"  ({notes})" if notes else "")))
            rows.append({"notebook": str(sub), "score": r["score"], "possible": r["possible"],
                         **{t["name"]: t["score"] for t in r["tests"]}, "limits_hit": notes})
    finally:
        if args.output is not None and rows:
            pathlib.Path(args.output).mkdir(parents=True, exist_ok=True)
            with open(pathlib.Path(args.output) / "scores.csv", "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
    return 1 if failed else 0


def _main_gradescope(args) -> int:
    print(gradescope.autograder_zip(args.autograder, args.output, timeout=args.timeout))
    return 0


def _main_gradescope_run(args) -> int:
    """Always exit 0 with a results.json written: a failure is a result (see :func:`.gradescope.run_submission`)."""
    gradescope.run_submission(args.root, timeout=args.timeout, backend=args.backend)
    return 0


def _autograder_arg(text: str) -> str:
    """``-a``: an autograder folder built by ``assign`` (argparse ``type=``)."""
    try:
        _autograder_dir(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def add_subcommands(sub) -> None:
    """Register ``assign`` and ``grade`` on the rcteach CLI's subparsers."""
    a = sub.add_parser("assign", help="build student notebooks and autograders from assignments/ (otter assign)")
    a.add_argument("-o", "--output", type=output_dir, default="_build/assignments",
                   help="build folder (default _build/assignments)")
    a.add_argument("--source", type=existing_dir, default=str(ASSIGNMENTS_DIR), help="folder of <name>/<name>.ipynb masters")
    a.add_argument("--no-run-tests", action="store_true", help="do not check the solutions against the tests")
    a.set_defaults(func=_main_assign)
    g = sub.add_parser("grade", help="grade submissions, each in a fresh sandbox; the verdict is computed outside it")
    g.add_argument("submissions", type=existing_path, nargs="+", help="student notebooks (.ipynb), or folders of them")
    g.add_argument("-a", "--autograder", type=_autograder_arg, required=True, help="the autograder folder built by `assign`")
    g.add_argument("--timeout", type=positive_float, default=600, help="wall-clock (and CPU) limit per submission in seconds")
    g.add_argument("--cell-timeout", type=positive_float, default=None,
                   help="soft limit per cell and per answer in seconds (default: --timeout)")
    g.add_argument("--backend", choices=BACKENDS, default="auto",
                   help="bwrap (user namespaces), container (root in a fresh container: runs the submission as an "
                        "unprivileged user), or auto (bwrap where it works, else container as root)")
    g.add_argument("-o", "--output", default=None, help="folder for scores.csv and each submission's results JSON")
    g.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="grade even where no bwrap sandbox works: a submission can then read the answers and change files")
    g.set_defaults(func=_main_grade)
    z = sub.add_parser("gradescope", help="write a Gradescope autograder zip (setup.sh, run_autograder) for an assignment")
    z.add_argument("-a", "--autograder", type=_autograder_arg, required=True, help="the autograder folder built by `assign`")
    z.add_argument("-o", "--output", required=True, help="the zip to write")
    z.add_argument("--timeout", type=positive_float, default=600, help="wall-clock (and CPU) limit per submission in seconds")
    z.set_defaults(func=_main_gradescope)
    r = sub.add_parser("gradescope-run", help="(inside Gradescope's container) grade ROOT/submission into ROOT/results")
    r.add_argument("root", type=existing_dir, help="the autograder root (/autograder on Gradescope)")
    r.add_argument("--timeout", type=positive_float, default=600, help="wall-clock (and CPU) limit in seconds")
    r.add_argument("--backend", choices=BACKENDS, default="auto", help="the sandbox backend (default auto)")
    r.set_defaults(func=_main_gradescope_run)
