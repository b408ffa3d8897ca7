"""Measurements of tokens and attention matrices, batched over leading dimensions.

Stable rank has two definitions in the literature; every function and figure says which:

* ``stable_rank(X)``            sr(X) = ||X||_F^2 / ||X||_2^2 = sum s_i^2 / s_1^2;
* ``stable_rank(X, gram=True)`` sr(X X^T) = sum s_i^4 / s_1^4 (Mind the Gap's code).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from . import _validate

__all__ = ["stable_rank", "mu", "spectrum", "SpectralGap", "spectral_gap", "spectrum_distance"]


def stable_rank(X, *, gram=False) -> torch.Tensor:
    """Stable rank of X (*batch, m, n) from its singular values s_1 >= s_2 >= ...

    ``gram=False``: sum s_i^2 / s_1^2 (in [1, rank X]);  ``gram=True``: sum s_i^4 / s_1^4, the
    stable rank of X X^T.  Returns shape (*batch,).  X must not be zero.
    """
    X = _validate.matrix("X", X)
    s = torch.linalg.svdvals(X)  # (*batch, min(m, n)), descending
    if not (s[..., 0] > 0).all():
        raise ValueError("X must be nonzero: the stable rank of a zero matrix is undefined")
    p = s.square() if not gram else s.square().square()
    return p.sum(-1) / p[..., 0]


def mu(X) -> torch.Tensor:
    """Distance to consensus: mu(X) = ||X - 1 xbar^T||_F = ||P X||_F, xbar the mean token.

    X: (*batch, T, d) -> (*batch,).  Zero exactly when all tokens are equal (rank-one collapse).
    """
    X = _validate.matrix("X", X)
    return torch.linalg.matrix_norm(X - X.mean(-2, keepdim=True))


def spectrum(A) -> torch.Tensor:
    """Eigenvalues of square A (*batch, T, T), complex, sorted by decreasing modulus."""
    A = _validate.matrix("A", A, square=True)
    ev = torch.linalg.eigvals(A)  # (*batch, T)
    order = ev.abs().argsort(dim=-1, descending=True, stable=True)
    return ev.gather(-1, order)


class SpectralGap(NamedTuple):
    """The eigenvalue of largest modulus and the largest modulus of the rest."""

    outlier: torch.Tensor  # (*batch,) complex
    bulk_radius: torch.Tensor  # (*batch,) real

    @property
    def ratio(self) -> torch.Tensor:
        """|outlier| / bulk radius: the size of the gap (about sqrt(T/c) for softmax A)."""
        return self.outlier.abs() / self.bulk_radius


def spectral_gap(A) -> SpectralGap:
    """Outlier lambda_1 and bulk radius |lambda_2| of square A (*batch, T, T)."""
    ev = spectrum(A)
    return SpectralGap(outlier=ev[..., 0], bulk_radius=ev[..., 1].abs())


def spectrum_distance(a, b) -> float:
    """Largest distance between matched eigenvalues of two spectra (1-D complex tensors).

    The two multisets are matched by the assignment that minimises the total distance
    (Hungarian algorithm), so ordering and near-ties do not matter.
    """
    for name, v in (("a", a), ("b", b)):
        if not isinstance(v, torch.Tensor) or v.dim() != 1:
            raise ValueError(f"{name} must be a 1-D tensor of eigenvalues")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same length, got {a.shape[0]} and {b.shape[0]}")
    a = a.detach().cpu().to(torch.complex128).numpy()
    b = b.detach().cpu().to(torch.complex128).numpy()
    cost = np.abs(a[:, None] - b[None, :])
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].max())
