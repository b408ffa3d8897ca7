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
from ._common import add_draws, figure, fixed_labels, reused, show_draws, to_numpy


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
    graph = dict(strongly_connected=is_strongly_connected(cpu),
                 quasi_strongly_connected=is_quasi_strongly_connected(cpu),
                 diameter=diameter(cpu), centre_eccentricity=centre_eccentricity(cpu))
    return MaskData(
        params=dict(kind=kind, T=T, window=window if kind.startswith("sliding") else None, beta=beta,
                    norm=norm, values=values, depth=traj.depth, d=d, s2=s2, seeds=seeds, seed=seed),
        mask=to_numpy(cpu),
        mu=to_numpy(traj.mu),
        uniform_rate=consensus_rate(cpu),
        graph=graph,
    )


def _mask_layout():
    fig, (ax_m, ax_g, ax_mu) = figure(3, (13.0, 4.2), width_ratios=(1, 1, 1.3))
    draws = add_draws(ax_mu, "C0")
    (ref,) = ax_mu.plot([], [], "k--")
    fig.rcteach_layout = dict(ax_m=ax_m, ax_g=ax_g, ax_mu=ax_mu, draws=draws, ref=ref, mask=None)
    return fig


def mask_figure(data: MaskData, fig=None):
    """The mask as a matrix and a graph (:func:`rcteach.plotting.draw_mask`), and mu(X_t).

    ``fig``: a figure this function drew before, redrawn in place (a live explorer's update; the
    mask's two panels are drawn again only when the mask changes).
    """
    p = data.params
    fig = reused(fig, "mask", _mask_layout)
    a = fig.rcteach_layout
    title = p["kind"] + (f", w={p['window']}" if p["window"] is not None else "")
    if a["mask"] != (title, data.mask.tobytes()):
        for ax in (a["ax_m"], a["ax_g"]):
            ax.clear()
            fixed_labels(ax)
        draw_mask(torch.from_numpy(data.mask), ax=(a["ax_m"], a["ax_g"]), title=title, node_size=120)
        g = data.graph
        a["ax_g"].set_xlabel(f"diameter {g['diameter']:g}, centre eccentricity {g['centre_eccentricity']:g}")
        a["mask"], a["background"] = (title, data.mask.tobytes()), None  # the mask's panels changed
    a["redraw"] = [a["ax_mu"]]  # only mu changes while the mask stays (explorers.live_png)
    layers = np.arange(p["depth"] + 1)
    axes(f"μ(X_t): β={p['beta']:.3g}, norm: {p['norm'] or 'none'}, values: {p['values']}", "layer t",
         "μ(X_t) = ‖P X_t‖_F", ax=a["ax_mu"])
    shown = 0 < data.uniform_rate < 1
    a["ref"].set_visible(shown)
    a["ref"].set_data(layers if shown else [], np.nanmedian(data.mu[0]) * data.uniform_rate ** layers if shown else [])
    a["ref"].set_label(rf"uniform attention's rate $|\lambda_2|^t$, $|\lambda_2| = {data.uniform_rate:.3g}$")
    a["ax_mu"].legend(handles=[a["draws"][1]] + [a["ref"]] * shown, loc="lower left", fontsize="small")
    show_draws(a["ax_mu"], a["draws"], layers, data.mu)
    return fig
