"""Authoring assignments: what ``assign`` adds to the student notebook, and the check of a new master.

:func:`annotate_student` runs after ``otter assign``: it writes each question's points into its
prompt (``**Question 1a.** *(2 points)* ...``) and adds, after the title, a cell with the install
line and the questions' points.  (The assignment's name is already in the notebook's metadata,
``metadata.otter.assignment_name``: the grader notes a notebook of another assignment, and
:func:`.feedback.find_notebook` finds a renamed copy by it.)

:func:`check_assignment` (``python -m rcteach assign --check``) checks a built assignment the way a
course would meet it: the answer key asks about every question, in plain data, with inputs that
change with the seed; the solutions notebook scores full marks and the blank student notebook 0,
both graded in the sandbox; and each wrong answer declared in the key (``WRONG = {question:
[code, ...]}``, run after the solutions in a fresh run of them) fails at least one of the
question's public tests and loses the question's points against the key's asks.  The guide is
``docs/writing-assignments.md``.
"""

from __future__ import annotations

import json
import re

import nbformat

from . import answers, submissions, verdict

__all__ = ["INSTALL", "annotate_student", "check_assignment", "check_key", "check_scores", "accepted"]

#: How a student installs what the notebook needs (rcteach and otter-grader).
INSTALL = 'pip install "rcteach[assign]"'
_TITLE = re.compile(r"^(\*\*[^*\n]+\*\*)")
_CHECK = re.compile(r"""grader\.check\(\s*["'](\w+)["']\s*\)""")


def _points(p: float) -> str:
    return f"{p:g} point" + ("" if p == 1 else "s")


def annotate_student(path, points: dict) -> None:
    """Add the points of each question (``{question: points}``) and an install line to the student
    notebook at ``path`` (an ``otter assign`` output), in place."""
    nb = nbformat.read(path, as_version=4)
    previous = 0
    for i, cell in enumerate(nb.cells):
        match = _CHECK.fullmatch(cell.source.strip()) if cell.cell_type == "code" else None
        if match is None or match.group(1) not in points:
            continue
        prompts = [c for c in nb.cells[previous:i] if c.cell_type == "markdown" and c.metadata.get("editable") is False]
        previous = i + 1
        if prompts:
            label = f"*({_points(points[match.group(1)])})*"
            text = prompts[0].source
            prompts[0].source = (_TITLE.sub(lambda m: f"{m.group(1)} {label}", text, count=1) if _TITLE.match(text)
                                 else f"{label} {text}")
    listing = ", ".join(f"{q} {p:g}" for q, p in points.items())
    setup = nbformat.v4.new_markdown_cell(
        f"**Before you start.** This notebook needs `rcteach` with its assignment extra: `{INSTALL}` in a terminal "
        f"(or `%{INSTALL}` in a cell, then restart the kernel). It has {len(points)} questions worth "
        f"{_points(sum(points.values()))} in all ({listing}). `grader.check(\"q1a\")` and so on run a question's "
        "public tests; the grade comes from hidden tests run on new inputs when your notebook is graded.",
        metadata={"deletable": False, "editable": False})
    setup.pop("id", None)  # nbformat 4.4, as otter writes it: no cell ids
    nb.cells.insert(1, setup)
    nbformat.write(nb, path)


def check_assignment(built: dict, *, unsafe_no_sandbox=False, progress=None) -> list[str]:
    """The problems of a built assignment (``{"student": notebook, "autograder": folder}`` from
    :func:`rcteach.tools.grading.assign`); empty when it passes every check (module doc).
    ``progress``: called with a line of text as each check starts."""
    problems = check_key(built, progress=progress)
    return problems + check_scores(built, unsafe_no_sandbox=unsafe_no_sandbox, progress=progress)


def check_key(built: dict, *, progress=None) -> list[str]:
    """The answer key's problems: asks that miss a question, are not plain data or do not change
    with the seed, and declared wrong answers (``WRONG``) that the public tests or the asks accept."""
    from rcteach.tools import grading

    say = progress or (lambda text: None)
    assignment = grading.load(built["autograder"])
    say("the answer key: asks about every question, fresh inputs per seed")
    try:
        first, second = grading.draw_asks(assignment, 1), grading.draw_asks(assignment, 2)
        json.loads(json.dumps(first.asks))
    except (ValueError, TypeError) as e:
        return [f"the answer key: {e}"]
    problems = [] if first.digest != second.digest else ["the key asks about the same inputs whatever the seed (draw "
                                                         "them from rng)"]
    for question in assignment.points:
        if not assignment.wrong.get(question):
            say(f"{question}: no wrong answers declared in WRONG (none tried)")
    for question, codes in assignment.wrong.items():
        if question not in assignment.points:
            problems.append(f"WRONG names {question!r}, not a question ({', '.join(assignment.points)})")
            continue
        for code in codes:
            say(f"{question}: the wrong answer {code.splitlines()[0]!r}")
            problems += accepted(built, question, code)
    return problems


def accepted(built: dict, question: str, code: str, seed: int = 1) -> list[str]:
    """Who accepts a wrong answer ``code`` to ``question`` (run after the solutions, in a fresh run of
    them): the question's public tests, its asks (drawn with ``seed``), both, or neither (``[]``)."""
    from rcteach.tools import grading

    from . import feedback  # imports otter

    assignment = grading.load(built["autograder"])
    env = grading.run_solutions(built["autograder"])
    exec(compile(code, "<wrong answer>", "exec"), env)
    found = []
    if not feedback.public_failures(built["student"], question, env):
        found.append(f"{question}: the public tests accept the wrong answer {code!r}")
    asked = grading.draw_asks(assignment, seed)
    asks = asked.asks[question]
    if verdict.mark(question, 1.0, asks, [_answer(env, a) for a in asks], asked.want[question]).score > 0:
        found.append(f"{question}: the key's asks accept the wrong answer {code!r}")
    return found


def check_scores(built: dict, *, unsafe_no_sandbox=False, progress=None) -> list[str]:
    """Grade, in the sandbox, the solutions notebook (full marks expected) and the blank student notebook (0)."""
    from rcteach.tools import grading

    (progress or (lambda text: None))("the solutions and the blank student notebook, graded in the sandbox")
    solutions = built["autograder"] / f"{grading.load(built['autograder']).name}.ipynb"
    subs = [submissions.Submission("solutions", solutions), submissions.Submission("blank", built["student"])]
    full, blank = grading.grade_all(subs, built["autograder"], jobs=2, unsafe_no_sandbox=unsafe_no_sandbox)
    return ([f"the solutions lose {t['name']}: {'; '.join(t['feedback'])}" for t in full["tests"] if t["feedback"]]
            + [f"the blank student notebook earns {t['name']}" for t in blank["tests"] if t["score"] > 0])


def _answer(env: dict, ask: dict):
    """The answer of the namespace ``env`` to ``ask`` as the grader would decode it (an error as
    :class:`.verdict.Error`)."""
    try:
        return answers.decode(json.loads(json.dumps(answers.evaluate(env, ask))))
    except Exception as e:  # the wrong answer may raise: that is a rejection too
        return verdict.Error(f"{type(e).__name__}: {e}")
