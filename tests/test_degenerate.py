"""The degenerate-input suite (``tests/_degenerate.py``): every spectral function of rcteach on uniform
and rank-one attention, exactly repeated spectra, identity and permutation maps, zero and identical
tokens, T from 2 to 260, d = 1, windows >= T and scales 1e+-150, each against its exact answer.

Run twice here: with this machine's drivers, and with torch's eigen- and singular-value solvers forced
to fail (raising ``LinAlgError``, or returning NaN without raising, as MKL does on some CPUs), so that
every answer comes through :mod:`rcteach.linalg`'s fallbacks.  The second run does not depend on
which inputs this CPU's MKL happens to fail on: a pass here is a pass on a CPU where every torch call
fails.  It also shows that every spectral function reaches its decompositions through that one place
(a raw ``torch.linalg`` call would meet the forced failure).  ``tests/test_degenerate_mkl.py`` runs the
suite under each MKL code path.
"""

from __future__ import annotations

import math

import pytest
import torch

import _degenerate
from rcteach import linalg

FORCED_T = (2, 3, 48, 129, 260)  # the smallest sizes, sizes where MKL's geev fails on some CPUs, the largest
CASES = _degenerate.families(_degenerate.cases())
FORCED = _degenerate.families([c for c in _degenerate.cases(FORCED_T, FORCED_T, ((2, 1.0), (3, 1.0))) if c.spectral])


def _run_all(cases):
    failures = _degenerate.scan(cases)
    assert not failures, "\n".join(f"{name}: {error}" for name, error in failures)


@pytest.mark.parametrize("family", CASES)
def test_degenerate_input(family):
    _run_all(CASES[family])


def _nan_like_result(name, A):
    """What torch.linalg.<name>(A) returns, filled with NaN."""
    *batch, m, n = A.shape
    if name == "eigvals":
        return torch.full((*batch, n), complex(math.nan, math.nan), dtype=(A.new_zeros(()) + 0j).dtype,
                          device=A.device)
    return torch.full((*batch, min(m, n)), math.nan, dtype=A.dtype, device=A.device)


@pytest.fixture(params=["raise", "nan"])
def failing_torch(request, monkeypatch):
    """torch.linalg's eigen- and singular-value solvers made to fail; counts their calls."""
    calls = []
    for name in ("eigvals", "eigvalsh", "svdvals"):
        def broken(A, *args, _name=name, **kwargs):
            calls.append(_name)
            if request.param == "raise":
                raise torch.linalg.LinAlgError(f"torch.linalg.{_name}: forced failure (test)")
            return _nan_like_result(_name, A)
        monkeypatch.setattr(torch.linalg, name, broken)
    for name in ("eig", "eigh", "svd"):  # rcteach calls none of these: any use would bypass rcteach.linalg
        monkeypatch.setattr(torch.linalg, name, lambda *a, _name=name, **k: pytest.fail(f"raw torch.linalg.{_name}"))
    return calls


@pytest.mark.parametrize("family", FORCED)
def test_degenerate_input_through_the_fallbacks(family, failing_torch):
    for case in FORCED[family]:
        failing_torch.clear()
        _run_all([case])
        assert failing_torch, f"{case.name} is marked spectral but never reached a torch solver"


def test_every_driver_failing_is_a_clear_error(failing_torch, monkeypatch):
    for name in linalg._FALLBACKS:
        monkeypatch.setitem(linalg._FALLBACKS, name, tuple((d, _raise) for d, _ in linalg._FALLBACKS[name]))
    A = torch.eye(4, dtype=torch.float64).expand(2, 4, 4)
    for f in (linalg.eigvals, linalg.eigvalsh, linalg.svdvals):
        with pytest.raises(linalg.LinAlgFailure, match=r"every driver failed for batch element \(0,\)"):
            f(A)


def _raise(a):
    raise ValueError("forced failure (test)")
