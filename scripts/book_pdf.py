"""The whole book as one PDF, from the HTML build's executed chapters (nothing runs a second time).

Run after the HTML build (``make book``, or ``scripts/build_book.py . --path-output OUT``):

    .venv/bin/python scripts/book_pdf.py [--path-output OUT] [--toc _toc.yml]

1. Jupyter Book's ``singlehtml`` builder writes every chapter into one page.  It reads the same
   Sphinx environment and doctrees as the HTML build (``OUT/_build/.doctrees``, no ``--all``), so
   no chapter is read or executed again: the build log says "0 added, 0 changed" (checked here).
2. Debian's chromium, through playwright, opens that page from disk, waits for MathJax, opens every
   collapsed block (solutions, hidden code: a printed book shows them) and prints it with the book's
   print rules (book/assets/css/rcteach-book.css: code lines wrap, figures fit the page).

Writes ``OUT/_build/pdf/book.pdf``; exits non-zero, saying why, if a code block is still wider
than the printed page (a cut line).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from _browser import launch  # noqa: E402  (Debian's chromium: tests/_browser.py)

#: In the printed page: the code blocks and outputs wider than their box (cut at the page edge),
#: each by its longest line.
CUT_BLOCKS = ("Array.from(document.querySelectorAll('pre, .cell_output .output'))"
              ".filter(p => p.scrollWidth > p.clientWidth + 1)"
              ".map(p => p.innerText.split('\\n').reduce((a, b) => a.length >= b.length ? a : b))")


def build_single_page(path_output: Path, toc: str | None = None) -> Path:
    """Run the ``singlehtml`` builder on the existing build in ``path_output``; the page it wrote."""
    cmd = [sys.executable, str(ROOT / "scripts" / "build_book.py"), str(ROOT), "--builder", "singlehtml",
           "--path-output", str(path_output)]  # as the HTML build (make book); warnings: it fails on them
    if toc is not None:  # exactly as the HTML build had it: a changed path would be a changed config
        cmd += ["--toc", str(toc)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        sys.exit(f"book_pdf: the singlehtml build failed:\n{log[-4000:]}")
    if not re.search(r"updating environment: \S*0 added, 0 changed, 0 removed", re.sub(r"\x1b\[[0-9;]*m", "", log)):
        sys.exit("book_pdf: the singlehtml build read chapters again (no HTML build in "
                 f"{path_output}, or its sources changed since):\n{log[-3000:]}")
    out = path_output / "_build" / "singlehtml"
    redirect = (out / "index.html").read_text(encoding="utf-8")
    page = out / re.search(r'url=([^"]+)"', redirect).group(1)
    # Sphinx writes the page's links relative to the output folder (_static/, _images/) even when
    # the root document is in a subfolder (book/intro): the page is read from there.
    (out / "book.html").write_bytes(page.read_bytes())
    return out / "book.html"


def print_pdf(page_file: Path, pdf: Path) -> list[str]:
    """Print ``page_file`` to ``pdf`` (A4) with chromium; the longest line of each cut code block."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page()
        page.goto(page_file.as_uri(), wait_until="load", timeout=300000)
        if page.locator(".math").count():
            page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=600000)
            page.evaluate("MathJax.startup.promise")
        page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        page.emulate_media(media="print")
        page.set_viewport_size({"width": 688, "height": 1000})  # A4 less its margins, at 96 px per inch
        cut = page.evaluate(CUT_BLOCKS)
        pdf.parent.mkdir(parents=True, exist_ok=True)
        page.pdf(path=str(pdf), format="A4", print_background=True,
                 margin={"top": "15mm", "bottom": "15mm", "left": "14mm", "right": "14mm"})
        browser.close()
    return cut


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path-output", type=Path, default=ROOT, help="the HTML build's --path-output")
    parser.add_argument("--toc", help="the HTML build's --toc, if it had one (as written there, from the repository)")
    args = parser.parse_args(argv)
    pdf = args.path_output / "_build" / "pdf" / "book.pdf"
    cut = print_pdf(build_single_page(args.path_output.resolve(), args.toc), pdf)
    if cut:
        print(f"book_pdf: {len(cut)} code blocks wider than the page:\n" + "\n".join(cut), file=sys.stderr)
        return 1
    print(f"book_pdf: wrote {pdf}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
