"""Unit tests for rcteach.metrics: stable ranks, distance to consensus, spectra."""

import math

import numpy as np
import pytest
import torch

from rcteach import (
    SpectralGap,
    gaussian_tokens,
    mu,
    orthonormal_tokens,
    random_attention,
    spectral_gap,
    spectrum,
    spectrum_distance,
    stable_rank,
)


pytestmark = pytest.mark.usefixtures("cpu_env")


# -- stable_rank -----------------------------------------------------------------------------------

@pytest.mark.parametrize("gram", [False, True])
def test_stable_rank_of_orthonormal_tokens_is_T(gram):
    X = orthonormal_tokens(5, 9, batch=(2, 3), seed=0)
    sr = stable_rank(X, gram=gram)
    assert sr.shape == (2, 3)
    assert torch.allclose(sr, torch.full((2, 3), 5.0, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize("gram", [False, True])
def test_stable_rank_of_rank_one_is_one(gram):
    gen = torch.Generator().manual_seed(1)
    u = torch.randn(3, 6, 1, generator=gen, dtype=torch.float64)
    v = torch.randn(3, 1, 4, generator=gen, dtype=torch.float64)
    assert torch.allclose(stable_rank(u @ v, gram=gram), torch.ones(3, dtype=torch.float64), atol=1e-10)


def test_stable_rank_of_a_diagonal_matrix():
    X = torch.diag(torch.tensor([1.0, 3.0, 2.0], dtype=torch.float64))
    assert stable_rank(X).item() == pytest.approx((1 + 9 + 4) / 9, abs=1e-14)
    assert stable_rank(X, gram=True).item() == pytest.approx((1 + 81 + 16) / 81, abs=1e-14)


def test_stable_rank_matches_explicit_norms():
    X = gaussian_tokens(6, 4, batch=(2, 3), seed=2)
    gram = X @ X.transpose(-2, -1)  # (2, 3, 6, 6)
    top = torch.linalg.eigvalsh(gram)[..., -1]  # ||X||_2^2 without an SVD
    frob = X.square().sum((-2, -1))
    assert torch.allclose(stable_rank(X), frob / top, atol=1e-12)
    # Gram: ||X X^T||_F^2 / ||X X^T||_2^2 = sum s^4 / s_1^4
    assert torch.allclose(stable_rank(X, gram=True), gram.square().sum((-2, -1)) / top.square(), atol=1e-12)
    # and it is the Frobenius stable rank of the Gram matrix
    assert torch.allclose(stable_rank(X, gram=True), stable_rank(gram), atol=1e-12)


def test_stable_rank_bounds_and_batching():
    X = gaussian_tokens(6, 4, batch=(2, 3), seed=3)
    sr, srg = stable_rank(X), stable_rank(X, gram=True)
    assert ((sr >= 1) & (sr <= 4 + 1e-12)).all()
    assert (srg <= sr + 1e-12).all() and (srg >= 1).all()
    assert stable_rank(X[1, 2]).item() == pytest.approx(sr[1, 2].item(), abs=1e-12)
    assert stable_rank(X.float()).dtype == torch.float32


def test_stable_rank_is_scale_invariant():
    X = gaussian_tokens(5, 7, seed=4)
    assert stable_rank(3.7 * X).item() == pytest.approx(stable_rank(X).item(), rel=1e-12)


@pytest.mark.parametrize("gram", [False, True])
def test_stable_rank_of_zero_matrix_is_an_error(gram):
    with pytest.raises(ValueError, match="X must be nonzero"):
        stable_rank(torch.zeros(3, 4, dtype=torch.float64), gram=gram)
    X = gaussian_tokens(3, 4, batch=2, seed=0)
    X[1] = 0
    with pytest.raises(ValueError, match="X"):
        stable_rank(X, gram=gram)


@pytest.mark.parametrize(
    "X, error",
    [
        (torch.ones(4, dtype=torch.float64), ValueError),
        (torch.ones(3, 3, dtype=torch.int64), TypeError),
        (torch.ones(3, 3, dtype=torch.complex128), TypeError),
        ([[1.0, 0.0], [0.0, 1.0]], TypeError),
        (torch.tensor([[1.0, math.nan], [0.0, 1.0]]), ValueError),
        (torch.tensor([[1.0, math.inf], [0.0, 1.0]]), ValueError),
    ],
)
@pytest.mark.parametrize("f", [stable_rank, mu])
def test_token_metric_errors(f, X, error):
    with pytest.raises(error, match="X"):
        f(X)


# -- mu --------------------------------------------------------------------------------------------

def test_mu_is_frobenius_norm_of_PX():
    X = gaussian_tokens(5, 3, batch=(2, 3), seed=5)
    P = torch.eye(5, dtype=torch.float64) - torch.full((5, 5), 0.2, dtype=torch.float64)
    m = mu(X)
    assert m.shape == (2, 3)
    assert torch.allclose(m, (P @ X).square().sum((-2, -1)).sqrt(), atol=1e-12)
    assert mu(X[0, 1]).item() == pytest.approx(m[0, 1].item(), abs=1e-14)


def test_mu_is_zero_exactly_at_consensus():
    x = gaussian_tokens(2, 4, seed=6)[0]
    consensus = x.expand(5, 4)  # every token equal
    assert mu(consensus).item() < 1e-15
    X = gaussian_tokens(5, 4, seed=7)
    assert mu(X).item() > 0.1


def test_mu_is_invariant_under_orthogonal_weights_and_shifts():
    X = gaussian_tokens(6, 4, batch=3, seed=8)
    W = orthonormal_tokens(4, 4, seed=9)  # a Haar orthogonal 4 x 4 matrix
    assert torch.allclose(mu(X @ W), mu(X), atol=1e-12)
    shift = torch.randn(1, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert torch.allclose(mu(X + shift), mu(X), atol=1e-12)  # adding a common token: X + 1 v^T
    assert not torch.allclose(mu(2 * X), mu(X))  # but not invariant to scaling


def test_mu_of_orthonormal_tokens():
    # ||P X||_F^2 = tr(P X X^T P) = tr(P) = T - 1 for orthonormal rows
    X = orthonormal_tokens(5, 8, batch=2, seed=1)
    assert torch.allclose(mu(X), torch.full((2,), math.sqrt(4), dtype=torch.float64), atol=1e-12)


# -- spectrum and spectral_gap ---------------------------------------------------------------------

def test_spectrum_of_a_diagonal_matrix():
    A = torch.diag(torch.tensor([1.0, -3.0, 2.0, 0.5], dtype=torch.float64))
    ev = spectrum(A)
    assert ev.is_complex()
    assert torch.allclose(ev.real, torch.tensor([-3.0, 2.0, 1.0, 0.5], dtype=torch.float64))
    assert (ev.imag == 0).all()


def test_spectrum_sorted_by_decreasing_modulus_and_batched():
    A = random_attention(12, batch=(2, 3), seed=0)
    ev = spectrum(A)
    assert ev.shape == (2, 3, 12)
    mod = ev.abs()
    assert (mod[..., :-1] >= mod[..., 1:]).all()
    ref = np.linalg.eigvals(A[1, 2].numpy())
    assert spectrum_distance(ev[1, 2], torch.from_numpy(ref)) < 1e-12


def test_spectrum_complex_pair():
    A = torch.tensor([[0.0, -2.0], [2.0, 0.0]], dtype=torch.float64)  # eigenvalues +-2i
    ev = spectrum(A)
    assert torch.allclose(ev.abs(), torch.tensor([2.0, 2.0], dtype=torch.float64))
    assert torch.allclose(ev.imag.sort().values, torch.tensor([-2.0, 2.0], dtype=torch.float64))


def test_spectrum_dtypes():
    A = random_attention(6, seed=0)
    assert spectrum(A).dtype == torch.complex128
    assert spectrum(A.float()).dtype == torch.complex64


@pytest.mark.parametrize(
    "A, error",
    [
        (torch.ones(3, 4, dtype=torch.float64), ValueError),
        (torch.ones(3, dtype=torch.float64), ValueError),
        (torch.ones(3, 3, dtype=torch.int64), TypeError),
        (torch.full((3, 3), math.nan), ValueError),
    ],
)
@pytest.mark.parametrize("f", [spectrum, spectral_gap])
def test_spectrum_errors(f, A, error):
    with pytest.raises(error, match="A"):
        f(A)


def test_spectral_gap_of_softmax_attention():
    A = random_attention(32, batch=(2, 3), seed=1)
    gap = spectral_gap(A)
    assert isinstance(gap, SpectralGap)
    assert gap.outlier.shape == (2, 3) and gap.bulk_radius.shape == (2, 3)
    assert (gap.outlier - 1).abs().max() < 1e-12  # A 1 = 1 and the Perron root is 1
    ev = spectrum(A)
    assert torch.equal(gap.bulk_radius, ev[..., 1].abs())
    assert (gap.bulk_radius < 1).all()
    assert torch.allclose(gap.ratio, 1 / gap.bulk_radius, atol=1e-10)


def test_spectral_gap_known_matrix():
    A = torch.diag(torch.tensor([0.5, -4.0, 2.0], dtype=torch.float64))
    gap = spectral_gap(A)
    assert gap.outlier.real.item() == -4.0
    assert gap.bulk_radius.item() == 2.0
    assert gap.ratio.item() == 2.0


# -- spectrum_distance -----------------------------------------------------------------------------

def test_spectrum_distance_ignores_order():
    a = spectrum(random_attention(10, seed=2))
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(0))
    assert spectrum_distance(a, a[perm]) == 0.0
    assert spectrum_distance(a, a.flip(0)) == 0.0


def test_spectrum_distance_uses_the_best_matching():
    a = torch.tensor([0.0, 1.0])
    b = torch.tensor([1.1, 0.05])
    # 0 <-> 0.05 and 1 <-> 1.1 (matching by index would give 1.1)
    assert spectrum_distance(a, b) == pytest.approx(0.1)
    # 0 <-> 0.6, 1 <-> 2 (total 1.6, max 1.0) beats 0 <-> 2, 1 <-> 0.6 (total 2.4, max 2.0)
    assert spectrum_distance(a, torch.tensor([2.0, 0.6])) == pytest.approx(1.0)


def test_spectrum_distance_complex_and_returns_float():
    a = torch.tensor([1j, -1j, 2.0])
    b = torch.tensor([2.0, -1j, 1j + 0.001])
    d = spectrum_distance(a, b)
    assert isinstance(d, float)
    assert d == pytest.approx(0.001, rel=1e-6)


@pytest.mark.parametrize(
    "a, b, match",
    [
        (torch.ones(2, 2), torch.ones(4), "a must be"),
        (torch.ones(4), [1.0, 1.0, 1.0, 1.0], "b must be"),
        (torch.ones(3), torch.ones(4), "same length"),
        (torch.tensor([math.nan, 1.0]), torch.ones(2), "a must have finite"),
        (torch.ones(2), torch.tensor([1.0, math.inf]), "b must have finite"),
    ],
)
def test_spectrum_distance_errors(a, b, match):
    with pytest.raises((ValueError, TypeError), match=match):
        spectrum_distance(a, b)


# -- CUDA ------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_cuda_metrics_match_cpu():
    X = gaussian_tokens(8, 5, batch=(2, 3), seed=0)
    A = random_attention(16, batch=2, seed=0)
    Xc, Ac = X.cuda(), A.cuda()
    for f in (stable_rank, mu):
        out = f(Xc)
        assert out.device.type == "cuda"
        assert torch.allclose(out.cpu(), f(X), atol=1e-10)
    assert torch.allclose(stable_rank(Xc, gram=True).cpu(), stable_rank(X, gram=True), atol=1e-10)
    ev = spectrum(Ac)
    assert ev.device.type == "cuda"
    for b in range(2):
        assert spectrum_distance(ev[b], spectrum(A[b])) < 1e-10
    gap = spectral_gap(Ac)
    assert gap.outlier.device.type == "cuda"
    assert torch.allclose(gap.bulk_radius.cpu(), spectral_gap(A).bulk_radius, atol=1e-10)
