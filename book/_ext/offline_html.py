"""Sphinx extension for an offline book: no script that points at a CDN, no script twice.

sphinx-thebe (always loaded by Jupyter Book 1) adds an inline script naming a CDN
(``const THEBE_JS_URL = "https://unpkg.com/..."``) and, on a full build, adds it twice, which is a
JavaScript error (``const`` declared twice).  The book does not use thebe
(``launch_buttons.thebe: false``), so its scripts are dropped; any other duplicate is dropped too.

It also sets ``RCTEACH_STATIC_BOOK`` (:data:`rcteach.precomputed.STATIC_BOOK`) for the kernels that
execute the chapters: there the explorers display their precomputed static views, which move in
the browser with no kernel (:mod:`rcteach.precomputed`).
"""

from __future__ import annotations

import os

STATIC_BOOK = "RCTEACH_STATIC_BOOK"  # rcteach.precomputed.STATIC_BOOK (not imported: Sphinx runs without it)


def _prune_scripts(app, pagename, templatename, context, doctree):
    files = context.get("script_files")
    if not files:
        return
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
    app.connect("html-page-context", _prune_scripts, priority=900)  # after myst-nb adds its scripts
    return {"parallel_read_safe": True, "parallel_write_safe": True}
