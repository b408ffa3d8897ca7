"""Every page of the built book works in a browser with no network: maths rendered, figures loaded,
the explorers' saved views present and moving, the download menu and collapsed solutions, a phone's
screen, search from disk; no console errors.

The book is built once per test session (the ``built_book`` fixture of conftest.py, tests/_book.py).
This module goes last (conftest.py), each test in a class of its own: under ``--dist loadscope`` a class
is a unit of work, so each test goes to the worker free first, which waits for the build if it is not
done; the pages are opened while the other worker prints the PDF (tests/test_book.py) or runs the rest.
"""

import re

import pytest

from _book import EXPLORER_CHAPTERS, built, toc_files
from _browser import launch, needs_browser

pytestmark = pytest.mark.book_pages
MATHJAX_READY = "window.MathJax && MathJax.startup && MathJax.startup.promise"  # then await the promise


class TestOffline:
    @needs_browser
    def test_every_page_renders_offline_in_a_browser(self, built_book):
        """Open every page with the network cut: maths typeset, images loaded, explorers drawn, no errors."""
        from playwright.sync_api import sync_playwright

        html = built(built_book)
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
                    page.wait_for_function(MATHJAX_READY, timeout=30000)
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


class TestDownloadMenu:
    @needs_browser
    def test_download_menu_and_collapsed_solutions_in_a_browser(self, built_book):
        """On every chapter page: the download menu, opened, offers ``.ipynb``; every solution cell has
        its code in a closed toggle and its output in one closed ``details.rcteach-solution``
        (``rcteach.solution()``, as in JupyterLab): nothing of the answer shows under the exercise."""
        from playwright.sync_api import sync_playwright

        html = built(built_book)
        problems = []
        with sync_playwright() as p:
            browser = launch(p)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route("**/mathjax/**", lambda r: r.abort())  # the maths play no part here (3 s of CPU a page)
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


class TestPhone:
    @needs_browser
    def test_on_a_phone_the_menu_opens_and_check_tables_keep_their_verdict_in_view(self, built_book):
        """At 390 x 844 on every page: exactly one ☰ button shows; tapping it shows the contents (a
        link to every chapter); the page never scrolls sideways; every check table keeps its verdict
        column (PASS/FAIL) on screen, its other columns scrolling inside the cell."""
        from playwright.sync_api import sync_playwright

        html = built(built_book)
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
                problems += [f"{name}: verdict {text!r} at x = {left:.0f}..{right:.0f}, "
                             f"off a {PHONE['width']} px screen"
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


class TestSearch:
    @needs_browser
    def test_search_from_disk_shows_snippets_without_errors(self, built_book):
        """The search page opened from disk (file://): searching a word lists pages, each with a
        snippet of its text holding the word (book/_ext/offline_search.py), and no console error."""
        from playwright.sync_api import sync_playwright

        html = built(built_book)
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


class TestExplorers:
    @needs_browser
    def test_explorers_move_in_the_static_book(self, built_book):
        """On each explorer page, offline: moving the first slider changes the figure, the maths renders,
        the page says the figures are precomputed, and no request leaves the machine."""
        from playwright.sync_api import sync_playwright

        html = built(built_book)
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
                    page.wait_for_function(MATHJAX_READY, timeout=30000)
                    page.evaluate("MathJax.startup.promise")
                    if not page.locator("mjx-container").count() or page.evaluate(
                            "Array.from(document.querySelectorAll('.math'))"
                            ".some(e => !e.querySelector('mjx-container'))"):
                        problems.append(f"{name}: maths not rendered")
                    page.close()
                context.close()
            browser.close()
        problems += [f"tried to reach the network: {url}" for url in outside]
        assert not problems, "\n".join(problems)
