"""Sphinx extension for an offline book: every vendored file present, no script that points at a CDN,
no script twice.

The book serves MathJax, RequireJS and the widget embedder itself (``_config.yml``: ``mathjax_path``
and the ``nb_ipywidgets_js`` files, found in ``html_static_path``, filled by ``make vendor``).  If one
is missing, or configured as a URL, the build stops with an error saying so (and how to get it),
instead of producing pages that fetch it from a CDN or silently lack it.

sphinx-thebe (always loaded by Jupyter Book 1) adds an inline script naming a CDN
(``const THEBE_JS_URL = "https://unpkg.com/..."``) and, on a full build, adds it twice, which is a
JavaScript error (``const`` declared twice).  The book does not use thebe
(``launch_buttons.thebe: false``), so its scripts are dropped; any other duplicate is dropped too.

Executing a chapter saves the state of every widget its kernel created, shown or not; the explorer
chapters create their (ipywidgets) explorers and show only the precomputed views, so their pages
would carry 66-136 kB of state nobody reads, and load the widget embedder for it.  A page keeps only
the state of the widgets it shows (its widget-view outputs, and the models they reference), and
the embedder scripts only if something is left.

It also sets ``RCTEACH_STATIC_BOOK`` (:data:`rcteach.precomputed.STATIC_BOOK`) for the kernels that
execute the chapters: there the explorers display their precomputed static views, which move in
the browser with no kernel (:mod:`rcteach.precomputed`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from sphinx.errors import ConfigError

STATIC_BOOK = "RCTEACH_STATIC_BOOK"  # rcteach.precomputed.STATIC_BOOK (not imported: Sphinx runs without it)
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = re.compile(r'<script type="application/vnd\.jupyter\.widget-view\+json">(.*?)</script>', re.S)


def _check_vendored(app):
    """Raise ConfigError unless every vendored script is a local file in ``html_static_path``."""
    cfg = app.config
    # Only the folders that exist: extensions add entries of their own that may not (sphinx_comments).
    static = [path for path in (Path(app.confdir, p) for p in cfg.html_static_path) if path.is_dir()]
    wanted = [cfg.mathjax_path, *(getattr(cfg, "nb_ipywidgets_js", None) or {})]
    problems = []
    for name in wanted:
        if "://" in str(name) or str(name).startswith("//"):
            problems.append(f"{name} is a URL: the offline book serves its scripts itself")
        elif not any((p / name).is_file() for p in static):
            problems.append(f"{name} is in none of the static folders {', '.join(map(str, static)) or '(none exist)'}")
    if problems:
        raise ConfigError("vendored front-end files missing (run `make vendor`; it needs npm from the system "
                          "package manager, e.g. `sudo apt-get install npm`):\n  " + "\n  ".join(problems))


def shown_widget_state(state: dict, body: str) -> dict:
    """The entries of a saved widget ``state`` (model id -> model) that the page ``body`` shows: the
    models of its widget-view scripts, and every model they reference (``IPY_MODEL_<id>``)."""
    todo = [json.loads(view)["model_id"] for view in WIDGET_VIEW.findall(body)]
    shown = {}
    while todo:
        model = todo.pop()
        if model in state and model not in shown:
            shown[model] = state[model]
            todo += re.findall(r"IPY_MODEL_([0-9a-f]+)", json.dumps(state[model]))
    return shown


def _prune_widget_state(app, files, body) -> None:
    """Drop the saved state of widgets the page does not show; with none left, the embedder too."""
    for js in files:
        attributes = getattr(js, "attributes", {}) or {}
        if attributes.get("type") == WIDGET_STATE:
            saved = json.loads(attributes["body"])
            saved["state"] = shown_widget_state(saved.get("state", {}), body)
            if saved["state"]:
                attributes["body"] = json.dumps(saved).replace("</", "<\\/")
                return
            embedder = set(getattr(app.config, "nb_ipywidgets_js", None) or {})
            files[:] = [f for f in files if f is not js
                        and str(getattr(f, "filename", f) or "").removeprefix("_static/") not in embedder]
            return


def _prune_scripts(app, pagename, templatename, context, doctree):
    files = context.get("script_files")
    if not files:
        return
    _prune_widget_state(app, files, context.get("body", ""))
    keep, seen = [], set()
    for js in files:
        name = str(getattr(js, "filename", js) or "")
        attributes = getattr(js, "attributes", {}) or {}
        body = str(attributes.get("body", ""))
        if "THEBE_JS_URL" in body or name.endswith("sphinx-thebe.js"):
            continue
        key = (name, body)
        if key not in seen:
            seen.add(key)
            keep.append(js)
    files[:] = keep


def setup(app):
    os.environ[STATIC_BOOK] = "1"  # inherited by the kernels myst-nb starts to execute the chapters
    app.connect("builder-inited", _check_vendored)
    app.connect("html-page-context", _prune_scripts, priority=900)  # after myst-nb adds its scripts
    return {"parallel_read_safe": True, "parallel_write_safe": True}
