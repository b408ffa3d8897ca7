"""Spectra of softmax attention with i.i.d. logits: entries, norms, the outlier and the bulk.

Introduced in chapters "Softmax attention at initialisation: the leading 1/T term" (book/01_leading_term.md), "The
spectral gap" (book/02_spectral_gap.md), "Centred attention" (book/03_centred_attention.md) and "Real transformers at
initialisation" (book/12_real_transformers.md).
"""

from __future__ import annotations

import math

from .. import _validate

__all__ = ["LN2", "c", "entry_sd", "frobenius_sq", "top_singular_value", "top_singular_value_next_order", "bulk_radius",
           "frobenius_sq_next_order", "leading_term_residual", "eigenvalue_median_modulus", "QUARTER_CIRCLE_MEDIAN",
           "singular_value_edge", "singular_value_median", "logit_variance", "model_bulk_logit_variance",
           "differential_outlier", "differential_bulk_radius", "noniso_bulk_radius"]


LN2 = math.log(2.0)  # the logit variance of the Mind-the-Gap code: e^g then has variance 1 (c = 1)


@_validate.finite_result
def c(s2) -> float:
    """c = e^{s2} - 1 = Var(e^g) / (E e^g)^2 for g ~ N(m, s2)."""
    return math.expm1(_validate.log_variance("s2", s2))


def leading_order_c(name, T, s2) -> float:
    """c(s2) for a leading-order formula in 1/T, with a UserWarning when c > T (outside its regime:
    then the bulk radius sqrt(c/T) passes the outlier 1 and the terms dropped are not small)."""
    cc = c(s2)
    if cc > T:
        _validate.regime(f"{name}: c = e^s2 - 1 = {cc:.3g} exceeds T = {T}; the expansion in 1/T behind this "
                         "formula needs c << T", stacklevel=5)
    return cc


@_validate.finite_result
def entry_sd(T, s2) -> float:
    """Standard deviation of an entry of softmax attention: sd(A_ij) ~ sqrt(c) / T."""
    T = _validate.integer("T", T, minimum=2)
    return math.sqrt(leading_order_c("entry_sd", T, s2)) / T


@_validate.finite_result
def frobenius_sq(s2, *, centred=False) -> float:
    """||A||_F^2 ~ 1 + c; for centred attention ||A_perp||_F^2 ~ c (leading order, any T)."""
    return c(s2) + (0.0 if _validate.flag("centred", centred) else 1.0)


@_validate.finite_result
def top_singular_value(T, s2) -> float:
    """Largest singular value of softmax attention: sigma_1(A) ~ 1 + c / (2T)."""
    T = _validate.integer("T", T, minimum=2)
    return 1.0 + leading_order_c("top_singular_value", T, s2) / (2 * T)


@_validate.finite_result
def bulk_radius(T, s2) -> float:
    """Radius of the disc filled by the non-outlier eigenvalues of A (and of A_perp): sqrt(c/T)."""
    T = _validate.integer("T", T, minimum=2)
    return math.sqrt(leading_order_c("bulk_radius", T, s2) / T)


@_validate.finite_result
def frobenius_sq_next_order(T, s2, *, centred=False) -> float:
    """||A||_F^2 to next order in 1/T: (1 + c)(1 - c(1 + 2c)/T); centred: that minus 1.

    Delta method on one row, w_j = e^{g_j} / E e^g with E w^k = (1 + c)^{k(k-1)/2}: T * E[sum w^2 /
    (sum w)^2] = (1 + c)(1 - c(1 + 2c)/T) + O(1/T^2).  Derived; accurate while c(1 + 2c)/T << 1
    (heavy tails make the O(1/T^2) term large at s2 >~ 1.5 and T in the hundreds).  The exact
    identity ||A||_F^2 = 1 + ||A_perp||_F^2 gives the centred value.
    """
    T = _validate.integer("T", T, minimum=2)
    cc = c(s2)
    correction = cc * (1.0 + 2.0 * cc) / T
    if correction >= 1.0:
        _validate.regime(f"frobenius_sq_next_order: the relative correction c(1 + 2c)/T = {correction:.3g} is not "
                         "small (the result is <= 0): the expansion needs c(1 + 2c) << T", stacklevel=4)
    full = (1.0 + cc) * (1.0 - correction)
    return full - 1.0 if _validate.flag("centred", centred) else full


@_validate.finite_result
def leading_term_residual(T, s2, *, next_order=False) -> float:
    """Relative size of what the 1/T expansion leaves out: ||A - U - ZP/T||_F / ||ZP/T||_F ~ sqrt(c/T).

    With delta_i = mean_k Z_ik, exactly A_ij - L_ij = delta_i (delta_i - Z_ij) / (T (1 + delta_i)), L = U + ZP/T,
    so the squared ratio (pooled over rows) is sum_i delta_i^2 Q_i / (1 + delta_i)^2 / sum_i Q_i with
    Q_i = sum_j (Z_ij - delta_i)^2.  To leading order E delta^2 = c/T: the ratio is sqrt(c/T).  ``next_order=True``
    expands 1/(1 + delta)^2 and keeps the moments of Z (mu_3 = E Z^3 = c^3 + 3c^2, mu_4 = E Z^4 =
    (1+c)^6 - 4(1+c)^3 + 6(1+c) - 3 for log-normal weights): E[delta^2 Q] = c^2 + (mu_4 - 4c^2)/T,
    E[delta^3 Q] = 4 mu_3 c/T, E[delta^4 Q] = 3c^3/T, E Q = (T - 1)c, so the squared ratio is
    (c/T)(1 + (1 + K/c^2)/T), K = mu_4 - 4c^2 - 8 mu_3 c + 9c^3 (15/T at c = 1; ~1/T at s2 = 0.25).  Derived;
    the O(1/T^2) remainder is large for heavy tails: measured -0.2% and -0.8% of the ratio at T = 512 and 256,
    s2 = ln 2 (the next order +1.5% and +2.9%), within 0.4% at s2 = 0.25.  See :func:`rcteach.logits.leading_term`.
    """
    leading = bulk_radius(T, s2)
    if not _validate.flag("next_order", next_order):
        return leading
    cc = c(s2)
    mu3 = cc**3 + 3.0 * cc**2
    mu4 = (1.0 + cc) ** 6 - 4.0 * (1.0 + cc) ** 3 + 6.0 * (1.0 + cc) - 3.0
    K = mu4 - 4.0 * cc**2 - 8.0 * mu3 * cc + 9.0 * cc**3
    return leading * math.sqrt(1.0 + (1.0 + K / cc**2) / T) if cc > 0 else leading  # 1 + K/c^2 -> c as c -> 0


@_validate.finite_result
def eigenvalue_median_modulus(T, s2) -> float:
    """Median modulus of the bulk eigenvalues of A: sqrt(c/(2T)).

    The bulk fills the disc of radius R = sqrt(c/T) uniformly, so P(|lambda| <= rho) = rho^2/R^2
    and the median modulus is R / sqrt(2).
    """
    return bulk_radius(T, s2) / math.sqrt(2.0)


def _quarter_circle_cdf(x: float) -> float:
    """CDF of the quarter-circle law, density sqrt(4 - x^2)/pi on [0, 2]."""
    return (x * math.sqrt(4.0 - x * x) / 2.0 + 2.0 * math.asin(x / 2.0)) / math.pi


def _quarter_circle_median() -> float:
    lo, hi = 0.0, 2.0
    for _ in range(80):  # bisection to float64 resolution
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _quarter_circle_cdf(mid) < 0.5 else (lo, mid)
    return (lo + hi) / 2


QUARTER_CIRCLE_MEDIAN = _quarter_circle_median()  # ~0.80795: median of the quarter-circle law on [0, 2]


@_validate.finite_result
def singular_value_edge(T, s2) -> float:
    """Upper edge of the singular values of A_perp: 2 sqrt(c/T).

    sqrt(T) A_perp behaves like a centred i.i.d. matrix of entry variance c, whose singular values
    follow the quarter-circle law on [0, 2 sqrt(c)].  Caveat: e^g is heavy-tailed, and at s2 >= 1
    the largest singular value sits well above this edge at any practical T; test medians instead.
    """
    return 2.0 * bulk_radius(T, s2)


@_validate.finite_result
def singular_value_median(T, s2) -> float:
    """Median singular value of A_perp (its exact zero excluded): QUARTER_CIRCLE_MEDIAN * sqrt(c/T)."""
    return QUARTER_CIRCLE_MEDIAN * bulk_radius(T, s2)


@_validate.finite_result
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


@_validate.finite_result
def model_bulk_logit_variance(d, T, *, std=0.02, shared_fraction=1.0 / 3.0) -> float:
    """Effective s2 of the attention bulk in layer 1 of a LayerNorm-ed model at initialisation.

    Tokens after LayerNorm have r^2 = d; a fraction rho = ``shared_fraction`` of their squared
    norm is common to all tokens (BERT/RoBERTa add the same token-type embedding to every token:
    rho = 1/3 for three embeddings of equal std; GPT-2 with distinct tokens: rho = 0), the rest u_i
    is Gaussian, so that u u^T has second moment (1 + gamma) times that of orthonormal rows,
    gamma = T/d.  The common part only adds rank-one terms that leave the bulk unchanged, so the
    bulk sees  s2 = std^4 d^2 (1 - rho)^2 (1 + gamma)  (chapter "Real transformers at
    initialisation"; a derived leading-order estimate).  Use with :func:`bulk_radius`.
    """
    d = _validate.integer("d", d, minimum=1)
    T = _validate.integer("T", T, minimum=2)
    std = _validate.real("std", std, positive=True)
    rho = _validate.real("shared_fraction", shared_fraction, minimum=0.0)
    if rho > 1:
        raise ValueError(f"shared_fraction must lie in [0, 1], got {rho}")
    return logit_variance(std, std, d) * (1 - rho) ** 2 * (1 + T / d)


@_validate.finite_result
def differential_outlier(lam) -> float:
    """Outlier of differential attention D = A1 - lam A2 (A1, A2 row-stochastic): 1 - lam, exactly.

    D 1 = (1 - lam) 1, so 1 - lam is an eigenvalue with eigenvector 1.
    """
    return 1.0 - _validate.real("lam", lam)


@_validate.finite_result
def differential_bulk_radius(T, s2, lam) -> float:
    """Bulk radius of D = A1 - lam A2 for independent i.i.d.-logit softmax maps: sqrt((1 + lam^2) c / T).

    In the basis (1, ...) D = [[1 - lam, b^T], [0, B1 - lam B2]]; to leading order the entries of
    B1 - lam B2 are independent with variance (1 + lam^2) c / T^2, so by the circular law its
    eigenvalues fill the disc of radius sqrt((1 + lam^2) c / T).  Derived.
    """
    lam = _validate.real("lam", lam)
    return math.sqrt(1.0 + lam**2) * bulk_radius(T, s2)


def top_singular_value_next_order(T, s2) -> float:
    """sigma_1(A) of softmax attention to next order: sqrt(1 + (c/T)(1 - ((1 + c)(1 + 2c) - c)/T)).

    With u = 1/sqrt(T), A u = u exactly (rows sum to 1).  In the basis (u, u_perp), A^T A = [[1, b^T], [b, C]]
    with b = P A^T u (the centred column sums over sqrt(T)) and C = P A^T A P, so its top eigenvalue
    1 + eps solves eps = b^T (1 + eps - C)^{-1} b = ||b||^2 - ||b||^4 + b^T C b + ... .  Columns add T
    independent entries: E||b||^2 = T Var(A_ij) = E||A_perp||_F^2 / T = (c/T)(1 - (1 + c)(1 + 2c)/T)
    (exactly the first equality; the next-order entry variance of :func:`frobenius_sq_next_order` the second);
    b^T C b = ||A_perp b||^2 ~ 2 (c/T)^2 (the second moment of a Wishart matrix, A_perp ~ Z P / T) and
    ||b||^4 ~ (c/T)^2, so eps = (c/T)(1 - (1 + c)(1 + 2c)/T + c/T) + O(T^-3).  The leading term gives
    :func:`top_singular_value`.  Derived; measured (float64, control-variate mean of eps over 2048 matrices,
    s2 = ln 2): 1.47%, 0.41%, 0.06% above the prediction at T = 64, 128, 256 (an O(1/T^2) remainder).
    """
    T = _validate.integer("T", T, minimum=2)
    cc = c(s2)
    return math.sqrt(1.0 + cc / T * (1.0 - ((1.0 + cc) * (1.0 + 2.0 * cc) - cc) / T))


@_validate.finite_result
def noniso_bulk_radius(T, d, s2) -> float:
    """Bulk radius of query-key attention A(X) on Gaussian tokens with unit-norm rows (not orthonormal),
    logit variance s2, gamma = d / T (rebuttal Fig. IX): sqrt((c + s2 / gamma) / T).

    Split the normalised weights e^g / E e^g - 1 into the linear (first Hermite) part g, of variance s2,
    and a remainder of variance c - s2, uncorrelated with it.  The linear part (1/T) X M X^T, with
    M = W_Q W_K^T / sqrt(d_qk) of i.i.d.-like entries of variance s2, has the nonzero eigenvalues of
    (1/T) M S, S = X^T X; as an R-diagonal element of the d x d matrices its outer radius is
    sqrt(tr(M^T M) tr(S^2)) / (d T) (Haagerup & Larsen), and tr S^2 = ||X X^T||_F^2 = T + T(T - 1)/d gives
    s2 (1 + T/d) / T: the spread of the token Gram matrix enlarges it.  Assumed: the two parts add in the
    squared radius.  Orthonormal tokens (S a projector) give back sqrt(c/T).  Derived.
    """
    T = _validate.integer("T", T, minimum=2)
    d = _validate.integer("d", d, minimum=1)
    return math.sqrt((c(s2) + s2 * T / d) / T)
