"""Figures shared by the chapters and the explorers: white background, title, labelled axes."""

from __future__ import annotations

import math

import numpy as np
import torch

from . import _validate

__all__ = ["axes", "plot_spectrum", "circle", "draw_mask", "plot_sweep"]


def axes(title: str, xlabel: str, ylabel: str, *, ax=None, figsize=(5.5, 4.0)):
    """A titled, labelled pair (fig, ax) on a white background (a new figure unless ``ax``)."""
    if ax is None:
        import matplotlib.pyplot as plt  # lazy: importing rcteach stays cheap

        fig, ax = plt.subplots(figsize=figsize, facecolor="white", layout="constrained")
    else:
        fig = ax.figure
        fig.set_facecolor("white")
    ax.set_facecolor("white")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return fig, ax


def plot_spectrum(eigenvalues, *, radius=None, outlier=None, title="Eigenvalues", ax=None, label=None, **scatter):
    """Eigenvalues in the complex plane, with the predicted bulk circle and outlier if given.

    ``eigenvalues``: complex tensor or array of any shape (flattened); ``radius``: draw the
    circle |z| = radius; ``outlier``: mark the predicted outlier position on the real axis.
    """
    ev = eigenvalues.detach().cpu().numpy() if isinstance(eigenvalues, torch.Tensor) else np.asarray(eigenvalues)
    if ev.dtype.kind not in "iufc":
        raise TypeError(f"eigenvalues must be a tensor or array of numbers, got {type(eigenvalues).__name__}")
    ev = ev.ravel()
    radius = None if radius is None else _validate.real("radius", radius, minimum=0.0)
    outlier = None if outlier is None else _validate.real("outlier", outlier)
    fig, ax = axes(title, "Re λ", "Im λ", ax=ax)
    ax.scatter(ev.real, ev.imag, s=scatter.pop("s", 4), alpha=scatter.pop("alpha", 0.6), label=label or "eigenvalues",
               **scatter)
    if radius is not None:
        ax.plot(*circle(radius), "k--", lw=1, label=f"predicted bulk radius {radius:.3g}")
    if outlier is not None:
        ax.plot([outlier], [0], "r*", ms=12, label=f"predicted outlier {outlier:g}")
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(loc="upper left", fontsize="small")
    return fig, ax


def circle(radius, points=400):
    """(x, y) of the circle |z| = radius, ``points`` points (the bulk circle of :func:`plot_spectrum`)."""
    t = np.linspace(0, 2 * math.pi, points)
    return radius * np.cos(t), radius * np.sin(t)


def draw_mask(mask, ax=None, *, title="Mask", layout="circular", show_self_loops=False, node_size=180):
    """A mask drawn twice: as a matrix and as its directed graph (edge j -> i when i attends to j).

    Left: the boolean matrix, row i = the attending token, column j = the attended token (dark =
    allowed).  Right: the graph of :func:`rcteach.mask_graph` with a fixed layout, so figures
    of different masks on the same T compare node by node.  Introduced in "Masks are graphs".

    Parameters
    ----------
    mask : bool Tensor, (T, T)
    ax : pair of matplotlib Axes, optional
        (matrix axes, graph axes); a new (1, 2) figure by default.
    title : str
        Figure (or panel) title; the panels are titled "<title>: matrix" and "<title>: graph".
    layout : {"circular", "line"}
        Nodes on a circle (token 0 at 12 o'clock, then clockwise) or on a horizontal line.
    show_self_loops : bool
        Draw the self-loops (every standard mask has them, so they are hidden by default).

    Returns
    -------
    fig, (ax_matrix, ax_graph)
    """
    import networkx as nx

    from .masks import check_mask, mask_graph

    mask = check_mask(mask)
    if mask.dim() != 2:
        raise ValueError(f"mask must be a single (T, T) mask, got shape {tuple(mask.shape)}")
    layout = _validate.choice("layout", layout, ("circular", "line"))
    show_self_loops = _validate.flag("show_self_loops", show_self_loops)
    if ax is None:
        import matplotlib.pyplot as plt

        fig, (ax_m, ax_g) = plt.subplots(1, 2, figsize=(8.5, 4.0), facecolor="white", layout="constrained")
    else:
        try:
            ax_m, ax_g = ax
        except (TypeError, ValueError) as err:
            raise TypeError("ax must be a pair of matplotlib Axes (matrix, graph)") from err
        fig = ax_m.figure
    T = mask.shape[0]
    m = mask.detach().cpu().numpy()
    axes(f"{title}: matrix", "j (attended token)", "i (attending token)", ax=ax_m)
    ax_m.imshow(m, cmap="Greys", vmin=0, vmax=1.4, interpolation="nearest")
    ticks = np.arange(T) if T <= 12 else np.linspace(0, T - 1, 5).round().astype(int)
    ax_m.set_xticks(ticks)
    ax_m.set_yticks(ticks)

    G = mask_graph(mask)
    if not show_self_loops:
        G.remove_edges_from(list(nx.selfloop_edges(G)))
    if layout == "circular":
        angle = math.pi / 2 - 2 * math.pi * np.arange(T) / T  # token 0 at 12 o'clock, clockwise
        pos = {k: (math.cos(a), math.sin(a)) for k, a in enumerate(angle)}
    else:
        pos = {k: (float(k), 0.0) for k in range(T)}
    axes(f"{title}: graph (j → i if i attends to j)", "", "", ax=ax_g)
    nx.draw_networkx_nodes(G, pos, ax=ax_g, node_size=node_size, node_color="#9ecae1", edgecolors="k")
    nx.draw_networkx_labels(G, pos, ax=ax_g, font_size=8)
    nx.draw_networkx_edges(G, pos, ax=ax_g, node_size=node_size, arrowsize=8, width=0.7, alpha=0.7,
                           connectionstyle="arc3,rad=0.15" if layout == "line" else "arc3")
    ax_g.set_aspect("equal" if layout == "circular" else "auto")
    ax_g.set_xticks([])
    ax_g.set_yticks([])
    return fig, (ax_m, ax_g)


def plot_sweep(table, x: str, y: str, *, hue=None, ax=None, title=None, ylabel=None, logx=False, logy=False,
               label="{hue}={value}"):
    """Plot the mean of column ``y`` of a :class:`rcteach.sweep.SweepTable` against parameter ``x``, with
    a +-1 sd band over seeds.

    One line per value of ``hue`` (another column), labelled by ``label`` (a format string with
    ``{hue}`` and ``{value}``).  Say which stable rank in ``ylabel``.  Returns the axes.
    """
    from .sweep import SweepTable

    if not isinstance(table, SweepTable):
        raise TypeError(f"table must be a rcteach.sweep.SweepTable, got {type(table).__name__}")
    _, ax = axes(title or f"{y} against {x}", x, ylabel or y, ax=ax)
    hues = [None] if hue is None else sorted(set(table[hue]), key=lambda v: (str(type(v)), v))
    for h in hues:
        part = table if h is None else table.where(**{hue: h})
        xs, mean, sd = zip(*sorted(zip(*(part.group([x], y)[k] for k in (x, "mean", "sd")))))
        line, = ax.plot(xs, mean, marker="o", label=None if h is None else label.format(hue=hue, value=h))
        ax.fill_between(xs, [m - s for m, s in zip(mean, sd)], [m + s for m, s in zip(mean, sd)],
                        color=line.get_color(), alpha=0.2)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    if hue is not None:
        ax.legend()
    return ax
