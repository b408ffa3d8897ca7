"""Fairness and feedback of the trusted grader's verdict (rcteach.tools.grading.verdict), without a sandbox.

What a question accepts as the same answer (numbers whatever their type, width and shape up to
squeezing; the conventions an ask accepts), what it still rejects, and the one-line explanations a
student gets, with the digits that show the difference.  Answers pass through the same plain-data
round trip (encode in the sandbox, decode here) as in grading.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rcteach.tools.grading import answers, verdict
from rcteach.tools.grading.answers import ASK


def _received(data):
    """Plain data (an answer as :func:`answers.evaluate` gives it) as the grader reads it."""
    return answers.decode(json.loads(json.dumps(data)))


def _sent(x):
    """``x`` as the grader receives it from a sandboxed notebook."""
    return _received(answers.encode(x))


F64 = torch.float64

FAIR = {  # answer a student could write -> the reference it must match
    "0-d tensor for a float (a3 q2)": (torch.tensor(0.25, dtype=F64), 0.25),
    "numpy scalar for a 0-d tensor (a2 q1)": (np.float64(1.5), torch.tensor(1.5, dtype=F64)),
    "Python float for a 0-d tensor": (1.5, torch.tensor(1.5, dtype=F64)),
    "one-element tensor for a float": (torch.tensor([0.25], dtype=F64), 0.25),
    "(1, 8) for (8,)": (torch.ones(1, 8, dtype=F64), torch.ones(8, dtype=F64)),
    "float32 within the tolerance": (torch.tensor([0.5, 0.25]), torch.tensor([0.5, 0.25], dtype=F64)),
    "int for a float": (3, 3.0),
    "float for an int (a rank)": (2.0, 2),
    "0-d int tensor for an int": (torch.tensor(4), 4),
    "inf as a tensor (a diameter)": (torch.tensor(float("inf")), float("inf")),
    "numpy bool for a bool": (np.bool_(True), True),
    "0-d bool tensor for a bool": (torch.tensor(True), True),
    "tensor for a pair of booleans": (torch.tensor([False, True]), (False, True)),
    "list for a 1-D tensor": ([1.0, 2.0], torch.tensor([1.0, 2.0], dtype=F64)),
    "complex with zero imaginary part for a real": (torch.tensor([1.0 + 0j, 2.0]), torch.tensor([1.0, 2.0], dtype=F64)),
    "numpy array for a tensor": (np.arange(6.0).reshape(2, 3), torch.arange(6.0, dtype=F64).reshape(2, 3)),
}

UNFAIR = {  # still wrong
    "True for 1": (True, 1),
    "1 for True": (1, True),
    "another shape": (torch.zeros(3, dtype=F64), torch.zeros(4, dtype=F64)),
    "booleans for numbers": (torch.zeros(3, dtype=torch.bool), torch.zeros(3, dtype=F64)),
    "NaN": (float("nan"), float("nan")),
    "-inf for inf": (float("-inf"), float("inf")),
    "float32 off by 1e-7 at rtol 1e-9": (torch.tensor(0.1), 0.1),
    "complex for a real": (torch.tensor([1.0 + 1e-3j]), torch.tensor([1.0], dtype=F64)),
    "a string for a number": ("0.25", 0.25),
    "None": (None, 0.25),
    "a list of other length": ([1.0], [1.0, 2.0]),
    "a dict with other keys": ({"a": 1.0}, {"b": 1.0}),
}


@pytest.mark.parametrize("got, want", FAIR.values(), ids=FAIR)
def test_equivalent_answers_earn_the_points(got, want):
    got, want = _sent(got), _sent(want)
    assert verdict.same(got, want, rtol=1e-6)
    assert verdict.mark("q", 3, [ASK.value("x", rtol=1e-6)], [got], [want]).score == 3


@pytest.mark.parametrize("got, want", UNFAIR.values(), ids=UNFAIR)
def test_wrong_answers_still_lose_them(got, want):
    got, want = _sent(got), _sent(want)
    assert not verdict.same(got, want)
    m = verdict.mark("q", 3, [ASK.value("x")], [got], [want])
    assert m.score == 0 and len(m.feedback) == 1 and m.feedback[0].startswith("x: ")


def test_an_ask_accepts_each_reference_of_its_conventions():
    lower, midpoint, upper = 0.12703399003154645, 0.12704127087694136, 0.12704855172233628  # the medians of a1 q1c
    want = verdict.AnyOf([lower, midpoint, upper])
    assert all(verdict.same(v, want) for v in (lower, midpoint, upper, np.float64(midpoint)))
    assert not verdict.same(0.127, want)
    line = verdict.explain(0.127, want)
    assert line.startswith("got 0.127; expected 0.12703 (difference 3.4e-05")
    assert line.endswith("also accepted: 0.12704127, 0.12704855")
    namespace = {"m": lower, "m_mid": midpoint}
    from rcteach.tools.grading import reference

    assert reference(namespace, ASK.value("m", accept=["m_mid"])) == [lower, midpoint]
    with pytest.raises(ValueError, match="identifiers"):
        ASK.value("m", accept=["not a name"])


def test_scalar_feedback_prints_the_digits_that_differ():
    """Issue 25: "got 0.127; expected 0.127" for values 5.7e-5 apart (relative) at a tolerance of 1e-9."""
    line = verdict.explain(0.12704127087694136, 0.12703399003154645, rtol=1e-9)
    assert line == "got 0.12704; expected 0.12703 (difference 7.3e-06; allowed 1.3e-10)"
    line = verdict.explain(1.0000001, 1.0, rtol=1e-9)
    assert line.startswith("got 1.0000001; expected 1 (")
    assert verdict.explain(True, False) == "got True; expected False"


def test_array_feedback_names_the_worst_entry_and_how_many_differ():
    """Issue 28: "got an array of shape (7, 7); expected an array of shape (7, 7)" answered nothing."""
    want = np.eye(7)
    got = want.copy()
    got[2, 3], got[5, 5] = 0.3, 1.01
    assert verdict.explain(got, want, rtol=0, atol=1e-10) == (
        "got an array of shape (7, 7) that differs in 2 of 49 entries; at [2, 3]: got 0.3; expected 0 "
        "(difference 0.3; allowed 1e-10)")
    assert verdict.explain(np.zeros(7), want) == "got an array of shape (7,); expected an array of shape (7, 7)"
    assert verdict.explain(np.zeros(3, dtype=bool), np.zeros(3)).startswith("got booleans")
    nan = want.copy()
    nan[1, 1] = np.nan
    assert "at [1, 1]: got nan; expected 1" in verdict.explain(nan, want)
    assert verdict.explain([1.0, 2.0, 3.5],
                           [1.0, 2.0, 3.0]).startswith("got an array of shape (3,) that differs in 1 of 3")
    assert verdict.explain({"causal": [True, True]}, {"causal": [False, True]}).startswith("['causal']: ")
    assert verdict.explain({"a": 1}, {"b": 1}) == "missing the keys ['b']; unexpected keys ['a']"
    assert verdict.explain(answers.Other("NoneType"), 0.125) == "got a value of type NoneType; expected 0.125"


def test_sympy_feedback_names_the_symbols_or_the_point():
    """Issue 28: sympy answers showed a truncated dict repr."""
    import sympy as sp

    s2 = sp.symbols("s2", positive=True)
    ask = ASK.expr("c_expr", "s2", [0.3, 1.7])
    want = _received(answers.evaluate({"c_expr": sp.exp(s2) - 1}, ask))
    for expr, line in ((sp.exp(s2), "at s2 = 0.3: got 1.3499; expected 0.34986 (difference 1;"),
                       (s2 + sp.Symbol("x"), "c_expr uses the symbols ['s2', 'x']; expected ['s2']")):
        got = _received(answers.evaluate({"c_expr": expr}, ask))
        m = verdict.mark("q1a", 2, [ask], [got], [want])
        assert m.score == 0 and m.feedback[0].startswith(f"{ask['label']}: {line}"), m.feedback
    got = _received(answers.evaluate({"c_expr": ...}, ask))
    assert verdict.mark("q1a", 2, [ask], [got], [want]).feedback == [
        f"{ask['label']}: c_expr is a value of type ellipsis; expected a sympy expression"]


def test_a_missing_name_says_which_cell_raised():
    m = verdict.mark("q", 2, [ASK.value("x")], [verdict.Error("NameError: name 'x' is not defined")], [1.0],
                     why_missing=lambda name: f"cell 4 raised AttributeError (wanted {name})")
    assert m.feedback == ["x: raised NameError: name 'x' is not defined; cell 4 raised AttributeError (wanted x)"]


def test_run_reports_are_read_defensively():
    stream = b"\n".join([
        b'{"cell_error": {"cell": 4, "error": "AttributeError: no", "where": "cell 2, line 1: `x.y`"}}',
        b'{"cell_error": {"cell": "4", "error": "x", "where": ""}}', b'{"cell_error": {"cell": 5}}',
        b'{"cell_error": {"cell": 6, "error": "' + b"e" * 500 + b'", "where": ""}}', b"not json",
        b'{"cpu_seconds": 1.5}', b'{"cpu_seconds": -1}'])
    errors = verdict.read_cell_errors(stream)
    assert [e["cell"] for e in errors] == [4, 6] and len(errors[1]["error"]) == 300
    assert errors[0] == {"cell": 4, "error": "AttributeError: no", "where": "cell 2, line 1: `x.y`"}
    assert verdict.read_cpu_seconds(stream) is None and verdict.read_cpu_seconds(b'{"cpu_seconds": 2.5}') == 2.5
    assert verdict.read_answers(stream, {"q": [ASK.value("x")]}) == {}


def test_public_test_feedback_is_the_first_failure():
    """Issue 28: a blank q1a showed the last failure, a NameError of a variable inside the test."""
    pytest.importorskip("otter", reason="otter-grader not installed: pip install -e .[assign]")
    from rcteach.tools.grading.feedback import failure_message

    report = ("Failed example:\n    assert isinstance(c_expr, sp.Expr), 'c'\nException raised:\n    Traceback (most "
              "recent call last):\n      File \"<doctest q1a 0[0]>\", line 1, in <module>\n    AssertionError: c_expr "
              "has type ellipsis; expected a sympy expression\nFailed example:\n    c_ln2_ = float(c_expr.subs(s2, "
              "LN2))\nException raised:\n    AttributeError: 'ellipsis' object has no attribute 'subs'\n    NameError: "
              "name 'c_ln2_' is not defined\n")
    assert failure_message(report) == "c_expr has type ellipsis; expected a sympy expression"
    report = "Traceback:\n  NameError: name 'x' is not defined\n  ValueError: later"
    assert failure_message(report) == "NameError: name 'x' is not defined"
