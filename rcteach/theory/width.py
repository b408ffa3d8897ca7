"""Rank collapse in width: the stable rank of one layer's output A X0 W_V.

Introduced in chapter "Rank collapse in width" (book/04_width.md); the Gram stable rank of a real
model's embeddings, which have a part shared by all tokens, in "Real transformers at initialisation"
(book/12_real_transformers.md).
"""

from __future__ import annotations

import math

from .. import _validate
from .spectra import c

__all__ = ["width_stable_rank", "width_stable_rank_bias", "skip_width_stable_rank", "skip_width_stable_rank_bias",
           "width_stable_rank_gram", "centred_width_slope", "centred_width_slope_gram",
           "noniso_width_slope", "embedding_gram_stable_rank_excess"]


@_validate.finite_result
def width_stable_rank(s2) -> float:
    """Limit of the (Frobenius) stable rank of A X0 W_V as T grows: 1 + c.

    A X0 W = 1 (1^T X0 W / T) + A_perp X0 W: a rank-one spike of squared norm ~ sigma^2 d over
    a remainder of squared Frobenius norm ~ sigma^2 d c spread over ~T directions.

    Examples
    --------
    >>> rcteach.theory.width_stable_rank(rcteach.LN2)  # c = e^{ln 2} - 1 = 1
    2.0
    """
    return 1.0 + c(s2)


@_validate.finite_result
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
    bias = -cc * (2.0 * (1.0 + cc) ** 2 + gamma * (cc - 1.0)) / T
    if -bias >= cc:
        _validate.regime(f"width_stable_rank_bias: the 1/T correction {bias:.3g} exceeds c = {cc:.3g} (it would "
                         "put the stable rank below 1): the expansion needs c^3 << T", stacklevel=4)
    return bias


@_validate.finite_result
def skip_width_stable_rank(s2, gamma, skip=1.0) -> float:
    """Limit of the (Frobenius) stable rank of X0 + a A X0 W_V (W_V with N(0, 1) entries), normalised
    token by token or not, as T grows at fixed gamma = T/d: 1 + c + gamma / a^2.

    X0 + a A X0 W = 1 (xbar0 + a ybar)^T + (P X0 + a A_perp X0 W): the spike has squared norm
    ~ a^2 d (the skip adds 1 = T ||xbar0||^2), the remainder T - 1 + a^2 d c, spread over ~T directions.
    Flat in T: the skip adds gamma / a^2 directions' worth of rank but does not undo the collapse in
    width.  A token-wise normalisation (LayerNorm or RMS) rescales tokens whose norms agree to
    O(1/sqrt(T)), so it keeps the limit.  ``skip`` = a != 0.  Derived (chapter "Rank collapse in width").
    """
    gamma = _validate.real("gamma", gamma, minimum=0.0)
    skip = _validate.real("skip", skip)
    if skip == 0.0:
        raise ValueError("skip must be nonzero: X0 + 0 A X0 W_V is the input itself")
    return 1.0 + c(s2) + gamma / skip**2


@_validate.finite_result
def skip_width_stable_rank_bias(T, gamma, s2, skip=1.0) -> float:
    """Leading finite-T correction to sr(X0 + a A X0 W_V) (Frobenius), by the delta method as
    :func:`width_stable_rank_bias` (which it extends; a -> infinity gives that one back):

        T * bias = -c (1+c)(1+2c) + gamma ((g + c)(2 - 1/a^2) - 1/a^2) - (1 + g + c)(c (1 + gamma) + g gamma),

    g = gamma / a^2.  Terms: E||A_perp||_F^2 ~ c - c(1+c)(1+2c)/T; E[1/spike], spike = 1 + a^2 chi^2_d,
    times E[remainder] = T - 1 + a^2 d E||A_perp||_F^2 (independent: A_perp Y = A_perp P Y); and the top
    squared singular value above the spike by the fraction (c (1 + gamma) + g gamma)/T (second-order
    perturbation: the column sums of A_perp, A_perp acting on the spike direction, and the skip's
    projection ||P X0 v||^2 ~ gamma).  -14/T at c = 1, gamma = 1, a = 1.  Heuristic, like its parent.
    """
    T = _validate.integer("T", T, minimum=2)
    base = skip_width_stable_rank(s2, gamma, skip)  # validates gamma, skip
    cc, inv = c(s2), 1.0 / skip**2
    g = gamma * inv
    bias = (-cc * (1 + cc) * (1 + 2 * cc) + gamma * ((g + cc) * (2 - inv) - inv)
            - (1 + g + cc) * (cc * (1 + gamma) + g * gamma)) / T
    if -bias >= base - 1:
        _validate.regime(f"skip_width_stable_rank_bias: the 1/T correction {bias:.3g} is as large as the excess "
                         f"{base - 1:.3g} over 1: the expansion needs larger T", stacklevel=4)
    return bias


@_validate.finite_result
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


@_validate.finite_result
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


@_validate.finite_result
def centred_width_slope_gram(gamma) -> float:
    """Slope in T of the Gram stable rank sr((A_perp X0 W)(A_perp X0 W)^T) = sum s_i^4 / s_1^4.

    sr_gram / T -> m2 / edge^2 = (2 + gamma) * centred_width_slope(gamma)^2: the free product of
    two Marchenko-Pastur laws of mean 1 (ratios 1 and gamma) has second moment
    m2 = 2 + (1 + gamma) - 1 = 2 + gamma, and 1/edge is the Frobenius slope.  Derived.
    """
    gamma = _validate.real("gamma", gamma, minimum=0.0)
    return (2.0 + gamma) * centred_width_slope(gamma) ** 2


@_validate.finite_result
def noniso_width_slope(gamma) -> float:
    """Slope of sr(A_perp X0 W_V) in T for Gaussian tokens: sr / T -> max_{z>0} z / ((1+z)^2 (1+gamma z)^2).

    Frobenius stable rank, gamma = T/d (the width convention; chapter 15 writes d/T = 1/gamma), any
    gamma >= 0 including gamma > 1 (d < T).  Model: A_perp centred i.i.d. attention (its T-dim
    Gram law Marchenko-Pastur of ratio 1, S = 1/(1+z)), X0 = G with i.i.d. Gaussian rows (T x d),
    W_V (d x d) Gaussian, all independent and asymptotically free.  In the d-dim frame
    S(W W^T) = 1/(1+z) and S(G^T G) = 1/(gamma + z) (mean gamma), so the d-dim law nu of
    X0 W W^T X0^T has S_nu = 1/((1+z)(gamma+z)); the T-dim law mu = (1 - 1/gamma) delta_0 + nu/gamma
    (for gamma > 1: the rank is d) has S_mu(z) = (1+z)/(1/gamma+z) S_nu(gamma z) = 1/(1+gamma z)^2.
    Multiplying by A_perp: S = 1/((1+z)(1+gamma z)^2), mean 1, so sr/T -> 1/edge = max_z z S/(1+z).
    The maximiser solves 1 - (1+gamma) z - 3 gamma z^2 = 0.  gamma -> 0 gives 1/4 (as
    :func:`centred_width_slope`); gamma -> inf gives 1/(4 gamma), i.e. sr -> d/4 (the rank <= d).
    Assumed: unit-norm rows behave like Gaussian rows (the row norms concentrate; a finite-d
    excess of a few / d relative is measured, not derived), and freeness of the three factors.
    """
    gamma = _validate.real("gamma", gamma, minimum=0.0)
    z = 1.0 if gamma == 0 else (math.sqrt((1 + gamma) ** 2 + 12 * gamma) - 1 - gamma) / (6 * gamma)
    return z / ((1 + z) ** 2 * (1 + gamma * z) ** 2)


@_validate.finite_result
def embedding_gram_stable_rank_excess(T, d, shared_fraction) -> float:
    """Excess over 1 of the Gram stable rank of LayerNorm-ed embeddings with a shared part.

    sr_Gram(X0) - 1 = sum_{i >= 2} s_i^4 / s_1^4 = (1 - rho)^2 (T - 1) (1 + (T - 1)/d) / (T rho + 1 - rho)^2

    X0 (T x d, tokens are rows) has rows x_i = a + u_i of squared norm r^2 (r^2 = d after LayerNorm,
    r cancels): a shared part a with |a|^2 = rho r^2, rho = ``shared_fraction`` (the token-type
    embedding of BERT/RoBERTa, see :func:`rcteach.models.shared_fraction`), and Gaussian parts u_i
    with i.i.d. N(0, (1 - rho) r^2 / d) entries (distinct tokens).  The spike is X0's mean direction
    1/sqrt(T): s_1^2 = |1^T X0|^2 / T = r^2 (T rho + 1 - rho), the shared part plus the bulk's
    projection on 1.  The other T - 1 squared singular values are those of the centred Gaussian
    part P u (P = I - 1 1^T / T); by Marchenko-Pastur (ratio (T - 1)/d) their sum of squares is
    (T - 1) (1 - rho)^2 r^4 (1 + (T - 1)/d).  Cross terms between a and u_i move s_1^2 by a fraction
    ~ (1 - rho)/(rho d) (neglected).  Derived; measured within a few per cent on TinyBERT and
    RoBERTa at initialisation with random distinct-token embeddings (chapter "Real transformers at
    initialisation").  Repeated tokens (real text) share word embeddings and raise the excess.

    Valid while the spike stands clear of the bulk's upper edge (1 - rho) r^2 (1 + sqrt((T - 1)/d))^2;
    a ``UserWarning`` says when it does not (within a factor 2), where s_1 is no longer the spike.
    """
    T = _validate.integer("T", T, minimum=2)
    d = _validate.integer("d", d, minimum=1)
    rho = _validate.real("shared_fraction", shared_fraction, minimum=0.0, maximum=1.0)
    spike = T * rho + 1 - rho  # s_1^2 / r^2
    edge = (1 - rho) * (1 + math.sqrt((T - 1) / d)) ** 2
    if spike < 2 * edge:
        _validate.regime(f"embedding_gram_stable_rank_excess: the spike s_1^2/r^2 = {spike:.3g} is not clear of the "
                         f"bulk edge {edge:.3g} (needs T rho >> (1 - rho)(1 + sqrt(T/d))^2)", stacklevel=4)
    return (1 - rho) ** 2 * (T - 1) * (1 + (T - 1) / d) / spike**2
