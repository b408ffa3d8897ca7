"""Sphinx extension: let Sphinx read (and so execute) the chapters in parallel processes.

Sphinx reads in parallel (``-j N``, see scripts/build_book.py) only if every loaded extension
declares itself safe for it; two that Jupyter Book 1 loads declare nothing, so Sphinx warns (an
error under ``-W``) and reads one chapter after another.  Both are safe, and this extension says
so on their behalf, only where they declare nothing themselves:

- ``sphinx_multitoc_numbering`` replaces the toctree collector's section numbering, which Sphinx
  runs in the main process, after it has merged the readers' environments;
- ``sphinx_jupyterbook_latex`` registers node classes, configuration values and per-document
  transforms: no state outside the document being read.
"""

SAFE_TO_READ_IN_PARALLEL = ("sphinx_multitoc_numbering", "sphinx_jupyterbook_latex")


def _declare(app):
    for name in SAFE_TO_READ_IN_PARALLEL:
        extension = app.extensions.get(name)
        if extension is not None and extension.parallel_read_safe is None:
            extension.parallel_read_safe = True


def setup(app):
    app.connect("builder-inited", _declare)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
