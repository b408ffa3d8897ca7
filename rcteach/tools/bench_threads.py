"""``bench --threads``: the README's ``check`` with the thread settings a user has by default, against pinned.

Issue 24 measured ``python -m rcteach check`` at 302 s of CPU in a default environment against 39 s
with ``OMP_NUM_THREADS=1`` (torch's default was one intra-op thread per core).  :mod:`rcteach.threads`
now chooses one thread unless the user chose; this section shows it: the same command in fresh
processes, one with no thread variable set (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``,
``OPENBLAS_NUM_THREADS``, ``RCTEACH_THREADS`` removed) and one pinned (``OMP_NUM_THREADS=1
MKL_NUM_THREADS=1``), alternating over ``repeats`` pairs so that a drifting load hits both.  Reported:
CPU seconds (user + sys of the process: robust to a loaded machine) and wall seconds of each, and the
ratios default / pinned of their sums (target <= 1.2).
"""

from __future__ import annotations

import os
import sys
import tempfile

from .bench_grid import _child, load_line

__all__ = ["THREAD_VARIABLES", "TARGET", "threads_side_by_side", "format_threads"]

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RCTEACH_THREADS")
TARGET = 1.2
_PINNED = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _environments() -> dict[str, dict]:
    """The two environments: this one without any thread variable, and that plus the pinned ones.
    ``PYTHONPATH`` starts with the folder holding this rcteach, so the children run the same code."""
    base = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    base["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [base.get("PYTHONPATH")])])
    return {"default": base, "pinned": {**base, **_PINNED}}


def threads_side_by_side(argv=("check",), *, repeats=1, log=print) -> dict:
    """Run ``python -m rcteach <argv>`` ``repeats`` times in each environment, alternating (default
    first in odd pairs, pinned first in even ones).  Returns, per environment, ``cpu_s`` and ``wall_s``
    (summed over its runs) and ``runs``; and ``ratio_cpu``, ``ratio_wall`` (default / pinned),
    ``command``, ``load_before``, ``load_after``.  A run that exits non-zero is a RuntimeError."""
    if not (isinstance(repeats, int) and repeats >= 1):
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    envs = _environments()
    cmd = [sys.executable, "-m", "rcteach", *argv]
    out = {name: {"cpu_s": 0.0, "wall_s": 0.0, "runs": 0} for name in envs}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(repeats):
            for name in ("default", "pinned") if pair % 2 == 0 else ("pinned", "default"):
                r = _child(cmd, tmp, envs[name])
                for key in ("cpu_s", "wall_s"):
                    out[name][key] += r[key]
                out[name]["runs"] += 1
                log(f"{name:8s}: {r['cpu_s']:.1f} s CPU, {r['wall_s']:.1f} s wall")
    return {**out, "ratio_cpu": out["default"]["cpu_s"] / out["pinned"]["cpu_s"],
            "ratio_wall": out["default"]["wall_s"] / out["pinned"]["wall_s"],
            "command": "python -m rcteach " + " ".join(argv), "load_before": load_before, "load_after": os.getloadavg()}


def format_threads(res: dict) -> str:
    """The result of :func:`threads_side_by_side` as lines of text."""
    d, p = res["default"], res["pinned"]
    return "\n".join([
        f"threads: `{res['command']}` in fresh processes, {d['runs']} run(s) each",
        f"  default environment (no thread variable)   : {d['cpu_s']:7.1f} s CPU  {d['wall_s']:7.1f} s wall",
        f"  pinned (OMP_NUM_THREADS=1 MKL_NUM_THREADS=1): {p['cpu_s']:7.1f} s CPU  {p['wall_s']:7.1f} s wall",
        f"  ratio default / pinned: {res['ratio_cpu']:.2f} (CPU)  {res['ratio_wall']:.2f} (wall)  target <= {TARGET}",
        load_line(res["load_before"], res["load_after"]),
    ])
