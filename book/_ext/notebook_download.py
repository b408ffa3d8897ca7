"""Sphinx extension: every notebook page of the book offers its chapter as a ``.ipynb`` download.

sphinx-book-theme's download menu lists ``.ipynb`` when the page context names a notebook under
``_sources/`` (``ipynb_source``), which the theme itself sets only when a launch button (Binder,
Colab, thebe) is configured, and this book has none.  This extension writes each MyST chapter,
converted by jupytext, to ``_sources/<page>.ipynb`` and names it there.  The download is the clean
chapter for students: no outputs (run it in JupyterLab), exercise solutions collapsed as in the
book (dropdown admonitions, solution code hidden): :func:`rcteach.tools.notebooks.clean_notebook`,
the same notebook as ``python -m rcteach notebooks DIR`` writes.
"""

from __future__ import annotations

from pathlib import Path

import jupytext

from rcteach.tools.notebooks import clean_notebook


def _add_notebook(app, pagename, templatename, context, doctree):
    source = Path(app.env.doc2path(pagename))
    if doctree is None or source.suffix != ".md":
        return
    notebook = clean_notebook(source)
    if "kernelspec" not in notebook.metadata:  # a plain Markdown page, not a notebook
        return
    target = Path(app.outdir, "_sources", pagename).with_suffix(".ipynb")
    target.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(notebook, target, fmt="ipynb")
    context["ipynb_source"] = pagename + ".ipynb"


def setup(app):
    # before sphinx-book-theme builds the download menu (its handlers run at priority 501)
    app.connect("html-page-context", _add_notebook, priority=500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
