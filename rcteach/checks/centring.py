"""Checks on centred attention's relatives: differential attention A1 - lam A2 (chapter 3)."""

from __future__ import annotations

import torch

from .. import theory
from ..attention import centre
from ..metrics import spectral_gap, spectrum
from ..theory import LN2
from ..variants import random_differential_attention
from .registry import Comparison, off_by, off_exponent, register
from .statistics import disc_radius


@register(
    "differential-outlier",
    claim="Differential attention A1 - lam A2 has its outlier eigenvalue at exactly 1 - lam (when 1 - lam > bulk "
          "radius)",
    source="exact",
    tolerance_note="eigenvalue round-off in float64 is ~T * 1e-16 * ||D||; 1e-10 leaves a wide margin",
    mutants={"outlier 1 - lam^2": lambda p, s: abs(s["lam"] - s["lam"] ** 2)},  # the deviation it implies
    quick=dict(T=256, lam=0.8, seeds=4),
    full=dict(T=1024, lam=0.8, seeds=8),
    base_seeds=(3, 1003, 2003),
)
def differential_outlier(*, T, lam, seeds, s2=LN2, seed=3, device=None) -> Comparison:
    D = random_differential_attention(T, lam, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    worst = (spectral_gap(D).outlier - theory.differential_outlier(lam)).abs().max().item()
    return Comparison(prediction=0.0, measured=worst, tolerance=1e-10)


@register(
    "differential-bulk-radius",
    claim=("The non-outlier eigenvalues of A1 - lam A2 (independent A1, A2) fill a disc of radius sqrt((1 + lam^2) c / "
           "T) (measured as sqrt(2 mean |lambda|^2) over the bulk, as in bulk-radius)"),
    source="derived",
    tolerance_note=(
        "relative 3%, as for bulk-radius: the disc statistic of every bulk eigenvalue has no edge excess (the largest "
        "modulus sits 2-3% above the prediction at T = 128..256); its finite-T deficit is ~1-2% at T = 256 and its "
        "seed spread ~0.5% per draw"
    ),
    mutants={**off_exponent(-0.5), **off_by(0.05),
             "(1 - lam)^2 for (1 + lam^2)": lambda p, s: p * abs(1 - s["lam"]) / (1 + s["lam"] ** 2) ** 0.5,
             "the radius of one map, sqrt(c/T)": lambda p, s: p / (1 + s["lam"] ** 2) ** 0.5},
    quick=dict(T=256, lam=0.8, seeds=8),
    full=dict(T=1024, lam=0.8, seeds=16),
    base_seeds=(4, 1004, 2004),
)
def differential_bulk_radius(*, T, lam, seeds, s2=LN2, seed=4, device=None) -> Comparison:
    D = random_differential_attention(T, lam, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    # centring sends the eigenvalue 1 - lam to 0 and keeps the rest: drop the zero, the smallest modulus
    measured = disc_radius(spectrum(centre(D))[..., :-1]).mean().item()
    return Comparison(prediction=theory.differential_bulk_radius(T, s2, lam), measured=measured, tolerance=0.03,
                      relative=True)
