"""The explorers: compute functions headlessly, then the widgets driven through their controls."""

import math

import ipywidgets
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from rcteach import theory  # noqa: E402
from rcteach import widgets as w  # noqa: E402

SMALL = dict(
    spectrum=dict(T=32),
    width=dict(T_range=(8, 32), points=3, seeds=2),
    depth=dict(depth=4, T=8, d=16, seeds=2),
    mask=dict(T=6, depth=4, d=8, seeds=2),
)


def same(a, b):
    """Two compute results hold the same numbers."""
    assert type(a) is type(b)
    assert a.params == b.params
    for name, x in vars(a).items():
        y = getattr(b, name)
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
        elif name != "params":
            assert x == y or (x is None and y is None), name


# -- compute functions ----------------------------------------------------------------------------

def test_spectrum_data_shapes_predictions_and_seeds():
    d = w.spectrum_data(64, 0.5, seed=3)
    assert d.eigenvalues.shape == (64,) and np.iscomplexobj(d.eigenvalues)
    assert d.singular_values.shape == (64,)
    assert np.all(np.diff(np.abs(d.eigenvalues)) <= 1e-12)
    assert abs(d.eigenvalues[0] - 1) < 1e-10  # softmax: the outlier is exactly 1
    assert d.predicted_outlier == 1.0 and d.predicted_radius == pytest.approx(theory.bulk_radius(64, 0.5))
    assert d.predicted_edge == pytest.approx(2 * d.predicted_radius)
    same(d, w.spectrum_data(64, 0.5, seed=3))
    assert not np.allclose(d.eigenvalues, w.spectrum_data(64, 0.5, seed=4).eigenvalues)


def test_spectrum_data_centred_sigmoid_and_qk():
    c = w.spectrum_data(48, 0.5, centred=True, seed=1)
    assert c.predicted_outlier == 0.0
    assert np.abs(c.eigenvalues).min() < 1e-10  # A_perp 1 = 0
    # centring keeps the bulk exactly (softmax)
    a = w.spectrum_data(48, 0.5, seed=1)
    np.testing.assert_allclose(np.sort(np.abs(a.eigenvalues))[:-1], np.sort(np.abs(c.eigenvalues))[1:], atol=1e-12)
    s = w.spectrum_data(48, 1.0, activation="sigmoid", bias=1.0)
    assert s.predicted_outlier == pytest.approx(theory.outlier("sigmoid", 1.0, 1.0))
    assert s.predicted_radius == pytest.approx(theory.map_bulk_radius(48, "sigmoid", 1.0, 1.0))
    q = w.spectrum_data(32, 0.5, model="qk", d_qk=4)
    assert q.params["model"] == "qk" and abs(q.eigenvalues[0] - 1) < 1e-10


@pytest.mark.parametrize("kwargs, error", [
    (dict(T=1), ValueError), (dict(s2=-1.0), ValueError), (dict(activation="tanh"), ValueError),
    (dict(bias=1.0), ValueError), (dict(model="x"), ValueError), (dict(d_qk=0), ValueError),
    (dict(centred=1), TypeError), (dict(T=2.5), TypeError),
])
def test_spectrum_data_errors(kwargs, error):
    with pytest.raises(error):
        w.spectrum_data(**{"T": 16, **kwargs})


def test_width_data_shapes_and_predictions():
    d = w.width_data((8, 64), 0.5, 0.5, points=4, seeds=3, seed=2)
    n = d.T.size
    assert 2 <= n <= 4 and d.T[0] == 8 and d.T[-1] == 64
    assert d.stable_rank.shape == d.stable_rank_centred.shape == (n, 3)
    np.testing.assert_allclose(d.predicted, theory.width_stable_rank(0.5))
    np.testing.assert_allclose(d.predicted_centred, theory.centred_width_slope(0.5) * d.T)
    g = w.width_data((8, 64), 0.5, 0.5, gram=True, points=4, seeds=3, seed=2)
    np.testing.assert_allclose(g.predicted, 1.0)
    np.testing.assert_allclose(g.predicted_centred, theory.centred_width_slope_gram(0.5) * g.T)
    assert np.all(g.stable_rank <= d.stable_rank + 1e-9)  # sum s^4/s1^4 <= sum s^2/s1^2
    same(d, w.width_data((8, 64), 0.5, 0.5, points=4, seeds=3, seed=2))


@pytest.mark.parametrize("kwargs, error", [
    (dict(T_range=8), TypeError), (dict(T_range=(32, 8)), ValueError), (dict(T_range=(1, 8)), ValueError),
    (dict(gamma=0.0), ValueError), (dict(gram="yes"), TypeError), (dict(points=0), ValueError),
])
def test_width_data_errors(kwargs, error):
    with pytest.raises(error):
        w.width_data(**{"T_range": (8, 16), **kwargs})


def test_depth_data_shapes_and_prediction():
    d = w.depth_data(5, T=8, d=16, values="identity", seeds=3, seed=1)
    for x in (d.mu, d.stable_rank, d.stable_rank_gram, d.norm):
        assert x.shape == (6, 3)
    np.testing.assert_allclose(d.mu[0], math.sqrt(8 - 1))  # orthonormal tokens: mu^2 = T - 1
    factor = theory.depth_mu_factor(8, d.params["s2"])
    np.testing.assert_allclose(d.predicted_mu, math.sqrt(7) * factor ** (np.arange(6) / 2))
    assert w.depth_data(3, T=8, d=16, norm="rms", seeds=2).predicted_mu is None
    assert w.depth_data(3, T=8, d=16, attention="qk", seeds=2).predicted_mu is None
    same(d, w.depth_data(5, T=8, d=16, values="identity", seeds=3, seed=1))


@pytest.mark.parametrize("kwargs, error", [
    (dict(depth=-1), ValueError), (dict(attention="x"), ValueError), (dict(norm="batch"), ValueError),
    (dict(value_scale=0.0), ValueError), (dict(T=20, d=16), ValueError), (dict(seeds=0), ValueError),
])
def test_depth_data_errors(kwargs, error):
    with pytest.raises(error):
        w.depth_data(**{"depth": 2, "T": 8, "d": 16, **kwargs})


def test_mask_data_graph_and_rate():
    d = w.mask_data("causal", T=6, depth=4, d=8, seeds=2)
    assert d.mask.shape == (6, 6) and d.mask.dtype == bool and d.mu.shape == (5, 2)
    assert d.uniform_rate == pytest.approx(theory.causal_consensus_rate())
    assert d.graph["quasi_strongly_connected"] and not d.graph["strongly_connected"]
    assert d.params["window"] is None
    s = w.mask_data("sliding", T=6, window=1, depth=2, d=8, seeds=2)
    assert s.graph["diameter"] == theory.window_hops(6, 1) and s.params["window"] == 1
    with pytest.raises(ValueError):
        w.mask_data("banded", T=6)
    with pytest.raises(ValueError):
        w.mask_data("causal", T=6, temperature=0.0)


@pytest.mark.parametrize("name", ["spectrum", "width", "depth", "mask"])
def test_figures_draw(name):
    data = getattr(w, f"{name}_data")(**{k: v for k, v in SMALL[name].items()})
    fig = getattr(w, f"{name}_figure")(data)
    assert all(ax.get_title() for ax in fig.axes)
    png = w._png(fig)
    assert len(png) > 1000


# -- the widgets, driven through their controls --------------------------------------------------

def png_of(explorer):
    (out,) = explorer.output.outputs
    assert out["output_type"] == "display_data"
    return out["data"]["image/png"]


@pytest.mark.parametrize("name, control, value", [
    ("spectrum", "T", 48), ("spectrum", "centred", True), ("spectrum", "model", "qk"),
    ("width", "gamma", 0.25), ("width", "gram", True),
    ("depth", "norm", "rms"), ("depth", "depth", 6),
    ("mask", "kind", "sliding"), ("mask", "temperature", 3.0),
])
def test_explorer_control_changes_output_and_matches_compute(name, control, value):
    e = getattr(w, f"{name}_explorer")(**SMALL[name])
    assert isinstance(e, ipywidgets.VBox) and isinstance(e, w.Explorer)
    assert e.updates == 1 and "ms" in e.status.value
    before = png_of(e)
    same(e.data, e.compute(**e.kwargs()))  # the initial figure is the defaults' data
    e.controls[control].value = value
    assert e.updates == 2
    assert e.data.params[control] == value
    assert png_of(e) != before
    same(e.data, getattr(w, f"{name}_data")(**e.kwargs()))


def test_explorer_defaults_and_dependent_controls():
    e = w.spectrum_explorer(T=32, activation="relu")
    assert e.controls["T"].value == 32 and e.data.params["activation"] == "relu"
    assert e.controls["bias"].disabled and e.controls["d_qk"].disabled
    e.controls["bias"].value = 1.0  # ignored unless sigmoid
    assert e.data.params["bias"] == 0.0
    e.controls["activation"].value = "sigmoid"
    assert not e.controls["bias"].disabled and e.data.params["bias"] == 1.0
    assert e.data.predicted_outlier == pytest.approx(theory.outlier("sigmoid", e.data.params["s2"], 1.0))
    m = w.mask_explorer(**SMALL["mask"])
    assert m.controls["window"].disabled
    m.controls["kind"].value = "sliding-causal"
    assert not m.controls["window"].disabled


@pytest.mark.parametrize("name", ["spectrum", "width", "depth", "mask"])
def test_sliders_update_on_release(name):
    e = getattr(w, f"{name}_explorer")(**SMALL[name])
    sliders = [c for c in e.controls.values() if hasattr(c, "continuous_update")]
    assert sliders and not any(c.continuous_update for c in sliders)


def test_explorer_shows_errors_and_computing_state():
    seen, holder = [], []

    def compute(x):
        if holder:
            seen.append(holder[0].status.value)
        if x < 0:
            raise ValueError("x must be >= 0")
        return w.spectrum_data(16, seed=x)

    slider = ipywidgets.IntSlider(value=0, min=-1, max=3)
    e = w.Explorer("test", compute, w.spectrum_figure, {"x": slider})
    holder.append(e)
    e.update()
    assert "computing" in seen[-1]
    good = png_of(e)
    slider.value = -1
    assert "ValueError" in e.status.value and "x must be" in e.status.value
    assert png_of(e) == good and e.data.params["seed"] == 0  # the last good figure stays
