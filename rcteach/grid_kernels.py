"""The exact-in-law samplers and the per-layer metrics of :mod:`rcteach.grid` (its module doc states the math).

Introduced in chapter "Rank collapse in depth" (book/05_depth.md), with :mod:`rcteach.grid`.

Shapes: n = configurations x seeds networks in a batch, T tokens, p = 1 + k state columns (the e
column, then k directions of e^perp), states in rotated token coordinates (row 0 = sqrt(T) x the
mean token).  Every draw takes its generators ``gens`` (one per configuration, ``seeds`` networks
each), so a batch gives the same numbers as its configurations run one by one.
"""

from __future__ import annotations

import math

import torch

from . import _validate
from .device import resolve
from .linalg import matmul
from .top_eigen import top_and_rest_unchecked

__all__ = ["bartlett", "centred_softmax"]


def _draws(gens, seeds, shape, dtype, device) -> torch.Tensor:
    """Standard normals (len(gens) * seeds, *shape): block i from generator i."""
    out = torch.empty(len(gens), seeds, *shape, dtype=dtype, device=device)
    for i, g in enumerate(gens):
        torch.randn(seeds, *shape, generator=g, out=out[i])
    return out.reshape(len(gens) * seeds, *shape)


def _chi2(gens, seeds, dof, dtype, device) -> torch.Tensor:
    """Chi-square draws (len(gens) * seeds, len(dof)) with dof[j] > 0 degrees of freedom."""
    alpha = torch.as_tensor(dof, dtype=dtype, device=device).div(2).expand(seeds, len(dof)).contiguous()
    return torch.cat([2 * torch._standard_gamma(alpha, generator=g) for g in gens])


def bartlett(p, dof, *, gens, seeds=1, dtype=torch.float64, device=None) -> torch.Tensor:
    """Bartlett factors L (len(gens) * seeds, p, p): L L^T ~ Wishart_p(dof, I) = G G^T, G (p, dof) Gaussian.

    L is lower triangular with L_jj ~ chi_{dof - j} and N(0, 1) entries below the diagonal (j from 0).
    When dof < p (a singular Wishart matrix), columns j >= dof are zero: G = L Q with L
    lower-trapezoidal.  Draws normals first, then chi-squares, from each generator in ``gens``.
    """
    p = _validate.integer("p", p, minimum=1)
    dof = _validate.integer("dof", dof, minimum=0)
    if not isinstance(gens, (list, tuple)) or not gens or not all(isinstance(g, torch.Generator) for g in gens):
        raise TypeError(f"gens must be a non-empty list of torch.Generator, got {gens!r}")
    seeds = _validate.integer("seeds", seeds, minimum=1)
    device, dtype = resolve(device, dtype)
    cols = min(p, dof)
    i, j = torch.tril_indices(p, p, -1, device=device)
    below = (i * p + j)[j < cols]  # the strictly lower entries of the nonzero columns: only these are drawn
    L = torch.zeros(len(gens) * seeds, p * p, dtype=dtype, device=device)
    L = L.index_copy_(1, below, _draws(gens, seeds, (len(below),), dtype, device)).view(-1, p, p)
    if cols:
        chi = _chi2(gens, seeds, [dof - j for j in range(cols)], dtype, device).sqrt()  # (n, cols)
        idx = torch.arange(cols, device=device)
        L[..., idx, idx] = chi
    return L


def centred_softmax(logits, log_scale=None) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(kappa * logits) - 1/T in scaled form exp(log_out) * B, precise for tiny logits.

    ``logits`` l (*batch, T, T), ``log_scale`` log kappa (*batch,) (default 0).  With m = max |l| and
    x = kappa m (computed in logs, never overflowing):

    * x > 1: B = softmax(kappa l) - 1/T, log_out = 0 (kappa capped so kappa l stays finite; beyond the
      cap the softmax is already its one-hot limit);
    * eps <= x <= 1: with E = expm1(kappa l), B = (E - mean_row E) / (T + sum_row E) / x, log_out = log x
      (the exact formula, without the cancellation of exp(kappa l) - 1);
    * x < eps (machine epsilon): B = (l/m - mean_row l/m) / T, log_out = log x, its exact first-order
      limit (the next term is below rounding), finite however small kappa is.

    Rows of B sum to 0.  Returns (B, log_out).
    """
    logits = _validate.matrix("logits", logits, square=True)
    if log_scale is not None:
        if not isinstance(log_scale, torch.Tensor) or log_scale.shape != logits.shape[:-2]:
            raise TypeError(f"log_scale must be a tensor of the batch shape {tuple(logits.shape[:-2])}, "
                            f"got {log_scale!r}")
        if not torch.isfinite(log_scale).all():
            raise ValueError("log_scale must have finite entries (found NaN or inf)")
    return centred_softmax_unchecked(logits, log_scale)


def centred_softmax_unchecked(logits, log_scale=None) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`centred_softmax` without the input checks (the grid's inner loop)."""
    T = logits.shape[-1]
    dt = logits.dtype
    m = logits.detach().abs().amax((-2, -1)).clamp_min(torch.finfo(dt).tiny)  # (*batch,)
    if log_scale is None:
        if (m > 1).all():  # the i.i.d. logits of A: kappa = 1 and no small case to treat
            log_out = torch.zeros(m.shape, dtype=torch.float64, device=m.device)
            return torch.softmax(logits, dim=-1).sub_(1.0 / T), log_out
        log_scale = torch.zeros(logits.shape[:-2], dtype=torch.float64, device=logits.device)
    ell = logits / m[..., None, None]  # max |ell| = 1
    log_x = log_scale.to(torch.float64) + m.to(torch.float64).log()
    x = log_x.clamp(max=math.log(torch.finfo(dt).max) - 2).exp().to(dt)[..., None, None]
    large, small = log_x > 0, log_x < math.log(torch.finfo(dt).eps)
    middle = ~(large | small)
    if large.all():
        return torch.softmax(x * ell, dim=-1).sub_(1.0 / T), torch.zeros_like(log_x)
    B = torch.empty_like(ell)
    if large.any():
        B[large] = torch.softmax(x[large] * ell[large], dim=-1) - 1.0 / T
    if middle.any():
        E = torch.expm1(x[middle] * ell[middle])
        B[middle] = (E - E.mean(-1, keepdim=True)) / (T + E.sum(-1, keepdim=True)) / x[middle]
    if small.any():
        B[small] = (ell[small] - ell[small].mean(-1, keepdim=True)) / T
    return B, torch.where(log_x > 0, torch.zeros_like(log_x), log_x)


class _Rotation:
    """The Householder reflection O (T, T) with O e_0 = 1/sqrt(T) (O = O^T = O^{-1})."""

    def __init__(self, T, dtype, device):
        v = torch.full((T,), -1.0 / math.sqrt(T), dtype=dtype, device=device)
        v[0] += 1.0
        self.v, self.beta = v, 2.0 / float(v @ v)

    def __call__(self, M):
        """O M for M (*batch, T, q)."""
        return torch.addcmul(M, self.v[:, None], (self.v @ M)[..., None, :], value=-self.beta)

    def conjugate(self, A):
        """O A O for A (*batch, T, T)."""
        return self(self(A).mT).mT


def _initial(gens, seeds, T, d, k, dtype, device) -> torch.Tensor:
    """Haar-orthonormal tokens X0 (T, d) in coordinates [e | k directions of e^perp]: (n, T, k + 1).

    x_e = X0 e is the first T coordinates of a uniform unit vector of R^d (g / sqrt(|g|^2 + chi2_{d-T}));
    the e^perp part has Gram I - x_e x_e^T, factored as Q diag(sqrt(1 - |x_e|^2), 1, ..) with Q the
    Householder reflection sending e_0 to x_e/|x_e| (first column dropped when k = T - 1, d = T).
    """
    g = _draws(gens, seeds, (T,), dtype, device)  # (n, T)
    sq = g.square().sum(-1)
    if d > T:
        sq = sq + _chi2(gens, seeds, [d - T], dtype, device)[:, 0]
    x = g / sq.sqrt()[:, None]
    rho = x.norm(dim=-1, keepdim=True)
    w = -x / rho
    w[:, 0] += 1.0
    Q = torch.eye(T, dtype=dtype, device=device) - 2 * w[:, :, None] * w[:, None, :] / (w * w).sum(-1)[:, None, None]
    Q[:, :, 0] *= (1 - rho.square()).clamp_min(0).sqrt()
    return torch.cat([x[:, :, None], Q[:, :, T - k:]], dim=-1)


def _layernorm(Z, O, T) -> torch.Tensor:
    """LayerNorm (unit-norm tokens, e dropped) of a state Z (n, T, p) in rotated token coordinates.

    With m the mean token and c_i the centred ones (e^perp coordinates), y_i = (m + c_i) q_i,
    q_i = 1 / |m + c_i|; the centred part of y is c_i q_i - mean(c q) + (q_i - mean q) m, where
    q_i - mean q = (eps_i - mean eps)/|m| with eps_i = (1 + delta_i)^(-1/2) - 1 from expm1/log1p,
    delta_i = (2 m.c_i + |c_i|^2)/|m|^2: no cancellation when the tokens have nearly collapsed.
    Returns the rotated coordinates of y (tokens of norm 1), e column zero.
    """
    X = Z[..., 1:]
    m = X[:, 0] / math.sqrt(T)  # (n, k) mean token
    C = O(torch.cat([torch.zeros_like(X[:, :1]), X[:, 1:]], dim=1))  # (n, T, k) centred tokens
    mm = m.square().sum(-1, keepdim=True)  # (n, 1)
    mc = (C @ m[:, :, None])[..., 0]  # (n, T)
    cc = C.square().sum(-1)
    tiny = torch.finfo(Z.dtype).tiny
    q = (mm + 2 * mc + cc).clamp_min(tiny).rsqrt()  # (n, T)
    ok = mm > 0
    delta = (2 * mc + cc) / torch.where(ok, mm, 1.0)
    e = torch.expm1(-0.5 * torch.log1p(delta.clamp_min(-1 + torch.finfo(Z.dtype).eps)))
    dq = torch.where(ok, (e - e.mean(-1, keepdim=True)) / torch.where(ok, mm, 1.0).sqrt(), q - q.mean(-1, keepdim=True))
    Cq = C * q[..., None]
    mean_cq = Cq.mean(1, keepdim=True)  # (n, 1, k)
    centred = Cq - mean_cq + dq[..., None] * m[:, None, :]
    Y = O(centred)
    Y[:, 0] = math.sqrt(T) * (m * q.mean(-1, keepdim=True) + mean_cq[:, 0])
    return torch.cat([torch.zeros_like(Z[..., :1]), Y], dim=-1)


TRMM_MIN_SIZE = 200
"""Smallest p for which :func:`_mm_lower` multiplies by BLAS ``trmm`` matrix by matrix; below it one batched
product (:func:`rcteach.linalg.matmul`) is cheaper.  Measured (AMD EPYC, one thread, float32, (n, T, T + 1) x
(n, T + 1, T + 1)): trmm against the batched product 10.5 / 9.4 ms at T = 150 (n = 65), 6.5 / 7.0 at 200
(n = 20), 7.8 / 9.8 at 300 (n = 10), 81 / 140 at 1000 (n = 5)."""


def _mm_lower(a, L) -> torch.Tensor:
    """a @ L for a (n, T, p) and lower-triangular L (n, p, p) (Bartlett factors); on the CPU from
    p = :data:`TRMM_MIN_SIZE` on through BLAS ``trmm``, half the flops of a product."""
    if a.device.type != "cpu" or L.shape[-1] < TRMM_MIN_SIZE:
        return matmul(a, L)
    import numpy as np
    from scipy.linalg import blas

    trmm = blas.get_blas_funcs("trmm", dtype=a.numpy().dtype)
    out = np.empty(a.shape, dtype=a.numpy().dtype)
    for i, (x, low) in enumerate(zip(a.numpy(), L.numpy())):
        out[i] = trmm(1.0, low.T, x.T, side=0, lower=0).T  # (L^T x^T)^T in BLAS's column-major terms
    return torch.from_numpy(out)



def _metrics(Z, log_norm) -> dict:
    """The four metrics (module doc) of states Z (n, T, p) with ||Z||_F = 1.

    From S = Z Z^T (or Z^T Z, the smaller: the same nonzero eigenvalues lam_1 >= lam_2 >= ...):
    stable_rank = tr S / lam_1, stable_rank_gram = 1 + sum_{i >= 2} lam_i^2 / lam_1^2
    (:func:`rcteach.top_eigen.top_and_rest`: certified Lanczos for large T, else LAPACK).
    """
    S = matmul(Z, Z.mT) if Z.shape[-2] <= Z.shape[-1] else matmul(Z.mT, Z)  # numpy computes a @ a^T with syrk
    lam, rest = top_and_rest_unchecked(S)
    Z = Z.to(torch.float64)
    return {"stable_rank": S.diagonal(dim1=-2, dim2=-1).sum(-1, dtype=torch.float64) / lam,
            "stable_rank_gram": 1 + rest / lam.square(),
            "relative_mu": Z[:, 1:].norm(dim=(-2, -1)) / Z.norm(dim=(-2, -1)),
            "log_norm": log_norm.clone()}
