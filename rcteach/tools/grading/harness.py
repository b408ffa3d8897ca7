"""Runs inside the grading sandbox: execute a submitted notebook, then answer the grader's asks.

``main([NOTEBOOK, ASKS, ANSWERS_FD, CELL_SECONDS])`` (the grader starts it so that importing it does
not import torch); ``ASKS`` holds ``{"questions": {question: [ask, ...]}, "preload": [module, ...]}``.
The modules of ``preload`` that the notebook mentions are imported first.  The notebook's code cells run
in order in one IPython shell (no kernel), each under a soft time limit of ``CELL_SECONDS`` (an
alarm the student's code could disarm: the hard limits are the sandbox's).  Otter's own cells
(``grader = Notebook(...)`` of otter or :mod:`.feedback`, ``grader.check_all()``, ``grader.export()``) are skipped; at each
``grader.check("q")`` cell, and once more at the end, the asks of question ``q`` (see
:mod:`.answers`) are answered and written as one JSON line ``{"question": q, "answers": [...]}``
to ``ANSWERS_FD``, each answer ``{"ok": plain data}`` or ``{"error": "..."}``.  So a submission that
hangs or dies later keeps the answers it gave before.  A cell stopped by the soft limit adds a line
``{"note": "code cell N was stopped at the per-cell time limit of S s"}``.

Nothing here is trusted: it runs after the student's code, in the same process.  The grader only
reads the plain data it writes and compares it with answers computed outside.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import sys
import types

from .answers import evaluate

CHECK = re.compile(r"""^\s*grader\.check\(\s*["'](\w+)["']\s*\)\s*$""")
OTTER = re.compile(r"""^\s*(#.*|import otter|from rcteach(\.\w+)* import Notebook|grader\s*=\s*(otter\.)?Notebook\(.*\)"""
                   r"""|grader\.(check|check_all|export)\(.*\)|)\s*$""")


def code_cells(notebook: dict) -> list[str]:
    """The sources of a notebook's code cells (nbformat 4 JSON; the grader hands the sandbox a
    notebook it has already checked and reduced to its code cells, see :func:`.grading.grade`)."""
    cells = notebook.get("cells", []) if isinstance(notebook, dict) else []
    sources = (c.get("source", "") for c in cells if isinstance(c, dict) and c.get("cell_type") == "code")
    return ["".join(s) if isinstance(s, list) else str(s) for s in sources]


def is_otter_cell(source: str) -> bool:
    """Whether a cell only sets up or calls otter (``import otter``, ``grader.check_all()``, ...)."""
    lines = source.splitlines()
    return bool(lines) and all(OTTER.match(line) for line in lines) and ("Notebook(" in source or "grader." in source)


def _forbidden(*args, **kwargs):
    raise RuntimeError("called a helper that this question forbids")


def _block(dotted_names, namespace) -> list:
    """Make each forbidden helper (a dotted name) raise, through every reference to it: its code is
    swapped (functions without closures) and every module or notebook variable naming it is
    replaced.  Returns what :func:`_restore` needs to undo it."""
    undo = []
    for dotted in dotted_names:
        module_name, _, attr = dotted.rpartition(".")
        target = getattr(importlib.import_module(module_name), attr)
        if isinstance(target, types.FunctionType) and not target.__code__.co_freevars:
            undo.append((target, "__code__", target.__code__))
            target.__code__ = _forbidden.__code__
        holders = [vars(m) for m in list(sys.modules.values()) if isinstance(m, types.ModuleType)] + [namespace]
        for holder in holders:
            for key, value in list(holder.items()):
                if value is target:
                    undo.append((holder, key, value))
                    holder[key] = _forbidden
    return undo


def _restore(undo) -> None:
    for holder, key, value in reversed(undo):
        if isinstance(holder, dict):
            holder[key] = value
        else:
            setattr(holder, key, value)


def _alarm(seconds: float) -> None:
    signal.setitimer(signal.ITIMER_REAL, seconds)


def answer(question: str, asks: list, namespace: dict, seconds: float) -> dict:
    """The answers to one question's asks in ``namespace``, each under the soft time limit."""
    answers = []
    for ask in asks:
        undo = []
        try:
            if ask["name"] not in namespace:
                raise NameError(f"name '{ask['name']}' is not defined")
            undo = _block(ask.get("forbid", ()), namespace)
            _alarm(seconds)
            answers.append({"ok": evaluate(namespace, ask)})
        except BaseException as e:  # the student's code may raise anything, even SystemExit
            answers.append({"error": f"{type(e).__name__}: {str(e)[:300]}"})
        finally:
            _alarm(0)
            _restore(undo)
    return {"question": question, "answers": answers}


def _write(fd: int, record: dict) -> None:
    data = (json.dumps(record) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def main(argv) -> int:
    notebook_path, asks_path, fd, seconds = argv[0], argv[1], int(argv[2]), float(argv[3])
    with open(asks_path) as f:
        grader = json.load(f)
    asks = grader["questions"]
    with open(notebook_path) as f:
        cells = code_cells(json.load(f))
    text = "\n".join(cells)
    for module in grader.get("preload", ()):  # slow imports the notebook makes, outside the per-cell limit
        if re.search(rf"\b{re.escape(module)}\b", text):
            try:
                importlib.import_module(module)
            except Exception:
                pass

    stopped = []

    def on_alarm(signum, frame):
        stopped.append(True)
        raise TimeoutError(f"stopped after the time limit of {seconds:g} s")

    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    namespace = shell.user_ns
    for number, source in enumerate(cells, 1):
        check = CHECK.match(source)
        if check and check.group(1) in asks:
            _write(fd, answer(check.group(1), asks[check.group(1)], namespace, seconds))
        elif not is_otter_cell(source):
            stopped.clear()
            signal.signal(signal.SIGALRM, on_alarm)
            _alarm(seconds)
            try:
                shell.run_cell(source, store_history=False)
            finally:
                _alarm(0)
            if stopped:
                _write(fd, {"note": f"code cell {number} was stopped at the per-cell time limit of {seconds:g} s"})
    signal.signal(signal.SIGALRM, on_alarm)
    for question, question_asks in asks.items():
        _write(fd, answer(question, question_asks, namespace, seconds))
    return 0

