"""The spectrum explorer's data and figure: eigenvalues and singular values of one attention matrix.

Introduced in chapter "The spectral gap" (book/02_spectral_gap.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate, linalg, theory
from ..attention import ACTIVATIONS, LN2, attention_map, random_attention
from ..device import make_generator, resolve
from ..logits import qk_logits, qk_weights
from ..metrics import spectrum
from ..plotting import axes, circle, plot_spectrum
from ..tokens import orthonormal_tokens
from ._common import autoscale, figure, log_scale, reused, to_numpy

ATTENTION = ("iid", "qk")  # the attention models: i.i.d. logits, or query-key logits on orthonormal tokens


@dataclass(frozen=True)
class SpectrumData:
    """Eigenvalues and singular values of one random attention matrix, with the predictions.

    ``eigenvalues`` (T,) complex, by decreasing modulus; ``singular_values`` (T,) decreasing;
    ``predicted_radius`` the bulk radius sqrt(Var f(g) / T) (:func:`rcteach.theory.map_bulk_radius`,
    sqrt(c/T) for softmax); ``predicted_outlier`` E f(g) (:func:`rcteach.theory.outlier`, 1 for
    softmax), 0 when centred (A_perp 1 = 0 exactly); ``predicted_edge`` the upper edge
    2 sqrt(Var f / T) of the singular values of A_perp (quarter-circle law).
    """

    params: dict
    eigenvalues: np.ndarray
    singular_values: np.ndarray
    predicted_radius: float
    predicted_outlier: float
    predicted_edge: float


def spectrum_data(T=256, s2=LN2, *, activation="softmax", bias=0.0, centred=False, attention="iid", d_qk=64, seed=0,
                  device=None) -> SpectrumData:
    """Spectrum of one T x T attention matrix and its predicted bulk circle and outlier.

    Parameters
    ----------
    T : int >= 2
        Tokens.
    s2 : float >= 0
        Logit variance; c = e^{s2} - 1.
    activation : {"softmax", "relu", "sigmoid"}
        The map (:func:`rcteach.attention_map`); ``bias`` applies to ``"sigmoid"`` only.
    centred : bool
        Use A_perp (row means removed, :func:`rcteach.centre`): the outlier goes to 0.
    attention : {"iid", "qk"}
        ``"iid"``: :func:`rcteach.random_attention`.  ``"qk"``: logits (X W_Q)(X W_K)^T / sqrt(d_qk)
        of T orthonormal tokens in R^T, W_Q, W_K with i.i.d. N(0, sqrt(s2)) entries, so every
        logit has variance s2 (:func:`rcteach.theory.logit_variance`) but the logit matrix has
        rank <= d_qk.
    d_qk : int >= 1
        Query-key width (``attention="qk"`` only).
    seed : int
        Randomness: the same seed gives the same matrix.

    Returns
    -------
    SpectrumData
    """
    T = _validate.integer("T", T, minimum=2)
    s2 = _validate.real("s2", s2, minimum=0.0)
    activation = _validate.choice("activation", activation, ACTIVATIONS)
    centred = _validate.flag("centred", centred)
    attention = _validate.choice("attention", attention, ATTENTION)
    d_qk = _validate.integer("d_qk", d_qk, minimum=1)
    seed = _validate.seed(seed)
    bias = _validate.bias(activation, bias)
    if attention == "iid":
        A = random_attention(T, s2, activation=activation, bias=bias, centred=centred, seed=seed, device=device)
    else:
        device, dtype = resolve(device, None)
        gen = make_generator(seed, None, device)
        X = orthonormal_tokens(T, T, generator=gen, device=device, dtype=dtype)  # unit-norm tokens
        logits = qk_logits(X, *qk_weights(T, d_qk, s2, generator=gen, device=device, dtype=dtype))  # variance s2
        A = attention_map(logits, activation=activation, bias=bias, centred=centred)  # (T, T)
    radius = theory.map_bulk_radius(T, activation, s2, bias)
    return SpectrumData(
        params=dict(T=T, s2=s2, activation=activation, bias=bias, centred=centred, attention=attention, d_qk=d_qk,
                    seed=seed),
        eigenvalues=to_numpy(spectrum(A)),
        singular_values=to_numpy(linalg.svdvals(A)),
        predicted_radius=radius,
        predicted_outlier=0.0 if centred else theory.outlier(activation, s2, bias),
        predicted_edge=2.0 * radius,
    )


def _spectrum_layout():
    fig, (ax_e, ax_s) = figure(2, (10.0, 4.2))
    plot_spectrum(np.zeros(0, dtype=complex), radius=1.0, outlier=0.0, ax=ax_e)  # its artists, filled per update
    axes("", "index k", "σ_k (log scale)", ax=ax_s)
    (sv,) = ax_s.plot([], [], ".", ms=3, label="singular values")
    log_scale(ax_s, "y")
    fig.rcteach_layout = dict(ax_e=ax_e, ax_s=ax_s, eigenvalues=ax_e.collections[0], circle=ax_e.lines[0],
                              outlier=ax_e.lines[1], singular_values=sv,
                              edge=ax_s.axhline(1.0, color="k", ls="--", lw=1))
    return fig


def spectrum_figure(data: SpectrumData, fig=None):
    """Left: eigenvalues in the complex plane, predicted circle and outlier.  Right: singular values.

    ``fig``: a figure this function drew before, redrawn in place (a live explorer's update).
    """
    p = data.params
    fig = reused(fig, "spectrum", _spectrum_layout)
    a = fig.rcteach_layout
    logits = "i.i.d." if p["attention"] == "iid" else f"QKᵀ, d_qk={p['d_qk']}"
    name = ("A⊥" if p["centred"] else "A") + f" ({p['activation']}, {logits})"
    ev, r, z = data.eigenvalues, data.predicted_radius, data.predicted_outlier
    a["ax_e"].set_title(f"Eigenvalues of {name}, T={p['T']}, s²={p['s2']:.3g}")
    a["eigenvalues"].set_offsets(np.column_stack([ev.real, ev.imag]))
    a["circle"].set_data(*circle(r))
    a["circle"].set_label(f"predicted bulk radius {r:.3g}")
    a["outlier"].set_data([z], [0.0])
    a["outlier"].set_label(f"predicted outlier {z:g}")
    a["ax_e"].legend(loc="upper left", fontsize="small")
    autoscale(a["ax_e"], (ev.real, ev.imag))
    a["ax_s"].set_title(f"Singular values of {name}")
    a["singular_values"].set_data(np.arange(1, data.singular_values.size + 1), np.maximum(data.singular_values, 1e-18))
    a["edge"].set_ydata([data.predicted_edge] * 2)
    a["edge"].set_label(f"predicted bulk edge 2√(Var f/T) = {data.predicted_edge:.3g}")
    a["ax_s"].legend(loc="upper right", fontsize="small")
    autoscale(a["ax_s"])
    return fig
