"""The explorers' data and figure functions (rcteach.explorers), headless: no ipywidgets."""

import math
import subprocess
import sys

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from rcteach import theory  # noqa: E402
from rcteach import explorers as ex  # noqa: E402

from _explorers import SMALL, same  # noqa: E402


# -- data functions ----------------------------------------------------------------------------

def test_spectrum_data_shapes_predictions_and_seeds():
    d = ex.spectrum_data(64, 0.5, seed=3)
    assert d.eigenvalues.shape == (64,) and np.iscomplexobj(d.eigenvalues)
    assert d.singular_values.shape == (64,)
    assert np.all(np.diff(np.abs(d.eigenvalues)) <= 1e-12)
    assert abs(d.eigenvalues[0] - 1) < 1e-10  # softmax: the outlier is exactly 1
    assert d.predicted_outlier == 1.0 and d.predicted_radius == pytest.approx(theory.bulk_radius(64, 0.5))
    assert d.predicted_edge == pytest.approx(2 * d.predicted_radius)
    same(d, ex.spectrum_data(64, 0.5, seed=3))
    assert not np.allclose(d.eigenvalues, ex.spectrum_data(64, 0.5, seed=4).eigenvalues)


def test_spectrum_data_centred_sigmoid_and_qk():
    c = ex.spectrum_data(48, 0.5, centred=True, seed=1)
    assert c.predicted_outlier == 0.0
    assert np.abs(c.eigenvalues).min() < 1e-10  # A_perp 1 = 0
    # centring keeps the bulk exactly (softmax)
    a = ex.spectrum_data(48, 0.5, seed=1)
    np.testing.assert_allclose(np.sort(np.abs(a.eigenvalues))[:-1], np.sort(np.abs(c.eigenvalues))[1:], atol=1e-12)
    s = ex.spectrum_data(48, 1.0, activation="sigmoid", bias=1.0)
    assert s.predicted_outlier == pytest.approx(theory.outlier("sigmoid", 1.0, 1.0))
    assert s.predicted_radius == pytest.approx(theory.map_bulk_radius(48, "sigmoid", 1.0, 1.0))
    q = ex.spectrum_data(32, 0.5, attention="qk", d_qk=4)
    assert q.params["attention"] == "qk" and abs(q.eigenvalues[0] - 1) < 1e-10


@pytest.mark.parametrize("kwargs, error", [
    (dict(T=1), ValueError), (dict(s2=-1.0), ValueError), (dict(activation="tanh"), ValueError),
    (dict(bias=1.0), ValueError), (dict(attention="x"), ValueError), (dict(d_qk=0), ValueError),
    (dict(centred=1), TypeError), (dict(T=2.5), TypeError),
])
def test_spectrum_data_errors(kwargs, error):
    with pytest.raises(error):
        ex.spectrum_data(**{"T": 16, **kwargs})


def test_width_data_shapes_and_predictions():
    d = ex.width_data((8, 64), 0.5, 0.5, points=4, seeds=3, seed=2)
    n = d.T.size
    assert 2 <= n <= 4 and d.T[0] == 8 and d.T[-1] == 64
    assert d.stable_rank.shape == d.stable_rank_centred.shape == (n, 3)
    np.testing.assert_allclose(d.predicted, theory.width_stable_rank(0.5))
    np.testing.assert_allclose(d.predicted_centred, theory.centred_width_slope(0.5) * d.T)
    g = ex.width_data((8, 64), 0.5, 0.5, gram=True, points=4, seeds=3, seed=2)
    np.testing.assert_allclose(g.predicted, 1.0)
    np.testing.assert_allclose(g.predicted_centred, theory.centred_width_slope_gram(0.5) * g.T)
    assert np.all(g.stable_rank <= d.stable_rank + 1e-9)  # sum s^4/s1^4 <= sum s^2/s1^2
    same(d, ex.width_data((8, 64), 0.5, 0.5, points=4, seeds=3, seed=2))


@pytest.mark.parametrize("kwargs, error", [
    (dict(T_range=8), TypeError), (dict(T_range=(32, 8)), ValueError), (dict(T_range=(1, 8)), ValueError),
    (dict(gamma=0.0), ValueError), (dict(gram="yes"), TypeError), (dict(points=0), ValueError),
])
def test_width_data_errors(kwargs, error):
    with pytest.raises(error):
        ex.width_data(**{"T_range": (8, 16), **kwargs})


def test_depth_data_shapes_and_prediction():
    d = ex.depth_data(5, T=8, d=16, values="identity", seeds=3, seed=1)
    for x in (d.mu, d.stable_rank, d.stable_rank_gram, d.norm):
        assert x.shape == (6, 3)
    np.testing.assert_allclose(d.mu[0], math.sqrt(8 - 1))  # orthonormal tokens: mu^2 = T - 1
    factor = theory.depth_mu_factor(8, d.params["s2"])
    np.testing.assert_allclose(d.predicted_mu, math.sqrt(7) * factor ** (np.arange(6) / 2))
    assert ex.depth_data(3, T=8, d=16, norm="rms", seeds=2).predicted_mu is None
    assert ex.depth_data(3, T=8, d=16, attention="qk", seeds=2).predicted_mu is None
    same(d, ex.depth_data(5, T=8, d=16, values="identity", seeds=3, seed=1))


@pytest.mark.parametrize("kw", [dict(), dict(attention="qk", norm="rms", skip=True, values="orthogonal")])
def test_depth_prefixes_slice_the_deepest_stack_value_for_value(kw):
    """The depth explorer's compute function: a shallower depth is the deeper stack's prefix (layers drawn in
    order), the same numbers as computing it; other arguments or a deeper stack are computed."""
    small = dict(T=8, d=16, seeds=2, **kw)
    compute = ex.DepthPrefixes()
    compute(6, **small)
    for depth in (3, 0, 6):
        same(compute(depth, **small), ex.depth_data(depth, **small))
    same(compute(7, **small), ex.depth_data(7, **small))
    same(compute(4, **{**small, "seed": 1}), ex.depth_data(4, **{**small, "seed": 1}))
    with pytest.raises(ValueError, match="depth"):
        compute(-1, **small)


@pytest.mark.parametrize("kwargs, error", [
    (dict(depth=-1), ValueError), (dict(attention="x"), ValueError), (dict(norm="batch"), ValueError),
    (dict(value_scale=0.0), ValueError), (dict(T=20, d=16), ValueError), (dict(seeds=0), ValueError),
])
def test_depth_data_errors(kwargs, error):
    with pytest.raises(error):
        ex.depth_data(**{"depth": 2, "T": 8, "d": 16, **kwargs})


def test_mask_data_graph_and_rate():
    d = ex.mask_data("causal", T=6, depth=4, d=8, seeds=2)
    assert d.mask.shape == (6, 6) and d.mask.dtype == bool and d.mu.shape == (5, 2)
    assert d.uniform_rate == pytest.approx(theory.causal_consensus_rate())
    assert d.graph["quasi_strongly_connected"] and not d.graph["strongly_connected"]
    assert d.params["window"] is None
    s = ex.mask_data("sliding", T=6, window=1, depth=2, d=8, seeds=2)
    assert s.graph["diameter"] == theory.window_hops(6, 1) and s.params["window"] == 1
    with pytest.raises(ValueError):
        ex.mask_data("banded", T=6)
    with pytest.raises(ValueError):
        ex.mask_data("causal", T=6, beta=0.0)


@pytest.mark.parametrize("name", ["spectrum", "width", "depth", "mask"])
def test_figures_draw(name):
    data = getattr(ex, f"{name}_data")(**{k: v for k, v in SMALL[name].items()})
    fig = getattr(ex, f"{name}_figure")(data)
    assert all(ax.get_title() for ax in fig.axes)
    png = ex.png(fig)
    assert len(png) > 1000




def test_explorers_do_not_import_ipywidgets():
    code = "import sys, rcteach.explorers; assert 'ipywidgets' not in sys.modules, 'ipywidgets imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_mask_data_beta_scales_the_logits():
    hot = ex.mask_data("complete", T=6, beta=0.01, depth=3, d=8, seeds=2)
    cold = ex.mask_data("complete", T=6, beta=10.0, depth=3, d=8, seeds=2)
    assert hot.params["beta"] == 0.01 and "temperature" not in hot.params
    # beta -> 0: uniform attention on the complete mask reaches consensus in one layer
    assert np.all(hot.mu[1] < 0.05 * hot.mu[0])
    assert np.all(cold.mu[1] > hot.mu[1])


def test_png_palette_is_smaller_and_the_same_size():
    from PIL import Image
    import base64
    import io

    data = ex.depth_data(4, T=8, d=16, seeds=2)
    full, palette = ex.png(ex.depth_figure(data), 100), ex.png(ex.depth_figure(data), 100, colors=64)
    a, b = (Image.open(io.BytesIO(base64.b64decode(x))) for x in (full, palette))
    assert a.size == b.size == (1250, 440) and b.mode == "P"
    assert len(palette) < 0.6 * len(full)


@pytest.mark.parametrize("name", ["spectrum", "width", "depth", "mask"])
def test_figure_text_inside_the_canvas(name):
    """Every title, axis label and legend lies inside the figure (nothing clipped at the edges)."""
    data = getattr(ex, f"{name}_data")(**SMALL[name])
    fig = getattr(ex, f"{name}_figure")(data)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    texts = [t for ax in fig.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label) if t.get_text()]
    texts += [ax.get_legend() for ax in fig.axes if ax.get_legend()] + [t for t in fig.texts if t.get_text()]
    for t in texts:
        box = t.get_window_extent(renderer)
        assert box.x0 >= canvas.x0 - 0.5 and box.x1 <= canvas.x1 + 0.5, (name, getattr(t, "get_text", str)())
        assert box.y0 >= canvas.y0 - 0.5 and box.y1 <= canvas.y1 + 0.5, (name, getattr(t, "get_text", str)())
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_depth_legend_renders_its_maths():
    fig = ex.depth_figure(ex.depth_data(3, T=8, d=16, seeds=2))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(lab.count("$") == 2 and r"\ell/2" in lab for lab in labels), labels  # mathtext, not raw ^{...}
    assert all("$" in lab or "^" not in lab for lab in labels), labels


@pytest.mark.parametrize("name, first, then", [
    ("spectrum", dict(T=16), dict(T=32, centred=True)),
    ("width", dict(T_range=(8, 16)), dict(T_range=(8, 32), gram=True)),
    ("depth", dict(depth=2), dict(depth=4, norm="rms", skip=True)),
    ("mask", dict(beta=0.3), dict(beta=3.0)),  # the mask's panels kept, mu drawn over their pixels
    ("mask", dict(kind="causal"), dict(kind="sliding", window=1)),
])
def test_a_live_redraw_is_the_fresh_figure_pixel_for_pixel(name, first, then):
    """An explorer's update draws into its last figure (artists updated, unchanged panels blitted):
    the PNG is the one of a figure drawn afresh for the new data."""
    import base64
    import io

    from PIL import Image

    data = [getattr(ex, f"{name}_data")(**{**SMALL[name], **kw}) for kw in (first, then)]
    draw = getattr(ex, f"{name}_figure")
    fig = draw(data[0])
    ex.live_png(fig, 40)
    again = draw(data[1], fig=fig)
    assert again is fig
    live, fresh = (np.asarray(Image.open(io.BytesIO(base64.b64decode(p))).convert("RGB"))
                   for p in (ex.live_png(fig, 40), ex.png(draw(data[1]), 40)))
    np.testing.assert_array_equal(live, fresh)
