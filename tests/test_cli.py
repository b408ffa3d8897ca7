"""The command line: ``python -m rcteach check`` and every command's exit codes and argument checks."""

import fnmatch
import json
import math
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import torch

import rcteach.checks.registry as registry_module
from rcteach.checks import Comparison, register
from rcteach.tools import cli
from rcteach.tools.cli import build_parser, main, strict_row

ROOT = Path(__file__).resolve().parents[1]
ONE_OFF = {"one off": lambda p, s: p + 1}  # a mutant for the throwaway numeric checks


@pytest.fixture
def temporary_checks():
    """Register checks under a unique prefix; they are removed from the registry afterwards."""
    prefix = f"zz-cli-test-{uuid.uuid4().hex[:8]}"

    def add(suffix, measured):
        register(f"{prefix}-{suffix}", claim=f"{suffix} claim", source="exact", tolerance_note="n", mutants=ONE_OFF)(
            lambda: Comparison(prediction=0.0, measured=measured, tolerance=1e-10))

    yield prefix, add
    for name in [n for n in registry_module._REGISTRY if n.startswith(prefix)]:
        del registry_module._REGISTRY[name]


def test_json_subprocess():
    proc = subprocess.run([sys.executable, "-m", "rcteach", "check", "-k", "mask-*", "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    assert isinstance(results, list) and results
    names = [r["name"] for r in results]
    assert "mask-connectivity" in names
    assert all(fnmatch.fnmatch(n, "mask-*") for n in names)
    assert all(r["passed"] is True for r in results)
    assert all(r["setting"] for r in results)  # the quick settings are reported


def test_parser_defaults():
    args = build_parser().parse_args(["check"])
    assert (args.mode, args.k, args.json, args.device) == ("quick", None, False, None)  # None: every check
    assert build_parser().parse_args(["check", "--full", "-k", "x*"]).mode == "full"


def test_parser_errors(capsys):
    assert main([]) == 2  # a command is required
    assert main(["check", "--quick", "--full"]) == 2  # mutually exclusive
    assert main(["frobnicate"]) == 2
    assert main(["--help"]) == 0
    capsys.readouterr()


def test_passing_checks_exit_zero(temporary_checks, capsys):
    prefix, add = temporary_checks
    add("ok", 0.0)
    assert main(["check", "-k", f"{prefix}-*", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "quick mode, device cpu" in out
    assert f"{prefix}-ok" in out
    assert out.rstrip().endswith("1 passed, 0 failed")


def test_failing_check_exit_one(temporary_checks, capsys):
    prefix, add = temporary_checks
    add("ok", 0.0)
    add("bad", 1.0)
    assert main(["check", "-k", f"{prefix}-*"]) == 1
    out = capsys.readouterr().out
    assert out.rstrip().endswith("1 passed, 1 failed")
    assert main(["check", "-k", f"{prefix}-ok"]) == 0  # the pattern selects
    assert main(["check", "-k", f"{prefix}-ok", "-k", f"{prefix}-bad"]) == 1  # any of several patterns
    capsys.readouterr()


def test_failing_check_json(temporary_checks, capsys):
    prefix, add = temporary_checks
    add("bad", float("nan"))
    assert main(["check", "--json", "-k", f"{prefix}-*"]) == 1
    results = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["passed"]) for r in results] == [(f"{prefix}-bad", False)]


def test_mutants_exit_one_when_one_survives(temporary_checks, capsys):
    prefix, add = temporary_checks
    add("ok", 0.0)
    assert main(["check", "--mutants", "-k", f"{prefix}-*"]) == 0
    out = capsys.readouterr().out
    assert "quick mode, device" in out and ", mutants" in out and "killed    one off" in out
    register(f"{prefix}-weak", claim="c", source="derived", tolerance_note="n",
             mutants={"1% high": lambda p, s: 1.01 * p})(
        lambda: Comparison(prediction=1.0, measured=1.0, tolerance=0.1, relative=True))
    assert main(["check", "-k", f"{prefix}-*"]) == 0  # without --mutants a surviving mutant does not matter
    assert main(["check", "--mutants", "-k", f"{prefix}-*"]) == 1
    assert "SURVIVED  1% high" in capsys.readouterr().out
    assert main(["check", "--mutants", "--json", "-k", f"{prefix}-weak"]) == 1
    (result,) = json.loads(capsys.readouterr().out)
    assert result["mutants"][0] == {"name": "1% high", "killed": False, "generated": False,
                                    "offset": pytest.approx(0.01),
                                    "survived_on": [None]} and result["passed"] is True
    assert [m["killed"] for m in result["mutants"][1:]] == [True, True, False, False]  # 1.5 x resolves; 5%
    assert len(result["rules"]) == 1 and "below the prediction" in result["rules"][0]  # no near mutant below
    assert result["resolves"] == pytest.approx(0.1 / 0.9)


def _usage_error(argv, capsys, *needles):
    """``main(argv)`` exits 2 and says why on stderr, naming each of ``needles``."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert all(n in err for n in needles), err
    return err


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


CHAPTER_TEXT = "---\njupytext:\n  text_representation:\n    format_name: myst\n---\n\n# A chapter\n"
NOWRITE = "/proc/self/rcteach-test"  # cannot be created, by root either


@pytest.fixture
def placeholders(tmp_path):
    """The paths the tables below name in capitals (MISSING: does not exist; OUT: must stay uncreated)."""
    (tmp_path / "NOTEBOOK").write_text("{}")
    (tmp_path / "AUTOGRADER").mkdir()
    for name in ("key.py", "questions.json"):
        (tmp_path / "AUTOGRADER" / name).write_text("{}")
    (tmp_path / "file.txt").write_text("not a folder")
    (tmp_path / "empty").mkdir()
    for folder in ("ch", "ch2"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "x.md").write_text(CHAPTER_TEXT)
    (tmp_path / "bad.ipynb").write_text("not JSON")
    names = {"MISSING": tmp_path / "missing", "NOTEBOOK": tmp_path / "NOTEBOOK", "AUTOGRADER": tmp_path / "AUTOGRADER",
             "OUT": tmp_path / "out", "FILE": tmp_path / "file.txt", "EMPTY": tmp_path / "empty",
             "CHAPTER2": tmp_path / "ch2" / "x.md", "CHAPTER": tmp_path / "ch" / "x.md", "CHDIR": tmp_path / "ch",
             "BADNB": tmp_path / "bad.ipynb"}
    pattern = re.compile(r"\b(" + "|".join(names) + r")\b")

    def fill(text):
        return pattern.sub(lambda m: str(names[m.group(1)]), text)

    return fill


BAD_ARGUMENTS = [  # (arguments, what the message says), refused while parsing (with the usage)
    (["bench", "--repeats", "0"], "--repeats: expected an integer >= 1, got 0"),
    (["bench", "--repeats", "-1"], "--repeats: expected an integer >= 1, got -1"),
    (["bench", "--repeats", "two"], "--repeats: expected an integer >= 1, got 'two'"),
    (["bench", "--batch", "0"], "--batch: expected an integer >= 1, got 0"),
    (["bench", "--sizes", "64", "0"], "--sizes: expected an integer >= 2 (a number of tokens), got 0"),
    (["bench", "--depths", "-2"], "--depths: expected an integer >= 1, got -2"),
    (["bench", "--budget", "0"], "--budget: expected a finite number > 0, got 0"),
    (["bench", "--budget", "nan"], "--budget: expected a finite number > 0, got nan"),
    (["bench", "--grid", "--official", "MISSING"], "--official: MISSING is not an existing folder"),
    (["bench", "--csv", "MISSING/b.csv"], "--csv: MISSING/b.csv is not a file name in an existing folder"),
    (["assign", "--source", "MISSING"], "--source: MISSING is not an existing folder"),
    (["grade", "MISSING", "-a", "AUTOGRADER"], "submissions: MISSING is not an existing file or folder"),
    (["grade", "NOTEBOOK", "-a", "MISSING"], "autograder MISSING is not an autograder folder"),
    (["grade", "NOTEBOOK", "-a", "AUTOGRADER", "--timeout", "0"], "--timeout: expected a finite number > 0, got 0"),
    (["grade", "NOTEBOOK", "-a", "AUTOGRADER", "--timeout", "-1"], "--timeout: expected a finite number > 0, got -1"),
    (["grade", "NOTEBOOK", "-a", "AUTOGRADER", "--timeout", "inf"], "--timeout: expected a finite number > 0, got inf"),
    (["grade", "NOTEBOOK", "-a", "AUTOGRADER", "-j", "0"], "--jobs: expected an integer >= 1, got 0"),
    (["grade", "NOTEBOOK", "-a", "AUTOGRADER", "-j", "2", "--dask", "local:2"], "not allowed with argument -j/--jobs"),
    (["assign", "MISSING"], "masters: MISSING is not an existing file"),
    (["sweep", "OUT", "--seeds", "0"], "--seeds: expected an integer >= 1, got 0"),
    (["sweep", "OUT", "--depth", "0"], "--depth: expected an integer >= 1, got 0"),
    (["sweep", "OUT", "--T", "6", "-8"], "--T: expected an integer >= 2 (a number of tokens), got -8"),
    (["sweep", "OUT", "--gamma", "0"], "--gamma: expected a finite number in (0, 1]"),
    (["sweep", "OUT", "--base-seed", "-1"], "--base-seed: expected an integer in [0, 2^64 - 1], got -1"),
    (["sweep", "OUT", "--device", "not-a-device"], "--device: device must be a torch device string"),
    (["check", "--device", "not-a-device"],
     "--device: device must be a torch device string such as 'cpu' or 'cuda:0', got 'not-a-device'"),
    (["check", "--device", "cuda"], "--device: device='cuda' asks for CUDA, but CUDA is not available"),
    (["bench", "--device", "cuda:1"], "--device: device='cuda:1' asks for CUDA, but CUDA is not available"),
    (["student-copy", "MISSING", "-o", "OUT"], "paths: MISSING is not an existing file"),
    # every command, every kind of bad value
    ([], "the following arguments are required: command"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["check", "--device", "meta"], "--device: the meta device holds no data to compute with"),
    (["check", "--quick", "--full"], "argument --full: not allowed with argument --quick"),
    (["check", "extra"], "unrecognized arguments: extra"),
    (["bench", "--sizes", "1"], "--sizes: expected an integer >= 2 (a number of tokens), got 1"),
    (["bench", "--sizes"], "--sizes: expected at least one argument"),
    (["bench", "--budget", "inf"], "--budget: expected a finite number > 0, got inf"),
    (["bench", "--budget", "soon"], "--budget: expected a number > 0, got 'soon'"),
    (["bench", "--repeats", "1.5"], "--repeats: expected an integer >= 1, got '1.5'"),
    (["bench", "--csv", "EMPTY"], "--csv: EMPTY is not a file name in an existing folder"),
    (["bench", "--csv", "/proc/self/b.csv"], "--csv: /proc/self/b.csv is not in a writable folder"),
    (["bench", "--device", "meta"], "--device: the meta device holds no data"),
    (["bench", "--quick", "--gpu-suite"], "argument --gpu-suite: not allowed with argument --quick"),
    (["bench", "--dtype", "float16"], "--dtype: invalid choice: 'float16'"),
    (["bench", "--grid", "--official", "FILE"], "--official: FILE is not an existing folder"),
    (["sweep", "OUT", "--T", "1"], "--T: expected an integer >= 2 (a number of tokens), got 1"),
    (["sweep", "OUT", "--T"], "--T: expected at least one argument"),
    (["sweep", "OUT", "--gamma", "2"], "--gamma: expected a finite number in (0, 1] (gamma = T/d"),
    (["sweep", "OUT", "--gamma", "1", "2"], "--gamma: expected a finite number in (0, 1]"),  # before gamma = 1 runs
    (["sweep", "OUT", "--gamma", "nan"], "--gamma: expected a finite number in (0, 1]"),
    (["sweep", "OUT", "--gamma", "inf"],
     "--gamma: expected a finite number in (0, 1] (gamma = T/d, orthonormal tokens need T <= d), got inf"),
    (["sweep", "OUT", "--gamma", "half"], "--gamma: expected a number in (0, 1]"),
    (["sweep", "OUT", "--seeds", "1.5"], "--seeds: expected an integer >= 1, got '1.5'"),
    (["sweep", "OUT", "--depth", "two"], "--depth: expected an integer >= 1, got 'two'"),
    (["sweep", "OUT", "--base-seed", str(2**64)], f"--base-seed: expected an integer in [0, 2^64 - 1], got {2**64}"),
    (["sweep", "OUT", "--dask", "local:0"], "--dask: expected 'local:N' with N >= 1 local workers, got 'local:0'"),
    (["sweep", "OUT", "--dask", "local:x"], "--dask: expected 'local:N' with N >= 1 local workers, got 'local:x'"),
    (["sweep", "OUT", "--dask", "nowhere"],
     "--dask: expected 'local:N' or a scheduler address such as tcp://host:8786"),
    (["sweep", "OUT", "--dask", ""],
     "--dask: expected 'local:N' or a scheduler address such as tcp://host:8786, got ''"),
    (["sweep", "OUT", "--dtype", "float16"], "--dtype: invalid choice: 'float16'"),
    (["sweep", "FILE"], "argument out: FILE is a file, not a folder"),
    (["sweep", "FILE/out"], "argument out: FILE/out: FILE is a file, not a folder"),
    (["sweep", ""], "argument out: expected a folder, got ''"),
    (["sweep", NOWRITE], f"argument out: {NOWRITE}: the folder /proc/self is not writable"),
    (["student-copy", "EMPTY", "-o", "OUT"], "paths: EMPTY is not an existing file"),
    (["student-copy", "FILE", "-o", "OUT"], "paths: FILE is not a chapter (a .md or .ipynb notebook)"),
    (["student-copy", "CHAPTER", "-o", "FILE"], "-o/--output: FILE is a file, not a folder"),
    (["student-copy", "CHAPTER", "-o", "FILE/sub"], "-o/--output: FILE/sub: FILE is a file, not a folder"),
    (["student-copy", "CHAPTER", "-o", NOWRITE],
     "-o/--output: /proc/self/rcteach-test: the folder /proc/self is not writable"),
    (["student-copy", "CHAPTER", "--to", "pdf", "-o", "OUT"], "--to: invalid choice: 'pdf'"),
    (["student-copy", "CHAPTER"], "the following arguments are required: -o/--output"),
    (["assign", "--source", "FILE"], "--source: FILE is not an existing folder"),
    (["assign", "-o", "FILE"], "-o/--output: FILE is a file, not a folder"),
    (["assign", "-o", NOWRITE], "-o/--output: /proc/self/rcteach-test: the folder /proc/self is not writable"),
]

REFUSED_AFTER_PARSING = [  # (arguments, what the message says): checked after parsing, before any work
    (["check", "-k", ""], "-k '' matches no check"),
    (["bench", "--sizes", "16", "16"], "--sizes: 16 given twice"),
    (["bench", "--depths", "2", "2"], "--depths: 2 given twice"),
    (["bench", "--grid", "--sizes", "16"],
     "--grid times the authors' whole grid and takes only --official; --sizes does not apply"),
    (["bench", "--grid", "--quick"], "--quick does not apply"),
    (["bench", "--grid", "--csv", "OUT.csv"], "--csv does not apply"),
    (["bench", "--official", "EMPTY"], "--official needs --grid"),
    (["bench", "--grid", "--official", "EMPTY"], "--official: EMPTY is not a checkout of the Mind-the-Gap code"),
    (["sweep", "OUT", "--T", "8", "8"], "--T: 8 given twice"),
    (["sweep", "OUT", "--gamma", "0.5", "0.5"], "--gamma: 0.5 given twice"),
    (["sweep", "OUT", "--configs", "A,A"], "configs: 'A' named twice"),
    (["sweep", "OUT", "--configs", ""], "configs must be 'all', 'NAME,NAME,...' or a non-empty list of names"),
    (["sweep", "OUT", "--configs", "all,A"], "configs: unknown configuration(s) ['all']"),
    (["sweep", "OUT", "--gamma", "1e-300"], "gamma=1e-300 at T=20 gives d = 2e+301 >= 2^53 dimensions"),
    (["sweep", "OUT", "--device", "cuda", "--dask", "local:2"], "--device: device='cuda' asks for CUDA"),
    (["sweep", "OUT", "--device", "meta"], "--device: the meta device holds no data"),
    (["sweep", "OUT", "--T", "100000"], "T=100000 needs about 29802 GiB a point (40 networks of T x T in a batch)"),
    (["student-copy", "CHAPTER", "CHAPTER2", "-o", "OUT"], "paths: two chapters would both be written to OUT/x.md"),
    (["student-copy", "BADNB", "-o", "OUT"], "path BADNB is not a notebook jupytext can read"),
    (["student-copy", "CHAPTER", "-o", "CHDIR"],
     "the student copy would overwrite CHAPTER: choose another out_dir (-o)"),
    (["assign", "--source", "EMPTY"], "--source EMPTY holds no master notebooks"),
]


@pytest.mark.parametrize("argv, message", BAD_ARGUMENTS, ids=[" ".join(a) for a, _ in BAD_ARGUMENTS])
def test_bad_argument_exits_two(argv, message, placeholders, tmp_path, capsys, no_cuda):
    err = _usage_error([placeholders(a) for a in argv], capsys, placeholders(message))
    assert "usage:" in err and not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.parametrize("argv, message", REFUSED_AFTER_PARSING, ids=[" ".join(a) for a, _ in REFUSED_AFTER_PARSING])
def test_bad_value_found_after_parsing_exits_two_before_any_work(argv, message, placeholders, tmp_path, capsys,
                                                                 no_cuda):
    err = _usage_error([placeholders(a) for a in argv], capsys, placeholders(message))
    assert err.strip().count("\n") == 0 and "Traceback" not in err  # one line
    assert not (tmp_path / "out").exists() and not (tmp_path / "ch" / "x.ipynb").exists()


def test_bad_values_found_after_parsing_exit_two(tmp_path, capsys, monkeypatch, no_cuda):
    _usage_error(["check", "-k", "zz-matches-nothing-*"], capsys, "-k 'zz-matches-nothing-*' matches no check")
    monkeypatch.setenv("RCTEACH_DEVICE", "cuda")  # the default device, from the environment
    _usage_error(["check", "-k", "mask-connectivity"], capsys, "$RCTEACH_DEVICE", "CUDA is not available",
                 "unset RCTEACH_DEVICE")
    monkeypatch.setenv("RCTEACH_DEVICE", "not-a-device")
    _usage_error(["check", "-k", "mask-connectivity"], capsys, "RCTEACH_DEVICE must be a torch device string")
    monkeypatch.delenv("RCTEACH_DEVICE")
    _usage_error(["bench", "--gpu-suite"], capsys,
                 "--gpu-suite: device='cuda' asks for CUDA, but CUDA is not available")
    _usage_error(["assign", "--source", str(tmp_path)], capsys, "holds no master notebooks")
    _usage_error(["sweep", str(tmp_path / "x"), "--configs", "B", "--quiet"], capsys, "python -m rcteach sweep: error:")
    _usage_error(["sweep", str(tmp_path / "y"), "--configs", "A", "--device", "cuda", "--quiet"], capsys,
                 "--device: device='cuda' asks for CUDA, but CUDA is not available")


def test_sweep_refuses_other_seeds_or_base_seed(tmp_path, capsys):
    """The settings file next to the table covers seeds and base_seed: resuming with others mixes nothing."""
    args = ["sweep", str(tmp_path), "--configs", "A", "--T", "6", "--gamma", "1", "--depth", "2", "--quiet"]
    assert main(args + ["--seeds", "2"]) == 0
    table = (tmp_path / "depth.csv").read_text()
    for other in (["--seeds", "3"], ["--seeds", "2", "--base-seed", "1"]):
        _usage_error(args + other, capsys, "other settings", "--force")
        assert (tmp_path / "depth.csv").read_text() == table  # untouched
    assert main(args + ["--seeds", "2", "--base-seed", "1", "--force"]) == 0
    assert (tmp_path / "depth.csv").read_text() != table  # a new table, another replicate
    assert json.loads((tmp_path / "depth.json").read_text())["base_seed"] == 1
    capsys.readouterr()


def _raise(*args, **kwargs):
    raise ZeroDivisionError("boom")


def test_internal_error_exits_three(temporary_checks, capsys, monkeypatch):
    prefix, add = temporary_checks
    add("ok", 0.0)
    monkeypatch.setattr(cli, "results_table", _raise)  # a bug of the CLI itself, not of a check
    assert main(["check", "-k", f"{prefix}-*"]) == 3
    err = capsys.readouterr().err
    assert "internal error: ZeroDivisionError: boom (--verbose shows the traceback)" in err
    assert "Traceback (most recent call last)" not in err and err.rstrip().splitlines()[-1].startswith(
        "python -m rcteach check: internal error")  # one line (after the progress bar)
    for argv in (["--verbose", "check", "-k", f"{prefix}-*"], ["check", "-k", f"{prefix}-*", "--verbose"]):
        assert main(argv) == 3
        err = capsys.readouterr().err
        assert "Traceback (most recent call last)" in err and err.rstrip().endswith("ZeroDivisionError: boom")


def _strict_json(text: str):
    """Parse ``text`` refusing NaN and Infinity (which json.loads accepts by default)."""
    def refuse(token):
        raise AssertionError(f"not strict JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_json_is_strict_with_an_infinite_value(temporary_checks, capsys):
    prefix, add = temporary_checks
    add("inf", float("inf"))
    add("nan", float("nan"))
    assert main(["check", "--json", "-k", f"{prefix}-*"]) == 1
    rows = {r["name"]: r for r in _strict_json(capsys.readouterr().out)}
    inf, nan = rows[f"{prefix}-inf"], rows[f"{prefix}-nan"]
    assert inf["measured"] is None and inf["measured_note"] == "inf" and inf["verdict"] == "FAIL"
    assert nan["measured"] is None and nan["measured_note"] == "nan" and not nan["passed"]
    assert {"resolves", "mutants", "prediction", "tolerance"} <= set(inf) and "prediction_note" not in inf
    assert strict_row({"x": [1.0, -math.inf, math.nan, math.inf], "y": {"z": math.inf}}) == {
        "x": [1.0, None, None, None], "x_note": "-inf, nan, inf", "y": {"z": None}, "y_note": "inf"}


def test_json_is_strict_when_resolves_is_infinite(temporary_checks, capsys):
    prefix, _ = temporary_checks
    register(f"{prefix}-loose", claim="c", source="derived", tolerance_note="n", mutants={"x 3": lambda p, s: 3 * p})(
        lambda: Comparison(prediction=1.0, measured=1.0, tolerance=2.0, relative=True))  # detects no relative error
    assert main(["check", "--json", "--mutants", "-k", f"{prefix}-*"]) == 1  # its mutant survives
    (row,) = _strict_json(capsys.readouterr().out)
    assert row["resolves"] is None and row["resolves_note"] == "inf" and row["verdict"] == "PASS"


def test_a_check_that_raises_is_an_error_row(temporary_checks, capsys):
    prefix, add = temporary_checks
    add("ok", 0.0)
    register(f"{prefix}-raises", claim="c", source="exact", tolerance_note="n", mutants=ONE_OFF)(
        lambda: 1 / 0)
    assert main(["check", "--json", "-k", f"{prefix}-*"]) == 1
    rows = {r["name"]: r for r in _strict_json(capsys.readouterr().out)}
    assert rows[f"{prefix}-ok"]["verdict"] == "PASS" and "error" not in rows[f"{prefix}-ok"]
    bad = rows[f"{prefix}-raises"]
    assert bad["verdict"] == "ERROR" and bad["error"] == "ZeroDivisionError: division by zero"
    assert bad["passed"] is False and bad["mutants"] == [] and set(rows[f"{prefix}-ok"]) <= set(bad)
    for extra in ([], ["--mutants"]):
        assert main(["check", "-k", f"{prefix}-*", *extra]) == 1
        out = capsys.readouterr().out
        assert f"{prefix}-raises  ERROR  ZeroDivisionError: division by zero" in out and f"{prefix}-ok" in out
        assert out.rstrip().endswith("; 1 raised (ERROR)")


def test_grade_reports_why_a_submission_could_not_be_graded(tmp_path, capsys, monkeypatch):
    grading = pytest.importorskip("rcteach.tools.grading")
    (tmp_path / "ag").mkdir()
    for name in ("key.py", "questions.json", "good.ipynb", "bad.ipynb", "crashed.ipynb"):
        (tmp_path / ("ag" if name.endswith(("py", "json")) else "") / name).write_text("{}")

    def fake(subs, autograder, **kwargs):  # the sandboxed run is tested in test_grading_attacks
        for sub in subs:
            bad, crashed = sub.path.name == "bad.ipynb", sub.path.name == "crashed.ipynb"
            error = ("RuntimeError: the answer key raised KeyError: 'q9'" if bad
                     else "exit status 1: JSONDecodeError: Expecting value" if crashed else None)
            notes = [f"not graded: {error}"] if bad else [f"run failed: {error}"] if crashed else []
            yield {"notebook": str(sub.path), "score": 0.0 if bad else 1.0, "possible": 2.0, "tests": [],
                   "graded": not bad, "notes": notes, "error": error}

    monkeypatch.setattr(grading, "load", lambda autograder: grading.Assignment("a1", {"q1": 2.0}, None, {}, {}))
    monkeypatch.setattr(grading, "grade_all", fake)
    notebooks = [str(tmp_path / n) for n in ("good.ipynb", "bad.ipynb", "crashed.ipynb")]
    assert main(["grade", *notebooks, "-a", str(tmp_path / "ag")]) == 1
    out, err = capsys.readouterr()
    assert "bad.ipynb: could not be graded: RuntimeError: the answer key raised KeyError: 'q9'" in err
    assert out.splitlines() == [f"{notebooks[0]}: 1 / 2",
                                f"{notebooks[1]}: not graded: RuntimeError: the answer key raised KeyError: 'q9'",
                                f"{notebooks[2]}: 1 / 2  (run failed: exit status 1: JSONDecodeError: Expecting value)"]
    assert main(["grade", notebooks[0], "-a", str(tmp_path / "ag")]) == 0
    capsys.readouterr()


def test_assign_exits_one_when_an_assignment_does_not_build(tmp_path, capsys, monkeypatch):
    grading = pytest.importorskip("rcteach.tools.grading")
    (tmp_path / "a1").mkdir()
    (tmp_path / "a1" / "a1.ipynb").write_text("{}")

    def fails(*args, **kwargs):
        raise RuntimeError("otter assign failed for a1.ipynb: the solutions fail test q1")

    monkeypatch.setattr(grading, "assign_all", fails)
    assert main(["assign", "--source", str(tmp_path), "-o", str(tmp_path / "build")]) == 1
    assert "rcteach assign: otter assign failed for a1.ipynb: the solutions fail test q1" in capsys.readouterr().err


def test_a_failed_run_says_why():
    from rcteach.tools.grading import _failure
    from rcteach.tools.grading.sandbox import Outcome

    assert _failure(Outcome(b"", "Traceback ...\nJSONDecodeError: Expecting value", 1, [], 0.1)) == \
        "exit status 1: JSONDecodeError: Expecting value"
    assert _failure(Outcome(b"", "", -9, [], 0.1)) == "exit status -9: no output"
    assert _failure(Outcome(b"", "x", -9, ["wall-clock limit (1 s)"], 0.1)) is None  # limits_hit says why
    assert _failure(Outcome(b"", "x", 0, [], 0.1)) is None
