import math

import pytest
import torch

from rcteach import free_probability as fp
from rcteach import theory


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_density_has_the_moments(k):
    x, rho = fp.fuss_catalan_density(k, points=20000)
    for j in (1, 2):  # m_0 is lost to the x^(-k/(k+1)) singularity at 0 on a finite grid; m_1, m_2 are not
        assert torch.trapezoid(rho * x**j, x).item() == pytest.approx(fp.fuss_catalan_moment(k, j), rel=1e-3)
    assert x.max().item() == pytest.approx(fp.fuss_catalan_edge(k), rel=1e-6)


def test_known_values():
    assert [fp.fuss_catalan_moment(1, j) for j in range(5)] == [1, 1, 2, 5, 14]  # Catalan numbers
    assert fp.fuss_catalan_moment(2, 3) == 12 and fp.fuss_catalan_edge(1) == 4 and fp.fuss_catalan_edge(2) == 6.75
    assert [round(theory.centred_depth_gram_stable_rank(150, L), 2) for L in (1, 2, 3)] == [9.88, 5.03, 3.37]
    with pytest.warns(UserWarning, match="finite-T extreme"):
        assert fp.gram_stable_rank_limit(8, 1) == 1.0


def test_limit_warns_outside_its_regime_only():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fp.gram_stable_rank_limit(150, 6)  # 3.37: the chapter's deepest setting, no warning
    with pytest.warns(UserWarning, match="needs T >> k"):
        theory.centred_depth_gram_stable_rank(16, 4)  # k = 8 factors for 16 tokens (the training chapter)


def test_gaussian_product_matches_limit():
    g = torch.Generator().manual_seed(0)
    n = 400
    G = torch.randn(8, n, n, generator=g, dtype=torch.float64) @ torch.randn(8, n, n, generator=g, dtype=torch.float64)
    s = torch.linalg.svdvals(G).square()
    x = s / s.mean(-1, keepdim=True)
    assert x.square().mean().item() == pytest.approx(3.0, rel=0.03)
    assert x[:, 0].mean().item() == pytest.approx(6.75, rel=0.05)


def test_huge_orders_answer_at_once():
    """The edge in floats (no (k + 1)^(k + 1) integer), and a moment beyond float64 refused before its binomial."""
    assert fp.fuss_catalan_edge(10**9) == pytest.approx(math.e * (10**9 + 1), rel=1e-6)
    with pytest.raises(ValueError, match="overflows"):
        fp.fuss_catalan_moment(2, 10**8)


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_bad_order(bad):
    with pytest.raises((ValueError, TypeError), match="k"):
        fp.fuss_catalan_edge(bad)
    assert math.isfinite(fp.fuss_catalan_edge(3))


def test_correlated_bulk_radius_special_cases():
    from rcteach import orthonormal_tokens, theory
    from rcteach.norms import normalise
    from rcteach.tokens import gaussian_tokens

    s2, T = 0.5, 200
    X = orthonormal_tokens(T, T, seed=0)
    assert fp.correlated_bulk_radius(X, s2).item() == pytest.approx(theory.bulk_radius(T, s2), rel=0.01)
    X = normalise(gaussian_tokens(T, 100, batch=4, seed=1), "rms")
    expected = theory.noniso_bulk_radius(T, 100, s2)
    assert fp.correlated_bulk_radius(X, s2).mean().item() == pytest.approx(expected, rel=0.02)
    consensus = X[..., :1, :].expand(4, T, 100)
    assert torch.all(fp.correlated_bulk_radius(consensus, s2) < 1e-20)  # zero up to round-off of the mean
