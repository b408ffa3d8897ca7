"""Tests for rcteach.variants (differential attention) and its theory functions."""

import math

import pytest
import torch

import rcteach
from rcteach import theory
from rcteach.variants import random_differential_attention


def test_shape_rows_and_seed():
    D = random_differential_attention(16, 0.3, batch=(2, 3), seed=0)
    assert D.shape == (2, 3, 16, 16) and D.dtype == torch.float64
    assert torch.allclose(D.sum(-1), torch.full((2, 3, 16), 0.7, dtype=torch.float64), atol=1e-14)
    assert torch.equal(D, random_differential_attention(16, 0.3, batch=(2, 3), seed=0))
    assert not torch.equal(D, random_differential_attention(16, 0.3, batch=(2, 3), seed=1))


def test_lam_zero_is_softmax_attention_and_lam_one_kills_outlier():
    D0 = random_differential_attention(8, 0.0, batch=2, seed=4)
    assert (D0 >= 0).all() and torch.allclose(D0.sum(-1), torch.ones(2, 8, dtype=torch.float64))
    D1 = random_differential_attention(8, 1.0, seed=4)
    assert torch.allclose(D1 @ torch.ones(8, dtype=torch.float64), torch.zeros(8, dtype=torch.float64), atol=1e-14)


def test_eigenvalue_one_minus_lam_exact():
    D = random_differential_attention(32, 0.6, seed=1)
    ev = rcteach.spectrum(D)
    assert (ev - theory.differential_outlier(0.6)).abs().min() < 1e-12
    # centring swaps that eigenvalue for 0 and keeps the rest
    expected = torch.cat([torch.zeros(1, dtype=ev.dtype), ev[1:]])
    assert rcteach.spectrum_distance(rcteach.spectrum(rcteach.centre(D)), expected) < 1e-10


def test_generator_and_float32():
    g = torch.Generator().manual_seed(0)
    D = random_differential_attention(8, 0.5, generator=g, dtype=torch.float32)
    assert D.dtype == torch.float32 and D.shape == (8, 8)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(T=1, lam=0.5), ValueError, "T"),
        (dict(T=8, lam="x"), TypeError, "lam"),
        (dict(T=8, lam=math.nan), ValueError, "lam"),
        (dict(T=8, lam=0.5, s2=-0.1), ValueError, "s2"),
        (dict(T=8, lam=0.5, batch=0), ValueError, "batch"),
        (dict(T=8, lam=0.5, seed=0, generator=torch.Generator()), ValueError, "seed"),
        (dict(T=8, lam=0.5, device=3), TypeError, "device"),
    ],
)
def test_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        random_differential_attention(**kwargs)


def test_theory():
    assert theory.differential_outlier(0.8) == pytest.approx(0.2)
    assert theory.differential_bulk_radius(100, math.log(2), 0.0) == pytest.approx(theory.bulk_radius(100, math.log(2)))
    assert theory.differential_bulk_radius(100, math.log(2), 1.0) == pytest.approx(math.sqrt(2 / 100))
    with pytest.raises(TypeError, match="lam"):
        theory.differential_outlier(None)
    with pytest.raises(ValueError, match="T"):
        theory.differential_bulk_radius(1, 0.5, 0.5)
