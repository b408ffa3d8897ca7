"""Where the files rcteach ships live: the book's chapters and the assignments' masters.

The repository keeps one copy of each, ``book/*.md`` and ``assignments/<name>/``.  Building a wheel
copies them into the package as ``rcteach/_data/book`` and ``rcteach/_data/assignments`` (``setup.py``;
never into the source tree).  An installed rcteach reads that copy; a checkout (an editable install)
has none and reads the repository's folders.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DATA", "book_dir", "assignments_dir", "chapters"]

PACKAGE = Path(__file__).resolve().parent
#: The package data written by the wheel build (absent in a checkout).
DATA = PACKAGE / "_data"


def _shipped(name: str) -> Path:
    """``_data/<name>`` in an installed package, else the checkout's ``<name>/`` (which may not exist)."""
    data = DATA / name
    return data if data.is_dir() else PACKAGE.parent / name


def book_dir() -> Path:
    """The folder of the book's chapters (MyST notebooks ``*.md``)."""
    return _shipped("book")


def assignments_dir() -> Path:
    """The folder of the assignments' masters ``<name>/<name>.ipynb`` and their ``key.py``."""
    return _shipped("assignments")


def chapters() -> list[Path]:
    """The chapters, sorted by name (``01_...`` to ``16_...``, then ``intro``).  A FileNotFoundError if
    this installation has none (a wheel built without ``setup.py``'s copy step)."""
    found = sorted(book_dir().glob("*.md"))
    if not found:
        raise FileNotFoundError(f"no chapters in {book_dir()}: this installation of rcteach was built without them "
                         "(build the wheel from the repository or its sdist with pip or python -m build)")
    return found
