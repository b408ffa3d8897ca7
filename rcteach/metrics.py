"""Measurements of tokens and attention matrices, batched over leading dimensions.

Introduced in chapter "Rank collapse in attention" (book/intro.md).

Stable rank has two definitions in the literature; every function and figure says which:

* ``stable_rank(X)``            sr(X) = ||X||_F^2 / ||X||_2^2 = sum s_i^2 / s_1^2;
* ``stable_rank(X, gram=True)`` sr(X X^T) = sum s_i^4 / s_1^4 (Mind the Gap's code).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from . import _validate, linalg
from .top_eigen import top_and_rest_unchecked

__all__ = ["squared_singular_values", "stable_rank_from_squared", "unit_scaled", "frobenius_norm", "stable_rank",
           "stable_ranks_unchecked", "mu", "mu_unchecked", "spectrum", "SpectralGap", "spectral_gap",
           "spectrum_distance", "decay_rate"]


def squared_singular_values(X) -> torch.Tensor:
    """Squared singular values of X (*batch, m, n), descending, shape (*batch, min(m, n)).

    Read off the eigenvalues of the smaller Gram matrix (X X^T or X^T X) with ``eigvalsh``
    (:func:`rcteach.linalg.eigvalsh`, which survives a failing LAPACK driver): on the CPU much cheaper
    than a batched SVD, and accurate to float precision relative to s_1^2, which is all a stable rank
    needs.  No validation (callers validate); the graph is kept.
    """
    gram = X @ X.mT if X.shape[-2] <= X.shape[-1] else X.mT @ X  # (*batch, min(m, n), min(m, n))
    return linalg.eigvalsh_unchecked(gram).clamp_min(0).flip(-1)


def stable_rank_from_squared(sq, *, gram=False) -> torch.Tensor:
    """Stable rank from squared singular values ``sq`` (*batch, k), descending: sum s_i^2 / s_1^2, or with
    ``gram=True`` sum s_i^4 / s_1^4.  NaN where s_1 = 0 (X zero: undefined).  No validation."""
    p = sq.square() if gram else sq
    return p.sum(-1) / p[..., 0]


def _max_abs(X) -> torch.Tensor:
    """max |X_ij| per batch element, (*batch, 1, 1), detached; 1 where X is zero."""
    scale = X.detach().abs().amax((-2, -1), keepdim=True)
    return torch.where(scale > 0, scale, torch.ones_like(scale))


def unit_scaled(X) -> torch.Tensor:
    """X (*batch, m, n) divided by its largest |entry| per batch element (zero stays zero).

    Stable ranks are scale-free, and their squared singular values of X / max|X| neither overflow
    nor underflow (:func:`stable_rank` divides the same way).  No validation.
    """
    return X / _max_abs(X)


def frobenius_norm(X) -> torch.Tensor:
    """||X||_F of X (*batch, m, n), shape (*batch,), neither overflowing nor underflowing where the result is
    a finite float: one pass sqrt(sum x^2), which is exact to rounding when it lands between
    sqrt(tiny) and sqrt(max) of the dtype (with a margin of 1e3); otherwise s ||X / s||_F with s = max|X|.
    Keeps the graph; no validation."""
    norm = torch.linalg.matrix_norm(X)
    info = torch.finfo(X.dtype)
    if X.numel() and bool(((norm > 1e3 * math.sqrt(info.tiny)) & (norm < 1e-3 * math.sqrt(info.max))).all()):
        return norm
    scale = _max_abs(X)
    return scale[..., 0, 0] * torch.linalg.matrix_norm(X / scale)


def stable_rank(X, *, gram=False) -> torch.Tensor:
    """Stable rank of X (*batch, m, n) from its singular values s_1 >= s_2 >= ...

    ``gram=False``: sum s_i^2 / s_1^2 (in [1, rank X]);  ``gram=True``: sum s_i^4 / s_1^4, the
    stable rank of X X^T.  Returns shape (*batch,).  X must not be zero.  Computed as
    :func:`stable_ranks_unchecked` does: ||X||_F^2 and the top eigenvalue of the smaller Gram matrix, a
    certified Lanczos iteration for large matrices on the CPU (:mod:`rcteach.top_eigen`), else LAPACK.

    Examples
    --------
    >>> X = rcteach.orthonormal_tokens(4, 8, seed=0)  # s_1 = ... = s_4 = 1
    >>> ones = torch.ones(3, 5, dtype=torch.float64)  # rank one
    >>> round(rcteach.stable_rank(X).item(), 12), round(rcteach.stable_rank(ones).item(), 12)
    (4.0, 1.0)
    """
    gram = _validate.flag("gram", gram)
    X = _validate.matrix("X", X, finite=False)  # finite entries <=> a finite norm: checked on the norm
    norm = frobenius_norm(X.detach())
    if not torch.isfinite(norm).all():
        raise ValueError("X must have finite entries (found NaN or inf)")
    if not (norm > 0).all():
        raise ValueError("X must be nonzero: the stable rank of a zero matrix is undefined")
    # scale-free: X / ||X||_F neither overflows (1e200 X) nor underflows to 0/0 (1e-200 X)
    return stable_ranks_unchecked(X / norm[..., None, None])[int(gram)]


def stable_ranks_unchecked(X, *, lanczos=True) -> tuple[torch.Tensor, torch.Tensor]:
    """Both stable ranks of X (*batch, m, n), (Frobenius, Gram), each (*batch,) in X's dtype; NaN where X = 0.

    From the smaller Gram matrix S (X X^T or X^T X) with eigenvalues lam_1 >= lam_2 >= ...:
    tr S / lam_1 and 1 + sum_{i >= 2} lam_i^2 / lam_1^2, with lam_1 and the sum from
    :func:`rcteach.top_eigen.top_and_rest` (certified Lanczos for large matrices on the CPU, else LAPACK).
    While autograd records X: from all the squared singular values (:func:`squared_singular_values`, which
    keeps the graph).  No validation; scale X first (:func:`unit_scaled`) where its squares could overflow.
    ``lanczos=False`` skips the Lanczos attempt (:func:`rcteach.top_eigen.top_and_rest_unchecked`): for outputs
    whose Gram matrix has no dominant eigenvalue (A_perp X W), the same values to rounding, for less work.
    """
    if X.requires_grad and torch.is_grad_enabled():
        sq = squared_singular_values(X)
        return stable_rank_from_squared(sq), stable_rank_from_squared(sq, gram=True)
    Y = X.detach().reshape(-1, *X.shape[-2:])
    # the Gram matrices S (numpy's syrk on the CPU)
    flat = linalg.matmul(Y, Y.mT) if X.shape[-2] <= X.shape[-1] else linalg.matmul(Y.mT, Y)
    lam, rest = top_and_rest_unchecked(flat, lanczos=lanczos)
    trace = flat.diagonal(dim1=-2, dim2=-1).sum(-1, dtype=torch.float64)
    batch = X.shape[:-2]
    return (trace / lam).reshape(batch).to(X.dtype), (1 + rest / lam.square()).reshape(batch).to(X.dtype)


def mu(X) -> torch.Tensor:
    """Distance to consensus: mu(X) = ||X - 1 xbar^T||_F = ||P X||_F, xbar the mean token.

    X: (*batch, T, d) -> (*batch,).  Zero exactly when all tokens are equal (rank-one collapse).
    """
    return mu_unchecked(_validate.matrix("X", X))


def mu_unchecked(X) -> torch.Tensor:
    """:func:`mu` without validation, for callers that validated X (keeps the autograd graph)."""
    return frobenius_norm(X - X.mean(-2, keepdim=True))


def spectrum(A) -> torch.Tensor:
    """Eigenvalues of square A (*batch, T, T), complex, sorted by decreasing modulus (ties keep LAPACK's order).

    From :func:`rcteach.linalg.eigvals`, which survives a failing LAPACK driver (exactly degenerate
    input such as the uniform attention 11^T/T makes MKL's ``geev`` fail on some CPUs)."""
    return spectrum_unchecked(_validate.matrix("A", A, square=True))


def spectrum_unchecked(A):
    """:func:`spectrum` of a validated A: no checks."""
    ev = linalg.eigvals_unchecked(A)  # (*batch, T)
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
    """Outlier lambda_1 and bulk radius |lambda_2| of square A (*batch, T, T), T >= 2.

    Examples
    --------
    >>> gap = rcteach.spectral_gap(rcteach.random_attention(256, seed=0))
    >>> round(gap.outlier.real.item(), 6), round(gap.bulk_radius.item(), 3)  # 1, and near sqrt(c/T) = 0.0625
    (1.0, 0.065)
    """
    ev = spectrum_unchecked(_validate.matrix("A", A, square=True, min_rows=2))
    return SpectralGap(outlier=ev[..., 0], bulk_radius=ev[..., 1].abs())


def spectrum_distance(a, b) -> float:
    """Largest distance between matched eigenvalues of two spectra (1-D complex tensors).

    The two multisets are matched by the assignment that minimises the total distance
    (Hungarian algorithm), so ordering and near-ties do not matter.
    """
    for name, v in (("a", a), ("b", b)):
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"{name} must be a 1-D tensor of eigenvalues, got {type(v).__name__}")
        if v.dim() != 1:
            raise ValueError(f"{name} must be a 1-D tensor of eigenvalues, got shape {tuple(v.shape)}")
        if not torch.isfinite(v).all():
            raise ValueError(f"{name} must have finite entries (found NaN or inf)")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same length, got {a.shape[0]} and {b.shape[0]}")
    a = a.detach().cpu().to(torch.complex128).numpy()
    b = b.detach().cpu().to(torch.complex128).numpy()
    cost = np.abs(a[:, None] - b[None, :])
    from scipy.optimize import linear_sum_assignment  # lazy: scipy is slow to import

    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].max())


def _layer_series(name, values) -> torch.Tensor:
    """``values`` per layer as a float tensor of shape (L, *batch), L >= 2 (ints and arrays converted to
    float64); TypeError/ValueError naming ``name`` otherwise.  The input check of the per-layer fits."""
    if not isinstance(values, torch.Tensor):
        try:
            values = torch.as_tensor(np.asarray(values, dtype=np.float64))
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a tensor or array of real numbers, got {type(values).__name__}") from None
    elif not values.is_floating_point() or values.is_complex():
        if values.is_complex():
            raise TypeError(f"{name} must be real, got {values.dtype}")
        values = values.to(torch.float64)
    if values.dim() < 1:
        raise ValueError(f"{name} must have shape (L, *batch) with L >= 2 layers, got a scalar")
    if values.shape[0] < 2:
        raise ValueError(f"{name} must have shape (L, *batch) with L >= 2 layers, got shape {tuple(values.shape)}")
    return values


def decay_rate(values, start=0, stop=None, *, floor=None) -> torch.Tensor:
    """Per-layer exponential decay factor rho of ``values`` ~ C rho^t, by log-linear least squares.

    Fits log v_t = a + t log rho over the layers t = start .. stop - 1 (first axis, like a
    :class:`rcteach.Trajectory` field) and returns rho = exp(slope): rho < 1 decays, rho = 1 is
    flat.  Introduced in the chapter "Collapse under masks".

    Parameters
    ----------
    values : Tensor or array, shape (L, *batch)
        Positive values per layer (e.g. ``trajectory.mu``), one fit per batch element.
    start, stop : int
        The fit window, Python-slice style (``stop=None``: to the end; negative counts from the
        end); it must hold >= 2 layers.
    floor : float, optional
        Stop each fit before the float floor: only the layers before the first t >= start with
        v_t <= floor * v_0 are used (v_0 the first layer's value, so ``floor=1e-12`` stops where
        mu / mu_0 reaches 1e-12), per batch element; each fit must keep >= 2 layers.
        Without ``floor`` every value in the window must be > 0.

    Returns
    -------
    Tensor, shape (*batch,)
    """
    values = _layer_series("values", values)
    L = values.shape[0]
    start = _validate.integer("start", start)
    stop = L if stop is None else _validate.integer("stop", stop)
    t = torch.arange(L, device=values.device, dtype=values.dtype)[start:stop]  # (n,)
    v = values[start:stop].detach()  # (n, *batch)
    if t.numel() < 2:
        raise ValueError(f"the window start={start}, stop={stop} must hold >= 2 of the {L} layers")
    if torch.isnan(v).any() or (v < 0).any() or torch.isinf(v).any():
        raise ValueError("values must be finite and >= 0 in the fit window")
    if floor is None:
        if not (v > 0).all():
            raise ValueError("values must be > 0 in the fit window (pass floor= to stop before zeros)")
        keep = torch.ones_like(v, dtype=torch.bool)
    else:
        floor = _validate.real("floor", floor, positive=True)
        keep = torch.cumprod((v > floor * values[:1].detach()).to(torch.int64), dim=0).bool()  # up to the first drop
        if not (keep.sum(0) >= 2).all():
            raise ValueError(f"values fall to floor * values[0] within one layer of start={start}; "
                             "start earlier or lower the floor")
    w = keep.to(v.dtype)
    tt = t.reshape(-1, *([1] * (v.dim() - 1)))  # (n, 1, ...) broadcast over the batch
    logv = torch.where(keep, torch.log(torch.where(keep, v, torch.ones_like(v))), torch.zeros_like(v))
    n = w.sum(0)
    t_mean = (w * tt).sum(0) / n
    y_mean = (w * logv).sum(0) / n
    slope = (w * (tt - t_mean) * (logv - y_mean)).sum(0) / (w * (tt - t_mean) ** 2).sum(0)
    return torch.exp(slope)
