"""Checks for the papers' remaining figures (Part IV of the book: chapters "Depth with the fix",
"Theorem 2 of Wu et al., settled numerically", "Correlated tokens" and "Wider reading"; section 2b of
the theory notes)."""

from __future__ import annotations

import math

import torch

from .. import _deprecation, theory
from ..attention import noniso_attention as _noniso_attention
from ..attention import qk_attention, random_attention
from ..depth import propagate, weight_gradients
from ..free_probability import correlated_bulk_radius, gram_stable_rank_limit
from ..masks import consensus_rate, consensus_transient_layer, make_mask
from ..logits import qk_weights
from ..metrics import decay_rate, spectral_gap, squared_singular_values, stable_rank_from_squared
from ..norms import normalise
from ..theory import LN2
from ..sphere import sphere_flow, tail_rate
from ..tokens import gaussian_tokens, orthonormal_tokens
from ..tokens import near_consensus as _near_consensus
from ..width import noniso_width_ranks as _noniso_width_ranks
from ..wu_table import logit_s2
from .registry import Comparison, off_by, register

INTERIM = "interim (issue 26, being sharpened on this branch): "

# the simulation helpers of chapters 15 and 16 moved to the package (imported above under private names, so
# that the old names reach __getattr__ and warn)
__getattr__ = _deprecation.moved_attributes(__name__, {"noniso_attention": "rcteach.attention:noniso_attention",
                                                       "near_consensus": "rcteach.tokens:near_consensus",
                                                       "noniso_width_ranks": "rcteach.width:noniso_width_ranks"})


@register(
    "figvii-free-product",
    claim="After L layers of centred i.i.d. attention with fresh Gaussian values (T = d, rebuttal Fig. VII), "
          "the Gram stable rank of X_L tends to T k^(2k)/(k+1)^(2k+1) with k = 2L (Fuss-Catalan law of order 2L)",
    source="derived",
    tolerance_note=(
        "relative 8%: the Gram stable rank hangs on s_1^4, whose edge fluctuations spread one network's value "
        "by ~12% (sd) at T = 256, the mean of 24 networks by ~2.5%; 32 networks over 5 seed sets gave -0.4% to "
        "-5.7%, mean -2.1% (finite-T bias): 8% is the bias plus ~2.5 sd. Full: L = 2 at T = 1024 (8 networks "
        "measured +0.8%; the finite-T excess is +11% at T = 150), 4% relative"
    ),
    quick=dict(T=256, depth=1, seeds=24),
    full=dict(T=1024, depth=2, seeds=8, tolerance=0.04),
    mutants={
        "order k = L (the values forgotten; Marchenko-Pastur at L = 1)": lambda p, s: gram_stable_rank_limit(
            s["T"], s["depth"]),
        "order k = 2L + 1": lambda p, s: gram_stable_rank_limit(s["T"], 2 * s["depth"] + 1),
        **off_by(0.18),
    },
    base_seeds=(700, 1700, 2700),
    coarse=INTERIM + "the finite-T bias of s_1^4 at order 2L (-2% to -6% at L = 1, T = 256) is not derived",
)
def figvii_free_product(*, T, depth, seeds, s2=LN2, tolerance=0.08, seed=700, device=None) -> Comparison:
    X0 = orthonormal_tokens(T, T, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    tr = propagate(X0, depth, centred=True, values="gaussian", value_var=1.0 / T, s2=s2, seed=seed + 1)
    return Comparison(prediction=theory.centred_depth_gram_stable_rank(T, depth),
                      measured=tr.stable_rank_gram[-1].mean().item(), tolerance=tolerance, relative=True)


def _ln_run(kind, T, d, window, depth, *, seeds, values, seed, device):
    """Relative mu (depth + 1, seeds) through RMS-LayerNorm-ed query-key attention at the PyTorch-init logit
    scale (``layernorm.logit_s2``), Gaussian tokens, fresh values per layer (Wu et al.'s Theorem 2 setting)."""
    mask = make_mask(kind, T, window=window, device=device)
    X0 = gaussian_tokens(T, d, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    extra = dict(value_var=1.0 / d) if values == "gaussian" else {}
    return propagate(X0, depth, attention="qk", s2=logit_s2(d, "rms"), mask=mask, norm="rms", values=values,
                     seed=seed + 1, **extra).relative_mu, mask


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
        "worst of the seeds, fitted from layer 150 (after the transient) to the 1e-12 floor; the rate is set "
        "by the linearisation at consensus, and the fits agree with lambda_2 to ~1e-6"),
    quick=dict(T=32, d=64, window=3, depth=300, start=150, seeds=2),
    full=dict(T=32, d=64, window=3, depth=500, start=150, seeds=8),
    mutants={
        "bound form (1 - eps^r)^(1/r), eps = 1/(2w+1), r = diameter": lambda p, s: _bound_form(s["T"], s["window"]),
        **off_by(0.0008),
        "gap 1 - lambda_2 10% wide": lambda p, s: 1 - 1.1 * (1 - p),
        "the causal rate 1/2": lambda p, s: 0.5,
    },
    base_seeds=(710, 1710, 2710),
)
def ln_theorem2_rate(*, T, d, window, depth, start, seeds, seed=710, device=None) -> Comparison:
    rel, mask = _ln_run("sliding", T, d, window, depth, seeds=seeds, values="orthogonal", seed=seed, device=device)
    measured = decay_rate(rel.cpu(), start, floor=1e-12)
    prediction = consensus_rate(mask)
    worst = measured[(measured - prediction).abs().argmax()].item()
    return Comparison(prediction=prediction, measured=worst, tolerance=5e-4)


@register(
    "ln-gaussian-values-rate",
    claim=("With RMS LayerNorm and fresh Gaussian values (Wu et al.'s open case) a sliding window still "
           "collapses, faster than with orthogonal values: the typical per-layer factor of mu is "
           "|lambda_2| exp((psi((d-1)/2) - psi(d/2))/2), psi the digamma function"),
    source="derived",
    tolerance_note=(
        "absolute 0.012 on the mean over seeds of the log-rate (log mu_stop - log mu_start)/(stop - start): "
        "one run's log-rate fluctuates by ~sd(log chi-ratio)/sqrt(layers) ~ 0.018 at d = 16 over 300 layers; "
        "the mean of 16 spread by 0.0040 (sd over 20 seed sets, mean -0.0547 vs -0.0560 predicted): 0.012 is "
        "3 sd. Full: 64 seeds, 0.006. The mutant 'values change nothing' sits 0.034 away"),
    quick=dict(T=32, d=16, window=3, depth=400, start=100, seeds=16),
    full=dict(T=32, d=16, window=3, depth=400, start=100, seeds=64, tolerance=0.006),
    mutants={
        **off_by(0.45),
        "values change nothing: log |lambda_2|": lambda p, s: p - theory.gaussian_value_lyapunov(s["d"]),
        "mean-square factor (d-1)/(d-2) instead of the Lyapunov exponent": lambda p, s: (
            p - theory.gaussian_value_lyapunov(s["d"]) + 0.5 * math.log((s["d"] - 1) / (s["d"] - 2))),
    },
    base_seeds=(720, 1720, 2720),
    coarse=INTERIM + "the log-rate of 16 networks spreads by 0.004, 12% of the Gaussian-values term",
)
def ln_gaussian_values_rate(*, T, d, window, depth, start, seeds, tolerance=0.012, seed=720, device=None) -> Comparison:
    rel, mask = _ln_run("sliding", T, d, window, depth, seeds=seeds, values="gaussian", seed=seed, device=device)
    log_rate = (rel[-1].log() - rel[start].log()) / (depth - start)  # (seeds,)
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
        "(logit variance 1/9) and the normalisation shift the curve by ~1 layer (measured 121 vs 121 at "
        "T = 128 and 138 vs 139 for 1e-10; 68-72 vs 71 over 10 seed pairs at T = 64); the decay is ~0.55 "
        "per layer there, so 3 layers is a factor ~6 in mu"),
    quick=dict(T=64, d=64, window=3, seeds=2),
    full=dict(T=128, d=64, window=3, seeds=8),
    mutants={
        "asymptotic rate 1/2 from layer 0 (no transient)": lambda p, s: math.ceil(math.log(1e-6) / math.log(0.5)),
        "front arrival 2(T-1)/w alone": lambda p, s: 2 * (s["T"] - 1) / s["window"],
        "10 layers later": lambda p, s: p + 10,
        **off_by(0.08),
    },
    base_seeds=(730, 1730, 2730),
    coarse=INTERIM + "a layer count, absolute 3 layers on ~71",
)
def ln_sliding_causal_transient(*, T, d, window, seeds, level=1e-6, seed=730, device=None) -> Comparison:
    mask = make_mask("sliding-causal", T, window=window)
    prediction = consensus_transient_layer(mask, level)
    rel, _ = _ln_run("sliding-causal", T, d, window, prediction + 20, seeds=seeds, values="orthogonal", seed=seed,
                     device=device)
    below = (rel.mean(-1) <= level).nonzero()
    measured = int(below[0]) if below.numel() else rel.shape[0]
    return Comparison(prediction=float(prediction), measured=float(measured), tolerance=3.0)


def _first_gradient_rms(T, *, centred, seeds, s2, seed, device):
    """Root-mean-square over ``seeds`` networks of ||dL/dW_V^(1)||_F, L = ||X_2||^2, d = T, value_var = 1."""
    X0 = orthonormal_tokens(T, T, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    g = weight_gradients(X0, 2, value_var=1.0, centred=centred, s2=s2, seed=seed + 1)
    return g.W_V[0].square().mean().sqrt().item()


def _growth_exponent(f, T1, T2):
    return math.log(f(T2) / f(T1)) / math.log(T2 / T1)


@register(
    "gradient-growth-T",
    claim=("Two i.i.d. attention layers with values N(0, 1), d = T (rebuttal Fig. VIII): the value gradient of "
           "layer 1 grows like T^(3/2) with A (exactly: sqrt(4 d^2 (2d+1)) times sum s^4(A_2 A_1 X_0) ~ 1) and "
           "stays flat with A_perp (centred=True; sum s^4 ~ 3T (c/T)^4): the fix stops the growth"),
    source="derived",
    tolerance_note=(
        "absolute 0.1 on the log-log slope of the rms gradient between T1 and T2: one network's gradient "
        "spreads by ~15% (sd) at T = 64 and ~8% at T = 256, so the rms of 16 has ~4% and ~2%, and the slope "
        "over a factor 4 in T ~0.03 (sd). A: 10 seed sets gave 1.44-1.53 (mean 1.49, predicted 1.498). "
        "A_perp: the O(c/T) corrections to sum s^4 (leading order predicts -0.003) leave a measured slope of "
        "+0.055 (mean of 10 seed sets, 0.003-0.081) at T = 64-256; 0.1 covers it at ~2 sd"),
    quick=dict(T1=64, T2=256, seeds=16),
    full=dict(T1=128, T2=512, seeds=32),
    mutants={
        "Euler's estimate 2L/(sigma_V d): slope L - 1 = 1": lambda p, s: p - 0.5,
        "the fix does nothing: slope 3/2 for A_perp too": lambda p, s: 1.5 if s["centred"] else p + 0.25,
        "no growth": lambda p, s: 0.0 if not s["centred"] else p - 0.5,
        **off_by(0.13),
    },
    base_seeds=(740, 1740, 2740),
    coarse=INTERIM + "the slope of 16 networks over a factor 4 in T spreads by ~0.03",
)
def gradient_growth_t(*, T1, T2, seeds, centred=False, s2=LN2, seed=740, device=None) -> Comparison:
    measured = _growth_exponent(lambda T: _first_gradient_rms(T, centred=centred, seeds=seeds, s2=s2, seed=seed,
                                                               device=device), T1, T2)
    prediction = _growth_exponent(lambda T: theory.first_value_gradient_rms(T, T, s2, centred=centred), T1, T2)
    return Comparison(prediction=prediction, measured=measured, tolerance=0.1)


@register(
    "noniso-bulk-radius",
    claim=("Query-key attention on Gaussian tokens with unit-norm rows (X X^T != I), gamma = d/T: the outlier stays "
           "1 and the bulk radius is sqrt((c + s2/gamma)/T), larger than the isometric sqrt(c/T) for small gamma "
           "(the spread of the token Gram matrix), so the gap persists for every gamma, including gamma > 1"),
    source="derived",
    tolerance_note=(
        "relative 5% on the mean over networks of the largest non-outlier eigenvalue modulus: one network's "
        "spreads by ~4-6% (sd) at T = 400, the mean of 16 by ~1.3%; the finite-T offset of the edge measured "
        "-2.4% (gamma = 0.5, T = 400 and 800), +2.4% (gamma = 2, T = 800), +1.1% (gamma = 0.1, T = 800); "
        "10 seed sets of 8 gave -1.5% to +4.3%. At T = 200 the offsets reach ~10%: not a tight setting"),
    quick=dict(T=400, gamma=0.5, seeds=16),
    full=dict(T=800, gamma=2.0, seeds=4),
    mutants={
        "isometric radius sqrt(c/T)": lambda p, s: theory.bulk_radius(s["T"], s["s2"]),
        "c (1 + 1/gamma) / T": lambda p, s: math.sqrt(theory.c(s["s2"]) * (1 + 1 / s["gamma"]) / s["T"]),
        **off_by(0.11),
    },
    base_seeds=(750, 1750, 2750),
    coarse=INTERIM + "the edge offset of the largest bulk modulus (-2.4% to +2.4%) is measured, not derived",
)
def noniso_bulk_radius(*, T, gamma, seeds, s2=LN2, seed=750, device=None) -> Comparison:
    d = round(gamma * T)
    A = _noniso_attention(T, d, s2, seeds=seeds, seed=seed, device=device, dtype=torch.float64)
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
        "median/prediction: 1.004-1.027 over 8 seed sets of 24 at T = 512, gamma = 1 (quick); 1.012-1.032 over 3 "
        "sets of 8 at T = 1024, gamma = 2 (full). The excess grows as d shrinks (a finite-d effect of the row "
        "norms and the edge, measured, not derived): 1.04-1.09 at d = 64-128 for gamma = 2-4, so not a tight "
        "setting there. The 10% high law sits 6.6-9% above the quick medians, the orthonormal law 40%"),
    quick=dict(T=512, gamma=1.0, seeds=24),
    full=dict(T=1024, gamma=2.0, seeds=8),
    mutants={
        "orthonormal-input law centred_width_slope(gamma)": lambda p, s: theory.centred_width_slope(s["gamma"]),
        **off_by(0.1),
    },
    base_seeds=(780, 1780, 2780),
    coarse=INTERIM + "the finite-d excess of the median (+0.4% to +3%) is measured, not derived",
)
def noniso_width_slope(*, T, gamma, seeds, s2=LN2, seed=780, device=None) -> Comparison:
    d = round(T / gamma)
    sr = _noniso_width_ranks(T, d, s2, seeds=seeds, seed=seed, device=device) / T
    return Comparison(prediction=theory.noniso_width_slope(gamma), measured=sr.median().item(), tolerance=0.05,
                      relative=True)


@register(
    "deep-layer-gap",
    claim=("At a deeper layer the tokens are correlated; the attention of that layer keeps its outlier at exactly 1, "
           "and its bulk radius is sqrt(s2 ||C||_F^2 + (e^{s_h} - 1 - s_h)/T), C the token covariance, "
           "s_h = s2 tr(C)^2 (free_probability.correlated_bulk_radius): orders of magnitude below sqrt(c/T)"),
    source="derived",
    tolerance_note=(
        "relative 20% on the mean over networks of the largest non-outlier |lambda| against the mean predicted "
        "radius, at the input of layer 3 (query-key attention, RMS norm, Gaussian values, T = d): with the token "
        "covariance dominated by few directions, one network's value spreads by 5-25% (sd); 8 seed sets of 8 "
        "at T = 256 gave ratios 0.93-1.16"),
    quick=dict(T=256, layer=2, seeds=8),
    full=dict(T=512, layer=2, seeds=8),
    mutants={
        "isometric radius sqrt(c/T) (correlation ignored)": lambda p, s: theory.bulk_radius(s["T"], s["s2"]),
        "radius halved": lambda p, s: 0.5 * p,
        "radius doubled": lambda p, s: 2.0 * p,
        **off_by(0.55),
    },
    base_seeds=(760, 1760, 2760),
    coarse=INTERIM + "one network's radius spreads by 5-25%",
)
def deep_layer_gap(*, T, layer, seeds, s2=LN2, seed=760, device=None) -> Comparison:
    X0 = orthonormal_tokens(T, T, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    X = propagate(X0, layer, attention="qk", s2=s2, norm="rms", values="gaussian", value_var=1.0 / T, seed=seed + 1,
                  keep_states=True).states[layer]
    g = torch.Generator(device=X.device).manual_seed(seed + 2)
    W_Q, W_K = qk_weights(T, T, s2, batch=(seeds,), generator=g, device=X.device, dtype=X.dtype)
    return Comparison(prediction=correlated_bulk_radius(X, s2).mean().item(),
                      measured=spectral_gap(qk_attention(X, W_Q, W_K)).bulk_radius.mean().item(), tolerance=0.2,
                      relative=True)


@register(
    "dong-cubic-collapse",
    claim=("Query-key attention near consensus (RMS norm, orthogonal values): mu(X_1) ~ K mu(X_0)^3, so pure attention "
           "collapses doubly exponentially, mu_L ~ mu_0^(3^L) (Dong et al.): the row-varying logits are quadratic "
           "in the deviations, and the linear (column-profile) part is rank one and moves nothing"),
    source="derived",
    tolerance_note=(
        "absolute 0.01 on d log mu_1 / d log mu_0 measured between eps = 1e-2 and 1e-3 with the same weights and "
        "directions: the next-order term is O(eps^2) relative; measured offsets 2e-5 to 6e-5 (s2 = 1, 3 seeds), "
        "2e-4 at s2 = 4; mu_1 ~ 1e-9 stays far above the float floor"),
    quick=dict(T=64, d=64, seeds=4),
    full=dict(T=256, d=256, seeds=8),
    mutants={
        "exponential (i.i.d. model): slope 1": lambda p, s: 1.0,
        "quadratic (column profile counted): slope 2": lambda p, s: 2.0,
        **off_by(0.005),
    },
    base_seeds=(770, 1770, 2770),
)
def dong_cubic_collapse(*, T, d, seeds, s2=1.0, seed=770, device=None) -> Comparison:
    mu = {}
    for eps in (1e-2, 1e-3):
        X0 = _near_consensus(T, d, eps, seeds=seeds, seed=seed, device=device, dtype=torch.float64)
        run = propagate(X0, 1, attention="qk", s2=s2, norm="rms", values="orthogonal", seed=seed + 1)
        mu[eps] = run.mu.cpu()  # (2, seeds)
    slope = (mu[1e-2][1] / mu[1e-3][1]).log() / (mu[1e-2][0] / mu[1e-3][0]).log()
    return Comparison(prediction=3.0, measured=slope.mean().item(), tolerance=0.01)


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
