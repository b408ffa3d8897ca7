"""Unit tests for the command line, ``python -m rcteach check``."""

import fnmatch
import importlib
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from rcteach.checks import Comparison, register
from rcteach.tools.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
registry_module = importlib.import_module("rcteach.checks.registry")
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
    assert (args.mode, args.k, args.json, args.device) == ("quick", "*", False, None)
    assert build_parser().parse_args(["check", "--full", "-k", "x*"]).mode == "full"


def test_parser_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        main([])  # a command is required
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["check", "--quick", "--full"])  # mutually exclusive
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2
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
    register(f"{prefix}-weak", claim="c", source="derived", tolerance_note="n", mutants={"1% high": lambda p, s: 1.01 * p})(
        lambda: Comparison(prediction=1.0, measured=1.0, tolerance=0.1, relative=True))
    assert main(["check", "-k", f"{prefix}-*"]) == 0  # without --mutants a surviving mutant does not matter
    assert main(["check", "--mutants", "-k", f"{prefix}-*"]) == 1
    assert "SURVIVED  1% high" in capsys.readouterr().out
    assert main(["check", "--mutants", "--json", "-k", f"{prefix}-weak"]) == 1
    (result,) = json.loads(capsys.readouterr().out)
    assert result["mutants"] == [{"name": "1% high", "killed": False}] and result["passed"] is True
    assert result["resolves"] == pytest.approx(0.1 / 0.9)


def test_cli_errors():
    with pytest.raises(ValueError, match="pattern"):
        main(["check", "-k", "zz-matches-nothing-*"])
    with pytest.raises(ValueError, match="device"):
        main(["check", "-k", "mask-connectivity", "--device", "not-a-device"])
