"""A Gradescope autograder for an assignment: the zip Gradescope builds its image from, and the
command that grades one submission inside it.

Gradescope's autograder specification: the zip holds ``setup.sh`` (run once, as root, to build
the image) and ``run_autograder`` (run as root in a fresh container for each submission, whose
files are in ``/autograder/submission/``); the zip is unpacked into ``/autograder/source/``, and the
result goes to ``/autograder/results/results.json``: ``score``, ``output``, ``visibility``,
``stdout_visibility``, ``execution_time`` and ``tests``, each with ``name``, ``score``, ``max_score``,
``status``, ``output`` and ``visibility``.

:func:`autograder_zip` writes that zip: ``setup.sh`` installs Python 3.11 or later, a virtual
environment in ``/autograder/venv``, torch (CPU build) and rcteach (its source is in the zip,
without the master notebooks) at the versions of this environment; ``run_autograder`` makes
``/autograder/source`` private to root and runs ``python -m rcteach gradescope-run``, that is
:func:`run_submission`: it grades the notebook with :func:`rcteach.tools.grading.grade` and writes
results.json.  Those containers offer no user namespaces, so the ``"auto"`` backend is the container
one: the notebook runs as ``nobody`` (see :mod:`.sandbox`).

``RCTEACH_AUTOGRADER_ROOT``, ``RCTEACH_PYTHON`` and ``RCTEACH_BACKEND`` point ``run_autograder`` at
another root folder, interpreter and backend (to try it outside Gradescope, in the same layout).
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import re
import stat
import time
import zipfile

__all__ = ["autograder_zip", "requirements", "run_submission", "add_project", "TORCH_INDEX"]

TORCH_INDEX = "https://download.pytorch.org/whl/cpu"  #: torch's CPU-only wheels (the default wheel pulls CUDA)
PROJECT = "rcteach-src"  #: the folder of rcteach's source in the zips
EXTRA = ("ipython",)  #: imported by the grading harness, installed through ipywidgets; pinned as well

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, to build the autograder's image (written by rcteach assign).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
recent() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }
PY=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null 2>&1 && recent "$candidate"; then PY="$candidate"; break; fi
done
if [ -z "$PY" ]; then  # e.g. Ubuntu 22.04, whose python3 is 3.10
  apt-get install -y -qq --no-install-recommends python3.11
  PY=python3.11
fi
apt-get install -y -qq --no-install-recommends \
  "$("$PY" -c 'import sys; print("python%d.%d-venv" % sys.version_info[:2])')" || true
"$PY" -m venv /autograder/venv
/autograder/venv/bin/pip install --quiet --upgrade pip
/autograder/venv/bin/pip install --quiet --index-url @TORCH_INDEX@ \
  "$(grep '^torch==' /autograder/source/requirements.txt)"
/autograder/venv/bin/pip install --quiet -r /autograder/source/requirements.txt /autograder/source/@PROJECT@
chmod -R go-rwx /autograder/source
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this as root in a fresh container for each submission (written by rcteach assign).
set -euo pipefail
AUTOGRADER="${RCTEACH_AUTOGRADER_ROOT:-/autograder}"
PYTHON="${RCTEACH_PYTHON:-$AUTOGRADER/venv/bin/python}"
chmod -R go-rwx "$AUTOGRADER/source"  # the answer key and the solutions: root's only
cd "$AUTOGRADER"
exec env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 "$PYTHON" -m rcteach gradescope-run "$AUTOGRADER" --timeout @TIMEOUT@ \
  --backend "${RCTEACH_BACKEND:-auto}"
"""


def requirements() -> str:
    """rcteach's dependencies (and :data:`EXTRA`) pinned at the versions installed here, torch first."""
    names = [re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0] for r in importlib.metadata.requires("rcteach") or ()
             if "extra ==" not in r] + list(EXTRA)
    pins = [f"{name}=={importlib.metadata.version(name).split('+')[0]}" for name in names]
    return "\n".join(sorted(pins, key=lambda pin: not pin.startswith("torch=="))) + "\n"


def add_project(zf: zipfile.ZipFile, prefix: str = PROJECT) -> None:
    """Add rcteach's installable source (``pyproject.toml``, ``README.md``, ``LICENSE``, the package without
    caches) under ``prefix/`` of ``zf``: no master notebooks, tests or book."""
    from . import PACKAGE_DIR

    root = PACKAGE_DIR.parent
    if not (root / "pyproject.toml").is_file():
        raise RuntimeError(f"rcteach's source tree is needed to write an autograder (no pyproject.toml in {root})")
    for name in ("pyproject.toml", "README.md", "LICENSE"):  # what pyproject.toml names (readme, license-files)
        zf.write(root / name, f"{prefix}/{name}")
    for path in sorted(PACKAGE_DIR.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            zf.write(path, f"{prefix}/{path.relative_to(root)}")


def _executable(zf: zipfile.ZipFile, name: str, text: str) -> None:
    info = zipfile.ZipInfo(name, date_time=time.localtime()[:6])
    info.external_attr = (stat.S_IFREG | 0o755) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, text)


def autograder_zip(autograder, output, *, timeout: float = 600) -> pathlib.Path:
    """Write the Gradescope autograder zip of the autograder folder ``autograder`` (built by
    ``assign``) to ``output``; ``timeout``: seconds per submission.  Returns ``output``."""
    from . import KEY, QUESTIONS, _autograder_dir

    folder = _autograder_dir(autograder)
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    name = json.loads((folder / QUESTIONS).read_text())["name"]
    output = pathlib.Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as zf:
        _executable(zf, "setup.sh", SETUP_SH.replace("@TORCH_INDEX@", TORCH_INDEX).replace("@PROJECT@", PROJECT))
        _executable(zf, "run_autograder", RUN_AUTOGRADER.replace("@TIMEOUT@", f"{timeout:g}"))
        zf.writestr("requirements.txt", requirements())
        for file in (KEY, QUESTIONS, f"{name}.ipynb"):
            zf.write(folder / file, f"autograder/{file}")
        add_project(zf)
    return output


def _notebook(folder: pathlib.Path, name: str) -> pathlib.Path | None:
    """The submitted notebook: ``<name>.ipynb``, else the only ``.ipynb``, among the regular files
    (not links) inside the submission folder."""
    found = [p for p in sorted(folder.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts
             and stat.S_ISREG(p.lstat().st_mode) and p.resolve().is_relative_to(folder.resolve())]
    named = [p for p in found if p.name == f"{name}.ipynb"]
    if len(named) == 1:
        return named[0]
    return found[0] if len(found) == 1 else None


def _results(r: dict) -> dict:
    """Gradescope's results.json from a :func:`.grade` result."""
    summary = [f"{r['score']:g} / {r['possible']:g}", *r["notes"]]  # limits hit, a failed run, a cell stopped
    tests = [{"name": t["name"], "score": t["score"], "max_score": t["max_score"],
              "status": "passed" if t["score"] == t["max_score"] else "failed",
              "output": "\n".join(t["feedback"]), "visibility": "visible"} for t in r["tests"]]
    return {"score": r["score"], "output": "\n".join(summary), "visibility": "visible",
            "stdout_visibility": "hidden", "tests": tests}


def run_submission(root="/autograder", *, timeout: float = 600, backend: str = "auto") -> dict:
    """Grade ``root/submission``'s notebook against ``root/source/autograder`` and write
    ``root/results/results.json``; returns what it wrote.  Any failure is a result too (score 0,
    the reason in ``output``): Gradescope shows nothing useful when results.json is missing."""
    from . import QUESTIONS, grade
    from .answers import printable

    root, start = pathlib.Path(root), time.monotonic()
    try:
        folder = root / "source" / "autograder"
        name = json.loads((folder / QUESTIONS).read_text())["name"]
        notebook = _notebook(root / "submission", name)
        if notebook is None:
            results = {"score": 0.0, "output": f"No notebook to grade: upload {name}.ipynb (one notebook)."}
        else:
            results = _results(grade(notebook, folder, timeout=timeout, backend=backend))
    except Exception as e:  # noqa: BLE001 - reported in results.json, for the instructor to regrade
        results = {"score": 0.0, "output": f"The autograder could not grade this submission "
                                           f"({type(e).__name__}: {printable(str(e))[:500]}); tell your instructor."}
    results["execution_time"] = round(time.monotonic() - start, 1)
    (root / "results").mkdir(parents=True, exist_ok=True)
    (root / "results" / "results.json").write_text(json.dumps(results, indent=1))
    return results
