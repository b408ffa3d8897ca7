"""Unit tests for rcteach.masks: mask kinds, validation and the graph facts of Wu et al."""

import math
from collections import deque

import networkx as nx
import pytest
import torch

from rcteach import (
    MASK_KINDS,
    centre_eccentricity,
    centre_nodes,
    diameter,
    is_quasi_strongly_connected,
    is_strongly_connected,
    make_mask,
    mask_graph,
)
from rcteach.masks import check_mask

GRAPH_FUNCS = [is_strongly_connected, is_quasi_strongly_connected, centre_nodes, diameter, centre_eccentricity]


def definition(kind, T, window=None):
    """The mask from its definition, entry by entry (independent of make_mask)."""
    rule = {
        "complete": lambda i, j: True,
        "causal": lambda i, j: j <= i,
        "sliding": lambda i, j: abs(i - j) <= window,
        "sliding-causal": lambda i, j: 0 <= i - j <= window,
    }[kind]
    return torch.tensor([[rule(i, j) for j in range(T)] for i in range(T)], dtype=torch.bool)


def brute_force(mask):
    """Graph facts by breadth-first search from every node on the edges j -> i for mask[i, j]."""
    T = mask.shape[0]
    out = {j: [i for i in range(T) if mask[i, j]] for j in range(T)}
    dist = []
    for src in range(T):
        d = {src: 0}
        queue = deque([src])
        while queue:
            u = queue.popleft()
            for v in out[u]:
                if v not in d:
                    d[v] = d[u] + 1
                    queue.append(v)
        dist.append(d)
    centres = [c for c in range(T) if len(dist[c]) == T]
    strong = len(centres) == T
    return dict(
        strong=strong,
        quasi=bool(centres),
        centres=centres,
        diameter=max(max(d.values()) for d in dist) if strong else math.inf,
        eccentricity=min(max(dist[c].values()) for c in centres) if centres else math.inf,
    )


def facts(mask):
    return dict(
        strong=is_strongly_connected(mask),
        quasi=is_quasi_strongly_connected(mask),
        centres=centre_nodes(mask),
        diameter=diameter(mask),
        eccentricity=centre_eccentricity(mask),
    )


def kind_cases():
    for T in (2, 3, 6, 7):
        for kind in MASK_KINDS:
            for window in ((0, 1, 2, 10) if kind.startswith("sliding") else (None,)):
                yield kind, T, window


# -- make_mask -------------------------------------------------------------------------------------

def test_mask_kinds():
    assert MASK_KINDS == ("complete", "causal", "sliding", "sliding-causal")


@pytest.mark.parametrize("kind, T, window", list(kind_cases()))
def test_make_mask_matches_definition(kind, T, window):
    mask = make_mask(kind, T, window=window)
    assert mask.dtype == torch.bool and mask.shape == (T, T)
    assert torch.equal(mask, definition(kind, T, window))


def test_make_mask_window_ignored_by_non_sliding_kinds():
    for kind in ("complete", "causal"):
        assert torch.equal(make_mask(kind, 5, window=1), make_mask(kind, 5))


def test_make_mask_device():
    assert make_mask("causal", 4).device == torch.device("cpu")
    assert make_mask("sliding", 4, window=1, device=torch.device("cpu")).device == torch.device("cpu")


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        (("banded", 4), {}, ValueError, "kind"),
        (("causal", 1), {}, ValueError, "T"),
        (("causal", 4.0), {}, TypeError, "T"),
        (("sliding", 4), {}, ValueError, "window"),
        (("sliding-causal", 4), {}, ValueError, "window"),
        (("sliding", 4), dict(window=-1), ValueError, "window"),
        (("sliding", 4), dict(window=1.5), TypeError, "window"),
    ],
)
def test_make_mask_errors(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        make_mask(*args, **kwargs)


# -- check_mask ------------------------------------------------------------------------------------

def test_check_mask_accepts_and_returns_masks():
    m = make_mask("causal", 4)
    assert check_mask(m) is m
    assert check_mask(m, 4) is m
    batched = m.expand(2, 3, 4, 4)
    assert check_mask(batched, 4) is batched


@pytest.mark.parametrize(
    "mask, T, error, match",
    [
        ([[True]], None, TypeError, "mask"),
        (torch.ones(3, 3), None, TypeError, "mask"),
        (torch.ones(3, 3, dtype=torch.int64), None, TypeError, "mask"),
        (torch.ones(3, dtype=torch.bool), None, ValueError, "mask"),
        (torch.ones(3, 4, dtype=torch.bool), None, ValueError, "mask"),
        (torch.ones(3, 3, dtype=torch.bool), 4, ValueError, "mask"),
        (torch.eye(3, dtype=torch.bool).flip(0) & torch.tensor([True, False, True])[:, None], None, ValueError,
         "at least one"),
    ],
)
def test_check_mask_errors(mask, T, error, match):
    with pytest.raises(error, match=match):
        check_mask(mask, T)


def test_check_mask_names_the_argument():
    with pytest.raises(TypeError, match="my_mask"):
        check_mask(torch.ones(3, 3), name="my_mask")


# -- mask_graph ------------------------------------------------------------------------------------

def test_mask_graph_edges_point_from_attended_token():
    g = mask_graph(make_mask("causal", 4))
    assert isinstance(g, nx.DiGraph)
    assert sorted(g.nodes) == [0, 1, 2, 3]
    assert set(g.edges) == {(j, i) for i in range(4) for j in range(i + 1)}


def test_mask_graph_keeps_isolated_nodes():
    mask = torch.eye(3, dtype=torch.bool)
    g = mask_graph(mask)
    assert g.number_of_nodes() == 3
    assert set(g.edges) == {(0, 0), (1, 1), (2, 2)}


@pytest.mark.parametrize("f", [mask_graph] + GRAPH_FUNCS)
def test_graph_functions_refuse_batched_masks(f):
    with pytest.raises(ValueError, match="mask"):
        f(make_mask("causal", 3).expand(2, 3, 3))


@pytest.mark.parametrize("f", [mask_graph] + GRAPH_FUNCS)
def test_graph_functions_validate_the_mask(f):
    with pytest.raises(TypeError, match="mask"):
        f(torch.ones(3, 3))
    with pytest.raises(ValueError, match="mask"):
        f(torch.zeros(3, 3, dtype=torch.bool))


# -- graph facts -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, T, window", list(kind_cases()))
def test_graph_facts_match_brute_force(kind, T, window):
    mask = make_mask(kind, T, window=window)
    assert facts(mask) == brute_force(mask)


@pytest.mark.parametrize("T", [2, 5, 8])
def test_complete_facts(T):
    mask = make_mask("complete", T)
    assert facts(mask) == dict(strong=True, quasi=True, centres=list(range(T)), diameter=1, eccentricity=1)


@pytest.mark.parametrize("T", [2, 5, 8])
def test_causal_facts(T):
    mask = make_mask("causal", T)
    # token 0 is attended by every token: one step reaches all; nothing reaches back to it.
    assert facts(mask) == dict(strong=False, quasi=True, centres=[0], diameter=math.inf, eccentricity=1)


@pytest.mark.parametrize("T, w", [(5, 1), (8, 3), (9, 2), (10, 2), (7, 6), (7, 20)])
def test_sliding_facts(T, w):
    mask = make_mask("sliding", T, window=w)
    assert facts(mask) == dict(
        strong=True,
        quasi=True,
        centres=list(range(T)),
        diameter=math.ceil((T - 1) / w),
        eccentricity=math.ceil(math.ceil((T - 1) / 2) / w),  # the radius, from the middle token
    )


@pytest.mark.parametrize("T, w", [(5, 1), (8, 3), (10, 2), (7, 20)])
def test_sliding_causal_facts(T, w):
    mask = make_mask("sliding-causal", T, window=w)
    assert facts(mask) == dict(strong=False, quasi=True, centres=[0], diameter=math.inf,
                               eccentricity=math.ceil((T - 1) / w))


@pytest.mark.parametrize("kind", ["sliding", "sliding-causal"])
def test_zero_window_is_disconnected(kind):
    mask = make_mask(kind, 4, window=0)
    assert torch.equal(mask, torch.eye(4, dtype=torch.bool))
    assert facts(mask) == dict(strong=False, quasi=False, centres=[], diameter=math.inf, eccentricity=math.inf)


def custom_masks():
    T = 5
    anti_causal = make_mask("causal", T).T.contiguous()  # token i attends to j >= i
    blocks = torch.zeros(T, T, dtype=torch.bool)
    blocks[:2, :2] = True
    blocks[2:, 2:] = True
    cycle = torch.zeros(T, T, dtype=torch.bool)  # no self-loops: i attends to i + 1 only
    cycle[torch.arange(T), (torch.arange(T) + 1) % T] = True
    two_roots = make_mask("causal", T).clone()  # tokens 0 and 1 attend to each other
    two_roots[0, 1] = True
    return [
        ("anti-causal", anti_causal,
         dict(strong=False, quasi=True, centres=[T - 1], diameter=math.inf, eccentricity=1)),
        ("two blocks", blocks, dict(strong=False, quasi=False, centres=[], diameter=math.inf, eccentricity=math.inf)),
        ("cycle", cycle, dict(strong=True, quasi=True, centres=list(range(T)), diameter=T - 1, eccentricity=T - 1)),
        ("two roots", two_roots, dict(strong=False, quasi=True, centres=[0, 1], diameter=math.inf, eccentricity=1)),
    ]


@pytest.mark.parametrize("name, mask, expected", custom_masks(), ids=[c[0] for c in custom_masks()])
def test_custom_mask_facts(name, mask, expected):
    assert facts(mask) == expected
    assert brute_force(mask) == expected


@pytest.mark.parametrize("seed", range(12))
def test_random_masks_match_brute_force(seed):
    gen = torch.Generator().manual_seed(seed)
    T = 6
    p = [0.1, 0.2, 0.35][seed % 3]
    mask = (torch.rand(T, T, generator=gen) < p) | torch.eye(T, dtype=torch.bool)
    assert facts(mask) == brute_force(mask)


def test_is_quasi_strongly_connected_returns_bool():
    assert is_quasi_strongly_connected(make_mask("causal", 3)) is True
    assert is_quasi_strongly_connected(torch.eye(3, dtype=torch.bool)) is False


@pytest.mark.gpu
def test_cuda_masks():
    for kind, T, window in kind_cases():
        mask = make_mask(kind, T, window=window, device="cuda")
        assert mask.device.type == "cuda"
        assert torch.equal(mask.cpu(), definition(kind, T, window))
        assert facts(mask) == facts(mask.cpu())
