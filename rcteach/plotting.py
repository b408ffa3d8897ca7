"""Figures shared by the chapters and the explorers: white background, title, labelled axes."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

__all__ = ["axes", "plot_spectrum"]


def axes(title: str, xlabel: str, ylabel: str, *, ax=None, figsize=(5.5, 4.0)):
    """A titled, labelled pair (fig, ax) on a white background (a new figure unless ``ax``)."""
    if ax is None:
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
    ev = ev.ravel()
    fig, ax = axes(title, "Re λ", "Im λ", ax=ax)
    ax.scatter(ev.real, ev.imag, s=scatter.pop("s", 4), alpha=scatter.pop("alpha", 0.6), label=label or "eigenvalues", **scatter)
    if radius is not None:
        t = np.linspace(0, 2 * math.pi, 400)
        ax.plot(radius * np.cos(t), radius * np.sin(t), "k--", lw=1, label=f"predicted bulk radius {radius:.3g}")
    if outlier is not None:
        ax.plot([outlier], [0], "r*", ms=12, label=f"predicted outlier {outlier:g}")
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(loc="upper left", fontsize="small")
    return fig, ax
