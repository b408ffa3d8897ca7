"""Short public-test feedback for students: otter's ``grader.check`` with one line per failed test.

The student notebooks start with ``grader = Notebook("<name>.ipynb")`` (this module's subclass of
``otter.Notebook``).  ``grader.check("q1b")`` runs the question's public tests as otter does but
shows, for each failed test, only its own message, the text of the test's ``assert`` (e.g.
"predicted_radius(64, ln 2) returned 0.0884; expected sqrt(c/T) = 0.125"), or the last line of the
exception it raised; ``grader.check_all()`` adds a line with how many questions pass.  Nothing here
decides a grade: hidden tests run in rcteach's trusted grader (``python -m rcteach grade``).
"""

from __future__ import annotations

import html
import inspect
import re

import otter
from otter.check.utils import list_available_tests

__all__ = ["Notebook", "Feedback", "failure_message"]

_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))(?::\s*(.*))?$")


def failure_message(report: str) -> str:
    """The message of a failed test from otter's report: an ``AssertionError``'s text, else the
    exception's last line (``NameError: name 'x' is not defined``)."""
    lines = [line.strip() for line in (report or "").splitlines() if line.strip()]
    for line in reversed(lines):
        match = _EXCEPTION.match(line)
        if match:
            return match.group(2) if match.group(1) == "AssertionError" and match.group(2) else line
    return lines[-1] if lines else "the test failed"


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
            out.append(f"{question}: " + ("public tests passed" if not failed else f"{len(failed)} public test(s) failed"))
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
    """``otter.Notebook`` whose ``check`` and ``check_all`` return a short :class:`Feedback`."""

    def check(self, question, global_env=None):
        if global_env is None:
            global_env = inspect.currentframe().f_back.f_globals
        result = super().check(question, global_env)
        failed = [failure_message(r.message) for r in result.test_case_results if not r.passed]
        return Feedback({question: failed})

    def check_all(self, global_env=None):
        if global_env is None:
            global_env = inspect.currentframe().f_back.f_globals
        failures = {}
        for question in list_available_tests(self._tests_dir, self._nbmeta_config):
            failures.update(self.check(question, global_env).failures)
        return Feedback(failures)
