"""Answer key of assignment 1 for rcteach's trusted grader (never visible to a submission).

``asks(rng, ask)`` lists, per question, what the grader asks a graded notebook; ``rng`` is a
``random.Random`` seeded afresh for every submission, so the inputs below are unknown to students.
The expected answers are the solutions notebook's answers to the same asks.
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
        "q1c": [ask.value("measured_radius"), ask.value("measured_gap_ratio")],
        "q2": [ask.value("swap_error", rtol=0.0, atol=1e-10),
               ask.call("swapped_spectrum", rcteach.random_attention(rng.randrange(6, 30), s2s[0], seed=seed()), atol=1e-10),
               ask.call("swapped_spectrum", general, atol=1e-10)],
        "q3": [ask.call("my_centre", rcteach.random_attention(rng.randrange(4, 20), batch=(3, 2), seed=seed()),
                        forbid=["rcteach.centre"], atol=1e-12),
               ask.call("my_centre", general, forbid=["rcteach.centre"], atol=1e-12)],
    }
