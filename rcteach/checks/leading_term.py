"""Checks on the leading 1/T term of softmax attention (chapter "The leading 1/T term").

Each check averages over ``seeds`` independent matrices drawn in one batch.  Tolerances: the
predictions are leading order in 1/T, so each tolerance covers the derived next-order bias at the
quick setting (``theory.frobenius_sq_next_order``) plus about four standard deviations of the
seed-averaged measurement (spreads measured over 20 base seeds).
"""

from __future__ import annotations

import math

import torch

from .. import linalg, theory
from ..attention import attention_map, centre, random_attention
from ..logits import leading_term, random_logits
from ..theory import LN2
from .registry import Comparison, off_by, off_exponent, register


@register(
    "logit-mean-cancels",
    claim="softmax(g + m) = softmax(g): the mean m of the logits cancels, only s2 matters",
    source="exact",
    tolerance_note="float64 round-off of exp and a sum of T terms, relative to entries of size 1/T: ~1e-16; 1e-12 "
                   "leaves margin",
    # the deviation it implies (x T)
    mutants={"the mean scales attention by e^m": lambda p, s: abs(math.expm1(s["m"]))},
    quick=dict(T=256, seeds=4),
    full=dict(T=1024, seeds=8),
    base_seeds=(0, 1000, 2000),
)
def logit_mean_cancels(*, T, seeds, s2=LN2, m=-3.7, seed=0, device=None) -> Comparison:
    g = random_logits(T, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    worst = ((attention_map(g + m) - attention_map(g)).abs().max() * T).item()  # relative to 1/T
    return Comparison(prediction=0.0, measured=worst, tolerance=1e-12)


@register(
    "leading-term-residual",
    claim=("softmax attention = 11^T/T + ZP/T + remainder, with ||remainder||_F / ||ZP/T||_F ~ sqrt(c/T) "
           "(compared with its next-order value sqrt((c/T)(1 + (1 + K/c^2)/T)), theory.leading_term_residual; "
           "tested at s2 = 0.25: at s2 = ln 2 the log-normal tail dominates the pooled ratio)"),
    source="derived",
    tolerance_note=("relative 2.75%, on the pooled ratio sqrt(sum ||A - L||_F^2 / sum ||ZP/T||_F^2) over 64 matrices "
                    "at T = 256, s2 = 0.25, against the next-order value (+0.2% above sqrt(c/T) there).  Over 10 base "
                    "seeds the ratio sat 0.990-1.018 of the prediction (sd 0.82%): 2.75% is ~3 sd plus the O(1/T^2) "
                    "remainder (<= 0.4% at s2 = 0.25, T = 128..512); the check resolves ~3.5-4.5%.  At s2 = ln 2 the "
                    "next-order term is +1.45% at T = 512 and its remainder -0.2% (-0.8% at T = 256), but 16 matrices "
                    "at T = 512 spread by 1.7% (rare rows with a large e^g dominate the sums), so the check there "
                    "resolved only 5-8% at the same cost"),
    mutants={**off_exponent(-0.5), **off_by(0.06), "remainder of order c/T (squared)": lambda p, s: p ** 2,
             "remainder sqrt(s2/T) (c replaced by s2)": lambda p, s: (s["s2"] / s["T"]) ** 0.5},
    quick=dict(T=256, seeds=64),
    full=dict(T=1024, seeds=32),
    base_seeds=(0, 1000, 2000),
)
def leading_term_residual(*, T, seeds, s2=0.25, m=-0.125, seed=0, device=None) -> Comparison:
    g = random_logits(T, s2, m=m, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    A, L = attention_map(g), leading_term(g, s2, m=m)
    residual_sq = torch.linalg.matrix_norm(A - L).square().sum()
    ratio = (residual_sq / torch.linalg.matrix_norm(L - 1.0 / T).square().sum()).sqrt()
    return Comparison(prediction=theory.leading_term_residual(T, s2, next_order=True), measured=ratio.item(),
                      tolerance=0.0275, relative=True)


@register(
    "entry-sd",
    claim="an entry of softmax attention has standard deviation sqrt(c)/T",
    source="derived",
    tolerance_note=("relative 3%: the next-order bias is sqrt(1 - (1+c)(1+2c)/T) - 1 = -1.2% at T = 256, "
                    "s2 = ln 2; the 16-seed pooled sd has a spread of ~0.3%"),
    mutants={**off_exponent(-1), **off_by(0.05),
             "sd sqrt(1 + c)/T (the second moment for the variance)":
                 lambda p, s: (1 + theory.c(s["s2"])) ** 0.5 / s["T"],
             "c replaced by s2": lambda p, s: s["s2"] ** 0.5 / s["T"]},
    quick=dict(T=256, seeds=16),
    full=dict(T=1024, seeds=16),
    base_seeds=(0, 1000, 2000),
)
def entry_sd(*, T, seeds, s2=LN2, seed=0, device=None) -> Comparison:
    A = random_attention(T, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    measured = (A - 1.0 / T).square().mean().sqrt().item()  # pooled over entries and seeds; E A_ij = 1/T exactly
    return Comparison(prediction=theory.entry_sd(T, s2), measured=measured, tolerance=0.03, relative=True)


@register(
    "frobenius-norm",
    claim="||A||_F^2 ~ 1 + c for softmax attention, at any T",
    source="derived",
    tolerance_note=("relative 3%: the next-order bias is -c(1+2c)/T = -1.2% at T = 256, s2 = ln 2; "
                    "the 16-seed mean has a spread of ~0.2%"),
    mutants={**off_by(0.05), "the centred value c": lambda p, s: theory.frobenius_sq(s["s2"], centred=True),
             "c replaced by s2": lambda p, s: 1 + s["s2"]},
    quick=dict(T=256, seeds=16),
    full=dict(T=1024, seeds=16),
    base_seeds=(0, 1000, 2000),
)
def frobenius_norm(*, T, seeds, s2=LN2, seed=0, device=None) -> Comparison:
    A = random_attention(T, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    measured = torch.linalg.matrix_norm(A).square().mean().item()
    return Comparison(prediction=theory.frobenius_sq(s2), measured=measured, tolerance=0.03, relative=True)


@register(
    "centred-frobenius-norm",
    claim="||A_perp||_F^2 ~ c for centred softmax attention, at any T",
    source="derived",
    tolerance_note=("relative 3%: the next-order bias is -(1+c)(1+2c)/T = -1.2% at T = 512, s2 = ln 2 (-2.3% at "
                    "T = 256, too close to a 5% error); the 16-seed mean has a spread of ~0.3%"),
    mutants={**off_by(0.05), "the uncentred value 1 + c": lambda p, s: theory.frobenius_sq(s["s2"])},
    quick=dict(T=512, seeds=16),
    full=dict(T=1024, seeds=16),
    base_seeds=(0, 1000, 2000),
)
def centred_frobenius_norm(*, T, seeds, s2=LN2, seed=0, device=None) -> Comparison:
    A = random_attention(T, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    measured = torch.linalg.matrix_norm(centre(A)).square().mean().item()
    return Comparison(prediction=theory.frobenius_sq(s2, centred=True), measured=measured, tolerance=0.03,
                      relative=True)


@register(
    "frobenius-next-order",
    claim="||A||_F^2 = (1 + c)(1 - c(1+2c)/T) + O(1/T^2): the finite-T deficit of the leading term",
    source="derived",
    tolerance_note=("relative 2%: the O(1/T^2) remainder is ~ (c(1+2c)/T)^2 = 0.1% at T = 256, s2 = 1 "
                    "(heavy tails make it larger); the 32-seed mean has a spread of ~0.3%"),
    mutants={**off_by(0.05), "sign of the 1/T term flipped": lambda p, s: 2 * theory.frobenius_sq(s["s2"]) - p,
             "the 1/T term dropped (1 + c)": lambda p, s: theory.frobenius_sq(s["s2"])},
    quick=dict(T=256, seeds=32),
    full=dict(T=1024, seeds=32),
    base_seeds=(0, 1000, 2000),
)
def frobenius_next_order(*, T, seeds, s2=1.0, seed=0, device=None) -> Comparison:
    A = random_attention(T, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    measured = torch.linalg.matrix_norm(A).square().mean().item()
    return Comparison(prediction=theory.frobenius_sq_next_order(T, s2), measured=measured, tolerance=0.02,
                      relative=True)


@register(
    "top-singular-value",
    claim=("the largest singular value of softmax attention is 1 + c/(2T) to leading order; to next order "
           "sqrt(1 + (c/T)(1 - ((1+c)(1+2c) - c)/T)) (compared through the mean of sigma_1^2 - 1)"),
    source="derived",
    tolerance_note=("relative 1.5% on the mean of sigma_1^2 - 1 at T = 128 against the next-order prediction "
                    "(theory.top_singular_value_next_order, 3.5% below the leading c/T; 1 - 5/T at c = 1).  The mean "
                    "uses a control variate with mean exactly zero: ||A_perp||_F^2/T - ||P A^T 1||^2/T (E||P A^T 1||^2 "
                    "= T^2 Var(A_ij) = E||A_perp||_F^2, the columns adding independent entries), which removes the "
                    "chi-square spread of the column sums: one matrix's sigma_1^2 - 1 spreads by 13%, the corrected "
                    "value by 3.5%, so 128 matrices give a standard error of 0.3%.  The remainder is O(1/T^2): "
                    "+1.47%, +0.41%, +0.06% at T = 64, 128, 256 (2048 matrices).  1.5% covers it and 3.5 standard "
                    "errors; the check resolves ~2% and rejects the leading term.  The (c/T)^2 part of the "
                    "next-order term (+0.8% at T = 128) is not resolved.  (Against the raw mean of sigma_1 - 1 "
                    "with 128 matrices at T = 256 the tolerance was 3% and the check resolved 3.6-5.4%)"),
    mutants={**off_exponent(-1), **off_by(0.03),
             "leading order c/T (next-order term dropped)": lambda p, s: theory.c(s["s2"]) / s["T"],
             "excess 2c/T (the factor 1/2 of sigma_1 - 1 dropped)": lambda p, s: 2 * p,
             "the 1/T term doubled": lambda p, s: 2 * p - theory.c(s["s2"]) / s["T"],
             "c replaced by s2": lambda p, s: p * s["s2"] / theory.c(s["s2"])},
    quick=dict(T=128, seeds=128),
    full=dict(T=512, seeds=64),
    base_seeds=(0, 1000, 2000),
)
def top_singular_value(*, T, seeds, s2=LN2, seed=0, device=None) -> Comparison:
    if not s2 > 0:
        raise ValueError(f"s2 must be > 0 for this check, got {s2}")
    A = random_attention(T, s2, batch=seeds, seed=seed, device=device, dtype=torch.float64)
    excess = linalg.svdvals(A)[..., 0].square() - 1  # (seeds,) sigma_1^2 - 1
    columns = (A.sum(-2) - 1).square().sum(-1) / T  # ||P A^T 1||^2 / T: the centred column sums
    control = torch.linalg.matrix_norm(centre(A)).square() / T - columns  # mean exactly 0
    prediction = theory.top_singular_value_next_order(T, s2) ** 2 - 1
    return Comparison(prediction=prediction, measured=(excess + control).mean().item(), tolerance=0.015, relative=True)
