"""The trusted side of grading: read a submission's answers defensively and mark them.

:func:`read_answers` parses the JSON lines a sandboxed run wrote (see :mod:`.harness`), keeping
only well-formed records of known questions with the expected number of answers, each decoded by
:func:`.answers.decode` (plain data only, size-limited; a later record of a question replaces an
earlier one).  :func:`mark` compares them with the reference answers, which the grader computed
itself from the solutions: a question earns its points when every ask matches, else 0, so a score
is never negative and never above the possible points.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from .answers import DecodeError, Other, decode, describe

__all__ = ["Error", "read_answers", "same", "mark", "Mark", "MAX_LINE"]

MAX_LINE = 16 << 20  #: longest answer line read (bytes)


class Error(str):
    """An ask that raised in the submission (the text says what)."""


def read_answers(data: bytes, asks: dict) -> dict:
    """``{question: [answer or Error, ...]}`` from the answer stream; malformed records are ignored."""
    found = {}
    for line in data.split(b"\n"):
        if not line or len(line) > MAX_LINE:
            continue
        try:
            record = json.loads(line)
            question, answers = record["question"], record["answers"]
            if question not in asks or not isinstance(answers, list) or len(answers) != len(asks[question]):
                continue
            found[question] = [_one(a) for a in answers]
        except (ValueError, KeyError, TypeError, DecodeError, RecursionError):
            continue
    return found


def _one(item):
    if isinstance(item, dict) and set(item) == {"ok"}:
        return decode(item["ok"])
    if isinstance(item, dict) and set(item) == {"error"} and isinstance(item["error"], str):
        return Error(item["error"][:300])
    raise DecodeError("an answer is neither ok nor error")


def _close(got, want, rtol, atol) -> bool:
    if isinstance(got, bool) or not isinstance(got, (int, float, complex)):
        return False
    if isinstance(got, complex) and not isinstance(want, complex):
        return False
    if got == want:
        return True
    finite = all(math.isfinite(abs(x)) for x in (got, want))
    return finite and abs(got - want) <= atol + rtol * abs(want)


def same(got, want, rtol=1e-9, atol=0.0) -> bool:
    """Whether the answer ``got`` matches the reference ``want``: same kind and shape, numbers within
    ``atol + rtol * |want|`` (booleans, strings and ``inf`` exactly; NaN never matches)."""
    if isinstance(got, (Error, Other)):
        return False
    if want is None or isinstance(want, (bool, str)):
        return type(got) is type(want) and got == want
    if isinstance(want, (int, float, complex)):
        return _close(got, want, rtol, atol)
    if isinstance(want, np.ndarray):
        return (isinstance(got, np.ndarray) and got.shape == want.shape
                and (got.dtype.kind == "b") == (want.dtype.kind == "b")
                and np.iscomplexobj(got) == np.iscomplexobj(want)
                and bool(np.all(np.isfinite(got) == np.isfinite(want)))
                and bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=False)))
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(same(g, w, rtol, atol) for g, w in zip(got, want))
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(same(got[k], want[k], rtol, atol) for k in want)
    return False


@dataclasses.dataclass
class Mark:
    """One question's result: ``name``, ``score``, ``max_score`` and ``feedback`` (one line per failed ask)."""

    name: str
    score: float
    max_score: float
    feedback: list[str]


def mark(question: str, points: float, asks: list, got: list | None, want: list) -> Mark:
    """Mark one question: full ``points`` if every answer in ``got`` matches ``want``, else 0."""
    if got is None:
        return Mark(question, 0.0, points, ["no answer: the notebook stopped (or hid the answer) before this question"])
    feedback = []
    for ask, g, w in zip(asks, got, want):
        if same(g, w, ask["rtol"], ask["atol"]):
            continue
        if isinstance(g, Error) and "forbids" in g:
            feedback.append(f"{ask['label']}: calls a helper this question forbids ({', '.join(ask['forbid'])})")
        elif isinstance(g, Error):
            feedback.append(f"{ask['label']}: raised {g}")
        else:
            feedback.append(f"{ask['label']}: got {describe(g)}; expected {describe(w)}")
    return Mark(question, 0.0 if feedback else float(points), float(points), feedback)
