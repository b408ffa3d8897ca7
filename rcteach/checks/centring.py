"""Checks on centred attention's relatives: differential attention A1 - lam A2 (chapter 3)."""

from __future__ import annotations

import torch

from .. import theory
from ..attention import centre
from ..metrics import spectral_gap, spectrum
from ..variants import random_differential_attention
from ..theory import LN2
from .registry import Comparison, register


@register(
    "differential-outlier",
    claim="Differential attention A1 - lam A2 has its outlier eigenvalue at exactly 1 - lam (when 1 - lam > bulk radius)",
    source="exact",
    tolerance_note="eigenvalue round-off in float64 is ~T * 1e-16 * ||D||; 1e-10 leaves a wide margin",
    quick=dict(T=256, lam=0.8, seeds=4),
    full=dict(T=1024, lam=0.8, seeds=8),
)
def differential_outlier(*, T, lam, seeds, s2=LN2, seed=3, device=None) -> Comparison:
    D = random_differential_attention(T, lam, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    worst = (spectral_gap(D).outlier - theory.differential_outlier(lam)).abs().max().item()
    return Comparison(prediction=0.0, measured=worst, tolerance=1e-10)


@register(
    "differential-bulk-radius",
    claim="The non-outlier eigenvalues of A1 - lam A2 (independent A1, A2) fill a disc of radius sqrt((1 + lam^2) c / T)",
    source="derived",
    tolerance_note=(
        "relative 8%, as for bulk-radius: the largest bulk modulus sits 2-3% above the prediction at "
        "T = 128..256 over 20 seeds (finite-T edge excess), with a seed spread of ~3% per draw, ~1% on the mean"
    ),
    quick=dict(T=256, lam=0.8, seeds=8),
    full=dict(T=1024, lam=0.8, seeds=16),
)
def differential_bulk_radius(*, T, lam, seeds, s2=LN2, seed=4, device=None) -> Comparison:
    D = random_differential_attention(T, lam, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    # centring removes the eigenvalue 1 - lam and keeps the rest: the largest modulus left is the bulk edge
    measured = spectrum(centre(D))[..., 0].abs().mean().item()
    return Comparison(prediction=theory.differential_bulk_radius(T, s2, lam), measured=measured, tolerance=0.08, relative=True)
