"""The explorers' data and figures: what the four interactive explorers compute and draw.

Each explorer of the book (:mod:`rcteach.widgets`) is a pair of plain functions, tested headlessly
and importable without ipywidgets:

* a **compute** function (``spectrum_data``, ``width_data``, ``depth_data``, ``mask_data``) that
  calls the package (:func:`rcteach.random_attention`, :func:`rcteach.width.width_stable_ranks`,
  :func:`rcteach.propagate`, :func:`rcteach.make_mask`, :mod:`rcteach.theory`) and returns plain
  data: a frozen dataclass of NumPy arrays and floats, together with the settings used (``params``);
* a **figure** function (``spectrum_figure`` ...) that draws that data with
  :func:`rcteach.plotting.axes` on a white figure with fixed margins; :func:`png` encodes it.

One module per explorer (``spectrum``, ``width``, ``depth``, ``masks``), their shared drawing
helpers in ``_common``.

Introduced in the chapters "The spectral gap", "Rank collapse in width", "Rank collapse in
depth" and "Collapse under masks", each in its "Explore" section.
"""

from ._common import DPI, live_png, png
from .depth import DepthData, DepthPrefixes, depth_data, depth_figure
from .masks import MaskData, mask_data, mask_figure
from .spectrum import ATTENTION, SpectrumData, spectrum_data, spectrum_figure
from .width import WidthData, width_data, width_figure

__all__ = [
    "ATTENTION",
    "DPI",
    "SpectrumData",
    "WidthData",
    "DepthData",
    "DepthPrefixes",
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
    "live_png",
]
