"""The mask explorer's data and figure: a mask's graph and mu through masked query-key attention.

Introduced in chapter "Collapse under masks" (book/09_mask_collapse.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .. import _validate
from ..depth import propagate
from ..masks import (MASK_KINDS, centre_eccentricity, consensus_rate, diameter, is_quasi_strongly_connected,
                     is_strongly_connected, make_mask)
from ..plotting import axes, draw_mask
from ..tokens import orthonormal_tokens
from ._common import figure, log_scale, positive, to_numpy


@dataclass(frozen=True)
class MaskData:
    """A mask, its graph properties and mu(X_t) through query-key attention restricted to it.

    ``mask`` (T, T) bool; ``mu`` (depth + 1, seeds); ``uniform_rate`` |lambda_2| of uniform
    attention on the mask (:func:`rcteach.consensus_rate`), the exact asymptotic per-layer
    factor of mu at beta = 0; ``graph`` the mask's graph properties (:mod:`rcteach.masks`).
    """

    params: dict
    mask: np.ndarray
    mu: np.ndarray
    uniform_rate: float
    graph: dict = field(default_factory=dict)


def mask_data(kind="causal", *, T=10, window=2, beta=1.0, norm=None, values="orthogonal", depth=24, d=32,
              s2=1.0, seeds=8, seed=0, device=None) -> MaskData:
    """mu(X_t) for ``seeds`` networks of masked query-key attention, and the mask's graph.

    Parameters
    ----------
    kind : {"complete", "causal", "sliding", "sliding-causal"}
        :func:`rcteach.make_mask`; ``window`` is used by the sliding kinds only.
    T, d : int
        Tokens and width, 2 <= T <= d.
    beta : float > 0
        Inverse temperature: the logits are multiplied by beta (small beta, a high temperature:
        nearly uniform attention).
    norm, values : as in :func:`rcteach.propagate` (Gaussian values use sigma_V^2 = 1/d).
    depth : int >= 0
    s2 : float >= 0
        Logit variance at beta = 1 for unit-norm tokens.
    """
    kind = _validate.choice("kind", kind, MASK_KINDS)
    window = _validate.integer("window", window, minimum=0)  # checked for every kind (the explorer's starting value)
    beta = _validate.real("beta", beta, positive=True)
    d = _validate.integer("d", d, minimum=1)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    seed = _validate.seed(seed)
    mask = make_mask(kind, T, window=window, device=device)
    X0 = orthonormal_tokens(T, d, batch=seeds, seed=seed, device=device)  # (seeds, T, d)
    traj = propagate(X0, depth, attention="qk", s2=s2, beta=beta, mask=mask, norm=norm, values=values,
                     value_var=1.0 / d, seed=seed + 1)
    cpu = mask.cpu()
    graph = dict(strongly_connected=is_strongly_connected(cpu), quasi_strongly_connected=is_quasi_strongly_connected(cpu),
                 diameter=diameter(cpu), centre_eccentricity=centre_eccentricity(cpu))
    return MaskData(
        params=dict(kind=kind, T=T, window=window if kind.startswith("sliding") else None, beta=beta,
                    norm=norm, values=values, depth=traj.depth, d=d, s2=s2, seeds=seeds, seed=seed),
        mask=to_numpy(cpu),
        mu=to_numpy(traj.mu),
        uniform_rate=consensus_rate(cpu),
        graph=graph,
    )


def mask_figure(data: MaskData):
    """The mask as a matrix and a graph (:func:`rcteach.plotting.draw_mask`), and mu(X_t)."""
    p = data.params
    fig, (ax_m, ax_g, ax_mu) = figure(3, (13.0, 4.2), width_ratios=(1, 1, 1.3))
    title = p["kind"] + (f", w={p['window']}" if p["window"] is not None else "")
    draw_mask(torch.from_numpy(data.mask), ax=(ax_m, ax_g), title=title, node_size=120)
    g = data.graph
    ax_g.set_xlabel(f"diameter {g['diameter']:g}, centre eccentricity {g['centre_eccentricity']:g}")
    layers = np.arange(p["depth"] + 1)
    axes(f"μ(X_t): β={p['beta']:.3g}, norm: {p['norm'] or 'none'}, values: {p['values']}", "layer t",
         "μ(X_t) = ‖P X_t‖_F", ax=ax_mu)
    ax_mu.plot(layers, positive(data.mu), color="C0", alpha=0.15, lw=0.8)
    ax_mu.plot(layers, positive(np.median(data.mu, 1)), "o-", color="C0", ms=3, label="median over draws")
    if 0 < data.uniform_rate < 1:
        ref = np.nanmedian(data.mu[0]) * data.uniform_rate ** layers
        ax_mu.plot(layers, ref, "k--", label=rf"uniform attention's rate $|\lambda_2|^t$, $|\lambda_2| = {data.uniform_rate:.3g}$")
    log_scale(ax_mu, "y")
    ax_mu.legend(loc="lower left", fontsize="small")
    return fig
