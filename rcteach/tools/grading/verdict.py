"""The trusted side of grading: read a submission's answers defensively, mark them, and say why.

:func:`read_answers` parses the JSON lines a sandboxed run wrote (see :mod:`.harness`), keeping
only well-formed records of known questions with the expected number of answers, each decoded by
:func:`.answers.decode` (plain data only, size-limited; a later record of a question replaces an
earlier one); :func:`read_cell_errors` keeps the run's one-line reports of the cells that raised.
:func:`mark` compares the answers with the reference answers, which the grader computed itself
from the solutions: a question earns its points when every ask matches, else 0, so a score is
never negative and never above the possible points.

What counts as the same answer (:func:`same`): numbers are compared by value, whatever their type
(a Python number, a numpy scalar, a 0-d or one-element tensor or array) and width (int, float32,
float64; a complex number with the value of a real one), within ``atol + rtol * |expected|``;
arrays, tensors and lists of numbers alike, with shapes compared up to squeezing (``(1, 8)``,
``(8, 1)`` and ``(8,)`` are one shape); booleans only as booleans (``True`` is not ``1``), strings
exactly; ``inf`` matches ``inf`` of the same sign and NaN never matches.  An ask may accept several
reference answers (``accept=`` of :data:`.answers.ASK`: the conventions a question leaves open).

When an answer does not match, :func:`explain` says how in one line, with the digits that show the
difference: ``got 0.12700; expected 0.12701 (difference 5.7e-06; allowed 1.3e-10)``, the worst
entry of an array and how many entries differ, the first point where a sympy expression differs.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from .answers import DecodeError, Other, decode, describe, printable

__all__ = ["Error", "AnyOf", "read_answers", "read_cell_errors", "read_cpu_seconds", "read_notes", "same", "explain",
           "mark",
           "Mark", "MAX_LINE"]

MAX_LINE = 16 << 20  #: longest answer line read (bytes)
MAX_CELL_ERRORS = 50  #: most cell-error reports kept from one run


class Error(str):
    """An ask that raised in the submission (the text says what)."""


class AnyOf(list):
    """The reference answers of an ask that accepts several (a question's open conventions); the
    first is the main one, shown first in feedback."""


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


def read_cell_errors(data: bytes) -> list[dict]:
    """The cells that raised, from the answer stream's ``{"cell_error": ...}`` records (untrusted:
    only well-formed ones, strings shortened and escaped): ``[{"cell": n, "error": "Type: message", "where":
    "cell 7, line 2: `code`" or ""}]``, in the order they ran."""
    found = []
    for line in data.split(b"\n"):
        if not line.startswith(b'{"cell_error"') or len(line) > MAX_LINE or len(found) >= MAX_CELL_ERRORS:
            continue
        try:
            item = json.loads(line)["cell_error"]
            cell, error, where = item["cell"], item["error"], item["where"]
        except (ValueError, KeyError, TypeError, RecursionError):
            continue
        if type(cell) is int and isinstance(error, str) and isinstance(where, str):
            found.append({"cell": cell, "error": printable(error[:300]), "where": printable(where[:300])})
    return found


def read_cpu_seconds(data: bytes) -> float | None:
    """The CPU seconds the run reported for itself (its last ``{"cpu_seconds": t}`` record; untrusted), or None."""
    for line in reversed(data.split(b"\n")):
        if line.startswith(b'{"cpu_seconds"') and len(line) < 100:
            try:
                value = json.loads(line)["cpu_seconds"]
            except (ValueError, KeyError, TypeError):
                return None
            return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value >= 0 else None
    return None


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


def _numbers(x) -> np.ndarray | None:
    """``x`` as a numpy array when it is numeric data (a number, a boolean, a numeric array, or a
    non-empty list of them of one shape, as a tuple answer or a tensor's ``tolist()``), else None
    (also for an integer beyond the range of floats)."""
    if isinstance(x, np.ndarray):
        arr = x
    elif isinstance(x, (bool, int, float, complex)) or (isinstance(x, list) and x):
        try:
            arr = np.asarray(x)
        except (ValueError, TypeError, OverflowError):  # ragged, or not numbers
            return None
    else:
        return None
    return arr if arr.dtype.kind in "biufc" else None


def _within(g: np.ndarray, w: np.ndarray, rtol, atol) -> np.ndarray:
    """Entrywise: ``|g - w| <= atol + rtol * |w|`` for finite entries, equality for infinite ones, never NaN;
    computed without overflow: both sides are divided by their largest finite component first (the
    difference of two values near the largest float, or the modulus of a complex one, would
    overflow to inf and make anything "close")."""
    g, w = (a.astype(np.result_type(a, np.float64)) for a in (g, w))
    finite = np.isfinite(g) & np.isfinite(w)
    with np.errstate(all="ignore"):
        parts = [p[finite] for a in (g, w) for p in (a.real, a.imag)]
        scale = max(float(np.max(np.abs(p))) if p.size else 0.0 for p in parts) or 1.0
        close = np.abs(g / scale - w / scale) <= atol / scale + rtol * np.abs(w / scale)
    return np.where(finite, close, (g == w) & ~np.isnan(g))


def _same_numbers(g: np.ndarray, w: np.ndarray, rtol, atol) -> bool:
    if (g.dtype.kind == "b") != (w.dtype.kind == "b"):
        return False
    g, w = np.squeeze(g), np.squeeze(w)
    if g.shape != w.shape:
        return False
    if w.dtype.kind == "b":
        return bool(np.array_equal(g, w))
    return bool(np.all(_within(g, w, rtol, atol)))


def same(got, want, rtol=1e-9, atol=0.0) -> bool:
    """Whether the answer ``got`` matches the reference ``want`` (module doc: numbers by value within
    ``atol + rtol * |want|`` whatever their type, width and shape up to squeezing; booleans as
    booleans, strings exactly; ``inf`` exactly; NaN never matches)."""
    if isinstance(got, (Error, Other)):
        return False
    if isinstance(want, AnyOf):
        return any(same(got, w, rtol, atol) for w in want)
    w = _numbers(want)
    if w is not None:
        g = _numbers(got)
        return g is not None and _same_numbers(g, w, rtol, atol)
    if isinstance(want, int) and not isinstance(want, bool):  # beyond the range of floats: only the same integer
        return type(got) is int and got == want
    if want is None or isinstance(want, str):
        return type(got) is type(want) and got == want
    if isinstance(want, list):
        return (isinstance(got, list) and len(got) == len(want)
                and all(same(g, w, rtol, atol) for g, w in zip(got, want)))
    if isinstance(want, dict):
        return isinstance(got,
                          dict) and got.keys() == want.keys() and all(same(got[k], want[k], rtol, atol) for k in want)
    return False


# ---- messages -------------------------------------------------------------------------------------

def _digits(a, b) -> int:
    """The fewest significant digits (at least 5, at most 17) at which ``a`` and ``b`` print differently."""
    for p in range(5, 18):
        if _fmt(a, p) != _fmt(b, p):
            return p
    return 17


def _fmt(x, p: int) -> str:
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (complex, np.complexfloating)):
        return f"{x.real:.{p}g}{x.imag:+.{p}g}j" if x.imag else f"{x.real:.{p}g}"
    return f"{float(x):.{p}g}"


def _pair(got, want, rtol, atol) -> str:
    """``got A; expected B`` for two numbers, printed with the digits that tell them apart."""
    if isinstance(got, (bool, np.bool_)) or isinstance(want, (bool, np.bool_)):
        return f"got {_fmt(got, 5)}; expected {_fmt(want, 5)}"
    p = _digits(got, want)
    text = f"got {_fmt(got, p)}; expected {_fmt(want, p)}"
    if all(math.isfinite(abs(x)) for x in (got, want)):
        text += f" (difference {abs(got - want):.2g}; allowed {atol + rtol * abs(want):.2g})"
    return text


def _shape(a: np.ndarray) -> str:
    return "a number" if a.size == 1 else f"an array of shape {a.shape}"


def _brief(x) -> str:
    """A reference answer in a few words: a number with 8 digits, else :func:`.answers.describe`."""
    a = _numbers(x)
    return _fmt(a.item(), 8) if a is not None and a.size == 1 else describe(x)


def _explain_numbers(g: np.ndarray, w: np.ndarray, rtol, atol) -> str:
    if (g.dtype.kind == "b") != (w.dtype.kind == "b"):
        def kinds(a):
            return "booleans" if a.dtype.kind == "b" else "numbers"

        return f"got {kinds(g)} ({_shape(g)}); expected {kinds(w)} ({_shape(w)})"
    gs, ws = np.squeeze(g), np.squeeze(w)
    if gs.shape != ws.shape:
        return f"got {_shape(g)}; expected {_shape(w)}"
    if ws.ndim == 0:
        return _pair(gs.item(), ws.item(), rtol, atol)
    bad = ~(gs == ws) if ws.dtype.kind == "b" else ~_within(gs, ws, rtol, atol)
    if ws.dtype.kind == "b":
        worst = np.unravel_index(np.argmax(bad), bad.shape)
    else:
        gap = np.abs(gs.astype(np.complex128) - ws) - (atol + rtol * np.abs(ws))
        gap = np.where(np.isfinite(gap), gap, np.inf)
        worst = np.unravel_index(np.argmax(np.where(bad, gap, -np.inf)), bad.shape)
    index = "[" + ", ".join(map(str, worst)) + "]"
    return (f"got an array of shape {w.shape} that differs in {int(bad.sum())} of {bad.size} entries; at {index}: "
            + _pair(gs[worst].item(), ws[worst].item(), rtol, atol))


def explain(got, want, rtol=1e-9, atol=0.0) -> str:
    """One line saying how ``got`` differs from ``want`` (call it when :func:`same` is False)."""
    if isinstance(want, AnyOf):
        also = ", ".join(_brief(w) for w in want[1:])
        return explain(got, want[0], rtol, atol) + (f"; also accepted: {also}" if also else "")
    if isinstance(got, Other):
        return f"got a value of type {got}; expected {_brief(want)}"
    w, g = _numbers(want), _numbers(got)
    if w is not None and g is not None:
        return _explain_numbers(g, w, rtol, atol)
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return f"got {len(got)} items; expected {len(want)}"
        i = next(i for i, (a, b) in enumerate(zip(got, want)) if not same(a, b, rtol, atol))
        return f"item {i}: {explain(got[i], want[i], rtol, atol)}"
    if isinstance(want, dict) and isinstance(got, dict):
        missing, extra = sorted(want.keys() - got.keys()), sorted(got.keys() - want.keys())
        if missing or extra:
            return "; ".join(([f"missing the keys {missing}"] if missing else [])
                             + ([f"unexpected keys {extra}"] if extra else []))
        key = next(k for k in want if not same(got[k], want[k], rtol, atol))
        return f"[{key!r}]: {explain(got[key], want[key], rtol, atol)}"
    return f"got {describe(got)}; expected {_brief(want)}"


def _explain_expr(ask: dict, got, want) -> str:
    """How a sympy answer differs: its free symbols, else its value at the first point that differs."""
    if not (isinstance(got, dict) and set(got) == {"free_symbols", "values"} and isinstance(got["values"], list)):
        return f"{ask['name']} is {describe(got)}; expected a sympy expression"
    if got["free_symbols"] != want["free_symbols"]:
        return f"{ask['name']} uses the symbols {got['free_symbols']}; expected {want['free_symbols']}"
    if len(got["values"]) != len(want["values"]):
        return f"{ask['name']} has {len(got['values'])} values; expected {len(want['values'])}"
    for point, g, w in zip(ask["points"], got["values"], want["values"]):
        if not same(g, w, ask["rtol"], ask["atol"]):
            return f"at {ask['symbol']} = {point:.6g}: {explain(g, w, ask['rtol'], ask['atol'])}"
    return explain(got, want, ask["rtol"], ask["atol"])


@dataclasses.dataclass
class Mark:
    """One question's result: ``name``, ``score``, ``max_score`` and ``feedback`` (one line per failed ask)."""

    name: str
    score: float
    max_score: float
    feedback: list[str]


def mark(question: str, points: float, asks: list, got: list | None, want: list, why_missing=None) -> Mark:
    """Mark one question: full ``points`` if every answer in ``got`` matches ``want``, else 0.

    ``why_missing(name)``: optional, the reason a name the submission never defined is missing
    (e.g. the cell that assigns it raised), added to the feedback of a ``NameError``.

    An answer that cannot even be compared (any exception while judging it) is a mismatch with a
    note: judging one submission never stops the grading of the others.
    """
    if got is None:
        return Mark(question, 0.0, points, ["no answer: the notebook stopped (or hid the answer) before this question"])
    feedback = []
    for ask, g, w in zip(asks, got, want):
        try:
            line = _judge(ask, g, w, why_missing)
        except Exception as e:  # noqa: BLE001 - an answer built to break the comparison
            line = f"{ask['label']}: could not be compared with the expected answer ({type(e).__name__})"
        if line is not None:
            feedback.append(line)
    return Mark(question, 0.0 if feedback else float(points), float(points), feedback)


def _judge(ask, g, w, why_missing) -> str | None:
    """None when the answer ``g`` matches ``w``, else the feedback line."""
    if same(g, w, ask["rtol"], ask["atol"]):
        return None
    if isinstance(g, Error) and "forbids" in g:
        return f"{ask['label']}: calls a helper this question forbids ({', '.join(ask['forbid'])})"
    if isinstance(g, Error):
        reason = why_missing(ask["name"]) if why_missing and g.startswith("NameError") else None
        return f"{ask['label']}: raised {g}" + (f"; {reason}" if reason else "")
    if ask["kind"] == "expr":
        return f"{ask['label']}: {_explain_expr(ask, g, w[0] if isinstance(w, AnyOf) else w)}"
    return f"{ask['label']}: {explain(g, w, ask['rtol'], ask['atol'])}"
