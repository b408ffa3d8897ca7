"""A class's gradebook in one results folder: merged by student, never lost, with what a course hands on.

``grade ... -o OUT`` keeps, in ``OUT``:

* ``scores.csv``: one row per student — ``student``, ``score``, ``possible``, the points of each
  question (empty where a submission could not be graded), ``notes`` (limits hit, a run that
  failed, a notebook of another assignment, why a file was not graded), ``notebook`` (its path) and
  ``seed`` (of the inputs it was asked about: ``grade --replay`` asks the same again).  Each run
  merges its rows in by student: regrading one student replaces that row and keeps the others.  The
  file is rewritten (atomically) after every submission, so an interrupted run keeps what it graded.
* ``results/<student>.json``: everything about one submission (per question: points and one
  feedback line per failed ask; the run's output; the seed and a digest of the asks).
* ``feedback/<student>.md``: the feedback to hand back (score, points per question, what failed
  and why, the cells that raised).
* ``canvas.csv``: the scores as a Canvas gradebook import (Grades → Import): columns ``Student``,
  ``ID``, ``SIS User ID``, ``SIS Login ID``, ``Section`` and one named after the assignment, a
  ``Points Possible`` row, the student id as ``SIS Login ID``.
* ``questions.csv``: per question, how many submissions were graded, the mean, and how many got
  full marks and none.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import html
import io
import json
import os
import pathlib
import re
import tempfile

__all__ = ["Gradebook", "file_name", "question_statistics", "feedback_markdown", "SCORES", "CANVAS", "QUESTIONS"]

SCORES, CANVAS, QUESTIONS = "scores.csv", "canvas.csv", "questions.csv"
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def file_name(student: str) -> str:
    """A file name for a student id: its safe characters, plus a short hash when any were replaced."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", student).strip("._") or "student"
    return safe if safe == student else f"{safe}-{hashlib.sha256(student.encode()).hexdigest()[:8]}"


def _number(x: float) -> str:
    return f"{x:g}"


def _write_atomically(path: pathlib.Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def _csv(rows, fieldnames=None) -> str:
    out = io.StringIO()
    if fieldnames is None:
        csv.writer(out).writerows(rows)
    else:
        writer = csv.DictWriter(out, fieldnames=fieldnames, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return out.getvalue()


class Gradebook:
    """The gradebook in ``folder`` of the assignment ``assignment`` with ``points`` ``{question: points}``.

    Raises ``ValueError`` if ``folder`` holds the scores of another assignment, or a ``scores.csv``
    without a ``student`` column.
    """

    def __init__(self, folder, assignment: str, points: dict):
        self.folder, self.assignment, self.points = pathlib.Path(folder), assignment, dict(points)
        self.columns = ["student", "assignment", "score", "possible", *self.points, "notes", "notebook", "seed"]
        self.rows = {}  # student -> row (strings)
        path = self.folder / SCORES
        if path.is_file():
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                if "student" not in (reader.fieldnames or []) or "assignment" not in (reader.fieldnames or []):
                    raise ValueError(f"{path} has no student and assignment columns (written by an older rcteach?): "
                                     "move it away, or grade into another folder")
                for row in reader:
                    if row["assignment"] != assignment:
                        raise ValueError(f"{path} holds scores of assignment {row['assignment']!r}, not "
                                         f"{assignment!r}: "
                                         "grade into another folder")
                    self.rows[row["student"]] = row

    def match(self, submissions) -> list:
        """``submissions`` with the student id of the gradebook's row for the same notebook file, if
        any (so that regrading one notebook replaces its row, whatever the id rule says)."""
        by_path = {row["notebook"]: student for student, row in self.rows.items() if row.get("notebook")}
        return [dataclasses.replace(s, student=by_path.get(os.path.abspath(s.path), s.student)) for s in submissions]

    def seed(self, student: str) -> int | None:
        """The seed of the inputs ``student``'s submission was last asked about, if the gradebook has one."""
        value = self.rows.get(student, {}).get("seed", "")
        return int(value) if value.isdigit() else None

    def add(self, result: dict) -> None:
        """Merge one result of :func:`rcteach.tools.grading.grade` in and write its JSON, its feedback and
        ``scores.csv``."""
        student = result["student"]
        name = file_name(student)
        for sub, text in (("results", json.dumps(result, indent=1) + "\n"), ("feedback", feedback_markdown(result))):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
            _write_atomically(self.folder / sub / f"{name}{'.json' if sub == 'results' else '.md'}", text)
        graded = {t["name"]: t["score"] for t in result["tests"]} if result.get("graded", True) else {}
        self.rows[student] = {
            "student": student, "assignment": self.assignment, "score": _number(result["score"]),
            "possible": _number(result["possible"]),
            **{q: _number(graded[q]) if q in graded else "" for q in self.points},
            "notes": "; ".join(result["notes"]), "notebook": os.path.abspath(result["notebook"]),
            "seed": "" if result.get("seed") is None else str(result["seed"])}
        self.write_scores()

    def write_scores(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        _write_atomically(self.folder / SCORES, _csv(self.rows.values(), self.columns))

    def finish(self) -> list[dict]:
        """Write ``canvas.csv`` and ``questions.csv`` from the whole gradebook; returns the statistics."""
        possible = _number(sum(self.points.values()))
        canvas = [CANVAS_COLUMNS + [self.assignment], ["Points Possible", "", "", "", "", possible]]
        canvas += [[s, "", "", s, "", row["score"]] for s, row in self.rows.items()]
        _write_atomically(self.folder / CANVAS, _csv(canvas))
        stats = question_statistics(self.rows.values(), self.points)
        _write_atomically(self.folder / QUESTIONS, _csv(stats, list(stats[0])))
        return stats


def question_statistics(rows, points: dict) -> list[dict]:
    """Per question, and for the total (``score``): how many submissions were ``graded``, the
    ``mean`` points, how many got ``full`` marks and how many ``none``, from rows of ``scores.csv``
    (a row whose question cells are empty was not graded)."""
    graded = [r for r in rows if any(r.get(q, "") != "" for q in points)]
    stats = []
    for question, most in [*points.items(), ("score", sum(points.values()))]:
        values = [float(r[question]) for r in graded if r.get(question, "") != ""]
        stats.append({"question": question, "points": _number(most), "graded": len(values),
                      "mean": _number(round(sum(values) / len(values), 3)) if values else "",
                      "full": sum(v == most for v in values), "none": sum(v == 0 for v in values)})
    return stats


def _md(text: str) -> str:
    """Untrusted text (feedback quoting a submission) made inert in Markdown rendered as HTML."""
    return html.escape(str(text), quote=False)


def feedback_markdown(result: dict) -> str:
    """The feedback file handed back to the student: score, points per question, what failed and why."""
    lines = [f"# {result['assignment']}: feedback for {_md(result['student'])}", "",
             f"**Score: {_number(result['score'])} / {_number(result['possible'])}**", ""]
    lines += ["| question | points |", "| --- | --- |"]
    lines += [f"| {t['name']} | {_number(t['score'])} / {_number(t['max_score'])} |" for t in result["tests"]]
    for t in result["tests"]:
        if t["feedback"]:
            lines += ["", f"## {t['name']} ({_number(t['score'])} / {_number(t['max_score'])})", ""]
            lines += [f"- {_md(line)}" for line in t["feedback"]]
    notes = list(result["notes"]) + [f"cell {e['cell']} raised {e['error']}"
                                     + (f" ({e['where']})" if e["where"] else "")
                                     for e in result.get("cell_errors", [])]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {_md(n)}" for n in notes]
    lines += ["", "How it was graded: your notebook ran from top to bottom in a sandbox, then each question's "
              "values were read and its functions called on new inputs; a question earns its points when "
              "every check matches the reference answers."]
    return "\n".join(lines) + "\n"
