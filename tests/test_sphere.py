"""rcteach.sphere: the attention flow on the sphere as residual layers, and the contraction rate of one cluster."""

import math

import pytest
import torch

import rcteach
from rcteach import theory
from rcteach.sphere import sphere_flow, tail_rate
from rcteach.tokens import near_consensus


def test_one_cluster_contracts_at_log1p_h_whatever_beta():
    X = near_consensus(12, 4, 1e-3, seeds=2, seed=3)
    for beta in (0.5, 8.0):
        rel = sphere_flow(X, 150, beta, 0.25)
        assert rel.shape == (151, 2) and rel.dtype == torch.float64
        rates = tail_rate(rel)
        assert rates.shape == (2,)
        assert (rates / theory.sphere_consensus_rate(0.25) - 1).abs().max() < 1e-6, rates


def test_tail_rate_is_nan_for_a_run_that_never_reaches_one_cluster():
    rel = torch.stack([torch.full((5,), 0.5, dtype=torch.float64), 0.1 ** torch.arange(5.0, dtype=torch.float64)], 1)
    rates = tail_rate(rel, top=0.05, span=1e-3)
    assert math.isnan(rates[0]) and rates[1] == pytest.approx(math.log(10))


def test_tail_rate_matches_decay_rate_on_a_geometric_run():
    rel = 1e-3 * 0.8 ** torch.arange(80, dtype=torch.float64)
    assert tail_rate(rel[:, None])[0] == pytest.approx(-math.log(rcteach.decay_rate(rel[2:], floor=1e-5)), rel=1e-12)
