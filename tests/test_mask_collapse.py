"""Tests for collapse under masks: metrics.decay_rate, the consensus-rate theory, draw_mask, checks."""

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch

import rcteach
from rcteach import consensus_rate, make_mask, theory
from rcteach.metrics import decay_rate
from rcteach.plotting import draw_mask


# -- decay_rate ---------------------------------------------------------------------------------

def test_decay_rate_exact_geometric_and_batch():
    t = torch.arange(30, dtype=torch.float64)
    rho = torch.tensor([0.5, 0.9, 1.0, 1.2], dtype=torch.float64)
    v = 3.0 * rho[None, :] ** t[:, None]  # (30, 4)
    out = decay_rate(v)
    assert out.shape == (4,)
    assert torch.allclose(out, rho, rtol=1e-12)
    v2 = v.reshape(30, 2, 2)
    assert decay_rate(v2).shape == (2, 2)
    assert torch.allclose(decay_rate(v2).reshape(-1), rho, rtol=1e-12)


def test_decay_rate_window_and_numpy_input():
    v = np.concatenate([np.full(5, 7.0), 0.8 ** np.arange(20)])  # flat, then geometric
    assert decay_rate(v, 5).item() == pytest.approx(0.8, rel=1e-12)
    assert decay_rate(v, 5, 10).item() == pytest.approx(0.8, rel=1e-12)
    assert decay_rate(v, 0, 5).item() == pytest.approx(1.0, abs=1e-12)
    assert decay_rate(v.tolist(), -10).item() == pytest.approx(0.8, rel=1e-12)


def test_decay_rate_floor_stops_each_fit_before_the_floor():
    t = torch.arange(60, dtype=torch.float64)
    v = torch.stack([0.5**t, 0.9**t], dim=1)
    v[:, 0] = v[:, 0].clamp_min(1e-16)  # a float floor after ~53 layers in the first column
    with_floor = decay_rate(v, 10, floor=1e-12)
    assert torch.allclose(with_floor, torch.tensor([0.5, 0.9], dtype=torch.float64), rtol=1e-12)
    assert abs(decay_rate(v, 10)[0].item() - 0.5) > 1e-3  # without the floor the fit is biased
    zeros = torch.cat([0.5 ** t[:10], torch.zeros(5, dtype=torch.float64)])
    assert decay_rate(zeros, floor=1e-6).item() == pytest.approx(0.5, rel=1e-12)


def test_decay_rate_errors():
    with pytest.raises(ValueError, match="window"):
        decay_rate(torch.ones(5), 4)
    with pytest.raises(ValueError, match="scalar"):
        decay_rate(torch.tensor(1.0))
    with pytest.raises(ValueError, match="> 0"):
        decay_rate(torch.tensor([1.0, 0.0, 1.0]))
    with pytest.raises(ValueError, match="finite"):
        decay_rate(torch.tensor([1.0, float("nan"), 1.0]))
    with pytest.raises(ValueError, match="finite"):
        decay_rate(torch.tensor([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="floor"):
        decay_rate(torch.tensor([1.0, 1e-9, 1e-10]), floor=1e-6)
    with pytest.raises(ValueError, match="floor"):
        decay_rate(torch.ones(4), floor=0.0)
    with pytest.raises(TypeError, match="start"):
        decay_rate(torch.ones(4), 1.5)
    with pytest.raises(TypeError, match="stop"):
        decay_rate(torch.ones(4), 0, "3")


# -- theory ---------------------------------------------------------------------------------------

def _row_normalised(mask):
    M = mask.to(torch.float64)
    return M / M.sum(-1, keepdim=True)


@pytest.mark.parametrize("kind,window", [("sliding", 1), ("sliding", 3), ("causal", None), ("complete", None)])
def test_consensus_rate_matches_dense_eigenvalues(kind, window):
    mask = make_mask(kind, 20, window=window)
    ev = torch.from_numpy(np.linalg.eigvals(_row_normalised(mask).numpy())).abs().sort(descending=True).values
    assert consensus_rate(mask) == pytest.approx(ev[1].item(), abs=1e-10)


def test_consensus_rate_closed_forms():
    assert consensus_rate(make_mask("complete", 16)) < 1e-12
    for T in (2, 5, 40):
        assert consensus_rate(make_mask("causal", T)) == 0.5 == theory.causal_consensus_rate()
    for w in (1, 2, 7):
        assert consensus_rate(make_mask("sliding-causal", 30, window=w)) == 0.5 == theory.causal_consensus_rate(w)
    assert theory.causal_consensus_rate(0) == 1.0
    assert consensus_rate(make_mask("sliding-causal", 8, window=0)) == 1.0  # identity mask: no mixing
    two_islands = torch.zeros(4, 4, dtype=torch.bool)
    two_islands[:2, :2] = True
    two_islands[2:, 2:] = True
    assert consensus_rate(two_islands) == pytest.approx(1.0)  # not quasi-strongly connected


def test_consensus_rate_custom_nonsymmetric_mask():
    g = torch.Generator().manual_seed(0)
    mask = (torch.rand(12, 12, generator=g) < 0.3) | torch.eye(12, dtype=torch.bool)
    mask[0, 1] = mask[1, 0] = True
    ev = torch.from_numpy(np.linalg.eigvals(_row_normalised(mask).numpy())).abs().sort(descending=True).values
    assert consensus_rate(mask) == pytest.approx(ev[1].item(), abs=1e-10)


def test_consensus_rate_is_the_simulated_rate():
    T, w = 24, 3
    mask = make_mask("sliding", T, window=w)
    X0 = rcteach.orthonormal_tokens(T, T, batch=2, seed=0)
    mu = rcteach.propagate(X0, 80, attention="iid", s2=0.0, mask=mask, values="orthogonal", seed=1).mu
    assert torch.allclose(decay_rate(mu, 40, floor=1e-12), torch.tensor(consensus_rate(mask), dtype=torch.float64),
                          atol=1e-6)


def test_uniform_complete_attention_collapses_in_one_layer():
    # A = 11^T/T makes every token the mean token (was the check consensus-complete-one-step: a unit fact of
    # propagate, not a theory check)
    X0 = rcteach.orthonormal_tokens(64, 64, batch=4, seed=0)
    mu = rcteach.propagate(X0, 1, attention="qk", beta=0.0, mask=make_mask("complete", 64), values="orthogonal",
                           seed=1).mu
    assert (mu[1] / mu[0]).max() < 1e-12


def test_sliding_consensus_rate_leading_order():
    for T, w in ((64, 1), (128, 2), (256, 4)):
        exact_gap = 1 - consensus_rate(make_mask("sliding", T, window=w))
        approx_gap = 1 - theory.sliding_consensus_rate(T, w)
        assert abs(approx_gap / exact_gap - 1) < 2 * w / T
    assert theory.sliding_consensus_rate(10, 1) == pytest.approx(1 - math.pi**2 * 2 / 600)


def test_window_hops_is_diameter_and_eccentricity():
    for T, w in ((10, 1), (10, 3), (17, 4), (5, 9)):
        assert theory.window_hops(T, w) == rcteach.diameter(make_mask("sliding", T, window=w))
        assert theory.window_hops(T, w) == rcteach.centre_eccentricity(make_mask("sliding-causal", T, window=w))


def test_theory_errors():
    with pytest.raises(TypeError, match="mask"):
        consensus_rate(np.ones((3, 3), dtype=bool))
    with pytest.raises(ValueError, match="single"):
        consensus_rate(torch.ones(2, 3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="window"):
        theory.sliding_consensus_rate(10, 0)
    with pytest.raises(ValueError, match="T"):
        theory.sliding_consensus_rate(1, 1)
    with pytest.raises(ValueError, match="window"):
        theory.causal_consensus_rate(-1)
    with pytest.raises(TypeError, match="window"):
        theory.window_hops(10, 1.0)


# -- draw_mask ------------------------------------------------------------------------------------

def test_draw_mask_draws_matrix_and_graph():
    import matplotlib.pyplot as plt

    mask = make_mask("sliding-causal", 6, window=2)
    fig, (ax_m, ax_g) = draw_mask(mask, title="sliding-causal")
    assert "matrix" in ax_m.get_title() and "graph" in ax_g.get_title()
    assert np.array_equal(ax_m.images[0].get_array(), mask.numpy())
    edges_without_loops = int(mask.sum()) - 6
    assert len(ax_g.patches) == edges_without_loops  # one arrow per edge j -> i
    plt.close(fig)
    fig, axs = plt.subplots(1, 2)
    out, _ = draw_mask(make_mask("sliding", 5, window=1), ax=axs, layout="line", show_self_loops=True)
    assert out is fig
    plt.close(fig)


def test_draw_mask_errors():
    with pytest.raises(TypeError, match="mask"):
        draw_mask(np.ones((3, 3), dtype=bool))
    with pytest.raises(ValueError, match="layout"):
        draw_mask(make_mask("complete", 3), layout="spring")
    with pytest.raises(TypeError, match="pair"):
        draw_mask(make_mask("complete", 3), ax=object())
    with pytest.raises(ValueError, match="single"):
        draw_mask(torch.ones(2, 3, 3, dtype=torch.bool))


# -- checks ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["sliding-causal-eccentricity", "sliding-rate-diffusive", "consensus-rate-causal"])
def test_cheap_checks_pass(name):
    assert rcteach.run_check(name).passed
