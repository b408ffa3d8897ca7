"""Checks for the papers' remaining figures (Part IV of the book: chapters "Depth with the fix",
"Theorem 2 of Wu et al., settled numerically", "Correlated tokens" and "Wider reading"; section 2b of
the theory notes)."""

from __future__ import annotations

import math

import torch

from .. import theory
from ..attention import noniso_attention, qk_attention
from ..depth import propagate, weight_gradients
from ..free_probability import correlated_bulk_radius, fuss_catalan_moment, gram_stable_rank_limit
from ..masks import consensus_rate, consensus_transient_layer, make_mask
from ..logits import qk_weights
from ..metrics import decay_rate, spectral_gap, stable_ranks_unchecked
from ..norms import normalise
from ..theory import LN2
from ..sphere import sphere_flow, tail_rate
from ..tokens import gaussian_tokens, near_consensus
from ..width import noniso_width_ranks
from ..wu_table import logit_s2
from .registry import Comparison, off_by, off_exponent, register



def _centred_stack(T, depth, seeds, s2, seed, device):
    """X_1..X_depth (depth, seeds, T, T) of centred i.i.d. attention with fresh Gaussian values, T = d.  X_0 is the
    identity: X_0 W_1 is then exactly Gaussian, as for any orthonormal X_0 (the law of every X_l is the same)."""
    X0 = torch.eye(T, dtype=torch.float64, device=device).expand(seeds, T, T)
    tr = propagate(X0, depth, centred=True, values="gaussian", value_var=1.0 / T, s2=s2, seed=seed + 1,
                   keep_states=True, stable_ranks=False)
    return tr.states[1:]


def _by_order(s, value, order):
    """value(k) at the Fuss-Catalan order k = order(L) for L = 1..depth: a figvii prediction with a wrong order."""
    return torch.tensor([value(order(L)) for L in range(1, s["depth"] + 1)], dtype=torch.float64)


def _gram_limits(s, order):
    return _by_order(s, lambda k: gram_stable_rank_limit(s["T"], k), order)


def _fc_moments(s, order):
    return _by_order(s, lambda k: k + 1.0, order)


@register(
    "figvii-free-product",
    claim="After L layers of centred i.i.d. attention with fresh Gaussian values (T = d, rebuttal Fig. VII), "
          "the Gram stable rank of X_L tends to T k^(2k)/(k+1)^(2k+1) with k = 2L (Fuss-Catalan law of order 2L), "
          "at L = 1 and L = 2",
    source="derived",
    tolerance_note=(
        "relative 14% per depth on the mean over 24 networks (T = 256, s2 = ln 2) of the Gram stable rank of X_1 "
        "and X_2.  It hangs on s_1^4: one network's value spreads by ~13% (sd), the mean of 24 by ~2.7%, and the "
        "finite-T excess is not derived.  Measured mean/limit: L = 1 -1.4% (T = 256), L = 2 +5.8% (T = 256), "
        "+18% (T = 128), +0.8% (T = 1024); for light tails (s2 = 0.25, T = 256) +8% and +12%, the edge's "
        "Tracy-Widom shortfall, which the heavy tail of A_perp partly cancels at s2 = ln 2.  14% covers the excess "
        "and ~3 standard errors.  The orders k = L + 1 (+33% at L = 2), L (+96%) and 2L + 1 (-20%) are rejected; "
        "the law's order itself is checked sharply by figvii-fuss-catalan-moment"),
    quick=dict(T=256, depth=2, seeds=24),
    full=dict(T=1024, depth=2, seeds=8, tolerance=0.05),
    mutants={
        "order k = L (the values forgotten)": lambda p, s: _gram_limits(s, lambda L: L),
        "order k = L + 1 (= 2L only at L = 1)": lambda p, s: _gram_limits(s, lambda L: L + 1),
        "order k = 2L + 1": lambda p, s: _gram_limits(s, lambda L: 2 * L + 1),
        **off_by(0.25),
    },
    base_seeds=(700, 1700, 2700),
    coarse=("the finite-T excess of s_1^4 at the edge of the Fuss-Catalan law (-1% to +6% at T = 256, s2 = ln 2; "
            "+8% to +12% for light tails) is not derived, and one network's value spreads by 13%"),
)
def figvii_free_product(*, T, depth, seeds, s2=LN2, tolerance=0.14, seed=700, device=None) -> Comparison:
    states = _centred_stack(T, depth, seeds, s2, seed, device)
    measured = stable_ranks_unchecked(states, lanczos=False)[1].mean(-1)  # (depth,); no dominant singular value
    prediction = torch.tensor([theory.centred_depth_gram_stable_rank(T, L) for L in range(1, depth + 1)],
                              dtype=torch.float64)
    return Comparison(prediction=prediction, measured=measured, tolerance=tolerance, relative=True)


@register(
    "figvii-fuss-catalan-moment",
    claim=("After L layers of centred i.i.d. attention with fresh Gaussian values (T = d), the squared singular values "
           "of X_L, normalised to mean 1, have second moment k + 1 with k = 2L: T ||X X^T||_F^2 / ||X||_F^4 -> 2L + 1 "
           "(the Fuss-Catalan law of order 2L), at L = 1 and L = 2, whatever s2 (tested at s2 = 0.25)"),
    source="derived",
    tolerance_note=(
        "relative 2.5% per depth on the mean over 16 networks at T = 256.  A bulk statistic (no SVD, no edge): one "
        "network's value spreads by 0.7% (L = 1) and 1.3% (L = 2), the mean of 16 by 0.18% and 0.33%.  Its finite-T "
        "excess is O(1/T): +1.5%, +0.85%, +0.55% (L = 1) and +2.3%, +1.6%, +0.7% (L = 2) at T = 128, 256, 512 for "
        "s2 = 0.25; the log-normal tail raises it at s2 = ln 2 (+3.1% and +4.2% at T = 256), hence the lighter "
        "tail (the law does not depend on c).  2.5% covers the excess and 3 standard errors; the check resolves "
        "~4% and rejects the orders L + 1 (-20% at L = 2), L and 2L + 1"),
    quick=dict(T=256, depth=2, seeds=16),
    full=dict(T=1024, depth=3, seeds=8),
    mutants={
        "order k = L (the values forgotten)": lambda p, s: _fc_moments(s, lambda L: L),
        "order k = L + 1 (= 2L only at L = 1)": lambda p, s: _fc_moments(s, lambda L: L + 1),
        "order k = 2L + 1": lambda p, s: _fc_moments(s, lambda L: 2 * L + 1),
        **off_by(0.06),
    },
    base_seeds=(705, 1705, 2705),
)
def figvii_fuss_catalan_moment(*, T, depth, seeds, s2=0.25, seed=705, device=None) -> Comparison:
    states = _centred_stack(T, depth, seeds, s2, seed, device)
    gram = torch.linalg.matrix_norm(states @ states.mT).square()
    measured = (T * gram / torch.linalg.matrix_norm(states).pow(4)).mean(-1)  # (depth,)
    prediction = torch.tensor([fuss_catalan_moment(2 * L, 2) for L in range(1, depth + 1)], dtype=torch.float64)
    return Comparison(prediction=prediction, measured=measured, tolerance=0.025, relative=True)


def _ln_run(kind, T, d, window, depth, *, seeds, seed, device, eps=None):
    """Relative mu (depth + 1, seeds) through RMS-LayerNorm-ed query-key attention at the PyTorch-init logit
    scale (``layernorm.logit_s2``) with fresh orthogonal values per layer (Wu et al.'s Theorem 2 setting), from
    Gaussian tokens, or with ``eps`` from tokens at distance ~eps from consensus (``tokens.near_consensus``).

    Simulated exactly in law with identity values, which skips a Haar draw (a QR) per layer and network: with
    U_l = W_1 ... W_l (orthogonal) and Z_l = X_l U_l^T, Z_(l+1) = N(A(X_l) Z_l), since the RMS norm commutes
    with rotations of the features; the logits of A(X_l) are Z_l (U_l W_Q)(U_l W_K)^T Z_l^T / sqrt(d) and
    (U_l W_Q, U_l W_K) has the law of the fresh i.i.d. Gaussian (W_Q, W_K), independent of the past.  So
    (Z_l) is the identity-values chain, and mu(X_l) = mu(Z_l), ||X_l|| = ||Z_l||."""
    mask = make_mask(kind, T, window=window, device=device)
    X0 = (gaussian_tokens(T, d, batch=seeds, seed=seed, device=device, dtype=torch.float64) if eps is None else
          near_consensus(T, d, eps, seeds=seeds, seed=seed, device=device, dtype=torch.float64))
    return propagate(X0, depth, attention="qk", s2=logit_s2(d, "rms"), mask=mask, norm="rms", values="identity",
                     seed=seed + 1, stable_ranks=False).relative_mu, mask


def _bound_form(T, window):
    """(1 - eps^r)^(1/r) with eps = 1/(2w+1), r = ceil((T-1)/w): the per-layer factor of a bound of the form we
    believe Wu et al.'s Theorem 2 has, with the most favourable eps (uniform attention on the window)."""
    r = theory.window_hops(T, window)
    return (1 - (2 * window + 1) ** -r) ** (1 / r)


@register(
    "ln-theorem2-rate",
    claim=("With RMS LayerNorm, orthogonal values and a strongly connected mask (bidirectional sliding window), "
           "mu decays per layer at |lambda_2| of the row-normalised mask: near consensus attention is uniform, "
           "and normalisation and orthogonal values act on features only. A bound of the form (1 - eps^r)^(t/r) "
           "holds but is nowhere near tight"),
    source="derived",
    tolerance_note=(
        "absolute 5e-4 on the per-layer factor (2.3% of the gap 1 - lambda_2 = 0.021 at T = 32, w = 3): the "
        "worst of the seeds, fitted from layer 40 to 120 of runs started at distance 1e-2 from consensus (a "
        "random deviation: all modes of the mask, the faster ones gone by layer 40); the rate is set by the "
        "linearisation at consensus.  Measured worst errors over 8 base seeds: 1.2e-5 to 2.9e-5, the same with "
        "Haar values as with the identity values that simulate them exactly in law (_ln_run); fits from "
        "layer 30 to 90 erred by up to 1.7e-4, from 20 to 60 by up to 1.2e-3 (the third mode not yet gone).  "
        "From Gaussian tokens the transient to consensus takes ~150 layers (300 layers, fit from 150: errors "
        "~1e-6, 3x the CPU)"),
    quick=dict(T=32, d=64, window=3, depth=120, start=40, seeds=2),
    full=dict(T=32, d=64, window=3, depth=500, start=150, seeds=8),
    mutants={
        "bound form (1 - eps^r)^(1/r), eps = 1/(2w+1), r = diameter": lambda p, s: _bound_form(s["T"], s["window"]),
        **off_by(0.0008),
        "gap 1 - lambda_2 10% wide": lambda p, s: 1 - 1.1 * (1 - p),
        "the causal rate 1/2": lambda p, s: 0.5,
    },
    base_seeds=(710, 1710, 2710),
)
def ln_theorem2_rate(*, T, d, window, depth, start, seeds, eps=1e-2, seed=710, device=None) -> Comparison:
    rel, mask = _ln_run("sliding", T, d, window, depth, seeds=seeds, seed=seed, device=device, eps=eps)
    measured = decay_rate(rel.cpu(), start, floor=1e-12)
    prediction = consensus_rate(mask)
    worst = measured[(measured - prediction).abs().argmax()].item()
    return Comparison(prediction=prediction, measured=worst, tolerance=5e-4)


def _second_mode_tokens(mask, d, eps, seeds, seed, device):
    """Unit-RMS tokens (seeds, T, d) x_i = N(v + eps u_i z): a consensus v (random per network) plus a rank-one
    deviation whose token profile u is the centred eigenvector of the row-normalised symmetric mask D^-1 M for its
    eigenvalue of second-largest modulus, and z _|_ v.  Near consensus the deviation then stays on that mode
    (P A P u = lambda_2 u for uniform attention A = D^-1 M): the rate is measured without a transient."""
    M = mask.to(torch.float64).cpu()
    deg = M.sum(-1)
    lam, Y = torch.linalg.eigh(M / (deg[:, None] * deg[None, :]).sqrt())  # similar to D^-1 M
    k = lam.abs().argsort(descending=True)[1]
    u = Y[:, k] / deg.sqrt()  # right eigenvector of D^-1 M
    u = (u - u.mean()) * math.sqrt(M.shape[0]) / (u - u.mean()).norm()  # mean u_i^2 = 1
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(seeds, 1, d, generator=g, dtype=torch.float64)
    z = torch.randn(seeds, 1, d, generator=g, dtype=torch.float64)
    z = z - (z * v).sum(-1, keepdim=True) / v.square().sum(-1, keepdim=True) * v
    X = v / v.norm(dim=-1, keepdim=True) + eps * u[:, None] * z / z.norm(dim=-1, keepdim=True)
    return normalise(X, "rms").to(device=device)


def _digamma_gap_as(p, s, gap):
    """The prediction with the Gaussian-values term replaced by ``gap``."""
    return p - theory.gaussian_value_lyapunov(s["d"]) + gap


@register(
    "ln-gaussian-values-rate",
    claim=("With RMS LayerNorm and fresh Gaussian values (Wu et al.'s open case) a sliding window collapses faster "
           "than with orthogonal values: near consensus the typical (log-average) per-layer factor of mu is "
           "|lambda_2| exp((psi((d-1)/2) - psi(d/2))/2), psi the digamma function (measured from a deviation on "
           "the mask's second mode, d = 4, where the digamma term is -0.193 and -1/(2d) = -0.125)"),
    source="derived",
    tolerance_note=(
        "absolute 0.006 on the mean over 4096 networks of the log-rate (log mu_30 - log mu_0)/30 (T = 8, window 1, "
        "d = 4), started at mu/||X|| = 1e-3 on the second mode of the mask (no transient, and 30 layers stay far "
        "above the float floor: started from Gaussian tokens, the fastest networks reached the floor and the "
        "measured rate came out 15% slow).  One layer's log-factor spreads by sqrt(psi'(3/2) + psi'(2))/2 = 0.63 "
        "(chi-square ratios of the projected values), a network's 30-layer rate by 0.113, the mean of 4096 by "
        "0.0018: 0.006 is 3.4 standard errors, 3.1% of the digamma term.  Measured (T = 32, window 3, 2048 "
        "networks): -0.2143 +- 0.0025 against -0.2147 at d = 4, -0.3308 +- 0.004 against -0.3285 at d = 3.  The "
        "check resolves ~3.5% of the log-rate and rejects -1/(2d) for the digamma term.  (At d = 16 from Gaussian "
        "tokens, 16 networks over 300 layers, the tolerance was 0.012 and the check resolved 25-31%)"),
    quick=dict(T=8, d=4, window=1, depth=30, seeds=4096),
    full=dict(T=32, d=4, window=3, depth=30, seeds=8192),
    mutants={
        "values change nothing: log |lambda_2|": lambda p, s: _digamma_gap_as(p, s, 0.0),
        "-1/(2d) for the digamma term": lambda p, s: _digamma_gap_as(p, s, -1 / (2 * s["d"])),
        "mean-square factor (d-1)/(d-2) instead of the Lyapunov exponent": lambda p, s: _digamma_gap_as(
            p, s, -0.5 * math.log((s["d"] - 1) / (s["d"] - 2))),
        **off_by(0.05),
    },
    base_seeds=(720, 1720, 2720),
)
def ln_gaussian_values_rate(*, T, d, window, depth, seeds, eps=1e-3, tolerance=0.006, seed=720,
                            device=None) -> Comparison:
    mask = make_mask("sliding", T, window=window, device=device)
    X0 = _second_mode_tokens(mask, d, eps, seeds, seed, device)
    rel = propagate(X0, depth, attention="qk", s2=logit_s2(d, "rms"), mask=mask, norm="rms", values="gaussian",
                    value_var=1.0 / d, seed=seed + 1, stable_ranks=False).relative_mu
    log_rate = (rel[-1].log() - rel[0].log()) / depth  # (seeds,)
    return Comparison(prediction=math.log(theory.gaussian_value_rate(mask, d)), measured=log_rate.mean().item(),
                      tolerance=tolerance)


@register(
    "ln-sliding-causal-transient",
    claim=("Without dropout, sliding-causal masks with RMS LayerNorm and orthogonal values do collapse: the "
           "long plateau is the transient of the non-normal linear consensus dynamics, and mu/||X|| reaches "
           "1e-6 at the layer where ||P A^t||_F/||A^t||_F does, A the row-normalised mask"),
    source="derived",
    tolerance_note=(
        "absolute 3 layers on the first layer where the seed-mean relative mu <= 1e-6: near-uniform attention "
        "(logit variance 1/9) and the normalisation shift the curve by ~1 layer (measured 120-123 against 121 "
        "over 10 base seeds at T = 128, 138 vs 139 for 1e-10; 68-72 vs 71 at T = 64); the decay is ~0.55 per "
        "layer there, so 3 layers is a factor ~6 in mu.  Quick mode runs T = 128, where 3 layers are 2.5% of "
        "the prediction: the check resolves ~4% (at T = 64 it resolved 4-6%).  Simulated with identity values, "
        "exact in law for Haar ones (_ln_run): 121-123 over 8 base seeds"),
    quick=dict(T=128, d=64, window=3, seeds=2),
    full=dict(T=256, d=64, window=3, seeds=4),
    mutants={
        "asymptotic rate 1/2 from layer 0 (no transient)": lambda p, s: math.ceil(math.log(1e-6) / math.log(0.5)),
        "front arrival 2(T-1)/w alone": lambda p, s: 2 * (s["T"] - 1) / s["window"],
        "10 layers later": lambda p, s: p + 10,
        **off_by(0.06),
    },
    base_seeds=(730, 1730, 2730),
)
def ln_sliding_causal_transient(*, T, d, window, seeds, level=1e-6, seed=730, device=None) -> Comparison:
    mask = make_mask("sliding-causal", T, window=window)
    prediction = consensus_transient_layer(mask, level)
    rel, _ = _ln_run("sliding-causal", T, d, window, prediction + 20, seeds=seeds, seed=seed,
                     device=device)
    below = (rel.mean(-1) <= level).nonzero()
    measured = int(below[0]) if below.numel() else rel.shape[0]
    return Comparison(prediction=float(prediction), measured=float(measured), tolerance=3.0)


def _first_gradient_rms(T, *, centred, seeds, s2, seed, device):
    """Root-mean-square over ``seeds`` networks of ||dL/dW_V^(1)||_F, L = ||X_2||^2, d = T, value_var = 1."""
    X0 = torch.eye(T, dtype=torch.float64, device=device).expand(seeds, T, T)  # orthonormal rows, as any (law of X0 W)
    g = weight_gradients(X0, 2, value_var=1.0, centred=centred, s2=s2, seed=seed + 1)
    return g.W_V[0].square().mean().sqrt().item()


def _growth_exponent(f, T1, T2):
    return math.log(f(T2) / f(T1)) / math.log(T2 / T1)


def _slopes(T1, T2, s2, **kw):
    """The predicted log-log slopes (A, A_perp) of the rms gradient between T1 and T2 (A to next order)."""
    return torch.tensor([_growth_exponent(lambda T: theory.first_value_gradient_rms(T, T, s2, **kw), T1, T2)
                         for kw in (dict(next_order=True), dict(centred=True))], dtype=torch.float64)


@register(
    "gradient-growth-T",
    claim=("Two i.i.d. attention layers with values N(0, 1), d = T (rebuttal Fig. VIII): the value gradient of "
           "layer 1 grows like T^(3/2) with A (exactly: sqrt(4 d^2 (2d+1)) times sum s^4(A_2 A_1 X_0) = 1 + 2c/T) and "
           "stays flat with A_perp (sum s^4 ~ 3T (c/T)^4): the fix stops the growth.  Both halves, on the same draws"),
    source="derived",
    tolerance_note=(
        "absolute (0.045, 0.2) on the log-log slopes (A, A_perp) of the rms gradient between T = 32 (512 networks) "
        "and T = 128 (64), A and A_perp on the same logits and values.  The slope's spread comes mostly from the "
        "small T, where networks are cheap: with 64 networks at both ends the log rms spread by sd 0.026 (A) and "
        "0.11 (A_perp, heavy-tailed) at T = 32 against 0.015 and 0.011 at T = 128, so over 30 seeds the A slope "
        "spread by sd 0.021 (1.430-1.523) and the A_perp slope reached -0.29: 2 of 24 seeds beyond the base seeds "
        "failed.  Now, over the base seeds and 30 more (740 + 10007 k): A 1.446-1.508, mean 1.479 (sd 0.014) "
        "against 1.4795 to next order (1.4958 to leading order), so 0.045 is 3.3 sd and the check resolves 4.8% of "
        "the exponent (worst base seed; a T-exponent 5% off is rejected).  A_perp: the O(c/T) corrections to sum "
        "s^4, not derived (the rms is 17% low at T = 32), leave a measured slope of +0.079 to +0.133 (mean 0.105, "
        "sd 0.012) against the leading -0.004; they fade with T (+0.04 between 64 and 256, -0.016 between 128 and "
        "512): 0.2 leaves 8 sd above the mean, far below the growth 3/2 of A"),
    quick=dict(T1=32, T2=128, seeds=64, seeds_T1=512),
    full=dict(T1=128, T2=512, seeds=32, seeds_T1=128),
    mutants={
        "Euler's estimate 2L/(sigma_V d): slope L - 1 = 1 with A":
            lambda p, s: p - torch.tensor([0.5, 0.0], dtype=p.dtype),
        "the fix does nothing: slope 3/2 for A_perp too": lambda p, s: torch.stack([p[0], p[0]]),
        "no growth with A either": lambda p, s: torch.stack([p[1], p[1]]),
        "T-exponent of A 5% high": lambda p, s: p * torch.tensor([1.05, 1.0], dtype=p.dtype),
        "T-exponent of A 5% low": lambda p, s: p * torch.tensor([0.95, 1.0], dtype=p.dtype),
        "half the growth with A_perp (slope 3/4)": lambda p, s: torch.stack([p[0], 0.5 * p[0]]),
        **off_by(0.06),
    },
    base_seeds=(740, 1740, 2740),
)
def gradient_growth_t(*, T1, T2, seeds, seeds_T1, s2=LN2, seed=740, device=None) -> Comparison:
    def rms(centred):  # seeds networks at T2, seeds_T1 at T1 (where they are cheap and the rms is noisier)
        return lambda T: _first_gradient_rms(T, centred=centred, seeds=seeds_T1 if T == T1 else seeds, s2=s2,
                                             seed=seed, device=device)

    measured = torch.tensor([_growth_exponent(rms(centred), T1, T2) for centred in (False, True)], dtype=torch.float64)
    return Comparison(prediction=_slopes(T1, T2, s2), measured=measured,
                      tolerance=torch.tensor([0.045, 0.2], dtype=torch.float64))


@register(
    "noniso-bulk-radius",
    claim=("Query-key attention on Gaussian tokens with unit-norm rows (X X^T != I), gamma = d/T: the outlier stays "
           "1 and the bulk radius is sqrt((c + s2/gamma)/T), larger than the isometric sqrt(c/T) for small gamma "
           "(the spread of the token Gram matrix), so the gap persists for every gamma, including gamma > 1"),
    source="derived",
    tolerance_note=(
        "relative 5% on the mean over networks of the largest non-outlier eigenvalue modulus: one network's spreads by "
        "~5% (sd) at T = 200-400, the mean of 16 (quick mode, T = 300) by ~1.3%.  At gamma = 0.5 the finite-T offset of"
        " the edge is below the noise from T = 200 to 400: mean/prediction over 10 seed sets beyond the base seeds "
        "(3750, 4750, ..., 12750) 0.976-1.016 (mean 0.999) at T = 200 (24 networks), 0.978-1.015 (mean 1.001, sd 1.3%) "
        "at T = 300 (16), 0.978-1.033 (mean 0.999, sd 1.65%) at T = 400 (12, the former quick mode, which resolved 7.0%"
        " for 1.4x the CPU); measured before at T = 800: +2.4% (gamma = 2), +1.1% (gamma = 0.1).  The base seeds "
        "resolve 5.3%, those 10 others 5.2-6.9% (10 more, 10757 + 10007 k: 5.4-7.7%)"),
    quick=dict(T=300, gamma=0.5, seeds=16),
    full=dict(T=800, gamma=2.0, seeds=4),
    mutants={
        **off_exponent(-0.5),
        "isometric radius sqrt(c/T)": lambda p, s: theory.bulk_radius(s["T"], s["s2"]),
        "c (1 + 1/gamma) / T": lambda p, s: math.sqrt(theory.c(s["s2"]) * (1 + 1 / s["gamma"]) / s["T"]),
        **off_by(0.1),
    },
    base_seeds=(750, 1750, 2750),
    coarse=("the largest bulk modulus has a finite-T offset (measured, not derived: below 1% at gamma = 0.5, up to "
            "2.4% at gamma = 2) and one network's spreads by ~5%; the disc and Frobenius statistics do not apply "
            "(the bulk is not a uniform disc: ||A_perp||_F / sqrt(T) is 0.64 of the radius at gamma = 0.5), so the "
            "check resolves ~5-7%"),
)
def noniso_bulk_radius(*, T, gamma, seeds, s2=LN2, seed=750, device=None) -> Comparison:
    d = round(gamma * T)
    A = noniso_attention(T, d, s2, seeds=seeds, seed=seed, device=device, dtype=torch.float64)
    return Comparison(prediction=theory.noniso_bulk_radius(T, d, s2),
                      measured=spectral_gap(A).bulk_radius.mean().item(), tolerance=0.05, relative=True)


@register(
    "noniso-width-slope",
    claim=("Gaussian tokens with unit-norm rows (X0 X0^T != I), gamma = T/d (d < T allowed): the median Frobenius "
           "stable rank of A_perp X0 W_V over T tends to max_z z/((1+z)^2(1+gamma z)^2), the free product of three "
           "Marchenko-Pastur laws (A_perp, X0 X0^T and W_V); the orthonormal-input law lacks one factor (1+gamma z)"),
    source="derived",
    tolerance_note=(
        "relative 5% on the median over networks (median for the heavy e^g tail of centred-width-slope). Measured "
        "median/prediction: 0.995-1.023 over 10 seed sets of 12 at T = 512, gamma = 1 (quick: the base seeds and "
        "780 + 10007 k, k = 3..9); 1.012-1.032 over 3 "
        "sets of 8 at T = 1024, gamma = 2 (full). The excess grows as d shrinks (a finite-d effect of the row "
        "norms and the edge, measured, not derived): 1.04-1.09 at d = 64-128 for gamma = 2-4, so not a tight "
        "setting there. The 10% high law sits 7.5-10.5% above the quick medians, the orthonormal law 40%"),
    quick=dict(T=512, gamma=1.0, seeds=12),
    full=dict(T=1024, gamma=2.0, seeds=8),
    mutants={
        "orthonormal-input law centred_width_slope(gamma)": lambda p, s: theory.centred_width_slope(s["gamma"]),
        **off_by(0.1),
    },
    base_seeds=(780, 1780, 2780),
    coarse=("the finite-d excess of the median (-0.5% to +2.3% at T = d = 512) is measured, not derived, so with the "
            "median's spread the check resolves ~6-8%; the orthonormal-input law (40% off) is rejected"),
)
def noniso_width_slope(*, T, gamma, seeds, s2=LN2, seed=780, device=None) -> Comparison:
    d = round(T / gamma)
    sr = noniso_width_ranks(T, d, s2, seeds=seeds, seed=seed, device=device) / T
    return Comparison(prediction=theory.noniso_width_slope(gamma), measured=sr.median().item(), tolerance=0.05,
                      relative=True)


def _without_hermite(p, s):
    """deep-layer-gap's prediction with the higher-Hermite term dropped: at layer 0 (orthonormal tokens,
    C = P/T) R^2 = s2 (T - 1)/T^2 alone; at deeper layers the term is negligible (prediction kept)."""
    T = s["T"]
    return torch.stack([torch.tensor(math.sqrt(s["s2"] * (T - 1)) / T, dtype=p.dtype), *p[1:]])


@register(
    "deep-layer-gap",
    claim=("At a deeper layer the tokens are correlated; the attention of that layer keeps its outlier at exactly 1, "
           "and its bulk radius is sqrt(s2 ||C||_F^2 + (e^{s_h} - 1 - s_h)/T), C the token covariance, "
           "s_h = s2 tr(C)^2 (free_probability.correlated_bulk_radius): at layer 0 (orthonormal tokens) both terms "
           "count (the higher-Hermite one is 30% of R^2), at layer 2 the radius is orders of magnitude below "
           "sqrt(c/T) and the linear term alone matters"),
    source="derived",
    tolerance_note=(
        "relative 10% at layer 0 and 25% at layer 2 (the inputs of layers 1 and 3: query-key attention, RMS norm, "
        "Gaussian values, T = d = 256) on the mean over 8 networks of the largest non-outlier |lambda| against the "
        "mean predicted radius.  Layer 0: the edge sits +3.4% to +4.7% above on the base seeds, +2.1% to +5.3% "
        "(mean +3.9%) on 10 more (a finite-T edge excess and d_qk = T), one network's value spreads by 2-4%; "
        "dropping the higher-Hermite term lowers the prediction by 16% and is rejected.  Layer 2: the token "
        "covariance is dominated by few directions, one network's value spreads by 13-27% (sd), and the base seeds "
        "gave ratios 1.04-1.06, 10 more 0.95-1.15 (mean 1.05; earlier seed sets 0.93-1.16); the higher-Hermite "
        "term is ~1e-7 of R^2 there.  Resolves 16.3% on the base seeds, 13.5-17% on the 10 others"),
    quick=dict(T=256, seeds=8),
    full=dict(T=512, seeds=8),
    mutants={
        "isometric radius sqrt(c/T) (correlation ignored)": lambda p, s: torch.full_like(
            p, theory.bulk_radius(s["T"], s["s2"])),
        "the higher-Hermite term dropped": _without_hermite,
        "radius halved": lambda p, s: 0.5 * p,
        "radius doubled": lambda p, s: 2.0 * p,
        **off_by(0.3),
    },
    base_seeds=(760, 1760, 2760),
    coarse=("the largest bulk modulus: a +2-5% edge excess at layer 0, and at layer 2 a 13-27% per-network spread "
            "(few directions dominate the token covariance), so the check resolves ~15-20%"),
)
def deep_layer_gap(*, T, seeds, layers=(0, 2), s2=LN2, seed=760, device=None) -> Comparison:
    """Orthonormal tokens X0 (T = d) as the identity, exactly in law: (X0 W_Q, X0 W_K, X0 W_V) has the law of
    (W_Q, W_K, W_V) for orthogonal X0, so every state and every attention matrix has the same law (no QR)."""
    X0 = torch.eye(T, dtype=torch.float64, device=device).expand(seeds, T, T)
    states = propagate(X0, max(layers), attention="qk", s2=s2, norm="rms", values="gaussian", value_var=1.0 / T,
                       seed=seed + 1, keep_states=True, stable_ranks=False).states
    prediction, measured = [], []
    for layer in layers:
        X = states[layer]
        g = torch.Generator(device=X.device).manual_seed(seed + 2)
        W_Q, W_K = qk_weights(T, T, s2, batch=(seeds,), generator=g, device=X.device, dtype=X.dtype)
        prediction.append(correlated_bulk_radius(X, s2).mean())
        measured.append(spectral_gap(qk_attention(X, W_Q, W_K)).bulk_radius.mean())
    return Comparison(prediction=torch.stack(prediction), measured=torch.stack(measured),
                      tolerance=torch.tensor([0.1 if layer == 0 else 0.25 for layer in layers], dtype=torch.float64),
                      relative=True)


def _local_exponent(T, d, seeds, s2, seed, device, mask=None) -> torch.Tensor:
    """d log mu_1 / d log mu_0 of one query-key layer (RMS norm, orthogonal values) near consensus, per network
    (seeds,): two starts at eps = 1e-2 and 1e-3 with the same directions and weights."""
    mu = {}
    for eps in (1e-2, 1e-3):
        X0 = near_consensus(T, d, eps, seeds=seeds, seed=seed, device=device, dtype=torch.float64)
        run = propagate(X0, 1, attention="qk", s2=s2, mask=mask, norm="rms", values="orthogonal", seed=seed + 1,
                        stable_ranks=False)
        mu[eps] = run.mu.cpu()  # (2, seeds)
    return (mu[1e-2][1] / mu[1e-3][1]).log() / (mu[1e-2][0] / mu[1e-3][0]).log()


@register(
    "dong-cubic-collapse",
    claim=("Query-key attention near consensus without a mask (RMS norm, orthogonal values): mu(X_1) ~ K mu(X_0)^3, so "
           "pure attention collapses doubly exponentially, mu_L ~ mu_0^(3^L) (Dong et al.): the row-varying logits are "
           "quadratic in the deviations, and the linear (column-profile) part is rank one and moves nothing "
           "(with a mask it does: dong-masked-exponential)"),
    source="derived",
    tolerance_note=(
        "absolute 0.01 on d log mu_1 / d log mu_0 measured between eps = 1e-2 and 1e-3 with the same weights and "
        "directions: the next-order term is O(eps^2) relative; measured offsets 2e-5 to 6e-5 (s2 = 1, 3 seeds), "
        "2e-4 at s2 = 4; mu_1 ~ 1e-9 stays far above the float floor"),
    quick=dict(T=64, d=64, seeds=4),
    full=dict(T=256, d=256, seeds=8),
    mutants={
        "exponential (i.i.d. model, or a mask): slope 1": lambda p, s: 1.0,
        "quadratic (column profile counted): slope 2": lambda p, s: 2.0,
        "one order too many: slope 4": lambda p, s: 4.0,
        **off_by(0.005),
    },
    base_seeds=(770, 1770, 2770),
)
def dong_cubic_collapse(*, T, d, seeds, s2=1.0, seed=770, device=None) -> Comparison:
    slope = _local_exponent(T, d, seeds, s2, seed, device)
    return Comparison(prediction=3.0, measured=slope.mean().item(), tolerance=0.01)


DONG_MASKS = ("causal", "sliding")


@register(
    "dong-masked-exponential",
    claim=("With a causal or a sliding-window mask, query-key attention near consensus maps mu to K mu (local "
           "exponent 1, not Dong et al.'s 3): each row renormalises the common column profile over its own window, so "
           "the part of the logits linear in the deviations no longer gives every row the same weights, and "
           "uniform attention on the mask already contracts mu by |lambda_2| < 1 (chapter 14): exponential collapse, "
           "as Wu et al.'s bound says"),
    source="derived",
    tolerance_note=(
        "absolute 0.002 on d log mu_1 / d log mu_0 per mask (causal, sliding window 4; T = d = 64, 4 networks), "
        "measured between eps = 1e-2 and 1e-3 with the same weights and directions as dong-cubic-collapse: the "
        "next-order term is O(eps) relative for the masked (linear) map; measured 0.9998-1.0002 over 10 base "
        "seeds.  The unmasked exponent 3 (and 2) are rejected"),
    quick=dict(T=64, d=64, seeds=4, window=4),
    full=dict(T=256, d=256, seeds=8, window=8),
    mutants={
        "Dong et al.'s cube without the mask: slope 3": lambda p, s: 3.0 * torch.ones_like(p),
        "quadratic: slope 2": lambda p, s: 2.0 * torch.ones_like(p),
        **off_by(0.003),
    },
    base_seeds=(775, 1775, 2775),
)
def dong_masked_exponential(*, T, d, seeds, window, s2=1.0, seed=775, device=None) -> Comparison:
    slopes = [_local_exponent(T, d, seeds, s2, seed, device, mask=make_mask(kind, T, window=window, device=device))
              .mean() for kind in DONG_MASKS]
    return Comparison(prediction=torch.ones(len(DONG_MASKS), dtype=torch.float64), measured=torch.stack(slopes),
                      tolerance=0.002)


@register(
    "geshkovski-consensus-rate",
    claim=("Attention flow on the sphere (Geshkovski et al.) as residual layers x_i <- N(x_i + h sum_j A_ij x_j), "
           "W_Q = W_K = I, identity values, RMS norm: once the tokens form one cluster, mu decays at ln(1 + h) per "
           "layer whatever beta, T and d (attention is uniform to O(beta mu^2) and the normalisation divides the "
           "deviations by 1 + h)"),
    source="derived",
    tolerance_note=(
        "relative 1e-6 on the worst over seeds of the per-layer rate, a log-linear fit (decay_rate) from each "
        "run's first layer with mu / ||X||_F <= 1e-5 down to ~1e-10, from Gaussian tokens: the corrections are "
        "O(mu^2) relative (measured -1.05 mu^2 at beta = 1, -5.4 mu^2 at beta = 4, d = 16, -14 mu^2 at beta = 8, "
        "d = 256), <= 2e-9 in the window; float64 round-off of mu at 1e-10 (~1e-6 relative) over "
        "Delta log mu = 11.5 leaves ~1e-7. Measured: worst errors 0.9e-9 to 1.0e-8 per setting over 12 runs, "
        "h = 0.1 and 0.25, beta = 1-8 and d = 2-256 from Gaussian tokens, beta = 16 and 64 from near consensus"),
    quick=dict(T=32, d=16, beta=4.0, h=0.25, depth=200, seeds=4),
    full=dict(T=64, d=256, beta=8.0, h=0.1, depth=800, seeds=8),
    mutants={
        "continuous-time rate h": lambda p, s: s["h"],
        "rate beta h (temperature-dependent)": lambda p, s: s["beta"] * s["h"],
        "rate 2 ln(1 + h) (mu squared)": lambda p, s: 2 * p,
        **off_by(1.5e-6),
    },
    base_seeds=(790, 1790, 2790),
)
def geshkovski_consensus_rate(*, T, d, beta, h, depth, seeds, seed=790, device=None) -> Comparison:
    X0 = normalise(gaussian_tokens(T, d, batch=seeds, seed=seed, device=device, dtype=torch.float64), "rms")
    prediction = theory.sphere_consensus_rate(h)
    rates = tail_rate(sphere_flow(X0, depth, beta, h))  # (seeds,)
    measured = rates[(rates - prediction).abs().nan_to_num(math.inf).argmax()].item()
    return Comparison(prediction=prediction, measured=measured, tolerance=1e-6, relative=True)
