"""JupyterLab end to end: open a chapter with an explorer, run it, move a slider, see the figure change.

Starts ``jupyter lab`` on 127.0.0.1 (a free port, a random token) in a temporary folder holding the
chapter as a notebook (jupytext), drives it with Debian's chromium through PyPI playwright, and
stops the server at the end.  The page tests of the built book are in test_book.py (they share
its one build).
"""

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import jupytext
import pytest

from _browser import launch, needs_browser

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = ["book/05_depth.md", "book/09_mask_collapse.md", "book/04_width.md", "book/02_spectral_gap.md"]
FALLBACK = """\
import rcteach
rcteach.widgets.depth_explorer()
"""


def _chapter_notebook(folder: Path) -> Path:
    """The first chapter whose "Explore" section shows an explorer, as an .ipynb in ``folder``
    (a one-cell notebook with the depth explorer while no chapter has one yet)."""
    for rel in CANDIDATES:
        path = ROOT / rel
        if path.exists() and "rcteach.widgets." in path.read_text(encoding="utf-8"):
            nb = jupytext.read(path)
            break
    else:
        nb = jupytext.reads(FALLBACK, fmt="py:percent")
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    out = folder / "chapter.ipynb"
    jupytext.write(nb, out, fmt="ipynb")
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server on 127.0.0.1; yields (base url, token); stopped afterwards."""
    notebook = _chapter_notebook(tmp_path)
    port, token = _free_port(), secrets.token_hex(16)
    jupyter = Path(sys.executable).with_name("jupyter")
    cmd = [str(jupyter), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}", "--allow-root",
           f"--ServerApp.root_dir={tmp_path}", "--LabApp.expose_app_in_browser=True",
           "--ServerApp.open_browser=False", "--LabApp.news_url=", "--LabApp.check_for_updates_class="
           "jupyterlab.NeverCheckForUpdate"]
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / ".jupyter"), JUPYTER_RUNTIME_DIR=str(tmp_path / ".runtime"))
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield url, token, notebook.name
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the server and its kernels (their own session)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


@needs_browser
def test_jupyterlab_runs_a_chapter_and_a_slider_changes_the_figure(lab):
    from playwright.sync_api import sync_playwright

    url, token, name = lab
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{url}/lab/tree/{name}?token={token}&reset", wait_until="domcontentloaded")
        page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=60000)
        page.wait_for_function("(() => { const w = window.jupyterapp.shell.currentWidget;"
                               " const k = w && w.sessionContext && w.sessionContext.session"
                               " && w.sessionContext.session.kernel; return k && k.status === 'idle'; })()",
                               timeout=60000)
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells'); 1")
        explorer = page.locator(".rcteach-explorer").first
        explorer.wait_for(timeout=100000)
        img = explorer.locator(".widget-output img, .jp-OutputArea img").first
        img.wait_for(timeout=30000)
        before = img.get_attribute("src")
        track = explorer.locator(".widget-slider .slider-container").first.bounding_box()["width"]
        assert track >= 150, f"the first slider's track is {track:.0f} px wide"  # the controls fill their cells
        handle = explorer.locator(".widget-slider .noUi-handle").first
        handle.focus()
        page.keyboard.press("ArrowRight")  # one step, then release: the explorer updates on change
        page.wait_for_function(
            "([el, src]) => { const i = el.querySelector('.widget-output img, .jp-OutputArea img');"
            " return i && i.getAttribute('src') !== src; }",
            arg=[explorer.element_handle(), before], timeout=30000)
        assert "ms" in explorer.inner_text()
        browser.close()
