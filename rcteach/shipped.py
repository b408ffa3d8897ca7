"""Results too costly for their chapter, computed once and shipped with the package as JSON.

A chapter spends at most 60 s of CPU pinned to one thread (the book's budget); where an honest
run costs more, the chapter reads its result from ``rcteach/<name>.json`` instead, and says so.
Each file is written by ``scripts/precompute.py`` from the function in :func:`producers` at the
settings stored in the file, and a test recomputes part of it and compares (tests of the
producing module).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

__all__ = ["load", "path", "producers"]


def producers() -> dict:
    """name -> function of no arguments returning the JSON data of ``rcteach/<name>.json``."""
    from . import models, wu_table

    return {"ln_variants": wu_table.variant_data, "deep_stable_ranks": models.deep_stable_rank_data,
            "gram_stable_ranks": models.gram_stable_rank_data}


def path(name) -> Path:
    """Where ``rcteach/<name>.json`` lies in this checkout (``scripts/precompute.py`` writes there)."""
    return Path(__file__).with_name(f"{name}.json")


def load(name) -> dict:
    """The shipped data ``rcteach/<name>.json``."""
    if name not in producers():
        raise ValueError(f"name must be one of {sorted(producers())}, got {name!r}")
    return json.loads(resources.files(__package__).joinpath(f"{name}.json").read_text(encoding="utf-8"))
