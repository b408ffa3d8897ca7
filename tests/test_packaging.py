"""Packaging (issue 24): threads chosen by the kit, optional extras SKIPPED, the shipped chapters and
masters, the command line's --version and Ctrl-C, other systems (simulated), the metadata.

The wheel itself, installed outside the checkout, is tested in tests/test_wheel.py (slow)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import tomllib
import uuid
from pathlib import Path

import nbformat
import pytest
import torch
import yaml

import rcteach
from rcteach import _extras, _files, threads
import rcteach.checks.registry as registry_module
from rcteach.checks import Comparison, check, register, results_html, results_table, run_check
from rcteach.checks.registry import mutants_table
from rcteach.tools import cli

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


# -- threads -----------------------------------------------------------------------------------

@pytest.mark.parametrize("environ, expected", [
    ({}, (1, "rcteach's default")),
    ({"OMP_NUM_THREADS": "4"}, (None, "OMP_NUM_THREADS")),
    ({"MKL_NUM_THREADS": "2"}, (None, "MKL_NUM_THREADS")),
    ({"OMP_NUM_THREADS": " "}, (1, "rcteach's default")),  # set but empty: not a choice
    ({"RCTEACH_THREADS": "3", "OMP_NUM_THREADS": "2"}, (3, "RCTEACH_THREADS")),  # rcteach's own variable first
])
def test_thread_precedence(environ, expected):
    assert threads.chosen(environ) == expected


@pytest.mark.parametrize("text", ["0", "-1", "two", "1.5"])
def test_bad_rcteach_threads_is_an_error_naming_it(text):
    with pytest.raises(ValueError, match=f"RCTEACH_THREADS must be a positive integer.*{text!r}"):
        threads.chosen({"RCTEACH_THREADS": text})


def test_configure_sets_the_count_unless_the_user_chose():
    before = torch.get_num_threads()
    try:
        assert threads.configure({"RCTEACH_THREADS": "2"}) == 2
        assert threads.configure({}) == 1
        torch.set_num_threads(2)  # the user's call after import: the libraries' variables leave it alone
        assert threads.configure({"OMP_NUM_THREADS": "8"}) == 2
    finally:
        torch.set_num_threads(before)


def test_a_default_environment_gets_one_blas_thread_too():
    """With no thread variable, numpy's OpenBLAS (loaded by the import) and scipy's (loaded after it) run one
    thread, as torch does: a fresh process, the variables removed."""
    unset = (*threads.USER_ENV, threads.THREADS_ENV, threads.OPENBLAS_ENV)
    env = {k: v for k, v in os.environ.items() if k not in unset}
    code = ("import rcteach, torch, threadpoolctl, scipy.linalg\n"
            "pools = [p['num_threads'] for p in threadpoolctl.threadpool_info() if p['user_api'] == 'blas']\n"
            "print(torch.get_num_threads(), len(pools), max(pools))")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    torch_threads, pools, most = map(int, run.stdout.split())
    assert (torch_threads, most) == (1, 1) and pools >= 2  # numpy's and scipy's OpenBLAS


# -- optional extras: SKIPPED ------------------------------------------------------------------

def test_extras_are_pyproject_extras():
    assert set(_extras.EXTRAS) == set(PYPROJECT["project"]["optional-dependencies"])
    with pytest.raises(ValueError, match="extra must be one of"):
        _extras.missing("gpu")


def test_missing_extra_names_the_module_and_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # as if not installed (find_spec raises ValueError)
    reason = _extras.missing("models")
    assert "tokenizers" in reason and "pip install 'rcteach[models]'" in reason
    with pytest.raises(ModuleNotFoundError, match=r"rcteach\[models\]"):
        rcteach.models._transformers.__wrapped__()


@pytest.fixture
def needs_models(monkeypatch):
    """Two throwaway checks, one needing the models extra, the other failing; the extra made missing."""
    prefix = f"zz-packaging-{uuid.uuid4().hex[:8]}"
    one_off = {"one off": lambda p, s: p + 1}
    register(f"{prefix}-model", extra="models", claim="c", source="exact", tolerance_note="n", mutants=one_off)(
        lambda: Comparison(0.0, 1.0, 1e-10))  # it would fail, if it ran
    register(f"{prefix}-plain", claim="c", source="exact", tolerance_note="n", mutants=one_off)(
        lambda: Comparison(0.0, 0.0, 1e-10))
    monkeypatch.setattr(_extras, "missing",
                        lambda extra: f"needs transformers, not installed: pip install 'rcteach[{extra}]'")
    yield prefix
    for name in [n for n in registry_module._REGISTRY if n.startswith(prefix)]:
        del registry_module._REGISTRY[name]


def test_a_check_without_its_extra_is_skipped(needs_models):
    r = run_check(f"{needs_models}-model")
    assert (r.verdict, r.passed, r.comparison, r.mutants) == ("SKIPPED", False, None, [])
    d = r.as_dict()
    assert "rcteach[models]" in d["skipped"] and d["prediction"] is None and d["passed"] is False
    assert "SKIPPED" in repr(r)
    plain = run_check(f"{needs_models}-plain")
    table = results_table([r, plain]).splitlines()
    assert table[2].split()[-1] == "SKIPPED" and table[3].split()[-1] == "PASS"
    assert table[-1] == ("1 passed, 0 failed, 1 skipped "
                         "(needs transformers, not installed: pip install 'rcteach[models]')")
    assert "Skipped: needs transformers" in results_html([r])
    assert "[SKIPPED: needs transformers" in mutants_table([r])
    assert [x.verdict for x in check(f"{needs_models}-*")] == ["SKIPPED", "PASS"]  # no CheckFailed


def test_skipped_checks_fail_no_run(needs_models, capsys):
    assert cli.main(["check", "-k", f"{needs_models}-*", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["verdict"] for r in rows] == ["SKIPPED", "PASS"]
    assert cli.main(["check", "-k", f"{needs_models}-*", "--mutants"]) == 0
    assert "1 skipped" in capsys.readouterr().out


def test_register_rejects_an_unknown_extra():
    with pytest.raises(ValueError, match="extra must be one of"):
        register("zz-packaging-bad-extra", extra="gpu", claim="c", source="exact", tolerance_note="n",
                 mutants={"m": lambda p, s: p})


def test_model_checks_declare_the_models_extra():
    needing = {n for n, c in registry_module.all_checks().items() if c.extra == "models"}
    assert needing == {n for n,
                       c in registry_module.all_checks().items() if c.func.__module__ == "rcteach.checks.models"}
    assert len(needing) >= 6


# -- shipped files -----------------------------------------------------------------------------

def test_a_checkout_reads_its_own_folders():
    assert not _files.DATA.exists()  # never written into the source tree (setup.py builds it in build/)
    assert _files.book_dir() == ROOT / "book" and _files.assignments_dir() == ROOT / "assignments"
    assert [p.name for p in _files.chapters()] == sorted(p.name for p in (ROOT / "book").glob("*.md"))


def test_an_installation_reads_the_package_data(tmp_path, monkeypatch):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.md").write_text("x")
    monkeypatch.setattr(_files, "DATA", tmp_path)
    assert _files.chapters() == [tmp_path / "book" / "intro.md"]
    monkeypatch.setattr(_files, "PACKAGE", tmp_path / "site-packages" / "rcteach")  # no data, no checkout
    monkeypatch.setattr(_files, "DATA", tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="built without them"):
        _files.chapters()


def test_notebooks_command_writes_clean_notebooks(tmp_path, monkeypatch, capsys):
    chapters = [ROOT / "book" / "03_centred_attention.md", ROOT / "book" / "intro.md"]
    monkeypatch.setattr(_files, "chapters", lambda: chapters)
    out = tmp_path / "nb"
    assert cli.main(["notebooks", str(out)]) == 0
    assert f"wrote 2 chapters as notebooks into {out}" in capsys.readouterr().out
    nb = nbformat.read(out / "03_centred_attention.ipynb", as_version=4)
    nbformat.validate(nb)
    assert "jupytext" not in nb.metadata and nb.metadata.kernelspec.name == "python3"
    # what JupyterLab writes when the kernel starts, already there: opening it changes nothing
    from ipykernel.ipkernel import IPythonKernel
    assert nb.metadata.language_info == IPythonKernel.language_info
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)
    solutions = [c for c in code if "solution" in c.metadata.get("tags", [])]
    assert solutions and all(c.metadata["jupyter"]["source_hidden"] for c in solutions)  # collapsed, as in the book
    assert cli.main(["notebooks", str(out)]) == 2  # a student's work is not overwritten
    assert "already holds 03_centred_attention.ipynb, intro.ipynb" in capsys.readouterr().err
    assert cli.main(["notebooks", str(out), "--force"]) == 0


def test_assign_defaults_to_the_shipped_masters():
    from rcteach.tools import grading

    assert grading.ASSIGNMENTS_DIR == _files.assignments_dir()
    args = cli.build_parser().parse_args(["assign"])
    assert Path(args.source) == _files.assignments_dir() and grading.masters(args.source)


def test_the_text_of_chapter_12_is_fixed():
    """The shipped text, not the install's files: the token ids are the same everywhere."""
    text = rcteach.models.corpus_text()
    assert text == (ROOT / "rcteach" / "corpus.txt").read_text(encoding="utf-8")
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == "e8bf5ce18fd974ce"


# -- the command line ---------------------------------------------------------------------------

def test_version_and_plain_help(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"rcteach {rcteach.__version__}"
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "exit status" in text and not any(m in text for m in ("``", ":func:", ":mod:", ":class:"))


def test_ctrl_c_exits_130_with_one_line(tmp_path):
    """A real SIGINT while ``check`` runs: exit 130, one line on stderr, no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "rcteach", "check"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,  # SIGINT as at a terminal (a background job ignores it)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = ""
    while "check/s]" not in seen:  # the progress bar drawn: main() is running the checks
        seen += proc.stderr.read(1) or pytest.fail(f"check ended before it could be interrupted: {seen}")
    time.sleep(0.5)  # (not while tqdm is still setting the bar up)
    proc.send_signal(signal.SIGINT)
    err = seen + proc.stderr.read()
    assert proc.wait(timeout=60) == 130
    assert err.splitlines()[-1] == "python -m rcteach check: interrupted" and "Traceback" not in err


def test_every_command_but_grade_works_without_posix_modules(tmp_path):
    """Windows, simulated: ``resource`` and ``fcntl`` cannot be imported.  The parser builds, a check
    runs, the tools import, and ``grade`` says why it cannot run (exit 2)."""
    (tmp_path / "ag").mkdir()
    for name in ("ag/key.py", "ag/questions.json", "sub.ipynb"):
        (tmp_path / name).write_text("{}")
    code = textwrap.dedent("""
        import sys
        sys.modules["resource"] = sys.modules["fcntl"] = None
        from rcteach.tools import bench, cli, notebooks, student
        codes = [cli.main(["--help"]), cli.main(["check", "-k", "mask-connectivity"]),
                 cli.main(["grade", "sub.ipynb", "-a", "ag"])]
        print("codes", *codes)
        print("loaded", "rcteach.tools.grading.sandbox" in sys.modules)
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "codes 0 0 2" in lines and "loaded False" in lines, proc.stdout[-2000:]
    assert "grade: error: grading runs each submission in a bubblewrap sandbox, which needs Linux" in proc.stderr
    assert re.search(r"lacks the module (resource|fcntl)\b", proc.stderr) and "Traceback" not in proc.stderr


# -- metadata -----------------------------------------------------------------------------------

def test_metadata():
    project = PYPROJECT["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert "MIT License" in (ROOT / "LICENSE").read_text() and "the rcteach authors" in (ROOT / "LICENSE").read_text()
    assert project["authors"] and project["classifiers"] and "version" in project["dynamic"]
    assert PYPROJECT["build-system"]["requires"][0].startswith("setuptools>=77")
    assert f"## {rcteach.__version__} " in (ROOT / "CHANGELOG.md").read_text()
    assert "rcteach = \"rcteach.tools.cli:main\"" in (ROOT / "pyproject.toml").read_text()


def test_citation_file_cites_the_kit_and_the_two_papers():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert {"message", "title", "authors", "version", "license"} <= set(cff) and cff["version"] == rcteach.__version__
    bib = (ROOT / "book" / "references.bib").read_text()
    titles = [ref["title"] for ref in cff["references"]]
    assert len(titles) == 2 and all(f"title     = {{{t}}}" in bib for t in titles)  # as the book cites them
