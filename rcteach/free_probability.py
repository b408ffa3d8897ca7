"""The Fuss-Catalan law: squared singular values of a product of k independent square Ginibre factors.

Introduced in chapter "Depth with the fix: a free-probability law" (book/13_depth_with_the_fix.md).

Let G_1, ..., G_k be independent n x n matrices with i.i.d. centred entries of variance 1/n.  As
n -> infinity the empirical law of the squared singular values of G_1 ... G_k converges to the
Fuss-Catalan law FC_k (Alexeev, Goetze & Tikhomirov 2010; k = 1 is Marchenko-Pastur with ratio 1):

* moments  m_j = binom((k + 1) j, j) / (k j + 1)   (m_1 = 1, m_2 = k + 1);
* support  [0, x_edge] with x_edge = (k + 1)^(k + 1) / k^k;
* density, parametrised by phi in (0, pi / (k + 1)) (Haagerup & Moeller 2012):
  x(phi) = sin((k+1) phi)^(k+1) / (sin(phi) sin(k phi)^k),
  rho(x(phi)) = sin(phi)^2 sin(k phi)^(k-1) / (pi sin((k+1) phi)^k).

Used in the chapter "Depth with the fix" for rebuttal Fig. VII: after L layers of centred attention
with Gaussian values, X_L = A_L ... A_1 X_0 W_1 ... W_L is a product of k = 2L such factors, so its
Gram stable rank sum s_i^4 / s_1^4 = T m_2 / x_edge^2 (scale-free) tends to T k^(2k) / (k+1)^(2k+1).

Also the bulk radius of query-key attention on correlated tokens (:func:`correlated_bulk_radius`), from the
outer radius of an R-diagonal element (Haagerup & Larsen 2000), used in "Non-isometric inputs".
"""

from __future__ import annotations

import math

import torch

from . import _validate

__all__ = ["fuss_catalan_moment", "fuss_catalan_edge", "fuss_catalan_density", "gram_stable_rank_limit",
           "correlated_bulk_radius"]


def _order(k) -> int:
    return _validate.integer("k", k, minimum=1)


@_validate.finite_result
def fuss_catalan_moment(k, j) -> float:
    """The j-th moment binom((k+1) j, j) / (k j + 1) of FC_k (j >= 0; m_0 = m_1 = 1, m_2 = k + 1)."""
    k, j = _order(k), _validate.integer("j", j, minimum=0)
    if math.lgamma((k + 1) * j + 1) - math.lgamma(j + 1) - math.lgamma(k * j + 1) > _validate.LOG_FLOAT_MAX + 1:
        return math.inf  # beyond float64 (finite_result says so), without computing a huge binomial
    return math.comb((k + 1) * j, j) / (k * j + 1)


@_validate.finite_result
def fuss_catalan_edge(k) -> float:
    """The right edge (k + 1)^(k + 1) / k^k = (k + 1)(1 + 1/k)^k of the support of FC_k (4 for Marchenko-Pastur,
    k = 1; about e (k + 1) for large k), computed in floats (no (k + 1)^(k + 1) integer)."""
    k = _order(k)
    return (k + 1) * (1 + 1 / k) ** k


def fuss_catalan_density(k, points=400, *, dtype=torch.float64):
    """The density of FC_k on a grid: returns (x, rho), each of shape (points,), x increasing.

    From the parametrisation in the module doc on ``points`` values of phi strictly inside
    (0, pi / (k + 1)); rho diverges like x^(-k/(k+1)) at 0.
    """
    k, points = _order(k), _validate.integer("points", points, minimum=2)
    dtype = _validate.dtype(dtype)
    phi = torch.linspace(0, math.pi / (k + 1), points + 2, dtype=dtype)[1:-1].flip(0)
    s1, sk, sk1 = torch.sin(phi), torch.sin(k * phi), torch.sin((k + 1) * phi)
    x = sk1 ** (k + 1) / (s1 * sk**k)
    rho = s1**2 * sk ** (k - 1) / (math.pi * sk1**k)
    return x, rho


@_validate.finite_result
def gram_stable_rank_limit(T, k) -> float:
    """T m_2 / x_edge^2 = T k^(2k) / (k + 1)^(2k + 1): the Gram stable rank sum s_i^4 / s_1^4 of a
    T x T product of k independent Ginibre-like factors, to leading order in T (9.88 for T = 150, k = 2).

    The value is about T / (e^2 (k + 1)) for large k; a finite product's is always >= 1 and sits above
    the limit by a margin that grows with k / T (+11 % at k = 4, +20 % at k = 6 for T = 150, chapter
    "Depth with the fix").  Below 2 (T below about 15 (k + 1)) the top singular value is a finite-T
    extreme, not the law's edge: a UserWarning says the formula is outside its regime.
    """
    T, k = _validate.integer("T", T, minimum=2), _order(k)
    value = T * fuss_catalan_moment(k, 2) / fuss_catalan_edge(k) ** 2
    if value < 2:
        _validate.regime(f"gram_stable_rank_limit(T={T}, k={k}) = {value:.3g} < 2: with this many factors for "
                         "T tokens the top singular value is a finite-T extreme, not the edge of the "
                         "Fuss-Catalan law (the leading-order formula needs T >> k)")
    return value


@_validate.finite_result
def correlated_bulk_radius(X, s2) -> torch.Tensor:
    """Predicted bulk radius of A(X) = softmax(X M X^T), M = W_Q W_K^T / sqrt(d_qk) with i.i.d.-like entries of
    variance s2, for given tokens X (*batch, T, d) whose overlaps need not vanish (deeper layers, Gaussian inputs).

    R^2 = s2 ||C||_F^2 + (e^{s_h} - 1 - s_h) / T,   C = X^T P X / T (token covariance, d x d),  s_h = s2 tr(C)^2.

    First term: the linear part of the softmax weights, (1/T) X M X^T centred, has the eigenvalues of M C
    (up to the common column profile, which only moves mass to the outlier 1); M C is R-diagonal, so its
    outer radius is sqrt(tr(M^T M) tr(C^2)) / d = sqrt(s2) ||C||_F.  Second: the higher Hermite terms of
    e^h for logits h of variance s_h, taken as i.i.d.-like (radius^2 = variance / T).  Orthonormal tokens
    (C ~ I/T) give sqrt(c/T); Gaussian unit-norm tokens give ``theory.noniso_bulk_radius``.  Derived;
    assumes uniform column weights (exact at consensus up to O(mu^2)).  Returns shape (*batch,).
    """
    X = _validate.matrix("X", X, min_rows=2)
    s2 = _validate.real("s2", s2, minimum=0.0)
    Xc = X - X.mean(-2, keepdim=True)  # P X
    T = X.shape[-2]
    C = Xc.transpose(-1, -2) @ Xc / T  # (*batch, d, d)
    s_h = s2 * C.diagonal(dim1=-2, dim2=-1).sum(-1).square()
    return (s2 * C.square().sum((-1, -2)) + (torch.expm1(s_h) - s_h) / T).sqrt()
