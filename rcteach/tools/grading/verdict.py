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

import numpy as np

from .answers import DecodeError, Other, decode, describe, printable

__all__ = ["Error", "read_answers", "read_notes", "same", "mark", "Mark", "MAX_LINE"]

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
        except Exception:  # noqa: BLE001 - whatever the record is built to raise, it is ignored
            continue
    return found


def read_notes(data: bytes, limit: int = 20) -> list[str]:
    """The harness's notes in the answer stream (``{"note": text}`` records, e.g. a cell stopped at
    the per-cell limit): the submission's own word, shortened, escaped, at most ``limit``."""
    notes = []
    for line in data.split(b"\n"):
        if len(notes) >= limit or not line.startswith(b'{"note"') or len(line) > 4096:
            continue
        try:
            note = json.loads(line)["note"]
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(note, str):
            notes.append(printable(note[:200]))
    return notes


def _one(item):
    if isinstance(item, dict) and set(item) == {"ok"}:
        return decode(item["ok"])
    if isinstance(item, dict) and set(item) == {"error"} and isinstance(item["error"], str):
        return Error(printable(item["error"][:300]))
    raise DecodeError("an answer is neither ok nor error")


def _number(x) -> np.ndarray | None:
    """A Python number as a 0-d float64 / complex128 array; None for an int beyond float range."""
    try:
        return np.asarray(x, dtype=np.complex128 if isinstance(x, complex) else np.float64)
    except OverflowError:
        return None


def _within(got: np.ndarray, want: np.ndarray, rtol, atol) -> bool:
    """``|got - want| <= atol + rtol * |want|`` elementwise (as ``np.allclose``), with the same
    infinities in the same places and no NaN, computed without overflow: both sides are divided
    by their largest finite component first (a difference of two values near the largest float,
    or the modulus of a complex one, would overflow to inf and make anything "close")."""
    finite = np.isfinite(got)
    if not np.array_equal(finite, np.isfinite(want)) or not np.array_equal(got[~finite], want[~finite]):
        return False
    g, w = got[finite], want[finite]
    if g.size == 0:
        return True
    with np.errstate(all="ignore"):
        scale = max(float(np.max(np.abs(x))) for x in (g.real, g.imag, w.real, w.imag) if x.size) or 1.0
        g, w = g / scale, w / scale
        return bool(np.all(np.abs(g - w) <= atol / scale + rtol * np.abs(w)))


def _close(got, want, rtol, atol) -> bool:
    if isinstance(got, bool) or not isinstance(got, (int, float, complex)):
        return False
    if isinstance(got, complex) and not isinstance(want, complex):
        return False
    g, w = _number(got), _number(want)
    if g is None or w is None:  # an int no float holds: only an exact match
        return got == want
    return _within(g, w, rtol, atol)


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
                and _within(got, want, rtol, atol))
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
    """Mark one question: full ``points`` if every answer in ``got`` matches ``want``, else 0.

    An answer that cannot even be compared (any exception while judging it) is a mismatch with a
    note: judging one submission never stops the grading of the others."""
    if got is None:
        return Mark(question, 0.0, points, ["no answer: the notebook stopped (or hid the answer) before this question"])
    feedback = []
    for ask, g, w in zip(asks, got, want):
        try:
            line = _judge(ask, g, w)
        except Exception as e:  # noqa: BLE001 - an answer built to break the comparison
            line = f"{ask['label']}: could not be compared with the expected answer ({type(e).__name__})"
        if line is not None:
            feedback.append(line)
    return Mark(question, 0.0 if feedback else float(points), float(points), feedback)


def _judge(ask, g, w) -> str | None:
    """None when the answer ``g`` matches ``w``, else the feedback line."""
    if same(g, w, ask["rtol"], ask["atol"]):
        return None
    if isinstance(g, Error) and "forbids" in g:
        return f"{ask['label']}: calls a helper this question forbids ({', '.join(ask['forbid'])})"
    if isinstance(g, Error):
        return f"{ask['label']}: raised {g}"
    return f"{ask['label']}: got {describe(g)}; expected {describe(w)}"
