"""The attention flow on the sphere of Geshkovski et al., run as residual layers, and its contraction rate.

Introduced in chapter "Wider reading" (book/16_wider_reading.md), section "Clustering on the sphere".

Tokens x_i (unit norm, rows of X (*batch, n, d)) move by explicit Euler steps of size h of
dx_i/dt = P_{x_i^perp} sum_j A_ij x_j, A_ij = softmax_j(beta <x_i, x_j>):

    x_i <- N(x_i + h sum_j A_ij x_j)        N: RMS normalisation back to the unit sphere

(:func:`rcteach.propagate` with W_Q = W_K = I, identity values, skip h, ``norm="rms"``; it divides
the logits by sqrt(d_qk), so it is given beta sqrt(d)).  Near one cluster the distance to
consensus shrinks by 1/(1 + h) per layer (:func:`rcteach.theory.sphere_consensus_rate`).
"""

from __future__ import annotations

import math

import torch

from . import _validate
from .depth import propagate
from .metrics import decay_rate, _layer_series

__all__ = ["sphere_flow", "tail_rate"]


def sphere_flow(X0, depth, beta, h) -> torch.Tensor:
    """Relative distance to consensus mu(X_l) / ||X_l||_F, shape (depth + 1, *batch) (CPU), of ``depth``
    residual layers of the flow (module doc) from the tokens X0 (*batch, n, d) (normalised by the first layer)."""
    X0 = _validate.matrix("X0", X0, min_rows=2)
    depth = _validate.integer("depth", depth, minimum=1)
    beta = _validate.real("beta", beta, minimum=0.0)
    h = _validate.real("h", h, positive=True)
    eye = torch.eye(X0.shape[-1], device=X0.device, dtype=X0.dtype)
    return propagate(X0, depth, attention="qk", W_Q=eye, W_K=eye, beta=beta * math.sqrt(X0.shape[-1]),
                     values="identity", skip=h, norm="rms").relative_mu.cpu()


def tail_rate(rel, *, top=1e-5, span=1e-5) -> torch.Tensor:
    """-log of the per-layer decay factor (:func:`rcteach.decay_rate`) of each run of ``rel`` (layers, *batch),
    fitted from the run's first layer with rel <= ``top`` (one cluster) down by a factor ``span``; NaN for
    a run that never reaches ``top``.  Shape (*batch,), float64."""
    rel = _layer_series("rel", rel).detach().cpu()
    if not (torch.isfinite(rel).all() and (rel >= 0).all()):
        raise ValueError("rel must have finite entries >= 0 (relative distances to consensus)")
    top = _validate.real("top", top, positive=True)
    span = _validate.real("span", span, positive=True, below=1.0)
    runs = rel.reshape(rel.shape[0], -1).unbind(-1)
    rates = []
    for i, run in enumerate(runs):
        below = (run <= top).nonzero()
        tail = run[int(below[0]):] if below.numel() else None
        if tail is not None and (tail.numel() < 2 or not (tail[0] > 0 and tail[1] > span * tail[0])):
            raise ValueError(f"rel: run {i} has no two layers from where it reaches top={top} before it falls by "
                             f"span={span}: no rate can be fitted (lower top, or a smaller span)")
        rates.append(-decay_rate(tail, floor=span).log().item() if tail is not None else math.nan)
    return torch.tensor(rates, dtype=torch.float64).reshape(rel.shape[1:])
