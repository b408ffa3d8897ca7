"""The largest eigenvalue of batched symmetric positive semi-definite matrices, certified, and the sums a
stable rank needs.

Introduced with the stable ranks (book/intro.md); the grid (:mod:`rcteach.grid`), :func:`rcteach.propagate`
and :func:`rcteach.stable_rank` use it.

A stable rank needs ||X||_F^2 = tr S and the largest eigenvalue lam_1 of the Gram matrix S (X X^T or
X^T X); the Gram stable rank needs also rest = sum_{i >= 2} lam_i^2.  Not the whole spectrum.
:func:`top_and_rest` returns (lam_1, rest) for a batch S (n, m, m), in float64:

* **dense** (m < :data:`LANCZOS_MIN_SIZE`, off the CPU, or where the certificate below fails): LAPACK.
  Below :data:`SYEVR_MIN_SIZE` all eigenvalues in one batched ``eigvalsh`` call; from it the top pair
  (lam_1, v) from ``syevr`` (matrix by matrix, cheaper there) and rest = ||S - lam_1 v v^T||_F^2.
* **Lanczos** (:func:`lanczos_top`, from m = :data:`LANCZOS_MIN_SIZE` on the CPU): O(k m^2) for k
  steps instead of O(m^3), and rest = ||S - lam_1 y y^T||_F^2 with the certified Ritz vector y.  The
  deflated matrix carries the small eigenvalues to their own rounding: a nearly rank-one S gives rest
  to O(eps lam_1^2) or better, not the O(eps) noise of ||S||_F^2 - lam_1^2.

**The certificate** (per matrix).  Lanczos with full reorthogonalisation from a random unit start q_1
builds an orthonormal basis Q_k of the Krylov space K and the tridiagonal T_k = Q_k^T S Q_k (diagonal
alpha, off-diagonal beta) with S Q_k = Q_k T_k + beta_k q_{k+1} e_k^T.  Let (theta, s) be the top
eigenpair of T_k and y = Q_k s.

* Lower bound: theta = y^T S y (computed again from S) is a Rayleigh quotient, so theta <= lam_1.
* Upper bound: for a unit x = Q_k a + b with b orthogonal to K,
  x^T S x = a^T T_k a + 2 beta_k a_k q_{k+1}^T b + b^T S b <= (a, |b|)^T M (a, |b|) with
  M = [[T_k, beta_k e_k], [beta_k e_k^T, f]], where f = sqrt(||S||_F^2 - ||T_k||_F^2 - 2 beta_k^2)
  is the Frobenius norm of S on the complement of K, an upper bound of its largest eigenvalue there.
  So lam_1 <= U = lam_max(M), a (k + 1) x (k + 1) tridiagonal matrix.
* Certified when U + slack <= theta (1 + :data:`TOL`), the slack covering rounding
  (10 (k + 1) sqrt(m) eps ||S||_F), and the residual ||S y - theta y|| = beta_k |s_k| is at most
  :data:`RESIDUAL_TOL` theta (so that rest is exact to 2 RESIDUAL_TOL^2 lam_1^2).

The bound needs no gap and no probability: it holds once the Frobenius mass of S outside the Krylov
space is below lam_1, which is what happens for the matrices of collapsing stacks (a dominant
consensus direction) and for low-rank ones.  A breakdown (an invariant subspace found early: beta_k = 0,
e.g. a rank-one S) is exact: f is then the norm of S on the rest of the space, and if that does not
certify theta the iteration continues from a fresh random vector orthogonal to K.  Where the mass
outside K stays large (a spread spectrum without a dominant eigenvalue: a Wishart matrix, the first
layers of A_perp), the certificate fails within :func:`max_steps` steps (or earlier, when the mass left
needs more steps than remain) and :func:`top_and_rest` takes the dense route for that matrix.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from . import _validate, linalg

__all__ = ["LANCZOS_MIN_SIZE", "SYEVR_MIN_SIZE", "TOL", "RESIDUAL_TOL", "TopEigen", "max_steps", "lanczos_top",
           "top_and_rest",
           "top_and_rest_unchecked"]

LANCZOS_MIN_SIZE = 256
"""Smallest m for which :func:`top_and_rest` tries Lanczos first (CPU).  Measured on this project's AMD EPYC,
one thread, on the grid's Gram matrices (collapsing states, batches of 15): Lanczos plus its rest costs
0.6x the dense top pair at m = 256, 0.35x at 600 and 0.2x at 1000, and 1.1x at m = 150."""

SYEVR_MIN_SIZE = 100
"""Smallest m for which the dense route asks scipy's LAPACK ``syevr`` (OpenBLAS) for the top pair, matrix by
matrix; below it one batched :func:`rcteach.linalg.eigvalsh` call is cheaper (all eigenvalues).  Measured on
the grid's Gram matrices (T = 60 to 150, gamma 1 and 0.2, 25 configurations x 5 seeds x 10 layers; AMD EPYC,
one thread), batched eigvalsh against syevr: 359 / 486 ms at m = 60, 525 / 569 at 80, 910 / 891 at 100,
2490 / 2257 at 150."""


def max_steps(m: int) -> int:
    """Lanczos steps before giving up on an m x m matrix (then dense): about as many as cost what LAPACK's top
    pair costs.  Measured here (AMD EPYC, one thread, float32 Gram matrices): a step costs 0.2, 0.9 and 2.4 ms
    at m = 256, 600 and 1000, the dense route 3.5, 20 and 88 ms, and the Lanczos set-up about a quarter
    of it: m / 32 steps."""
    return max(8, m // 32)


TOL = 1e-10
"""Certified relative accuracy of lam_1: theta <= lam_1 <= theta (1 + TOL) (module doc).  The value itself is
accurate to about 1e-15 (a Ritz value's error is quadratic in its residual)."""

RESIDUAL_TOL = 1e-8
"""||S y - theta y|| <= RESIDUAL_TOL theta for the Ritz vector y: rest = ||S - theta y y^T||_F^2 is then exact
to 2e-16 lam_1^2, the resolution of a Gram stable rank 1 + rest / lam_1^2 in float64."""

_RESTART = 1e-14  # beta_k <= _RESTART ||S||_F: an invariant subspace, continue from a fresh random vector


class TopEigen(NamedTuple):
    """What :func:`lanczos_top` returns for S (n, m, m); float64 on the CPU."""

    value: torch.Tensor  # (n,) theta = y^T S y <= lam_1
    upper: torch.Tensor  # (n,) certified lam_1 <= upper (inf where not certified)
    vector: torch.Tensor  # (n, m) the unit Ritz vector y
    certified: torch.Tensor  # (n,) bool: upper <= value (1 + TOL) and the residual is small
    steps: torch.Tensor  # (n,) Lanczos steps taken


def _tridiagonal(alpha, beta) -> torch.Tensor:
    """The symmetric tridiagonal matrices (n, k, k) with diagonals alpha (n, k) and beta (n, k - 1)."""
    T = torch.diag_embed(alpha)
    if beta.shape[-1]:
        off = torch.diag_embed(beta, offset=1)
        T = T + off + off.mT
    return T


def _small_eigh(T) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues (ascending) and eigenvectors of the small symmetric tridiagonal matrices T (n, k, k), float64:
    numpy's batched LAPACK (OpenBLAS), not torch's MKL, whose degenerate-input failures
    :mod:`rcteach.linalg` guards against; tridiagonal matrices of k <= m / 32 rows are never the failing case
    there, and a non-finite result leaves the matrix uncertified (then dense, through :mod:`rcteach.linalg`)."""
    import numpy as np

    w, v = np.linalg.eigh(T.numpy())
    return torch.from_numpy(w), torch.from_numpy(v)


def _orthogonalise(w, Q) -> tuple[torch.Tensor, torch.Tensor]:
    """w (n, m) minus its projection on the rows of Q (n, j, m), twice (classical Gram-Schmidt, then again:
    orthogonal to rounding); returns (w, the coefficients of the first pass + the second)."""
    h = (Q @ w[..., None])[..., 0]
    w = w - (Q.mT @ h[..., None])[..., 0]
    h2 = (Q @ w[..., None])[..., 0]
    return w - (Q.mT @ h2[..., None])[..., 0], h + h2


def _working_copy(S) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(A, unit, ||A||_F^2): S as a new float64 CPU tensor, divided by unit = max|S_ij| per matrix where the
    sum of squares of S underflows or overflows (else unit = 1: no pass over S for the scaling)."""
    A = S.detach().to(device="cpu", dtype=torch.float64, copy=True)
    fro2 = torch.linalg.vector_norm(A, dim=(-2, -1)).square()
    if ((fro2 > 1e-280) & (fro2 < 1e280)).all():
        return A, torch.ones_like(fro2), fro2
    unit = A.abs().amax((-2, -1))
    unit = torch.where(unit > 0, unit, torch.ones_like(unit))
    A.div_(unit[:, None, None])
    return A, unit, torch.linalg.vector_norm(A, dim=(-2, -1)).square()


def lanczos_top(S, *, steps=None, seed=0) -> TopEigen:
    """The certified top eigenpair of each symmetric positive semi-definite S (n, m, m) (module doc).

    Float64 on the CPU whatever S's dtype.  ``steps``: at most this many Lanczos steps (default
    :func:`max_steps`, capped at m); ``seed``: the random start (same seed, same numbers).  Matrices still
    uncertified after ``steps`` (or given up earlier) come back with ``certified`` False and their last Ritz pair.
    """
    return _lanczos(*_working_copy(S), max_steps(S.shape[-1]) if steps is None else int(steps), seed)


def _lanczos(A, unit, fro2, steps, seed) -> TopEigen:
    """:func:`lanczos_top` on the working copy A = S / unit (not modified), fro2 = ||A||_F^2."""
    n, m = A.shape[0], A.shape[-1]
    K = max(1, min(steps, m))
    eps = torch.finfo(torch.float64).eps
    slack = 10 * math.sqrt(m) * eps * fro2.sqrt()  # rounding, per step (module doc)
    gen = torch.Generator().manual_seed(seed)
    out = TopEigen(torch.full((n,), math.nan, dtype=torch.float64), torch.full((n,), math.inf, dtype=torch.float64),
                   torch.zeros(n, m, dtype=torch.float64), torch.zeros(n, dtype=torch.bool),
                   torch.zeros(n, dtype=torch.int64))
    live = torch.arange(n)  # the batch elements still iterating; A, Q, alpha, beta hold only these
    Q = torch.zeros(n, K + 1, m, dtype=torch.float64)
    q = torch.randn(n, m, generator=gen, dtype=torch.float64)
    Q[:, 0] = q / torch.linalg.vector_norm(q, dim=-1, keepdim=True)
    alpha = torch.zeros(n, K, dtype=torch.float64)
    beta = torch.zeros(n, K, dtype=torch.float64)
    for k in range(K):
        w, h = _orthogonalise((A @ Q[:, k, :, None])[..., 0], Q[:, : k + 1])
        alpha[:, k] = h[:, k]
        b = torch.linalg.vector_norm(w, dim=-1)
        theta, s = _small_eigh(_tridiagonal(alpha[:, : k + 1], beta[:, :k]))
        top, s_top = theta[:, -1], s[:, :, -1]
        step = alpha[:, k].square() + 2 * b.square()  # the mass this step moved into K (with q_{k+1}'s coupling)
        captured = alpha[:, :k].square().sum(-1) + 2 * beta[:, :k].square().sum(-1) + step
        f2 = (fro2[live] - captured).clamp_min(0)  # ||S||_F^2 outside the Krylov space
        M = _tridiagonal(torch.cat([alpha[:, : k + 1], f2.sqrt()[:, None]], -1),
                         torch.cat([beta[:, :k], b[:, None]], -1))
        upper = _small_eigh(M)[0][:, -1] + (k + 1) * slack[live]
        good = (upper <= top * (1 + TOL)) & (b * s_top[:, -1].abs() <= RESIDUAL_TOL * top) & (top > 0)
        # give up early where the mass left outside K, at this step's rate (rates fall), needs more steps than remain
        hopeless = (k >= 2) & (f2 - top.square() > (K - 1 - k) * step)
        done = good | hopeless | (k + 1 == K) | (fro2[live] == 0)
        if done.any():
            idx = live[done]
            y = (s_top[done, None, :] @ Q[done, : k + 1])[:, 0]
            y = y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)
            value = (y[:, None, :] @ (A[done] @ y[..., None]))[:, 0, 0]  # y^T S y, computed again from S
            ok = good[done] & (upper[done] <= value * (1 + TOL))
            out.value[idx], out.vector[idx], out.steps[idx] = value * unit[idx], y, k + 1
            out.upper[idx] = torch.where(ok, upper[done] * unit[idx], math.inf)
            out.certified[idx] = ok
            keep = ~done
            if not keep.any():
                break
            live, A, Q, alpha, beta, w, b = live[keep], A[keep], Q[keep], alpha[keep], beta[keep], w[keep], b[keep]
        restart = b <= _RESTART * fro2[live].sqrt()  # an invariant subspace (exact breakdown): a fresh direction
        if restart.any():
            fresh = torch.randn(int(restart.sum()), m, generator=gen, dtype=torch.float64)
            w[restart] = _orthogonalise(fresh, Q[restart, : k + 1])[0]
            b = torch.where(restart, torch.linalg.vector_norm(w, dim=-1), b)
        beta[:, k] = torch.where(restart, 0.0, b)
        Q[:, k + 1] = w / b[:, None]
    return out


def _dense_top_and_rest(S) -> tuple[torch.Tensor, torch.Tensor]:
    """(lam_1, rest) from LAPACK (module doc), float64 on S's device: for m >= :data:`SYEVR_MIN_SIZE` on the CPU
    ``syevr``'s top pair, elsewhere (and where ``syevr`` fails) all eigenvalues from :func:`rcteach.linalg.eigvalsh`
    (which survives a failing driver), in float64 where ``syevr`` failed."""
    n, m = S.shape[:2]
    if not (S.device.type == "cpu" and m >= SYEVR_MIN_SIZE):
        return _all_eigenvalues(S)
    import numpy as np
    from scipy.linalg import lapack  # lazy: only large dense matrices need it

    syevr = lapack.get_lapack_funcs("syevr", dtype=S.numpy().dtype)
    lam, vec = np.full(n, np.nan), np.zeros((n, m))
    for i, a in enumerate(S.numpy()):
        w, z, *_, info = syevr(a, compute_v=1, range="I", il=m, iu=m, lower=1)
        if info == 0:
            lam[i], vec[i] = w[0], z[:, 0]
    lam, vec = torch.from_numpy(lam), torch.from_numpy(vec)
    deflated = S.to(torch.float64, copy=True)  # a copy also of a float64 S: the caller's S stays as it was
    deflated.baddbmm_(lam[:, None, None] * vec[:, :, None], vec[:, None, :], alpha=-1)  # S - lam_1 v v^T
    rest = torch.linalg.vector_norm(deflated, dim=(-2, -1)).square()
    bad = ~(torch.isfinite(lam) & torch.isfinite(rest))
    if bad.any():
        lam[bad], rest[bad] = _all_eigenvalues(S[bad].to(torch.float64))
    return lam, rest


def _all_eigenvalues(S) -> tuple[torch.Tensor, torch.Tensor]:
    """(lam_1, rest) from all the eigenvalues of S (n, m, m), float64 on S's device."""
    w = linalg.eigvalsh_unchecked(S).to(torch.float64).clamp_min(0)
    return w[:, -1], w[:, :-1].square().sum(-1)


def top_and_rest(S) -> tuple[torch.Tensor, torch.Tensor]:
    """For each symmetric positive semi-definite S (n, m, m) with eigenvalues lam_1 >= lam_2 >= ...: lam_1 and
    rest = sum_{i >= 2} lam_i^2, both float64 (n,) on S's device (module doc: certified Lanczos from
    m = :data:`LANCZOS_MIN_SIZE` on the CPU, else or where uncertified LAPACK).

    S must be a finite float32/float64 tensor of shape (n, m, m), symmetric to rounding (ValueError otherwise).
    """
    S = _validate.matrix("S", S, square=True)
    if S.dim() != 3:
        raise ValueError(f"S must have shape (n, m, m), got shape {tuple(S.shape)}")
    scale = S.detach().abs().amax().item()
    if (S - S.mT).abs().amax().item() > 64 * torch.finfo(S.dtype).eps * scale:
        raise ValueError("S must be symmetric (a Gram matrix), got one that is not, beyond rounding")
    return top_and_rest_unchecked(S)


def top_and_rest_unchecked(S, *, lanczos=True) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`top_and_rest` without the input checks (the stable ranks of the grid, ``propagate`` and ``metrics``).

    ``lanczos=False``: the dense route directly, for matrices known to have no dominant eigenvalue (the Gram
    matrices of A_perp outputs: a Wishart-like spread spectrum), where the certificate fails anyway (module doc)
    and the attempt only adds a working copy and a few steps.  The same values, to rounding."""
    S = S.detach()
    if not lanczos or S.device.type != "cpu" or S.shape[-1] < LANCZOS_MIN_SIZE or not S.shape[0]:
        return _dense_top_and_rest(S)
    A, unit, fro2 = _working_copy(S)
    top = _lanczos(A, unit, fro2, max_steps(S.shape[-1]), 0)
    lam, y = top.value.clone(), top.vector
    A.baddbmm_((lam / unit)[:, None, None] * y[:, :, None], y[:, None, :], alpha=-1)  # A - lam_1 y y^T, in place
    rest = unit.square() * torch.linalg.vector_norm(A, dim=(-2, -1)).square()
    bad = ~top.certified
    if bad.any():
        lam[bad], rest[bad] = _dense_top_and_rest(S[bad])
    return lam, rest
