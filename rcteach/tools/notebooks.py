"""The book's chapters as clean Jupyter notebooks, for students without the repository.

``python -m rcteach notebooks DIR`` writes every chapter shipped with the package
(:func:`rcteach._files.chapters`) as ``DIR/<chapter>.ipynb``: no outputs (run them in JupyterLab),
the exercises' solutions collapsed as in the book (dropdown admonitions, solution code cells
hidden), not paired with a MyST source.  :func:`clean_notebook` is also the book's ``.ipynb``
download (``book/_ext/notebook_download.py``), so both give the same notebook.
"""

from __future__ import annotations

import pathlib
import re

from .. import _files
from ._args import UsageError

__all__ = ["clean_notebook", "add_language_info", "kernel_language_info", "write_notebooks", "add_subcommand"]


#: A Markdown link to a sibling chapter, ``[text](NN_name.md)`` or ``(NN_name.md#anchor)``.
CHAPTER_LINK = re.compile(r"\]\(([\w-]+)\.md(#[^)\s]*)?\)")


def clean_notebook(path):
    """Chapter ``path`` (a MyST notebook ``.md``) as an nbformat notebook without outputs and without
    jupytext's pairing metadata (a plain ``.ipynb``), with the kernel's ``language_info``
    (:func:`kernel_language_info`), solutions collapsed as in the chapter; its links to other
    chapters point at their notebooks (``NN_name.ipynb``, written next to it)."""
    import jupytext

    notebook = jupytext.read(path)
    notebook.metadata.pop("jupytext", None)
    add_language_info(notebook.metadata)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = CHAPTER_LINK.sub(r"](\1.ipynb\2)", cell.source)
    return notebook


def add_language_info(metadata: dict) -> None:
    """Give a notebook's ``metadata`` for the python3 kernel that kernel's ``language_info``
    (:func:`kernel_language_info`) if it has none; other kernels' notebooks are left as they are."""
    if metadata.get("kernelspec", {}).get("name") == "python3":
        metadata.setdefault("language_info", kernel_language_info())


def kernel_language_info() -> dict:
    """The ``language_info`` the python3 kernel (ipykernel) reports, which JupyterLab writes into a
    notebook's metadata when that kernel starts: a notebook that already holds it is not marked
    modified on opening (the same value venv-config/etc/jupyter/jupyter_server_config.py gives the
    .md chapters).  Empty without ipykernel (then no kernel can run the notebook here)."""
    try:
        from ipykernel.ipkernel import IPythonKernel
    except ImportError:
        return {}
    return dict(IPythonKernel.language_info)


def write_notebooks(out_dir, *, force=False) -> list[pathlib.Path]:
    """Write every chapter as ``out_dir/<name>.ipynb`` (:func:`clean_notebook`); returns the paths.

    An existing notebook of the same name is a ValueError listing them (a student's work would be
    lost), unless ``force=True``.
    """
    import jupytext

    chapters = _files.chapters()
    out_dir = pathlib.Path(out_dir)
    targets = [out_dir / f"{chapter.stem}.ipynb" for chapter in chapters]
    existing = [t.name for t in targets if t.exists()]
    if existing and not force:
        raise ValueError(f"{out_dir} already holds {', '.join(existing)}: choose another folder, or force=True "
                         "(--force) to overwrite them")
    out_dir.mkdir(parents=True, exist_ok=True)
    for chapter, target in zip(chapters, targets):
        jupytext.write(clean_notebook(chapter), target, fmt="ipynb")
    return targets


def _main(args) -> int:
    try:
        written = write_notebooks(args.out, force=args.force)
    except ValueError as err:
        raise UsageError(str(err)) from err
    print(f"wrote {len(written)} chapters as notebooks into {args.out} (no outputs, solutions collapsed); "
          f"open them with: jupyter lab {args.out}")
    return 0


def add_subcommand(sub) -> None:
    """Register ``notebooks`` on the rcteach CLI's subparsers."""
    p = sub.add_parser("notebooks", help="write every chapter of the book as a clean Jupyter notebook into OUT")
    p.add_argument("out", metavar="OUT", help="folder for the notebooks (created if missing)")
    p.add_argument("--force", action="store_true", help="overwrite notebooks of the same name in OUT")
    p.set_defaults(func=_main)
