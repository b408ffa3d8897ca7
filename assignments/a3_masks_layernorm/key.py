"""Answer key of assignment 3 for rcteach's trusted grader (never visible to a submission).

``asks(rng, ask)`` lists, per question, what the grader asks a graded notebook; ``rng`` is a
``random.Random`` seeded afresh for every submission, so the inputs below are unknown to students.
The expected answers are the solutions notebook's answers to the same asks.  ``WRONG`` lists, per
question, obvious wrong answers that the public tests and these asks must both reject
(``python -m rcteach assign --check``).
"""

import rcteach


def asks(rng, ask):
    def sliding(kind):
        T = rng.randrange(5, 20)
        return rcteach.make_mask(kind, T, window=rng.randrange(1, T))

    masks = [sliding("sliding"), sliding("sliding"), sliding("sliding-causal"), rcteach.make_mask("causal", rng.randrange(3, 12))]
    return {
        "q1a": [ask.value("properties")],
        "q1b": [ask.call("my_diameter", m, forbid=["rcteach.diameter"]) for m in masks],
        "q2": [ask.call("uniform_rate", m, forbid=["rcteach.consensus_rate"], atol=1e-6) for m in masks]
              + [ask.value("measured_rate")],
        "q3": [ask.value("residual", atol=1e-12), ask.value("rank"), ask.value("rho"), ask.value("final_distance", atol=1e-9)],
    }


WRONG = {
    "q1a": ["properties['complete'] = (True, False)", "properties = {'complete': (True, True), 'causal': (False, True)}"],
    "q1b": ["def my_diameter(mask):\n    return mask.shape[-1] - 1"],
    "q2": ["def uniform_rate(mask):\n    M = mask.to(torch.float64)\n"
           "    return float(torch.linalg.eigvals(M / M.sum(-1, keepdim=True)).abs().max())"],
    "q3": ["residual = float(torch.linalg.matrix_norm(X_star))"],
}
