"""The explorers' data and figures: what the four interactive explorers compute and draw.

Each explorer of the book (:mod:`rcteach.widgets`) is a pair of plain functions, tested headlessly
and importable without ipywidgets:

* a **compute** function (``spectrum_data``, ``width_data``, ``depth_data``, ``mask_data``) that
  calls the package (:func:`rcteach.random_attention`, :func:`rcteach.width.width_stable_ranks`,
  :func:`rcteach.propagate`, :func:`rcteach.make_mask`, :mod:`rcteach.theory`) and returns plain
  data: a frozen dataclass of NumPy arrays and floats, together with the settings used (``params``);
* a **figure** function (``spectrum_figure`` ...) that draws that data with
  :func:`rcteach.plotting.axes` on a white figure with fixed margins; :func:`png` encodes it.

Introduced in the chapters "The spectral gap", "Rank collapse in width", "Rank collapse in
depth" and "Collapse under masks", each in its "Explore" section.
"""

from __future__ import annotations

import base64
import io
import math
import warnings
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np
import torch

from . import _validate, theory
from .attention import ACTIVATIONS, LN2, attention_map, random_attention
from .depth import propagate
from .logits import random_qk_logits
from .masks import MASK_KINDS, centre_eccentricity, diameter, is_quasi_strongly_connected, is_strongly_connected, make_mask
from .metrics import spectrum
from .plotting import axes, draw_mask, plot_spectrum
from .tokens import orthonormal_tokens
from .width import width_stable_ranks

__all__ = [
    "ATTENTION",
    "SpectrumData",
    "WidthData",
    "DepthData",
    "MaskData",
    "spectrum_data",
    "width_data",
    "depth_data",
    "mask_data",
    "spectrum_figure",
    "width_figure",
    "depth_figure",
    "mask_figure",
    "png",
]

ATTENTION = ("iid", "qk")  # the attention models: i.i.d. logits, or query-key logits on orthonormal tokens

DPI = 72  # figure resolution of the explorers' PNGs: small enough to encode in a few ms


def renamed(old: str, new: str, value):
    """``value`` of a keyword renamed ``old`` -> ``new``, with a DeprecationWarning naming ``new``
    (pointing at the caller of the function that calls this)."""
    warnings.warn(f"the keyword {old}= is deprecated and will be removed in the next release; use {new}=",
                  DeprecationWarning, stacklevel=3)
    return value


def _numpy(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy()


def _figure(ncols, figsize, *, left=0.65, top=0.45, wspace=0.3, **gridspec):
    """A white (1, ncols) figure with fixed margins (``left``, ``top`` in inches): no layout engine,
    whose extra text-measuring passes would cost more than all of an explorer's computing at its
    default settings."""
    fig, axs = plt.subplots(1, ncols, figsize=figsize, facecolor="white", gridspec_kw=gridspec)
    fig.subplots_adjust(left=left / figsize[0], right=1 - 0.15 / figsize[0], bottom=0.55 / figsize[1],
                        top=1 - top / figsize[1], wspace=wspace)
    return fig, axs


def _log(ax, which):
    """Log scale on ax's x or y axis with few ticks and plain labels: tick objects and mathtext
    labels are most of the cost of drawing a small figure."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_locator(LogLocator(numticks=6))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


# -- 1. spectrum ----------------------------------------------------------------------------------

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
                  device=None, model=None) -> SpectrumData:
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
    model : deprecated name of ``attention``.

    Returns
    -------
    SpectrumData
    """
    T = _validate.integer("T", T, minimum=2)
    s2 = _validate.real("s2", s2, minimum=0.0)
    activation = _validate.choice("activation", activation, ACTIVATIONS)
    centred = _validate.flag("centred", centred)
    if model is not None:
        attention = renamed("model", "attention", model)
    attention = _validate.choice("attention", attention, ATTENTION)
    d_qk = _validate.integer("d_qk", d_qk, minimum=1)
    seed = _validate.integer("seed", seed)
    bias = _validate.bias(activation, bias)
    if attention == "iid":
        A = random_attention(T, s2, activation=activation, bias=bias, centred=centred, seed=seed, device=device)
    else:
        sigma = s2**0.25  # sigma_q^2 sigma_k^2 r^4 = s2 for unit tokens
        logits = random_qk_logits(T, T, d_qk, token_norm_sq=1.0, sigma_q=sigma, sigma_k=sigma, seed=seed, device=device)
        A = attention_map(logits, activation=activation, bias=bias, centred=centred)  # (T, T)
    radius = theory.map_bulk_radius(T, activation, s2, bias)
    return SpectrumData(
        params=dict(T=T, s2=s2, activation=activation, bias=bias, centred=centred, attention=attention, d_qk=d_qk, seed=seed),
        eigenvalues=_numpy(spectrum(A)),
        singular_values=_numpy(torch.linalg.svdvals(A)),
        predicted_radius=radius,
        predicted_outlier=0.0 if centred else theory.outlier(activation, s2, bias),
        predicted_edge=2.0 * radius,
    )


def spectrum_figure(data: SpectrumData):
    """Left: eigenvalues in the complex plane, predicted circle and outlier.  Right: singular values."""
    p = data.params
    fig, (ax_e, ax_s) = _figure(2, (10.0, 4.2))
    name = ("A⊥" if p["centred"] else "A") + f" ({p['activation']}, {'i.i.d.' if p['attention'] == 'iid' else 'QKᵀ, d_qk=%d' % p['d_qk']})"
    plot_spectrum(data.eigenvalues, radius=data.predicted_radius, outlier=data.predicted_outlier, ax=ax_e,
                  title=f"Eigenvalues of {name}, T={p['T']}, s²={p['s2']:.3g}")
    k = np.arange(1, data.singular_values.size + 1)
    axes(f"Singular values of {name}", "index k", "σ_k (log scale)", ax=ax_s)
    ax_s.plot(k, np.maximum(data.singular_values, 1e-18), ".", ms=3, label="singular values")
    _log(ax_s, "y")
    ax_s.axhline(data.predicted_edge, color="k", ls="--", lw=1,
                 label=f"predicted bulk edge 2√(Var f/T) = {data.predicted_edge:.3g}")
    ax_s.legend(loc="upper right", fontsize="small")
    return fig


# -- 2. width -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WidthData:
    """Stable ranks of one layer's output against T, for A and A_perp, with the predictions.

    ``T`` (n,) the token counts; ``stable_rank``, ``stable_rank_centred`` (n, seeds) the stable
    ranks of A X0 W_V and A_perp X0 W_V (:func:`rcteach.width.width_stable_ranks`, the definition in
    ``params["gram"]``); ``predicted`` (n,) the limit for A: 1 + c (Frobenius,
    :func:`rcteach.theory.width_stable_rank`) or 1 (Gram: the spike's s_1^4 dominates);
    ``predicted_centred`` (n,) slope * T (:func:`rcteach.theory.centred_width_slope`, or
    ``centred_width_slope_gram``).
    """

    params: dict
    T: np.ndarray
    stable_rank: np.ndarray
    stable_rank_centred: np.ndarray
    predicted: np.ndarray
    predicted_centred: np.ndarray


def width_data(T_range=(16, 128), gamma=0.5, s2=LN2, *, gram=False, points=6, seeds=4, seed=0, device=None) -> WidthData:
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
    s2 = _validate.real("s2", s2, minimum=0.0)
    gram = _validate.flag("gram", gram)
    points = _validate.integer("points", points, minimum=1)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    seed = _validate.integer("seed", seed)
    Ts = np.unique(np.geomspace(lo, hi, points).round().astype(int))  # (n,)
    sr, sr_c = [], []
    for k, T in enumerate(Ts):
        T = int(T)
        sr.append(_numpy(width_stable_ranks(T, gamma, s2, seeds=seeds, gram=gram, seed=seed + k, device=device)))
        sr_c.append(_numpy(width_stable_ranks(T, gamma, s2, seeds=seeds, gram=gram, centred=True, seed=seed + k,
                                              device=device)))
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


def width_figure(data: WidthData):
    """Stable rank against T: left A X0 W_V (flat), right A_perp X0 W_V (linear in T)."""
    p = data.params
    which = "Gram stable rank Σs⁴/s₁⁴" if p["gram"] else "Frobenius stable rank Σs²/s₁²"
    fig, (ax_a, ax_c) = _figure(2, (10.0, 4.0))
    for ax, sr, pred, name, lab in (
        (ax_a, data.stable_rank, data.predicted, "A X₀W_V", "predicted limit " + ("1" if p["gram"] else "1 + c")),
        (ax_c, data.stable_rank_centred, data.predicted_centred, "A⊥X₀W_V", "predicted slope × T"),
    ):
        axes(f"{name}: γ={p['gamma']:.3g}, s²={p['s2']:.3g}", "T (tokens)", which, ax=ax)
        ax.plot(np.repeat(data.T, sr.shape[1]), sr.ravel(), ".", alpha=0.4, label=f"{p['seeds']} draws per T")
        ax.plot(data.T, sr.mean(1), "o-", label="mean")
        ax.plot(data.T, pred, "k--", label=lab)
        _log(ax, "x")
        ax.legend(loc="upper left", fontsize="small")
    ax_a.set_ylim(bottom=0)
    _log(ax_c, "y")
    return fig


# -- 3. depth -------------------------------------------------------------------------------------

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
    seeds = _validate.integer("seeds", seeds, minimum=1)
    seed = _validate.integer("seed", seed)
    X0 = orthonormal_tokens(T, d, batch=seeds, seed=seed, device=device)  # (seeds, T, d)
    traj = propagate(X0, depth, attention=attention, s2=s2, centred=centred, norm=norm, skip=skip, values=values,
                     value_var=value_scale / d, seed=seed + 1)
    mu = _numpy(traj.mu)
    predicted = None
    if attention == "iid" and norm is None and skip is False:
        # E mu^2(A X W) = (c/T) kappa mu^2(X) for A independent of X (P A = P A_perp, any centring)
        factor = theory.depth_mu_factor(T, s2) * (value_scale if values == "gaussian" else 1.0)
        predicted = math.sqrt(float(np.mean(mu[0] ** 2))) * factor ** (np.arange(traj.depth + 1) / 2)
    return DepthData(
        params=dict(depth=traj.depth, T=T, d=d, attention=attention, s2=s2, centred=centred, norm=norm, skip=skip,
                    values=values, value_scale=value_scale, seeds=seeds, seed=seed),
        mu=mu,
        stable_rank=_numpy(traj.stable_rank),
        stable_rank_gram=_numpy(traj.stable_rank_gram),
        norm=_numpy(traj.norm),
        predicted_mu=predicted,
    )


def _positive(x):
    """x with non-positive entries as NaN, for log axes (mu reaches exactly 0 at the float floor)."""
    x = np.asarray(x, dtype=float)
    return np.where(x > 0, x, np.nan)


def depth_figure(data: DepthData):
    """mu, both stable ranks and ||X||_F per layer (median over the draws, and each draw faintly)."""
    p = data.params
    fig, (ax_mu, ax_sr, ax_n) = _figure(3, (12.5, 4.4), left=0.85, top=0.8, wspace=0.33)
    layers = np.arange(p["depth"] + 1)
    fig.suptitle(f"{p['attention']} attention{' (centred)' if p['centred'] else ''}, norm: {p['norm'] or 'none'}, "
                 f"skip: {'yes' if p['skip'] else 'no'}, values: {p['values']}, T={p['T']}, d={p['d']}, "
                 f"s²={p['s2']:.3g}" + (f", σ_V²d={p['value_scale']:.3g}" if p["values"] == "gaussian" else ""))
    axes("Distance to consensus", "layer ℓ", "μ(X_ℓ) = ‖P X_ℓ‖_F", ax=ax_mu)
    ax_mu.plot(layers, _positive(data.mu), color="C0", alpha=0.15, lw=0.8)
    ax_mu.plot(layers, _positive(np.median(data.mu, 1)), "o-", color="C0", ms=3, label="median over draws")
    if data.predicted_mu is not None:
        ax_mu.plot(layers, data.predicted_mu, "k--", label=r"predicted $\mu_0\,(\kappa c/T)^{\ell/2}$")
    _log(ax_mu, "y")
    ax_mu.legend(loc="lower left", fontsize="small")
    axes("Stable ranks", "layer ℓ", "stable rank of X_ℓ", ax=ax_sr)
    ax_sr.plot(layers, np.nanmedian(data.stable_rank, 1), "o-", ms=3, label="Frobenius Σs²/s₁²")
    ax_sr.plot(layers, np.nanmedian(data.stable_rank_gram, 1), "s-", ms=3, label="Gram Σs⁴/s₁⁴")
    ax_sr.set_ylim(bottom=0)
    ax_sr.legend(loc="upper right", fontsize="small")
    axes("Norm", "layer ℓ", "‖X_ℓ‖_F", ax=ax_n)
    ax_n.plot(layers, _positive(data.norm), color="C2", alpha=0.15, lw=0.8)
    ax_n.plot(layers, _positive(np.median(data.norm, 1)), "o-", color="C2", ms=3, label="median over draws")
    _log(ax_n, "y")
    ax_n.legend(loc="best", fontsize="small")
    return fig


# -- 4. masks -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MaskData:
    """A mask, its graph properties and mu(X_t) through query-key attention restricted to it.

    ``mask`` (T, T) bool; ``mu`` (depth + 1, seeds); ``uniform_rate`` |lambda_2| of uniform
    attention on the mask (:func:`rcteach.theory.consensus_rate`), the exact asymptotic per-layer
    factor of mu at beta = 0; ``graph`` the mask's graph properties (:mod:`rcteach.masks`).
    """

    params: dict
    mask: np.ndarray
    mu: np.ndarray
    uniform_rate: float
    graph: dict = field(default_factory=dict)


def mask_data(kind="causal", *, T=10, window=2, beta=1.0, norm=None, values="orthogonal", depth=24, d=32,
              s2=1.0, seeds=8, seed=0, device=None, temperature=None) -> MaskData:
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
    temperature : deprecated; ``beta = 1 / temperature``.
    """
    if temperature is not None:
        beta = 1.0 / _validate.real("temperature", renamed("temperature", "beta", temperature), positive=True)
    kind = _validate.choice("kind", kind, MASK_KINDS)
    beta = _validate.real("beta", beta, positive=True)
    d = _validate.integer("d", d, minimum=1)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    seed = _validate.integer("seed", seed)
    mask = make_mask(kind, T, window=window if kind.startswith("sliding") else None, device=device)
    X0 = orthonormal_tokens(T, d, batch=seeds, seed=seed, device=device)  # (seeds, T, d)
    traj = propagate(X0, depth, attention="qk", s2=s2, beta=beta, mask=mask, norm=norm, values=values,
                     value_var=1.0 / d, seed=seed + 1)
    cpu = mask.cpu()
    graph = dict(strongly_connected=is_strongly_connected(cpu), quasi_strongly_connected=is_quasi_strongly_connected(cpu),
                 diameter=diameter(cpu), centre_eccentricity=centre_eccentricity(cpu))
    return MaskData(
        params=dict(kind=kind, T=T, window=window if kind.startswith("sliding") else None, beta=beta,
                    norm=norm, values=values, depth=traj.depth, d=d, s2=s2, seeds=seeds, seed=seed),
        mask=_numpy(cpu),
        mu=_numpy(traj.mu),
        uniform_rate=theory.consensus_rate(cpu),
        graph=graph,
    )


def mask_figure(data: MaskData):
    """The mask as a matrix and a graph (:func:`rcteach.plotting.draw_mask`), and mu(X_t)."""
    p = data.params
    fig, (ax_m, ax_g, ax_mu) = _figure(3, (13.0, 4.2), width_ratios=(1, 1, 1.3))
    title = p["kind"] + (f", w={p['window']}" if p["window"] is not None else "")
    draw_mask(torch.from_numpy(data.mask), ax=(ax_m, ax_g), title=title, node_size=120)
    g = data.graph
    ax_g.set_xlabel(f"diameter {g['diameter']:g}, centre eccentricity {g['centre_eccentricity']:g}")
    layers = np.arange(p["depth"] + 1)
    axes(f"μ(X_t): β={p['beta']:.3g}, norm: {p['norm'] or 'none'}, values: {p['values']}", "layer t",
         "μ(X_t) = ‖P X_t‖_F", ax=ax_mu)
    ax_mu.plot(layers, _positive(data.mu), color="C0", alpha=0.15, lw=0.8)
    ax_mu.plot(layers, _positive(np.median(data.mu, 1)), "o-", color="C0", ms=3, label="median over draws")
    if 0 < data.uniform_rate < 1:
        ref = np.nanmedian(data.mu[0]) * data.uniform_rate ** layers
        ax_mu.plot(layers, ref, "k--", label=rf"uniform attention's rate $|\lambda_2|^t$, $|\lambda_2| = {data.uniform_rate:.3g}$")
    _log(ax_mu, "y")
    ax_mu.legend(loc="lower left", fontsize="small")
    return fig


# -- encoding -------------------------------------------------------------------------------------

def png(fig, dpi=DPI, colors=None) -> str:
    """The figure as a base64 PNG string at ``dpi`` (then closed, so no notebook shows it again).

    ``colors``: reduce to a palette of that many colours (no dithering), about a third of the
    bytes for these line and scatter plots with no visible change; None keeps full colour.
    """
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi, facecolor="white")
    finally:
        plt.close(fig)
    if colors is not None:
        from PIL import Image  # a dependency of matplotlib

        image = Image.open(buf).convert("RGB").quantize(colors=colors, method=Image.Quantize.MEDIANCUT,
                                                        dither=Image.Dither.NONE)
        buf = io.BytesIO()
        image.save(buf, format="png", optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii")

