"""The whole book builds from a clean tree: every chapter executed, warnings as errors."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part.get("chapters", [])]
    return files


@pytest.mark.book
def test_book_builds_with_execution_and_no_warnings(tmp_path):
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jupyter_book), "build", str(ROOT), "--all", "--warningiserror", "--keep-going", "--path-output", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    html = tmp_path / "_build" / "html"
    for name in toc_files():
        page = html / f"{name}.html"
        assert page.exists(), f"{page} was not built"
        text = page.read_text(encoding="utf-8")
        assert "Traceback" not in text, f"{name} shows a traceback"
