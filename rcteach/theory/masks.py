"""Masks: consensus rates of uniform attention in closed form, and window hops.

Introduced in chapter "Collapse under masks" (book/09_mask_collapse.md).

The exact rate of any mask is the numerical :func:`rcteach.masks.consensus_rate`.
"""

from __future__ import annotations

import math

from .. import _validate

__all__ = ["causal_consensus_rate", "sliding_consensus_rate", "window_hops", "alternating_blocks_rate",
           "alibi_causal_rate"]


@_validate.finite_result
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


@_validate.finite_result
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

    Exact for w >= T - 1: the mask is complete, A = 11^T/T and lambda_2 = 0.  For T/4 < w < T - 1
    the O(w/T) correction is not small (the leading order is 13-26 % off in the gap there): a
    ``UserWarning`` says so, and where the leading order falls below 0 (w > ~0.55 T), no longer a
    modulus, a ValueError points to the exact :func:`rcteach.consensus_rate`.
    """
    T = _validate.integer("T", T, minimum=2)
    window = _validate.integer("window", window, minimum=1)
    if window >= T - 1:
        return 0.0
    rate = 1.0 - math.pi**2 * window * (window + 1) / (6.0 * T**2)
    exact = f"rcteach.consensus_rate(rcteach.make_mask('sliding', {T}, window={window}))"
    if rate < 0:
        raise ValueError(f"sliding_consensus_rate(T={T}, window={window}): the leading order in w/T is negative "
                         f"here (w is not << T); the exact rate is {exact}")
    if 4 * window > T:
        _validate.regime(f"sliding_consensus_rate(T={T}, window={window}): w/T = {window / T:.2f} is not small, so the "
                         f"leading order is off by O(w/T) in the gap; the exact rate is {exact}")
    return rate


@_validate.finite_result
def window_hops(T, window) -> int:
    """ceil((T - 1) / w): the diameter of the sliding mask and the centre eccentricity of the
    sliding-causal mask of window w on T tokens (each hop moves at most w positions)."""
    T = _validate.integer("T", T, minimum=2)
    window = _validate.integer("window", window, minimum=1)
    return math.ceil((T - 1) / window)


def _intervals(sizes, name):
    if not isinstance(sizes, (list, tuple)) or not sizes:
        raise TypeError(f"{name} must be a non-empty list or tuple of block sizes")
    sizes = [_validate.integer(f"{name}[{k}]", n, minimum=1) for k, n in enumerate(sizes)]
    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    return [(a, a + n) for a, n in zip(starts, sizes)]


@_validate.finite_result
def alternating_blocks_rate(sizes_a, sizes_b) -> float:
    """|lambda_2| per period of uniform attention alternating between two block-diagonal masks (time-varying
    masks): layer 1 averages within the consecutive blocks of sizes ``sizes_a``, layer 2 within those of
    ``sizes_b`` (both partitions of the same T tokens).

    Uniform attention within blocks is the orthogonal projection onto the block-constant vectors, so one
    period applies P_b P_a, whose eigenvalues are the squared cosines of the principal angles between the
    two subspaces: sigma_k^2, sigma_k the singular values of the overlap matrix
    K_ij = |a_i n b_j| / sqrt(|a_i| |b_j|).  sigma_1 = 1 (the constant vector, the consensus) and the rate is
    sigma_2^2: 1 when the union graph is disconnected (no token reaches all others, however many periods).
    Each mask alone never mixes its blocks (rate 1).  Derived; for sizes (16, 16) and (8, 16, 8) it is 1/2.
    """
    a, b = _intervals(sizes_a, "sizes_a"), _intervals(sizes_b, "sizes_b")
    if a[-1][1] != b[-1][1]:
        raise ValueError(f"sizes_a and sizes_b must partition the same T tokens, got {a[-1][1]} and {b[-1][1]}")
    K = [[max(0, min(x1, y1) - max(x0, y0)) / math.sqrt((x1 - x0) * (y1 - y0)) for (y0, y1) in b] for (x0, x1) in a]
    import torch

    from .. import linalg

    sigma = linalg.svdvals(torch.tensor(K, dtype=torch.float64))
    return float(sigma[1] ** 2) if sigma.numel() > 1 else 0.0


@_validate.finite_result
def alibi_causal_rate(slope) -> float:
    """|lambda_2| = 1/(1 + e^{-m}) of uniform attention on the causal mask with the ALiBi positional bias
    -m |i - j| (``slope`` m >= 0): the attention matrix is lower triangular, so its eigenvalues are its
    diagonal entries 1 / sum_{k=0}^{i} e^{-m k}; the second largest is token 1's, 1/(1 + e^{-m}).
    m = 0 gives the causal 1/2; a larger slope attends more locally and collapses more slowly (and,
    like a narrow sliding-causal window, after a longer transient).  Derived.
    """
    m = _validate.real("slope", slope, minimum=0.0)
    return 1.0 / (1.0 + math.exp(-m))
