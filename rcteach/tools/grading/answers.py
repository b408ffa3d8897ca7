"""The questions a grader asks a notebook, and the plain data that carries them and their answers.

An *ask* is a JSON-able dict, made by the assignment's answer key (``asks(rng, ask)`` in
``assignments/<name>/key.py``, with :data:`ASK` as ``ask``):

* ``ASK.value("measured_radius")``: the value of a variable;
* ``ASK.call("my_centre", A, forbid=["rcteach.centre"])``: the student's function called on inputs the
  grader chose (tensors, numbers, lists), with the helpers in ``forbid`` unavailable during the call;
* ``ASK.expr("c_expr", "s2", [0.3, 1.7])``: a sympy expression's free symbols and its values at
  the given points of its symbol.

Each takes ``rtol`` / ``atol`` (the comparison's tolerances), ``label`` (how feedback names it) and
``accept``: names of other variables (or functions) of the solutions notebook whose answers to the
same ask are accepted too, for a question that leaves a convention open (e.g. which median of an
even count: ``ask.value("m", accept=["m_midpoint"])``; the solutions define ``m_midpoint`` on a line
ending ``# SOLUTION NO PROMPT``, which the student notebook does not show).
:func:`evaluate` answers an ask in a namespace: in the sandbox for the submission, in the grader's
process for the solutions.  Answers and inputs cross the sandbox's boundary encoded by
:func:`encode` (JSON, arrays as ``.npy`` bytes in base64) and are read back by :func:`decode`,
which accepts only numbers, strings, lists, string-keyed dicts and numeric arrays
(``allow_pickle=False``) within size limits, and never runs code.
"""

from __future__ import annotations

import base64
import io
import math
import re
import types

import numpy as np

__all__ = ["ASK", "encode", "decode", "evaluate", "describe", "printable", "DecodeError", "MAX_ARRAY", "MAX_DEPTH"]

MAX_ARRAY = 1 << 22  #: most elements in one decoded array
MAX_DEPTH = 16  #: deepest nesting of lists and dicts decoded
MAX_STR = 1000  #: longest string kept when encoding


#: Characters of untrusted text that a terminal or an editor would act on: C0 and C1 controls but
#: newline and tab, DEL, and Unicode's bidirectional overrides and isolates.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """Untrusted ``text`` safe to print on a terminal or store: every control character (but
    newline and tab) and bidirectional override written as its escape (``\\x1b``, ``\\u202e``)."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class DecodeError(ValueError):
    """Data that is not in the plain-data format (or is over its size limits)."""


def _ask(kind, name, accept=(), **fields):
    for n in (name, *accept):
        if not isinstance(n, str) or not n.isidentifier():
            raise ValueError(f"name and accept must be Python identifiers, got {n!r}")
    return {"kind": kind, "name": name, **fields, **({"accept": list(accept)} if accept else {})}


ASK = types.SimpleNamespace(
    value=lambda name, *, rtol=1e-9, atol=0.0, label=None, accept=(): _ask(
        "value", name, accept, rtol=rtol, atol=atol, label=label or name),
    call=lambda name, *args, forbid=(), rtol=1e-9, atol=0.0, label=None, accept=(): _ask(
        "call", name, accept, args=[encode(a) for a in args], forbid=list(forbid), rtol=rtol, atol=atol,
        label=label or f"{name}({', '.join(_short(a) for a in args)})"),
    expr=lambda name, symbol, points, *, rtol=1e-9, atol=0.0, label=None, accept=(): _ask(
        "expr", name, accept, symbol=symbol, points=[float(p) for p in points], rtol=rtol, atol=atol,
        label=label or f"{name} at {symbol} = {', '.join(f'{p:.3g}' for p in points)}"),
)


def _short(obj) -> str:
    shape = getattr(obj, "shape", None)
    if shape is not None:
        return f"a {type(obj).__name__} of shape {tuple(shape)}"
    return f"{obj:.4g}" if isinstance(obj, float) else repr(obj)


def encode(obj, depth=0):
    """``obj`` as JSON-able plain data: numbers, strings, lists, dicts; tensors/arrays as ``.npy``."""
    if depth > MAX_DEPTH:
        return {"$": "other", "v": "nested too deeply"}
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj if not isinstance(obj, str) else obj[:MAX_STR]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"$": "float", "v": repr(obj)}
    if isinstance(obj, complex):
        return {"$": "complex", "v": [encode(obj.real), encode(obj.imag)]}
    if isinstance(obj, (list, tuple)):
        return [encode(x, depth + 1) for x in obj]
    if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        return {"$": "dict", "v": {k: encode(v, depth + 1) for k, v in obj.items()}}
    kind = "tensor" if type(obj).__module__ == "torch" and hasattr(obj, "detach") else "ndarray"
    if kind == "tensor":
        obj = obj.detach().cpu().resolve_conj().numpy()
    if isinstance(obj, np.generic):
        return encode(obj.item(), depth)
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "biufc":
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(obj), allow_pickle=False)
        return {"$": kind, "v": base64.b64encode(buf.getvalue()).decode("ascii")}
    return {"$": "other", "v": type(obj).__name__}


def decode(data, *, tensors=False, depth=0):
    """Inverse of :func:`encode` for untrusted input: raises :class:`DecodeError` on anything else.

    Arrays come back as numpy arrays (``tensors=True``: ``"tensor"`` ones as torch tensors); a value
    that was not plain data comes back as :class:`Other` (its type name).
    """
    if depth > MAX_DEPTH:
        raise DecodeError("nested too deeply")
    if isinstance(data, str):
        return printable(data)
    if data is None or isinstance(data, (bool, int, float)):
        return data
    if isinstance(data, list):
        return [decode(x, tensors=tensors, depth=depth + 1) for x in data]
    if not (isinstance(data, dict) and set(data) == {"$", "v"}):
        raise DecodeError(f"not plain data: {type(data).__name__}")
    tag, v = data["$"], data["v"]
    if tag == "float" and v in ("inf", "-inf", "nan"):
        return float(v)
    if tag == "complex" and isinstance(v, list) and len(v) == 2:
        re, im = (decode(x, depth=depth + 1) for x in v)
        if isinstance(re, float) and isinstance(im, float):
            return complex(re, im)
    if tag == "dict" and isinstance(v, dict):
        return {str(k): decode(x, tensors=tensors, depth=depth + 1) for k, x in v.items()}
    if tag in ("tensor", "ndarray") and isinstance(v, str):
        return _array(v, torch=tensors and tag == "tensor")
    if tag == "other" and isinstance(v, str):
        return Other(printable(v[:200]))
    raise DecodeError(f"unknown plain-data tag {tag!r}")


class Other(str):
    """An answer that was not plain data: holds its type name."""


def _array(b64: str, torch: bool):
    try:
        arr = np.load(io.BytesIO(base64.b64decode(b64, validate=True)), allow_pickle=False)
    except Exception as e:  # a malformed .npy: numpy's own errors vary
        raise DecodeError(f"not a .npy array: {type(e).__name__}") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biufc" or arr.size > MAX_ARRAY:
        raise DecodeError("not a numeric array within the size limit")
    if torch:
        import torch as _torch

        return _torch.from_numpy(arr.copy())
    return arr


def evaluate(namespace: dict, ask: dict):
    """The answer to ``ask`` in ``namespace`` (a notebook's globals), as plain data (:func:`encode`).

    A missing name raises ``NameError``; whatever the student's code raises propagates to the caller.
    """
    kind, name = ask["kind"], ask["name"]
    if name not in namespace:
        raise NameError(f"{name} is not defined")
    obj = namespace[name]
    if kind == "value":
        return encode(obj)
    if kind == "call":
        return encode(obj(*[decode(a, tensors=True) for a in ask["args"]]))
    if kind == "expr":
        import sympy as sp

        if not isinstance(obj, sp.Expr):
            return {"$": "other", "v": type(obj).__name__}
        symbols = sorted(str(s) for s in obj.free_symbols)
        if set(symbols) - {ask["symbol"]}:  # other symbols: no values (the symbols say what is wrong)
            return encode({"free_symbols": symbols, "values": []})
        symbol = next((s for s in obj.free_symbols if str(s) == ask["symbol"]), sp.Symbol(ask["symbol"]))
        return encode({"free_symbols": symbols,
                       "values": [complex(obj.subs(symbol, p).evalf()) for p in ask["points"]]})
    raise ValueError(f"unknown ask kind {kind!r}")


def describe(answer) -> str:
    """A short description of a decoded answer for feedback: ``0.0884``, ``array of shape (8,)``."""
    if isinstance(answer, Other):
        return f"a value of type {answer}"
    if isinstance(answer, np.ndarray):
        return f"an array of shape {answer.shape}"
    if isinstance(answer, float):
        return f"{answer:.4g}"
    text = repr(answer)
    return text if len(text) < 80 else text[:77] + "..."
