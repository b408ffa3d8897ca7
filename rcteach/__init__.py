"""rcteach: rank collapse in attention layers, taught and checked numerically.

Conventions: tokens are rows, X has shape (*batch, T, d); attention A has shape (*batch, T, T)
and acts from the left (A X); weights act from the right (X W).  Every function batches over
leading dimensions, runs on any torch device (:func:`default_device`), computes in float64 on
the CPU by default, and takes ``seed=`` or ``generator=`` wherever it draws random numbers.
"""

from . import plotting, theory
from .attention import ACTIVATIONS, LN2, attention, attention_map, centre, random_attention, uniform_attention
from .checks import run_check, run_checks
from .device import default_device
from .masks import (
    MASK_KINDS,
    centre_eccentricity,
    centre_nodes,
    diameter,
    is_quasi_strongly_connected,
    is_strongly_connected,
    make_mask,
    mask_graph,
)
from .metrics import SpectralGap, mu, spectral_gap, spectrum, spectrum_distance, stable_rank
from .tokens import gaussian_tokens, orthonormal_tokens

__version__ = "0.1.0"

__all__ = [
    "ACTIVATIONS",
    "LN2",
    "MASK_KINDS",
    "SpectralGap",
    "attention",
    "attention_map",
    "centre",
    "centre_eccentricity",
    "centre_nodes",
    "default_device",
    "diameter",
    "gaussian_tokens",
    "is_quasi_strongly_connected",
    "is_strongly_connected",
    "make_mask",
    "mask_graph",
    "mu",
    "orthonormal_tokens",
    "plotting",
    "random_attention",
    "run_check",
    "run_checks",
    "spectral_gap",
    "spectrum",
    "spectrum_distance",
    "stable_rank",
    "theory",
    "uniform_attention",
]
