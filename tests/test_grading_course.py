"""Running a course with the grader: which files are graded and whose they are, the gradebook, the
harness's handling of what students paste, and grading a class several at a time.

Most of it uses a toy assignment built by hand (an autograder folder: ``key.py``, ``questions.json``
and a two-cell solutions notebook, no otter and no torch), so that a sandboxed run costs a fraction
of a second; the fairness of the real assignments is in test_assignments.py.
"""

from __future__ import annotations

import csv
import json
import os
import pathlib
import pickle
from concurrent.futures import Future

import nbformat
import pytest

from rcteach.tools import grading
from rcteach.tools.grading import gradebook, harness, submissions

KEY = '''
def asks(rng, ask):
    return {"q1": [ask.value("x")], "q2": [ask.call("f", rng.randrange(10**6)) for _ in range(2)]}
'''
SOLUTIONS = ["x = 3", "def f(n):\n    return n * n"]


def _notebook(path, cells, assignment="toy") -> pathlib.Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in cells])
    nb.nbformat_minor = 4
    for cell in nb.cells:
        cell.pop("id", None)
    if assignment:
        nb.metadata["otter"] = {"assignment_name": assignment}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("toy") / "autograder"
    folder.mkdir()
    (folder / "key.py").write_text(KEY)
    (folder / "questions.json").write_text(json.dumps({"name": "toy", "points": {"q1": 1.0, "q2": 2.0}}))
    _notebook(folder / "toy.ipynb", SOLUTIONS)
    return folder


SUBMISSIONS = {  # cells -> score of 3
    "full": (SOLUTIONS, 3),
    "partial": (["x = 3", "def f(n):\n    return n"], 1),
    "blank": (["x = ...", "def f(n):\n    ..."], 0),
    "crash": (["x = 3", 'grader.check("q1")', "import os\nos._exit(3)"], 1),  # keeps the answer sent at the check
}


# ---- which files are graded, whose they are ---------------------------------------------------------

def test_student_ids_of_the_three_layouts(tmp_path):
    for layout, students in (("flat", ["alice.ipynb", "bob.ipynb"]),
                             ("folders", ["alice/toy.ipynb", "bob/homework.ipynb"]),
                             ("nbgrader", ["alice/toy/toy.ipynb", "bob/toy/toy.ipynb"])):
        root = tmp_path / layout
        for rel in students:
            _notebook(root / rel, ["x = 1"])
        assert [(s.student, s.problem) for s in submissions.collect([root], "toy")] == [("alice", None), ("bob", None)]
        assert submissions.collect([root / students[0]], "toy")[0].student == "alice"  # named on its own (a regrade)
    root = tmp_path / "two"  # two notebooks in one student's folder: told apart by their paths
    for rel in ("carol/draft.ipynb", "carol/final.ipynb"):
        _notebook(root / rel, ["x = 1"])
    assert [s.student for s in submissions.collect([root], "toy")] == ["carol/draft", "carol/final"]


def test_only_regular_notebook_files_are_graded_and_the_rest_are_rows(tmp_path, toy):
    """Issue 27: a folder named *.ipynb, a broken symlink and a FIFO were missing from scores.csv."""
    root = tmp_path / "class"
    _notebook(root / "alice.ipynb", ["x = 1"])
    _notebook(root / ".ipynb_checkpoints" / "alice-checkpoint.ipynb", ["x = 1"])  # Jupyter's autosave: not a submission
    (root / "notes.txt").write_text("not a notebook")
    os.symlink(toy / "toy.ipynb", root / "mallory.ipynb")  # a link to the solutions
    os.symlink(tmp_path / "nowhere.ipynb", root / "broken.ipynb")
    os.symlink(toy, root / "linked")  # a link to a folder
    os.mkfifo(root / "fifo.ipynb")
    (root / "folder.ipynb").mkdir()
    (root / "bad.ipynb").write_text("{not json")
    (root / "old.ipynb").write_text(json.dumps({"nbformat": 2, "worksheets": []}))  # format 3 is converted, 2 is not
    found = {s.student: s.problem for s in submissions.collect([root], "toy")}
    assert list(found) == sorted(found) and set(found) == {"alice", "bad", "broken", "fifo", "folder", "linked",
                                                           "mallory", "old"}
    assert found["alice"] is None and found["bad"] is None and found["old"] is None  # refused when read
    for student in ("mallory", "broken", "linked"):
        assert found[student].startswith("a symbolic link (not followed")
    assert found["fifo"] == "a FIFO, not a notebook file" and found["folder"] == "a folder, not a notebook file"
    for name, why in (("bad", "not a notebook: not valid JSON"), ("old", "not a notebook: no nbformat-4 cells"),
                      ("mallory", "a symbolic link"), ("fifo", "a FIFO")):
        with pytest.raises(submissions.SubmissionError, match=why):
            submissions.read_notebook(root / f"{name}.ipynb")
    with pytest.raises(ValueError, match="symbolic link"):  # grade() refuses a link given on its own, too
        grading.grade(root / "mallory.ipynb", toy, unsafe_no_sandbox=True)


# ---- the gradebook --------------------------------------------------------------------------------

def _result(student, score, q1, q2, seed=7, notes=(), graded=True):
    tests = [{"name": "q1", "score": q1, "max_score": 1.0, "feedback": [] if q1 else ["x: got 1; expected 3"]},
             {"name": "q2", "score": q2, "max_score": 2.0, "feedback": [] if q2 else ["f(5): got 5; expected 25"]}]
    return {"student": student, "notebook": f"/class/{student}.ipynb", "assignment": "toy", "score": score,
            "possible": 3.0, "tests": tests, "graded": graded, "notes": list(notes), "seed": seed,
            "cell_errors": [{"cell": 2, "error": "AttributeError: <b>no</b>", "where": "cell 2, line 1: `x.y`"}]}


def test_the_gradebook_merges_by_student_and_exports(tmp_path):
    book = gradebook.Gradebook(tmp_path, "toy", {"q1": 1.0, "q2": 2.0})
    book.add(_result("alice", 3.0, 1.0, 2.0, seed=11))
    book.add(_result("bob", 1.0, 1.0, 0.0, seed=12, notes=["stopped: wall-clock limit (600 s)"]))
    book.add(_result("carol", 0.0, 0.0, 0.0, seed=None, notes=["not graded: a FIFO"], graded=False))
    book.finish()
    regrade = gradebook.Gradebook(tmp_path, "toy", {"q1": 1.0, "q2": 2.0})  # regrading one student: the others stay
    regrade.add(_result("bob", 3.0, 1.0, 2.0, seed=12))
    regrade.finish()
    with open(tmp_path / "scores.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["student"] for r in rows] == ["alice", "bob", "carol"]
    assert list(rows[0]) == ["student", "assignment", "score", "possible", "q1", "q2", "notes", "notebook", "seed"]
    assert [(r["score"], r["q2"], r["seed"]) for r in rows] == [("3", "2", "11"), ("3", "2", "12"), ("0", "", "")]
    assert rows[2]["notes"] == "not graded: a FIFO" and regrade.seed("alice") == 11 and regrade.seed("carol") is None
    with open(tmp_path / "canvas.csv", newline="") as f:
        canvas = list(csv.reader(f))
    assert canvas[:2] == [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "toy"],
                          ["Points Possible", "", "", "", "", "3"]]
    assert canvas[2:] == [["alice", "", "", "alice", "", "3"], ["bob", "", "", "bob", "", "3"],
                          ["carol", "", "", "carol", "", "0"]]
    with open(tmp_path / "questions.csv", newline="") as f:
        stats = {r["question"]: r for r in csv.DictReader(f)}
    assert stats["q2"] == {"question": "q2", "points": "2", "graded": "2", "mean": "2", "full": "2", "none": "0"}
    assert stats["score"]["graded"] == "2"  # carol was not graded
    feedback = (tmp_path / "feedback" / "bob.md").read_text()
    assert feedback.startswith("# toy: feedback for bob\n\n**Score: 3 / 3**") and "| q2 | 2 / 2 |" in feedback
    # untrusted text made inert
    assert "cell 2 raised AttributeError: &lt;b&gt;no&lt;/b&gt; (cell 2, line 1: `x.y`)" in feedback
    alice = (tmp_path / "feedback" / "alice.md").read_text()
    assert json.loads((tmp_path / "results" / "alice.json").read_text())["seed"] == 11
    book = gradebook.Gradebook(tmp_path, "toy", {"q1": 1.0, "q2": 2.0})
    book.add(_result("dave", 0.0, 0.0, 0.0))
    assert "## q1 (0 / 1)\n\n- x: got 1; expected 3" in (tmp_path / "feedback" / "dave.md").read_text()
    assert "## q1" not in alice
    with pytest.raises(ValueError, match="assignment 'toy', not 'other'"):
        gradebook.Gradebook(tmp_path, "other", {"q1": 1.0})
    assert gradebook.file_name("alice") == "alice" and gradebook.file_name("carol/draft").startswith("carol_draft-")


# ---- the harness: what students paste -------------------------------------------------------------

def test_the_harness_runs_magics_merged_otter_cells_and_reports_errors(working_sandbox):
    """Issue 25: `%matplotlib inline` raised NotImplementedError and a merged otter set-up cell lost
    its imports; issue 28: a typo's AttributeError was only an ANSI traceback in the output."""
    from rcteach.tools.grading.answers import ASK

    cells = ["%matplotlib inline\n%pip install rcteach\n!ls /\nfiles = !ls\n"
             "from rcteach.tools.grading.feedback import Notebook\nimport math\n\ngrader = Notebook('toy.ipynb')\nx = "
             "math.sqrt(9)",
             "def f(n):\n    return n.bit_lenght()", "y = 1\nz = y.real.imag.nope", "w = (", 'grader.check("q1")']
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# toy")]
                                  + [nbformat.v4.new_code_cell(s) for s in cells])
    asks = {"q1": [ASK.value("x"), ASK.call("f", 3), ASK.value("z")]}
    out = grading.run_sandboxed(nbformat.writes(nb).encode(), asks, grading.sandbox.Limits(wall=60, cpu=60), 20.0)
    assert "NotImplementedError" not in out.output and "\x1b[" not in out.output  # no GUI, no colours
    assert "[grading] shell command skipped: ls /" in out.output
    got = grading.verdict.read_answers(out.answers, asks)["q1"]
    assert got[0] == 3.0
    assert got[1] == ("AttributeError: 'int' object has no attribute 'bit_lenght' (cell 3, line 2: `return "
                      "n.bit_lenght()`)")
    assert got[2].startswith("NameError")
    errors = grading.verdict.read_cell_errors(out.answers)
    assert errors == [{"cell": 4, "error": "AttributeError: 'int' object has no attribute 'nope'",
                       "where": "cell 4, line 2: `z = y.real.imag.nope`"},
                      {"cell": 5, "error": errors[1]["error"], "where": "cell 5, line 1: `w = (`"}]
    assert errors[1]["error"].startswith("SyntaxError") and grading.verdict.read_cpu_seconds(out.answers) > 0


def test_otter_lines_are_skipped_inside_other_cells():
    assert harness.without_otter("import math\nif True:\n    grader = otter.Notebook('a.ipynb')  # set up\nx = 1") == \
        "import math\nif True:\n    pass\nx = 1"
    assert harness.is_otter_cell("# Initialize Otter\nimport otter\n\ngrader = otter.Notebook('a.ipynb')")
    assert not harness.is_otter_cell("import otter\nx = 1") and not harness.is_otter_cell("# just a comment")


# ---- a class, several at a time -------------------------------------------------------------------

@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    """nbgrader's layout with the submissions above, and a second folder with one student's other copy."""
    root = tmp_path_factory.mktemp("class") / "submitted"
    for student, (cells, _) in SUBMISSIONS.items():
        _notebook(root / student / "toy" / "toy.ipynb", cells)
    return root


def _grade(capsys, *argv) -> tuple[int, list[str]]:
    from rcteach.tools.cli import main

    code = main(["grade", *map(str, argv), "--timeout", "60"])
    return code, capsys.readouterr().out.splitlines()


def _scores(out) -> list[dict]:
    with open(out / "scores.csv", newline="") as f:
        return list(csv.DictReader(f))


def _results(out) -> dict:
    return {p.stem: {k: v for k, v in json.loads(p.read_text()).items() if k not in ("seconds", "cpu_seconds_reported")}
            for p in sorted((out / "results").glob("*.json"))}


def test_a_class_in_parallel_equals_serial_and_a_replay_asks_the_same(klass, toy, capsys, tmp_path, working_sandbox):
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    code, lines = _grade(capsys, klass, "-a", toy, "-o", serial, "-j", "1")
    students = sorted(SUBMISSIONS)  # blank, crash, full, partial
    assert code == 0 and [line.split("  (")[0] for line in lines[:4]] == [
        f"{klass / s / 'toy' / 'toy.ipynb'}: {SUBMISSIONS[s][1]} / 3" for s in students]
    rows = _scores(serial)
    assert [(r["student"], r["score"]) for r in rows] == [(s, str(SUBMISSIONS[s][1])) for s in students]
    assert rows[1]["notes"].startswith("run failed: exit status 3") and lines[1].endswith(")")
    (parallel / "results").mkdir(parents=True)
    with open(serial / "scores.csv") as f, open(parallel / "scores.csv", "w") as g:
        g.write(f.read())  # the same seeds: --replay asks each student what the serial run asked
    code, _ = _grade(capsys, klass, "-a", toy, "-o", parallel, "-j", "2", "--replay")
    assert code == 0 and _scores(parallel) == rows
    assert _results(parallel) == _results(serial)  # the same asks (digest), answers, feedback, word for word
    fresh = tmp_path / "fresh"
    _grade(capsys, klass, "-a", toy, "-o", fresh, "-j", "2")
    assert [r["seed"] for r in _scores(fresh)] != [r["seed"] for r in rows]  # without --replay: new inputs


class _RemoteExecutor:
    """Runs each task as a cluster worker would (``grade --dask``): its function, its arguments and its
    result cross a process boundary pickled.  (A real dask LocalCluster costs ~15 s of CPU to start;
    rcteach.sweep.executor_from is tested with one in test_grid_sweep.py.)"""

    def submit(self, fn, *args):
        fn, args = pickle.loads(pickle.dumps((fn, args)))
        future = Future()
        future.set_result(pickle.loads(pickle.dumps(fn(*args))))
        return future


def test_a_class_on_a_cluster_equals_serial(klass, toy, working_sandbox):
    """Only the sandboxed runs go to the executor; the asks, references and verdicts stay here."""
    subs = submissions.collect([klass], "toy")
    serial = list(grading.grade_all(subs, toy, jobs=1, timeout=60))
    remote = list(grading.grade_all(subs, toy, executor=_RemoteExecutor(), timeout=60,
                                    seeds={r["student"]: r["seed"] for r in serial}))

    def timeless(r):
        return {k: v for k, v in r.items() if k not in ("seconds", "cpu_seconds_reported")}

    assert [timeless(r) for r in remote] == [timeless(r) for r in serial] and serial[2]["score"] == 3


def test_regrading_one_student_merges_into_the_gradebook(klass, toy, capsys, tmp_path, working_sandbox):
    """Issue 28: `grade <one notebook> -o results/` rewrote scores.csv with one row."""
    out = tmp_path / "results"
    _grade(capsys, klass, "-a", toy, "-o", out)
    before = _scores(out)
    again = klass / "partial" / "toy" / "toy.ipynb"
    code, lines = _grade(capsys, again, "-a", toy, "-o", out, "--replay")
    assert code == 0 and lines[0] == f"{again}: 1 / 3" and lines[-1].startswith(f"-> {out}/: scores.csv (4 students)")
    assert _scores(out) == before
    results = json.loads((out / "results" / "partial.json").read_text())
    assert results["student"] == "partial" and len(results["asks_sha256"]) == 64
    assert "f(" in (out / "feedback" / "partial.md").read_text()


def test_wrong_assignment_and_unreadable_files_are_noted(klass, toy, capsys, tmp_path, working_sandbox):
    root = tmp_path / "class"
    _notebook(root / "gina.ipynb", SOLUTIONS, assignment="a2_rank_collapse")
    os.symlink(toy / "toy.ipynb", root / "mallory.ipynb")
    out = tmp_path / "results"
    code, lines = _grade(capsys, root, "-a", toy, "-o", out)
    assert code == 1  # a file that could not be graded
    assert lines[0] == (f"{root / 'gina.ipynb'}: 3 / 3  (this notebook is assignment a2_rank_collapse (its metadata), "
                        "not toy: graded as toy)")
    assert lines[1].startswith(f"{root / 'mallory.ipynb'}: not graded: a symbolic link")
    assert [(r["student"], r["score"], r["q1"]) for r in _scores(out)] == [("gina", "3", "1"), ("mallory", "0", "")]


def test_grade_options_are_checked(toy, klass, capsys, tmp_path):
    from rcteach.tools.cli import main

    assert main(["grade", str(klass), "-a", str(toy), "--replay"]) == 2
    assert "--replay needs -o OUT" in capsys.readouterr().err
    (tmp_path / "scores.csv").write_text("notebook,score\nx,1\n")  # an older gradebook: refused, not overwritten
    assert main(["grade", str(klass), "-a", str(toy), "-o", str(tmp_path)]) == 2
    assert "no student and assignment columns" in capsys.readouterr().err
    assert main(["grade", str(klass), "-a", str(toy), "--dask", "local:0"]) == 2
    assert "--dask: expected 'local:N' with N >= 1" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["grade", str(empty), "-a", str(toy)]) == 2 and "no notebooks" in capsys.readouterr().err
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        grading.draw_asks(grading.load(toy), -1)
