"""Checks on equilibria of self-attention with LayerNorm (chapter "Equilibria of every rank")."""

from __future__ import annotations

import torch

from .. import equilibria as eq
from ..masks import make_mask
from .registry import Comparison, register

NEWTON = ("Newton's method on the product of spheres converges quadratically: residuals reach ~1e-16; "
          "1e-12 leaves four orders of margin for round-off in the Jacobian solve")


@register(
    "equilibrium-fixed-point",
    claim="In the N = d = 2 causal example, the orthogonal configuration (e1, e2) is an exact fixed point of the LN layer map",
    source="exact",
    tolerance_note="exact arithmetic gives 0; float64 evaluation of softmax and normalisation errs by ~1e-16",
    quick=dict(),
)
def equilibrium_fixed_point() -> Comparison:
    W_V, B = eq.two_token_example()
    X = torch.eye(2, dtype=torch.float64)
    F = eq.layer_map(X, W_V, B, mask=make_mask("causal", 2))
    return Comparison(prediction=0.0, measured=float(torch.linalg.matrix_norm(F - X)), tolerance=1e-12)


@register(
    "equilibrium-stable",
    claim=("The rank-2 equilibrium (e1, e2) of the N = d = 2 example is linearly stable: the tangent Jacobian has "
           "spectral radius 1/2 (token 1: the eigenvalue ratio 1/2 of W_V; token 2: 0 by design)"),
    source="derived",
    tolerance_note="autograd Jacobian and a 2x2 eigenvalue problem in float64: error ~1e-15; 1e-10 leaves margin",
    quick=dict(),
)
def equilibrium_stable() -> Comparison:
    W_V, B = eq.two_token_example()
    J = eq.tangent_jacobian(torch.eye(2, dtype=torch.float64), W_V, B, mask=make_mask("causal", 2))
    return Comparison(prediction=0.5, measured=eq.spectral_radius(J), tolerance=1e-10)


@register(
    "equilibria-every-rank",
    claim=("From random starts, the N = d = 2 causal example reaches stable equilibria of rank 1 (consensus) and "
           "rank 2 (full): the ranks found are (1, 2)"),
    source="derived",
    tolerance_note="exact: a set of ranks, each equilibrium verified by residual < 1e-12 and spectral radius < 1",
    quick=dict(starts=64, steps=200),
    full=dict(starts=512, steps=400),
)
def equilibria_every_rank(*, starts, steps, seed=0) -> Comparison:
    W_V, B = eq.two_token_example()
    found = eq.find_equilibria(W_V, B, N=2, mask=make_mask("causal", 2), starts=starts, steps=steps, tol=1e-12, seed=seed)
    ranks = tuple(sorted({e.rank for e in found if e.stable}))
    return Comparison(prediction=(1, 2), measured=ranks)
