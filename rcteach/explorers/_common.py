"""What the explorers' figure functions share: fixed-margin figures, log axes, PNG encoding."""

from __future__ import annotations

import base64
import io

import matplotlib.pyplot as plt
import numpy as np
import torch

DPI = 72  # figure resolution of the explorers' PNGs: small enough to encode in a few ms


def to_numpy(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy()


def figure(ncols, figsize, *, left=0.65, top=0.45, wspace=0.3, **gridspec):
    """A white (1, ncols) figure with fixed margins (``left``, ``top`` in inches): no layout engine,
    whose extra text-measuring passes would cost more than all of an explorer's computing at its
    default settings."""
    fig, axs = plt.subplots(1, ncols, figsize=figsize, facecolor="white", gridspec_kw=gridspec)
    fig.subplots_adjust(left=left / figsize[0], right=1 - 0.15 / figsize[0], bottom=0.55 / figsize[1],
                        top=1 - top / figsize[1], wspace=wspace)
    return fig, axs


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
