"""Course assignments: build them with otter-grader, grade them so that a submission cannot change its verdict.

The master notebooks live in ``assignments/<name>/<name>.ipynb`` (Otter Assign format: solutions,
public and hidden tests) next to ``key.py``, the answer key of the trusted grader
(``docs/writing-assignments.md``); an installed rcteach ships them (:data:`ASSIGNMENTS_DIR`).  Needs
the optional extra ``pip install 'rcteach[assign]'`` (otter-grader, ipykernel) and, to grade, Linux
with bubblewrap (``bwrap``), or root in a fresh container (:mod:`.sandbox`'s two backends).

* :func:`assign_all` runs ``otter assign`` on every master notebook and writes, per assignment,
  ``<build>/<name>/student/`` (the notebook handed out, with its points and an install line:
  :mod:`.authoring`; students run the public tests with ``grader.check``) and
  ``<build>/<name>/autograder/`` (the solutions notebook, otter's zip, and for this grader the
  answer key and the points: the folder is the AUTOGRADER of ``grade``; and
  ``<name>-gradescope.zip``, this grader as a Gradescope autograder, see :mod:`.gradescope`).
  :func:`.authoring.check_assignment` checks a new master.
* :func:`grade` runs a submission in a fresh sandbox (:mod:`.sandbox`, :mod:`.harness`) that sees
  no answer key, no solutions and no tests; the submission answers the key's asks (values, and its
  functions on inputs drawn for this run from a seed that is kept) as plain data, which this
  process marks (:mod:`.verdict`) against the solutions' answers to the same asks, computed here.
  :func:`grade_all` grades a class (:mod:`.submissions`: which files, whose), several sandboxes at a
  time or on a dask cluster, into a gradebook (:mod:`.gradebook`).

Command line (:mod:`.commands`): ``python -m rcteach assign [MASTER...] [-o _build/assignments] [--check]``
``python -m rcteach grade NOTEBOOK_OR_FOLDER... -a AUTOGRADER_FOLDER [--timeout 600] [-o DIR] [-j N] [--backend auto]``,
``python -m rcteach gradescope -a AUTOGRADER_FOLDER -o ZIP`` and (inside Gradescope's container)
``python -m rcteach gradescope-run /autograder``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import json
import math
import os
import pathlib
import platform
import random
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ... import _extras, _files
from . import answers, gradebook, gradescope, harness, submissions, verdict

if TYPE_CHECKING:  # the annotations name it; it is imported only to grade (_sandbox)
    from . import sandbox

__all__ = ["ASSIGNMENTS_DIR", "masters", "assign", "assign_all", "question_points", "Assignment", "load",
           "run_solutions",
           "Asked", "draw_asks", "reference", "run_sandboxed", "grade", "grade_all"]

#: The masters: shipped with an installed rcteach, the repository's ``assignments/`` in a checkout.
ASSIGNMENTS_DIR = _files.assignments_dir()
#: The sandbox backends of :mod:`.sandbox` (``auto`` chooses by a probe).
BACKENDS = ("auto", "bwrap", "container")


def _sandbox():
    """:mod:`.sandbox`, imported when grading (it needs Linux: ``resource``, bubblewrap), so that every
    other command works on Windows and macOS.  An ImportError saying so where it cannot load."""
    try:
        return importlib.import_module(f"{__name__}.sandbox")  # not `from . import`: that would ask __getattr__
    except ImportError as err:
        raise ImportError(f"grading runs each submission in a bubblewrap sandbox, which needs Linux; this system "
                          f"({platform.system()}) lacks the module {err.name or err}") from err


def __getattr__(name):
    if name == "sandbox":  # grading.sandbox, loaded on first use (see _sandbox)
        return _sandbox()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    from .authoring import annotate_student

    autograder, points = target / "autograder", question_points(master)
    shutil.copyfile(master.parent / KEY, autograder / KEY)
    (autograder / QUESTIONS).write_text(json.dumps({"name": master.stem, "points": points}))
    annotate_student(target / "student" / master.name, points)
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


@dataclasses.dataclass(frozen=True)
class Assignment:
    """A built assignment as the grader holds it: ``name``, ``points`` ``{question: points}``, the key's
    ``asks(rng, ask)`` and ``wrong`` (its ``WRONG``: obvious wrong answers per question), and
    ``solutions``, the namespace of the solutions notebook executed in the grader's process."""

    name: str
    points: dict
    asks: object
    wrong: dict
    solutions: dict


@functools.lru_cache(maxsize=8)
def _load(folder: pathlib.Path) -> Assignment:
    """The :class:`Assignment` of an autograder folder; its solutions run here, once per process
    (trusted code: the instructor's solutions), and every submission is marked against them."""
    meta = json.loads((folder / QUESTIONS).read_text())
    key = _load_key_module(folder / KEY)
    return Assignment(meta["name"], meta["points"], key.asks, getattr(key, "WRONG", {}), run_solutions(folder))


def run_solutions(autograder) -> dict:
    """The namespace of the autograder's solutions notebook, executed here (otter's cells skipped)."""
    folder = _autograder_dir(autograder)
    name = json.loads((folder / QUESTIONS).read_text())["name"]
    namespace = {"__name__": "__solutions__"}
    for source in harness.code_cells(json.loads((folder / f"{name}.ipynb").read_text())):
        if not (harness.is_otter_cell(source) or harness.CHECK.match(source)):
            exec(compile(source, "<solutions>", "exec"), namespace)
    return namespace


def load(autograder) -> Assignment:
    """The :class:`Assignment` of the autograder folder ``autograder`` built by :func:`assign`."""
    return _load(_autograder_dir(autograder).resolve())


#: Starts :mod:`.harness` in the sandbox without running the package's ``__init__`` (which imports
#: torch): the notebook imports what it needs.  ``argv[1]``: this package's folder.
_HARNESS = ("import sys, types; pkg = types.ModuleType('_rcteach_grading'); pkg.__path__ = [sys.argv[1]]; "
            "sys.modules[pkg.__name__] = pkg; from _rcteach_grading import harness; "
            "sys.exit(harness.main(sys.argv[2:]))")


def reference(namespace, ask):
    """The solutions' answer to ``ask`` (and to the same ask of each name in its ``accept``: then a
    :class:`.verdict.AnyOf`), through the same plain-data round trip as a submission's."""
    values = [answers.decode(json.loads(json.dumps(answers.evaluate(namespace, {**ask, "name": name}))))
              for name in [ask["name"], *ask.get("accept", ())]]
    return values[0] if len(values) == 1 else verdict.AnyOf(values)


@dataclasses.dataclass(frozen=True)
class Asked:
    """What one submission is asked: the ``seed`` of its inputs, the ``asks`` per question, their
    ``digest`` (SHA-256 of the asks as JSON: equal digests, equal questions) and the reference answers ``want``."""

    seed: int
    asks: dict
    digest: str
    want: dict


def draw_asks(assignment: Assignment, seed: int | None = None) -> Asked:
    """Draw a submission's asks from the answer key with ``random.Random(seed)`` (default: a fresh
    secret seed) and compute the reference answers to them."""
    if seed is None:
        seed = secrets.randbits(64)
    elif isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    asks = assignment.asks(random.Random(seed), answers.ASK)
    if set(asks) != set(assignment.points) or not all(asks.values()):  # a question without asks would be free points
        raise ValueError(f"the answer key must ask about every question {sorted(assignment.points)} (it asks about "
                         f"{sorted(q for q, a in asks.items() if a)})")
    digest = hashlib.sha256(json.dumps(asks, sort_keys=True).encode()).hexdigest()
    return Asked(seed, asks, digest, {q: [reference(assignment.solutions, a) for a in asks[q]] for q in asks})


def run_sandboxed(notebook: bytes, asks: dict, limits: sandbox.Limits, cell_timeout: float,
                  unsafe_no_sandbox: bool = False, backend: str = "auto") -> sandbox.Outcome:
    """Run a notebook (its bytes) in a fresh sandbox of ``backend`` (:mod:`.sandbox`) and let it
    answer ``asks``: the untrusted half of grading, on this machine or on a worker of a cluster (it
    needs no answer key, no solutions)."""
    sandbox = _sandbox()
    with tempfile.TemporaryDirectory(prefix="rcteach-grade-") as tmp:
        inputs = {"submission.ipynb": notebook,
                  "asks.json": json.dumps({"questions": asks, "preload": PRELOAD}).encode()}
        for name, data in inputs.items():
            pathlib.Path(tmp, name).write_bytes(data)
            os.chmod(pathlib.Path(tmp, name), 0o644)
        os.chmod(tmp, 0o711)  # the container backend's user reads these two files, and lists nothing
        argv = [sys.executable, "-c", _HARNESS, str(HARNESS_DIR), f"{tmp}/submission.ipynb", f"{tmp}/asks.json",
                "{answers_fd}", str(cell_timeout)]
        return sandbox.run(argv, read_only=[tmp], packages=[PACKAGE_DIR], limits=limits, backend=backend,
                           unsafe_no_sandbox=unsafe_no_sandbox)


def _require_sandbox(unsafe_no_sandbox: bool, backend: str, protected) -> str:
    """The backend the submissions will run in (``"auto"`` with ``unsafe_no_sandbox``); raises
    :class:`.sandbox.SandboxUnavailable` where that sandbox does not work here, or where the
    container backend would let its user read the solutions (``protected``: their folders)."""
    if unsafe_no_sandbox:
        return "auto"
    sandbox = _sandbox()
    try:
        kind = sandbox.resolve(backend)
    except sandbox.SandboxUnavailable as e:
        raise sandbox.SandboxUnavailable(f"{e}. Refusing to grade without a sandbox: a submission could read the "
                                         "reference answers and change the grader's files (--unsafe-no-sandbox "
                                         "grades anyway)") from None
    if kind == "container":
        _hidden_from_other_users(protected)
    return kind


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



def _limits(timeout, limits) -> sandbox.Limits:
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    return limits or _sandbox().Limits(wall=float(timeout), cpu=math.ceil(timeout))


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def grade(submission, autograder, *, timeout=600, output_dir=None, cell_timeout=None, limits=None, backend="auto",
          unsafe_no_sandbox=False, seed=None) -> dict:
    """Grade one notebook: run it in a fresh sandbox (:mod:`.sandbox`), mark its answers outside.

    The answer key draws this run's inputs (fresh sizes and seeds, from ``random.Random(seed)``;
    ``seed`` None: a fresh secret one); the submission answers them inside the sandbox
    (:mod:`.harness`); the reference answers come from the solutions notebook executed in this
    process.  ``timeout``: wall-clock seconds for the whole run (also its CPU-time limit);
    ``cell_timeout`` (default ``timeout``): soft limit per cell and per answer (a cell it stops is
    named in ``notes``).  ``limits`` (a :class:`.sandbox.Limits`) overrides all limits.
    ``backend``: ``"auto"``, ``"bwrap"`` or ``"container"`` (see :mod:`.sandbox`).  Raises
    ``ValueError`` for a submission that is not a regular notebook file or is one of the
    autograder's own files under another name (:mod:`.submissions`), and
    :class:`.sandbox.SandboxUnavailable` if that sandbox does not work here, unless
    ``unsafe_no_sandbox=True`` (the submission can then read and change the grader's files).

    Returns ``student`` (its id, :func:`.submissions.student_id`), ``notebook``, ``assignment``,
    ``score``, ``possible``, ``tests`` (per question: ``name``, ``score``, ``max_score``,
    ``feedback``), ``notes`` (what the gradebook notes: limits hit, a failed run, a notebook of
    another assignment; the harness's, e.g. a cell stopped at the per-cell limit), ``limits_hit`` (as
    seen from outside), ``error`` (None, or why the run failed: see :func:`_failure`),
    ``cell_errors``, ``output`` (the run's first output, untrusted, control characters escaped),
    ``seconds``, ``backend``, ``cpu_seconds_reported`` (the run's own report: untrusted), ``seed`` and
    ``asks_sha256``.  ``output_dir``: also write it to a gradebook there (:mod:`.gradebook`).
    """
    submission = pathlib.Path(submission)
    if not submission.exists() and not submission.is_symlink():
        raise ValueError(f"submission {submission} does not exist")
    assignment = load(autograder)
    subs = [submissions.Submission(submissions.student_id(submission, None, assignment.name), submission)]
    # raises SubmissionError (a ValueError) saying why it cannot be graded
    submissions.read_notebook(submission, protected=_protected(autograder))
    [result] = grade_all(subs, autograder, timeout=timeout, cell_timeout=cell_timeout, limits=limits, jobs=1,
                         backend=backend, unsafe_no_sandbox=unsafe_no_sandbox, seeds={subs[0].student: seed})
    if output_dir is not None:
        gradebook.Gradebook(output_dir, assignment.name, assignment.points).add(result)
    return result


def _protected(autograder) -> list[pathlib.Path]:
    """The folders whose files no submission may be under another name: the autograder's, the masters'."""
    return [_autograder_dir(autograder), ASSIGNMENTS_DIR]


def grade_all(subs, autograder, *, jobs=None, executor=None, timeout=600, cell_timeout=None, limits=None,
              backend="auto", unsafe_no_sandbox=False, seeds=None):
    """Grade a class: yield, in the order of ``subs`` (:class:`.submissions.Submission` items), one
    result of :func:`grade` per submission, ``jobs`` sandboxes at a time (default: the cores), or
    on ``executor`` (a ``concurrent.futures.Executor`` or a dask ``Client``, e.g. from
    :func:`rcteach.sweep.executor_from`: only :func:`run_sandboxed` runs there; the asks, the
    reference answers and the verdicts are computed here, once each).  The results do not depend on
    how many run at once.  ``seeds``: ``{student: seed}`` of the inputs to ask (e.g. the gradebook's,
    to replay a grading); the others get fresh ones.  A submission that cannot be graded is a result
    with ``graded`` False, 0 points and its reason in ``notes``.
    """
    assignment = load(autograder)
    limits = _limits(timeout, limits)
    if cell_timeout is not None and not (isinstance(cell_timeout, (int, float)) and cell_timeout > 0):
        raise ValueError(f"cell_timeout must be a number of seconds > 0, got {cell_timeout!r}")
    cell_timeout = cell_timeout or limits.wall
    protected = _protected(autograder)
    kind = _require_sandbox(unsafe_no_sandbox, backend, protected)
    seeds = seeds or {}
    pool = executor or ThreadPoolExecutor(max_workers=jobs or _cores(), thread_name_prefix="rcteach-grade")
    pending = []
    try:
        for sub in subs:
            try:
                if sub.problem is not None:
                    raise submissions.SubmissionError(sub.problem)
                data, notebook = submissions.read_notebook(sub.path, protected=protected)
                asked = draw_asks(assignment, seeds.get(sub.student))
            except (ValueError, RuntimeError, OSError) as e:
                reason = str(e) if isinstance(e, submissions.SubmissionError) else f"{type(e).__name__}: {e}"
                pending.append((sub, None, reason, None))
                continue
            pending.append((sub, asked, notebook, pool.submit(run_sandboxed, data, asked.asks, limits, cell_timeout,
                                                              unsafe_no_sandbox, kind)))
        for sub, asked, notebook, future in pending:
            if asked is None:
                yield _not_graded(sub, assignment, notebook)
                continue
            try:
                outcome = future.result()
            except Exception as e:  # e.g. a cluster worker without a sandbox
                yield _not_graded(sub, assignment, f"the sandboxed run failed: {type(e).__name__}: {e}")
                continue
            yield _judge(sub, assignment, asked, notebook, outcome)
    finally:
        if executor is None:
            pool.shutdown(cancel_futures=True)


def _result(sub, assignment, marks, **fields) -> dict:
    return {"student": sub.student, "notebook": str(sub.path), "assignment": assignment.name,
            "score": sum(m.score for m in marks), "possible": float(sum(assignment.points.values())),
            "tests": [dataclasses.asdict(m) for m in marks], "graded": True, "notes": [], "limits_hit": [],
            "error": None, "cell_errors": [], "output": "", "seconds": 0.0, "backend": None,
            "cpu_seconds_reported": None,
            "seed": None, "asks_sha256": None, **fields}


def _not_graded(sub, assignment, reason: str) -> dict:
    marks = [verdict.Mark(q, 0.0, float(p), [f"not graded: {reason}"]) for q, p in assignment.points.items()]
    return _result(sub, assignment, marks, graded=False, notes=[f"not graded: {reason}"], error=reason)


def _judge(sub, assignment, asked: Asked, notebook: dict, out: sandbox.Outcome) -> dict:
    """Mark one sandboxed run against the reference answers (here, outside the sandbox)."""
    got = verdict.read_answers(out.answers, asked.asks)
    cell_errors = verdict.read_cell_errors(out.answers)
    cells = dict(harness.numbered_code_cells(notebook))

    def why_missing(name):  # the first cell that mentions the name and raised
        for e in cell_errors:
            if re.search(rf"\b{re.escape(name)}\b", cells.get(e["cell"], "")):
                return f"cell {e['cell']} raised {e['error']}" + (f" ({e['where']})" if e["where"] else "")
        return None

    marks = [verdict.mark(q, p, asked.asks[q], got.get(q), asked.want[q], why_missing) for q,
             p in assignment.points.items()]
    notes = (["stopped: " + "; ".join(out.limits_hit)] if out.limits_hit else []) + verdict.read_notes(out.answers)
    if (error := _failure(out)) is not None:
        notes.append(f"run failed: {error}")
    if (other := submissions.assignment_of(notebook)) not in (None, assignment.name):
        notes.append(f"this notebook is assignment {other} (its metadata), not {assignment.name}: graded as "
                     f"{assignment.name}")
    return _result(sub, assignment, marks, notes=notes, limits_hit=out.limits_hit, error=error, cell_errors=cell_errors,
                   output=out.output, seconds=out.seconds, backend=out.backend,
                   cpu_seconds_reported=verdict.read_cpu_seconds(out.answers),
                   seed=asked.seed, asks_sha256=asked.digest)


def _failure(out) -> str | None:
    """Why a sandboxed run failed: None when it exited 0 or stopped at a limit (``limits_hit`` says
    which), else its exit status and the last line of its (untrusted, shortened) output."""
    if out.returncode == 0 or out.limits_hit:
        return None
    last = out.output.strip().splitlines()[-1:] or ["no output"]
    return f"exit status {out.returncode}: {last[0][:300]}"


from .commands import add_subcommands  # noqa: E402, F401  (the CLI glue, re-exported; it uses the functions above)
