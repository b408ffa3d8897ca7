"""What the book's tests share (tests/test_book.py: the build and the files it writes;
tests/test_book_pages.py: the built pages in a browser): the contents, and the build itself.

The book is built once per test session, by the session fixture ``built_book`` (conftest.py): under
``pytest -n 2`` the first worker that needs it builds it in a folder both workers see, and the other
waits for that build (a file lock) and reads its result.  So the browser tests of the pages can run
in one worker while the other prints the PDF.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
EXPLORER_CHAPTERS = {  # chapter -> the explorer its "Explore" section shows
    "book/02_spectral_gap": "spectrum_explorer",
    "book/04_width": "width_explorer",
    "book/05_depth": "depth_explorer",
    "book/09_mask_collapse": "mask_explorer",
}

#: A chapter kernel that lost its TCP ports to a kernel started at the same moment by another process
#: (jupyter_client picks free ports, the kernel binds them a moment later: jupyter/jupyter_client#487)
#: dies at start; the build is then run once more.  A failing chapter does not print these.
KERNEL_PORT_RACE = ("Address already in use", "Kernel died before replying to kernel_info")


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part.get("chapters", [])]
    return files


def build_book(out: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """Vendor the front-end files (``make vendor``) and build the book into ``out`` from a clean tree
    (every chapter executed, warnings as errors); the build's result, also saved as ``out/build.json``,
    and the HTML folder.  A build already saved there is read, not repeated (the caller holds the lock).

    ``RCTEACH_BOOK_HTML=path/to/_build/html`` tests a book built already (no build here)."""
    if os.environ.get("RCTEACH_BOOK_HTML"):
        return subprocess.CompletedProcess([], 0, "", ""), Path(os.environ["RCTEACH_BOOK_HTML"]).resolve()
    saved, html = out / "build.json", out / "_build" / "html"
    if saved.exists():
        return subprocess.CompletedProcess(**json.loads(saved.read_text())), html
    vendor = subprocess.run(["make", "-C", str(ROOT), "vendor"], capture_output=True, text=True, timeout=600)
    assert vendor.returncode == 0, "make vendor failed:\n" + vendor.stdout[-3000:] + vendor.stderr[-3000:]
    cmd = [sys.executable, str(ROOT / "scripts" / "build_book.py"), str(ROOT), "--all", "--warningiserror",
           "--keep-going", "--path-output", str(out)]  # jupyter-book build, the chapters in parallel
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    if proc.returncode != 0 and any(s in proc.stdout + proc.stderr for s in KERNEL_PORT_RACE):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)  # once more, see KERNEL_PORT_RACE
    saved.write_text(json.dumps({"args": proc.args, "returncode": proc.returncode,
                                 "stdout": proc.stdout, "stderr": proc.stderr}))
    return proc, html


def built(built_book) -> Path:
    """The HTML folder of a book that built; the test fails (pointing at the build test) otherwise."""
    proc, html = built_book
    if proc.returncode != 0:
        pytest.fail("the book did not build (see test_book_builds_with_execution_and_no_warnings)")
    return html


def chapter_title(name: str) -> str:
    return re.search(r"^# (.+)$", (ROOT / f"{name}.md").read_text(encoding="utf-8"), re.M).group(1)
