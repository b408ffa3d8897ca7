"""The width explorer's data and figure: stable ranks of one layer's output against T.

Introduced in chapter "Rank collapse in width" (book/04_width.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate, theory
from ..attention import LN2
from ..plotting import axes
from ..width import width_stable_ranks
from ._common import autoscale, figure, log_scale, reused, to_numpy


@dataclass(frozen=True)
class WidthData:
    """Stable ranks of one layer's output against T, for A and A_perp, with the predictions.

    ``T`` (n,) the token counts; ``stable_rank``, ``stable_rank_centred`` (n, seeds) the stable
    ranks of A X0 W_V and A_perp X0 W_V (:func:`rcteach.width.width_stable_ranks`, the definition in
    ``params["gram"]``); ``predicted`` (n,) the limit for A: 1 + c (Frobenius,
    :func:`rcteach.theory.width_stable_rank`) or 1 (Gram: the spike's s_1^4 dominates);
    ``predicted_centred`` (n,) slope * T (:func:`rcteach.theory.centred_width_slope`, or
    ``centred_width_slope_gram``).  At s2 = 0 attention is uniform and A_perp = 0 exactly, so A_perp X0 W_V
    has no stable rank: ``stable_rank_centred`` is NaN there (the figure says so).
    """

    params: dict
    T: np.ndarray
    stable_rank: np.ndarray
    stable_rank_centred: np.ndarray
    predicted: np.ndarray
    predicted_centred: np.ndarray


def width_data(T_range=(16, 128), gamma=0.5, s2=LN2, *, gram=False, points=6, seeds=4, seed=0,
               device=None, progress=None) -> WidthData:
    """Stable ranks of A X0 W_V and A_perp X0 W_V (i.i.d. model) at ``points`` values of T.

    Parameters
    ----------
    T_range : (int, int)
        Smallest and largest T (>= 2); the T values are ``points`` geometrically spaced integers.
    gamma : float > 0
        gamma = T / d, fixed along the curve (the width grows with T).
    s2 : float >= 0
        Logit variance.
    gram : bool
        False: Frobenius stable rank sum s_i^2 / s_1^2; True: Gram stable rank sum s_i^4 / s_1^4.
    points, seeds : int >= 1
        Number of T values; draws per T (batched).
    seed : int
        Randomness (T value k uses seed + k).
    progress : callable, optional
        Called as ``progress(k, n, T)`` before the k-th of the n values of T is computed (the live
        explorer shows it: at T = 1024 and small gamma an update takes seconds).
    """
    try:
        lo, hi = T_range
    except (TypeError, ValueError) as err:
        raise TypeError("T_range must be a pair (smallest T, largest T)") from err
    lo = _validate.integer("T_range[0]", lo, minimum=2)
    hi = _validate.integer("T_range[1]", hi, minimum=2)
    if hi < lo:
        raise ValueError(f"T_range must be increasing, got {T_range}")
    gamma = _validate.real("gamma", gamma, positive=True)
    s2 = _validate.log_variance("s2", s2)  # the prediction needs e^{s2}
    gram = _validate.flag("gram", gram)
    points = _validate.integer("points", points, minimum=1)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    seed = _validate.seed(seed)
    Ts = np.unique(np.geomspace(lo, hi, points).round().astype(int))  # (n,)
    sr, sr_c = [], []
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable or None, got {type(progress).__name__}")
    for k, T in enumerate(Ts):
        T = int(T)
        if progress is not None:
            progress(k, len(Ts), T)
        sr.append(to_numpy(width_stable_ranks(T, gamma, s2, seeds=seeds, gram=gram, seed=seed + k, device=device)))
        sr_c.append(to_numpy(width_stable_ranks(T, gamma, s2, seeds=seeds, gram=gram, centred=True, seed=seed + k,
                                              device=device)) if s2 > 0 else np.full(seeds, np.nan))
    limit = 1.0 if gram else theory.width_stable_rank(s2)
    slope = theory.centred_width_slope_gram(gamma) if gram else theory.centred_width_slope(gamma)
    return WidthData(
        params=dict(T_range=(lo, hi), gamma=gamma, s2=s2, gram=gram, points=points, seeds=seeds, seed=seed),
        T=Ts,
        stable_rank=np.stack(sr),
        stable_rank_centred=np.stack(sr_c),
        predicted=np.full(Ts.shape, limit),
        predicted_centred=slope * Ts,
    )


def _width_layout():
    fig, axs = figure(2, (10.0, 4.0))
    panels = []
    for ax in axs:
        draws, = ax.plot([], [], ".", alpha=0.4)
        mean, = ax.plot([], [], "o-", label="mean")
        predicted, = ax.plot([], [], "k--")
        log_scale(ax, "x")
        note = ax.text(0.5, 0.5, "s² = 0: uniform attention, A⊥ = 0,\nno stable rank", ha="center", va="center",
                       transform=ax.transAxes, visible=False)
        panels.append((ax, draws, mean, predicted, note))
    log_scale(axs[1], "y")
    fig.rcteach_layout = dict(panels=panels)
    return fig


def width_figure(data: WidthData, fig=None):
    """Stable rank against T: left A X0 W_V (flat), right A_perp X0 W_V (linear in T).

    ``fig``: a figure this function drew before, redrawn in place (a live explorer's update).
    """
    p = data.params
    which = "Gram stable rank Σs⁴/s₁⁴" if p["gram"] else "Frobenius stable rank Σs²/s₁²"
    fig = reused(fig, "width", _width_layout)
    limit = "predicted limit " + ("1" if p["gram"] else "1 + c")
    for (ax, draws, mean, predicted, note), sr, pred, name, lab in zip(
            fig.rcteach_layout["panels"], (data.stable_rank, data.stable_rank_centred),
            (data.predicted, data.predicted_centred), ("A X₀W_V", "A⊥X₀W_V"), (limit, "predicted slope × T")):
        axes(f"{name}: γ={p['gamma']:.3g}, s²={p['s2']:.3g}", "T (tokens)", which, ax=ax)
        empty = bool(np.isnan(sr).all())  # A_perp = 0 at s2 = 0
        note.set_visible(empty)
        Ts = data.T[:0] if empty else data.T
        draws.set_data(np.repeat(Ts, sr.shape[1]), sr[: len(Ts)].ravel())
        draws.set_label(f"{p['seeds']} draws per T")
        mean.set_data(Ts, sr[: len(Ts)].mean(1))
        predicted.set_data(Ts, pred[: len(Ts)])
        predicted.set_label(lab)
        ax.legend(loc="upper left", fontsize="small").set_visible(not empty)
        autoscale(ax)
    fig.rcteach_layout["panels"][0][0].set_ylim(bottom=0)
    return fig
