"""Unit tests for rcteach.tokens: orthonormal (Haar) and Gaussian token matrices."""

import math

import pytest
import torch

from rcteach import gaussian_tokens, mu, orthonormal_tokens
from rcteach.tokens import near_consensus

FUNCS = [orthonormal_tokens, gaussian_tokens]


pytestmark = pytest.mark.usefixtures("cpu_env")


# -- shapes, dtypes, seeds (both functions) ------------------------------------------------------

@pytest.mark.parametrize("f", FUNCS)
@pytest.mark.parametrize("batch, shape", [((), ()), (4, (4,)), ((2, 3), (2, 3))])
def test_shapes(f, batch, shape):
    X = f(3, 5, batch=batch, seed=0)
    assert X.shape == (*shape, 3, 5)


@pytest.mark.parametrize("f", FUNCS)
def test_dtype_and_device_defaults(f):
    X = f(3, 5, seed=0)
    assert X.dtype == torch.float64 and X.device == torch.device("cpu")
    assert f(3, 5, seed=0, dtype=torch.float32).dtype == torch.float32


@pytest.mark.parametrize("f", FUNCS)
def test_seed_reproducible(f):
    a = f(3, 5, batch=2, seed=7)
    assert torch.equal(a, f(3, 5, batch=2, seed=7))
    assert not torch.equal(a, f(3, 5, batch=2, seed=8))
    assert not torch.equal(a[0], a[1])  # batch entries are independent draws


@pytest.mark.parametrize("f", FUNCS)
def test_generator_path(f):
    a = f(3, 5, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, f(3, 5, seed=7))
    gen = torch.Generator().manual_seed(7)
    first, second = f(3, 5, generator=gen), f(3, 5, generator=gen)
    assert torch.equal(first, a)
    assert not torch.equal(first, second)  # the generator advances


@pytest.mark.parametrize("f", FUNCS)
def test_seed_and_generator_together_is_an_error(f):
    with pytest.raises(ValueError, match="seed"):
        f(3, 5, seed=0, generator=torch.Generator())


@pytest.mark.parametrize("f", FUNCS)
@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(T=1, d=5), ValueError, "T"),
        (dict(T=2.0, d=5), TypeError, "T"),
        (dict(T=3, d=0), ValueError, "d"),
        (dict(T=3, d="5"), TypeError, "d"),
        (dict(T=3, d=5, batch=0), ValueError, "batch"),
        (dict(T=3, d=5, batch=(2, -1)), ValueError, "batch"),
        (dict(T=3, d=5, batch="2"), TypeError, "batch"),
        (dict(T=3, d=5, dtype=torch.float16), TypeError, "dtype"),
        (dict(T=3, d=5, device="nowhere"), ValueError, "device"),
        (dict(T=3, d=5, seed=-3), ValueError, "seed"),
    ],
)
def test_errors(f, kwargs, error, match):
    with pytest.raises(error, match=match):
        f(**kwargs)


# -- orthonormal_tokens ----------------------------------------------------------------------------

@pytest.mark.parametrize("T, d", [(2, 2), (4, 4), (3, 8), (16, 40)])
def test_rows_are_orthonormal(T, d):
    X = orthonormal_tokens(T, d, batch=(2, 3), seed=1)
    eye = torch.eye(T, dtype=X.dtype)
    assert torch.allclose(X @ X.transpose(-2, -1), eye.expand(2, 3, T, T), atol=1e-12)


def test_rows_are_orthonormal_float32():
    X = orthonormal_tokens(8, 12, batch=3, seed=1, dtype=torch.float32)
    assert torch.allclose(X @ X.transpose(-2, -1), torch.eye(8).expand(3, 8, 8), atol=1e-5)


def test_square_case_is_orthogonal_matrix():
    W = orthonormal_tokens(6, 6, seed=2)
    assert torch.allclose(W.T @ W, torch.eye(6, dtype=W.dtype), atol=1e-12)


def test_more_tokens_than_width_is_refused():
    with pytest.raises(ValueError, match="T must be <= d"):
        orthonormal_tokens(5, 4)


def test_sign_fix_is_exact():
    """X is Q^T of the Gaussian matrix G = Q R with R's diagonal made positive."""
    T, d, seed = 4, 7, 5
    G = torch.randn(2, 3, d, T, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    X = orthonormal_tokens(T, d, batch=(2, 3), seed=seed)
    R = X @ G  # (2, 3, T, T) = Q^T G
    assert torch.allclose(R, R.triu(), atol=1e-12)  # upper triangular
    assert (torch.diagonal(R, dim1=-2, dim2=-1) > 0).all()  # the sign fix
    assert torch.allclose(X.transpose(-2, -1) @ R, G, atol=1e-12)  # G = Q R


def test_distribution_is_sign_symmetric_and_isotropic():
    """Haar rows: E X_ij = 0 (no sign bias from the QR convention) and E X^T X = (T/d) I."""
    T, d, n = 2, 4, 4000
    X = orthonormal_tokens(T, d, batch=n, seed=3)
    # each entry is a coordinate of a uniform unit vector in R^d: sd 1/sqrt(d).
    standard_error = (1 / math.sqrt(d)) / math.sqrt(n)
    means = X.mean(0)  # (T, d)
    assert means.abs().max() < 5 * standard_error
    # The raw QR factor (no sign fix) has a strongly biased diagonal; check ours is not.
    assert torch.diagonal(X, dim1=-2, dim2=-1).mean(0).abs().max() < 5 * standard_error
    second = (X.transpose(-2, -1) @ X).mean(0)  # (d, d)
    assert torch.allclose(second, (T / d) * torch.eye(d, dtype=X.dtype), atol=0.03)


# -- gaussian_tokens -------------------------------------------------------------------------------

def test_gaussian_std_scales_exactly():
    a = gaussian_tokens(3, 5, seed=4)
    assert torch.equal(gaussian_tokens(3, 5, std=2.5, seed=4), 2.5 * a)
    assert torch.equal(gaussian_tokens(3, 5, std=0, seed=4), torch.zeros_like(a))


def test_gaussian_moments():
    X = gaussian_tokens(64, 64, std=0.5, batch=4, seed=0)  # 16384 entries
    assert abs(X.mean().item()) < 5 * 0.5 / 128
    # sd of the sample variance is sqrt(2/n) relative: ~1.1%; allow 6%.
    assert X.var().item() == pytest.approx(0.25, rel=0.06)


@pytest.mark.parametrize("std, error",
                         [(-1.0, ValueError), (math.nan, ValueError), (math.inf, ValueError), ("1", TypeError)])
def test_gaussian_std_errors(std, error):
    with pytest.raises(error, match="std"):
        gaussian_tokens(3, 5, std=std)


# -- CUDA ------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("f", FUNCS)
def test_cuda_output(f):
    X = f(8, 16, batch=2, seed=0, device="cuda")
    assert X.device.type == "cuda" and X.dtype == torch.float32
    assert torch.equal(X, f(8, 16, batch=2, seed=0, device="cuda"))


@pytest.mark.gpu
def test_cuda_orthonormal():
    X = orthonormal_tokens(8, 16, batch=2, seed=0, device="cuda", dtype=torch.float64)
    eye = torch.eye(8, dtype=torch.float64, device="cuda")
    assert torch.allclose(X @ X.transpose(-2, -1), eye.expand(2, 8, 8), atol=1e-12)


# -- gaussian_tokens with correlation rho -----------------------------------------------------------

def test_rho_zero_is_the_default_draw():
    assert torch.equal(gaussian_tokens(4, 6, seed=3), gaussian_tokens(4, 6, rho=0.0, seed=3))


def test_rho_one_gives_identical_tokens():
    X = gaussian_tokens(5, 7, rho=1.0, batch=2, seed=0)
    assert torch.allclose(X, X[..., :1, :].expand_as(X))


def test_rho_is_the_pairwise_correlation():
    X = gaussian_tokens(2, 20000, rho=0.3, std=2.0, batch=8, seed=1)
    cos = (X[..., 0, :] * X[..., 1, :]).sum(-1) / (4.0 * 20000)
    # each estimate has sd ~ sqrt((1 + rho^2) / d) = 0.0074; the mean of 8 about 0.0026
    assert abs(cos.mean().item() - 0.3) < 0.015


@pytest.mark.parametrize("rho, error",
                         [(-0.1, ValueError), (1.5, ValueError), ("0.2", TypeError), (math.nan, ValueError)])
def test_rho_errors(rho, error):
    with pytest.raises(error, match="rho"):
        gaussian_tokens(3, 4, rho=rho)


# -- near_consensus ---------------------------------------------------------------------------------

def test_near_consensus_is_one_unit_cluster_of_width_eps():
    T, d, eps = 64, 32, 1e-3
    X = near_consensus(T, d, eps, seeds=3, seed=0)
    assert X.shape == (3, T, d) and X.dtype == torch.float64
    assert torch.allclose(X.norm(dim=-1), torch.ones(3, T, dtype=torch.float64))
    # mu^2 / T ~ eps^2 E|tangent part of delta_i - mean|^2 = eps^2 (1 - 1/T)(1 - 1/d)
    relative = mu(X) / math.sqrt(T)
    expected = eps * math.sqrt((1 - 1 / T) * (1 - 1 / d))
    assert torch.allclose(relative, torch.full((3,), expected, dtype=torch.float64), rtol=0.1)
    assert torch.equal(X, near_consensus(T, d, eps, seeds=3, seed=0))
    assert not torch.equal(X, near_consensus(T, d, eps, seeds=3, seed=1))


def test_near_consensus_at_eps_zero_is_consensus():
    X = near_consensus(5, 4, 0.0, seeds=2, seed=0)
    assert torch.allclose(X, X[:, :1].expand_as(X))

