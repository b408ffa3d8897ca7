"""Sphinx extension: search results with text snippets in a book opened from disk.

Sphinx's search page shows, under each hit, a snippet of the page around the search term: it
``fetch``-es the page's HTML (``searchtools.js``: ``_displayItem``), which a browser refuses for
``file://`` pages (a CORS error, a failed request and a failed resource: three console errors per
hit, and titles only).  This extension writes the text of every page, section by section (nested
``<section id=...>`` inside ``[role="main"]``, the structure ``Search.htmlToText`` reads), to
``_static/rcteach-search-texts.js``, and adds to the search page alone that file and
``js/rcteach-search.js`` (book/assets), which answers those fetches from it.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from docutils import nodes

TEXTS = "rcteach-search-texts.js"
SKIPPED = (nodes.raw, nodes.image, nodes.comment, nodes.system_message)


def _html(node) -> str:
    """The text of ``node`` as HTML: each section an ``<section id>``, everything else escaped text
    (code cells' source included, their outputs not)."""
    if isinstance(node, nodes.Text):
        return html.escape(node.astext())
    if isinstance(node, SKIPPED) or "cell_output" in node.get("classes", ()):
        return ""  # figures, raw HTML and the cells' outputs: no text worth a snippet
    inner = "".join(_html(child) for child in node.children)
    if isinstance(node, nodes.section) and node["ids"]:
        return f'<section id="{html.escape(node["ids"][0])}">{inner}</section>'
    if isinstance(node, (nodes.paragraph, nodes.title, nodes.literal_block, nodes.math_block)):
        return inner + "\n"
    return inner


def _collect(app, doctree, docname):
    """Keep the text of each page as it is written (the resolved doctree)."""
    app.env.rcteach_search_texts = getattr(app.env, "rcteach_search_texts", {})
    app.env.rcteach_search_texts[docname] = f'<div role="main">{_html(doctree)}</div>'


def _add_to_search_page(app, pagename, templatename, context, doctree):
    if pagename == "search":
        app.add_js_file(TEXTS)
        app.add_js_file("js/rcteach-search.js")


def _write(app, exception):
    if exception is None and app.builder.format == "html":
        texts = getattr(app.env, "rcteach_search_texts", {})
        out = Path(app.outdir) / "_static" / TEXTS
        out.write_text("window.RCTEACH_SEARCH_TEXTS = " + json.dumps(texts, ensure_ascii=False) + ";\n",
                       encoding="utf-8")


def setup(app):
    # Safe for parallel writing: Sphinx resolves every doctree ("doctree-resolved") in the main process
    # and writes the search page there too, after the parallel writers have finished.
    app.connect("doctree-resolved", _collect)
    app.connect("html-page-context", _add_to_search_page)
    app.connect("build-finished", _write)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
