"""Adversarial submissions against the trusted grader (rcteach.tools.grading with rcteach.tools.grading.sandbox).

Threat model: a submission is code written by a student who can read this repository, otter's
source and the student notebook.  One submission per attack class of the grading issue; each must
score what an honest blank submission scores (the student notebook as handed out), and nothing
outside the sandbox may change.  The attacks are small notebooks (most without torch, so that they
grade in a second or two) ending with the student notebook's ``grader.check`` cells.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import pathlib
import pickle
import sys
from concurrent.futures import ThreadPoolExecutor

import nbformat
import numpy as np
import pytest

pytest.importorskip("otter", reason="otter-grader not installed: pip install -e .[assign]")

from rcteach.tools.grading import answers, sandbox, verdict

from rcteach.tools import grading  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
MASTER = ROOT / "assignments" / "a1_spectral_gap" / "a1_spectral_gap.ipynb"
SECRET = "rcteach-grader-secret-7f3a"  # an environment variable of the grading process
MARK = "rcteach-attack-marker"
WALL = 10  # seconds: the wall-clock limit of the submissions that never stop


def _fingerprint(*folders) -> dict:
    """Hash of every file under ``folders`` (the package, the autograder, the masters)."""
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in folders for p in sorted(pathlib.Path(folder).rglob("*")) if p.is_file()}


def _attacks(autograder: pathlib.Path, outside: pathlib.Path) -> dict:
    """Attack name -> (cell sources, extra grade() arguments).  ``outside``: a host folder a
    submission must not be able to write into (nor have the grader write into)."""
    home = os.path.expanduser("~")
    targets = [grading.PACKAGE_DIR / f"{MARK}.py", pathlib.Path(sys.prefix) / f"{MARK}.pth",
               pathlib.Path(home) / MARK, outside / MARK, MASTER.parent / MARK, autograder / MARK]
    payload = io.BytesIO()
    np.save(payload, np.array([_Payload(str(outside / "unpickled"))], dtype=object), allow_pickle=True)
    pickled = base64.b64encode(payload.getvalue()).decode()
    return {
        "forge the checker": ([
            "import otter\nfrom otter.execute import Checker\nfrom otter.test_files.abstract_test import TestFile",
            "Checker.check = classmethod(lambda cls, *a, **k: None)\n"
            "TestFile.all_passed = property(lambda self: True)\nTestFile.score = property(lambda self: 1200.0)\n"
            "grader = otter.Notebook('a1_spectral_gap.ipynb')\ngrader.check = lambda *a, **k: None",
        ], {}),
        "patch the comparisons": ([
            "import math, numpy, numpy.testing, torch, rcteach.tools.grading.verdict\n"
            "torch.allclose = lambda *a, **k: True\nnumpy.testing.assert_allclose = lambda *a, **k: None\n"
            "numpy.allclose = lambda *a, **k: True\nmath.isclose = lambda *a, **k: True\n"
            "rcteach.tools.grading.verdict.same = lambda *a, **k: True",
            "class Anything(float):\n    __eq__ = lambda self, other: True\n    __ne__ = lambda self, other: False\n"
            "c_expr = measured_radius = measured_gap_ratio = swap_error = Anything(0)\n"
            "predicted_radius = swapped_spectrum = my_centre = lambda *a: Anything(0)",
        ], {}),
        "exceed the maximum": ([
            "import json, os\nforged = {'question': 'q1b', 'answers': [{'ok': 1200.0}] * 3, 'score': 1200}\n"
            "line = (json.dumps(forged) + '\\n').encode() * 200\nfor fd in range(3, 64):\n    try:\n"
            "        os.write(fd, line)\n    except OSError:\n        pass\nscore = grade = 1200",
        ], {}),
        "tamper with the autograder": ([
            f"import os\nfound = [{str(autograder)!r}]\nfor pid in os.listdir('/proc'):\n    try:\n"
            "        found += open(f'/proc/{pid}/cmdline').read().split('\\0')\n    except OSError:\n        pass\n"
            "for top in ('/work', '/root', '/home', '/tmp'):\n    for d, _, files in os.walk(top):\n"
            "        found += [os.path.join(d, f) for f in files if f.endswith(('.zip', 'key.py', 'questions.json'))]\n"
            "for path in found:\n    for name in ([path] if os.path.isfile(path) else\n"
            "                 [os.path.join(path, f) for f in (os.listdir(path) if os.path.isdir(path) else [])]):\n"
            "        try:\n            open(name, 'w').write('PWNED')\n"
            "        except OSError as e:\n            print('could not write', name, e)",
        ], {}),
        "read the hidden tests": ([
            f"import glob\nfor path in [{str(MASTER)!r}, {str(autograder / grading.KEY)!r}, "
            f"{str(autograder / 'a1_spectral_gap.ipynb')!r}] + [p for top in ('/work', '/root', '/tmp') for p in glob.glob(top + '/**/key.py', recursive=True)]:\n"
            "    try:\n        print(open(path).read())\n    except OSError as e:\n        print('hidden', e)\n"
            "print(open('/proc/1/cmdline').read(), open('/proc/self/cmdline').read())\n"
            "def predicted_radius(T, s2):\n    raise RuntimeError(open(" f"{str(MASTER)!r}" ").read())",
        ], {}),
        "leak the environment": ([
            "import os\nprint(dict(os.environ), open('/proc/1/environ').read())\n"
            "def predicted_radius(T, s2):\n    raise RuntimeError(repr(dict(os.environ)) + open('/proc/1/environ').read())\n"
            "raise RuntimeError(repr(dict(os.environ)))",
        ], {}),
        "pickle payload": ([
            "import json, os, pickle, sys\nfd = int(sys.argv[-2])\n"
            f"record = {{'question': 'q1c', 'answers': [{{'ok': {{'$': 'ndarray', 'v': {pickled!r}}}}}] * 2}}\n"
            "os.write(fd, (json.dumps(record) + '\\n').encode())\n"
            f"pickle.dump(1, open('results.pkl', 'wb'))\nmeasured_radius = measured_gap_ratio = {{'$': 'ndarray', 'v': {pickled!r}}}",
        ], {}),
        "write outside": ([
            f"for path in {[str(t) for t in targets]!r}:\n    try:\n        open(path, 'w').write('import os')\n"
            "    except OSError as e:\n        print('write', e)",
        ], {}),
        "background process": ([
            "import os, subprocess, sys\n"
            f"cmd = [sys.executable, '-c', 'import time; time.sleep(300)  # {MARK}']\n"
            "for start in (lambda: subprocess.Popen(cmd, start_new_session=True), lambda: os.system(' '.join(cmd) + ' &'),\n"
            "              lambda: os.posix_spawn(cmd[0], cmd, {}), lambda: os.fork() or os._exit(0)):\n"
            "    try:\n        start()\n    except OSError as e:\n        print('start', e)",
        ], {}),
        "disarm the time limit": ([
            "import signal, time\nsignal.setitimer(signal.ITIMER_REAL, 0)\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
            "while True:\n    try:\n        time.sleep(0.05)\n    except BaseException:\n        pass",
        ], {"timeout": WALL}),
        "huge output": ([
            "import os, sys\nfor _ in range(50):\n    sys.stdout.write('x' * (1 << 20))\n"
            "try:\n    open('/tmp/big', 'wb').write(b'0' * (1 << 30))\nexcept OSError as e:\n    print(e)\n"
            "os.write(int(sys.argv[-2]), b'{' * (20 << 20))",
        ], {}),
        "fork bomb": (["import os\nwhile True:\n    os.fork()"], {}),
        "memory hog": ([
            "blocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))",
            "x = bytearray(1 << 40)",
        ], {"limits": sandbox.Limits(wall=60, cpu=60, memory=1 << 30)}),
    }


class _Payload:
    """Unpickling this creates a file: proof that the grader unpickled the submission's data."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _notebook(cells, path) -> pathlib.Path:
    checks = [f'grader.check("{q}")' for q in grading.question_points(MASTER)] + ["grader.check_all()"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in list(cells) + checks])
    nb.nbformat_minor = 4  # as the student notebooks: no cell ids
    for cell in nb.cells:
        cell.pop("id", None)
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def graded(tmp_path_factory, working_sandbox, built_assignments):
    tmp = tmp_path_factory.mktemp("attacks")
    outside = tmp / "outside"
    outside.mkdir()
    built = built_assignments["a1_spectral_gap"]
    attacks = _attacks(built["autograder"], outside)
    before = _fingerprint(grading.PACKAGE_DIR, built["autograder"], MASTER.parent)
    os.environ["RCTEACH_GRADER_TOKEN"] = SECRET
    try:
        with ThreadPoolExecutor(2) as pool:
            blank = pool.submit(grading.grade, built["student"], built["autograder"], timeout=120)
            jobs = {name: pool.submit(grading.grade, _notebook(cells, tmp / f"{i}.ipynb"), built["autograder"],
                                      **{"timeout": 60, **kwargs})
                    for i, (name, (cells, kwargs)) in enumerate(attacks.items())}
            results = {name: job.result() for name, job in jobs.items()}
            blank = blank.result()
    finally:
        del os.environ["RCTEACH_GRADER_TOKEN"]
    after = _fingerprint(grading.PACKAGE_DIR, built["autograder"], MASTER.parent)
    print({name: round(r["seconds"], 1) for name, r in results.items()}, "blank", round(blank["seconds"], 1))
    return {"results": results, "blank": blank, "before": before, "after": after, "outside": outside,
            "autograder": built["autograder"]}


ATTACKS = list(_attacks(pathlib.Path("/x"), pathlib.Path("/y")))


@pytest.mark.parametrize("attack", ATTACKS)
def test_attack_scores_like_a_blank_submission(graded, attack):
    r = graded["results"][attack]
    assert graded["blank"]["score"] == 0 and graded["blank"]["possible"] == 12
    assert r["score"] == graded["blank"]["score"] and r["possible"] == 12, [(t["name"], t["feedback"]) for t in r["tests"]]
    assert all(0 <= t["score"] <= t["max_score"] for t in r["tests"])
    text = json.dumps(r)
    assert SECRET not in text  # the grader's environment never reaches the sandbox
    assert "def asks(rng, ask)" not in text and "rcteach.theory.bulk_radius(T_, s2_)" not in text  # nor the key / hidden tests


def test_nothing_outside_the_sandbox_changed(graded):
    assert graded["after"] == graded["before"]
    assert not any(graded["outside"].iterdir())
    home, prefix = pathlib.Path(os.path.expanduser("~")), pathlib.Path(sys.prefix)
    assert not (home / MARK).exists() and not (prefix / f"{MARK}.pth").exists()
    for pid in filter(str.isdigit, os.listdir("/proc")):  # no process started by a submission is left
        try:
            assert MARK not in pathlib.Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
        except OSError:
            pass


def test_limits_are_reported(graded):
    r = graded["results"]
    assert any("wall-clock" in hit for hit in r["disarm the time limit"]["limits_hit"])
    assert r["disarm the time limit"]["seconds"] < WALL + 10
    assert any("output limit" in hit for hit in r["huge output"]["limits_hit"])
    assert len(r["huge output"]["output"]) <= sandbox.Limits().output
    assert "Resource temporarily unavailable" in r["fork bomb"]["output"]
    assert "MemoryError" in r["memory hog"]["output"]


def test_decode_accepts_only_plain_data():
    arr = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(answers.decode(answers.encode(arr)), arr)
    assert answers.decode(answers.encode({"a": (True, 1, 2.5, float("inf"), 1j)})) == {"a": [True, 1, 2.5, float("inf"), 1j]}
    obj = io.BytesIO()
    np.save(obj, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    for bad in ({"$": "ndarray", "v": base64.b64encode(obj.getvalue()).decode()},
                {"$": "ndarray", "v": base64.b64encode(pickle.dumps([1])).decode()},
                {"$": "pickle", "v": ""}, {"x": 1}, {"$": "dict", "v": {}, "extra": 1}):
        with pytest.raises(answers.DecodeError):
            answers.decode(bad)
    with pytest.raises(answers.DecodeError):
        answers.decode(json.loads("[" * 40 + "]" * 40))


def test_read_answers_ignores_malformed_records():
    asks = {"q1": [answers.ASK.value("x")]}
    stream = b"\n".join([b"not json", b'{"question": "q9", "answers": [{"ok": 1}]}',
                         b'{"question": "q1", "answers": [{"ok": 1}, {"ok": 2}]}',
                         b'{"question": "q1", "answers": [{"ok": 3.0}]}', b'{"question": "q1", "answers": [{"bad": 1}]}'])
    assert verdict.read_answers(stream, asks) == {"q1": [3.0]}


def test_same_compares_kind_shape_and_value():
    assert verdict.same(1.0, 1.0 + 1e-12) and not verdict.same(1.0, 1.1)
    assert not verdict.same(True, 1) and not verdict.same(1, True) and verdict.same(3.0, 3)
    assert not verdict.same(float("nan"), float("nan")) and verdict.same(float("inf"), float("inf"))
    assert not verdict.same(np.zeros(3), np.zeros(4)) and not verdict.same(np.zeros(3, dtype=bool), np.zeros(3))
    assert not verdict.same(verdict.Error("x"), 1.0) and not verdict.same([1.0], [1.0, 2.0])
    assert verdict.mark("q", 2, [answers.ASK.value("x")], None, [1.0]).score == 0


def test_grade_refuses_without_a_sandbox(graded, monkeypatch, tmp_path):
    student = tmp_path / "s.ipynb"
    _notebook(["x = 1"], student)
    monkeypatch.setattr(sandbox, "available", lambda: "bubblewrap (`bwrap`) is not installed")
    with pytest.raises(sandbox.SandboxUnavailable, match="--unsafe-no-sandbox"):
        grading.grade(student, graded["autograder"])
    from rcteach.tools.cli import main

    assert main(["grade", str(student), "-a", str(graded["autograder"])]) == 2
    r = grading.grade(student, graded["autograder"], unsafe_no_sandbox=True, timeout=60)
    assert r["score"] == 0 and r["possible"] == 12


def test_sandbox_probe_names_a_missing_bwrap(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "bwrap" in sandbox.available.__wrapped__()


def test_cli_grades_a_folder_into_a_csv(graded, tmp_path, capsys):
    import csv

    from rcteach.tools.cli import main

    for student in ("alice", "bob"):
        (tmp_path / "class" / student).mkdir(parents=True)
        _notebook(["x = 1"], tmp_path / "class" / student / "a1_spectral_gap.ipynb")
    out = tmp_path / "results"
    assert main(["grade", str(tmp_path / "class"), "-a", str(graded["autograder"]), "--timeout", "60", "-o", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"{tmp_path / 'class' / s / 'a1_spectral_gap.ipynb'}: 0 / 12" for s in ("alice", "bob")]
    with open(out / "scores.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["student"], r["notebook"].split("/")[-2]) for r in rows] == [("alice", "alice"), ("bob", "bob")]
    assert rows[0]["possible"] == "12" and {"q1a", "q3", "notes", "seed"} <= set(rows[0])
    assert sorted(p.name for p in (out / "results").glob("*.json")) == ["alice.json", "bob.json"]
    assert sorted(p.name for p in (out / "feedback").glob("*.md")) == ["alice.md", "bob.md"]


def test_sandbox_sees_kernel_knobs_read_only_and_no_grader_files(working_sandbox):
    code = ("import os\nfor path in ('/proc/sys/kernel/hostname', '/proc/sysrq-trigger'):\n    try:\n"
            "        os.open(path, os.O_WRONLY)\n        print('writable', path)\n    except OSError as e:\n"
            "        print('refused', path, e.errno)\n"
            f"print('visible' if os.path.exists({str(MASTER)!r}) else 'hidden')")
    out = sandbox.run([sys.executable, "-c", code], limits=sandbox.Limits(wall=30))
    assert "writable" not in out.output and out.output.count("refused") == 2 and "hidden" in out.output, out.output
