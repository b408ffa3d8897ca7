"""JupyterLab end to end, as a student meets it: a chapter opens as a notebook on double-click,
with MyST rendered and the solutions collapsed, runs, and saves unchanged; an explorer's slider
changes its figure.

Starts ``jupyter lab`` on 127.0.0.1 (a free port, a random token) in a temporary folder holding
copies of the chapters, with the settings ``make setup`` installs into the venv (venv-config/),
drives it with Debian's chromium through PyPI playwright, and stops the server at the end.  The page tests of the built
book are in test_book.py (they share its one build).
"""

import contextlib
import difflib
import os
import secrets
import shutil
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


@contextlib.contextmanager
def _jupyterlab(root: Path):
    """A JupyterLab server on 127.0.0.1 serving ``root`` with the venv's settings (``make setup``
    installs them from venv-config/); yields (base url, token); stopped afterwards."""
    port, token = _free_port(), secrets.token_hex(16)
    jupyter = Path(sys.executable).with_name("jupyter")
    cmd = [str(jupyter), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}",
           "--allow-root",
           f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
           "--ServerApp.open_browser=False", "--LabApp.news_url=", "--LabApp.check_for_updates_class="
           "jupyterlab.NeverCheckForUpdate"]
    state = root / ".lab"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(state / "config"), JUPYTER_RUNTIME_DIR=str(state / "runtime"))
    state.mkdir()
    log = open(state / "lab.log", "w")
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
                    pytest.fail("JupyterLab did not start:\n" + (state / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield url, token
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the server and its kernels (their own session)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


@pytest.fixture
def lab(tmp_path):
    """JupyterLab serving a chapter with an explorer as an .ipynb; yields (base url, token, name)."""
    notebook = _chapter_notebook(tmp_path)
    with _jupyterlab(tmp_path) as (url, token):
        yield url, token, notebook.name


@pytest.fixture
def book_lab(tmp_path):
    """JupyterLab serving a copy of book/ (the chapters, jupytext.toml, references.bib) in its
    folder ``book``; yields (base url, token, that folder)."""
    book = tmp_path / "book"
    book.mkdir()
    for path in (ROOT / "book").iterdir():
        if path.is_file():
            shutil.copy2(path, book / path.name)
    with _jupyterlab(tmp_path) as (url, token):
        yield url, token, book


def _wait_for_kernel(page):
    page.wait_for_function("(() => { const w = window.jupyterapp.shell.currentWidget;"
                           " const k = w && w.sessionContext && w.sessionContext.session"
                           " && w.sessionContext.session.kernel; return k && k.status === 'idle'; })()",
                           timeout=60000)


@needs_browser
def test_jupyterlab_runs_a_chapter_and_a_slider_changes_the_figure(lab):
    from playwright.sync_api import sync_playwright

    url, token, name = lab
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{url}/lab/tree/{name}?token={token}&reset", wait_until="domcontentloaded")
        page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=60000)
        _wait_for_kernel(page)
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


#: A quick chapter with exercises: MyST admonitions, citations, solution cells.
CHAPTER = "03_centred_attention.md"
_CURRENT = "window.jupyterapp.shell.currentWidget"


def _current_notebook(page, name):
    """Wait until the current tab is the notebook ``name`` with its cells, its kernel idle."""
    page.wait_for_function(f"(() => {{ const w = {_CURRENT}; return w && w.content && w.content.widgets"
                           f" && w.title.label === {name!r} && w.content.widgets.length > 0; }})()", timeout=60000)
    _wait_for_kernel(page)


def _open_by_double_click(page, name):
    item = page.locator(".jp-DirListing-item", has_text=name)
    item.wait_for(timeout=60000)
    item.dblclick()
    _current_notebook(page, name)


def _close_asks_nothing(page):
    """Close the current tab; True when it closed with no dialog (no "Save your work?")."""
    page.evaluate("window.jupyterapp.commands.execute('application:close'); 1")
    time.sleep(1.5)
    return (page.locator(".jp-Dialog").count() == 0
            and page.evaluate("!document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)')"))


@needs_browser
def test_a_chapter_opens_as_a_notebook_with_solutions_collapsed_runs_and_saves_unchanged(book_lab):
    from playwright.sync_api import sync_playwright

    url, token, book = book_lab
    source = (book / CHAPTER).read_text(encoding="utf-8")
    n_dropdowns = source.count(":::{admonition} Solution")
    cells = jupytext.reads(source, fmt="md:myst").cells
    n_solution_cells = sum("solution" in c.metadata.get("tags", []) for c in cells)
    assert n_dropdowns and n_solution_cells, f"{CHAPTER} has no exercise solutions to check"
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{url}/lab/tree/book?token={token}&reset", wait_until="domcontentloaded")
        page.wait_for_function("window.jupyterapp", timeout=60000)
        _open_by_double_click(page, CHAPTER)
        factory = page.evaluate(f"window.jupyterapp.docRegistry.defaultWidgetFactory({CHAPTER!r}).name")
        assert factory == "Jupytext Notebook"
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        page.wait_for_function("document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden)"
                               f" details.myst-admonition').length >= {n_dropdowns}", timeout=30000)
        text = panel.inner_text()
        for raw in ("{admonition}", "{cite}", ":class: dropdown", ":::"):
            assert raw not in text, f"MyST not rendered: {raw!r} shows"
        dropdowns = page.evaluate("Array.from(document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden)"
                                  " details.myst-admonition')).map(d => d.open)")
        assert dropdowns == [False] * n_dropdowns, f"solution dropdowns (open?): {dropdowns}"
        hidden = page.evaluate(f"{_CURRENT}.content.widgets.filter(c => (c.model.getMetadata('tags') || [])"
                               ".includes('solution')).map(c => c.inputHidden)")
        assert hidden == [True] * n_solution_cells, f"solution cells (code hidden?): {hidden}"
        dirty = page.evaluate(f"(async () => {{ const w = {_CURRENT}, k = w.sessionContext.session.kernel;"
                              " await k.info; await k.spec; await new Promise(r => setTimeout(r, 1000));"
                              " return w.context.model.dirty; })()")  # after the kernel's metadata writes
        assert not dirty, "opening the chapter marked it modified"
        assert _close_asks_nothing(page), "closing the untouched chapter asked something"

        _open_by_double_click(page, CHAPTER)
        ok = page.evaluate(f"{_CURRENT}.content && window.jupyterapp.commands.execute('notebook:run-all-cells')")
        errors = page.evaluate(f"{_CURRENT}.content.widgets.flatMap(c => ((c.model.toJSON().outputs) || [])"
                               ".filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue))")
        assert ok and not errors, f"Run All failed: {errors}"
        answers = page.evaluate(f"{_CURRENT}.content.widgets.filter(c => (c.model.getMetadata('tags') || [])"
                                ".includes('solution')).map(c => c.model.toJSON().outputs.map(o =>"
                                " String((o.data || {})['text/html'] || o.output_type).slice(0, 33)))")
        assert answers == [['<details class="rcteach-solution"']] * n_solution_cells, (
            f"solution outputs not one closed toggle each (rcteach.solution()): {answers}")
        page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function(f"!{_CURRENT}.context.model.dirty", timeout=30000)
        saved = (book / CHAPTER).read_text(encoding="utf-8")
        assert saved == source, "saving the run chapter changed its file:\n" + "\n".join(
            difflib.unified_diff(source.splitlines(), saved.splitlines(), "chapter", "saved", lineterm=""))
        assert _close_asks_nothing(page), "closing the saved chapter asked something"
        browser.close()



@needs_browser
def test_jupyterlab_follows_a_chapter_link_and_opens_a_download_unmodified(book_lab):
    """In a chapter opened in JupyterLab, clicking a Markdown link to another chapter
    (``[...](01_leading_term.md)``, rendered by jupyterlab-myst) opens that chapter as a notebook,
    no "file not found"; the book's ``.ipynb`` download of a chapter (clean_notebook, with the
    kernel's language_info) is not marked modified once its kernel has started."""
    from playwright.sync_api import sync_playwright

    from rcteach.tools.notebooks import clean_notebook

    url, token, book = book_lab
    downloads = book.parent / "downloads"
    downloads.mkdir()
    jupytext.write(clean_notebook(book / "02_spectral_gap.md"), downloads / "02_spectral_gap.ipynb", fmt="ipynb")
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{url}/lab/tree/book?token={token}&reset", wait_until="domcontentloaded")
        page.wait_for_function("window.jupyterapp", timeout=60000)
        _open_by_double_click(page, "02_spectral_gap.md")
        # jupyterlab-myst resolves a link's path, gives it JupyterLab's click handler (docmanager open),
        # and then sets its href to the file's download URL: click once that is done (a link found
        # before would change under the locator)
        link = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell '
                            'a[href*="/files/"][href*="01_leading_term.md"]').first
        link.wait_for(timeout=60000)
        link.click()
        _current_notebook(page, "01_leading_term.md")
        assert page.locator(".jp-Dialog").count() == 0, page.locator(".jp-Dialog").inner_text()
        page.evaluate("window.jupyterapp.commands.execute('docmanager:open',"
                      " {path: 'downloads/02_spectral_gap.ipynb'}); 1")
        _current_notebook(page, "02_spectral_gap.ipynb")
        dirty = page.evaluate(f"(async () => {{ const w = {_CURRENT}, k = w.sessionContext.session.kernel;"
                              " await k.info; await k.spec; await new Promise(r => setTimeout(r, 1000));"
                              " return w.context.model.dirty; })()")  # after the kernel's metadata writes
        assert not dirty, "opening the downloaded notebook marked it modified"
        browser.close()
