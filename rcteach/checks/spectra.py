"""Checks on the spectrum of random softmax attention (Mind the Gap, section 1 of the notes)."""

from __future__ import annotations

import torch

from .. import theory
from ..attention import centre, random_attention
from ..metrics import spectral_gap, spectrum, spectrum_distance
from ..theory import LN2
from .registry import Comparison, register

FLOAT64_IDENTITY = "float64 round-off on sums of T terms of size 1/T: |error| ~ T * 1e-16; 1e-10 leaves a wide margin"


@register(
    "row-stochastic",
    claim="Softmax attention is row-stochastic: every row sums to 1 (A1 = 1)",
    source="exact",
    tolerance_note=FLOAT64_IDENTITY,
    quick=dict(T=256, seeds=4),
    full=dict(T=1024, seeds=8),
)
def row_stochastic(*, T, seeds, s2=LN2, seed=0, device=None) -> Comparison:
    A = random_attention(T, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    worst = (A.sum(-1) - 1).abs().max().item()
    return Comparison(prediction=0.0, measured=worst, tolerance=1e-10)


@register(
    "outlier-one",
    claim="The eigenvalue of largest modulus of softmax attention is exactly 1",
    source="exact",
    tolerance_note="eigenvalue round-off in float64 is ~T * 1e-16 * ||A||; 1e-10 leaves a wide margin",
    quick=dict(T=256, seeds=4),
    full=dict(T=1024, seeds=8),
)
def outlier_one(*, T, seeds, s2=LN2, seed=0, device=None) -> Comparison:
    A = random_attention(T, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    worst = (spectral_gap(A).outlier - 1).abs().max().item()
    return Comparison(prediction=0.0, measured=worst, tolerance=1e-10)


@register(
    "bulk-radius",
    claim="The non-outlier eigenvalues of softmax attention fill a disc of radius sqrt(c/T)",
    source="paper",
    tolerance_note=(
        "relative 8%: the largest bulk modulus sits 2-5% above sqrt(c/T) at T = 256..1024 (finite-T "
        "edge excess, shrinking with T), and its seed-to-seed spread averaged over the seeds is ~1%"
    ),
    quick=dict(T=256, seeds=8),
    full=dict(T=1024, seeds=16),
)
def bulk_radius(*, T, seeds, s2=LN2, seed=1, device=None) -> Comparison:
    A = random_attention(T, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    measured = spectral_gap(A).bulk_radius.mean().item()
    return Comparison(prediction=theory.bulk_radius(T, s2), measured=measured, tolerance=0.08, relative=True)


@register(
    "centring-swaps-outlier",
    claim="spec(A_perp) = {0} U spec(A) minus {1}: centring sends the outlier to 0 and keeps the bulk exactly",
    source="exact",
    tolerance_note="matched eigenvalues agree to float64 eigensolver accuracy (~1e-14 here); 1e-10 leaves margin",
    quick=dict(T=128),
    full=dict(T=512),
)
def centring_swaps_outlier(*, T, s2=LN2, seed=2, device=None) -> Comparison:
    A = random_attention(T, s2, seed=seed, device=device, dtype=torch.float64)
    ev = spectrum(A)
    expected = torch.cat([torch.zeros(1, dtype=ev.dtype, device=ev.device), ev[1:]])
    measured = spectrum_distance(spectrum(centre(A)), expected)
    return Comparison(prediction=0.0, measured=measured, tolerance=1e-10)
