"""The course assignments in assignments/ (needs the extra: pip install -e .[assign], and bwrap).

One module-scoped fixture grades, two at a time, in the bwrap sandbox, the three assignments (built
once per test run, ``built_assignments`` in conftest.py): each solutions notebook, each student
notebook, correct answers written otherwise, a broken submission and submissions that answer only
the public tests or use a forbidden helper.  The tests then only
look at the results.  The adversarial submissions are in test_grading_attacks.py.
"""

from __future__ import annotations

import html
import json
import pathlib
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

pytest.importorskip("otter", reason="otter-grader not installed: pip install -e .[assign]")

from rcteach.tools.grading import harness

from rcteach.tools import grading  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
MASTERS = grading.masters()
NAMES = [m.parent.name for m in MASTERS]
CELL_LIMIT = 5  # soft seconds per cell / per answer for the broken submission
HANG_LIMIT = 45  # wall-clock seconds for the submission that hangs at question 3


def _cell(source):
    cell = nbformat.v4.new_code_cell(source)
    cell.pop("id", None)  # the notebooks are nbformat 4.4: no cell ids
    return cell


def _edited(notebook, path, edits, append=()):
    """A copy of ``notebook`` at ``path`` whose code cells starting with a key of ``edits`` get its value."""
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        for start, source in edits.items():
            if cell.cell_type == "code" and cell.source.lstrip().startswith(start):
                cell.source = source
    nb.cells += [_cell(s) for s in append]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _fair(name, solutions, path):
    """The solutions, rewritten as students reasonably do (issue 25): a1 with `%matplotlib inline` and
    other magics atop the imports, otter's set-up cell merged into them, numpy's and the statistics
    module's medians, 0-d float64 tensors for floats; a2 with numpy instead of torch (numpy scalars
    for 0-d tensors); a3 with 0-d tensors for floats and lists for tuples.  Saved under another name."""
    nb = nbformat.read(solutions, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]

    def edit(start, old, new):
        cell = next(c for c in code if c.source.startswith(start))
        assert old in cell.source, (start, old)
        cell.source = cell.source.replace(old, new)

    if name == "a1_spectral_gap":
        setup = next(c for c in code if "grader = Notebook(" in c.source)
        edit("import math", "import math\n",
             f"%matplotlib inline\n%pip install rcteach\n!ls\n{setup.source}\nimport math\n"
             "import statistics\n\nimport numpy as np\n")
        nb.cells.remove(setup)
        edit("A = rcteach.random_attention(64", "gap.bulk_radius.median().item()",
             "float(np.median(gap.bulk_radius.numpy()))")
        edit("A = rcteach.random_attention(64", "gap.ratio.median().item()", "statistics.median(gap.ratio.tolist())")
        edit("def predicted_radius", "return math.sqrt(T * c_value / T**2)",
             "return torch.tensor(T * c_value / T**2, dtype=torch.float64).sqrt()")
        edit("def swapped_spectrum", "swap_error = rcteach.spectrum_distance(",
             "swap_error = torch.as_tensor(rcteach.spectrum_distance(")
        edit("def swapped_spectrum", "swapped_spectrum(A))  # SOLUTION", "swapped_spectrum(A)))  # SOLUTION")
    elif name == "a2_rank_collapse":
        edit("def frobenius_stable_rank", "s = rcteach.linalg.svdvals(X)",
             "s = np.linalg.svd(np.asarray(X), compute_uv=False)")
        edit("import math", "import math\n", "import math\n\nimport numpy as np\n")
    else:
        edit("def uniform_rate", "return float(moduli[1])", "return moduli[1]")
        edit("def my_diameter", "return k", "return torch.tensor(k)")
        edit("properties = {}", "(False, True)", "[False, True]")
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def build(tmp_path_factory, working_sandbox, built_assignments):
    tmp = tmp_path_factory.mktemp("assignments")
    built = built_assignments
    a1 = built["a1_spectral_gap"]
    a1_solutions = a1["autograder"] / "a1_spectral_gap.ipynb"
    submissions = {
        # q1a raises, my_centre loops forever (sleeping), a final cell loops forever (busy)
        "broken": (_edited(a1_solutions, tmp / "broken.ipynb", {
            's2 = sp.symbols("s2"': 'raise RuntimeError("a student bug")',
            "def my_centre": "import time\n\n\ndef my_centre(A):\n    while True:\n        time.sleep(0.05)"},
            append=["while True:\n    pass"]), dict(timeout=60, cell_timeout=CELL_LIMIT)),
        # the solutions, dying at question 2 / hanging at question 3 with the time limit disarmed
        "crash": (_edited(a1_solutions, tmp / "crash.ipynb", {"def swapped_spectrum": "import os\nos._exit(3)"}), {}),
        "hang": (_edited(a1_solutions, tmp / "hang.ipynb", {"def my_centre": (
            "import signal, time\nsignal.setitimer(signal.ITIMER_REAL, 0)\nsignal.signal(signal.SIGALRM, "
            "signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)")}), dict(timeout=HANG_LIMIT)),
        # answers hard-coded to pass the public tests only
        "public only": (_edited(a1["student"], tmp / "public_only.ipynb", {
            "s2 = sp.symbols": 's2 = sp.symbols("s2", positive=True)\nc_expr = s2 / LN2',
            "def predicted_radius": "def predicted_radius(T, s2_value):\n    return 0.125",
            "A = ...": "measured_radius, measured_gap_ratio = 0.125, 8.0",
            "def swapped_spectrum": "def swapped_spectrum(A):\n    return torch.zeros(A.shape[-1], "
                                    "dtype=torch.complex128)\n\n\nswap_error = 0.0",
            "def my_centre": "def my_centre(A):\n"
                             "    return A - A.mean(-1, keepdim=True) if A.shape == (2, 5, 5) else A"}), {}),
        # the solutions, but my_centre and predicted_radius call the helpers the questions forbid
        "forbidden": (_edited(a1_solutions, tmp / "forbidden.ipynb", {
            "def my_centre": "from rcteach import centre as _c\n\n\ndef my_centre(A):\n    return _c(A)",
            "def predicted_radius": "def predicted_radius(T, s2_value):\n    return rcteach.theory.bulk_radius(T, "
                                    "s2_value)"}), {}),
    }
    for name, b in built.items():  # correct answers written otherwise than the solutions: full marks
        submissions[f"fair {name}"] = (_fair(name, b["autograder"] / f"{name}.ipynb", tmp / name / f"{name} (1).ipynb"),
                                       {})
    with ThreadPoolExecutor(2) as pool:
        jobs = {}
        for name, b in built.items():
            jobs[("solutions", name)] = pool.submit(grading.grade, b["autograder"] / f"{name}.ipynb", b["autograder"],
                                                    timeout=120)
            jobs[("student", name)] = pool.submit(grading.grade, b["student"], b["autograder"], timeout=120)
        for key, (path, kwargs) in submissions.items():
            autograder = built[key.removeprefix("fair ")]["autograder"] if key.startswith("fair ") else a1["autograder"]
            jobs[key] = pool.submit(grading.grade, path, autograder, **{"timeout": 120, **kwargs})
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
    raws = [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "raw"]
    n_questions = raws.count("# BEGIN QUESTION")
    assert n_questions >= 3
    assert raws.count("# END QUESTION") == raws.count("# BEGIN SOLUTION") == raws.count("# BEGIN TESTS") == n_questions
    assert "from rcteach.tools.grading.feedback import Notebook" in nb.cells[2].source  # short public-test feedback
    assert nb.cells[-1].source.startswith("## Submitting") and f"{master.name}" in nb.cells[-1].source
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
    assert r["error"] is None and not r["limits_hit"], (r["limits_hit"], r["output"][-2000:])
    assert r["possible"] == sum(grading.question_points(ROOT / "assignments" / name / f"{name}.ipynb").values()) > 0
    assert r["score"] == r["possible"], [(t["name"], t["feedback"]) for t in r["tests"]]


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_runs_and_scores_zero(build, name):
    r = build["results"][("student", name)]
    assert r["error"] is None and not r["limits_hit"]
    assert "Traceback" not in r["output"] and "Error" not in r["output"], r["output"][-2000:]  # runs without raising
    assert r["score"] == 0 and all(t["feedback"] for t in r["tests"])


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
                elif inside or line.endswith(("# SOLUTION", "# SOLUTION NO PROMPT")):
                    solution.add(line.removesuffix(" NO PROMPT").removesuffix("# SOLUTION").strip())
                else:
                    public.add(line)
        else:
            public.update(lines)
    public_text = "\n".join(public)  # prompts may quote a solution line: those are not secret

    def distinctive(lines):
        return {line for line in lines if len(line) > 12 and line not in public_text and not line.startswith("#")}

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


@pytest.mark.parametrize("name", NAMES)
def test_correct_answers_written_otherwise_score_full_marks(build, name):
    """Issue 25: magics, a merged set-up cell, other medians, 0-d tensors, numpy scalars, a renamed notebook."""
    r = build["results"][(f"fair {name}")]
    assert r["error"] is None and "NotImplementedError" not in r["output"], r["output"][-2000:]
    assert r["score"] == r["possible"], [(t["name"], t["feedback"]) for t in r["tests"]]


@pytest.mark.parametrize("name", NAMES)
def test_answer_keys_and_public_tests_reject_the_declared_wrong_answers(build, name):
    from rcteach.tools.grading import authoring

    assert authoring.check_key(build["built"][name]) == []
    questions = grading.question_points(ROOT / "assignments" / name / f"{name}.ipynb")
    assert len(grading.load(build["built"][name]["autograder"]).wrong) == len(questions)


def test_a1_q3_public_test_rejects_the_wrong_centrings(build):
    """Issue 25: the public test of q3 passed A - A.mean() and A - 1/T (its input's rows summed to 1)."""
    from rcteach.tools.grading import authoring

    a1 = build["built"]["a1_spectral_gap"]
    for wrong in ("A - A.mean()", "A - 1 / A.shape[-1]"):
        assert authoring.accepted(a1, "q3", f"def my_centre(A):\n    return {wrong}") == []
    hard_coded = "def my_centre(A):\n    return A - A.mean(-1, keepdim=True) if A.shape == (2, 5, 5) else A"
    assert authoring.accepted(a1, "q3", hard_coded) == [f"q3: the public tests accept the wrong answer {hard_coded!r}"]


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_shows_points_and_how_to_install(build, name):
    nb = nbformat.read(build["built"][name]["student"], as_version=4)
    points = grading.question_points(ROOT / "assignments" / name / f"{name}.ipynb")
    assert nb.metadata["otter"]["assignment_name"] == name
    first = nb.cells[1].source
    assert first.startswith("**Before you start.**") and 'pip install "rcteach[assign]"' in first
    prompts = [c.source for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("**Question")]
    assert len(prompts) == len(points)
    for prompt, p in zip(prompts, points.values()):
        assert f"** *({p:g} points)* " in prompt.split("\n")[0]


def test_raising_and_looping_submission_is_graded(build):
    r = build["results"]["broken"]
    scores = {t["name"]: t["score"] for t in r["tests"]}
    assert scores["q1a"] == 0  # the cell raised
    assert scores["q3"] == 0  # my_centre loops forever: stopped after CELL_LIMIT s
    assert scores["q1b"] == 2 and scores["q1c"] == 2 and scores["q2"] == 3  # the rest is graded
    assert r["score"] == 7 and not r["limits_hit"]
    feedback = {t["name"]: t["feedback"] for t in r["tests"]}
    assert any("TimeoutError" in line for line in feedback["q3"])
    assert any("NameError" in line for line in feedback["q1a"])


def test_crash_and_hang_keep_the_questions_answered_before(build):
    crash, hang = build["results"]["crash"], build["results"]["hang"]
    assert crash["score"] == 6 and not crash["limits_hit"]  # q1a, q1b, q1c; q2 and q3 never answered
    assert {t["name"] for t in crash["tests"] if t["feedback"] and "no answer" in t["feedback"][0]} == {"q2", "q3"}
    assert hang["score"] == 9 and hang["limits_hit"] == [f"wall-clock limit ({HANG_LIMIT} s)"]


def test_answers_to_the_public_tests_only_score_nothing(build):
    """Hard-coded answers that pass every public test fail the hidden inputs."""
    r = build["results"]["public only"]
    assert r["score"] == 0, [(t["name"], t["feedback"]) for t in r["tests"]]
    q1b = next(t for t in r["tests"] if t["name"] == "q1b")
    assert "got 0.125; expected" in q1b["feedback"][0]


def test_forbidden_helpers_earn_nothing(build):
    r = build["results"]["forbidden"]
    scores = {t["name"]: t["score"] for t in r["tests"]}
    assert scores["q1b"] == 0 and scores["q3"] == 0 and r["score"] == r["possible"] - 5
    q3 = next(t for t in r["tests"] if t["name"] == "q3")
    assert "forbids (rcteach.centre)" in q3["feedback"][0]


@pytest.mark.parametrize("master", MASTERS, ids=NAMES)
def test_answer_keys_ask_about_every_question(master):
    import random

    from rcteach.tools.grading.answers import ASK

    asks = grading._load_key_module(master.parent / grading.KEY).asks
    first, second = asks(random.Random(1), ASK), asks(random.Random(2), ASK)
    assert list(first) == list(grading.question_points(master))
    assert json.dumps(first) != json.dumps(second)  # fresh inputs for every submission
    for question in first.values():
        assert question and all(json.loads(json.dumps(a)) == a for a in question)  # plain data


def test_grade_rejects_bad_arguments(build, tmp_path):
    autograder = build["built"]["a1_spectral_gap"]["autograder"]
    with pytest.raises(ValueError, match="submission"):
        grading.grade(tmp_path / "nope.ipynb", autograder)
    with pytest.raises(ValueError, match="autograder"):
        grading.grade(build["built"]["a1_spectral_gap"]["student"], tmp_path)
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="timeout"):
            grading.grade(build["built"]["a1_spectral_gap"]["student"], autograder, timeout=bad)


def test_assign_rejects_a_missing_master(tmp_path):
    with pytest.raises(ValueError, match="master"):
        grading.assign(tmp_path / "nope" / "nope.ipynb", tmp_path / "build")


def test_cli_registers_assign_and_grade(tmp_path, monkeypatch):
    from rcteach.tools.cli import build_parser

    monkeypatch.chdir(tmp_path)
    for name in ("a.ipynb", "b.ipynb", "ag/key.py", "ag/questions.json"):  # the arguments must exist
        pathlib.Path(name).parent.mkdir(exist_ok=True)
        pathlib.Path(name).touch()
    args = build_parser().parse_args(["grade", "a.ipynb", "b.ipynb", "-a", "ag", "--timeout", "30"])
    assert args.submissions == ["a.ipynb", "b.ipynb"] and args.autograder == "ag" and args.timeout == 30
    assert not args.unsafe_no_sandbox
    for bad in ("0", "-5", "nan"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["grade", "a.ipynb", "-a", "ag", "--timeout", bad])
    args = build_parser().parse_args(["assign", "-o", "out"])
    assert args.output == "out" and not args.no_run_tests


def test_public_tests_pass_hard_coded_answers_with_short_feedback(build, tmp_path, monkeypatch):
    """The student-side checks (rcteach.tools.grading.feedback): one line per failed test, a score line; the
    hard-coded answers of "public only" pass every public test (the hidden inputs catch them)."""
    from rcteach.tools.grading import feedback

    student = build["built"]["a1_spectral_gap"]["student"]
    shutil.copy(student, tmp_path / student.name)
    monkeypatch.chdir(tmp_path)
    grader = feedback.Notebook(student.name)
    env = {}
    exec("import math, sympy as sp, torch, rcteach\nLN2 = rcteach.LN2\ns2 = sp.symbols('s2', positive=True)\nc_expr = "
         "s2\ndef predicted_radius(T, s2_value):\n    return 0.0884", env)
    q1b = grader.check("q1b", env)
    assert not q1b.passed and q1b.failures == {"q1b": ["predicted_radius(64, ln 2) returned 0.0884; expected sqrt(c/T) "
                                                       "= 0.125"]}
    # c_expr = s2 fails
    assert "c_expr at s2 = ln 2 is 0.6931; expected e^(ln 2) - 1 = 1" in repr(grader.check("q1a", env))
    report = grader.check_all(env)
    assert report.lines()[-1].startswith("Public tests: 0 / 5 questions pass") and "Trying:" not in repr(report)
    assert report._repr_html_() == "<pre>" + html.escape(repr(report)) + "</pre>"  # no raw <doctest ...> tags
    for cell in nbformat.read(build["dir"] / "public_only.ipynb", as_version=4).cells:
        if cell.cell_type == "code" and not cell.source.startswith(("grader", "# Initialize")):
            exec(cell.source, env)
    assert grader.check_all(env).passed, grader.check_all(env)
    renamed = tmp_path / "renamed"  # a renamed copy of the notebook still finds its public tests
    renamed.mkdir()
    shutil.copy(student, renamed / f"{student.stem} (1).ipynb")
    monkeypatch.chdir(renamed)
    assert feedback.Notebook(student.name).check_all(env).passed
    with pytest.raises(FileNotFoundError, match="no renamed copy"):
        feedback.Notebook("a2_rank_collapse.ipynb")


def test_otter_cells_are_recognised():
    assert harness.is_otter_cell('# Initialize Otter\nimport otter\ngrader = otter.Notebook("a.ipynb")')
    assert harness.is_otter_cell('# Initialize Otter\nfrom rcteach.tools.grading.feedback import Notebook\n\ngrader = '
                                 'Notebook("a.ipynb")')
    assert harness.is_otter_cell("grader.check_all()") and harness.is_otter_cell('grader.check("q9")')
    assert harness.CHECK.match('grader.check("q1a")').group(1) == "q1a"
    assert not harness.is_otter_cell("import otter\nx = 1") and not harness.is_otter_cell("x = 1")
