"""Answer key of assignment 1 for rcteach's trusted grader (never visible to a submission).

``asks(rng, ask)`` lists, per question, what the grader asks a graded notebook; ``rng`` is a
``random.Random`` seeded afresh for every submission, so the inputs below are unknown to students.
The expected answers are the solutions notebook's answers to the same asks.  ``WRONG`` lists, per
question, obvious wrong answers (code run after the solutions) that the question's public tests and
these asks must both reject: ``python -m rcteach assign --check`` tries them.
"""

import torch

import rcteach


def asks(rng, ask):
    seed = lambda: rng.randrange(1 << 30)
    s2s = [rng.uniform(0.05, 3.0) for _ in range(3)]
    general = torch.randn(7, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(seed()))
    return {
        "q1a": [ask.expr("c_expr", "s2", s2s)],
        "q1b": [ask.call("predicted_radius", rng.randrange(8, 600), s2,
                         forbid=["rcteach.theory.bulk_radius", "rcteach.theory.c"]) for s2 in s2s],
        "q1c": [ask.value("measured_radius", accept=["radius_midpoint", "radius_upper"]),  # the medians of 16 values
                ask.value("measured_gap_ratio", accept=["ratio_midpoint", "ratio_upper"])],
        "q2": [ask.value("swap_error", rtol=0.0, atol=1e-10),
               ask.call("swapped_spectrum", rcteach.random_attention(rng.randrange(6, 30), s2s[0], seed=seed()), atol=1e-10),
               ask.call("swapped_spectrum", general, atol=1e-10)],
        "q3": [ask.call("my_centre", rcteach.random_attention(rng.randrange(4, 20), batch=(3, 2), seed=seed()),
                        forbid=["rcteach.centre"], atol=1e-12),
               ask.call("my_centre", general, forbid=["rcteach.centre"], atol=1e-12)],
    }


WRONG = {
    "q1a": ["c_expr = sp.exp(s2)", "c_expr = s2"],
    "q1b": ["def predicted_radius(T, s2_value):\n    return math.sqrt(T * math.expm1(s2_value))"],
    "q1c": ["measured_gap_ratio = 1 / gap.ratio.median().item()"],
    "q2": ["def swapped_spectrum(A):\n    return rcteach.spectrum(A)",
           "def swapped_spectrum(A):\n    ev = rcteach.spectrum(A).clone()\n    ev[-1] = 0\n    return ev"],
    "q3": ["def my_centre(A):\n    return A - A.mean()", "def my_centre(A):\n    return A - 1 / A.shape[-1]",
           "def my_centre(A):\n    return A - A.mean(dim=-2, keepdim=True)"],
}
