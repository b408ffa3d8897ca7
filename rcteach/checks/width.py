"""Checks on rank collapse in width: the stable rank of one layer's output A X0 W_V (chapter 4).

Tolerances are computed from each run: a finite-T allowance (stated per check) plus three
standard errors of the statistic (mean, or median for the centred checks) over that run's seeds.
"""

from __future__ import annotations

import math

import torch

from .. import theory
from ..width import width_stable_ranks
from ..theory import LN2
from .registry import Comparison, register


def _mean_se(x):
    return x.mean().item(), (x.std() / math.sqrt(x.numel())).item()


def _median_se(x):
    """Median and its standard error from the interquartile range (robust to rare heavy-tail draws)."""
    q = torch.quantile(x, torch.tensor([0.25, 0.5, 0.75], dtype=x.dtype, device=x.device))
    sd = (q[2] - q[0]).item() / 1.349  # the IQR of a normal law is 1.349 sd
    return q[1].item(), 1.2533 * sd / math.sqrt(x.numel())  # se of a median ~ sqrt(pi/2) sd / sqrt(n)


@register(
    "width-stable-rank-limit",
    claim="The (Frobenius) stable rank of A X0 W_V tends to 1 + c as T grows, flat in T",
    source="derived",
    tolerance_note=(
        "absolute: |finite-T bias| + 3 standard errors of the seed mean, both computed per run. The bias "
        "is theory.width_stable_rank_bias = -c(2(1+c)^2 + gamma(c-1))/T (-0.031 at T=256, c=1; simulation "
        "agrees with it to ~20%); the seed spread comes from the chi^2_d spike, sd ~ c sqrt(2 gamma/T) per draw"
    ),
    quick=dict(T=256, gamma=1.0, seeds=16),
    full=dict(T=1024, gamma=1.0, seeds=32),
)
def width_stable_rank_limit(*, T, gamma, seeds, s2=LN2, seed=0, device=None) -> Comparison:
    sr = width_stable_ranks(T, gamma, s2, seeds=seeds, seed=seed, device=device)
    mean, se = _mean_se(sr)
    tol = abs(theory.width_stable_rank_bias(T, gamma, s2)) + 3 * se
    return Comparison(prediction=theory.width_stable_rank(s2), measured=mean, tolerance=tol)


@register(
    "width-gram-stable-rank",
    claim="The Gram stable rank of A X0 W_V is 1 + c^2 (2 + gamma) / T: it tends to 1",
    source="derived",
    tolerance_note=(
        "relative, on the excess sr - 1: 8/T finite-T allowance + 3 relative standard errors of the seed mean "
        "(per run). Over 12-40 seeds the excess was 0.90-1.05 of the prediction at T = 64..512, gamma in "
        "{0.5, 1}, s2 in {0.3, ln 2}; the shortfall at T = 64 was <= 10%"
    ),
    quick=dict(T=256, gamma=0.5, seeds=16),
    full=dict(T=1024, gamma=0.5, seeds=16),
)
def width_gram_stable_rank(*, T, gamma, seeds, s2=LN2, seed=0, device=None) -> Comparison:
    excess = width_stable_ranks(T, gamma, s2, seeds=seeds, gram=True, seed=seed, device=device) - 1
    mean, se = _mean_se(excess)
    prediction = theory.width_stable_rank_gram(T, gamma, s2) - 1
    return Comparison(prediction=prediction, measured=mean, tolerance=8 / T + 3 * se / prediction, relative=True)


@register(
    "centred-width-slope",
    claim="The median of sr(A_perp X0 W_V) / T tends to max_z z/((1+z)^2(1+gamma z)) (free product of two Marchenko-Pastur laws)",
    source="derived",
    tolerance_note=(
        "relative, on the median over seeds: 16/T finite-T allowance + 3 robust standard errors of the median "
        "(from the interquartile range of the run). The median, not the mean: a few draws in 20 have one very "
        "large e^g entry that dominates s_1 and drops sr by up to 40%, which drags the mean down even at "
        "T = 1024. The median falls short of the limit by about 1%, 4%, 7% at T = 256 for gamma = 1, 0.5, 0.2 "
        "(10 runs of 12 seeds; worst 11.5% at gamma = 0.2) and by 1-2% at T = 512 (20 seeds): within 16/T plus the "
        "seed spread"
    ),
    quick=dict(T=256, gamma=0.5, seeds=12),
    full=dict(T=1024, gamma=0.5, seeds=16),
)
def centred_width_slope(*, T, gamma, seeds, s2=LN2, seed=0, device=None) -> Comparison:
    slope = theory.centred_width_slope(gamma)
    sr = width_stable_ranks(T, gamma, s2, seeds=seeds, centred=True, seed=seed, device=device) / T
    median, se = _median_se(sr)
    return Comparison(prediction=slope, measured=median, tolerance=16 / T + 3 * se / slope, relative=True)


@register(
    "centred-width-slope-gram",
    claim="The median Gram stable rank of A_perp X0 W_V grows like (2 + gamma) slope(gamma)^2 T",
    source="derived",
    tolerance_note=(
        "relative, on the median over seeds: 24/T finite-T allowance + 3 robust standard errors of the median "
        "(per run; median for the same heavy-tail reason as centred-width-slope). The Gram version depends on "
        "s_1^4, so its finite-T deviation is larger and of either sign: at T = 256 about +1%, -4%, -10% for "
        "gamma = 1, 0.5, 0.2 (10 runs of 12 seeds; worst -17% at gamma = 0.2), within 3% at T = 512 (20 seeds)"
    ),
    quick=dict(T=256, gamma=0.5, seeds=12),
    full=dict(T=1024, gamma=0.5, seeds=16),
)
def centred_width_slope_gram(*, T, gamma, seeds, s2=LN2, seed=0, device=None) -> Comparison:
    slope = theory.centred_width_slope_gram(gamma)
    sr = width_stable_ranks(T, gamma, s2, seeds=seeds, centred=True, gram=True, seed=seed, device=device) / T
    median, se = _median_se(sr)
    return Comparison(prediction=slope, measured=median, tolerance=24 / T + 3 * se / slope, relative=True)
