"""Graph facts of the standard masks (Wu et al.): connectivity, centre nodes, diameter."""

from __future__ import annotations

import math

from ..masks import centre_nodes, diameter, is_quasi_strongly_connected, is_strongly_connected, make_mask
from .registry import Comparison, register

GRAPH_FACT = "exact: a graph property, compared for equality"


@register(
    "mask-connectivity",
    claim=("complete and sliding masks are strongly connected; causal and sliding-causal are quasi-strongly "
           "but not strongly connected"),
    source="paper",
    tolerance_note=GRAPH_FACT,
    mutants={"causal strongly connected": lambda p, s: (p[0], (True, True), *p[2:]),
             "sliding-causal not even quasi-strongly connected": lambda p, s: (*p[:3], (False, False))},
    quick=dict(T=32, window=3),
    full=dict(T=256, window=8),
)
def mask_connectivity(*, T, window) -> Comparison:
    kinds = ("complete", "causal", "sliding", "sliding-causal")
    measured = tuple(
        (is_strongly_connected(m), is_quasi_strongly_connected(m))
        for m in (make_mask(k, T, window=window) for k in kinds)
    )
    prediction = ((True, True), (False, True), (True, True), (False, True))
    return Comparison(prediction=prediction, measured=measured)


@register(
    "causal-centre",
    claim="the only centre node of a causal or sliding-causal mask is the first token",
    source="derived",
    tolerance_note=GRAPH_FACT,
    mutants={"the last token is the centre": lambda p, s: ((s["T"] - 1,), (s["T"] - 1,)),
             "every token is a centre of the causal mask": lambda p, s: (tuple(range(s["T"])), p[1])},
    quick=dict(T=32, window=3),
    full=dict(T=256, window=8),
)
def causal_centre(*, T, window) -> Comparison:
    measured = (tuple(centre_nodes(make_mask("causal", T))),
                tuple(centre_nodes(make_mask("sliding-causal", T, window=window))))
    return Comparison(prediction=((0,), (0,)), measured=measured)


@register(
    "sliding-diameter",
    claim="a bidirectional sliding window of width w on T tokens has diameter ceil((T - 1) / w); complete has 1",
    source="derived",
    tolerance_note=GRAPH_FACT,
    mutants={"floor((T - 1) / w)": lambda p, s: ((s["T"] - 1) // s["window"], 1),
             "diameter T - 1 (the window ignored)": lambda p, s: (s["T"] - 1, 1)},
    quick=dict(T=32, window=3),
    full=dict(T=256, window=8),
)
def sliding_diameter(*, T, window) -> Comparison:
    measured = (diameter(make_mask("sliding", T, window=window)), diameter(make_mask("complete", T)))
    return Comparison(prediction=(math.ceil((T - 1) / window), 1), measured=measured)
