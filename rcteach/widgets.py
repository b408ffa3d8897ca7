"""Interactive explorers: ipywidgets controls wired to the data and figure functions of
:mod:`rcteach.explorers`.

An explorer (``spectrum_explorer(**defaults)`` ...) is an :class:`Explorer`, an ``ipywidgets.VBox``
of controls, a status line and an ``Output`` holding the figure as a PNG, drawn at twice
:data:`rcteach.explorers.DPI` and shown at its size (sharp on HiDPI screens).  Every control update
recomputes and redraws.  Sliders update on release (``continuous_update=False``), not on every
drag step, and the status line says "computing ..." while an update runs and how long the last one
took.

In the static book (the environment variable ``RCTEACH_STATIC_BOOK`` is set: the book's Sphinx
extension ``book/_ext/offline_html.py`` sets it for the kernels it starts) an explorer displays
instead the precomputed view of :mod:`rcteach.precomputed`: its figure over a grid of control
values (``Explorer.grid``), switched in the browser as the controls move.

Introduced in the chapters "The spectral gap", "Rank collapse in width", "Rank collapse in
depth" and "Collapse under masks", each in its "Explore" section.
"""

from __future__ import annotations

import contextlib
import functools
import html
import math
import os
import time
from typing import Callable

import ipywidgets
import torch

from . import explorers as ex
from . import precomputed
from .attention import ACTIVATIONS, LN2
from .depth import VALUES
from .masks import MASK_KINDS

__all__ = ["Explorer", "spectrum_explorer", "width_explorer", "depth_explorer", "mask_explorer"]

@contextlib.contextmanager
def _torch_threads(n):
    """torch's intra-op threads set to ``n`` for the block (None: as they are, :mod:`rcteach.threads`)."""
    if n is None:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


class Explorer(ipywidgets.VBox):
    """An explorer: controls, a status line and an Output holding the current figure.

    Parameters
    ----------
    title : str
    compute : callable
        Returns the data for keyword arguments ``to_kwargs({name: control.value})``.
    draw : callable
        ``draw(data, fig=None)`` -> matplotlib Figure; given the figure it drew last, it updates that
        figure's artists instead of building a new one.
    controls : dict[str, ipywidgets.ValueWidget]
        Named by the compute function's keywords.
    to_kwargs : callable, optional
        Maps the control values to the compute keywords (adds fixed settings).
    dependants : callable, optional
        Called with ``controls`` before every update (enables/disables controls).
    grid : dict[str, sequence], optional
        Control values precomputed for the static book (:mod:`rcteach.precomputed`), by control
        name; the other controls stay at their starting values there.
    data : optional
        The compute function's result at the starting values, shown first instead of computing it
        (the ``*_explorer`` constructors compute it before building the controls, so that bad
        starting values raise there, as in the compute function).

    Attributes
    ----------
    controls : set a control's ``.value`` to drive the explorer (what the tests do).
    output : ipywidgets.Output holding one ``image/png`` display of the current figure.
    status : ipywidgets.HTML, "computing ..." during an update, then its duration or the error.
    data : the compute function's last result;  ``kwargs()`` the keywords it was called with.
    elapsed : float, seconds the last update took (compute, draw and PNG encoding).
    threads : int or None, torch threads used by the compute step (class attribute; the previous
        setting is restored).  Default None: the count :mod:`rcteach.threads` chose at import (one
        unless ``RCTEACH_THREADS`` or ``OMP_NUM_THREADS`` says otherwise: the explorers' matrices are
        small, and one thread avoids OpenMP's start-up and spin costs, which dominate on a busy
        2-core machine).
    """

    threads = None

    def __init__(self, title, compute: Callable, draw: Callable, controls: dict, *, to_kwargs=None, dependants=None,
                 grid=None, data=None):
        self.title = title
        self.compute, self.draw = compute, draw
        self.controls = dict(controls)
        self.grid = dict(grid or {})
        self._to_kwargs = to_kwargs or (lambda values: values)
        self._dependants = dependants or (lambda c: None)
        self.data = None
        self._figure = None
        self.elapsed = math.nan
        self.updates = 0
        self.status = ipywidgets.HTML(layout=ipywidgets.Layout(min_height="1.6em"))
        self.output = ipywidgets.Output(layout=ipywidgets.Layout(min_height="300px"))
        for w in self.controls.values():
            w.layout.width = "auto"  # fill the grid cell: the slider track gets what the label leaves
        grid_box = ipywidgets.GridBox(list(self.controls.values()), layout=ipywidgets.Layout(
            grid_template_columns="repeat(auto-fill, minmax(min(100%, 340px), 1fr))", grid_gap="2px 16px"))
        super().__init__([ipywidgets.HTML(f"<b>{title}</b>"), grid_box, self.status, self.output])
        self.add_class("rcteach-explorer")
        self._dependants(self.controls)
        for w in self.controls.values():
            w.observe(self._changed, names="value")
        self.update(data)

    def _changed(self, change):
        self._dependants(self.controls)
        self.update()

    def values(self) -> dict:
        """The controls' current values, by name."""
        return {name: w.value for name, w in self.controls.items()}

    def kwargs(self, **values) -> dict:
        """The compute function's keywords for the current control values (``values`` override some)."""
        return self._to_kwargs(self.values() | values)

    def update(self, data=None):
        """Recompute and redraw now (called on every control change); ``data``: draw this result of
        the compute function for the current values instead of computing it."""
        self.status.value = "<span style='color:#b35900'>⏳ computing …</span>"
        start = time.perf_counter()
        try:
            if data is None:
                with _torch_threads(self.threads):
                    data = self.compute(**self.kwargs())
            fig = self._figure = self.draw(data, fig=self._figure)  # one figure, its artists updated
            width = round(fig.get_figwidth() * ex.DPI)  # CSS pixels: drawn at twice that for HiDPI screens
            image = ex.live_png(fig, 2 * ex.DPI)
        except (ValueError, TypeError) as err:
            self.status.value = f"<span style='color:#b00'>⚠ {type(err).__name__}: {html.escape(str(err))}</span>"
            return
        self.data = data
        self.output.outputs = ({"output_type": "display_data", "metadata": {"image/png": {"width": width}},
                                "data": {"image/png": image, "text/plain": f"<{self.title}: figure>"}},)
        self.elapsed = time.perf_counter() - start
        self.updates += 1
        self.status.value = f"<span style='color:#2a7a2a'>✓ updated in {1000 * self.elapsed:.0f} ms</span>"

    def show_progress(self, done, total, what):
        """The status line during an update: ``done`` of ``total`` steps finished, now computing ``what``."""
        self.status.value = (f"<span style='color:#b35900'>⏳ computing {html.escape(str(what))} "
                             f"({done + 1} of {total}) …</span>")

    @property
    def png(self) -> str:
        """The current figure as a base64 PNG string ("" before the first successful update)."""
        return self.output.outputs[0]["data"]["image/png"] if self.output.outputs else ""

    def static_html(self, dpi=precomputed.DPI) -> str:
        """The precomputed view of this explorer over ``grid`` (:func:`rcteach.precomputed.view`)."""
        with _torch_threads(self.threads):
            return precomputed.view(self, dpi=dpi)

    def _repr_mimebundle_(self, **kwargs):
        if os.environ.get(precomputed.STATIC_BOOK) and self.grid:
            return {"text/plain": f"<{self.title}: precomputed>", "text/html": self.static_html()}
        return super()._repr_mimebundle_(**kwargs)


_STYLE = {"description_width": "130px"}


def _slider(kind, value, description, **kw):
    """A slider that updates on release, its range [min, max] widened to hold ``value`` (ipywidgets would
    clamp a starting value outside it silently)."""
    v = math.log(value, kw.get("base", 10)) if kind == "FloatLogSlider" else value
    kw.update(min=min(kw["min"], v), max=max(kw["max"], v))
    return getattr(ipywidgets, kind)(value=value, description=description, continuous_update=False, style=_STYLE, **kw)


def _dropdown(options, value, description):
    return ipywidgets.Dropdown(options=options, value=value, description=description, style=_STYLE)


def _checkbox(value, description):
    return ipywidgets.Checkbox(value=value, description=description, style=_STYLE, indent=False)


# ipywidgets reads a Dropdown value None as "no selection" (a blank box): the control holds "none",
# the compute function gets None
_NORM_OPTIONS = [("none", "none"), ("rms (x/‖x‖)", "rms"), ("layernorm", "layernorm")]


def _norm_kwargs(values: dict) -> dict:
    return dict(values, norm=None if values["norm"] == "none" else values["norm"])


def spectrum_explorer(*, T=256, s2=LN2, activation="softmax", bias=0.0, centred=False, attention="iid", d_qk=64,
                      seed=0):
    """Spectrum explorer: eigenvalues in the complex plane and singular values of one attention matrix.

    Controls: T, s², activation (softmax / ReLU / sigmoid + bias), centred, i.i.d. vs QKᵀ attention
    (d_qk).  The keywords set the starting values.  Returns an :func:`Explorer`; its compute function is
    :func:`rcteach.explorers.spectrum_data`, which checks the starting values (as the controls' values below);
    precomputed over T, s² and centring.
    """
    data = ex.spectrum_data(T, s2, activation=activation, bias=bias, centred=centred, attention=attention, d_qk=d_qk,
                            seed=seed)
    T, s2, bias, d_qk, seed = (data.params[k] for k in ("T", "s2", "bias", "d_qk", "seed"))
    controls = dict(
        T=_slider("IntSlider", T, "T (tokens)", min=16, max=1024, step=16),
        s2=_slider("FloatSlider", s2, "s² (logit var.)", min=0.0, max=3.0, step=0.01, readout_format=".3f"),
        activation=_dropdown(list(ACTIVATIONS), activation, "activation"),
        bias=_slider("FloatSlider", bias, "sigmoid bias b", min=-4.0, max=4.0, step=0.1),
        centred=_checkbox(data.params["centred"], "centred (A⊥ = A − row means)"),
        attention=_dropdown([("i.i.d. logits", "iid"), ("QKᵀ logits", "qk")], attention, "attention"),
        d_qk=_slider("IntSlider", d_qk, "d_qk (QKᵀ only)", min=1, max=512, step=1),
    )

    def dependants(c):
        c["bias"].disabled = c["activation"].value != "sigmoid"
        c["d_qk"].disabled = c["attention"].value != "qk"

    def to_kwargs(v):
        return dict(v, bias=v["bias"] if v["activation"] == "sigmoid" else 0.0, seed=seed)

    grid = dict(T=precomputed.around(T, (64, 128, 256, 512, 1024)),
                s2=precomputed.around(s2, (0.0, 0.25, LN2, 1.0, 2.0, 3.0)), centred=(False, True))
    return Explorer("Spectrum explorer", ex.spectrum_data, ex.spectrum_figure, controls, to_kwargs=to_kwargs,
                    dependants=dependants, grid=grid, data=data)


def width_explorer(*, T_range=(16, 128), gamma=0.5, s2=LN2, gram=False, points=6, seeds=4, seed=0):
    """Width explorer: stable rank of A X0 W_V and A⊥ X0 W_V against T with the predictions.

    Controls: the T range, γ = T/d, s², and the stable-rank definition (Frobenius or Gram).
    Returns an :func:`Explorer`; its compute function is :func:`rcteach.explorers.width_data`, which
    checks the starting values; precomputed over the largest T and γ.
    """
    data = ex.width_data(T_range, gamma, s2, gram=gram, points=points, seeds=seeds, seed=seed)
    (lo,
     hi), gamma, s2, gram, points, seeds, seed = (data.params[k] for k in ("T_range", "gamma", "s2", "gram", "points",
                                                                              "seeds", "seed"))
    controls = dict(
        T_range=ipywidgets.IntRangeSlider(value=(lo, hi), min=min(8, lo), max=max(1024, hi), step=8,
                                          description="T range", continuous_update=False, style=_STYLE),
        gamma=_slider("FloatSlider", gamma, "γ = T/d", min=0.05, max=2.0, step=0.05),
        s2=_slider("FloatSlider", s2, "s² (logit var.)", min=0.0, max=3.0, step=0.01, readout_format=".3f"),
        gram=_dropdown([("Frobenius Σs²/s₁²", False), ("Gram Σs⁴/s₁⁴", True)], gram, "stable rank"),
    )
    grid = dict(T_range=[(lo, t) for t in precomputed.around(hi, (32, 64, 128, 256, 512)) if t >= lo],
                gamma=precomputed.around(gamma, (0.25, 0.5, 1.0, 2.0)))
    explorer = Explorer("Width explorer", ex.width_data, ex.width_figure, controls,
                        to_kwargs=lambda v: dict(v, points=points, seeds=seeds, seed=seed), grid=grid, data=data)

    def progress(k, n, T):  # an update at T = 1024 and a small gamma takes seconds: say how far it is
        explorer.show_progress(k, n, f"T = {T}")

    explorer.compute = functools.partial(ex.width_data, progress=progress)
    return explorer


def depth_explorer(*, depth=12, attention="iid", centred=False, norm=None, skip=False, values="gaussian",
                   value_scale=1.0, s2=LN2, T=32, d=64, seeds=8, seed=0):
    """Depth explorer: μ, both stable ranks and ‖X‖_F per layer of a stack of attention layers.

    Controls: depth, attention model, centring, norm, skip, values and value scale σ_V² d, s².
    Returns an :func:`Explorer`; its compute function is :class:`rcteach.explorers.DepthPrefixes`
    (:func:`rcteach.explorers.depth_data`, a shallower depth sliced from the deepest stack computed), which
    checks the starting values; precomputed over depth, norm and skip.
    """
    compute = ex.DepthPrefixes()  # a shallower depth is sliced from the deepest stack computed
    data = compute(depth, T=T, d=d, attention=attention, s2=s2, centred=centred, norm=norm, skip=skip,
                   values=values, value_scale=value_scale, seeds=seeds, seed=seed)
    depth, T, d, centred, skip, value_scale, s2, seeds, seed = (data.params[k] for k in (
        "depth", "T", "d", "centred", "skip", "value_scale", "s2", "seeds", "seed"))
    controls = dict(
        depth=_slider("IntSlider", depth, "depth (layers)", min=1, max=64),
        attention=_dropdown([("i.i.d. logits", "iid"), ("QKᵀ (input-dependent)", "qk")], attention, "attention"),
        centred=_checkbox(centred, "centred (A⊥)"),
        norm=_dropdown(_NORM_OPTIONS, "none" if norm is None else norm, "norm"),
        skip=_checkbox(skip, "skip connection X + AXW_V"),
        values=_dropdown(list(VALUES), values, "values W_V"),
        value_scale=_slider("FloatLogSlider", value_scale, "σ_V² d (Gaussian)", base=10, min=-1.5, max=1.5, step=0.05),
        s2=_slider("FloatSlider", s2, "s² (logit var.)", min=0.0, max=3.0, step=0.01, readout_format=".3f"),
    )

    def dependants(c):
        c["value_scale"].disabled = c["values"].value != "gaussian"

    grid = dict(depth=precomputed.around(depth, (2, 4, 8, 12, 16, 24, 32, 48, 64)),
                norm=[value for _, value in _NORM_OPTIONS], skip=(False, True))
    return Explorer("Depth explorer", compute, ex.depth_figure, controls, dependants=dependants,
                    to_kwargs=lambda v: dict(_norm_kwargs(v), T=T, d=d, seeds=seeds, seed=seed), grid=grid, data=data)


def mask_explorer(*, kind="causal", window=2, beta=1.0, norm=None, values="orthogonal", T=10, depth=24, d=32,
                  seeds=8, seed=0):
    """Mask explorer: the mask's graph and μ(X_t) of masked QKᵀ attention through the layers.

    Controls: mask kind, window (sliding kinds), β (inverse temperature), norm, values.  Returns an
    :func:`Explorer`; its compute function is :func:`rcteach.explorers.mask_data`, which checks the
    starting values; precomputed over kind, window and β.
    """
    data = ex.mask_data(kind, T=T, window=window, beta=beta, norm=norm, values=values, depth=depth, d=d, seeds=seeds,
                        seed=seed)
    T, beta, depth, d, seeds, seed = (data.params[k] for k in ("T", "beta", "depth", "d", "seeds", "seed"))
    controls = dict(
        kind=_dropdown(list(MASK_KINDS), kind, "mask"),
        window=_slider("IntSlider", window, "window w (sliding)", min=1, max=T - 1),
        beta=_slider("FloatLogSlider", beta, "β (1/temperature)", base=10, min=-1.5, max=1, step=0.05),
        norm=_dropdown(_NORM_OPTIONS, "none" if norm is None else norm, "norm"),
        values=_dropdown(list(VALUES), values, "values W_V"),
    )

    def dependants(c):
        c["window"].disabled = not c["kind"].value.startswith("sliding")

    grid = dict(kind=list(MASK_KINDS), window=precomputed.around(window, (1, 2, 3, 4)),
                beta=precomputed.around(beta, (0.1, 0.3, 1.0, 3.0, 10.0)))
    return Explorer("Mask explorer", ex.mask_data, ex.mask_figure, controls, dependants=dependants,
                    to_kwargs=lambda v: dict(_norm_kwargs(v), T=T, depth=depth, d=d, seeds=seeds, seed=seed), grid=grid,
                    data=data)
