"""An exercise's solution cell whose output stays collapsed, in JupyterLab and in the book alike.

A solution code cell starts with ``rcteach.solution()``.  From there to the end of the cell
(including the figures the inline backend shows when the cell finishes) everything it prints or
displays is captured and shown as one closed HTML ``<details>``, "Output of the solution": a
student who runs every cell of a chapter sees no answer until opening it.  A metadata flag cannot
do this: JupyterLab shows the outputs of a cell it runs (it drops ``outputs_hidden``).

Outside IPython (a plain ``python`` run) :func:`solution` does nothing: the output is printed as usual.
"""

from __future__ import annotations

import html

__all__ = ["solution"]

SUMMARY = "Output of the solution"
_GLUE = "scrapbook"  # metadata key of myst-nb's glue(): glued values go through, uncollapsed
_capturing: list = []  # the capture of the running cell, while one is open


def solution() -> None:
    """Collapse the rest of the running cell's output (stdout, stderr, displays, figures) under one
    closed ``<details>`` (class ``rcteach-solution``), shown when the cell ends; a no-op outside
    IPython and when the cell already called it."""
    try:
        from IPython import get_ipython
        from IPython.utils.capture import capture_output
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or _capturing:
        return
    capture = capture_output(stdout=True, stderr=True, display=True)
    captured = capture.__enter__()

    def show(result=None):
        shell.events.unregister("post_run_cell", show)
        _capturing.clear()
        capture.__exit__(None, None, None)
        shown = []
        for output in captured.outputs:
            if _GLUE in (output.metadata or {}):
                shell.display_pub.publish(output.data, output.metadata)
            else:
                shown.append(output)
        if captured.stdout or captured.stderr or shown:
            text = captured.stdout + captured.stderr
            shell.display_pub.publish({"text/html": _details(captured.stdout, captured.stderr, shown),
                                       "text/plain": text or SUMMARY})

    _capturing.append(capture)
    shell.events.register("post_run_cell", show)


def _details(stdout: str, stderr: str, outputs) -> str:
    """The captured output as one closed ``<details>``: the text first, then each display (its HTML,
    else its PNG or SVG image at the size it would be shown, else its plain text)."""
    parts = [f"<pre>{html.escape(text)}</pre>" for text in (stdout, stderr) if text]
    for output in outputs:
        data, metadata = output.data, output.metadata or {}
        if "text/html" in data:
            parts.append(data["text/html"])
        elif "image/png" in data:
            size = metadata.get("image/png", {})
            attrs = "".join(f' {k}="{size[k]}"' for k in ("width", "height") if k in size)
            parts.append(f'<img src="data:image/png;base64,{data["image/png"].strip()}"{attrs} alt="figure">')
        elif "image/svg+xml" in data:
            parts.append(data["image/svg+xml"])
        elif "text/plain" in data:
            parts.append(f"<pre>{html.escape(data['text/plain'])}</pre>")
    return (f'<details class="rcteach-solution"><summary>{SUMMARY}</summary>'
            f'<div class="rcteach-solution-body">{"".join(parts)}</div></details>')
