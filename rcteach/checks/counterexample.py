"""Checks on what the LayerNorm counterexample of Wu et al. needs (chapter "Equilibria of every rank"): its
construction in any basis and any width, and how the collapse rate depends on the value matrices."""

from __future__ import annotations

import torch

from .. import equilibria as eq
from .. import theory
from ..lyapunov import value_log_contraction
from ..masks import make_mask
from .registry import Comparison, off_by, register


@register(
    "embedded-equilibrium-radius",
    claim=("The counterexample survives a change of feature basis and extra zero coordinates: the triangular "
           "example in d >= N features and a random orthonormal basis (W_V = Z^T diag(W, r R) Z) keeps X* = [I, 0] Z "
           "as a fixed point, with tangent spectral radius max(q, r / q^(N-1))"),
    source="derived",
    tolerance_note=("autograd Jacobian of the layer map and an eigenvalue problem of size N(d-1) in float64: error "
                    "~1e-14; the first element is the fixed-point residual (0), the others the radii, absolute 1e-9"),
    mutants={"the extra coordinates ignored: radius q": lambda p, s: torch.cat([p[:1], p.new_full((2,), s["q"])]),
             "r / q^N (one power too many)": lambda p, s: torch.cat(
                 [p[:1], torch.tensor([max(s["q"], r / s["q"] ** s["N"]) for r in s["r"]], dtype=p.dtype)])},
    quick=dict(N=4, d=6, q=0.8, r=(0.3, 0.6)),
    full=dict(N=5, d=9, q=0.8, r=(0.3, 0.5)),
    base_seeds=(140, 240, 340),
)
def embedded_equilibrium_radius(*, N, d, q, r, seed=140) -> Comparison:
    mask = make_mask("causal", N)
    measured, prediction = [], [0.0]
    for k, rk in enumerate(r):
        W_V, B, X = eq.embedded_example(N, d, q=q, r=rk, seed=seed + k)
        if k == 0:
            measured.append(float(torch.linalg.matrix_norm(eq.layer_map(X, W_V, B, mask=mask) - X)))
        measured.append(eq.spectral_radius(eq.tangent_jacobian(X, W_V, B, mask=mask)))
        prediction.append(eq.embedded_radius(N, q=q, r=rk))
    as_t = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    return Comparison(prediction=as_t(prediction), measured=as_t(measured), tolerance=1e-9)


@register(
    "ln-values-rate-continuous",
    claim=("With RMS LayerNorm the collapse rate depends continuously on the value matrices: for W_V = O + eps G "
           "(O orthogonal, G Gaussian N(0, 1/d)) the tangent contraction per layer is exp(lambda_2 - lambda_1) with "
           "lambda_2 - lambda_1 = -eps^2/d + O(eps^4): 0 at orthogonal values, faster collapse away from them"),
    source="derived",
    tolerance_note=("relative: 2% for the O(eps^4) term (the ratio to -eps^2/d measured 0.983-0.999 at eps = "
                    "0.05-0.1, d = 8-64, 2e5 samples, 3 seeds each) + 3 standard errors of the Monte Carlo mean of "
                    "log sin theta (relative sd ~sqrt(2) per sample: ~0.58% at 6e4 samples, quick mode; it resolves "
                    "3.0-4.3% on its 3 base seeds, 3.0-4.6% over seeds 400-419)"),
    mutants={**off_by(0.05),
             "linear in eps (exponent 1, not 2)": lambda p, s: p / torch.tensor(s["eps"], dtype=p.dtype),
             "the Gaussian gap -1/(2d) whatever eps":
                 lambda p, s: p.new_full(p.shape, theory.gaussian_value_lyapunov(s["d"]))},
    quick=dict(d=16, eps=(0.05, 0.1), samples=60_000),
    full=dict(d=64, eps=(0.05, 0.1), samples=1_000_000),
    base_seeds=(150, 250, 350),
)
def ln_values_rate_continuous(*, d, eps, samples, seed=150) -> Comparison:
    gen = torch.Generator().manual_seed(seed)
    measured, tolerance = [], []
    for e in eps:
        mean, se = value_log_contraction(d, e, samples=samples, generator=gen)
        measured.append(mean)
        tolerance.append(0.02 + 3 * se / (e**2 / d))
    prediction = torch.tensor([theory.near_orthogonal_value_lyapunov(d, e) for e in eps], dtype=torch.float64)
    return Comparison(prediction=prediction, measured=torch.tensor(measured, dtype=torch.float64),
                      tolerance=torch.tensor(tolerance, dtype=torch.float64), relative=True)
