"""rcteach: rank collapse in attention layers, taught and checked numerically.

Conventions: tokens are rows, X has shape (*batch, T, d); attention A has shape (*batch, T, T)
and acts from the left (A X); weights act from the right (X W).  Every function batches over
leading dimensions, runs on any torch device (:func:`default_device`), computes in float64 on
the CPU by default, and takes ``seed=`` or ``generator=`` wherever it draws random numbers.
"""

import os as _os
import sys as _sys

# `python -m rcteach ...` puts the working folder first on sys.path (unless -P), so a `csv.py` in a
# folder of student submissions graded from inside it would be imported by the grader itself.
# While -m locates this package, sys.argv[0] is "-m": then drop that entry before importing anything.
if _sys.argv[:1] == ["-m"] and not _sys.flags.safe_path and _sys.path[:1] == [_os.getcwd()]:
    del _sys.path[0]

from . import linalg, plotting, theory, threads
from .attention import attention_map, centre, qk_attention, random_attention, uniform_attention
from .checks import check, run_check, run_checks
from .depth import LayerGradients, Trajectory, propagate, weight_gradients
from .device import default_device
from .layers import LayerConfig, layer
from .logits import leading_term, qk_logits, random_logits, random_qk_logits
from .masks import (
    MASK_KINDS,
    centre_eccentricity,
    centre_nodes,
    consensus_rate,
    consensus_transient_layer,
    diameter,
    is_quasi_strongly_connected,
    is_strongly_connected,
    make_mask,
    mask_graph,
)
from .metrics import SpectralGap, decay_rate, mu, spectral_gap, spectrum, spectrum_distance, stable_rank
from .theory import ACTIVATIONS, LN2
from .solution import solution
from .tokens import gaussian_tokens, orthonormal_tokens
from .variants import random_differential_attention
from .width import width_stable_ranks

# torch's intra-op threads for the kit's small batched work: $RCTEACH_THREADS, else the user's
# $OMP_NUM_THREADS / $MKL_NUM_THREADS, else one (rcteach.threads).
threads.configure()

__version__ = "0.1.0"

__all__ = [
    "ACTIVATIONS",
    "LN2",
    "LayerConfig",
    "LayerGradients",
    "MASK_KINDS",
    "SpectralGap",
    "Trajectory",
    "attention_map",
    "centre",
    "check",
    "centre_eccentricity",
    "centre_nodes",
    "consensus_rate",
    "consensus_transient_layer",
    "decay_rate",
    "default_device",
    "diameter",
    "gaussian_tokens",
    "is_quasi_strongly_connected",
    "is_strongly_connected",
    "layer",
    "leading_term",
    "linalg",
    "make_mask",
    "mask_graph",
    "mu",
    "orthonormal_tokens",
    "qk_attention",
    "qk_logits",
    "plotting",
    "propagate",
    "solution",
    "random_attention",
    "random_differential_attention",
    "random_logits",
    "random_qk_logits",
    "run_check",
    "run_checks",
    "spectral_gap",
    "spectrum",
    "spectrum_distance",
    "stable_rank",
    "theory",
    "uniform_attention",
    "weight_gradients",
    "width_stable_ranks",
]


def __getattr__(name):
    """``rcteach.widgets`` (needs ipywidgets), ``rcteach.explorers`` (its figures) and ``rcteach.models``
    (needs transformers) load on first use."""
    if name in ("widgets", "explorers", "models"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
