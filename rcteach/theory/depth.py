"""Rank collapse in depth: per-layer factors of mu^2 and of the norm.

Introduced in chapters "Rank collapse in depth" (book/05_depth.md) and "Norms and gradients"
(book/06_norms_gradients.md).
"""

from __future__ import annotations

import math

from .. import _validate
from .spectra import c, frobenius_sq_next_order  # noqa: F401 (c: main's newer closed forms here use it)
from .spectra import leading_order_c

__all__ = ["depth_mu_factor", "depth_mu_ratio", "skip_consensus_factor", "layer_gap_squared", "residual_moments",
           "norm_growth", "centred_depth_gram_stable_rank", "first_value_gradient_rms"]


@_validate.finite_result
def depth_mu_factor(T, s2, *, next_order=False) -> float:
    """Per-layer factor of mu^2 through a fresh i.i.d.-softmax layer without values: c/T.

    For A independent of X, E[mu^2(A X)] = alpha mu^2(X) exactly, with alpha = E||P A_perp||_F^2
    / (T - 1): P A X = P A P X = P A_perp X (as A1 = 1), and E[P A^T P A P] = alpha P because the
    law of A is invariant under permuting the tokens.  To leading order A_perp = Z P / T with Z
    i.i.d. of variance c, so alpha = c/T.  ``next_order=True`` uses E||A_perp||_F^2 to next order,
    c - c(1+c)(1+2c)/T (:func:`frobenius_sq_next_order`), and alpha ~ E||A_perp||_F^2 / T.
    Gaussian values N(0, sigma_V^2) multiply the factor by sigma_V^2 d; orthogonal values by 1.
    """
    T = _validate.integer("T", T, minimum=2)
    if _validate.flag("next_order", next_order):
        return frobenius_sq_next_order(T, s2, centred=True) / T
    return leading_order_c("depth_mu_factor", T, s2) / T


@_validate.finite_result
def depth_mu_ratio(T, s2, L, *, next_order=False) -> float:
    """mu^2(X_L) / mu^2(X_0) ~ (c/T)^L after L fresh i.i.d. layers without values (expectation).

    The expectation of the ratio is exactly alpha^L (:func:`depth_mu_factor`, applied layer by
    layer, each layer's A independent of its input); wider contexts collapse faster in depth.
    """
    L = _validate.integer("L", L, minimum=0)
    next_order = _validate.flag("next_order", next_order)
    return depth_mu_factor(T, s2, next_order=next_order) ** L


@_validate.finite_result
def skip_consensus_factor(T, s2, skip=1.0) -> float:
    """Per-layer factor of mu^2 / C, C = ||X||_F^2 - mu^2 = T||xbar||^2 the consensus part, for
    the skip layer X' = X + a A X (i.i.d. A, no values): (1 + a^2 c/T) / (1 + a)^2.

    E[mu^2(X')] = (1 + a^2 alpha) mu^2(X) exactly (the cross term has E[A_perp] = 0), while the
    mean token becomes (1 + a) xbar plus a term of relative size O(sqrt(c) mu / (T sqrt(C))).
    With a = 1 the relative distance to consensus only halves per layer instead of shrinking
    by sqrt(c/T): the skip slows collapse; it does not stop it.
    """
    skip = _validate.real("skip", skip)
    if skip == -1.0:
        raise ValueError("skip must not be -1: X + a A X keeps no consensus part at a = -1 (the factor is undefined)")
    return (1.0 + skip**2 * depth_mu_factor(T, s2)) / (1.0 + skip) ** 2


@_validate.finite_result
def layer_gap_squared(T, s2, skip=None) -> float:
    """The squared spectral gap of one i.i.d. softmax layer's linear map M (no values), outlier^2 over the
    mean square of the bulk: A alone, g^2 = 1/alpha; with a skip, M = I + a A, g^2 = (1 + a)^2 / (1 + a^2 alpha).

    M 1 = (1 + a) 1 carries the consensus (the outlier; a = 0 without skip); the bulk is M's action on
    the centred part, with E||P M P||_F^2 / (T - 1) = 1 + a^2 alpha exactly (the cross term E tr(P A_perp P)
    = E tr(A) - 1 = 0), alpha = E||P A_perp||_F^2 / (T - 1) (:func:`depth_mu_factor`, next order).  By the
    exchangeability identity of chapter "Rank collapse in depth", E mu^2(M X) = (1 + a^2 alpha) mu^2(X)
    while the consensus grows by (1 + a)^2: the per-layer factor of mu^2 / (consensus part) is exactly
    1/g^2 to this order.  A token-wise normalisation rescales tokens near consensus by a common factor
    and leaves g unchanged; centring (A_perp) removes the outlier.  So among LayerNorm and skip, only
    the skip slows collapse in depth, and only by shrinking g (g^2 -> 1 as a -> 0).  Derived.
    """
    alpha = depth_mu_factor(T, s2, next_order=True)
    if skip is None:
        return 1.0 / alpha
    skip = _validate.real("skip", skip)
    if skip == -1.0:
        raise ValueError("skip must not be -1: I - A has no consensus outlier")
    return (1.0 + skip) ** 2 / (1.0 + skip**2 * alpha)


def residual_moments(T, s2, depth, *, skip, value_scale=1.0, mu2=None,
                     consensus=1.0) -> tuple[list[float], list[float]]:
    """Expected mu^2 and consensus part C = T ||xbar||^2, layers 0..depth, of the residual stack
    X' = X + a A X W_V with fresh i.i.d. softmax A and fresh Gaussian W_V, value_scale = sigma_V^2 d.

    Exact in expectation (each layer's A, W_V independent of its input; E W_V = 0 kills the cross
    terms; E[P A^T A P] = kappa P and E[P A^T P A P] = alpha P by exchangeability):

        E mu'^2 = (1 + a^2 v alpha) mu^2,     E C' = (1 + a^2 v) C + a^2 v (kappa - alpha) mu^2,

    with v = value_scale, alpha = E||P A_perp||_F^2/(T-1) ~ E||A_perp||_F^2/T and kappa = E||A_perp||_F^2/(T-1)
    (E||A_perp||_F^2 to next order, :func:`frobenius_sq_next_order`).  Orthonormal X0 has mu^2 = T - 1 and
    C = 1 (the defaults).  Noci et al.'s depth-scaled residual a = 1/sqrt(L) with v = 1 gives
    C_L -> e C_0 and mu^2_L -> e^alpha mu^2_0 as L grows: the relative distance to consensus stays of
    order one (no collapse in depth), while the attention layers add only a fraction ~ alpha ~ c/T of
    new token-specific signal (their outputs are collapsed in width).  A fixed a = 1 doubles C every
    layer: mu^2 / C shrinks like ((1 + alpha)/2)^L.  Returns (mu2 per layer, C per layer).  Derived.
    """
    T = _validate.integer("T", T, minimum=2)
    depth = _validate.integer("depth", depth, minimum=0)
    skip = _validate.real("skip", skip)
    v = _validate.real("value_scale", value_scale, minimum=0.0)
    m = float(T - 1) if mu2 is None else _validate.real("mu2", mu2, minimum=0.0)
    C = _validate.real("consensus", consensus, minimum=0.0)
    frob = frobenius_sq_next_order(T, s2, centred=True)
    alpha, kappa = frob / T, frob / (T - 1)
    mus, cons = [m], [C]
    for _ in range(depth):
        m, C = m * (1 + skip**2 * v * alpha), C * (1 + skip**2 * v) + skip**2 * v * (kappa - alpha) * m
        mus.append(m)
        cons.append(C)
    return mus, cons


@_validate.finite_result
def norm_growth(d, value_var, *, T=None, s2=None, centred=False, attention_scale=1.0) -> float:
    """Per-layer growth of ||X||_F^2 with Gaussian values N(0, sigma_V^2) (fresh, d x d).

    E||Y W_V||_F^2 = sigma_V^2 d ||Y||_F^2 for any Y.  With A (near consensus, i.e. after the
    first couple of layers) ||A X||^2 = T||xbar||^2 + O(c/T) mu^2 ~ ||X||^2: growth sigma_V^2 d.
    With A_perp (``centred=True``, needs T and s2) only the centred part survives:
    E||A_perp X||^2 = kappa mu^2(X), kappa = E||A_perp||_F^2/(T-1) ~ c/T: growth sigma_V^2 d c/T.
    So sigma_V^2 = 1/d keeps ||X|| with A and kills it with A_perp; sigma_V^2 = 1 with T = d
    explodes x d per layer with A and keeps O(1) with A_perp when c ~ 1.
    A constant ``attention_scale`` s after the softmax multiplies the growth by s^2: s = sqrt(d) with
    sigma_V^2 = 1/d is the same layer as sigma_V^2 = 1, since (sqrt(d) A) X W = A X (sqrt(d) W) and
    sqrt(d) W has N(0, 1) entries (the "scaling" alternative of Mind the Gap, as we read it).
    """
    d = _validate.integer("d", d, minimum=1)
    value_var = _validate.real("value_var", value_var, minimum=0.0)
    scale2 = _validate.real("attention_scale", attention_scale) ** 2
    if not _validate.flag("centred", centred):
        return scale2 * value_var * d
    if T is None or s2 is None:
        raise ValueError("centred=True needs T and s2")
    return scale2 * value_var * d * depth_mu_factor(T, s2)


@_validate.finite_result
def centred_depth_gram_stable_rank(T, depth) -> float:
    """Gram stable rank (sum s_i^4 / s_1^4) of X_L after ``depth`` = L layers of centred i.i.d.
    attention with fresh Gaussian values, T = d, orthonormal X_0 (rebuttal Fig. VII), to leading order:
    T k^(2k) / (k+1)^(2k+1) with k = 2L (9.88, 5.03, 3.37 at T = 150 for L = 1, 2, 3).

    X_L = A_L^perp ... A_1^perp (X_0 W_1) W_2 ... W_L is a product of 2L independent Ginibre-like
    factors (sqrt(T) A^perp ~ Z P, Z i.i.d. of variance c), whose squared singular values follow the
    Fuss-Catalan law of order 2L (:mod:`rcteach.free_probability`).  Derived; assumes the largest
    singular value sits at the edge of the law (finite-T values are higher for L >= 2).
    """
    from ..free_probability import gram_stable_rank_limit

    depth = _validate.integer("depth", depth, minimum=1)
    return gram_stable_rank_limit(T, 2 * depth)


@_validate.finite_result
def first_value_gradient_rms(T, d, s2, *, value_var=1.0, centred=False, next_order=False) -> float:
    """Root-mean-square of ||dL/dW_V^(1)||_F for two i.i.d. attention layers with values, L = ||X_2||_F^2,
    X_0 with orthonormal rows (d >= T), W_V i.i.d. N(0, value_var) (rebuttal Fig. VIII: value_var = 1, d = T).

    With Y = A_2 A_1 X_0, S = W_2 W_2^T: dL/dW_1 = 2 Y^T Y W_1 S, and averaging over the Gaussian W_1, W_2
    (E W_1 S^2 W_1^T = value_var tr(S^2) I, E tr(S^2) = value_var^2 d^2 (2d + 1)) gives exactly
    E||dL/dW_1||^2 = 4 value_var^3 d^2 (2d + 1) E sum_i s_i(Y)^4.  To leading order the last factor is
    1 for A (Y ~ 1 xbar^T, rank one of squared norm 1) and 3 T (c/T)^4 for A_perp (Y ~ (c/T) G_2 G_1 with
    Ginibre G's of variance 1/T, sum s^4 ~ T m_2(FC_2)).  So at value_var = 1, d = T the gradient grows like
    T^(3/2) with A and stays ~2 sqrt(6) c^2 with A_perp.  Derived, leading order: for A_perp the O(1/T)
    corrections (E||A_perp||_F^2 = c(1 - (1+c)(1+2c)/T), and the heavy-tailed entries' fourth moments) leave
    the rms 6-17% low at T = 64-32 (c = 1).

    ``next_order=True`` (A only): Y Y^T = U + M exactly with U = 11^T/T (A_2 1 = 1) and M = A_2 A_1^perp
    A_1^perp^T A_2^T, so sum s^4(Y) = 1 + 2 1^T M 1 / T + tr M^2, where 1^T M 1 = ||P A_1^T (A_2^T 1)||^2 ~ c and
    tr M^2 = O(T^-2): sum s^4 = 1 + 2c/T + O(T^-2) (measured (sum s^4 - 1) T = 1.80, 1.89, 1.92, 1.96 at T = 32..256,
    c = 1).  Derived.
    """
    T = _validate.integer("T", T, minimum=2)
    d = _validate.integer("d", d, minimum=T)
    value_var = _validate.real("value_var", value_var, positive=True)
    cc = c(s2)  # checks s2 with or without centring
    centred, next_order = _validate.flag("centred", centred), _validate.flag("next_order", next_order)
    if centred and next_order:
        raise ValueError("next_order: the next-order term is derived for A only (centred=False)")
    s4 = 3.0 * T * (cc / T) ** 4 if centred else 1.0 + (2.0 * cc / T if next_order else 0.0)
    return math.sqrt(4.0 * value_var**3 * d**2 * (2 * d + 1) * s4)
