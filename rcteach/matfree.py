"""Matrix-free estimates: spectral norm, stable rank and bulk radius without a dense decomposition.

An exact stable rank needs s_1 from an SVD (O(T^3) for a T x T matrix); the Frobenius norm is
O(T^2).  Here s_1 = ||X||_2 comes from a Krylov iteration on X^T X that only multiplies by X and
X^T, so a (T, n) matrix costs O(k T n) for k iterations and no O(T^3) step:

* ``method="lanczos"`` (default): Lanczos with full reorthogonalisation on X^T X, k <= ``iters``
  steps, the top Ritz value of the k x k tridiagonal.  Converges even when s_1 and s_2 are close.
* ``method="power"``: power iteration v <- X^T X v / ||X^T X v||, Rayleigh quotient ||X v||.
  Converges at rate (s_2/s_1)^2 per step: fast for softmax attention (the outlier s_1 ~ 1 sits
  far above the bulk 2 sqrt(c/T)), slow for a Gaussian matrix.

Both are batched over leading dimensions (a batch over seeds) and stop when every batch
element's estimate changed by less than ``tol`` (relative) in one step, or after ``iters`` steps.
The estimate is a lower bound on s_1 that increases with the steps (Rayleigh-Ritz), so
the stable rank estimate is an upper bound that decreases to the exact value.

Stated accuracy (tested in ``tests/test_matfree.py``, float64): with the defaults the
Frobenius stable rank agrees with :func:`rcteach.stable_rank` to a relative 1e-8 for softmax
attention, its outputs A X and Gaussian matrices up to T = 512.

``frobenius_bulk_radius`` estimates the radius of the bulk of A's eigenvalues from
||A_perp||_F / sqrt(T), O(T^2): the bulk eigenvalues of A_perp fill a disc of radius sqrt(c/T)
(circular law) and ||A_perp||_F^2 ~ c, so ||A_perp||_F / sqrt(T) ~ sqrt(c/T)
(:func:`rcteach.theory.bulk_radius`); the exact |lambda_2| (``spectral_gap(A).bulk_radius``) is
the largest bulk modulus and exceeds the disc radius by an edge fluctuation that shrinks with T.
"""

from __future__ import annotations

import math

import torch

from . import _validate, linalg
from .metrics import _max_abs, frobenius_norm, unit_scaled

__all__ = ["METHODS", "spectral_norm", "stable_rank", "frobenius_bulk_radius"]

METHODS = ("lanczos", "power")
_DEFAULT_ITERS = {"lanczos": 64, "power": 1000}


def _start(X, side: int, seed: int) -> torch.Tensor:
    """A random unit start vector (*batch, side, 1), reproducible from ``seed``, on X's device."""
    gen = torch.Generator(device=X.device)
    gen.manual_seed(seed)
    v = torch.randn(*X.shape[:-2], side, 1, generator=gen, device=X.device, dtype=X.dtype)
    return v / torch.linalg.vector_norm(v, dim=-2, keepdim=True)


def _operator(X):
    """(apply, side): v -> G v for the smaller Gram matrix G (X^T X or X X^T), never formed."""
    m, n = X.shape[-2:]
    if n <= m:
        return (lambda v: X.mT @ (X @ v)), n
    return (lambda v: X @ (X.mT @ v)), m


def _power(X, iters, tol, seed):
    apply, side = _operator(X)
    v = _start(X, side, seed)
    est = torch.zeros(X.shape[:-2], device=X.device, dtype=X.dtype)
    for _ in range(iters):
        w = apply(v)  # (*batch, side, 1)
        new = torch.linalg.vector_norm(w, dim=(-2, -1))  # ||G v|| -> s_1^2 from below
        safe = torch.where(new > 0, new, torch.ones_like(new))
        v = w / safe[..., None, None]
        done = (new - est).abs() <= tol * new
        est = new
        if bool(done.all()):
            break
    rq = (v.mT @ apply(v))[..., 0, 0]  # Rayleigh quotient v^T G v at the final unit v: >= ||G v_prev||
    return torch.sqrt(torch.maximum(rq, est).clamp_min(0))


def _lanczos(X, iters, tol, seed):
    apply, side = _operator(X)
    k_max = min(iters, side)
    batch = X.shape[:-2]
    V = torch.zeros(*batch, side, k_max, device=X.device, dtype=X.dtype)
    alphas, betas = [], []
    v = _start(X, side, seed)
    beta_prev = torch.zeros(batch, device=X.device, dtype=X.dtype)
    v_prev = torch.zeros_like(v)
    est = torch.zeros(batch, device=X.device, dtype=X.dtype)
    for k in range(k_max):
        V[..., k:k + 1] = v
        w = apply(v) - beta_prev[..., None, None] * v_prev
        alpha = (v.mT @ w)[..., 0, 0]
        w = w - alpha[..., None, None] * v
        Vk = V[..., : k + 1]
        for _ in range(2):  # full reorthogonalisation, twice is enough
            w = w - Vk @ (Vk.mT @ w)
        beta = torch.linalg.vector_norm(w, dim=(-2, -1))
        alphas.append(alpha)
        tri = torch.diag_embed(torch.stack(alphas, -1))
        if betas:
            off = torch.diag_embed(torch.stack(betas, -1), offset=1)
            tri = tri + off + off.mT
        new = linalg.eigvalsh_unchecked(tri)[..., -1]  # top Ritz value of G, increases with k
        done = ((new - est).abs() <= tol * new.abs()) | (beta <= 1e-14 * new.abs().clamp_min(1e-300))
        est = new
        if bool(done.all()) or k + 1 == k_max:
            break
        # a lost direction (beta ~ 0: an invariant subspace found) restarts with zeros, harmless
        safe = torch.where(beta > 0, beta, torch.ones_like(beta))
        v_prev, v = v, w / safe[..., None, None]
        betas.append(beta)
        beta_prev = beta
    return torch.sqrt(est.clamp_min(0))


def spectral_norm(X, *, method="lanczos", iters=None, tol=None, seed=0) -> torch.Tensor:
    """Largest singular value s_1 = ||X||_2 of X (*batch, m, n), matrix-free (module doc).

    Parameters
    ----------
    X : Tensor, (*batch, m, n)
        Real matrices; each batch element gets its own estimate.
    method : {"lanczos", "power"}
        Krylov method on the smaller Gram matrix X^T X or X X^T (never formed).
    iters : int, optional
        Maximum number of steps (default 64 for Lanczos, capped at min(m, n); 1000 for power).
    tol : float, optional
        Stop when every estimate of s_1^2 changed by less than ``tol`` (relative) in one step;
        default 1e-12 in float64 and 1e-6 in float32 (about 10 ulp).
    seed : int
        Seed of the random start vector (same seed, same result).

    Returns
    -------
    Tensor, shape (*batch,)
        Estimates of s_1, from below; cost O(iters * m * n).
    """
    X = _validate.matrix("X", X)
    method = _validate.choice("method", method, METHODS)
    iters = _DEFAULT_ITERS[method] if iters is None else _validate.integer("iters", iters, minimum=1)
    tol = max(1e-12, 10 * torch.finfo(X.dtype).eps) if tol is None else _validate.real("tol", tol, minimum=0.0)
    seed = _validate.seed(seed)
    with torch.no_grad():
        run = _lanczos if method == "lanczos" else _power
        scale = _max_abs(X)  # run on X / max|X|: no overflow in X^T X for huge X
        return scale[..., 0, 0] * run(X.detach() / scale, iters, tol, seed)


def stable_rank(X, *, gram=False, method="lanczos", iters=None, tol=None, seed=0) -> torch.Tensor:
    """Stable rank of X (*batch, m, n) with s_1 from :func:`spectral_norm` (no SVD).

    ``gram=False`` (Frobenius): ||X||_F^2 / s_1^2 = sum s_i^2 / s_1^2, O(iters m n).
    ``gram=True`` (Gram, Mind the Gap's): ||G||_F^2 / s_1^4 = sum s_i^4 / s_1^4 with G the smaller
    Gram matrix, which is formed (one O(m n min(m, n)) product, no decomposition).
    Returns shape (*batch,); agrees with :func:`rcteach.stable_rank` to the accuracy stated in
    the module doc.  X must not be zero.
    """
    X = _validate.matrix("X", X)
    gram = _validate.flag("gram", gram)
    X = unit_scaled(X)  # scale-free: no overflow of ||X||_F^2 for huge X
    s1 = spectral_norm(X, method=method, iters=iters, tol=tol, seed=seed)
    if not (s1 > 0).all():
        raise ValueError("X must be nonzero: the stable rank of a zero matrix is undefined")
    with torch.no_grad():
        X = X.detach()
        if not gram:
            return torch.linalg.matrix_norm(X).square() / s1.square()
        m, n = X.shape[-2:]
        G = X.mT @ X if n <= m else X @ X.mT
        return torch.linalg.matrix_norm(G).square() / s1.square().square()


def frobenius_bulk_radius(A) -> torch.Tensor:
    """||A_perp||_F / sqrt(T): an O(T^2) estimate of the bulk radius sqrt(c/T) of A (*batch, T, T).

    A_perp = A - (A1)1^T/T (:func:`rcteach.centre`, no mask).  For i.i.d.-logit softmax attention
    ||A_perp||_F^2 ~ c (:func:`rcteach.theory.frobenius_sq`), so this tends to the circular-law
    radius :func:`rcteach.theory.bulk_radius`; the exact |lambda_2| (largest bulk modulus) lies a
    few percent above it at moderate T (tests state the tolerance).  Returns shape (*batch,),
    differentiable in A.
    """
    A = _validate.matrix("A", A, square=True, finite=False)
    r = frobenius_norm(A - A.mean(-1, keepdim=True)) / math.sqrt(A.shape[-1])  # = centre(A), no mask
    if not math.isfinite(r.sum().item()):  # NaN/inf in A reach r: one tiny reduction, not a pass over A
        raise ValueError("A must have finite entries (found NaN or inf)")
    return r
