"""The whole book builds from a clean tree (every chapter executed, warnings as errors), and every
built page works in a browser with no network: maths rendered, figures loaded, the explorers'
saved views present, no console errors.

The book is built once per test session, by the module fixture below; the build test and the page
tests live in this one module so that ``pytest -n 2 --dist loadscope`` runs them in one worker.
"""

import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import yaml

from _browser import launch, needs_browser

ROOT = Path(__file__).resolve().parents[1]
EXPLORER_CHAPTERS = {  # chapter -> the explorer its "Explore" section shows
    "book/02_spectral_gap": "spectrum_explorer",
    "book/04_width": "width_explorer",
    "book/05_depth": "depth_explorer",
    "book/09_mask_collapse": "mask_explorer",
}


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part.get("chapters", [])]
    return files


#: A chapter kernel that lost its TCP ports to a kernel started at the same moment by another process
#: (jupyter_client picks free ports, the kernel binds them a moment later: jupyter/jupyter_client#487)
#: dies at start; the build is then run once more.  A failing chapter does not print these.
KERNEL_PORT_RACE = ("Address already in use", "Kernel died before replying to kernel_info")


#: A link to another chapter: ``[text](NN_name.md)``, which Jupyter Book resolves to the chapter's page
#: and JupyterLab opens as a notebook (the roles {ref} and {doc} work in the book only).
CHAPTER_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]*)\)")


def test_chapters_are_labelled_linked_and_checked_in_one_call():
    """Every page has a ``(label)=`` above its title; cross-chapter links are Markdown links to an
    existing chapter file (no {ref}/{doc}); "previous/next chapter" is always a link; every equation
    label is cited and every cited one exists; checks run through ``rcteach.check`` (no assert-only
    cells, no reach-ins to the HTML formatter)."""
    bare = re.compile(r"\b(previous|next) chapter\b", re.IGNORECASE)
    texts = {name: (ROOT / f"{name}.md").read_text(encoding="utf-8") for name in toc_files()}
    labels = {label: name for name,
              text in texts.items() for label in re.findall(r"^\$\$ \(([a-z0-9-]+)\)$", text, re.M)}
    cited = {label for text in texts.values() for label in re.findall(r"\{eq\}`([^`]+)`", text)}
    assert cited <= set(labels), f"cited equations without a label: {sorted(cited - set(labels))}"
    assert set(labels) <= cited, f"equation labels nothing cites: {sorted(set(labels) - cited)}"
    for name, text in texts.items():
        assert re.search(r"^\([a-z0-9-]+\)=\n# ", text, re.M), f"{name}: no label above the title"
        for role in ("{ref}", "{doc}"):
            assert role not in text, f"{name}: a {role} link (dead in JupyterLab; link to the chapter's .md)"
        for _, target in CHAPTER_LINK.findall(text):
            if "://" not in target and not target.startswith("#"):
                assert (ROOT / name).with_name(target.split("#")[0]).is_file(), f"{name}: link to {target}"
        unlinked = bare.search(CHAPTER_LINK.sub("", text))
        assert not unlinked, f"{name}: an unlinked {unlinked.group(0)!r}"
        for old in ("run_check(", "results_html(", "assert result.passed"):
            assert old not in text, f"{name}: {old} (use rcteach.check)"


def test_the_intro_says_how_to_install_and_open_a_chapter():
    """The intro gives the install line, the three ways to a chapter as a notebook, and the
    extension that renders MyST in JupyterLab (a .md chapter opens on double-click: no "Open With")."""
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    for needed in ("pip install", "rcteach notebooks", "make setup", "double-click", "jupyterlab-myst", "`.ipynb`"):
        assert needed in intro, f"the intro does not say {needed!r}"
    assert "Open With" not in intro


@pytest.fixture(scope="module")
def built_book(tmp_path_factory):
    """Vendor the front-end files (``make vendor``), build the book once; the build's result.

    ``RCTEACH_BOOK_HTML=path/to/_build/html`` tests a book built already (no build here)."""
    if os.environ.get("RCTEACH_BOOK_HTML"):
        return subprocess.CompletedProcess([], 0, "", ""), Path(os.environ["RCTEACH_BOOK_HTML"]).resolve()
    vendor = subprocess.run(["make", "-C", str(ROOT), "vendor"], capture_output=True, text=True, timeout=600)
    assert vendor.returncode == 0, "make vendor failed:\n" + vendor.stdout[-3000:] + vendor.stderr[-3000:]
    out = tmp_path_factory.mktemp("book")
    cmd = [sys.executable, str(ROOT / "scripts" / "build_book.py"), str(ROOT), "--all", "--warningiserror",
           "--keep-going", "--path-output", str(out)]  # jupyter-book build, the chapters in parallel
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    if proc.returncode != 0 and any(s in proc.stdout + proc.stderr for s in KERNEL_PORT_RACE):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)  # once more, see KERNEL_PORT_RACE
    return proc, out / "_build" / "html"


@pytest.mark.book
def test_book_builds_with_execution_and_no_warnings(built_book):
    proc, html = built_book
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    for name in toc_files():
        page = html / f"{name}.html"
        assert page.exists(), f"{page} was not built"
        text = page.read_text(encoding="utf-8")
        assert "Traceback" not in text, f"{name} shows a traceback"


def _built(built_book):
    proc, html = built_book
    if proc.returncode != 0:
        pytest.fail("the book did not build (see test_book_builds_with_execution_and_no_warnings)")
    return html


@pytest.mark.book
def test_only_the_state_of_shown_widgets_is_kept():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from offline_html import shown_widget_state
    finally:
        sys.path.pop(0)
    state = {"a1": {"state": {"children": ["IPY_MODEL_b2"]}}, "b2": {"state": {}}, "c3": {"state": {}}}
    view = '<script type="application/vnd.jupyter.widget-view+json">{"model_id": "a1"}</script>'
    assert shown_widget_state(state, "<p>" + view + "</p>") == {"a1": state["a1"], "b2": state["b2"]}
    assert shown_widget_state(state, "<p>no widget shown</p>") == {}


@pytest.mark.book
def test_pages_carry_no_state_of_widgets_they_do_not_show(built_book):
    """The explorer chapters create ipywidgets explorers but show their precomputed views: no saved
    widget state (66-136 kB before) and no widget embedder on a page without widget views."""
    html = _built(built_book)
    for name in toc_files():
        text = (html / f"{name}.html").read_text(encoding="utf-8")
        if "application/vnd.jupyter.widget-view+json" not in text:
            assert "application/vnd.jupyter.widget-state+json" not in text, name
            assert "embed-amd.js" not in text, name


@pytest.mark.book
def test_pages_load_nothing_from_the_network(built_book):
    """Every <script src> and <link href> of every page is a file of the book itself."""
    html = _built(built_book)
    for name in toc_files():
        text = (html / f"{name}.html").read_text(encoding="utf-8")
        for tag, attr in (("script", "src"), ("link", "href")):
            for url in re.findall(rf'<{tag}\b[^>]*\b{attr}="([^"]*)"', text):
                if tag == "link" and not re.search(r"\.(css|js|woff2?)(\?|$)", url):
                    continue  # navigation links (prev/next, index) are not loaded resources
                assert "://" not in url and not url.startswith("//"), f"{name} loads {url}"
        assert "unpkg.com" not in text and "cdn.jsdelivr" not in text and "cdnjs" not in text, name
    assert (html / "_static" / "mathjax" / "tex-mml-chtml.js").exists()
    assert (html / "_static" / "js" / "embed-amd.js").exists() and (html / "_static" / "js" / "require.js").exists()


@pytest.mark.book
@needs_browser
def test_every_page_renders_offline_in_a_browser(built_book):
    """Open every page with the network cut: maths typeset, images loaded, explorers drawn, no errors."""
    from playwright.sync_api import sync_playwright

    html = _built(built_book)
    toc = toc_files()
    problems = []
    with sync_playwright() as p:
        browser = launch(p)
        context = browser.new_context()
        outside = []

        def route(r):
            if r.request.url.startswith(("file://", "data:")):
                r.continue_()
            else:
                outside.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        for name in toc:
            page = context.new_page()
            errors = []
            page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e, errors=errors: errors.append(f"uncaught: {e}"))
            page.on("requestfailed", lambda r, errors=errors: errors.append(f"failed to load {r.url}"))
            page.goto((html / f"{name}.html").as_uri(), wait_until="load")
            n_views = page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
            if page.locator(".math").count():
                page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30000)
                page.evaluate("MathJax.startup.promise")
                untypeset = page.evaluate("Array.from(document.querySelectorAll('.math')).filter("
                                          "e => !e.querySelector('mjx-container')).length")
                if untypeset:
                    problems.append(f"{name}: {untypeset} maths not typeset")
            if n_views:
                try:  # the embedder replaces each view script by the rendered widget
                    page.wait_for_function(f"document.querySelectorAll('.rcteach-explorer').length >= {n_views}",
                                           timeout=30000)
                except Exception:
                    problems.append(f"{name}: {n_views} saved widget views, not all rendered")
            for explorer in page.locator(".rcteach-explorer").all():
                if explorer.locator("img").count() != 1 or "ms" not in explorer.inner_text():
                    problems.append(f"{name}: an explorer without its figure or status")
            if name in EXPLORER_CHAPTERS and page.locator(".rcteach-static-explorer img").count() != 1:
                problems.append(f"{name}: no precomputed view of {EXPLORER_CHAPTERS[name]}")
            main = page.evaluate("(() => { const m = document.querySelector('main').cloneNode(true);"
                                 " m.querySelectorAll('pre, code, .cell_input').forEach(e => e.remove());"
                                 " return m.innerText; })()")
            if "$$" in main or re.search(r"\\\(|\\\[", main):
                problems.append(f"{name}: raw TeX delimiters in the text")
            broken = page.evaluate("Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
                                   ".map(i => i.src.slice(0, 80))")
            problems += [f"{name}: image not loaded: {src}" for src in broken]
            problems += [f"{name}: console: {e}" for e in errors]
            page.close()
        browser.close()
    problems += [f"tried to reach the network: {url}" for url in outside]
    assert not problems, "\n".join(problems)


@pytest.mark.book
def test_every_chapter_offers_a_clean_notebook_download(built_book):
    """The download menu of every page links ``_sources/<page>.ipynb``: the chapter as a notebook
    without outputs (book/_ext/notebook_download.py), the same cells as its MyST source."""
    import jupytext
    import nbformat

    from rcteach.tools.notebooks import CHAPTER_LINK as CHAPTER_LINK_MD
    from rcteach.tools.notebooks import kernel_language_info

    html = _built(built_book)
    for name in toc_files():
        text = (html / f"{name}.html").read_text(encoding="utf-8")
        links = re.findall(r'<a href="([^"]*_sources/[^"]*\.ipynb)"', text)
        assert len(links) == 1, f"{name}: {len(links)} .ipynb links in the download menu"
        notebook = nbformat.read((html / name).parent / links[0], as_version=4)
        nbformat.validate(notebook)
        source = jupytext.read(ROOT / f"{name}.md")
        expected = [CHAPTER_LINK_MD.sub(r"](\1.ipynb\2)", c.source) if c.cell_type == "markdown" else c.source
                    for c in source.cells]  # links to other chapters point at their downloads
        assert [c.source for c in notebook.cells] == expected, name
        download = (html / name).parent / links[0]
        for target in re.findall(r"\]\(([\w-]+\.ipynb)", "".join(expected)):
            assert download.with_name(target).is_file(), f"{name}: its download links {target}, not there"
        assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code"), f"{name}: outputs"
        assert notebook.metadata["kernelspec"]["name"] == "python3" and "jupytext" not in notebook.metadata
        assert notebook.metadata["language_info"] == kernel_language_info(), name  # what JupyterLab would add


def chapter_title(name: str) -> str:
    return re.search(r"^# (.+)$", (ROOT / f"{name}.md").read_text(encoding="utf-8"), re.M).group(1)


@pytest.mark.book
@needs_browser
def test_the_whole_book_prints_to_one_pdf(built_book):
    """``scripts/book_pdf.py`` (``make pdf``) on the book's build: the singlehtml page executes no
    chapter again (the script checks the log), no code block or output is cut at the page edge
    (the script checks the printed layout), and the PDF holds every chapter (its title in the
    contents and as a heading), at least one image per figure of the HTML pages, and a sane
    number of pages."""
    import pypdf

    html = _built(built_book)
    out = html.parent.parent
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "book_pdf.py"), "--path-output", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    reader = pypdf.PdfReader(out / "_build" / "pdf" / "book.pdf")
    # Compared without white space and ligatures (the PDF's text has "ﬁ" for "fi"); the text of a heading
    # that wraps can come out of the PDF interleaved with the page's other text, so each chapter is
    # found by its title in the contents and by its first numbered section ("13.1.") in the body.
    text = unicodedata.normalize("NFKC", "".join(page.extract_text() for page in reader.pages))
    text = re.sub(r"\s+", "", text)
    root, *chapters = toc_files()
    missing = [chapter_title(name) for number, name in enumerate(chapters, 1)
               if re.sub(r"\s+", "", chapter_title(name)) not in text or f"{number}.1." not in text]
    assert chapter_title(root).replace(" ", "") in text and not missing, f"chapters missing from the PDF: {missing}"
    figures = sum(len(re.findall(r'<img [^>]*src="[./]*_images/', (html / f"{name}.html").read_text(encoding="utf-8")))
                  for name in toc_files())
    images = sum(len(page.images) for page in reader.pages)
    assert images >= figures, f"{images} images in the PDF, {figures} figures in the HTML pages"
    assert 5 * len(toc_files()) <= len(reader.pages) <= 40 * len(toc_files()), f"{len(reader.pages)} pages"


MB = 1e6
PAGE_BUDGET, BOOK_BUDGET = 4 * MB, 60 * MB  # issue #19: an explorer adds <= 4 MB to its page; the book <= 60 MB


@pytest.mark.book
def test_book_and_explorer_pages_within_their_size_budget(built_book):
    html = _built(built_book)
    total = sum(f.stat().st_size for f in html.rglob("*") if f.is_file())
    assert total <= BOOK_BUDGET, f"_build/html is {total / MB:.1f} MB"
    for name in EXPLORER_CHAPTERS:
        text = (html / f"{name}.html").read_text(encoding="utf-8")
        views = re.findall(r'<div class="rcteach-static-explorer">.*?</script></div>', text, re.S)
        assert len(views) == 1, f"{name}: {len(views)} precomputed views"
        assert len(views[0].encode()) <= PAGE_BUDGET, f"{name}: the explorer adds {len(views[0]) / MB:.1f} MB"


@pytest.mark.book
@needs_browser
def test_download_menu_and_collapsed_solutions_in_a_browser(built_book):
    """On every chapter page: the download menu, opened, offers ``.ipynb``; every solution cell has
    its code in a closed toggle and its output in one closed ``details.rcteach-solution``
    (``rcteach.solution()``, as in JupyterLab): nothing of the answer shows under the exercise."""
    from playwright.sync_api import sync_playwright

    html = _built(built_book)
    problems = []
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        for name in toc_files():
            page.goto((html / f"{name}.html").as_uri(), wait_until="load")
            page.locator(".dropdown-download-buttons button").first.click()
            item = page.locator(".dropdown-download-buttons .dropdown-item", has_text=".ipynb")
            if not item.count() or not item.first.is_visible():
                problems.append(f"{name}: no visible .ipynb in the download menu")
            cells = page.evaluate(
                "Array.from(document.querySelectorAll('.cell.tag_solution')).map(c => {"
                " const d = c.querySelector(':scope > details.hide'), o = c.querySelector('.cell_output');"
                " const answers = o ? o.querySelectorAll(':scope .output details.rcteach-solution') : [];"
                " return {toggle: !!(d && d.querySelector('.cell_input')), open: !!(d && d.open),"
                " outputs: o ? o.querySelectorAll(':scope > .output').length : 0, answers: answers.length,"
                " closed: Array.from(answers).every(a => !a.open),"
                " shown: Array.from(c.querySelectorAll('.cell_input, .rcteach-solution-body'))"
                ".some(e => e.checkVisibility())}; })")
            for i, cell in enumerate(cells):
                if (not cell["toggle"] or cell["open"] or cell["outputs"] != 1 or cell["answers"] != 1
                        or not cell["closed"] or cell["shown"]):
                    problems.append(f"{name}: solution cell {i} not collapsed with its outputs: {cell}")
        browser.close()
    assert not problems, "\n".join(problems)


PHONE = {"width": 390, "height": 844}


@pytest.mark.book
@needs_browser
def test_on_a_phone_the_menu_opens_and_check_tables_keep_their_verdict_in_view(built_book):
    """At 390 x 844 on every page: exactly one ☰ button shows; tapping it shows the contents (a
    link to every chapter); the page never scrolls sideways; every check table keeps its verdict
    column (PASS/FAIL) on screen, its other columns scrolling inside the cell."""
    from playwright.sync_api import sync_playwright

    html = _built(built_book)
    problems, tables = [], 0
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport=PHONE)
        for name in toc_files():
            page.goto((html / f"{name}.html").as_uri(), wait_until="load")
            sideways = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            if sideways > 0:
                problems.append(f"{name}: the page scrolls {sideways} px sideways")
            verdicts = page.evaluate(
                "Array.from(document.querySelectorAll('table.rcteach-checks')).flatMap(t =>"
                " Array.from(t.querySelectorAll('tr > :last-child')).map(c => {"
                " const r = c.getBoundingClientRect(); return [c.innerText, r.left, r.right]; }))")
            tables += page.locator("table.rcteach-checks").count()
            problems += [f"{name}: verdict {text!r} at x = {left:.0f}..{right:.0f}, off a {PHONE['width']} px screen"
                         for text, left, right in verdicts if left < 0 or right > PHONE["width"]]
            toggles = page.locator(".primary-toggle:visible")
            if toggles.count() != 1:
                problems.append(f"{name}: {toggles.count()} visible contents buttons")
                continue
            toggles.first.click()
            try:
                page.locator("nav.bd-links a").first.wait_for(state="visible", timeout=5000)
            except Exception:
                problems.append(f"{name}: the contents button shows no contents")
                continue
            shown = page.locator("nav.bd-links a:visible").count()
            if shown < len(toc_files()) - 1:
                problems.append(f"{name}: the contents show {shown} links")
        browser.close()
    if not tables:
        problems.append("no check table in the book (table.rcteach-checks from rcteach.check)")
    assert not problems, "\n".join(problems)


@pytest.mark.book
@needs_browser
def test_search_from_disk_shows_snippets_without_errors(built_book):
    """The search page opened from disk (file://): searching a word lists pages, each with a
    snippet of its text holding the word (book/_ext/offline_search.py), and no console error."""
    from playwright.sync_api import sync_playwright

    html = _built(built_book)
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page()
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("requestfailed", lambda r: errors.append(f"failed to load {r.url}"))
        page.goto((html / "search.html").as_uri() + "?q=spectral", wait_until="load")
        page.wait_for_function("/found/.test(document.querySelector('#search-results .search-summary')?.innerText)"
                               " && document.querySelectorAll('#search-results li').length > 0 && Array.from("
                               "document.querySelectorAll('#search-results li')).every(li => "
                               "li.querySelector('p.context'))",
                               timeout=30000)
        hits = page.evaluate("Array.from(document.querySelectorAll('#search-results li')).map(li =>"
                             " [li.querySelector('a').innerText, li.querySelector('p.context').innerText])")
        browser.close()
    assert any(title.endswith("The spectral gap") for title, _ in hits), hits
    assert all("spectral" in snippet.lower() for _, snippet in hits), hits
    assert not errors, errors


@pytest.mark.book
@needs_browser
def test_explorers_move_in_the_static_book(built_book):
    """On each explorer page, offline: moving the first slider changes the figure, the maths renders,
    the page says the figures are precomputed, and no request leaves the machine."""
    from playwright.sync_api import sync_playwright

    html = _built(built_book)
    problems, outside = [], []
    with sync_playwright() as p:
        browser = launch(p)
        for width in (1400, 800):  # the book's full width, and a narrow window
            context = browser.new_context(viewport={"width": width, "height": 1000})
            context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:"))
                          else (outside.append(r.request.url), r.abort()))
            for name in EXPLORER_CHAPTERS:
                page = context.new_page()
                page.goto((html / f"{name}.html").as_uri(), wait_until="load")
                view = page.locator(".rcteach-static-explorer").first
                slider = view.locator("input[type=range]:not([disabled])").first
                img = view.locator("img")
                before = img.get_attribute("src")
                slider.focus()
                page.keyboard.press("ArrowRight" if slider.input_value() == "0" else "ArrowLeft")
                if img.get_attribute("src") == before:
                    problems.append(f"{name} at {width} px: moving the first slider left the figure")
                track = slider.bounding_box()["width"]
                if track < 150:
                    problems.append(f"{name} at {width} px: slider track {track:.0f} px")
                if "precomputed in the static book; run the chapter in JupyterLab" not in view.inner_text():
                    problems.append(f"{name}: no note that the figures are precomputed")
                page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30000)
                page.evaluate("MathJax.startup.promise")
                if not page.locator("mjx-container").count() or page.evaluate(
                        "Array.from(document.querySelectorAll('.math')).some(e => !e.querySelector('mjx-container'))"):
                    problems.append(f"{name}: maths not rendered")
                page.close()
            context.close()
        browser.close()
    problems += [f"tried to reach the network: {url}" for url in outside]
    assert not problems, "\n".join(problems)
