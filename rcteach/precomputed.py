"""Explorers that move in the static book: each figure precomputed over a grid of control values.

A built book has no kernel, so an explorer's figure cannot be recomputed when a control moves.
Instead, at build time, :func:`view` draws the explorer's figure for every combination of the
control values in ``explorer.grid`` (the other controls stay at their starting values) and returns
one self-contained HTML block: plain HTML controls (a range input snapping to the grid values for a
slider, a select for a dropdown, a checkbox), the PNGs inlined as base64 data, and the small script
``precomputed.js`` that shows the PNG of the chosen combination.  No CDN, no kernel, no Pyodide; a
control that changes nothing at the current setting (the window of a non-sliding mask) is disabled.

:class:`rcteach.widgets.Explorer` displays this view instead of its widgets when the environment
variable ``RCTEACH_STATIC_BOOK`` (:data:`STATIC_BOOK`) is set, which the book's Sphinx extension does
for the kernels it starts.
Introduced with the explorers ("Explore" sections of chapters 2, 4, 5 and 9).
"""

from __future__ import annotations

import html
import itertools
import json
from importlib import resources

import ipywidgets

from .explorers import png

__all__ = ["STATIC_BOOK", "DPI", "COLORS", "NOTE", "around", "precompute", "view"]

STATIC_BOOK = "RCTEACH_STATIC_BOOK"  # set (to anything non-empty): explorers display precomputed views
DPI = 100  # the static figures are 10-13 in wide: 1000-1300 px for the book's ~750 px column
COLORS = 128  # palette PNGs (rcteach.explorers.png): a third of the bytes, no visible change
NOTE = "precomputed in the static book; run the chapter in JupyterLab for any value"


def around(value, values) -> tuple:
    """The grid ``values`` with the starting ``value`` added, sorted: the start is always on the grid."""
    return tuple(sorted(set(values) | {value}))


def _label(control, value) -> str:
    if isinstance(control, ipywidgets.Dropdown):
        return control._options_labels[control._options_values.index(value)]
    if isinstance(value, tuple):
        return "–".join(_label(control, v) for v in value)
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def precompute(explorer, dpi=DPI):
    """PNGs of ``explorer`` over the product of ``explorer.grid``.

    Returns ``(index, images)``: ``images`` a list of distinct base64 PNGs, ``index`` one entry per
    combination in ``itertools.product`` order of the grid (the last control varies fastest), the
    position of its PNG in ``images``.  Combinations whose data have the same ``params`` (a control
    the compute function ignores there) share one PNG, drawn once.
    """
    names = list(explorer.grid)
    index, images, seen = [], [], {}
    for combo in itertools.product(*explorer.grid.values()):
        data = explorer.compute(**explorer.kwargs(**dict(zip(names, combo))))
        key = repr(sorted(data.params.items()))
        if key not in seen:
            seen[key] = len(images)
            images.append(png(explorer.draw(data), dpi, colors=COLORS))
        index.append(seen[key])
    return index, images


def _control_html(name, control, values, start) -> tuple[str, dict]:
    """One static control (HTML) and its description for the script."""
    labels = [_label(control, v) for v in values]
    pos = min(range(len(values)), key=lambda i: _distance(values[i], start))  # snap the start to the grid
    attrs = f'data-control="{html.escape(name)}"'
    if isinstance(control, ipywidgets.Checkbox):
        if list(values) != [False, True]:
            raise ValueError(f"the grid of the checkbox {name!r} must be (False, True), got {values}")
        field = f'<input type="checkbox" {attrs}{" checked" if pos else ""}>'
    elif isinstance(control, ipywidgets.Dropdown):
        options = "".join(f'<option value="{i}"{" selected" if i == pos else ""}>{html.escape(lab)}</option>'
                          for i, lab in enumerate(labels))
        field = f"<select {attrs}>{options}</select>"
    else:
        field = f'<input type="range" min="0" max="{len(values) - 1}" step="1" value="{pos}" {attrs}>'
    text = html.escape(control.description)
    return (f'<label class="rcteach-static-control"><span>{text}</span>{field}<output>{html.escape(labels[pos])}'
            "</output></label>"), dict(name=name, n=len(values), labels=labels, start=pos)


def _distance(a, b) -> float:
    if isinstance(a, tuple):
        return sum(_distance(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        return abs(a - b)
    return 0.0 if a == b else 1.0


_CSS = """
.rcteach-static-explorer{border:1px solid #ddd;border-radius:4px;padding:.6em .8em;margin:.5em 0}
.rcteach-static-controls{display:grid;gap:.2em 1.2em;
  grid-template-columns:repeat(auto-fill,minmax(min(100%,400px),1fr))}
.rcteach-static-control{display:flex;align-items:center;gap:.6em;margin:0}
.rcteach-static-control span{flex:0 0 9em;font-size:.9em}
.rcteach-static-control input[type=range],.rcteach-static-control select{flex:1 1 auto;min-width:6em}
.rcteach-static-control input[type=checkbox]{margin-right:auto}
.rcteach-static-control output{flex:0 0 4.5em;font-size:.9em;font-variant-numeric:tabular-nums}
.rcteach-static-control select~output,.rcteach-static-control input[type=checkbox]~output{display:none}
.rcteach-static-control:has(:disabled){opacity:.45}
.rcteach-static-note{font-size:.85em;color:#555;margin:.4em 0}
.rcteach-static-explorer img{width:100%;height:auto;display:block}
"""


def view(explorer, dpi=DPI) -> str:
    """The explorer's static view: one HTML block with controls, figures and script (see the module)."""
    start = explorer.values()
    fields, specs = zip(*(_control_html(name, explorer.controls[name], values, start[name])
                          for name, values in explorer.grid.items()))
    index, images = precompute(explorer, dpi)
    first = index[_flat([s["start"] for s in specs], specs)]
    fixed = ", ".join(f"{html.escape(w.description)}: {html.escape(_label(w, w.value))}"
                      for name, w in explorer.controls.items() if name not in explorer.grid and not w.disabled)
    data = json.dumps(dict(controls=specs, index=index, images=images), separators=(",", ":")).replace("</", "<\\/")
    script = resources.files(__package__).joinpath("precomputed.js").read_text(encoding="utf-8")
    return (f'<div class="rcteach-static-explorer"><style>{_CSS}</style><b>{html.escape(explorer.title)}</b>'
            f'<div class="rcteach-static-controls">{"".join(fields)}</div>'
            f'<p class="rcteach-static-note">Figures {NOTE}. Fixed here: {fixed}.</p>'
            f'<img alt="{html.escape(explorer.title)} figure" src="data:image/png;base64,{images[first]}">'
            f'<script type="application/json" class="rcteach-static-data">{data}</script>'
            f"<script>{script}</script></div>")


def _flat(positions, specs) -> int:
    """Row-major position of a combination (``itertools.product`` order)."""
    k = 0
    for p, s in zip(positions, specs):
        k = k * s["n"] + p
    return k
