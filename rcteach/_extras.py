"""rcteach's optional extras (``pip install 'rcteach[NAME]'``, pyproject's optional dependencies) and
whether this environment has them, so that what needs one can say so instead of failing deep inside."""

from __future__ import annotations

import importlib.util

__all__ = ["EXTRAS", "install_line", "missing"]

#: extra -> the modules it provides that rcteach imports (lazily, where they are needed)
EXTRAS = {
    "models": ("transformers", "tokenizers"),  # rcteach.models, chapter 12, the model-* checks
    "assign": ("otter", "ipykernel"),  # python -m rcteach assign / grade
    "cluster": ("dask", "distributed"),  # python -m rcteach sweep --dask
}


def install_line(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install 'rcteach[{extra}]'"


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails to import, or a module stubbed out in sys.modules
        return False


def missing(extra: str) -> str | None:
    """None when every module of ``extra`` can be imported here, else which are missing and the install line."""
    if extra not in EXTRAS:
        raise ValueError(f"extra must be one of {sorted(EXTRAS)}, got {extra!r}")
    absent = [m for m in EXTRAS[extra] if not _importable(m)]
    if not absent:
        return None
    return f"needs {' and '.join(absent)}, not installed: {install_line(extra)}"
