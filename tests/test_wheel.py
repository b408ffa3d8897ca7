"""rcteach installed without the repository: the sdist and the wheel built from a checkout, the wheel
installed into a fresh venv outside it, and the README's commands run there.

The fresh venv reuses this environment's packages (no network, no second copy): it is made with the
base interpreter, and a ``.pth`` file puts on its path a folder of links to this environment's
site-packages entries *except* rcteach (so the wheel's copy is the only one), and transformers and
tokenizers (so the optional ``models`` extra is missing, as after a plain ``pip install rcteach``).
The thread variables are removed from the commands' environment: ``check`` runs with the threads
rcteach chooses itself, on the checks of [models] (skipped) and a few cheap others (every check runs
in tests/test_checks_registry.py).  Marked ``slow``; ``make test`` and CI run it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import nbformat
import pytest

from rcteach.checks import all_checks
from rcteach.shipped import producers
from rcteach.tools.bench_threads import THREAD_VARIABLES

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
#: The checks run there besides the ones of [models] (which skip): a few cheap ones.  Every check runs in
#: tests/test_checks_registry.py; this is the console script, outside the checkout, with the kit's threads.
SOME_CHECKS = "mask-*"
#: site-packages entries the fresh venv does not see (their names' start, lower case)
HIDDEN = ("rcteach", "__editable__", "transformers", "tokenizers")


def _run(cmd, cwd, env=None, timeout=600) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The sdist and the wheel, built as a release is (``python -m build``: the wheel from the sdist)."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT], cwd=out)
    sdist, = out.glob("rcteach-*.tar.gz")
    wheel, = out.glob("rcteach-*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def fresh(tmp_path_factory, dist):
    """A fresh venv outside the checkout with the wheel installed; returns (its bin folder, environment)."""
    base = tmp_path_factory.mktemp("fresh")
    venv, deps = base / "venv", base / "deps"
    _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", venv], cwd=base)
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(HIDDEN) and entry.suffix != ".pth":
            (deps / entry.name).symlink_to(entry)
    python = venv / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=base).stdout.strip())
    (site / "project_dependencies.pth").write_text(f"{deps}\n")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index",
          "--ignore-installed", dist[1]], cwd=base)
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES and k != "PYTHONPATH"}
    return venv / "bin", env


def test_sdist_is_the_source(dist):
    """The sdist holds every file git tracks: the decision is to ship the tests and all they need
    (conftest.py, the chapters, the masters, the book's configuration), so that they collect and run
    from it as from a checkout.  (Collecting them there, 1670 tests and no error, costs 24 s of CPU:
    measured once, not repeated here; this is why it holds.)"""
    with tarfile.open(dist[0]) as tar:
        shipped = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files")
    tracked = set(_run(["git", "ls-files"], cwd=ROOT).stdout.split())
    assert tracked - shipped == set()
    assert not [p for p in shipped if "__pycache__" in p or ".ipynb_checkpoints" in p]


def test_wheel_ships_chapters_masters_and_text(dist):
    names = set(zipfile.ZipFile(dist[1]).namelist())
    chapters = {p.name for p in (ROOT / "book").glob("*.md")}
    assert {n.rsplit("/", 1)[-1] for n in names if n.startswith("rcteach/_data/book/")} == chapters
    masters = {str(p.relative_to(ROOT)) for p in (ROOT / "assignments").glob("*/*") if p.suffix in (".ipynb", ".py")}
    assert {n.removeprefix("rcteach/_data/") for n in names if n.startswith("rcteach/_data/assignments/")} == masters
    shipped_results = {f"rcteach/{name}.json" for name in producers()}
    assert {"rcteach/corpus.txt", "rcteach/precomputed.js", "rcteach-0.1.0.dist-info/licenses/LICENSE",
            *shipped_results} <= names


def test_installed_wheel_runs_the_readme_commands(fresh, tmp_path):
    """Outside the checkout: ``check`` through the console script (exit 0, the model checks SKIPPED with
    the install line, the others selected PASS), ``notebooks`` and one chapter notebook it wrote,
    executed.  (``--version`` and the refusal to overwrite notebooks are tested in-process:
    tests/test_packaging.py.)"""
    bin_, env = fresh
    where = _run([bin_ / "python", "-c", "import rcteach, torch; print(rcteach.__file__, torch.get_num_threads())"],
                 cwd=tmp_path, env=env).stdout.split()
    assert Path(where[0]).is_relative_to(bin_.parent) and where[1] == "1"  # the wheel's copy; the kit's one thread

    needs_models = {name for name, c in all_checks().items() if c.extra == "models"}
    selected = [arg for name in sorted(needs_models) for arg in ("-k", name)] + ["-k", SOME_CHECKS]
    rows = json.loads(_run([bin_ / "rcteach", "check", "--json", *selected], cwd=tmp_path, env=env).stdout)
    skipped = [r for r in rows if r["verdict"] == "SKIPPED"]
    assert needs_models and {r["name"] for r in skipped} == needs_models  # exactly the checks of [models]
    assert all("pip install 'rcteach[models]'" in r["skipped"] for r in skipped)
    ran = [r for r in rows if r not in skipped]
    assert ran and all(r["verdict"] == "PASS" for r in ran), [(r["name"], r["verdict"]) for r in ran]

    out = tmp_path / "chapters"
    _run([bin_ / "rcteach", "notebooks", out], cwd=tmp_path, env=env)
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(f"{p.stem}.ipynb" for p in (ROOT / "book").glob("*.md"))
    nb = nbformat.read(out / "intro.ipynb", as_version=4)
    assert "jupytext" not in nb.metadata and all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    run = ("import nbclient, nbformat, sys; nb = nbformat.read(sys.argv[1], as_version=4); "  # + a cell: whose rcteach?
           "nb.cells.append(nbformat.v4.new_code_cell('import rcteach; print(rcteach.__file__)')); "
           "nbclient.NotebookClient(nb, timeout=300, kernel_name='python3').execute(); nbformat.write(nb, sys.argv[1])")
    _run([bin_ / "python", "-c", run, out / "intro.ipynb"], cwd=out, env=env)
    cells = [c for c in nbformat.read(out / "intro.ipynb", as_version=4).cells if c.cell_type == "code"]
    assert all(c.execution_count for c in cells)  # every cell ran (an error would have stopped the run)
    assert any("image/png" in o.get("data", {}) for c in cells for o in c.outputs)  # the figure
    assert Path(cells[-1].outputs[0].text.strip()).is_relative_to(bin_.parent)  # the kernel ran the wheel's rcteach
    shutil.rmtree(out)
