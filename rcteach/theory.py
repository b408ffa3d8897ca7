"""Closed-form predictions, one function per formula.

Every prediction the book plots, the theory checks test and the widgets draw comes from here.
Notation (see the book's introduction): T tokens, d width, gamma = T/d, logits i.i.d. N(m, s2),
c = e^{s2} - 1 the squared coefficient of variation of e^g.  "Leading order" means the first
term of the expansion in 1/T at fixed s2; finite-T corrections are O(sqrt(c/T)) relative.
"""

from __future__ import annotations

import math

from . import _validate

__all__ = [
    "c",
    "entry_sd",
    "frobenius_sq",
    "top_singular_value",
    "bulk_radius",
    "width_stable_rank",
    "centred_width_slope",
    "logit_variance",
]


def c(s2) -> float:
    """c = e^{s2} - 1 = Var(e^g) / (E e^g)^2 for g ~ N(m, s2)."""
    return math.expm1(_validate.real("s2", s2, minimum=0.0))


def entry_sd(T, s2) -> float:
    """Standard deviation of an entry of softmax attention: sd(A_ij) ~ sqrt(c) / T."""
    T = _validate.integer("T", T, minimum=2)
    return math.sqrt(c(s2)) / T


def frobenius_sq(s2, *, centred=False) -> float:
    """||A||_F^2 ~ 1 + c; for centred attention ||A_perp||_F^2 ~ c (leading order, any T)."""
    return c(s2) + (0.0 if centred else 1.0)


def top_singular_value(T, s2) -> float:
    """Largest singular value of softmax attention: sigma_1(A) ~ 1 + c / (2T)."""
    T = _validate.integer("T", T, minimum=2)
    return 1.0 + c(s2) / (2 * T)


def bulk_radius(T, s2) -> float:
    """Radius of the disc filled by the non-outlier eigenvalues of A (and of A_perp): sqrt(c/T)."""
    T = _validate.integer("T", T, minimum=2)
    return math.sqrt(c(s2) / T)


def width_stable_rank(s2) -> float:
    """Limit of the (Frobenius) stable rank of A X0 W_V as T grows: 1 + c.

    A X0 W = 1 (1^T X0 W / T) + A_perp X0 W: a rank-one spike of squared norm ~ sigma^2 d over
    a remainder of squared Frobenius norm ~ sigma^2 d c spread over ~T directions.
    """
    return 1.0 + c(s2)


def centred_width_slope(gamma) -> float:
    """Slope of sr(A_perp X0 W_V) in T: sr / T -> max_{z>0} z / ((1+z)^2 (1+gamma z)).

    Frobenius stable rank.  The squared singular values of A_perp X0 W follow the free
    multiplicative convolution of two Marchenko-Pastur laws (ratios 1 and gamma = T/d), with
    S-transform 1/((1+z)(1+gamma z)); sr/T is the mean over the upper edge of that law.  The
    maximiser solves 1 - z - 2 gamma z^2 = 0: z* = (sqrt(1 + 8 gamma) - 1) / (4 gamma), z* = 1
    at gamma = 0 (where the slope is 1/4, the Marchenko-Pastur edge 4).
    """
    gamma = _validate.real("gamma", gamma, minimum=0.0)
    z = 1.0 if gamma == 0 else (math.sqrt(1 + 8 * gamma) - 1) / (4 * gamma)
    return z / ((1 + z) ** 2 * (1 + gamma * z))


def logit_variance(sigma_q, sigma_k, token_norm_sq, *, beta=1.0) -> float:
    """Variance of query-key logits beta q.k / sqrt(d_qk) at initialisation.

    For orthogonal tokens of squared norm r^2 and W_Q, W_K with i.i.d. N(0, sigma_q^2),
    N(0, sigma_k^2) entries: s2 = beta^2 sigma_q^2 sigma_k^2 r^4, whatever d_qk is.
    """
    sigma_q = _validate.real("sigma_q", sigma_q, minimum=0.0)
    sigma_k = _validate.real("sigma_k", sigma_k, minimum=0.0)
    r2 = _validate.real("token_norm_sq", token_norm_sq, minimum=0.0)
    beta = _validate.real("beta", beta)
    return beta**2 * sigma_q**2 * sigma_k**2 * r2**2
