"""Checks on other attention maps: ReLU and sigmoid, centred or not (``book/07_other_maps.md``).

To leading order in 1/T an element-wise map is A_ij = f(g_ij) / T = (E f) 11^T / T + Z / T with
Z i.i.d., mean 0, variance Var f: outlier E f, bulk radius sqrt(Var f / T)
(:func:`rcteach.theory.activation_moments`).  Simulations use the same logits (same seed) for a
map and for softmax when they compare the two, so the comparison does not pay for two seed spreads.
"""

from __future__ import annotations

import math

import torch

from .. import theory
from ..attention import random_attention
from ..metrics import spectral_gap, spectrum
from ..theory import LN2
from .registry import Comparison, off_by, register
from .statistics import disc_radius

OUTLIER_NOTE = (
    "relative 1.5%: lambda_1 = E f + (sum_ij Z_ij) / T^2 + O(Var f / (E f T^2)), so the outlier has "
    "no finite-T bias beyond ~0.1% and a seed spread of sd f / T per draw (0.6% of E f for ReLU, 0.25% "
    "for sigmoid with b = -2 at T = 256, as measured over 20 seeds), ~0.3% on a 4-seed mean: 1.5% is "
    "more than 4 standard errors"
)
BULK_NOTE = (
    "relative 3%, as for bulk-radius: measured as sqrt(2 mean |lambda|^2) over the bulk (every bulk eigenvalue; "
    "the largest modulus sits 2-4% above sqrt(Var f / T) at T = 256, an edge excess).  Over 8 seeds at T = 256, "
    "s2 = ln 2 the statistic sits 0.6% below the prediction for ReLU and for sigmoid with b = -2, with a "
    "per-seed spread of 0.4-0.6% (0.3% on a 4-seed mean)"
)
EDGE_NOTE = (
    "relative 8%: the largest modulus left after centring is an edge statistic; over 20 seeds at T = 256, "
    "s2 = ln 2 it sits 2-4% above sqrt(Var f / T) (finite-T edge excess, shrinking with T; up to ~6% for "
    "sigmoid with a very negative bias, whose f is nearly log-normal), with a seed spread of 1.6-3% per draw, "
    "<= 1.5% on a 4-seed mean.  It resolves ~15%, enough for its claim (no outlier: an outlier left would be "
    "E f / sqrt(Var f / T) ~ 16 times the edge) but not 5%: an exception"
)
RELATIVE_GAP_NOTE = (
    "relative 6%: both bulk edges sit 2-4% above their predictions at T = 256 and on the same logits "
    "these excesses largely cancel (over 20 seeds the measured quotient is 0.5-2% below the prediction at "
    "s2 = 0.5, 1 and for sigmoid with b in [-2, 2]); the seed spread of the quotient is 2-4% per draw, "
    "<= 2% on a 4-seed mean.  Stated for s2 <= 1: at "
    "s2 >= 1.5 the heavy tail of e^g makes softmax's bulk at T = 256 fall short of sqrt(c/T) (by 7% at "
    "s2 = 2), and the measured ratio drops 5-11% below the leading-order prediction"
)


def _attention(T, s2, seeds, seed, device, activation="softmax", bias=0.0, centred=False):
    return random_attention(T, s2, batch=seeds, activation=activation, bias=bias, centred=centred,
                            seed=seed, device=device, dtype=torch.float64)  # (seeds, T, T)


def _gap(*args, **kwargs):
    return spectral_gap(_attention(*args, **kwargs))


def _disc(*args, **kwargs) -> float:
    """Mean over seeds of the disc radius of the bulk (rcteach.checks.statistics.disc_radius)."""
    return disc_radius(spectrum(_attention(*args, **kwargs))[..., 1:]).mean().item()


@register(
    "relu-outlier",
    claim="ReLU attention relu(g)/T has its outlier eigenvalue at E relu(g) = s / sqrt(2 pi)",
    source="derived",
    tolerance_note=OUTLIER_NOTE,
    mutants={**off_by(0.05), "s / 2 (the half-normal mean of |g|, halved)": lambda p, s: s["s2"] ** 0.5 / 2},
    quick=dict(T=256, seeds=4),
    full=dict(T=1024, seeds=8),
)
def relu_outlier(*, T, seeds, s2=LN2, seed=10, device=None) -> Comparison:
    measured = _gap(T, s2, seeds, seed, device, "relu").outlier.real.mean().item()
    return Comparison(prediction=theory.outlier("relu", s2), measured=measured, tolerance=0.015, relative=True)


@register(
    "relu-bulk-radius",
    claim="The non-outlier eigenvalues of ReLU attention fill a disc of radius sqrt(Var relu(g) / T) = s sqrt((pi - 1) / (2 pi T))",
    source="derived",
    tolerance_note=BULK_NOTE,
    mutants={**off_by(0.05), "E relu(g)^2 for Var relu(g)": lambda p, s: (s["s2"] / 2 / s["T"]) ** 0.5},
    quick=dict(T=256, seeds=4),
    full=dict(T=1024, seeds=8),
)
def relu_bulk_radius(*, T, seeds, s2=LN2, seed=11, device=None) -> Comparison:
    measured = _disc(T, s2, seeds, seed, device, "relu")
    return Comparison(prediction=theory.map_bulk_radius(T, "relu", s2), measured=measured, tolerance=0.03, relative=True)


@register(
    "sigmoid-outlier",
    claim="Sigmoid attention sigmoid(g + b)/T has its outlier eigenvalue at E sigmoid(g + b) (by quadrature)",
    source="derived",
    tolerance_note=OUTLIER_NOTE,
    mutants={**off_by(0.05), "sigmoid(b) (the logit spread ignored)": lambda p, s: 1 / (1 + math.exp(-s["bias"]))},
    quick=dict(T=256, seeds=4, bias=-2.0),
    full=dict(T=1024, seeds=8, bias=-2.0),
)
def sigmoid_outlier(*, T, seeds, bias, s2=LN2, seed=12, device=None) -> Comparison:
    measured = _gap(T, s2, seeds, seed, device, "sigmoid", bias).outlier.real.mean().item()
    return Comparison(prediction=theory.outlier("sigmoid", s2, bias), measured=measured, tolerance=0.015, relative=True)


@register(
    "sigmoid-bulk-radius",
    claim="The non-outlier eigenvalues of sigmoid attention fill a disc of radius sqrt(Var sigmoid(g + b) / T)",
    source="derived",
    tolerance_note=BULK_NOTE,
    mutants={**off_by(0.05), "sigmoid'(b) s (linearised)": lambda p, s: (
        math.exp(-s["bias"]) / (1 + math.exp(-s["bias"])) ** 2 * (s["s2"] / s["T"]) ** 0.5)},
    quick=dict(T=256, seeds=4, bias=-2.0),
    full=dict(T=1024, seeds=8, bias=-2.0),
)
def sigmoid_bulk_radius(*, T, seeds, bias, s2=LN2, seed=13, device=None) -> Comparison:
    measured = _disc(T, s2, seeds, seed, device, "sigmoid", bias)
    return Comparison(prediction=theory.map_bulk_radius(T, "sigmoid", s2, bias), measured=measured,
                      tolerance=0.03, relative=True)


@register(
    "centred-maps-no-outlier",
    claim=("Centring (subtracting each row's mean) removes the outlier of softmax, ReLU and sigmoid attention: "
           "the largest eigenvalue modulus left is the bulk edge sqrt(Var f / T)"),
    source="derived",
    mutants={"an outlier left (E f over the edge)": lambda p, s: p * (s["T"] / theory.c(s["s2"])) ** 0.5,
             "edge 15% off": lambda p, s: 1.15 * p},
    tolerance_note=(EDGE_NOTE + "; measured is the map (of softmax, ReLU, sigmoid) whose mean |lambda_1(A_perp)| / "
                    "sqrt(Var f / T) lies farthest from 1, prediction 1"),
    quick=dict(T=256, seeds=4, bias=-2.0),
    full=dict(T=1024, seeds=8, bias=-2.0),
)
def centred_maps_no_outlier(*, T, seeds, bias, s2=LN2, seed=14, device=None) -> Comparison:
    ratios = []
    for activation, b in (("softmax", 0.0), ("relu", 0.0), ("sigmoid", bias)):
        top = _gap(T, s2, seeds, seed, device, activation, b, centred=True).outlier.abs().mean().item()
        ratios.append(top / theory.map_bulk_radius(T, activation, s2, b))
    worst = max(ratios, key=lambda r: abs(r - 1.0))
    return Comparison(prediction=1.0, measured=worst, tolerance=0.08, relative=True)


@register(
    "relu-vs-softmax-gap",
    claim=("On the same logits, gap_ratio(ReLU) / gap_ratio(softmax) = sqrt(c / (pi - 1)): ReLU has the smaller "
           "gap exactly when s2 < ln(pi) (s2 <= 1 tested)"),
    source="derived",
    tolerance_note=RELATIVE_GAP_NOTE,
    mutants={**off_by(0.08), "sqrt(c / pi) (Var relu taken as E relu^2)": lambda p, s: (theory.c(s["s2"]) / math.pi) ** 0.5},
    quick=dict(T=256, seeds=4, s2=0.5),
    full=dict(T=1024, seeds=8, s2=0.5),
)
def relu_vs_softmax_gap(*, T, seeds, s2, seed=15, device=None) -> Comparison:
    relu = _gap(T, s2, seeds, seed, device, "relu").ratio.mean().item()
    softmax = _gap(T, s2, seeds, seed, device).ratio.mean().item()
    return Comparison(prediction=theory.relative_gap("relu", s2), measured=relu / softmax, tolerance=0.06, relative=True)


@register(
    "sigmoid-vs-softmax-gap",
    claim=("On the same logits, gap_ratio(sigmoid) / gap_ratio(softmax) = sqrt(c) E f / sd f with f = sigmoid(g + b) "
           "(by quadrature; above 1 on the whole grid the book computes)"),
    source="derived",
    tolerance_note=RELATIVE_GAP_NOTE,
    mutants={**off_by(0.08), "the bias ignored (b = 0)": lambda p, s: theory.relative_gap("sigmoid", s["s2"], 0.0)},
    quick=dict(T=256, seeds=4, bias=-2.0),
    full=dict(T=1024, seeds=8, bias=-2.0),
)
def sigmoid_vs_softmax_gap(*, T, seeds, bias, s2=LN2, seed=16, device=None) -> Comparison:
    sigmoid = _gap(T, s2, seeds, seed, device, "sigmoid", bias).ratio.mean().item()
    softmax = _gap(T, s2, seeds, seed, device).ratio.mean().item()
    return Comparison(prediction=theory.relative_gap("sigmoid", s2, bias), measured=sigmoid / softmax,
                      tolerance=0.06, relative=True)
