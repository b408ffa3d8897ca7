"""The depth explorer's data and figure: mu, stable ranks and norm per layer of a stack of attention layers.

Introduced in chapter "Rank collapse in depth" (book/05_depth.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _validate, theory
from ..attention import LN2
from ..depth import propagate
from ..plotting import axes
from ..tokens import orthonormal_tokens
from ._common import add_draws, autoscale, figure, reused, show_draws, to_numpy


@dataclass(frozen=True)
class DepthData:
    """Per-layer measurements of a stack of attention layers (:func:`rcteach.propagate`).

    ``mu``, ``stable_rank`` (Frobenius), ``stable_rank_gram`` (Gram), ``norm``: (depth + 1, seeds).
    ``predicted_mu`` (depth + 1,) the root-mean-square prediction mu_0 (kappa c/T)^{l/2}
    (:func:`rcteach.theory.depth_mu_factor`, kappa = sigma_V^2 d for Gaussian values, 1 otherwise),
    or None where it does not apply (query-key attention, a skip or a norm).
    """

    params: dict
    mu: np.ndarray
    stable_rank: np.ndarray
    stable_rank_gram: np.ndarray
    norm: np.ndarray
    predicted_mu: np.ndarray | None


def depth_data(depth=12, *, T=32, d=64, attention="iid", s2=LN2, centred=False, norm=None, skip=False,
               values="gaussian", value_scale=1.0, seeds=8, seed=0, device=None) -> DepthData:
    """Propagate ``seeds`` batches of T orthonormal tokens in R^d through ``depth`` layers.

    Parameters
    ----------
    depth : int >= 0
    T, d : int
        Tokens and width, 2 <= T <= d (orthonormal inputs, :func:`rcteach.orthonormal_tokens`).
    attention, s2, centred, norm, skip, values
        As in :func:`rcteach.propagate`.
    value_scale : float > 0
        sigma_V^2 d for Gaussian values (``value_var = value_scale / d``): 1 keeps ||X||_F in
        expectation with attention A.
    seeds : int >= 1
        Independent networks, batched.
    seed : int
        Randomness (tokens from ``seed``, the layers from ``seed + 1``).
    """
    T = _validate.integer("T", T, minimum=2)
    d = _validate.integer("d", d, minimum=1)
    s2 = _validate.real("s2", s2, minimum=0.0)
    value_scale = _validate.real("value_scale", value_scale, positive=True)
    skip = _validate.flag("skip", skip)  # a checkbox here; propagate also takes a skip strength
    seeds = _validate.integer("seeds", seeds, minimum=1)
    seed = _validate.seed(seed)
    X0 = orthonormal_tokens(T, d, batch=seeds, seed=seed, device=device)  # (seeds, T, d)
    traj = propagate(X0, depth, attention=attention, s2=s2, centred=centred, norm=norm, skip=skip, values=values,
                     value_var=value_scale / d, seed=seed + 1)
    mu = to_numpy(traj.mu)
    predicted = None
    if attention == "iid" and norm is None and skip is False:
        # E mu^2(A X W) = (c/T) kappa mu^2(X) for A independent of X (P A = P A_perp, any centring)
        factor = theory.depth_mu_factor(T, s2) * (value_scale if values == "gaussian" else 1.0)
        predicted = math.sqrt(float(np.mean(mu[0] ** 2))) * factor ** (np.arange(traj.depth + 1) / 2)
    return DepthData(
        params=dict(depth=traj.depth, T=T, d=d, attention=attention, s2=s2, centred=centred, norm=norm, skip=skip,
                    values=values, value_scale=value_scale, seeds=seeds, seed=seed),
        mu=mu,
        stable_rank=to_numpy(traj.stable_rank),
        stable_rank_gram=to_numpy(traj.stable_rank_gram),
        norm=to_numpy(traj.norm),
        predicted_mu=predicted,
    )


class DepthPrefixes:
    """:func:`depth_data` that keeps its deepest result: a call with the same other arguments and a depth no
    larger is a prefix of it and is sliced from it, not computed (the layers are drawn in order from one
    generator, so the first ``depth`` layers of a deeper stack are the stack of that depth, value for value).
    The depth explorer's compute function: moving the depth slider back costs no computing."""

    def __init__(self):
        self._key, self._data = None, None

    def __call__(self, depth=12, **kwargs) -> DepthData:
        depth = _validate.integer("depth", depth, minimum=0)
        key = tuple(sorted(kwargs.items(), key=lambda kv: kv[0]))
        kept = self._data
        if kept is None or key != self._key or depth > kept.params["depth"]:
            self._key, self._data = key, depth_data(depth, **kwargs)
            return self._data
        n = depth + 1
        return DepthData(params={**kept.params, "depth": depth}, mu=kept.mu[:n], stable_rank=kept.stable_rank[:n],
                         stable_rank_gram=kept.stable_rank_gram[:n], norm=kept.norm[:n],
                         predicted_mu=None if kept.predicted_mu is None else kept.predicted_mu[:n])


def _depth_layout():
    fig, (ax_mu, ax_sr, ax_n) = figure(3, (12.5, 4.4), top=0.8, wspace=0.33)
    axes("Distance to consensus", "layer ℓ", "μ(X_ℓ) = ‖P X_ℓ‖_F", ax=ax_mu)
    axes("Stable ranks", "layer ℓ", "stable rank of X_ℓ", ax=ax_sr)
    axes("Norm: median and each draw", "layer ℓ", "‖X_ℓ‖_F", ax=ax_n)  # no legend to draw
    a = dict(ax_mu=ax_mu, ax_sr=ax_sr, ax_norm=ax_n, mu=add_draws(ax_mu, "C0"), norm=add_draws(ax_n, "C2"))
    (a["predicted"],) = ax_mu.plot([], [], "k--", label=r"predicted $\mu_0\,(\kappa c/T)^{\ell/2}$")
    (a["sr"],) = ax_sr.plot([], [], "o-", ms=3, label="Frobenius Σs²/s₁²")
    (a["sr_gram"],) = ax_sr.plot([], [], "s-", ms=3, label="Gram Σs⁴/s₁⁴")
    ax_sr.legend(loc="upper right", fontsize="small")
    fig.rcteach_layout = a
    return fig


def depth_figure(data: DepthData, fig=None):
    """mu, both stable ranks and ||X||_F per layer (median over the draws, and each draw faintly).

    ``fig``: a figure this function drew before, redrawn in place (a live explorer's update).
    """
    p = data.params
    fig = reused(fig, "depth", _depth_layout)
    a = fig.rcteach_layout
    layers = np.arange(p["depth"] + 1)
    fig.suptitle(f"{p['attention']} attention{' (centred)' if p['centred'] else ''}, norm: {p['norm'] or 'none'}, "
                 f"skip: {'yes' if p['skip'] else 'no'}, values: {p['values']}, T={p['T']}, d={p['d']}, "
                 f"s²={p['s2']:.3g}" + (f", σ_V²d={p['value_scale']:.3g}" if p["values"] == "gaussian" else ""))
    shown = data.predicted_mu is not None
    a["predicted"].set_visible(shown)
    a["predicted"].set_data(layers if shown else [], data.predicted_mu if shown else [])
    if a.get("legend_shows") != shown:  # a new legend only when its entries change (building one is ~5 ms)
        a["ax_mu"].legend(handles=[a["mu"][1]] + [a["predicted"]] * shown, loc="lower left", fontsize="small")
        a["legend_shows"] = shown
    for key in ("mu", "norm"):
        show_draws(a["ax_" + key], a[key], layers, getattr(data, key))
    a["sr"].set_data(layers, np.nanmedian(data.stable_rank, 1))
    a["sr_gram"].set_data(layers, np.nanmedian(data.stable_rank_gram, 1))
    autoscale(a["ax_sr"])
    a["ax_sr"].set_ylim(bottom=0)
    return fig
