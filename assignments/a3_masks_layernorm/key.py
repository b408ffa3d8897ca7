"""Answer key of assignment 3 for rcteach's trusted grader (never visible to a submission).

``asks(rng, ask)`` lists, per question, what the grader asks a graded notebook; ``rng`` is a
``random.Random`` seeded afresh for every submission, so the inputs below are unknown to students.
The expected answers are the solutions notebook's answers to the same asks.
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
