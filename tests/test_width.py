"""Tests for rcteach.width (rank collapse in width) and its theory functions."""

import math

import pytest
import torch

import rcteach
from rcteach import theory
from rcteach.metrics import stable_ranks_unchecked
from rcteach.width import width_dims, width_gram_factors, width_outputs, width_stable_ranks


def test_dims():
    assert width_dims(64, 0.5) == (64, 128)
    assert width_dims(64, 1) == (64, 64)


@pytest.mark.parametrize("attention", ["iid", "qk"])
@pytest.mark.parametrize("centred", [False, True])
@pytest.mark.parametrize("gram", [False, True])
def test_shape_range_and_seed(attention, centred, gram):
    sr = width_stable_ranks(16, 0.5, seeds=3, centred=centred, gram=gram, attention=attention, d_qk=8, seed=0)
    assert sr.shape == (3,) and sr.dtype == torch.float64
    assert (sr >= 1 - 1e-12).all() and (sr <= 16 + 1e-9).all()
    again = width_stable_ranks(16, 0.5, seeds=3, centred=centred, gram=gram, attention=attention, d_qk=8, seed=0)
    assert torch.equal(sr, again)
    other = width_stable_ranks(16, 0.5, seeds=3, centred=centred, gram=gram, attention=attention, d_qk=8, seed=1)
    assert not torch.equal(sr, other)


@pytest.mark.parametrize("gamma, centred", [(0.5, False), (0.5, True), (2.0, False)])
def test_gram_factors_have_the_law_of_the_outputs(gamma, centred):
    """width_gram_factors (a Bartlett factor for d >= T) gives both stable ranks the law of width_outputs':
    means over 4000 draws agree to 4 combined standard errors, and d = T instead of 2T is told apart."""
    T, n = 6, 4000
    F = width_gram_factors(T, gamma, seeds=n, centred=centred, seed=0)
    assert F.shape == (n, T, min(T, round(T / gamma))) and F.dtype == torch.float64
    assert torch.equal(F, width_gram_factors(T, gamma, seeds=n, centred=centred, seed=0))
    ours, theirs = (torch.stack(stable_ranks_unchecked(x)) for x in
                    (F, width_outputs(T, gamma, seeds=n, centred=centred, seed=1)))
    se = ((ours.var(-1) + theirs.var(-1)) / n).sqrt()
    assert ((ours.mean(-1) - theirs.mean(-1)).abs() <= 4 * se).all()
    if gamma < 1:  # the test's power: half the degrees of freedom of the Wishart matrix are detected
        wrong = torch.stack(stable_ranks_unchecked(width_gram_factors(T, 1.0, seeds=n, centred=centred, seed=0)))
        assert ((wrong.mean(-1) - theirs.mean(-1)).abs() > 4 * se).any()


def test_matches_metrics_stable_rank():
    """The Gram-eigenvalue route equals rcteach.stable_rank of the output (both definitions)."""
    gen = torch.Generator().manual_seed(5)
    T, d = 12, 24
    A = rcteach.random_attention(T, batch=2, generator=gen)
    Y = torch.randn(2, T, d, generator=gen, dtype=torch.float64)
    for gram in (False, True):
        gen = torch.Generator().manual_seed(5)
        ours = width_stable_ranks(T, T / d, seeds=2, gram=gram, generator=gen)
        assert torch.allclose(ours, rcteach.stable_rank(A @ Y, gram=gram), rtol=1e-10)


def test_generator_and_float32():
    g = torch.Generator().manual_seed(2)
    sr = width_stable_ranks(8, 1.0, seeds=2, generator=g, dtype=torch.float32)
    assert sr.dtype == torch.float32 and sr.shape == (2,)


def test_uniform_attention_rank_one():
    """s2 = 0 gives uniform attention: A Y = 1 ybar^T has stable rank 1; centred output is zero."""
    sr = width_stable_ranks(8, 0.5, 0.0, seeds=2, seed=0)
    assert torch.allclose(sr, torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="zero"):
        width_stable_ranks(8, 0.5, 0.0, seeds=2, seed=0, centred=True)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(T=1, gamma=0.5), ValueError, "T"),
        (dict(T=8.0, gamma=0.5), TypeError, "T"),
        (dict(T=8, gamma=0.0), ValueError, "gamma"),
        (dict(T=8, gamma="a"), TypeError, "gamma"),
        (dict(T=8, gamma=0.5, s2=-1.0), ValueError, "s2"),
        (dict(T=8, gamma=0.5, seeds=0), ValueError, "seeds"),
        (dict(T=8, gamma=0.5, attention="gauss"), ValueError, "attention"),
        (dict(T=8, gamma=0.5, centred=1), TypeError, "centred"),
        (dict(T=8, gamma=0.5, gram="yes"), TypeError, "gram"),
        (dict(T=8, gamma=2.0, attention="qk"), ValueError, "gamma"),
        (dict(T=8, gamma=0.5, attention="qk", d_qk=0), ValueError, "d_qk"),
        (dict(T=8, gamma=0.5, seed=1, generator=torch.Generator()), ValueError, "seed"),
        (dict(T=8, gamma=0.5, dtype=torch.int64), TypeError, "dtype"),
    ],
)
def test_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        width_stable_ranks(**kwargs)


def test_theory_width_functions():
    assert theory.width_stable_rank(math.log(2)) == pytest.approx(2.0)
    # the maximiser of z / ((1+z)^2 (1+gamma z)) solves 1 - z - 2 gamma z^2 = 0
    for gamma in (0.2, 0.5, 1.0):
        z = (math.sqrt(1 + 8 * gamma) - 1) / (4 * gamma)
        assert 1 - z - 2 * gamma * z**2 == pytest.approx(0.0, abs=1e-12)
        grid = [k / 1000 for k in range(1, 10000)]
        best = max(x / ((1 + x) ** 2 * (1 + gamma * x)) for x in grid)
        assert theory.centred_width_slope(gamma) == pytest.approx(best, rel=1e-5)
        assert theory.centred_width_slope_gram(gamma) == pytest.approx((2 + gamma) * best**2, rel=1e-4)
    assert theory.centred_width_slope_gram(0.0) == pytest.approx(2 / 16)
    assert theory.width_stable_rank_bias(64, 1.0, math.log(2)) == pytest.approx(-8 / 64)
    c = theory.c(0.3)
    assert theory.width_stable_rank_bias(100, 0.5, 0.3) == pytest.approx(-c * (2 * (1 + c) ** 2 + 0.5 * (c - 1)) / 100)
    assert theory.width_stable_rank_gram(100, 0.5, math.log(2)) == pytest.approx(1 + 2.5 / 100)
    with pytest.raises(ValueError, match="gamma"):
        theory.width_stable_rank_gram(100, -0.5, 0.3)
    with pytest.raises(ValueError, match="gamma"):
        theory.width_stable_rank_bias(64, 0.0, 0.5)
    with pytest.raises(ValueError, match="gamma"):
        theory.centred_width_slope_gram(-1.0)
    with pytest.raises(TypeError, match="T"):
        theory.width_stable_rank_bias(64.0, 1.0, 0.5)


def test_squared_singular_values_are_the_draws_of_the_stable_ranks():
    from rcteach.metrics import stable_rank_from_squared
    from rcteach.width import width_squared_singular_values

    for centred in (False, True):
        sq = width_squared_singular_values(32, 0.5, seeds=3, centred=centred, seed=4)
        assert sq.shape == (3, 32) and bool((sq[:, :-1] >= sq[:, 1:]).all())
        for gram in (False, True):
            # the same draws; width_stable_ranks takes lam_1 and the trace (rcteach.top_eigen): equal to rounding
            torch.testing.assert_close(stable_rank_from_squared(sq, gram=gram),
                                       width_stable_ranks(32, 0.5, seeds=3, centred=centred, gram=gram, seed=4),
                                       rtol=1e-12, atol=0)
