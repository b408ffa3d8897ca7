"""Student copies of the book's chapters: the same notebook without the exercises' solutions.

In a chapter, solution prose sits in a dropdown admonition whose title starts with "Solution"::

    :::{admonition} Solution to exercise 1
    :class: dropdown
    ...
    :::

and solution code in code cells tagged ``solution``, with ``hide-input`` (code under a toggle in
the HTML book), the cell metadata ``jupyter: {source_hidden: true}`` (code hidden until asked in
JupyterLab) and ``rcteach.solution()`` first (the output under a closed toggle in both).
:func:`strip_solutions` removes both from a notebook read with jupytext;
:func:`student_copy` writes the result next to nothing else: ``python -m rcteach student-copy
book/03_centred_attention.md -o out/`` (``--to ipynb`` for a Jupyter notebook).
"""

from __future__ import annotations

import copy
import pathlib
import re

from ._args import UsageError, chapter_file, output_dir

__all__ = ["SOLUTION_TAG", "is_solution_cell", "strip_solution_admonitions", "strip_solutions", "student_copy"]

SOLUTION_TAG = "solution"
_OPEN = re.compile(r"^\s*(?P<fence>:{3,}|`{3,})\{admonition\}\s*(?P<title>.*)$")
_FORMATS = {"md": ("md:myst", ".md"), "ipynb": ("ipynb", ".ipynb")}


def is_solution_cell(cell) -> bool:
    """True for a code cell tagged ``solution``."""
    return cell.get("cell_type") == "code" and SOLUTION_TAG in cell.get("metadata", {}).get("tags", [])


def strip_solution_admonitions(text: str) -> str:
    """Remove every admonition whose title starts with "Solution" (MyST colon or backtick fence).

    The block runs from its opening fence to the first line that is only a fence of the same
    character at least as long, counting nested fences of that character.
    """
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not (m and m.group("title").strip().lower().startswith("solution")):
            out.append(lines[i])
            i += 1
            continue
        char, n, depth = m.group("fence")[0], len(m.group("fence")), 1
        i += 1
        while i < len(lines) and depth:
            s = lines[i].strip()
            if re.fullmatch(re.escape(char) + "{%d,}" % n, s):
                depth -= 1
            elif re.match(re.escape(char) + "{%d,}\\{" % n, s):
                depth += 1
            i += 1
        if depth:
            raise ValueError("unterminated Solution admonition")
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n") if out else ""


def strip_solutions(nb):
    """A copy of notebook ``nb`` (nbformat/jupytext) without solution code cells and Solution admonitions.

    Markdown cells left empty are dropped too.
    """
    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb.cells:
        if is_solution_cell(cell):
            continue
        if cell.cell_type == "markdown":
            cell.source = strip_solution_admonitions(cell.source)
            if not cell.source.strip():
                continue
        cells.append(cell)
    nb.cells = cells
    return nb


def student_copy(path, out_dir, *, to="md") -> pathlib.Path:
    """Write the student copy of chapter ``path`` (a MyST .md or .ipynb notebook) into ``out_dir``.

    ``to="md"`` keeps the MyST-Markdown format (with the chapter's jupytext header); ``to="ipynb"``
    writes a notebook without outputs.  Returns the path written (same stem as ``path``).
    """
    target = _target(path, out_dir, to)
    _write(strip_solutions(_read(path)), target, to)
    return target


def _target(path, out_dir, to) -> pathlib.Path:
    """Where the student copy of ``path`` goes; ValueError if ``path`` is no chapter or would be overwritten."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"path {path} does not exist")
    if to not in _FORMATS:
        raise ValueError(f"to must be one of {sorted(_FORMATS)}, got {to!r}")
    target = pathlib.Path(out_dir) / (path.stem + _FORMATS[to][1])
    if target.resolve() == path.resolve():
        raise ValueError(f"the student copy would overwrite {path}: choose another out_dir (-o)")
    return target


def _read(path):
    """The notebook ``path``, read with jupytext; ValueError naming it when it is not one."""
    import jupytext

    try:
        return jupytext.read(path)
    except Exception as err:  # jupytext and nbformat raise many kinds for a damaged file
        raise ValueError(f"path {path} is not a notebook jupytext can read ({type(err).__name__}: {err})") from None


def _write(nb, target: pathlib.Path, to: str) -> None:
    import jupytext

    target.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(nb, target, fmt=_FORMATS[to][0])


def _main(args) -> int:
    """Check every chapter and where its copy goes, read them all, and only then write."""
    try:
        targets = [_target(path, args.output, args.to) for path in args.paths]
        twice = {t for t in targets if targets.count(t) > 1}
        if twice:
            raise ValueError(f"paths: two chapters would both be written to {sorted(map(str, twice))[0]}")
        notebooks = [strip_solutions(_read(path)) for path in args.paths]
    except ValueError as err:
        raise UsageError(str(err)) from None
    for nb, target in zip(notebooks, targets):
        _write(nb, target, args.to)
        print(target)
    return 0


def add_subcommand(sub) -> None:
    """Register ``student-copy`` on the rcteach CLI's subparsers."""
    p = sub.add_parser("student-copy", help="write chapters without their exercise solutions")
    p.add_argument("paths", type=chapter_file, nargs="+", help="chapters (book/*.md, or .ipynb notebooks)")
    p.add_argument("-o", "--output", type=output_dir, required=True, help="output folder")
    p.add_argument("--to", choices=sorted(_FORMATS), default="md", help="output format (default md)")
    p.set_defaults(func=_main)
