"""Theory formulas of the chapters "Depth with the fix" and "Theorem 2" (rcteach.theory, rcteach.masks)."""

import math

import pytest
import torch

import rcteach
from rcteach import theory


def test_transient_complete_mask_is_one_layer():
    assert rcteach.consensus_transient_layer(rcteach.make_mask("complete", 16), 1e-6) == 1


def test_transient_grows_with_T_and_shrinks_with_window():
    def layer(T, w):
        return rcteach.consensus_transient_layer(rcteach.make_mask("sliding-causal", T, window=w), 1e-6)

    assert layer(64, 3) < layer(128, 3) < layer(256, 3)
    assert layer(128, 8) < layer(128, 3) < layer(128, 1)
    assert layer(128, 3) > 2 * 127 / 3  # after the front arrives


@pytest.mark.parametrize("window", [1, 3])
def test_transient_of_a_sparse_mask_is_the_dense_one(window):
    """A window mask of under an eighth of the entries takes the sparse product: the same layer as dense."""
    mask = rcteach.make_mask("sliding-causal", 96, window=window)
    A = mask.double() / mask.sum(-1, keepdim=True)
    At, t = torch.eye(96, dtype=torch.float64), 0
    while torch.linalg.matrix_norm(At - At.mean(0)) > 1e-6 * torch.linalg.matrix_norm(At):
        At, t = A @ At, t + 1
    assert 8 * mask.sum() < mask.numel() and rcteach.consensus_transient_layer(mask, 1e-6) == t


def test_transient_not_reached():
    mask = rcteach.make_mask("sliding", 64, window=1)  # |lambda_2| close to 1
    assert rcteach.consensus_transient_layer(mask, 1e-6, max_layers=5) == 6


def test_gaussian_lyapunov_gap():
    for d in (4, 16, 64, 1024):
        gap = theory.gaussian_value_lyapunov(d)
        assert gap < 0
        assert gap == pytest.approx(-1 / (2 * d), rel=2 / d + 0.05)
    mask = rcteach.make_mask("sliding", 32, window=3)
    assert theory.gaussian_value_rate(mask, 16) == pytest.approx(
        rcteach.consensus_rate(mask) * math.exp(theory.gaussian_value_lyapunov(16)))


def test_centred_depth_gram_stable_rank_rejects_depth_zero():
    with pytest.raises(ValueError, match="depth"):
        theory.centred_depth_gram_stable_rank(150, 0)
    with pytest.raises(ValueError, match="level"):
        rcteach.consensus_transient_layer(rcteach.make_mask("complete", 4), 0.0)
    with pytest.raises(ValueError, match="d"):
        theory.gaussian_value_lyapunov(1)


def test_first_value_gradient_exact_average_over_values():
    """E||dL/dW_1||^2 = 4 sigma^6 d^2 (2d + 1) sum s^4(Y) for fixed attention, averaged over the Gaussian values."""
    import torch

    T = d = 6
    g = torch.Generator().manual_seed(0)
    A1, A2 = rcteach.random_attention(T, batch=2, seed=1)
    X0 = rcteach.orthonormal_tokens(T, d, seed=2)
    Y = A2 @ A1 @ X0
    W1 = torch.randn(40000, d, d, generator=g, dtype=torch.float64)
    W2 = torch.randn(40000, d, d, generator=g, dtype=torch.float64)
    grad = 2 * Y.T @ Y @ W1 @ W2 @ W2.transpose(-1, -2)
    s4 = torch.linalg.svdvals(Y).pow(4).sum().item()
    assert grad.square().sum((-1, -2)).mean().item() == pytest.approx(4 * d**2 * (2 * d + 1) * s4, rel=0.03)


def test_first_value_gradient_scalings():
    A = [theory.first_value_gradient_rms(T, T, rcteach.LN2) for T in (100, 400)]
    P = [theory.first_value_gradient_rms(T, T, rcteach.LN2, centred=True) for T in (100, 400)]
    assert math.log(A[1] / A[0]) / math.log(4) == pytest.approx(1.5, abs=0.01)
    assert P[1] == pytest.approx(2 * math.sqrt(6), rel=0.01)
    with pytest.raises(ValueError, match="d"):
        theory.first_value_gradient_rms(8, 4, rcteach.LN2)


def test_noniso_bulk_radius_limits():
    T = 256
    isometric = theory.bulk_radius(T, rcteach.LN2)
    assert theory.noniso_bulk_radius(T, 10**9, rcteach.LN2) == pytest.approx(isometric, rel=1e-6)
    assert theory.noniso_bulk_radius(T, T // 4, rcteach.LN2) > theory.noniso_bulk_radius(T, T, rcteach.LN2)
    # the linear part's radius^2 s2 (T + T(T-1)/d)/T^2 is (1/T^2) tr(M^T M)/d tr(S^2)/d for Gaussian unit-norm tokens

    from rcteach.norms import normalise

    d = 64
    X = normalise(rcteach.gaussian_tokens(T, d, batch=8, seed=0), "rms")
    tr_S2 = (X.transpose(-1, -2) @ X).square().sum((-1, -2)).mean().item()
    assert tr_S2 == pytest.approx(T + T * (T - 1) / d, rel=0.02)
    with pytest.raises(ValueError, match="d"):
        theory.noniso_bulk_radius(T, 0, rcteach.LN2)


def test_noniso_width_slope_limits_and_duality():
    import numpy as np

    for gamma in (0.25, 1.0, 4.0):
        z = np.logspace(-8, 3, 400001)
        brute = (z / ((1 + z) ** 2 * (1 + gamma * z) ** 2)).max()
        assert theory.noniso_width_slope(gamma) == pytest.approx(brute, rel=1e-6)
        # swapping T and d: sr is the same matrix's, so slope(gamma) = slope(1/gamma) / gamma
        assert theory.noniso_width_slope(gamma) == pytest.approx(theory.noniso_width_slope(1 / gamma) / gamma)
        assert theory.noniso_width_slope(gamma) < theory.centred_width_slope(gamma)
    assert theory.noniso_width_slope(0) == 0.25 == theory.centred_width_slope(0)
    assert theory.noniso_width_slope(1.0) == pytest.approx(27 / 256)
    assert 1e6 * theory.noniso_width_slope(1e6) == pytest.approx(0.25, rel=1e-5)  # sr -> d/4 when d << T
    with pytest.raises(ValueError, match="gamma"):
        theory.noniso_width_slope(-1.0)


def test_noniso_width_slope_simulation():
    from rcteach.width import noniso_width_ranks

    T, gamma = 256, 0.5
    sr = noniso_width_ranks(T, round(T / gamma), rcteach.LN2, seeds=16, seed=3) / T
    assert sr.median().item() == pytest.approx(theory.noniso_width_slope(gamma), rel=0.06)
    assert abs(sr.median().item() / theory.centred_width_slope(gamma) - 1) > 0.15


def test_sphere_consensus_rate_is_the_two_token_contraction():
    """Two tokens at angles +-theta on the circle: one residual RMS layer maps theta to theta / (1 + h) + O(theta^3),
    whatever beta (the beta-dependence is in the cubic term)."""
    import torch

    theta, h = 1e-5, 0.3
    X = torch.tensor([[math.cos(theta), math.sin(theta)], [math.cos(theta), -math.sin(theta)]], dtype=torch.float64)
    eye = torch.eye(2, dtype=torch.float64)
    for beta in (0.5, 3.0, 30.0):
        run = rcteach.propagate(X, 1, attention="qk", W_Q=eye, W_K=eye, beta=beta * math.sqrt(2), values="identity",
                                skip=h, norm="rms", keep_states=True)
        new = math.atan2(run.states[1, 0, 1].item(), run.states[1, 0, 0].item())
        assert math.log(theta / new) == pytest.approx(theory.sphere_consensus_rate(h), rel=1e-7)


def test_first_value_gradient_next_order_for_A():
    T = 64
    lead = theory.first_value_gradient_rms(T, T, rcteach.LN2)
    # sum s^4 = 1 + 2c/T, c = 1: the rms gains a factor sqrt(1 + 2/T)
    assert theory.first_value_gradient_rms(T, T, rcteach.LN2, next_order=True) == pytest.approx(
        lead * math.sqrt(1 + 2 / T), rel=1e-14)
    with pytest.raises(ValueError, match="next_order"):
        theory.first_value_gradient_rms(T, T, rcteach.LN2, centred=True, next_order=True)
