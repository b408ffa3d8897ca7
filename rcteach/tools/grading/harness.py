"""Runs inside the grading sandbox: execute a submitted notebook, then answer the grader's asks.

``main([NOTEBOOK, ASKS, ANSWERS_FD, CELL_SECONDS])`` (the grader starts it so that importing it does
not import torch); ``ASKS`` holds ``{"questions": {question: [ask, ...]}, "preload": [module, ...]}``.
The modules of ``preload`` that the notebook mentions are imported first.  The notebook's code cells run
in order in one IPython shell (no kernel; :class:`GradingShell`), each under a soft time limit of
``CELL_SECONDS`` (an alarm the student's code could disarm: the hard limits are the sandbox's), with
its position in the notebook as its number (tracebacks say ``Cell In[9]``).  Magics run as in Jupyter,
except that ``%matplotlib`` starts no GUI event loop and shell commands (``!cmd``, ``%pip``,
``%conda``) are skipped with a note.  Otter's own lines (``grader = Notebook(...)`` of otter or
:mod:`.feedback`, its import, ``grader.check_all()``, ``grader.export()``) are skipped, also inside
a cell that holds other code; at each ``grader.check("q")`` cell, and once more at the end, the
asks of question ``q`` (see :mod:`.answers`) are answered and written as one JSON line
``{"question": q, "answers": [...]}`` to ``ANSWERS_FD``, each answer ``{"ok": plain data}`` or
``{"error": "Type: message (cell 9, line 3: `code`)"}``.  So a submission that hangs or dies later
keeps the answers it gave before.  A cell that raises is reported as one line
``{"cell_error": {"cell": n, "error": "Type: message", "where": "cell 7, line 2: `code`"}}`` (where
the innermost frame in a cell was); a cell stopped by the soft limit adds a line ``{"note": "cell N
was stopped at the per-cell time limit of S s"}``; the run ends with ``{"cpu_seconds": t}``.

Nothing here is trusted: it runs after the student's code, in the same process.  The grader only
reads the plain data it writes and compares it with answers computed outside; the cell errors and
the CPU time are the submission's word, used for feedback and statistics only.
"""

from __future__ import annotations

import importlib
import json
import linecache
import os
import re
import signal
import sys
import types

from .answers import evaluate

CHECK = re.compile(r"""^\s*grader\.check\(\s*["'](\w+)["']\s*\)\s*$""")
#: A line that only sets up or calls otter (skipped when grading: the grader asks for the answers itself).
OTTER_LINE = re.compile(r"""^(\s*)(import otter|from rcteach(\.\w+)* import Notebook"""
                        r"""|grader\s*=\s*(otter\.)?Notebook\(.*\)"""
                        r"""|grader\.(check|check_all|export)\(.*\))\s*(#.*)?$""")
_BLANK = re.compile(r"^\s*(#.*)?$")


def code_cells(notebook: dict) -> list[str]:
    """The sources of a notebook's code cells (nbformat 4 JSON)."""
    return [source for _, source in numbered_code_cells(notebook)]


def numbered_code_cells(notebook: dict) -> list[tuple[int, str]]:
    """``(position, source)`` of a notebook's code cells, position counted from 1 over all its cells."""
    cells = notebook.get("cells", []) if isinstance(notebook, dict) else []
    return [(n, "".join(c.get("source", "")) if isinstance(c.get("source", ""), list) else str(c.get("source", "")))
            for n, c in enumerate(cells, 1) if isinstance(c, dict) and c.get("cell_type") == "code"]


def is_otter_cell(source: str) -> bool:
    """Whether a cell only sets up or calls otter (``import otter``, ``grader.check_all()``, ...)."""
    lines = source.splitlines()
    return any(OTTER_LINE.match(line) for line in lines) and all(OTTER_LINE.match(l) or _BLANK.match(l) for l in lines)


def without_otter(source: str) -> str:
    """``source`` with each otter line (:data:`OTTER_LINE`) replaced by ``pass`` at its indentation."""
    return "\n".join(OTTER_LINE.sub(r"\1pass", line) for line in source.split("\n"))


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


def answer(question: str, asks: list, namespace: dict, seconds: float, shell=None) -> dict:
    """The answers to one question's asks in ``namespace``, each under the soft time limit; an error
    names the student's cell and line where it was raised (``shell``: the :class:`GradingShell`)."""
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
            where = _place(shell.where(e)) if shell is not None else ""
            answers.append({"error": _one_line(e) + (f" ({where})" if where else "")})
        finally:
            _alarm(0)
            _restore(undo)
    return {"question": question, "answers": answers}


def _place(where) -> str:
    """``cell 9, line 3: `code``` from :meth:`GradingShell.where`'s triple ("" for None)."""
    return f"cell {where[0]}, line {where[1]}: `{where[2]}`" if where else ""


def _one_line(e: BaseException) -> str:
    message = " ".join(str(e).split())
    return f"{type(e).__name__}: {message[:300]}" if message else type(e).__name__


def _shell_class():
    """:class:`GradingShell`, defined on first use (IPython is imported only when a notebook runs)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.text import SList

    class GradingShell(InteractiveShell):
        """IPython's plain shell as a grading kernel: magics work as in Jupyter, except that no GUI
        event loop starts (``%matplotlib inline``: figures render off-screen) and shell commands
        (``!pip ...``, ``%pip``, ``%conda``, ``x = !ls``) are skipped with a note: the sandbox
        runs no other programs, and the grading environment already has the course's packages."""

        def enable_gui(self, gui=None):
            pass

        def system(self, cmd):
            print(f"[grading] shell command skipped: {cmd[:200]}")
            self.user_ns["_exit_code"] = 0

        system_piped = system_raw = system

        def getoutput(self, cmd, split=True, depth=0):
            self.system(cmd)
            return SList()

        def where(self, error: BaseException):
            """``(cell, line, code)`` of the innermost frame of ``error`` in a notebook cell, or None."""
            found, tb = None, error.__traceback__
            while tb is not None:
                name = tb.tb_frame.f_code.co_filename
                label = self.compile.format_code_name(name)
                if label is not None:
                    source = linecache.getline(name, tb.tb_lineno).strip()[:200]
                    found = (int(label[1].strip("In[]")), tb.tb_lineno, source)
                tb = tb.tb_next
            if isinstance(error, SyntaxError) and found is None and error.lineno:
                found = (self.execution_count, error.lineno, (error.text or "").strip()[:200])
            return found

    return GradingShell


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
        cells = numbered_code_cells(json.load(f))
    text = "\n".join(source for _, source in cells)
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

    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "nocolor"
    config.InteractiveShell.xmode = "Plain"
    shell = _shell_class().instance(config=config)
    namespace = shell.user_ns
    for number, source in cells:
        check = CHECK.match(source)
        if check and check.group(1) in asks:
            _write(fd, answer(check.group(1), asks[check.group(1)], namespace, seconds, shell))
        elif not is_otter_cell(source):
            stopped.clear()
            signal.signal(signal.SIGALRM, on_alarm)
            shell.execution_count = number
            _alarm(seconds)
            try:
                result = shell.run_cell(without_otter(source), store_history=False)
            finally:
                _alarm(0)
            error = result.error_before_exec or result.error_in_exec
            if error is not None:
                where = _place(shell.where(error))
                _write(fd, {"cell_error": {"cell": number, "error": _one_line(error), "where": where}})
            if stopped:
                _write(fd, {"note": f"cell {number} was stopped at the per-cell time limit of {seconds:g} s"})
    signal.signal(signal.SIGALRM, on_alarm)
    for question, question_asks in asks.items():
        _write(fd, answer(question, question_asks, namespace, seconds, shell))
    import resource  # here, not at the top: the grading package imports this module on every system

    usage = resource.getrusage(resource.RUSAGE_SELF)
    _write(fd, {"cpu_seconds": usage.ru_utime + usage.ru_stime})
    return 0

