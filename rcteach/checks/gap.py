"""Checks on the spectral gap beyond the bulk radius (chapter "The spectral gap").

The outlier, the bulk radius and centring are checked in :mod:`rcteach.checks.spectra`.  Here:
the bulk fills its disc uniformly, the singular values of A_perp follow the quarter-circle law
(median everywhere, edge only for light tails), and query-key attention on orthogonal tokens
matches the i.i.d. model with s2 = beta^2 sigma_q^2 sigma_k^2 r^4.

bulk-median-modulus runs at T = 500 (quick) and 1000 (full), not 512 and 1024 (it shares bulk-radius's
eigenvalues): float64 ``geev`` costs 3.4x more at 512 and 2.1x more at 1024 (:func:`rcteach.linalg.eigvals`).
sv-median stays at 512: ``eigvalsh`` has no such cliff (0.74 vs 0.77 s for the check at 500 vs 512).
"""

from __future__ import annotations

import math

import torch

from .. import theory
from ..attention import attention_map, centre, random_attention
from ..logits import random_qk_logits
from ..metrics import spectral_gap, squared_singular_values
from ..theory import LN2
from .registry import Comparison, off_by, off_exponent, register
from .shared import attention_spectrum
from .statistics import disc_radius


@register(
    "bulk-median-modulus",
    claim=("the bulk eigenvalues fill their disc uniformly: the median modulus is R/sqrt(2), R the disc radius "
           "sqrt(2 mean |lambda|^2) of the same bulk (whose value sqrt(c/T) bulk-radius checks)"),
    source="derived",
    tolerance_note=("relative 2.5% on the mean over 2 matrices (T = 500) of median |lambda| / R; a ratio of two "
                    "statistics of the same eigenvalues, so the finite-T shrinking of the whole bulk (the median "
                    "modulus alone sits 4.3%, 2.4%, 1.5% below sqrt(c/(2T)) at T = 128, 256, 512) cancels: over its "
                    "3 base seeds and 10 more the ratio sat 0.985-1.005 of 1/sqrt(2) (mean 0.994, sd 0.6%; at T = 256 "
                    "with 8 matrices 0.995 +- 0.37%).  2.5% is 3 sd and the -0.6% left; the check resolves "
                    "2.6-3.9%.  The eigenvalues are bulk-radius's (shared.attention_spectrum).  (Against "
                    "sqrt(c/(2T)) with 4 matrices the tolerance was 3% and the check resolved 4-6%)"),
    mutants={**off_by(0.05), "the radius taken for the median (ratio 1)": lambda p, s: p * 2 ** 0.5,
             "a Gaussian cloud of the same second moment (median sqrt(ln 2 / 2) R)":
                 lambda p, s: math.sqrt(math.log(2) / 2)},
    quick=dict(T=500, seeds=2),
    full=dict(T=1000, seeds=16),
    base_seeds=(1, 1001, 2001),
)
def bulk_median_modulus(*, T, seeds, s2=LN2, seed=1, device=None) -> Comparison:
    bulk = attention_spectrum(T, s2, seeds, seed, device)[..., 1:]  # (seeds, T - 1): the outlier removed
    measured = (bulk.abs().median(-1).values / disc_radius(bulk)).mean().item()
    prediction = theory.eigenvalue_median_modulus(T, s2) / theory.bulk_radius(T, s2)  # 1/sqrt(2)
    return Comparison(prediction=prediction, measured=measured, tolerance=0.025, relative=True)


@register(
    "sv-median",
    claim="the median singular value of A_perp is the quarter-circle median 0.808 sqrt(c/T)",
    source="derived",
    tolerance_note=("relative 1.5(1 + c)(1 + 2c)/T + 1%: a finite-T allowance plus ~3 standard errors of the 8-seed "
                    "mean (which spreads by ~0.2%).  The deficit grows with s2 (heavy tails): measured ~2.7% at T = "
                    "256 and 1.6% at T = 512 for s2 = ln 2 (10 base seeds, sd 0.2%), 3.4% at T = 512 for s2 = 1.  The "
                    "allowance is 3 times the deficit that the next-order Frobenius norm of A_perp alone implies for a "
                    "singular value, (1 + c)(1 + 2c)/(2T): 1.8% at T = 512, s2 = ln 2 (quick mode; resolves ~4.5%; "
                    "with 4 times it the check resolved 4.6-5%), 3.5% at s2 = 1.  The ratio of the median to the rms "
                    "singular value has nearly the same deficit (-1.2% at T = 512): the heavy tail changes the shape, "
                    "not only the scale"),
    mutants={**off_exponent(-0.5), **off_by(0.05),
             "the semicircle-edge scale 2 sqrt(c/T) taken for the median":
                 lambda p, s: 2 * p / theory.QUARTER_CIRCLE_MEDIAN},
    quick=dict(T=512, seeds=8),
    full=dict(T=1024, seeds=8),
    base_seeds=(4, 1004, 2004),
)
def sv_median(*, T, seeds, s2=LN2, seed=4, device=None) -> Comparison:
    A = random_attention(T, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    sv = squared_singular_values(centre(A))[..., :-1].sqrt()  # (seeds, T - 1): the exact zero (A_perp 1 = 0) removed
    measured = sv.median(-1).values.mean().item()
    c = theory.c(s2)
    return Comparison(prediction=theory.singular_value_median(T, s2), measured=measured,
                      tolerance=1.5 * (1 + c) * (1 + 2 * c) / T + 0.01, relative=True)


@register(
    "sv-edge-light-tails",
    claim="for light tails (s2 = 0.25) the largest singular value of A_perp is at the quarter-circle edge 2 sqrt(c/T)",
    source="derived",
    tolerance_note=("relative 3.5%, valid only for small s2: one seed spreads by ~1.5% at T = 256 (0.5% on the "
                    "8-seed mean) and the mean sits ~1% below the edge; at s2 >= 1 the largest entry dominates and "
                    "sigma_max is 10-50% above the edge (see the chapter)"),
    mutants={**off_exponent(-0.5), **off_by(0.05),
             "the eigenvalue radius sqrt(c/T) taken for the edge": lambda p, s: p / 2},
    quick=dict(T=256, seeds=8),
    full=dict(T=1024, seeds=8),
    base_seeds=(5, 1005, 2005),
)
def sv_edge_light_tails(*, T, seeds, s2=0.25, seed=5, device=None) -> Comparison:
    A = random_attention(T, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    measured = squared_singular_values(centre(A))[..., 0].sqrt().mean().item()
    return Comparison(prediction=theory.singular_value_edge(T, s2), measured=measured, tolerance=0.035, relative=True)


def _qk_setting(T, d, d_qk, s2, seeds, seed, device):
    """QK logits on orthogonal LayerNorm-ed tokens (r^2 = d, sigma = 1/sqrt(d)) at inverse temperature sqrt(s2)."""
    beta = math.sqrt(s2)  # with the defaults sigma_q^2 sigma_k^2 r^4 = 1, so s2 = beta^2
    g = random_qk_logits(T, d, d_qk, beta=beta, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    predicted_s2 = theory.logit_variance(1 / math.sqrt(d), 1 / math.sqrt(d), float(d), beta=beta)
    return g, predicted_s2


@register(
    "qk-logit-variance",
    claim="query-key logits on orthogonal tokens of norm r have variance beta^2 sigma_q^2 sigma_k^2 r^4, whatever d_qk",
    source="derived",
    tolerance_note=("relative 4%: the variance of one matrix's logits fluctuates with its W_Q, W_K by "
                    "~sqrt(2/(T d_qk)) per factor (~2% at T = 128, d_qk = 64); the 8-seed mean by ~1%"),
    mutants={**off_by(0.05), "r^2 for r^4 (token norm not squared)": lambda p, s: p / s["d"],
             "a factor d_qk kept (no 1/d_qk in the weights)": lambda p, s: p * s["d_qk"]},
    quick=dict(T=128, d=256, d_qk=64, seeds=8),
    full=dict(T=512, d=1024, d_qk=64, seeds=8),
    base_seeds=(6, 1006, 2006),
)
def qk_logit_variance(*, T, d, d_qk, seeds, s2=LN2, seed=6, device=None) -> Comparison:
    g, predicted = _qk_setting(T, d, d_qk, s2, seeds, seed, device)
    measured = g.var(dim=(-2, -1)).mean().item()
    return Comparison(prediction=predicted, measured=measured, tolerance=0.04, relative=True)


@register(
    "qk-bulk-radius",
    claim="query-key attention on orthogonal tokens (d_qk >> T) has bulk radius sqrt(c/T), c = e^{s2} - 1, as in the "
          "i.i.d. model",
    source="derived",
    tolerance_note=("relative 8%, as the largest bulk modulus of bulk-radius had: finite-T edge excess of 2-5% plus "
                    "the seed spread, so it resolves 8-16% per seed (12.7% on its 3 base seeds), not 5% (an "
                    "exception).  The disc statistic of bulk-radius does not apply here: the query-key bulk is not a "
                    "uniform disc at finite d_qk (sqrt(2 mean |lambda|^2) sits 6% below sqrt(c/T) at T = 128..256, "
                    "d_qk = 2T..4T).  Tested at d_qk >> T, where the i.i.d. model applies; at d_qk = 64 < T = 256 the "
                    "radius is ~6% above sqrt(c/T) with a ~6% per-seed spread (see the chapter). The median over "
                    "seeds is used: occasional seeds have an eigenvalue far outside the disc (up to +30%), which would "
                    "dominate a mean. Over 60 seeds (100-159) the 16-seed median is +2.3% +- 1.5% (-1.3% to +6.4%)"),
    mutants={**off_exponent(-0.5, fraction=0.1), **off_by(0.15),
             "c replaced by s2": lambda p, s: (s["s2"] / s["T"]) ** 0.5},
    quick=dict(T=128, d=512, d_qk=512, seeds=16),
    full=dict(T=512, d=2048, d_qk=2048, seeds=16),
    base_seeds=(7, 1007, 2007),
    coarse=('the largest bulk modulus: a finite-T edge excess of 2-5% plus rare seeds far outside the disc; the disc '
            'statistic does not apply (the query-key bulk is not a uniform disc at finite d_qk)'),
)
def qk_bulk_radius(*, T, d, d_qk, seeds, s2=LN2, seed=7, device=None) -> Comparison:
    g, predicted_s2 = _qk_setting(T, d, d_qk, s2, seeds, seed, device)
    measured = spectral_gap(attention_map(g)).bulk_radius.median().item()  # typical matrix: see tolerance_note
    return Comparison(prediction=theory.bulk_radius(T, predicted_s2), measured=measured, tolerance=0.08, relative=True)


@register(
    "qk-frobenius-norm",
    claim="query-key attention on orthogonal tokens has ||A||_F^2 ~ 1 + c, as in the i.i.d. model",
    source="derived",
    tolerance_note=("relative 3.5%: finite-T bias -c(1+2c)/T = -1.2% at T = 256; a row's logits share one query, "
                    "whose norm fluctuates (chi^2 with d_qk degrees), raising the effective c by ~1.5% at d_qk = 64; "
                    "the 8-seed mean spreads by ~0.5% (100 seeds: -0.5% +- 0.5%, -2.0% to +0.8%)"),
    mutants={**off_by(0.05), "the centred value c": lambda p, s: theory.frobenius_sq(s["s2"], centred=True)},
    quick=dict(T=256, d=512, d_qk=64, seeds=8),
    full=dict(T=512, d=1024, d_qk=64, seeds=8),
    base_seeds=(8, 1008, 2008),
)
def qk_frobenius_norm(*, T, d, d_qk, seeds, s2=LN2, seed=8, device=None) -> Comparison:
    g, predicted_s2 = _qk_setting(T, d, d_qk, s2, seeds, seed, device)
    measured = torch.linalg.matrix_norm(attention_map(g)).square().mean().item()
    return Comparison(prediction=theory.frobenius_sq(predicted_s2), measured=measured, tolerance=0.035, relative=True)
