"""The whole book builds from a clean tree (every chapter executed, warnings as errors), and what the
build writes: the pages' files, their size, their downloads, the PDF of the whole book.  The built pages
in a browser: tests/test_book_pages.py.

The book is built once per test session (the ``built_book`` fixture of conftest.py, tests/_book.py).
This module goes first (conftest.py), so that under ``pytest -n 2`` one worker builds the book while
the other runs the rest, then prints the PDF while the other opens the pages.
"""

import re
import subprocess
import sys
import unicodedata

import pytest

from _book import EXPLORER_CHAPTERS, ROOT, built, chapter_title, toc_files
from _browser import needs_browser


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


@pytest.mark.book
def test_book_builds_with_execution_and_no_warnings(built_book):
    proc, html = built_book
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    for name in toc_files():
        page = html / f"{name}.html"
        assert page.exists(), f"{page} was not built"
        text = page.read_text(encoding="utf-8")
        assert "Traceback" not in text, f"{name} shows a traceback"


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
    html = built(built_book)
    for name in toc_files():
        text = (html / f"{name}.html").read_text(encoding="utf-8")
        if "application/vnd.jupyter.widget-view+json" not in text:
            assert "application/vnd.jupyter.widget-state+json" not in text, name
            assert "embed-amd.js" not in text, name


@pytest.mark.book
def test_pages_load_nothing_from_the_network(built_book):
    """Every <script src> and <link href> of every page is a file of the book itself."""
    html = built(built_book)
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
def test_every_chapter_offers_a_clean_notebook_download(built_book):
    """The download menu of every page links ``_sources/<page>.ipynb``: the chapter as a notebook
    without outputs (book/_ext/notebook_download.py), the same cells as its MyST source."""
    import jupytext
    import nbformat

    from rcteach.tools.notebooks import CHAPTER_LINK as CHAPTER_LINK_MD
    from rcteach.tools.notebooks import kernel_language_info

    html = built(built_book)
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


@pytest.mark.book
@needs_browser
def test_the_whole_book_prints_to_one_pdf(built_book):
    """``scripts/book_pdf.py`` (``make pdf``) on the book's build: the singlehtml page executes no
    chapter again (the script checks the log), no code block or output is cut at the page edge
    (the script checks the printed layout), and the PDF holds every chapter (its title in the
    contents and as a heading), at least one image per figure of the HTML pages, and a sane
    number of pages."""
    import pypdf

    html = built(built_book)
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
    html = built(built_book)
    total = sum(f.stat().st_size for f in html.rglob("*") if f.is_file())
    assert total <= BOOK_BUDGET, f"_build/html is {total / MB:.1f} MB"
    for name in EXPLORER_CHAPTERS:
        text = (html / f"{name}.html").read_text(encoding="utf-8")
        views = re.findall(r'<div class="rcteach-static-explorer">.*?</script></div>', text, re.S)
        assert len(views) == 1, f"{name}: {len(views)} precomputed views"
        assert len(views[0].encode()) <= PAGE_BUDGET, f"{name}: the explorer adds {len(views[0]) / MB:.1f} MB"
