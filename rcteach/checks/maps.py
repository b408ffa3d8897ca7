"""Checks on other attention maps: ReLU and sigmoid, centred or not (``book/07_other_maps.md``).

To leading order in 1/T an element-wise map is A_ij = f(g_ij) / T = (E f) 11^T / T + Z / T with
Z i.i.d., mean 0, variance Var f: outlier E f, bulk radius sqrt(Var f / T)
(:func:`rcteach.theory.activation_moments`).  Simulations use the same logits (same seed) for a
map and for softmax when they compare the two, so the comparison does not pay for two seed spreads;
the outlier and bulk checks of a map share its eigenvalues (same base seeds, ``shared.attention_spectrum``),
and sigmoid-vs-softmax-gap shares softmax's with bulk-radius.  Those two and centred-maps-no-outlier run at
T = 500 (quick) and 1000 (full), not 512 and 1024: float64 ``geev`` costs 3.4x more at 512 and 2.1x more at 1024
(:func:`rcteach.linalg.eigvals`).
"""

from __future__ import annotations

import math


from .. import theory
from ..theory import LN2
from .registry import Comparison, off_by, off_exponent, register
from .shared import attention_spectrum
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
RELATIVE_GAP_NOTE = (
    "relative 3% (ReLU, T = 256) and 2.5% (sigmoid, T = 500).  The gap ratio of each map is |lambda_1| over the "
    "disc radius of its bulk (sqrt(2 mean |lambda|^2), as in bulk-radius, with no edge excess); on the same logits "
    "the maps' finite-T deficits partly cancel.  Over 3 base seeds of 4 matrices the quotient sat 0.7-1.3% below "
    "the prediction for ReLU at T = 256, s2 = 0.5 (per-draw sd 0.3%), and 1.2-2.3% below for sigmoid (b = -2, "
    "s2 = ln 2) at T = 256 but 1.0-1.1% below at T = 500 (per-draw sd 0.2-0.4%; quick mode runs one draw per base "
    "seed: 0.5-1.0% below, 0.5-1.6% over the base seeds and 10 more (sd 0.33%), resolves 3.5%, as with 2 "
    "draws).  With the largest modulus as the bulk radius these checks needed 6% and resolved 6-7%.  Stated for "
    "s2 <= 1: at s2 >= 1.5 the heavy tail of e^g makes softmax's bulk at T = 256 fall short of sqrt(c/T) (by 7% "
    "at s2 = 2)"
)


def _spectrum(T, s2, seeds, seed, device, activation="softmax", bias=0.0, centred=False):
    """Eigenvalues (seeds, T) of the map's attention, by decreasing modulus (shared.attention_spectrum)."""
    return attention_spectrum(T, s2, seeds, seed, device, activation, bias, centred)


def _outlier(*args, **kwargs) -> float:
    """Mean over seeds of the real part of the outlier lambda_1."""
    return _spectrum(*args, **kwargs)[..., 0].real.mean().item()


def _disc(*args, **kwargs) -> float:
    """Mean over seeds of the disc radius of the bulk (rcteach.checks.statistics.disc_radius)."""
    return disc_radius(_spectrum(*args, **kwargs)[..., 1:]).mean().item()


def _disc_gap(*args, **kwargs) -> float:
    """Mean over seeds of the gap ratio |lambda_1| / disc radius of the bulk."""
    ev = _spectrum(*args, **kwargs)
    return (ev[..., 0].abs() / disc_radius(ev[..., 1:])).mean().item()


@register(
    "relu-outlier",
    claim="ReLU attention relu(g)/T has its outlier eigenvalue at E relu(g) = s / sqrt(2 pi)",
    source="derived",
    tolerance_note=OUTLIER_NOTE,
    mutants={**off_by(0.03), "s / 2 (the half-normal mean of |g|, halved)": lambda p, s: s["s2"] ** 0.5 / 2},
    quick=dict(T=256, seeds=4),
    full=dict(T=1024, seeds=8),
    base_seeds=(10, 1010, 2010),
)
def relu_outlier(*, T, seeds, s2=LN2, seed=10, device=None) -> Comparison:
    measured = _outlier(T, s2, seeds, seed, device, "relu")
    return Comparison(prediction=theory.outlier("relu", s2), measured=measured, tolerance=0.015, relative=True)


@register(
    "relu-bulk-radius",
    claim="The non-outlier eigenvalues of ReLU attention fill a disc of radius sqrt(Var relu(g) / T) = s sqrt((pi - 1) "
          "/ (2 pi T))",
    source="derived",
    tolerance_note=BULK_NOTE,
    mutants={**off_exponent(-0.5), **off_by(0.05),
             "E relu(g)^2 for Var relu(g)": lambda p, s: (s["s2"] / 2 / s["T"]) ** 0.5},
    quick=dict(T=256, seeds=4),
    full=dict(T=1024, seeds=8),
    base_seeds=(10, 1010, 2010),
)
def relu_bulk_radius(*, T, seeds, s2=LN2, seed=10, device=None) -> Comparison:
    measured = _disc(T, s2, seeds, seed, device, "relu")
    return Comparison(prediction=theory.map_bulk_radius(T, "relu", s2), measured=measured, tolerance=0.03,
                      relative=True)


@register(
    "sigmoid-outlier",
    claim="Sigmoid attention sigmoid(g + b)/T has its outlier eigenvalue at E sigmoid(g + b) (by quadrature)",
    source="derived",
    tolerance_note=OUTLIER_NOTE,
    mutants={**off_by(0.025), "sigmoid(b) (the logit spread ignored)": lambda p, s: 1 / (1 + math.exp(-s["bias"]))},
    quick=dict(T=256, seeds=4, bias=-2.0),
    full=dict(T=1024, seeds=8, bias=-2.0),
    base_seeds=(12, 1012, 2012),
)
def sigmoid_outlier(*, T, seeds, bias, s2=LN2, seed=12, device=None) -> Comparison:
    measured = _outlier(T, s2, seeds, seed, device, "sigmoid", bias)
    return Comparison(prediction=theory.outlier("sigmoid", s2, bias), measured=measured, tolerance=0.015, relative=True)


@register(
    "sigmoid-bulk-radius",
    claim="The non-outlier eigenvalues of sigmoid attention fill a disc of radius sqrt(Var sigmoid(g + b) / T)",
    source="derived",
    tolerance_note=BULK_NOTE,
    mutants={**off_exponent(-0.5), **off_by(0.05), "sigmoid'(b) s (linearised)": lambda p, s: (
        math.exp(-s["bias"]) / (1 + math.exp(-s["bias"])) ** 2 * (s["s2"] / s["T"]) ** 0.5)},
    quick=dict(T=256, seeds=4, bias=-2.0),
    full=dict(T=1024, seeds=8, bias=-2.0),
    base_seeds=(12, 1012, 2012),
)
def sigmoid_bulk_radius(*, T, seeds, bias, s2=LN2, seed=12, device=None) -> Comparison:
    measured = _disc(T, s2, seeds, seed, device, "sigmoid", bias)
    return Comparison(prediction=theory.map_bulk_radius(T, "sigmoid", s2, bias), measured=measured,
                      tolerance=0.03, relative=True)


@register(
    "centred-maps-no-outlier",
    claim=("Centring (subtracting each row's mean) removes the outlier of softmax, ReLU and sigmoid attention: what "
           "is left fills the bulk disc of radius sqrt(Var f / T) (measured as sqrt(2 mean |lambda|^2) over the "
           "eigenvalues of A_perp but its zero, A_perp 1 = 0; an outlier left would raise it by "
           "sqrt(1 + 2 (E f)^2 / Var f), 1.7 times for softmax at s2 = ln 2)"),
    source="derived",
    mutants={**off_by(0.05), "an outlier left (softmax's)": lambda p, s: p * (1 + 2 / theory.c(s["s2"])) ** 0.5},
    tolerance_note=("relative 2.5%; measured is the map (of softmax, ReLU, sigmoid) whose mean disc radius over "
                    "sqrt(Var f / T) lies farthest from 1, prediction 1.  As in bulk-radius and relu-bulk-radius, the "
                    "disc statistic has no edge excess: softmax's sits below the prediction by its 1/T deficit (1.3% "
                    "at T = 500), ReLU and sigmoid (b = -2) within 0.2%.  Quick mode runs one matrix per map at "
                    "T = 500: over its 3 base seeds and 10 more the worst map (softmax on each) sat 0.981-0.995 (sd "
                    "0.5%), so 2.5% covers the deficit and 2.4 sd, and the check resolves 2.9-4.3%.  (The largest "
                    "modulus left, used before, sat 2-6% above the edge and needed 8%)"),
    quick=dict(T=500, seeds=1, bias=-2.0),
    full=dict(T=1000, seeds=8, bias=-2.0),
    base_seeds=(14, 1014, 2014),
)
def centred_maps_no_outlier(*, T, seeds, bias, s2=LN2, seed=14, device=None) -> Comparison:
    ratios = []
    for activation, b in (("softmax", 0.0), ("relu", 0.0), ("sigmoid", bias)):
        ev = _spectrum(T, s2, seeds, seed, device, activation, b, centred=True)[..., :-1]  # the zero dropped
        ratios.append(disc_radius(ev).mean().item() / theory.map_bulk_radius(T, activation, s2, b))
    worst = max(ratios, key=lambda r: abs(r - 1.0))
    return Comparison(prediction=1.0, measured=worst, tolerance=0.025, relative=True)


@register(
    "relu-vs-softmax-gap",
    claim=("On the same logits, gap_ratio(ReLU) / gap_ratio(softmax) = sqrt(c / (pi - 1)): ReLU has the smaller "
           "gap exactly when s2 < ln(pi) (s2 <= 1 tested)"),
    source="derived",
    tolerance_note=RELATIVE_GAP_NOTE,
    mutants={**off_by(0.05),
             "sqrt(c / pi) (Var relu taken as E relu^2)": lambda p, s: (theory.c(s["s2"]) / math.pi) ** 0.5},
    quick=dict(T=256, seeds=4, s2=0.5),
    full=dict(T=1024, seeds=8, s2=0.5),
    base_seeds=(15, 1015, 2015),
)
def relu_vs_softmax_gap(*, T, seeds, s2, seed=15, device=None) -> Comparison:
    quotient = _disc_gap(T, s2, seeds, seed, device, "relu") / _disc_gap(T, s2, seeds, seed, device)
    return Comparison(prediction=theory.relative_gap("relu", s2), measured=quotient, tolerance=0.03, relative=True)


@register(
    "sigmoid-vs-softmax-gap",
    claim=("On the same logits, gap_ratio(sigmoid) / gap_ratio(softmax) = sqrt(c) E f / sd f with f = sigmoid(g + b) "
           "(by quadrature; above 1 on the whole grid the book computes)"),
    source="derived",
    tolerance_note=RELATIVE_GAP_NOTE,
    mutants={**off_by(0.05), "the bias ignored (b = 0)": lambda p, s: theory.relative_gap("sigmoid", s["s2"], 0.0)},
    quick=dict(T=500, seeds=1, bias=-2.0),
    full=dict(T=1000, seeds=8, bias=-2.0),
    base_seeds=(1, 1001, 2001),
)
def sigmoid_vs_softmax_gap(*, T, seeds, bias, s2=LN2, seed=1, device=None) -> Comparison:
    quotient = _disc_gap(T, s2, seeds, seed, device, "sigmoid", bias) / _disc_gap(T, s2, seeds, seed, device)
    return Comparison(prediction=theory.relative_gap("sigmoid", s2, bias), measured=quotient, tolerance=0.025,
                      relative=True)
