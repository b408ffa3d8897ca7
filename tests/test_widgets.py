"""The explorers' widgets (rcteach.widgets), driven through their controls, and their static
views for the book (rcteach.precomputed)."""

import base64
import json
import os
import re

import ipywidgets
import matplotlib
import pytest

matplotlib.use("Agg")

from rcteach import explorers as ex  # noqa: E402
from rcteach import precomputed, theory  # noqa: E402
from rcteach import widgets as w  # noqa: E402

from _explorers import SMALL, same  # noqa: E402

# -- the widgets, driven through their controls --------------------------------------------------

def png_of(explorer):
    (out,) = explorer.output.outputs
    assert out["output_type"] == "display_data"
    return out["data"]["image/png"]


def test_live_figure_is_drawn_at_twice_its_display_width():
    import io

    from PIL import Image

    e = w.width_explorer(**SMALL["width"])
    (out,) = e.output.outputs
    shown = out["metadata"]["image/png"]["width"]
    pixels = Image.open(io.BytesIO(base64.b64decode(png_of(e)))).size[0]
    assert shown > 200 and abs(pixels - 2 * shown) <= 2, (shown, pixels)


@pytest.mark.parametrize("name, control, value", [
    ("spectrum", "T", 48), ("spectrum", "centred", True), ("spectrum", "attention", "qk"),
    ("width", "gamma", 0.25), ("width", "gram", True),
    ("depth", "norm", "rms"), ("depth", "depth", 6),
    ("mask", "kind", "sliding"), ("mask", "beta", 3.0),
])
def test_explorer_control_changes_output_and_matches_compute(name, control, value):
    e = getattr(w, f"{name}_explorer")(**SMALL[name])
    assert isinstance(e, ipywidgets.VBox) and isinstance(e, w.Explorer)
    assert e.updates == 1 and "ms" in e.status.value
    before = png_of(e)
    same(e.data, e.compute(**e.kwargs()))  # the initial figure is the defaults' data
    e.controls[control].value = value
    assert e.updates == 2
    assert e.data.params[control] == (None if value == "none" else value)
    assert png_of(e) != before
    same(e.data, getattr(ex, f"{name}_data")(**e.kwargs()))


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
        return ex.spectrum_data(16, seed=x)

    slider = ipywidgets.IntSlider(value=0, min=-1, max=3)
    e = w.Explorer("test", compute, ex.spectrum_figure, {"x": slider})
    holder.append(e)
    e.update()
    assert "computing" in seen[-1]
    good = png_of(e)
    slider.value = -1
    assert "ValueError" in e.status.value and "x must be" in e.status.value
    assert png_of(e) == good and e.data.params["seed"] == 0  # the last good figure stays


def test_norm_dropdown_shows_none_and_passes_none():
    e = w.depth_explorer(**SMALL["depth"])
    norm = e.controls["norm"]
    assert norm.label == "none" and norm.index == 0  # not a blank "no selection"
    assert e.kwargs()["norm"] is None and e.data.params["norm"] is None
    m = w.mask_explorer(norm="rms", **SMALL["mask"])
    assert m.controls["norm"].label.startswith("rms") and m.data.params["norm"] == "rms"


def test_controls_fill_their_grid_cells():
    e = w.spectrum_explorer(**SMALL["spectrum"])
    assert all(c.layout.width == "auto" for c in e.controls.values())
    (grid,) = [c for c in e.children if isinstance(c, ipywidgets.GridBox)]
    assert "minmax(min(100%, 340px)" in grid.layout.grid_template_columns


# -- the static view (rcteach.precomputed) --------------------------------------------------------

def _spec(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" class="rcteach-static-data">(.*?)</script>',
                                page, re.S).group(1))


def test_grids_hold_the_starting_values():
    for name in SMALL:
        e = getattr(w, f"{name}_explorer")(**SMALL[name])
        for control, values in e.grid.items():
            assert control in e.controls and e.controls[control].value in values, (name, control)


def test_static_view_precomputes_every_combination_and_shares_equal_ones():
    e = w.mask_explorer(**SMALL["mask"])
    e.grid = dict(kind=("causal", "sliding"), window=(1, 2), beta=(0.3, 3.0))
    index, images = precomputed.precompute(e, dpi=30)
    assert len(index) == 8
    # causal ignores the window: its two windows share one PNG; sliding's differ
    assert index[0:2] == index[2:4] and index[0] != index[1]
    assert len(set(index[4:])) == 4 and len(images) == 6
    assert base64.b64decode(images[0])[:4] == b"\x89PNG"
    # the PNG at the explorer's own setting is what the explorer draws for it
    e.controls["kind"].value, e.controls["beta"].value = "sliding", 3.0
    data = ex.mask_data(**e.kwargs())
    assert images[index[7]] == ex.png(ex.mask_figure(data), 30, colors=precomputed.COLORS)


def test_static_view_html_is_self_contained():
    e = w.depth_explorer(**SMALL["depth"])
    e.grid = dict(depth=(2, 4), norm=("none", "rms"), skip=(False, True))
    page = precomputed.view(e, dpi=30)
    assert "://" not in page  # no CDN, nothing fetched
    assert precomputed.NOTE in page
    spec = _spec(page)
    assert [c["name"] for c in spec["controls"]] == ["depth", "norm", "skip"]
    assert '<input type="range" min="0" max="1" step="1" value="1" data-control="depth">' in page
    assert '<select data-control="norm">' in page and '<input type="checkbox" data-control="skip">' in page
    assert len(spec["index"]) == 8 and len(set(spec["index"])) == 8
    assert spec["controls"][0]["start"] == 1 and spec["controls"][1]["labels"][0] == "none"
    first = spec["images"][spec["index"][1 * 4 + 0 * 2 + 0]]  # depth 4, norm none, no skip: the start
    assert f'src="data:image/png;base64,{first}"' in page
    assert "depth (layers)" in page and "Fixed here:" in page and "attention: i.i.d. logits" in page


def test_static_view_snaps_a_start_off_the_grid():
    e = w.spectrum_explorer(T=48)
    e.grid = dict(T=(32, 64, 128))
    spec = _spec(precomputed.view(e, dpi=20))
    assert spec["controls"][0]["start"] == 0 and spec["controls"][0]["labels"] == ["32", "64", "128"]


def test_explorer_displays_the_static_view_only_in_the_static_book(monkeypatch):
    e = w.width_explorer(**SMALL["width"])
    e.grid = dict(gamma=(0.25, 0.5))
    monkeypatch.delenv(precomputed.STATIC_BOOK, raising=False)
    live = e._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in live and "text/html" not in live
    monkeypatch.setenv(precomputed.STATIC_BOOK, "1")
    static = e._repr_mimebundle_()
    assert "text/html" in static and "application/vnd.jupyter.widget-view+json" not in static
    assert len(_spec(static["text/html"])["images"]) == 2
    assert os.environ[precomputed.STATIC_BOOK] == "1"


def test_width_explorer_shows_progress_per_T_during_an_update():
    e = w.width_explorer(**SMALL["width"])
    seen = []
    e.status.observe(lambda change: seen.append(change["new"]), names="value")
    e.controls["gamma"].value = 0.25
    steps = [s for s in seen if "computing T = " in s]
    Ts = [int(t) for t in e.data.T]
    assert [f"T = {T} ({k + 1} of {len(Ts)})" in s for k, (T, s) in enumerate(zip(Ts, steps))] == [True] * len(Ts)
    assert len(steps) == len(Ts) and "updated in" in seen[-1]


def test_width_data_refuses_a_progress_that_is_not_callable():
    with pytest.raises(TypeError, match="progress must be callable"):
        ex.width_data((8, 16), progress="yes")
