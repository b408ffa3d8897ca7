"""Course assignments with otter-grader: build student notebooks and autograders, grade locally.

The master notebooks live in ``assignments/`` (Otter Assign format, with solutions, public and
hidden tests).  Needs the optional extra ``pip install -e .[assign]`` (otter-grader); nothing in
the rest of the package imports this module.

* :func:`assign_all` runs ``otter assign`` on every master notebook and writes, per assignment,
  ``<build>/<name>/student/`` (the notebook handed out) and ``<build>/<name>/autograder/``
  (the solutions notebook and ``<name>-autograder_*.zip``).
* :func:`grade` runs ``otter run`` (local, no Docker) on one submission, in a subprocess with a
  wall-clock limit: a submission that hangs scores 0 instead of hanging the grader.
* :class:`TimeLimit` is an otter plugin (listed in each master's ``generate: plugins:``) that puts
  a per-cell and per-test time limit inside the grading kernel: a cell that loops forever raises
  ``TimeoutError`` after ``seconds`` and grading goes on with the next cell, so the other
  questions still get their marks.

Command line: ``python -m rcteach assign [-o _build/assignments]`` and
``python -m rcteach grade SUBMISSION.ipynb -a AUTOGRADER.zip [--timeout 600]``.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile

__all__ = ["ASSIGNMENTS_DIR", "masters", "assign", "assign_all", "grade", "TimeLimit", "time_limit_source"]

ASSIGNMENTS_DIR = pathlib.Path(__file__).resolve().parent.parent / "assignments"


def _otter() -> list[str]:
    """The otter command of this interpreter's environment."""
    exe = pathlib.Path(sys.executable).with_name("otter")
    if not exe.exists():
        raise RuntimeError("otter-grader is not installed: pip install -e '.[assign]'")
    return [str(exe)]


def masters(source=ASSIGNMENTS_DIR) -> list[pathlib.Path]:
    """The master notebooks ``<source>/*/*.ipynb``, sorted."""
    return sorted(pathlib.Path(source).glob("*/*.ipynb"))


def assign(master, build="_build/assignments", *, run_tests=True, timeout=600) -> dict:
    """Run ``otter assign`` on one master notebook into ``build/<name>/`` (``<name>``: its folder).

    ``run_tests=True`` lets otter check that the master's solutions pass all its tests.  Returns
    ``{"student": student notebook, "autograder": autograder zip}``.  Raises ``RuntimeError`` with
    otter's output if the assignment fails to build.
    """
    master = pathlib.Path(master)
    if not master.is_file():
        raise ValueError(f"master {master} does not exist")
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
    return {"student": target / "student" / master.name, "autograder": zips[-1]}


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


def grade(submission, autograder, *, timeout=600, output_dir=None, debug=False) -> dict:
    """Grade one notebook with ``otter run`` (no Docker) under a wall-clock limit of ``timeout`` s.

    Returns a dict with ``score``, ``possible`` (total points), ``tests`` (otter's per-question
    results, empty on a timeout) and ``error`` (None, or why grading failed).  A submission that
    raises is graded as usual (the failing questions score 0); one that runs past ``timeout``
    scores 0 with ``error`` saying so.  ``output_dir`` also keeps otter's ``results.json``.
    ``debug=True`` (``otter run --debug``) makes any error raised while running the notebook a
    grading failure: a check that a notebook runs without crashing.
    """
    submission, autograder = pathlib.Path(submission), pathlib.Path(autograder)
    for name, p in (("submission", submission), ("autograder", autograder)):
        if not p.is_file():
            raise ValueError(f"{name} {p} does not exist")
    for _ in range(KERNEL_START_ATTEMPTS):
        result = _grade_once(submission, autograder, timeout=timeout, output_dir=output_dir, debug=debug)
        if not _kernel_port_race(result["error"] or ""):
            break
    return result


def _grade_once(submission, autograder, *, timeout, output_dir, debug) -> dict:
    """One ``otter run`` of :func:`grade`."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = _otter() + ["run", "--no-logo"] + (["--debug"] if debug else []) + ["-a", str(autograder.resolve()), "-o", tmp, str(submission.resolve())]
        # own process group, killed as a whole on a timeout; the kernel (its own session) exits
        # within a second when its parent dies (ipykernel's parent poller)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp,
                                start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"score": 0.0, "possible": None, "tests": [],
                    "error": f"grading took longer than {timeout} s and was stopped"}
        results = pathlib.Path(tmp) / "results.json"
        if proc.returncode != 0 or not results.exists():
            return {"score": 0.0, "possible": None, "tests": [],
                    "error": f"otter run failed:\n{stdout[-4000:]}\n{stderr[-4000:]}"}
        data = json.loads(results.read_text())
        if output_dir is not None:
            pathlib.Path(output_dir).mkdir(parents=True, exist_ok=True)
            shutil.copy(results, pathlib.Path(output_dir) / f"{submission.stem}-results.json")
    tests = [t for t in data.get("tests", []) if t.get("max_score") is not None]  # skip the "Public Tests" summary
    score = data.get("score", sum(t.get("score") or 0.0 for t in tests))
    possible = sum(t["max_score"] for t in tests)
    return {"score": float(score), "possible": float(possible), "tests": tests, "error": None}


def time_limit_source(seconds: float, preload=()) -> str:
    """Code for the grading kernel: every cell, and every test run by the grader, gets ``seconds``.

    A periodic SIGALRM timer is armed before each cell (IPython's ``pre_run_cell``) and disarmed
    after it; its handler raises ``TimeoutError`` in the running Python code, every ``seconds``
    until disarmed (a test file whose examples each loop forever takes ``seconds`` per example).  Otter's
    ``Checker.check_if_not_already_checked`` (the grader's final cell runs each test file with it)
    gets its own timer per test file, so a student function that loops forever fails its tests
    instead of hanging the grader.  Loops inside one long C call are not interrupted; the
    wall-clock limit of :func:`grade` is the backstop for those.  The modules named in
    ``preload`` are imported first, outside the limit (importing torch can take seconds).
    """
    imports = "".join(f"import {name}\n" for name in preload)
    return f'''\
# rcteach.grading.TimeLimit: per-cell and per-test time limit ({seconds} s)
{imports}

def __rcteach_time_limit(seconds):
    import inspect
    import signal

    from IPython import get_ipython
    from otter.execute import Checker

    def on_alarm(signum, frame):
        raise TimeoutError(f"stopped after the time limit of {{seconds}} s")

    signal.signal(signal.SIGALRM, on_alarm)
    # periodic: after a timeout, each following statement of the same cell or test file (a doctest
    # goes on after a failing example) gets its own `seconds` again
    arm = lambda *args: signal.setitimer(signal.ITIMER_REAL, seconds, seconds)
    disarm = lambda *args: signal.setitimer(signal.ITIMER_REAL, 0)
    ip = get_ipython()
    ip.events.register("pre_run_cell", arm)
    ip.events.register("post_run_cell", disarm)
    check = Checker.check_if_not_already_checked.__func__

    def limited(cls, test_path, global_env=None):
        if global_env is None:
            global_env = inspect.currentframe().f_back.f_globals
        arm()
        try:
            return check(cls, test_path, global_env)
        finally:
            disarm()

    Checker.check_if_not_already_checked = classmethod(limited)


__rcteach_time_limit({float(seconds)!r})
del __rcteach_time_limit
'''


def _time_limit_plugin():
    """Build the :class:`TimeLimit` plugin class (importing otter only when it is asked for)."""
    import nbformat
    from otter.plugins import AbstractOtterPlugin

    class TimeLimit(AbstractOtterPlugin):
        """Otter plugin: a time limit per cell and per test file in the grading kernel.

        In the assignment config (``generate: plugins:``)::

            - rcteach.grading.TimeLimit:
                seconds: 60
                preload: [torch, rcteach]

        ``before_execution`` prepends the cell of :func:`time_limit_source` to the submission:
        ``preload`` names modules imported before the limit starts.
        """

        def before_execution(self, submission):
            config = self.plugin_config or {}
            source = time_limit_source(float(config.get("seconds", 60)), config.get("preload", ()))
            if isinstance(submission, str):  # a .py submission
                return source + "\n" + submission
            cell = nbformat.v4.new_code_cell(source)
            cell.pop("id", None)
            submission.cells.insert(0, cell)
            return submission

    TimeLimit.__module__ = __name__
    return TimeLimit


def __getattr__(name):
    """``TimeLimit`` (the otter plugin) is built on first use: importing otter is slow."""
    if name == "TimeLimit":
        cls = _time_limit_plugin()
        globals()["TimeLimit"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _main_assign(args) -> int:
    built = assign_all(args.output, source=args.source, run_tests=not args.no_run_tests)
    for name, paths in built.items():
        print(f"{name}: student notebook {paths['student']}, autograder {paths['autograder']}")
    return 0


def _main_grade(args) -> int:
    code = 0
    for sub in args.submissions:
        r = grade(sub, args.autograder, timeout=args.timeout, output_dir=args.output)
        line = f"{sub}: {r['score']:g}" + (f" / {r['possible']:g}" if r["possible"] else "")
        if r["error"]:
            line += f"  ({r['error'].splitlines()[0]})"
            code = 1
        print(line)
    return code


def add_subcommands(sub) -> None:
    """Register ``assign`` and ``grade`` on the rcteach CLI's subparsers."""
    a = sub.add_parser("assign", help="build student notebooks and autograders from assignments/ (otter assign)")
    a.add_argument("-o", "--output", default="_build/assignments", help="build folder (default _build/assignments)")
    a.add_argument("--source", default=str(ASSIGNMENTS_DIR), help="folder of <name>/<name>.ipynb masters")
    a.add_argument("--no-run-tests", action="store_true", help="do not check the solutions against the tests")
    a.set_defaults(func=_main_assign)
    g = sub.add_parser("grade", help="grade submissions locally with otter run (no Docker), with a time limit")
    g.add_argument("submissions", nargs="+", help="student notebooks (.ipynb)")
    g.add_argument("-a", "--autograder", required=True, help="the autograder zip built by `assign`")
    g.add_argument("--timeout", type=float, default=600, help="wall-clock limit per submission in seconds")
    g.add_argument("-o", "--output", default=None, help="folder for otter's results JSON files")
    g.set_defaults(func=_main_grade)
