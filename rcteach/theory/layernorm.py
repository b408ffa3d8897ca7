"""LayerNorm with attention dropout: the zero front of causal attention.

Introduced in chapter "LayerNorm" (book/10_layernorm.md).
"""

from __future__ import annotations

import math

import torch

from .. import _validate

__all__ = [
    "dropout_front",
    "dropout_front_mu",
    "gaussian_value_lyapunov",
    "gaussian_value_rate",
    "near_orthogonal_value_lyapunov",
    "sphere_consensus_rate",
]


@_validate.finite_result
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
    at_least = torch.tensor([p ** (m * (m + 1) // 2) for m in range(T + 1)] + [0.0], dtype=torch.float64)
    jump = at_least[:-1] - at_least[1:]  # P(J = m), m = 0..T
    k = torch.arange(T + 1)
    m = k[None, :] - k[:, None]  # the step from front k (row) to front k + m (column)
    # P(J = m) for m < T - k; the last value, m = T - k, takes the rest P(J >= T - k)
    step = torch.where(m == T - k[:, None], at_least[m.clamp(0, T)], jump[m.clamp(0, T)])
    step = torch.where(m >= 0, step, 0.0)
    dist = torch.zeros(T + 1, dtype=torch.float64)
    dist[0] = 1.0
    out = [dist]
    for _ in range(depth):
        out.append(out[-1] @ step)
    return torch.stack(out).tolist()


@_validate.finite_result
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


def gaussian_value_lyapunov(d) -> float:
    """(psi((d-1)/2) - psi(d/2)) / 2 ~ -1/(2d), psi the digamma function: lambda_2 - lambda_1, the gap between
    the top two Lyapunov exponents of a product of d x d Gaussian matrices, i.e. the log-rate at which the
    projective action u -> u W / ||u W|| contracts tangent directions (:func:`gaussian_value_rate`)."""
    import torch

    d = _validate.integer("d", d, minimum=2)
    psi = torch.special.digamma(torch.tensor([(d - 1) / 2, d / 2], dtype=torch.float64))
    return 0.5 * (psi[0] - psi[1]).item()


def near_orthogonal_value_lyapunov(d, eps) -> float:
    """-eps^2 / d: the leading order, as eps -> 0, of lambda_2 - lambda_1 for products of fresh value matrices
    W = O + eps G, O Haar orthogonal and G with i.i.d. N(0, 1/d) entries (d x d).

    W is invariant in law under W -> U W V for orthogonal U, V, so (Newman) lambda_1 + lambda_2 - 2 lambda_1 =
    E log |uW ^ vW| - E log |uW| - E log |vW| = E[log sin theta] for any orthonormal u, v, theta the angle
    between uW = a + eps g and vW = b + eps h (a, b orthonormal, g, h independent N(0, I/d)).  cos theta =
    eps (a.h + g.b) + O(eps^2), and E (a.h + g.b)^2 = 2/d, so E log sin theta = -E cos^2 theta / 2 + ... =
    -eps^2 / d + O(eps^4).  Times |lambda_2(U_M)| this is the per-layer log-rate of mu with RMS LayerNorm
    (:func:`gaussian_value_rate`, chapter "Theorem 2 of Wu et al."): the collapse rate depends continuously on
    W_V and is faster than with orthogonal values (eps = 0).  Derived; measured 1-2% below at eps = 0.1
    (the relative O(eps^2) correction).
    """
    d = _validate.integer("d", d, minimum=2)
    eps = _validate.real("eps", eps, minimum=0.0)
    return -eps**2 / d


def gaussian_value_rate(mask, d) -> float:
    """Per-layer factor of mu near consensus for RMS-normalised masked attention with fresh Gaussian values
    W_V (d x d, i.i.d. entries): |lambda_2| exp(:func:`gaussian_value_lyapunov`(d)).

    Near consensus x_i = v + delta_i, attention is uniform over the mask (:func:`rcteach.consensus_rate` gives
    |lambda_2| for the token part) and the features of delta follow the derivative of the projective
    action u -> u W / ||u W||, which contracts by exp(lambda_2 - lambda_1) per layer.  A typical
    (log-average) rate: one run's rate fluctuates by ~1/sqrt(d * layers).  Derived; always faster than
    with orthogonal values.
    """
    from ..masks import consensus_rate

    return consensus_rate(mask) * math.exp(gaussian_value_lyapunov(d))


def sphere_consensus_rate(h) -> float:
    """ln(1 + h): the per-layer decay rate of mu near consensus in the attention flow on the sphere of
    Geshkovski et al., run as residual layers x_i <- N(x_i + h sum_j A_ij x_j), A_ij = softmax_j(beta <x_i, x_j>)
    (W_Q = W_K = I, identity values, N the RMS normalisation to unit norm).

    Near consensus x_i = m + c_i with sum_i c_i = 0: <x_i, x_j> = 1 - |c_i - c_j|^2 / 2, so
    A_ij = 1/T + O(beta c^2) (rows sum to 1) and sum_j A_ij x_j = m + O(beta c^3).  The step gives
    (1 + h) m + c_i + O(c^3); its norm is (1 + h) |m| (1 + O(c^2)), whose i-dependent part moves tokens
    radially, orthogonal to the c_i to first order.  So mu_{l+1} / mu_l = (1 + O(mu^2)) / (1 + h): the rate
    ln(1 + h), whatever beta, T and d.  As h -> 0 (time t = h l) this is the flow's c' = -c, rate 1 per unit
    time.  Derived; introduced in chapter "Wider reading" (book/16_wider_reading.md).
    """
    h = _validate.real("h", h, positive=True)
    return math.log1p(h)
