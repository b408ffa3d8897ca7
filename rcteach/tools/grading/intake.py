"""Read a submitted notebook defensively, in the grader's process, before anything runs.

:func:`code_cells` opens the path without blocking and without following it into anything but a
regular file (a FIFO, a socket, a device or a folder is refused: it could hang the grader or stand
for something else), refuses a file that *is* one of the files it must protect under another name
(a symbolic or hard link to the solutions notebook would otherwise score full marks; the solutions
named at their own place are the instructor's to grade), reads at most
:data:`MAX_BYTES`, and returns the sources of its code cells.  Notebook formats 4 and 3 are read (3
keeps its cells in ``worksheets`` and their code in ``input``).

Two kinds of refusal: ``ValueError`` for a path that is not a submission at all (the caller says it
could not be graded), :class:`NotANotebook` for a file that is one but cannot be run (graded 0, with
the reason).
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import stat

__all__ = ["MAX_BYTES", "NotANotebook", "code_cells"]

MAX_BYTES = 64 << 20  #: the largest notebook read (outputs included)


class NotANotebook(ValueError):
    """A submitted file that is not a Jupyter notebook the grader can run (the message says why)."""


_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a device",
          stat.S_IFBLK: "a device"}


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


def _read(path, protected) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ValueError(f"submission {path} does not exist") from None
    except OSError as e:
        if e.errno in (errno.ENXIO, errno.EOPNOTSUPP):
            raise ValueError(f"submission {path} is not a regular file (a socket)") from None
        raise ValueError(f"submission {path} cannot be read: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"submission {path} is not a regular file ({_KINDS.get(stat.S_IFMT(st.st_mode), 'special')})")
        own = _file_ids(protected).get((st.st_dev, st.st_ino))
        if own is not None and os.path.abspath(path) not in own:  # the same file under another name: a link
            raise ValueError(f"submission {path} is one of the assignment's own files (a link to the solutions or "
                             "the answer key): refusing to grade it")
        if st.st_size > MAX_BYTES:
            raise NotANotebook(f"{st.st_size} bytes, more than the {MAX_BYTES >> 20} MiB a notebook may have")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(MAX_BYTES + 1)
    finally:
        os.close(fd)


def code_cells(path, *, protected=()) -> list[str]:
    """The sources of the code cells of the notebook at ``path``, in order.

    ``protected``: folders whose files a submission must not be under another name (the autograder
    folder, the master notebooks).  Raises ``ValueError`` (not a regular file, one of those files, missing) or
    :class:`NotANotebook` (too big, not JSON, not notebook format 3 or 4, malformed cells).
    """
    data = _read(path, protected)
    if len(data) > MAX_BYTES:
        raise NotANotebook(f"more than the {MAX_BYTES >> 20} MiB a notebook may have")
    try:
        notebook = json.loads(data.decode("utf-8-sig"))  # a byte-order mark, as some editors write, is fine
    except (ValueError, RecursionError):
        raise NotANotebook("the file is not JSON (a Jupyter notebook is a JSON document)") from None
    if not isinstance(notebook, dict):
        raise NotANotebook(f"the file holds a JSON {type(notebook).__name__}, not a notebook")
    version = notebook.get("nbformat")
    if version == 4:
        cells, key = notebook.get("cells"), "source"
    elif version == 3:
        sheets = notebook.get("worksheets")
        if not (isinstance(sheets, list) and all(isinstance(s, dict) and isinstance(s.get("cells"), list) for s in sheets)):
            raise NotANotebook("notebook format 3 whose 'worksheets' is not a list of worksheets with cells")
        cells, key = [c for sheet in sheets for c in sheet["cells"]], "input"
    else:
        raise NotANotebook(f"notebook format {version!r}: only Jupyter notebook formats 4 and 3 are graded")
    if not isinstance(cells, list):
        raise NotANotebook(f"its 'cells' is a {type(cells).__name__}, not a list of cells")
    sources = []
    for number, cell in enumerate(cells, 1):
        if not (isinstance(cell, dict) and isinstance(cell.get("cell_type"), str)):
            raise NotANotebook(f"cell {number} is not a cell (an object with a 'cell_type')")
        if cell["cell_type"] != "code":
            continue
        source = cell.get(key, "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotANotebook(f"the code of cell {number} is neither text nor a list of lines")
        sources.append(source)
    return sources
