"""Answer key of assignment 2 for rcteach's trusted grader (never visible to a submission).

``asks(rng, ask)`` lists, per question, what the grader asks a graded notebook; ``rng`` is a
``random.Random`` seeded afresh for every submission, so the inputs below are unknown to students.
The expected answers are the solutions notebook's answers to the same asks.  ``WRONG`` lists, per
question, obvious wrong answers that the public tests and these asks must both reject
(``python -m rcteach assign --check``).
"""

import torch


def asks(rng, ask):
    seed = lambda: rng.randrange(1 << 30)
    X = torch.randn(rng.randrange(2, 4), rng.randrange(3, 9), rng.randrange(3, 9), dtype=torch.float64,
                    generator=torch.Generator().manual_seed(seed()))
    v = torch.rand(rng.randrange(3, 8), dtype=torch.float64, generator=torch.Generator().manual_seed(seed())) + 0.5
    ranks = [(name, M) for name in ("frobenius_stable_rank", "gram_stable_rank") for M in (X, torch.outer(v, v))]
    return {
        "q1": [ask.call(name, M, forbid=["rcteach.stable_rank"]) for name, M in ranks],
        "q2": [ask.value("width_sr"), ask.value("input_sr")],
        "q3": [ask.call("mu_ratio_law", rng.randrange(8, 200), rng.uniform(0.1, 2.0), rng.randrange(0, 4),
                        forbid=["rcteach.theory.depth_mu_ratio"]),
               ask.call("measured_mu_ratio", rng.randrange(8, 40), rng.uniform(0.1, 2.0), rng.randrange(1, 4),
                        rng.randrange(4, 16), seed())],
        "q4": [ask.call("norm_preserving_var", rng.randrange(2, 500)), ask.value("growth_per_layer")],
    }


WRONG = {
    "q1": ["def frobenius_stable_rank(X):\n    s = torch.linalg.svdvals(X)\n    return s.sum(-1) / s[..., 0]",
           "def gram_stable_rank(X):\n    s = torch.linalg.svdvals(X)\n    return (s**2).sum(-1) / s[..., 0] ** 2"],
    "q2": ["width_sr, input_sr = input_sr, width_sr"],
    "q3": ["def mu_ratio_law(T, s2, L):\n    return (math.expm1(s2) / T) ** (L + 1)"],
    "q4": ["def norm_preserving_var(d):\n    return 1.0 / d**2"],
}
