"""Tests for the theory of other attention maps (rcteach.theory: activation_moments and friends)."""

import math

import mpmath
import pytest
import torch

import rcteach
from rcteach import theory

LN2 = math.log(2.0)


def _mc_moments(activation, s2, bias=0.0, n=2_000_000, seed=0):
    """Monte Carlo mean and variance of f(g), g ~ N(0, s2), through the package's own map."""
    gen = torch.Generator().manual_seed(seed)
    g = math.sqrt(s2) * torch.randn(n, generator=gen, dtype=torch.float64)
    f = torch.relu(g) if activation == "relu" else torch.sigmoid(g + bias)
    return f.mean().item(), f.var().item(), n


@pytest.mark.parametrize("activation, s2, bias", [("relu", LN2, 0.0), ("relu", 2.5, 0.0),
                                                  ("sigmoid", LN2, -2.0), ("sigmoid", 3.0, 1.0)])
def test_moments_match_monte_carlo(activation, s2, bias):
    mean, var = theory.activation_moments(activation, s2, bias)
    mc_mean, mc_var, n = _mc_moments(activation, s2, bias)
    assert abs(mc_mean - mean) < 5 * math.sqrt(var / n)  # 5 standard errors
    assert abs(mc_var - var) < 0.01 * var


def test_relu_closed_form():
    for s2 in (0.1, LN2, 4.0):
        mean, var = theory.activation_moments("relu", s2)
        assert mean == pytest.approx(math.sqrt(s2) / math.sqrt(2 * math.pi), rel=1e-15)
        assert var + mean**2 == pytest.approx(s2 / 2, rel=1e-14)  # E relu(g)^2 = s2 / 2
        # the ReLU gap does not depend on s2: sqrt(T / (pi - 1))
        assert theory.gap_ratio(256, "relu", s2) == pytest.approx(math.sqrt(256 / (math.pi - 1)), rel=1e-14)


def test_relu_crossover_at_ln_pi():
    assert theory.relative_gap("relu", math.log(math.pi)) == pytest.approx(1.0, rel=1e-14)
    assert theory.relative_gap("relu", 1.0) < 1 < theory.relative_gap("relu", 1.3)


def test_sigmoid_matches_high_precision_quadrature():
    s2, b = 2.0, -1.5
    mpmath.mp.dps = 30
    s = mpmath.sqrt(s2)
    density = lambda z: mpmath.exp(-z * z / 2) / mpmath.sqrt(2 * mpmath.pi)  # noqa: E731
    f = lambda z: 1 / (1 + mpmath.exp(-(s * z + b)))  # noqa: E731
    m = mpmath.quad(lambda z: f(z) * density(z), [-mpmath.inf, -5, 0, 5, mpmath.inf])
    v = mpmath.quad(lambda z: (f(z) - m) ** 2 * density(z), [-mpmath.inf, -5, 0, 5, mpmath.inf])
    mean, var = theory.activation_moments("sigmoid", s2, b)
    assert abs(mean - float(m)) < 1e-10
    assert abs(var - float(v)) < 1e-10 * float(v)


def test_sigmoid_symmetries_and_limits():
    mean, var = theory.activation_moments("sigmoid", 1.3, 0.0)
    assert mean == pytest.approx(0.5, abs=1e-13)  # sigmoid(x) + sigmoid(-x) = 1
    m_plus, v_plus = theory.activation_moments("sigmoid", 0.7, 1.2)
    m_minus, v_minus = theory.activation_moments("sigmoid", 0.7, -1.2)
    assert m_plus + m_minus == pytest.approx(1.0, abs=1e-13)
    assert v_plus == pytest.approx(v_minus, rel=1e-10)
    # no logit noise: a constant map
    assert theory.activation_moments("sigmoid", 0.0, 0.4) == (pytest.approx(1 / (1 + math.exp(-0.4))), 0.0)
    # small s2: Var sigmoid(s z) ~ s2 / 16, computed without cancellation
    assert theory.activation_moments("sigmoid", 1e-6, 0.0)[1] == pytest.approx(1e-6 / 16, rel=1e-5)
    # very negative bias: sigmoid(g + b) ~ e^b e^g, the softmax numerator, so the gaps tie
    assert theory.relative_gap("sigmoid", 0.5, -25.0) == pytest.approx(1.0, abs=1e-8)


def test_softmax_reduces_to_existing_formulas():
    for s2 in (0.2, LN2, 1.5):
        assert theory.activation_moments("softmax", s2) == (1.0, theory.c(s2))
        assert theory.outlier("softmax", s2) == 1.0
        assert theory.map_bulk_radius(256, "softmax", s2) == pytest.approx(theory.bulk_radius(256, s2), rel=1e-15)
        assert theory.gap_ratio(256, "softmax", s2) == pytest.approx(math.sqrt(256 / theory.c(s2)), rel=1e-14)
        assert theory.relative_gap("softmax", s2) == pytest.approx(1.0, rel=1e-14)


def test_consistency_between_functions():
    T, s2, b = 128, 0.9, -0.5
    mean, var = theory.activation_moments("sigmoid", s2, b)
    assert theory.outlier("sigmoid", s2, b) == mean
    assert theory.map_bulk_radius(T, "sigmoid", s2, b) == pytest.approx(math.sqrt(var / T), rel=1e-15)
    assert theory.gap_ratio(T, "sigmoid", s2, b) == pytest.approx(
        theory.outlier("sigmoid", s2, b) / theory.map_bulk_radius(T, "sigmoid", s2, b), rel=1e-14)
    assert theory.relative_gap("sigmoid", s2, b) == pytest.approx(
        theory.gap_ratio(T, "sigmoid", s2, b) / theory.gap_ratio(T, "softmax", s2), rel=1e-14)


@pytest.mark.parametrize("activation, bias", [("relu", 0.0), ("sigmoid", -2.0)])
def test_outlier_is_mean_row_sum_of_random_attention(activation, bias):
    # E[A 1] = (E f) 1 exactly for an element-wise map: the outlier's leading term, from the package's map
    A = rcteach.random_attention(128, LN2, batch=16, activation=activation, bias=bias, seed=3)
    row_sums = A.sum(-1)  # (16, 128), each an average of 128 draws of f
    _, var = theory.activation_moments(activation, LN2, bias)
    standard_error = math.sqrt(var / row_sums.numel() / 128)
    assert abs(row_sums.mean().item() - theory.outlier(activation, LN2, bias)) < 5 * standard_error


def test_error_paths():
    with pytest.raises(ValueError, match="activation"):
        theory.activation_moments("tanh", LN2)
    with pytest.raises(ValueError, match="bias"):
        theory.activation_moments("relu", LN2, 1.0)
    with pytest.raises(ValueError, match="bias"):
        theory.outlier("softmax", LN2, -1.0)
    with pytest.raises(ValueError, match="s2"):
        theory.activation_moments("sigmoid", -0.1)
    with pytest.raises(TypeError, match="s2"):
        theory.activation_moments("relu", "0.5")
    with pytest.raises(ValueError, match="bias"):
        theory.activation_moments("sigmoid", LN2, math.inf)
    with pytest.raises(TypeError, match="bias"):
        theory.activation_moments("sigmoid", LN2, None)
    with pytest.raises(ValueError, match="s2"):
        theory.gap_ratio(64, "relu", 0.0)
    with pytest.raises(ValueError, match="s2"):
        theory.relative_gap("sigmoid", 0.0)
    with pytest.raises(ValueError, match="T"):
        theory.map_bulk_radius(1, "relu", LN2)
    with pytest.raises(TypeError, match="T"):
        theory.gap_ratio(64.0, "relu", LN2)
