"""Checks on masked dynamics beyond a fixed mask (chapters "Collapse under masks" and "LayerNorm"): masks that
change from layer to layer, attention sinks, the reviewers' skip connections, positional biases and Pre-LN,
and what mu measures (Wu et al.'s reviews)."""

from __future__ import annotations

import torch

from .. import theory
from ..depth import propagate
from ..masks import (block_mask, centre_eccentricity, centre_nodes, consensus_rate, make_mask, periodic_consensus_rate,
                     with_sinks)
from ..theory import LN2
from ..tokens import orthonormal_tokens
from .registry import Comparison, off_by, register
from .statistics import mean_se


def _late_rate(relative_mu, start, stop) -> float:
    """Per-layer factor of the mean relative mu between layers ``start`` and ``stop``."""
    r = relative_mu.mean(-1)
    return (r[stop] / r[start]).item() ** (1.0 / (stop - start))


@register(
    "time-varying-mask-rate",
    claim=("Masks may change from layer to layer: two block masks, neither of which mixes its blocks, collapse "
           "together when some token reaches all others over a fixed number of layers; with uniform attention mu "
           "shrinks per period by sigma_2^2 of the blocks' overlap matrix (1/2 for blocks 16|16 and 8|16|8)"),
    source="derived",
    tolerance_note=("exact up to round-off: uniform attention within blocks is a projection, so after the first "
                    "period the centred part shrinks by exactly sigma_2^2 per period; absolute 1e-9 on each "
                    "factor (simulation and the eigenvalue of the period's product)"),
    mutants={**off_by(3e-9), "either mask alone (no mixing: 1)": lambda p, s: torch.ones_like(p),
             "1/2 per layer, not per period": lambda p, s: p ** 2,
             "sigma_2 (not squared)": lambda p, s: p.sqrt()},
    quick=dict(sizes_a=(16, 16), sizes_b=(8, 16, 8), periods=5),
    full=dict(sizes_a=(32, 32), sizes_b=(16, 24, 24), periods=8),
    base_seeds=(100, 200, 300),
)
def time_varying_mask_rate(*, sizes_a, sizes_b, periods, seed=100, device=None) -> Comparison:
    masks = [block_mask(sizes_a), block_mask(sizes_b)]
    T = sum(sizes_a)
    X0 = orthonormal_tokens(T, T, batch=2, seed=seed, device=device, dtype=torch.float64)
    tr = propagate(X0, 2 * periods + 1, masks=masks, beta=0.0, values="orthogonal", seed=seed + 1,
                   stable_ranks=False)
    per_period = (tr.mu[3::2] / tr.mu[1:-2:2]).max().item()  # after layer 1, layer 3, ...: each period's factor
    prediction = theory.alternating_blocks_rate(sizes_a, sizes_b)
    return Comparison(prediction=torch.tensor([prediction, prediction], dtype=torch.float64),
                      measured=torch.tensor([per_period, periodic_consensus_rate(masks)], dtype=torch.float64),
                      tolerance=1e-9)


SKIP_ROWS = (("causal", 1.0, (60, 100)), ("causal", 0.5, (110, 150)), ("complete", 1.0, (20, 40)))


@register(
    "skip-mask-rate",
    claim=("A skip connection under a mask, X' = N(X + a A X) (uniform attention, RMS norm): every eigenvalue "
           "lambda of the masked attention becomes (1 + a lambda)/(1 + a), so the causal rate 1/2 becomes "
           "(1 + a/2)/(1 + a) and the complete mask's 0 becomes 1/(1 + a): slower, still exponential"),
    source="derived",
    tolerance_note=("relative 0.5% on each per-layer factor, fitted over late layers (60-150) for the causal mask, "
                    "whose triangular, non-normal transient decays like (lambda_3/lambda_2)^t (0.89^t: < 0.3% by "
                    "layer 60), and over layers 20-40 for the complete mask (before the float floor); the "
                    "normalisation changes the rate only at second order in mu near consensus"),
    mutants={**off_by(0.01), "no skip: lambda_2": lambda p, s: torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64),
             "(1 + a lambda)/(1 + a) squared": lambda p, s: p ** 2},
    quick=dict(T=32, d=64, seeds=2),
    full=dict(T=64, d=64, seeds=4),
    base_seeds=(110, 210, 310),
)
def skip_mask_rate(*, T, d, seeds, seed=110, device=None) -> Comparison:
    X0 = orthonormal_tokens(T, d, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    measured, prediction = [], []
    for kind, a, (start, stop) in SKIP_ROWS:
        mask = make_mask(kind, T)
        tr = propagate(X0, stop, mask=mask, beta=0.0, values="identity", norm="rms", skip=a, seed=seed + 1,
                       stable_ranks=False)
        measured.append(_late_rate(tr.relative_mu, start, stop))
        prediction.append(consensus_rate(mask, skip=a))
    as_t = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    return Comparison(prediction=as_t(prediction), measured=as_t(measured), tolerance=0.005, relative=True)


@register(
    "preln-keeps-centred-part",
    claim=("Pre-LN, X' = X + A(Z) Z W_V with Z = N(X): with uniform attention over the complete mask the centred "
           "part of the residual stream never changes (P 1 1^T = 0), so mu stays at mu(X_0) while the consensus "
           "grows by at most 1 per layer: the relative distance falls like 1/t, not exponentially"),
    source="exact",
    tolerance_note=("max over layers of |mu_t / mu_0 - 1|: float64 round-off ~1e-15 a layer; 1e-10 leaves margin.  "
                    "The second element is the violation of the bound relative mu_t >= mu_0 / sqrt(mu_0^2 + T "
                    "(|xbar_0| + t)^2) (the mean token moves by at most one unit-norm token per layer), 0 when it "
                    "holds"),
    mutants={"mu shrinks like the post-LN layer (x1/2 per layer)": lambda p, s: p + torch.tensor([0.5, 0.0]),
             "relative mu falls exponentially (x1/2 per layer)": lambda p, s: p + torch.tensor([0.0, 1.0])},
    quick=dict(T=32, d=64, seeds=4, depth=64),
    full=dict(T=64, d=128, seeds=8, depth=256),
    base_seeds=(120, 220, 320),
)
def preln_keeps_centred_part(*, T, d, seeds, depth, seed=120, device=None) -> Comparison:
    X0 = orthonormal_tokens(T, d, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    tr = propagate(X0, depth, beta=0.0, values="orthogonal", norm="rms", skip=1.0, norm_position="pre", seed=seed + 1,
                   stable_ranks=False)
    drift = ((tr.mu / tr.mu[0]) - 1).abs().max().item()
    mean0 = X0.mean(-2).norm(dim=-1)  # |xbar_0|, (seeds,)
    t = torch.arange(depth + 1, dtype=torch.float64)[:, None]
    bound = tr.mu[0] / (tr.mu[0] ** 2 + T * (mean0 + t) ** 2).sqrt()  # (depth + 1, seeds)
    violation = (bound - tr.relative_mu).clamp_min(0).max().item()
    return Comparison(prediction=torch.zeros(2, dtype=torch.float64), measured=torch.tensor([drift, violation]),
                      tolerance=1e-10)


@register(
    "sink-centre",
    claim=("An attention sink (a token every token may attend to, as in streaming attention) is a centre node "
           "that reaches every token in one layer: sliding-causal + sink has centre 0 with eccentricity 1 "
           "(against ceil((T - 1)/w) without the sink), and the same uniform-attention rate 1/2"),
    source="derived",
    tolerance_note="exact: graph properties and |lambda_2| of a triangular matrix (its diagonal), compared exactly",
    mutants={"the sink is no shortcut (eccentricity ceil((T-1)/w))":
             lambda p, s: ((0,), theory.window_hops(s["T"], s["window"]), p[2]),
             "rate 1/(w + 2) (the sink's share)": lambda p, s: (p[0], p[1], round(1 / (s["window"] + 2), 12))},
    quick=dict(T=32, window=3),
    full=dict(T=256, window=8),
)
def sink_centre(*, T, window) -> Comparison:
    mask = with_sinks(make_mask("sliding-causal", T, window=window))
    measured = (tuple(centre_nodes(mask)), centre_eccentricity(mask), round(consensus_rate(mask), 12))
    return Comparison(prediction=((0,), 1, 0.5), measured=measured)


@register(
    "mu-without-alignment",
    claim=("mu -> 0 does not mean aligned tokens: through centred attention without LayerNorm X -> 0 (mu^2 shrinks "
           "like (c/T)^L) while the norm-weighted mean cosine of distinct tokens stays 0 in expectation; with RMS "
           "LayerNorm (unit tokens) mu^2/T = 1 - the mean cosine over all pairs, exactly"),
    source="derived",
    tolerance_note=("first element, absolute: 3 standard errors of the mean over networks of the weighted cosine "
                    "sum_{i != j} x_i.x_j / ((T - 1) sum |x_i|^2) at the last layer (its numerator has mean 0 "
                    "exactly: distinct rows of A_perp are independent with E A_perp = 0); second, the identity's "
                    "largest violation over layers and networks, float64 round-off (tolerance 1e-10)"),
    mutants={"mu -> 0 means alignment: cosine -> 1": lambda p, s: p + torch.tensor([1.0, 0.0]),
             "the identity off by 1/T (i != j only)": lambda p, s: p + torch.tensor([0.0, 1.0 / s["T"]])},
    quick=dict(T=64, d=64, seeds=16, depth=6),
    full=dict(T=128, d=128, seeds=32, depth=8),
    base_seeds=(130, 230, 330),
)
def mu_without_alignment(*, T, d, seeds, depth, s2=LN2, seed=130, device=None) -> Comparison:
    X0 = orthonormal_tokens(T, d, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    X = propagate(X0, depth, centred=True, values="identity", s2=s2, seed=seed + 1, keep_states=True,
                  stable_ranks=False).states[-1]
    norms2 = X.square().sum(-1)  # (seeds, T)
    off = X.sum(-2).square().sum(-1) - norms2.sum(-1)  # sum_{i != j} x_i . x_j
    weighted = off / ((T - 1) * norms2.sum(-1))
    mean, se = mean_se(weighted)
    Z = propagate(X0, depth, norm="rms", values="orthogonal", s2=s2, seed=seed + 1, keep_states=True,
                  stable_ranks=False).states[1:]
    unit = Z / Z.norm(dim=-1, keepdim=True)
    mean_cos = (unit @ unit.transpose(-1, -2)).mean((-2, -1))  # over all pairs (i, j), diagonal included
    mu2 = (Z - Z.mean(-2, keepdim=True)).square().sum((-2, -1))
    violation = (mu2 / T - (1 - mean_cos)).abs().max().item()
    return Comparison(prediction=torch.zeros(2, dtype=torch.float64), measured=torch.tensor([mean, violation]),
                      tolerance=torch.tensor([3 * se, 1e-10]))
