"""The otter-grader course assignments in assignments/ (needs the extra: pip install -e .[assign]).

One module-scoped build runs ``otter assign`` on the three masters and grades, three at a time, with
``otter run`` (local, no Docker): each solutions notebook, each student notebook (with --debug: it
must run without raising) and two broken submissions.  The tests then only look at the results.
"""

from __future__ import annotations

import copy
import json
import pathlib
import shutil
import subprocess
import zipfile
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

pytest.importorskip("otter", reason="otter-grader not installed: pip install -e .[assign]")

from rcteach import grading  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
MASTERS = grading.masters()
NAMES = [m.parent.name for m in MASTERS]
HANG_LIMIT = 15  # wall-clock limit for the submission that ignores the per-cell limit
CELL_LIMIT = 4  # seconds per cell / per test file in the broken-submission autograder


def _cell(source):
    cell = nbformat.v4.new_code_cell(source)
    cell.pop("id", None)  # the notebooks are nbformat 4.4: no cell ids
    return cell


def _with_cell_limit(zip_path, out_path, seconds):
    """Copy an autograder zip with the TimeLimit plugin's limit set to ``seconds``."""
    with zipfile.ZipFile(zip_path) as src, zipfile.ZipFile(out_path, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "otter_config.json":
                config = json.loads(data)
                (plugin,) = config["plugins"]
                plugin["rcteach.grading.TimeLimit"]["seconds"] = seconds
                data = json.dumps(config).encode()
            dst.writestr(item, data)
    return out_path


def _broken_submission(solutions_nb, path):
    """The a1 solutions with q1a raising, my_centre looping forever (sleeping, to spare the CPU
    the other gradings share) and a final cell looping forever (busy)."""
    nb = nbformat.read(solutions_nb, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if cell.source.lstrip().startswith('s2 = sp.symbols("s2"'):
            cell.source = 'raise RuntimeError("a student bug")'
        elif cell.source.lstrip().startswith("def my_centre"):
            cell.source = "import time\n\n\ndef my_centre(A):\n    while True:\n        time.sleep(0.05)"
    nb.cells.append(_cell("while True:\n    pass"))
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _hanging_submission(student_nb, path):
    """A notebook that ignores the per-cell alarm and loops forever: only the wall-clock limit stops it."""
    nb = nbformat.read(student_nb, as_version=4)
    nb.cells.insert(1, _cell("import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)"))
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("assignments")
    with ThreadPoolExecutor(3) as pool:  # the broken and hanging submissions mostly wait
        built = dict(zip(NAMES, pool.map(lambda m: grading.assign(m, tmp / "build", run_tests=False), MASTERS)))
        a1 = built["a1_spectral_gap"]
        broken = _broken_submission(a1["autograder"].parent / "a1_spectral_gap.ipynb", tmp / "broken" / "a1_spectral_gap.ipynb")
        hanging = _hanging_submission(a1["student"], tmp / "hanging" / "a1_spectral_gap.ipynb")
        limited = _with_cell_limit(a1["autograder"], tmp / "a1-limited.zip", CELL_LIMIT)
        jobs = {}
        for name, b in built.items():
            solutions = b["autograder"].parent / f"{name}.ipynb"
            jobs[("solutions", name)] = pool.submit(grading.grade, solutions, b["autograder"], timeout=150)
            jobs[("student", name)] = pool.submit(grading.grade, b["student"], b["autograder"], timeout=150, debug=True)
        jobs["broken"] = pool.submit(grading.grade, broken, limited, timeout=150)
        jobs["hanging"] = pool.submit(grading.grade, hanging, limited, timeout=HANG_LIMIT)
        results = {key: job.result() for key, job in jobs.items()}
    return {"built": built, "results": results, "dir": tmp}


def test_three_masters():
    assert NAMES == ["a1_spectral_gap", "a2_rank_collapse", "a3_masks_layernorm"]
    for master in MASTERS:
        assert master.name == f"{master.parent.name}.ipynb"


@pytest.mark.parametrize("master", MASTERS, ids=NAMES)
def test_master_format(master):
    nb = nbformat.read(master, as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].cell_type == "raw" and nb.cells[0].source.startswith("# ASSIGNMENT CONFIG")
    assert "rcteach.grading.TimeLimit" in nb.cells[0].source
    raws = [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "raw"]
    n_questions = raws.count("# BEGIN QUESTION")
    assert n_questions >= 3
    assert raws.count("# END QUESTION") == raws.count("# BEGIN SOLUTION") == raws.count("# BEGIN TESTS") == n_questions
    hidden = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# HIDDEN")]
    assert len(hidden) >= n_questions  # every question has hidden tests
    for cell in nb.cells:  # stored without outputs
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def test_masters_tracked_by_git():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for master in MASTERS:
        proc = subprocess.run(["git", "check-ignore", "-q", str(master)], cwd=ROOT)
        assert proc.returncode == 1, f"{master} is git-ignored"


@pytest.mark.parametrize("name", NAMES)
def test_solutions_score_full_marks(build, name):
    r = build["results"][("solutions", name)]
    assert r["error"] is None, r["error"]
    assert r["possible"] > 0 and r["score"] == r["possible"], [(t["name"], t["score"], t.get("output", "")[-2000:]) for t in r["tests"]]


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_runs_and_scores_below_full(build, name):
    r = build["results"][("student", name)]
    assert r["error"] is None, r["error"]  # --debug: any exception in the notebook is an error
    assert r["score"] < r["possible"]


def _strings(obj):
    """Every string in a JSON-like object (cell sources, metadata holding the public tests)."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def _solution_and_hidden_lines(master):
    """Distinctive lines of the master's solutions and hidden tests (not also in public content)."""
    nb = nbformat.read(master, as_version=4)
    solution, hidden, public = set(), set(), set()
    in_solution = False
    for cell in nb.cells:
        first = cell.source.splitlines()[0] if cell.source else ""
        if cell.cell_type == "raw":
            in_solution = {"# BEGIN SOLUTION": True, "# END SOLUTION": False}.get(first, in_solution)
            continue
        lines = [line.strip() for line in cell.source.splitlines()]
        if cell.cell_type == "code" and first.startswith("# HIDDEN"):
            hidden.update(lines[1:])
            continue
        if cell.cell_type == "code" and in_solution:
            inside = False
            for line in lines:
                if line.startswith("# BEGIN SOLUTION"):
                    inside = True
                elif line.startswith("# END SOLUTION"):
                    inside = False
                elif inside or line.endswith("# SOLUTION"):
                    solution.add(line.removesuffix("# SOLUTION").strip())
                else:
                    public.add(line)
        else:
            public.update(lines)
    public_text = "\n".join(public)  # prompts may quote a solution line: those are not secret
    distinctive = lambda lines: {l for l in lines if len(l) > 12 and l not in public_text and not l.startswith("#")}
    return distinctive(solution), distinctive(hidden - solution)


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_has_no_solutions_or_hidden_tests(build, name):
    student = build["built"][name]["student"]
    text = "\n".join(_strings(json.loads(student.read_text())))
    assert "# BEGIN SOLUTION" not in text and "# SOLUTION" not in text and "# HIDDEN" not in text
    solution, hidden = _solution_and_hidden_lines(ROOT / "assignments" / name / f"{name}.ipynb")
    assert solution and hidden
    for line in solution:
        assert line not in text, f"solution line in the student notebook: {line!r}"
    for line in hidden:
        assert line not in text, f"hidden test in the student notebook: {line!r}"
    for path in student.parent.rglob("*"):  # nothing else handed out holds them either
        if path.is_file() and path != student:
            other = path.read_text(errors="replace")
            assert not any(line in other for line in hidden)


def test_raising_and_looping_submission_is_graded(build):
    r = build["results"]["broken"]
    assert r["error"] is None, r["error"]
    scores = {t["name"]: t["score"] for t in r["tests"]}
    assert scores["q1a"] == 0  # the cell raised
    assert scores["q3"] == 0  # my_centre loops forever: its tests time out after CELL_LIMIT s
    assert scores["q1b"] == 2 and scores["q1c"] == 2 and scores["q2"] == 3  # the rest is graded
    assert r["score"] == 7


def test_hanging_submission_stops_at_the_wall_clock_limit(build):
    r = build["results"]["hanging"]
    assert r["score"] == 0 and f"longer than {HANG_LIMIT} s" in r["error"]


def test_time_limit_plugin_prepends_a_cell():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    out = grading.TimeLimit("sub.ipynb", {}, {"seconds": 7}).before_execution(copy.deepcopy(nb))
    assert len(out.cells) == 2 and "7.0" in out.cells[0].source and out.cells[1].source == "x = 1"
    with_preload = grading.TimeLimit("s.ipynb", {}, {"preload": ["torch", "rcteach"]}).before_execution(copy.deepcopy(nb))
    assert "import torch\nimport rcteach\n" in with_preload.cells[0].source
    compile(out.cells[0].source, "<limit>", "exec")
    assert grading.TimeLimit("sub.py", {}, {}).before_execution("x = 1").endswith("x = 1")


def test_grade_rejects_missing_files(tmp_path):
    with pytest.raises(ValueError, match="submission"):
        grading.grade(tmp_path / "nope.ipynb", tmp_path / "ag.zip")


def test_assign_rejects_a_missing_master(tmp_path):
    with pytest.raises(ValueError, match="master"):
        grading.assign(tmp_path / "nope" / "nope.ipynb", tmp_path / "build")


def test_cli_registers_assign_and_grade():
    from rcteach.cli import build_parser

    args = build_parser().parse_args(["grade", "a.ipynb", "b.ipynb", "-a", "ag.zip", "--timeout", "30"])
    assert args.submissions == ["a.ipynb", "b.ipynb"] and args.autograder == "ag.zip" and args.timeout == 30
    args = build_parser().parse_args(["assign", "-o", "out"])
    assert args.output == "out" and not args.no_run_tests


def test_grade_repeats_a_run_that_lost_its_kernel_ports(tmp_path, monkeypatch):
    nb, zip_ = tmp_path / "s.ipynb", tmp_path / "a.zip"
    nb.write_text("{}")
    zip_.write_text("")
    race = {"score": 0.0, "possible": None, "tests": [],
            "error": "otter run failed:\nzmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:1')"}
    done = {"score": 1.0, "possible": 1.0, "tests": [], "error": None}
    other = {**race, "error": "otter run failed:\nNameError: a student bug"}
    for outcomes, calls, expected in (([race, done], 2, done), ([race] * 5, grading.KERNEL_START_ATTEMPTS, race),
                                      ([other, done], 1, other)):
        seen = []
        monkeypatch.setattr(grading, "_grade_once", lambda *a, **k: seen.append(1) or outcomes[len(seen) - 1])
        assert grading.grade(nb, zip_) == expected and len(seen) == calls
