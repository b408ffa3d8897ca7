"""The static explorer views (rcteach.precomputed) in headless Chromium, offline, without a book build:
a page with the four explorers' views over small grids; moving a control changes the figure,
controls that change nothing are disabled, nothing is fetched.  The views in the built book are
tested in test_book.py."""

import matplotlib
import pytest

matplotlib.use("Agg")

from rcteach import precomputed, widgets as w  # noqa: E402

from _browser import launch, needs_browser  # noqa: E402
from _explorers import SMALL  # noqa: E402

GRIDS = dict(  # small grids, each with the explorer's first control first
    spectrum=dict(T=(16, 32), centred=(False, True)),
    width=dict(T_range=((8, 16), (8, 32)), gamma=(0.5, 1.0)),
    depth=dict(depth=(2, 4), norm=("none", "rms"), skip=(False, True)),
    mask=dict(kind=("causal", "sliding"), window=(1, 2), beta=(0.3, 1.0)),
)


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    views = []
    for name, grid in GRIDS.items():
        e = getattr(w, f"{name}_explorer")(**SMALL[name])
        e.grid = grid
        views.append(f'<section id="{name}">{precomputed.view(e, dpi=20)}</section>')
    path = tmp_path_factory.mktemp("static") / "explorers.html"
    path.write_text("<!doctype html><html><head><meta charset='utf-8'></head><body>" + "".join(views)
                    + "</body></html>", encoding="utf-8")
    return path


def _src(page, name):
    return page.locator(f"#{name} img").get_attribute("src")


@needs_browser
def test_static_views_move_offline(page_file):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        context = browser.new_context(viewport={"width": 800, "height": 900})
        outside, errors = [], []
        context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:"))
                      else (outside.append(r.request.url), r.abort()))
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(page_file.as_uri(), wait_until="load")
        for name in GRIDS:
            slider = page.locator(f"#{name} input[type=range]:not([disabled])").first
            before = _src(page, name)
            assert before.startswith("data:image/png;base64,")
            slider.focus()
            page.keyboard.press("ArrowRight" if slider.input_value() == "0" else "ArrowLeft")
            assert _src(page, name) != before, f"{name}: moving the first slider left the figure"
            box = slider.bounding_box()
            assert box["width"] >= 150, f"{name}: slider track {box['width']:.0f} px at an 800 px viewport"
            assert "precomputed in the static book" in page.locator(f"#{name}").inner_text()
        # the mask's window: disabled for the causal mask, enabled for the sliding one
        window = page.locator('#mask [data-control="window"]')
        assert window.is_disabled()
        page.locator('#mask [data-control="kind"]').select_option("1")
        assert window.is_enabled()
        before = _src(page, "mask")
        window.focus()
        page.keyboard.press("ArrowLeft" if window.input_value() == "1" else "ArrowRight")
        assert _src(page, "mask") != before
        # a checkbox moves the figure too
        before = _src(page, "depth")
        page.locator('#depth [data-control="skip"]').check()
        assert _src(page, "depth") != before
        browser.close()
    assert not outside and not errors, (outside, errors)
