"""What the explorers' figure functions share: fixed-margin figures, log axes, PNG encoding."""

from __future__ import annotations

import base64
import io

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 72  # figure resolution of the explorers' PNGs: small enough to encode in a few ms
LEFT = 0.9  # inches of left margin: room for y tick labels such as 0.0001 and the y label beside them


def to_numpy(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy()


def figure(ncols, figsize, *, left=LEFT, top=0.45, wspace=0.3, **gridspec):
    """A white (1, ncols) figure with fixed margins (``left``, ``top`` in inches): no layout engine,
    whose extra text-measuring passes would cost more than all of an explorer's computing at its
    default settings.  Titles and axis labels sit at fixed distances from their axes (:func:`fixed_labels`):
    matplotlib would otherwise measure every tick label at every draw to place them, a third of a live
    update's drawing.  Not a pyplot figure: no notebook displays it unasked, and it needs no closing (a
    live explorer keeps one and redraws it)."""
    import matplotlib

    fig = Figure(figsize=figsize, facecolor="white")
    FigureCanvasAgg(fig)
    with matplotlib.rc_context({"axes.titley": 1.0}):  # the title's place when no ticks are on top
        axs = fig.subplots(1, ncols, gridspec_kw=gridspec)
    for ax in np.ravel(axs):
        fixed_labels(ax, left)
    fig.subplots_adjust(left=left / figsize[0], right=1 - 0.15 / figsize[0], bottom=0.55 / figsize[1],
                        top=1 - top / figsize[1], wspace=wspace)
    return fig, axs


def fixed_labels(ax, left=LEFT):
    """Put ax's axis labels at fixed distances from it (:func:`figure`; again after ``ax.clear()``): the x label
    0.32 in below, the y label ``left`` - 0.22 in to the left (inside a left margin of ``left`` inches)."""
    from matplotlib.transforms import ScaledTranslation

    inches = ax.figure.dpi_scale_trans
    ax.xaxis.set_label_coords(0.5, 0, transform=ax.transAxes + ScaledTranslation(0, -0.32, inches))
    ax.yaxis.set_label_coords(0, 0.5, transform=ax.transAxes + ScaledTranslation(0.22 - left, 0, inches))


def log_scale(ax, which):
    """Log scale on ax's x or y axis with few ticks and plain labels: tick objects and mathtext
    labels are most of the cost of drawing a small figure."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_locator(LogLocator(numticks=6))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def positive(x):
    """x with non-positive entries as NaN, for log axes (mu reaches exactly 0 at the float floor)."""
    x = np.asarray(x, dtype=float)
    return np.where(x > 0, x, np.nan)


def reused(fig, key, build):
    """``fig`` if it was built for the layout ``key`` (its artists are then updated in place), else a new
    figure from ``build()``.  The figure functions take ``fig=`` so that a live explorer redraws one
    figure instead of building a new one per update (building was a third of an update's time);
    ``build`` returns a :func:`figure` whose ``rcteach_layout`` dict holds the artists to update."""
    if fig is not None and getattr(fig, "rcteach_layout", {}).get("key") == key:
        return fig
    fig = build()
    fig.rcteach_layout["key"] = key
    return fig


def add_draws(ax, color):
    """Artists for per-layer values of several draws on a log y axis: a faint line per draw (one
    LineCollection) and their median (``o-``, labelled); :func:`show_draws` fills them."""
    from matplotlib.collections import LineCollection

    draws = ax.add_collection(LineCollection([], colors=color, alpha=0.15, lw=0.8))
    (median,) = ax.plot([], [], "o-", color=color, ms=3, label="median over draws")
    log_scale(ax, "y")
    return draws, median


def show_draws(ax, artists, x, values):
    """``values`` (len(x), draws) into the artists of :func:`add_draws` (non-positive values not drawn); rescales ax."""
    draws, median = artists
    v = positive(values)
    draws.set_segments([np.column_stack([x, y]) for y in v.T])  # a NaN breaks a line
    median.set_data(x, positive(np.median(values, 1)))
    autoscale(ax, (np.repeat(x, v.shape[1]), v))


def autoscale(ax, *points):
    """Rescale ``ax`` to its lines and the extra (x, y) ``points`` arrays (collections, which ``relim`` skips)."""
    ax.set_autoscale_on(True)  # a set_ylim(bottom=0) of the last update switched it off
    ax.relim()
    for x, y in points:
        xy = np.column_stack([np.ravel(x), np.ravel(y)]).astype(float)
        if ax.get_yscale() == "log":
            xy = xy[xy[:, 1] > 0]
        xy = xy[np.isfinite(xy).all(1)]
        if len(xy):
            ax.update_datalim(xy)
    ax.autoscale_view()


def live_png(fig, dpi) -> str:
    """The figure as a base64 PNG string at ``dpi`` for a live explorer's display, drawn as cheaply as it can be.

    Where the figure function kept some panels as they were (``rcteach_layout["redraw"]``: the axes to
    draw again; the mask explorer when only mu changed), the rest comes from the pixels of the last
    full draw and only those axes are drawn over them (blitting); otherwise the whole figure is drawn.
    Encoded as RGB with the least zlib compression (a few more bytes, half the encoding time).
    """
    from PIL import Image  # a dependency of matplotlib

    layout, canvas = fig.rcteach_layout, fig.canvas
    redraw = layout.get("redraw")
    if fig.dpi != dpi:
        fig.set_dpi(dpi)
        layout["background"] = None
    if redraw and layout.get("background") is not None:
        canvas.restore_region(layout["background"])
    else:  # a full draw; with panels to redraw later, first keep the pixels of the others
        for ax in redraw or ():
            ax.set_visible(False)
        canvas.draw()
        layout["background"] = canvas.copy_from_bbox(fig.bbox) if redraw else None
        for ax in redraw or ():
            ax.set_visible(True)
    for ax in redraw or ():
        fig.draw_artist(ax)
    image = Image.frombuffer("RGBA", canvas.get_width_height(physical=True), canvas.buffer_rgba()).convert("RGB")
    buf = io.BytesIO()
    image.save(buf, format="png", compress_level=1)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def png(fig, dpi=DPI, colors=None) -> str:
    """The figure as a base64 PNG string at ``dpi``.

    ``colors``: reduce to a palette of that many colours (no dithering), about a third of the
    bytes for these line and scatter plots with no visible change; None keeps full colour.
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="white")
    if colors is not None:
        from PIL import Image  # a dependency of matplotlib

        image = Image.open(buf).convert("RGB").quantize(colors=colors, method=Image.Quantize.MEDIANCUT,
                                                        dither=Image.Dither.NONE)
        buf = io.BytesIO()
        image.save(buf, format="png", optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii")
