"""Short public-test feedback for students: otter's ``grader.check`` with one line per failed test.

The student notebooks start with ``grader = Notebook("<name>.ipynb")`` (this module's subclass of
``otter.Notebook``).  ``grader.check("q1b")`` runs the question's public tests as otter does but
shows, for each failed test, only the first failure's own message: the text of the test's
``assert`` (e.g. "predicted_radius(64, ln 2) returned 0.0884; expected sqrt(c/T) = 0.125"), or the
line of the exception it raised (otter runs a test's later lines after a failure too; their
errors, e.g. a name the failed line should have defined, only follow from the first);
``grader.check_all()`` adds a line with how many questions pass.  The public tests live in the
notebook's metadata, so ``Notebook`` must read the notebook file: a renamed or copied notebook is
found too (:func:`find_notebook`).  Nothing here decides a grade: hidden tests run in rcteach's
trusted grader (``python -m rcteach grade``).
"""

from __future__ import annotations

import glob
import html
import inspect
import json
import os
import re

import otter
from otter.check.utils import list_available_tests

from .submissions import assignment_of

__all__ = ["Notebook", "Feedback", "failure_message", "public_failures", "find_notebook"]

_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))(?::\s*(.*))?$")


def failure_message(report: str) -> str:
    """The message of a failed test from otter's report: the first failure's ``AssertionError``
    text, else that exception's line (``NameError: name 'x' is not defined``)."""
    lines = [line.strip() for line in (report or "").splitlines() if line.strip()]
    for line in lines:
        match = _EXCEPTION.match(line)
        if match:
            return match.group(2) if match.group(1) == "AssertionError" and match.group(2) else line
    return lines[-1] if lines else "the test failed"


def _assignment_in(path) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return assignment_of(json.load(f))
    except (OSError, ValueError):
        return None


def find_notebook(nb_path: str) -> str:
    """The notebook file holding the public tests: ``nb_path`` if it exists; else, for a notebook
    renamed or copied (``a1_spectral_gap (1).ipynb``), the notebook this kernel runs (Jupyter's
    ``JPY_SESSION_NAME``) or, failing that, the most recently saved notebook of the working folder,
    if it belongs to the same assignment (``<name>`` of ``<name>.ipynb``: every copy holds the same tests)."""
    if os.path.isfile(nb_path):
        return nb_path
    name = os.path.splitext(os.path.basename(nb_path))[0]
    session = os.environ.get("JPY_SESSION_NAME", "")
    candidates = [session] if session.endswith(".ipynb") and os.path.isfile(session) else []
    candidates += sorted(glob.glob("*.ipynb"), key=os.path.getmtime, reverse=True)
    for path in candidates:
        if _assignment_in(path) == name:
            return path
    raise FileNotFoundError(f"no notebook {nb_path} here, and no renamed copy of it (a notebook of assignment "
                            f"{name}) in {os.getcwd()}: open the notebook from the folder it was saved in")


def _failures(test_file) -> list[str]:
    """One message per failed test case of otter's result for a question."""
    return [failure_message(r.message) for r in test_file.test_case_results if not r.passed]


def public_failures(notebook_path, question: str, env: dict) -> list[str]:
    """The failure messages of ``question``'s public tests (in the metadata of the student notebook
    ``notebook_path``) run in the namespace ``env``, by otter's checker (without its log file)."""
    import nbformat
    from otter.execute import Checker
    from otter.nbmeta_config import NBMetadataConfig

    config = NBMetadataConfig.from_notebook(nbformat.read(str(notebook_path), nbformat.NO_CONVERT))
    return _failures(Checker.check(str(notebook_path), config, question, env))


class Feedback:
    """Result of the public tests of some questions: ``{question: [failure messages]}``."""

    def __init__(self, failures: dict):
        self.failures = failures

    @property
    def passed(self) -> bool:
        return not any(self.failures.values())

    def lines(self) -> list[str]:
        out = []
        for question, failed in self.failures.items():
            out.append(f"{question}: " + ("public tests passed" if not failed else f"{len(failed)} public test(s) "
                                          f"failed"))
            out += [f"    - {message}" for message in failed]
        if len(self.failures) > 1:
            ok = sum(not failed for failed in self.failures.values())
            out.append(f"Public tests: {ok} / {len(self.failures)} questions pass. Your grade comes from hidden tests "
                       "run when your notebook is graded (new inputs, same questions).")
        return out

    def __repr__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        return "<pre>" + html.escape(repr(self)) + "</pre>"


class Notebook(otter.Notebook):
    """``otter.Notebook`` whose ``check`` and ``check_all`` return a short :class:`Feedback`, and
    which finds its notebook when it was renamed (:func:`find_notebook`)."""

    def __init__(self, nb_path=None, *args, **kwargs):
        super().__init__(find_notebook(nb_path) if nb_path is not None else None, *args, **kwargs)

    def check(self, question, global_env=None):
        if global_env is None:
            global_env = inspect.currentframe().f_back.f_globals
        return Feedback({question: _failures(super().check(question, global_env))})

    def check_all(self, global_env=None):
        if global_env is None:
            global_env = inspect.currentframe().f_back.f_globals
        failures = {}
        for question in list_available_tests(self._tests_dir, self._nbmeta_config):
            failures.update(self.check(question, global_env).failures)
        return Feedback(failures)
