"""The degenerate-input suite (``tests/_degenerate.py --spectral``) under each of MKL's code paths.

Which degenerate inputs make MKL's LAPACK drivers fail depends on the code path MKL picks for the CPU
(on an Intel CPU with AVX-512, ``torch.linalg.eigvals(11^T/T)`` fails for 38 of the T <= 129, with
``MKL_ENABLE_INSTRUCTIONS=AVX2`` for 91, with ``SSE4_2`` for another set).  One child process per path
runs every case that reaches an eigen- or singular-value driver, so that a pass on one CPU is a pass on
the others.  MKL honours the variable on Intel CPUs only: elsewhere (AMD: the failing sizes of 11^T/T
are the same 36 of T <= 129 under every setting, measured) the three runs would repeat
``test_degenerate.py`` and are skipped.  A separate module from ``test_degenerate.py``, so that
pytest-xdist can run it on another worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SUITE = Path(__file__).with_name("_degenerate.py")


def _intel_mkl() -> bool:
    """torch uses MKL and the CPU is Intel's (the only CPUs on which MKL_ENABLE_INSTRUCTIONS picks a path)."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return torch.backends.mkl.is_available() and "GenuineIntel" in cpuinfo


@pytest.mark.skipif(not _intel_mkl(), reason="MKL_ENABLE_INSTRUCTIONS changes nothing without MKL on an Intel CPU")
@pytest.mark.parametrize("path", ["SSE4_2", "AVX2", "AVX512"])
def test_degenerate_suite_under_mkl_code_path(path):
    env = {**os.environ, "MKL_ENABLE_INSTRUCTIONS": path, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, str(SUITE), "--spectral"], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, f"MKL_ENABLE_INSTRUCTIONS={path}:\n{run.stdout}\n{run.stderr[-3000:]}"
    assert " 0 of " in f" {run.stdout}", run.stdout
