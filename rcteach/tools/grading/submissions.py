"""Which files of a class's submissions are graded, whose they are, and reading one safely.

*The rule* (:func:`collect`).  Under a folder named on the command line, every entry whose name ends
in ``.ipynb`` is a submission, found without following symbolic links (folders named
``.ipynb_checkpoints``, Jupyter's autosaves, are skipped).  Only a regular file is graded; anything
else with a notebook's name — a symbolic link (to a file or a folder: never followed, so nothing
outside the folder is ever read), a folder, a FIFO, a device — and a symbolic link to a folder
become a :class:`Submission` with a ``problem``: a row of ``scores.csv`` with 0 and the reason,
never silently missing.  A notebook named on the command line must be a regular file too.  A file
that cannot be read, is larger than :data:`MAX_NOTEBOOK`, is not a notebook of format 4 or 3, or
*is* one of the autograder's own files under another name (a hard link to the solutions would
otherwise score full marks) is refused when it is read (:func:`read_notebook`,
:class:`SubmissionError`), with the reason.

*Student ids* (:func:`student_id`), one per row of ``scores.csv``: in a flat folder, the notebook's
name (``alice.ipynb``: ``alice``); in per-student folders, the folder under the root
(``alice/a1_spectral_gap.ipynb``: ``alice``); in nbgrader's layout
``submitted/<student>/<assignment>/<assignment>.ipynb``, the student's folder.  Path parts named
after the assignment are skipped, so a notebook named on its own (``submitted/alice/a1/a1.ipynb``)
gets the id it has in the whole class's run.  Two submissions with one id (two notebooks in one
student's folder) are told apart by their paths (``alice/draft``, ``alice/final``).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import pathlib
import stat

__all__ = ["Submission", "SubmissionError", "collect", "student_id", "read_notebook", "assignment_of", "MAX_NOTEBOOK"]

MAX_NOTEBOOK = 64 << 20  #: largest notebook file graded (bytes)
NOTEBOOK_SUFFIX = ".ipynb"
AUTOSAVES = ".ipynb_checkpoints"


class SubmissionError(ValueError):
    """A submission that cannot be graded (the message says why)."""


@dataclasses.dataclass(frozen=True)
class Submission:
    """One entry of the class: its ``student`` id, its ``path``, and ``problem`` (why it cannot be
    graded, found while collecting; None for a regular file)."""

    student: str
    path: pathlib.Path
    problem: str | None = None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def _problem(path: pathlib.Path) -> str | None:
    """Why the entry ``path`` (not followed if a link) is not a gradable file, or None."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "a symbolic link (not followed: only regular files inside the submissions folder are graded)"
    return f"{_kind(mode)}, not a notebook file"


def _walk(folder: pathlib.Path):
    """``(path, problem)`` of every notebook-named entry under ``folder`` (and of links to folders), sorted."""
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as e:
        yield folder, f"a folder that cannot be read ({e.strerror})"
        return
    for entry in entries:
        path = pathlib.Path(entry.path)
        if entry.is_symlink():
            if entry.name.endswith(NOTEBOOK_SUFFIX) or path.is_dir():
                yield path, _problem(path)
        elif entry.is_dir(follow_symlinks=False):
            if entry.name.endswith(NOTEBOOK_SUFFIX):
                yield path, _problem(path)
            elif entry.name != AUTOSAVES:
                yield from _walk(path)
        elif entry.name.endswith(NOTEBOOK_SUFFIX):
            yield path, _problem(path)


def student_id(path, root, assignment: str) -> str:
    """The student a notebook belongs to (module doc).  ``root``: the folder it was found under, or
    None for a notebook named on its own; ``assignment``: the assignment's name."""
    path = pathlib.Path(path)
    rel = path.relative_to(root).parts if root is not None else (path.name,)
    parts = [*rel[:-1], rel[-1].removesuffix(NOTEBOOK_SUFFIX)]
    while parts and parts[-1] == assignment:
        parts.pop()
    if parts:
        return parts[0]
    above = pathlib.Path(root) if root is not None else path.parent
    return next((p for p in reversed(above.absolute().parts) if p not in (assignment, above.anchor)), assignment)


def collect(paths, assignment: str) -> list[Submission]:
    """The submissions named by ``paths`` (notebooks, or folders of them), with unique student ids."""
    found = []  # (student, path, relative parts, problem)
    for given in map(pathlib.Path, paths):
        if given.is_dir() and not given.name.endswith(NOTEBOOK_SUFFIX):  # a folder of submissions (the instructor's)
            for path, problem in _walk(given):
                found.append((student_id(path, given, assignment), path, path.relative_to(given).parts, problem))
        else:
            found.append((student_id(given, None, assignment), given, (given.name,), _problem(given)))
    counts = {}
    for student, *_ in found:
        counts[student] = counts.get(student, 0) + 1
    subs = []
    for student, path, rel, problem in found:
        if counts[student] > 1:  # told apart by their paths
            student = "/".join([*rel[:-1], rel[-1].removesuffix(NOTEBOOK_SUFFIX)])
        subs.append(Submission(student, path, problem))
    return subs


def _file_ids(folders) -> dict[tuple[int, int], set[str]]:
    """(device, inode) of every regular file under ``folders`` -> the paths it has there."""
    ids = {}
    for folder in map(pathlib.Path, folders):
        for p in folder.rglob("*") if folder.is_dir() else ():
            try:
                st = p.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                ids.setdefault((st.st_dev, st.st_ino), set()).add(os.path.abspath(p))
    return ids


def _format_4(notebook: dict) -> dict:
    """A notebook of format 3 (cells in ``worksheets``, code in ``input``) as format 4, code cells only."""
    sheets = notebook.get("worksheets")
    if not (isinstance(sheets, list) and all(isinstance(s, dict) and isinstance(s.get("cells"), list) for s in sheets)):
        raise SubmissionError("not a notebook: format 3 whose 'worksheets' is not a list of worksheets with cells")
    cells = [c for sheet in sheets for c in sheet["cells"]]
    if not all(isinstance(c, dict) for c in cells):
        raise SubmissionError("not a notebook: a cell is not a JSON object")
    return {"nbformat": 4, "nbformat_minor": 0, "metadata": notebook.get("metadata", {}),
            "cells": [{"cell_type": c.get("cell_type"), "metadata": {}, "source": c.get("input", "")} for c in cells]}


def read_notebook(path, *, protected=()) -> tuple[bytes, dict]:
    """The bytes and the parsed JSON of a submitted notebook (format 4; one of format 3 converted),
    read without following a symbolic link; raises :class:`SubmissionError` saying why it cannot
    be graded.  ``protected``: folders (the autograder's, the masters') whose files it must not be
    under another name."""
    if (problem := _problem(pathlib.Path(path))) is not None:
        raise SubmissionError(problem)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise SubmissionError("a symbolic link (not followed)" if e.errno == errno.ELOOP
                              else f"cannot be read ({e.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):  # replaced since it was looked at
            raise SubmissionError(f"{_kind(info.st_mode)}, not a notebook file")
        own = _file_ids(protected).get((info.st_dev, info.st_ino))
        if own is not None and os.path.abspath(path) not in own:  # the same file under another name: a link
            raise SubmissionError("one of the assignment's own files (a link to the solutions or the answer key)")
        data = f.read(MAX_NOTEBOOK + 1)
    if len(data) > MAX_NOTEBOOK:
        raise SubmissionError(f"larger than {MAX_NOTEBOOK >> 20} MiB")
    try:
        notebook = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise SubmissionError(f"not a notebook: not valid JSON ({str(e)[:120]})") from None
    if isinstance(notebook, dict) and notebook.get("nbformat") == 3:
        notebook = _format_4(notebook)
        data = json.dumps(notebook).encode()
    if not (isinstance(notebook, dict) and notebook.get("nbformat") == 4 and isinstance(notebook.get("cells"), list)):
        raise SubmissionError("not a notebook: no nbformat-4 cells (save it from Jupyter as .ipynb)")
    return data, notebook


def assignment_of(notebook: dict) -> str | None:
    """The assignment a notebook belongs to: otter's ``metadata.otter.assignment_name`` (set by
    ``otter assign`` in every student notebook), or None."""
    meta = notebook.get("metadata") if isinstance(notebook, dict) else None
    otter = meta.get("otter") if isinstance(meta, dict) else None
    name = otter.get("assignment_name") if isinstance(otter, dict) else None
    return name if isinstance(name, str) else None
