"""Rank collapse in depth: per-layer factors of mu^2 and of the norm.

Introduced in chapters "Rank collapse in depth" (book/05_depth.md) and "Norms and gradients" (book/06_norms_gradients.md).
"""

from __future__ import annotations

from .. import _validate
from .spectra import c, frobenius_sq_next_order  # noqa: F401 (c: main's newer closed forms here use it)
from .spectra import leading_order_c

__all__ = ["depth_mu_factor", "depth_mu_ratio", "skip_consensus_factor", "norm_growth"]


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
def norm_growth(d, value_var, *, T=None, s2=None, centred=False) -> float:
    """Per-layer growth of ||X||_F^2 with Gaussian values N(0, sigma_V^2) (fresh, d x d).

    E||Y W_V||_F^2 = sigma_V^2 d ||Y||_F^2 for any Y.  With A (near consensus, i.e. after the
    first couple of layers) ||A X||^2 = T||xbar||^2 + O(c/T) mu^2 ~ ||X||^2: growth sigma_V^2 d.
    With A_perp (``centred=True``, needs T and s2) only the centred part survives:
    E||A_perp X||^2 = kappa mu^2(X), kappa = E||A_perp||_F^2/(T-1) ~ c/T: growth sigma_V^2 d c/T.
    So sigma_V^2 = 1/d keeps ||X|| with A and kills it with A_perp; sigma_V^2 = 1 with T = d
    explodes x d per layer with A and keeps O(1) with A_perp when c ~ 1.
    """
    d = _validate.integer("d", d, minimum=1)
    value_var = _validate.real("value_var", value_var, minimum=0.0)
    if not _validate.flag("centred", centred):
        return value_var * d
    if T is None or s2 is None:
        raise ValueError("centred=True needs T and s2")
    return value_var * d * depth_mu_factor(T, s2)
