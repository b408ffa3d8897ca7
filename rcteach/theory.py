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
    "MAP_ACTIVATIONS",
    "activation_moments",
    "outlier",
    "map_bulk_radius",
    "gap_ratio",
    "relative_gap",
    "consensus_rate",
    "causal_consensus_rate",
    "sliding_consensus_rate",
    "window_hops",
    "dropout_front",
    "dropout_front_mu",
    "entry_sd",
    "frobenius_sq",
    "top_singular_value",
    "bulk_radius",
    "width_stable_rank",
    "centred_width_slope",
    "centred_width_slope_gram",
    "width_stable_rank_bias",
    "width_stable_rank_gram",
    "differential_outlier",
    "differential_bulk_radius",
    "logit_variance",
    "frobenius_sq_next_order",
    "leading_term_residual",
    "eigenvalue_median_modulus",
    "QUARTER_CIRCLE_MEDIAN",
    "singular_value_edge",
    "singular_value_median",
    "depth_mu_factor",
    "depth_mu_ratio",
    "skip_consensus_factor",
    "norm_growth",
    "model_bulk_logit_variance",
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


# -- leading 1/T term and spectral gap (chapters "The leading 1/T term", "The spectral gap") -------

def frobenius_sq_next_order(T, s2, *, centred=False) -> float:
    """||A||_F^2 to next order in 1/T: (1 + c)(1 - c(1 + 2c)/T); centred: that minus 1.

    Delta method on one row, w_j = e^{g_j} / E e^g with E w^k = (1 + c)^{k(k-1)/2}: T * E[sum w^2 /
    (sum w)^2] = (1 + c)(1 - c(1 + 2c)/T) + O(1/T^2).  Derived; accurate while c(1 + 2c)/T << 1
    (heavy tails make the O(1/T^2) term large at s2 >~ 1.5 and T in the hundreds).  The exact
    identity ||A||_F^2 = 1 + ||A_perp||_F^2 gives the centred value.
    """
    T = _validate.integer("T", T, minimum=2)
    cc = c(s2)
    full = (1.0 + cc) * (1.0 - cc * (1.0 + 2.0 * cc) / T)
    return full - 1.0 if centred else full


def leading_term_residual(T, s2) -> float:
    """Relative size of what the 1/T expansion leaves out: ||A - U - ZP/T||_F / ||ZP/T||_F ~ sqrt(c/T).

    With delta_i = mean_k Z_ik, A_ij = (1 + Z_ij) / (T (1 + delta_i)) = [1 + Z_ij - delta_i
    + delta_i (delta_i - Z_ij) + ...] / T: the remainder has squared Frobenius norm ~ T^2 (c/T) c / T^2
    = c^2/T, the first-order term ~ c.  Derived; see :func:`rcteach.logits.leading_term`.
    """
    return bulk_radius(T, s2)


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


def singular_value_edge(T, s2) -> float:
    """Upper edge of the singular values of A_perp: 2 sqrt(c/T).

    sqrt(T) A_perp behaves like a centred i.i.d. matrix of entry variance c, whose singular values
    follow the quarter-circle law on [0, 2 sqrt(c)].  Caveat: e^g is heavy-tailed, and at s2 >= 1
    the largest singular value sits well above this edge at any practical T; test medians instead.
    """
    return 2.0 * bulk_radius(T, s2)


def singular_value_median(T, s2) -> float:
    """Median singular value of A_perp (its exact zero excluded): QUARTER_CIRCLE_MEDIAN * sqrt(c/T)."""
    return QUARTER_CIRCLE_MEDIAN * bulk_radius(T, s2)


# -- masks: uniform attention as linear consensus (chapter "Collapse under masks") ---------------

def consensus_rate(mask) -> float:
    """|lambda_2|: the second-largest eigenvalue modulus of the row-normalised mask.

    With uniform attention over the mask (logits 0, beta = 0), A = D^{-1} M with M the boolean
    (T, T) mask and D = diag(M 1); the tokens follow the linear consensus dynamics X_t = A^t X_0
    and mu(X_t) = ||P A^t X_0||_F decays asymptotically as |lambda_2|^t (A1 = 1 carries the
    eigenvalue 1).  Returns 1.0 when A has a second eigenvalue of modulus 1 (no consensus: the
    mask is not quasi-strongly connected, or a periodic graph without self-loops).

    Computed exactly block by block: A is block triangular over the strongly connected components
    of the mask's graph (:func:`rcteach.mask_graph`), so spec(A) is the union of the spectra of its
    diagonal blocks.  A single-token component (causal masks) contributes its diagonal entry
    1/n_i exactly; a block with a symmetric mask is similar to the symmetric
    D^{-1/2} M D^{-1/2} and uses a symmetric eigensolver.  This avoids the large round-off of
    eigensolvers on the defective matrices of sliding-causal masks.

    Parameters
    ----------
    mask : bool Tensor, (T, T)

    Returns
    -------
    float in [0, 1]
    """
    import networkx as nx
    import torch

    from .masks import check_mask, mask_graph

    mask = check_mask(mask).cpu()
    if mask.dim() != 2:
        raise ValueError(f"mask must be a single (T, T) mask, got shape {tuple(mask.shape)}")
    M = mask.to(torch.float64)
    deg = M.sum(-1)  # (T,) allowed positions per row
    moduli = []
    for component in nx.strongly_connected_components(mask_graph(mask)):
        idx = torch.tensor(sorted(component))
        block = M[idx][:, idx]  # (k, k)
        if idx.numel() == 1:
            moduli.append(block.reshape(()) / deg[idx[0]])
        elif torch.equal(block, block.T):
            scale = deg[idx].rsqrt()
            moduli.append(torch.linalg.eigvalsh(scale[:, None] * block * scale[None, :]).abs())
        else:
            moduli.append(torch.linalg.eigvals(block / deg[idx][:, None]).abs())
    moduli = torch.cat([m.reshape(-1) for m in moduli]).sort(descending=True).values
    return float(moduli[1].clamp(0.0, 1.0))


def causal_consensus_rate(window=None) -> float:
    """|lambda_2| = 1/2 for uniform attention on a causal or sliding-causal mask (any T >= 2).

    The row-normalised mask is lower triangular with diagonal 1/n_i, n_i = min(i, w) + 1 the
    number of tokens row i attends to, so its eigenvalues are 1, 1/2, 1/3, ..., 1/(w + 1)
    (1/(w + 1) repeated).  The second largest is 1/2, from token 1 averaging tokens 0 and 1.
    ``window=None`` is the causal mask; ``window=0`` (each token attends only to itself) gives 1:
    no mixing at all.  For sliding-causal masks the eigenvalue 1/(w + 1) is defective (a Jordan
    block of size ~T - w), so the asymptotic rate 1/2 appears only after a delay that grows with
    (T - 1)/w.
    """
    if window is None:
        return 0.5
    window = _validate.integer("window", window, minimum=0)
    return 1.0 if window == 0 else 0.5


def sliding_consensus_rate(T, window) -> float:
    """|lambda_2| of uniform attention on a bidirectional sliding window, leading order in w/T.

    lambda_2 ~ 1 - pi^2 w (w + 1) / (6 T^2)   for 1 <= w << T.

    Derivation: an interior row averages its 2w + 1 neighbours, so on a slowly varying mode
    cos(theta (i + 1/2)) it acts as the Dirichlet kernel
    D_w(theta) = (1/(2w+1)) sum_{k=-w}^{w} cos(k theta) = 1 - theta^2 w (w + 1) / 6 + O(theta^4 w^4);
    the reflecting ends select theta = pi / T.  The rows within w of the ends have fewer
    neighbours, which changes the gap 1 - lambda_2 by a relative O(w / T).  Equivalently the walk
    has step variance w (w + 1) / 3 and the gap is that of diffusion on [0, T]:
    (step variance / 2) (pi / T)^2.  In units of the mask's diameter r = ceil((T - 1)/w) the gap
    is ~ pi^2 (w + 1) / (6 w r^2): it shrinks like 1 / r^2.
    """
    T = _validate.integer("T", T, minimum=2)
    window = _validate.integer("window", window, minimum=1)
    return 1.0 - math.pi**2 * window * (window + 1) / (6.0 * T**2)


def window_hops(T, window) -> int:
    """ceil((T - 1) / w): the diameter of the sliding mask and the centre eccentricity of the
    sliding-causal mask of window w on T tokens (each hop moves at most w positions)."""
    T = _validate.integer("T", T, minimum=2)
    window = _validate.integer("window", window, minimum=1)
    return math.ceil((T - 1) / window)


def dropout_front(T, depth, p) -> list[list[float]]:
    """Distribution of the zero front k_t of causal attention with dropout p and normalisation.

    Setting (chapter "LayerNorm"): causal mask, attention dropout p (entries zeroed with probability
    p, fresh per layer), token-wise normalisation that keeps a zero token at zero.  Token 1 attends
    only to itself, so it becomes zero when its one entry is dropped, and stays zero.  Once tokens
    1..k are zero, token k + m (m >= 1) is zero after a layer iff its m entries on the non-zero
    tokens k + 1..k + m are all dropped (probability p^m; the zero tokens contribute nothing), and
    the rows are independent, so the front advances by at least m with probability
    P(J >= m) = p^(1 + 2 + ... + m) = p^(m (m + 1) / 2),  m <= T - k.
    Returns P(k_t = k) for t = 0..depth (rows) and k = 0..T (columns), k_0 = 0.  To first order k_t
    is Binomial(t, p).
    """
    T = _validate.integer("T", T, minimum=2)
    depth = _validate.integer("depth", depth, minimum=0)
    p = _validate.real("p", p, minimum=0.0, below=1.0)
    at_least = [1.0] + [p ** (m * (m + 1) // 2) for m in range(1, T + 1)]  # P(J >= m)
    dist = [1.0] + [0.0] * T
    out = [dist]
    for _ in range(depth):
        new = [0.0] * (T + 1)
        for k, prob in enumerate(dist):
            if prob == 0.0:
                continue
            for m in range(T - k + 1):  # P(J = m), the last value takes the rest
                jump = at_least[m] - (at_least[m + 1] if m < T - k else 0.0)
                new[k + m] += prob * jump
        dist = new
        out.append(dist)
    return out


def dropout_front_mu(T, depth, p, *, token_norm_sq=1.0) -> tuple[list[float], list[float]]:
    """Mean and standard deviation of mu(X_t), t = 0..depth, for the zero front of :func:`dropout_front`.

    Once the non-zero tokens have reached consensus (near-uniform causal attention contracts their
    spread by about 1/2 per layer, see :func:`causal_consensus_rate`), X_t has k zero rows and T - k
    equal rows of squared norm r^2 (``token_norm_sq``: d for LayerNorm, 1 for RMS normalisation), so
    mu^2 = r^2 k (T - k) / T.  Averaged over k_t; valid after the consensus transient (at t = 0 it
    gives 0, not mu(X_0)).  Neglected: a token behind the front zeroed for a single layer
    (probability O(p^2) per layer).
    """
    r2 = _validate.real("token_norm_sq", token_norm_sq, positive=True)
    dists = dropout_front(T, depth, p)
    mu = [math.sqrt(r2 * k * (T - k) / T) for k in range(T + 1)]  # mu given k zero tokens
    means, stds = [], []
    for dist in dists:
        mean = sum(q * m for q, m in zip(dist, mu))
        var = sum(q * m * m for q, m in zip(dist, mu)) - mean**2
        means.append(mean)
        stds.append(math.sqrt(max(var, 0.0)))
    return means, stds


# -- depth, norms (chapters "Rank collapse in depth", "Norms and gradients") ----------------------

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
    if next_order:
        return frobenius_sq_next_order(T, s2, centred=True) / T
    return c(s2) / T


def depth_mu_ratio(T, s2, L, *, next_order=False) -> float:
    """mu^2(X_L) / mu^2(X_0) ~ (c/T)^L after L fresh i.i.d. layers without values (expectation).

    The expectation of the ratio is exactly alpha^L (:func:`depth_mu_factor`, applied layer by
    layer, each layer's A independent of its input); wider contexts collapse faster in depth.
    """
    L = _validate.integer("L", L, minimum=0)
    return depth_mu_factor(T, s2, next_order=next_order) ** L


def skip_consensus_factor(T, s2, skip=1.0) -> float:
    """Per-layer factor of mu^2 / C, C = ||X||_F^2 - mu^2 = T||xbar||^2 the consensus part, for
    the skip layer X' = X + a A X (i.i.d. A, no values): (1 + a^2 c/T) / (1 + a)^2.

    E[mu^2(X')] = (1 + a^2 alpha) mu^2(X) exactly (the cross term has E[A_perp] = 0), while the
    mean token becomes (1 + a) xbar plus a term of relative size O(sqrt(c) mu / (T sqrt(C))).
    With a = 1 the relative distance to consensus only halves per layer instead of shrinking
    by sqrt(c/T): the skip slows collapse; it does not stop it.
    """
    skip = _validate.real("skip", skip)
    return (1.0 + skip**2 * depth_mu_factor(T, s2)) / (1.0 + skip) ** 2


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
    if not centred:
        return value_var * d
    if T is None or s2 is None:
        raise ValueError("centred=True needs T and s2")
    return value_var * d * depth_mu_factor(T, s2)


# -- centred attention and rank collapse in width (chapters "Centred attention", "Rank collapse in width")

def differential_outlier(lam) -> float:
    """Outlier of differential attention D = A1 - lam A2 (A1, A2 row-stochastic): 1 - lam, exactly.

    D 1 = (1 - lam) 1, so 1 - lam is an eigenvalue with eigenvector 1.
    """
    return 1.0 - _validate.real("lam", lam)


def differential_bulk_radius(T, s2, lam) -> float:
    """Bulk radius of D = A1 - lam A2 for independent i.i.d.-logit softmax maps: sqrt((1 + lam^2) c / T).

    In the basis (1, ...) D = [[1 - lam, b^T], [0, B1 - lam B2]]; to leading order the entries of
    B1 - lam B2 are independent with variance (1 + lam^2) c / T^2, so by the circular law its
    eigenvalues fill the disc of radius sqrt((1 + lam^2) c / T).  Derived.
    """
    lam = _validate.real("lam", lam)
    return math.sqrt(1.0 + lam**2) * bulk_radius(T, s2)


def centred_width_slope_gram(gamma) -> float:
    """Slope in T of the Gram stable rank sr((A_perp X0 W)(A_perp X0 W)^T) = sum s_i^4 / s_1^4.

    sr_gram / T -> m2 / edge^2 = (2 + gamma) * centred_width_slope(gamma)^2: the free product of
    two Marchenko-Pastur laws of mean 1 (ratios 1 and gamma) has second moment
    m2 = 2 + (1 + gamma) - 1 = 2 + gamma, and 1/edge is the Frobenius slope.  Derived.
    """
    gamma = _validate.real("gamma", gamma, minimum=0.0)
    return (2.0 + gamma) * centred_width_slope(gamma) ** 2


def width_stable_rank_bias(T, gamma, s2) -> float:
    """Leading finite-T correction to sr(A X0 W) (Frobenius): -c (2 (1 + c)^2 + gamma (c - 1)) / T.

    E sr(A X0 W) ~ 1 + c + width_stable_rank_bias(T, gamma, s2).  Three 1/T effects, derived by
    the delta method (heuristic; heavy tails of e^g make the O(1/T^2) terms sizeable for c >~ 1):
    ||A_perp||_F^2 ~ c - c(1 + c)(1 + 2c)/T (:func:`frobenius_sq_next_order`); the spike
    T ||ybar||^2 ~ sigma^2 chi^2_d gives E[d / chi^2_d] ~ 1 + 2/d, i.e. + 2 gamma c / T; and the
    top squared singular value exceeds the spike by the fraction c (1 + gamma) / T, i.e.
    - (1 + c) c (1 + gamma) / T.
    """
    T = _validate.integer("T", T, minimum=2)
    gamma = _validate.real("gamma", gamma, positive=True)
    cc = c(s2)
    return -cc * (2.0 * (1.0 + cc) ** 2 + gamma * (cc - 1.0)) / T


# -- other attention maps (book/07_other_maps.md) ---------------------------------------------

MAP_ACTIVATIONS = ("softmax", "relu", "sigmoid")


def activation_moments(activation, s2, bias=0.0) -> tuple[float, float]:
    """Mean and variance of f(g), g ~ N(0, s2), for the element-wise form of an attention map.

    To leading order in 1/T every map of :func:`rcteach.attention_map` is element-wise,
    A_ij ~ f(g_ij) / T, with

    * ``"relu"``: f(g) = max(g, 0).  Closed form: E f = s / sqrt(2 pi), E f^2 = s2 / 2, so
      Var f = s2 (1/2 - 1/(2 pi)) = s2 (pi - 1) / (2 pi).
    * ``"sigmoid"``: f(g) = 1 / (1 + e^{-(g + b)}), b = ``bias``.  No closed form: E f and
      E (f - E f)^2 are integrals of f(s z + b) against the standard normal density, computed by
      adaptive quadrature (``scipy.integrate.quad``, absolute error < 1e-13).  At b = 0,
      E f = 1/2 exactly (f(x) + f(-x) = 1).
    * ``"softmax"``: f(g) = e^g / E e^g.  The row normaliser sum_k e^{g_ik} is T E e^g
      (1 + O(sqrt(c/T))), so softmax is this map to leading order: mean 1, variance
      c = e^{s2} - 1 (see :func:`c`).

    ``bias`` applies to ``"sigmoid"`` only, as in :func:`rcteach.attention_map`.

    Returns
    -------
    (mean, variance) : tuple of float
    """
    activation = _validate.choice("activation", activation, MAP_ACTIVATIONS)
    s2 = _validate.real("s2", s2, minimum=0.0)
    bias = _validate.bias(activation, bias)
    if activation == "softmax":
        return 1.0, c(s2)
    if activation == "relu":
        return math.sqrt(s2 / (2 * math.pi)), s2 * (math.pi - 1) / (2 * math.pi)
    from scipy import integrate, special

    s = math.sqrt(s2)
    if s == 0.0:
        return float(special.expit(bias)), 0.0
    # f(x) = 1 - f(-x) and z -> -z: the moments at bias b follow from those at -|b|, where f is
    # small and a relative tolerance keeps every digit
    b = -abs(bias)

    def expect(h):
        value, _ = integrate.quad(lambda z: h(special.expit(s * z + b)) * math.exp(-0.5 * z * z),
                                  -math.inf, math.inf, epsabs=0.0, epsrel=1e-12, limit=200)
        return value / math.sqrt(2 * math.pi)

    mean = expect(lambda f: f)
    var = expect(lambda f: (f - mean) ** 2)  # E (f - E f)^2: no cancellation at small s2
    return (mean if bias <= 0 else 1.0 - mean), var


def outlier(activation, s2, bias=0.0) -> float:
    """The outlier eigenvalue of attention with an element-wise map: lambda_1 ~ E f(g).

    A = (E f) 11^T / T + Z / T with Z_ij = f(g_ij) - E f i.i.d., mean 0: a rank-one matrix with
    eigenvalue E f plus noise whose eigenvalues are O(sd f / sqrt(T)); the outlier moves by
    O(sd f / T) only.  Softmax: exactly 1.  See :func:`activation_moments` for f.
    """
    return activation_moments(activation, s2, bias)[0]


def map_bulk_radius(T, activation, s2, bias=0.0) -> float:
    """Radius of the disc of non-outlier eigenvalues of an attention map: sqrt(Var f(g) / T).

    Circular law for Z / T, Z i.i.d. with variance Var f (the rank-one part leaves the bulk
    alone).  Softmax: sqrt(c / T), the same as :func:`bulk_radius`.  Centring (A P) keeps it.
    """
    T = _validate.integer("T", T, minimum=2)
    return math.sqrt(activation_moments(activation, s2, bias)[1] / T)


def gap_ratio(T, activation, s2, bias=0.0) -> float:
    """Size of the spectral gap, |outlier| / bulk radius ~ sqrt(T) E f / sd f.

    Scale-free (multiplying f by a constant changes neither), the quantity
    :attr:`rcteach.SpectralGap.ratio` measures.  Softmax: sqrt(T / c); ReLU: sqrt(T / (pi - 1))
    whatever s2.  Needs s2 > 0 (at s2 = 0 the bulk is a point and the ratio infinite).
    """
    T = _validate.integer("T", T, minimum=2)
    s2 = _validate.real("s2", s2, positive=True)
    mean, var = activation_moments(activation, s2, bias)
    return math.sqrt(T) * abs(mean) / math.sqrt(var)


def relative_gap(activation, s2, bias=0.0) -> float:
    """gap_ratio(map) / gap_ratio(softmax) at the same logit variance: sqrt(c) E f / sd f.

    Independent of T to leading order.  Below 1 the map has the smaller gap.  ReLU:
    sqrt(c / (pi - 1)), below 1 exactly when s2 < ln(pi).  Needs s2 > 0.
    """
    s2 = _validate.real("s2", s2, positive=True)
    mean, var = activation_moments(activation, s2, bias)
    return math.sqrt(c(s2)) * abs(mean) / math.sqrt(var)


def width_stable_rank_gram(T, gamma, s2) -> float:
    """Gram stable rank of A X0 W (sum s_i^4 / s_1^4) at leading order: 1 + c^2 (2 + gamma) / T.

    The spike contributes s_1^4 ~ (sigma^2 d)^2; the other T - 1 squared singular values are
    sigma^2 d c / T times a law of mean 1 and second moment 2 + gamma (the free product of two
    Marchenko-Pastur laws, see :func:`centred_width_slope_gram`), so they add
    T (sigma^2 d c / T)^2 (2 + gamma).  Tends to 1: in the Gram definition the collapse is complete.
    Derived.
    """
    T = _validate.integer("T", T, minimum=2)
    gamma = _validate.real("gamma", gamma, minimum=0.0)
    return 1.0 + c(s2) ** 2 * (2.0 + gamma) / T


def centred_depth_gram_stable_rank(T, depth) -> float:
    """Gram stable rank (sum s_i^4 / s_1^4) of X_L after ``depth`` = L layers of centred i.i.d.
    attention with fresh Gaussian values, T = d, orthonormal X_0 (rebuttal Fig. VII), to leading order:
    T k^(2k) / (k+1)^(2k+1) with k = 2L (9.88, 5.03, 3.37 at T = 150 for L = 1, 2, 3).

    X_L = A_L^perp ... A_1^perp (X_0 W_1) W_2 ... W_L is a product of 2L independent Ginibre-like
    factors (sqrt(T) A^perp ~ Z P, Z i.i.d. of variance c), whose squared singular values follow the
    Fuss-Catalan law of order 2L (:mod:`rcteach.free_probability`).  Derived; assumes the largest
    singular value sits at the edge of the law (finite-T values are higher for L >= 2).
    """
    from .free_probability import gram_stable_rank_limit

    depth = _validate.integer("depth", depth, minimum=1)
    return gram_stable_rank_limit(T, 2 * depth)


def consensus_transient_layer(mask, level, *, max_layers=10_000) -> int:
    """First layer t with ||P A^t||_F / ||A^t||_F <= level, A the row-normalised mask (uniform attention).

    For tokens X_0 with i.i.d. isotropic rows, E||P A^t X_0||_F^2 / E||A^t X_0||_F^2 equals the squared
    ratio, so this is when the linear consensus dynamics bring the relative distance to consensus
    mu / ||X||_F down to ``level``.  For non-normal masks (sliding-causal) it is much later than
    log(level) / log|lambda_2| (:func:`consensus_rate`): the transient of their long Jordan chains.
    Returns ``max_layers`` + 1 if the level is not reached.  Derived.
    """
    from .masks import check_mask

    import torch

    level = _validate.real("level", level, positive=True)
    mask = check_mask(mask).cpu()
    M = mask.to(torch.float64)
    A = M / M.sum(-1, keepdim=True)  # (T, T)
    At = torch.eye(A.shape[0], dtype=torch.float64)
    for t in range(max_layers + 1):
        centred = At - At.mean(0, keepdim=True)  # P A^t
        if torch.linalg.matrix_norm(centred) <= level * torch.linalg.matrix_norm(At):
            return t
        At = A @ At
    return max_layers + 1


def gaussian_value_lyapunov(d) -> float:
    """(psi((d-1)/2) - psi(d/2)) / 2 ~ -1/(2d), psi the digamma function: lambda_2 - lambda_1, the gap between
    the top two Lyapunov exponents of a product of d x d Gaussian matrices, i.e. the log-rate at which the
    projective action u -> u W / ||u W|| contracts tangent directions (:func:`gaussian_value_rate`)."""
    import torch

    d = _validate.integer("d", d, minimum=2)
    psi = torch.special.digamma(torch.tensor([(d - 1) / 2, d / 2], dtype=torch.float64))
    return 0.5 * (psi[0] - psi[1]).item()


def gaussian_value_rate(mask, d) -> float:
    """Per-layer factor of mu near consensus for RMS-normalised masked attention with fresh Gaussian values
    W_V (d x d, i.i.d. entries): |lambda_2| exp(:func:`gaussian_value_lyapunov`(d)).

    Near consensus x_i = v + delta_i, attention is uniform over the mask (:func:`consensus_rate` gives
    |lambda_2| for the token part) and the features of delta follow the derivative of the projective
    action u -> u W / ||u W||, which contracts by exp(lambda_2 - lambda_1) per layer.  A typical
    (log-average) rate: one run's rate fluctuates by ~1/sqrt(d * layers).  Derived; always faster than
    with orthogonal values.
    """
    return consensus_rate(mask) * math.exp(gaussian_value_lyapunov(d))


def first_value_gradient_rms(T, d, s2, *, value_var=1.0, centred=False) -> float:
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
    """
    T = _validate.integer("T", T, minimum=2)
    d = _validate.integer("d", d, minimum=T)
    value_var = _validate.real("value_var", value_var, positive=True)
    s4 = 3.0 * T * (c(s2) / T) ** 4 if centred else 1.0
    return math.sqrt(4.0 * value_var**3 * d**2 * (2 * d + 1) * s4)


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
