"""Unit tests for rcteach.matfree: matrix-free spectral norm, stable rank and bulk radius.

Stated tolerances (float64): the matrix-free stable ranks agree with the exact ones (SVD) to a
relative 1e-8 (Lanczos, any matrix here; power iteration on attention and its outputs, where the
outlier s_1 is well separated) and to 1e-6 for power iteration on a Gaussian matrix (small gap).
"""

import math

import pytest
import torch

import rcteach
from rcteach import matfree, theory


def _matrices():
    A = rcteach.random_attention(96, batch=3, seed=1)
    Y = torch.randn(3, 96, 48, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    G = torch.randn(2, 40, 70, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    return {"A": A, "A_perp": rcteach.centre(A), "AY": A @ Y, "gaussian_wide": G, "gaussian_tall": G.mT}


@pytest.mark.parametrize("name", list(_matrices()))
@pytest.mark.parametrize("gram", [False, True])
def test_lanczos_matches_exact(name, gram):
    X = _matrices()[name]
    exact = rcteach.stable_rank(X, gram=gram)
    est = matfree.stable_rank(X, gram=gram)
    assert est.shape == exact.shape
    torch.testing.assert_close(est, exact, rtol=1e-8, atol=0)


@pytest.mark.parametrize("name", ["A", "AY"])
def test_power_matches_exact_on_attention(name):
    X = _matrices()[name]
    torch.testing.assert_close(matfree.stable_rank(X, method="power"), rcteach.stable_rank(X), rtol=1e-8, atol=0)


def test_power_on_gaussian_small_gap():
    X = _matrices()["gaussian_wide"]
    est = matfree.stable_rank(X, method="power", tol=1e-14)
    torch.testing.assert_close(est, rcteach.stable_rank(X), rtol=1e-6, atol=0)
    assert (est >= rcteach.stable_rank(X) * (1 - 1e-12)).all()  # s_1 from below: an upper bound


def test_spectral_norm_values_and_bounds():
    X = _matrices()["AY"]
    s1 = torch.linalg.matrix_norm(X, ord=2)
    for method in matfree.METHODS:
        est = matfree.spectral_norm(X, method=method)
        torch.testing.assert_close(est, s1, rtol=1e-10, atol=0)
    few = matfree.spectral_norm(_matrices()["gaussian_wide"], method="power", iters=2)
    assert (few <= torch.linalg.matrix_norm(_matrices()["gaussian_wide"], ord=2) * (1 + 1e-12)).all()


def test_metrics_does_not_import_matfree():
    """One direction only: matfree builds on metrics; rcteach.stable_rank has its own certified top eigenvalue."""
    import inspect

    from rcteach import metrics

    assert "matfree" not in inspect.getsource(metrics)
    with pytest.raises(TypeError, match="method"):
        rcteach.stable_rank(_matrices()["A"], method="lanczos")


def test_exact_cases_and_batching():
    # rank one: sr = 1; identity: sr = n; a batch of shape (2, 3)
    u = torch.arange(1.0, 6.0, dtype=torch.float64)
    R = torch.outer(u, u + 1)
    torch.testing.assert_close(matfree.stable_rank(R), torch.tensor(1.0, dtype=torch.float64))
    I = torch.eye(7, dtype=torch.float64)
    torch.testing.assert_close(matfree.stable_rank(I), torch.tensor(7.0, dtype=torch.float64))
    B = torch.randn(2, 3, 20, 10, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    est = matfree.stable_rank(B)
    assert est.shape == (2, 3)
    torch.testing.assert_close(est, rcteach.stable_rank(B), rtol=1e-8, atol=0)
    # batch elements are independent of each other
    torch.testing.assert_close(matfree.stable_rank(B[1, 2]), est[1, 2], rtol=1e-10, atol=0)


def test_seed_reproducible_and_float32():
    X = _matrices()["A"]
    assert torch.equal(matfree.spectral_norm(X, seed=5), matfree.spectral_norm(X, seed=5))
    X32 = X.float()
    est = matfree.stable_rank(X32)
    assert est.dtype == torch.float32
    torch.testing.assert_close(est, rcteach.stable_rank(X32), rtol=1e-4, atol=0)


def test_frobenius_bulk_radius_is_differentiable():
    A = torch.softmax(torch.randn(2, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0)), -1)
    A.requires_grad_(True)
    matfree.frobenius_bulk_radius(A).sum().backward()
    assert A.grad is not None and torch.isfinite(A.grad).all() and A.grad.abs().sum() > 0


def test_frobenius_bulk_radius():
    # exact identity: ||A - A 1 1^T / T||_F / sqrt(T)
    A = rcteach.random_attention(64, batch=2, seed=0)
    torch.testing.assert_close(matfree.frobenius_bulk_radius(A),
                               torch.linalg.matrix_norm(rcteach.centre(A)) / 8.0)
    # against the exact |lambda_2| and the circular-law radius sqrt(c/T) at T = 512: the Frobenius
    # estimate tracks the disc radius to a few percent; |lambda_2| is the largest bulk modulus and
    # sits a few percent above it (edge fluctuation), so 10% per seed at this T
    T = 512
    A = rcteach.random_attention(T, batch=2, seed=1)
    est = matfree.frobenius_bulk_radius(A)
    exact = rcteach.spectral_gap(A).bulk_radius
    radius = theory.bulk_radius(T, rcteach.LN2)
    assert ((est - radius).abs() / radius < 0.05).all()
    assert ((est - exact).abs() / exact < 0.10).all()


def test_errors():
    X = _matrices()["A"]
    with pytest.raises(TypeError, match="X"):
        matfree.spectral_norm([[1.0]])
    with pytest.raises(ValueError, match="method"):
        matfree.spectral_norm(X, method="qr")
    with pytest.raises(ValueError, match="iters"):
        matfree.spectral_norm(X, iters=0)
    with pytest.raises(ValueError, match="tol"):
        matfree.spectral_norm(X, tol=-1.0)
    with pytest.raises(ValueError, match="seed"):
        matfree.spectral_norm(X, seed=-1)
    with pytest.raises(ValueError, match="nonzero"):
        matfree.stable_rank(torch.zeros(3, 4, dtype=torch.float64))
    with pytest.raises(TypeError, match="gram"):
        matfree.stable_rank(X, gram=1)
    with pytest.raises(ValueError, match="finite"):
        matfree.stable_rank(torch.full((3, 3), math.nan, dtype=torch.float64))
    with pytest.raises(TypeError, match="A"):
        matfree.frobenius_bulk_radius(3.0)
    with pytest.raises(ValueError, match="A"):
        matfree.frobenius_bulk_radius(torch.ones(3, 4))
    with pytest.raises(TypeError, match="A"):
        matfree.frobenius_bulk_radius(torch.ones(3, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="finite"):
        matfree.frobenius_bulk_radius(torch.full((3, 3), math.inf))
