import pytest
import torch

import rcteach
from rcteach import equilibria as eq
from rcteach.norms import normalise

F64 = torch.float64
MASK = rcteach.make_mask("causal", 2)


def test_layer_map_shapes_and_unit_norm():
    W, B = eq.two_token_example()
    X = eq.random_unit_tokens(2, 2, batch=(3,), seed=0)
    Y = eq.layer_map(X, W, B, mask=MASK)
    assert Y.shape == (3, 2, 2)
    assert torch.allclose(Y.norm(dim=-1), torch.ones(3, 2, dtype=F64))


def test_layer_map_is_the_formula():
    """layer_map (rcteach.layers.forward underneath) is normalise(softmax_mask(beta X B X^T) X W_V), to rounding."""
    g = torch.Generator().manual_seed(4)
    X = eq.random_unit_tokens(5, 3, batch=(2,), seed=1)
    W, B = torch.randn(2, 2, 3, 3, generator=g, dtype=F64)
    mask = rcteach.make_mask("causal", 5)
    A = torch.softmax((0.7 * X @ B @ X.mT).masked_fill(~mask, -torch.inf), dim=-1)
    for norm, expected in (("rms", normalise(A @ X @ W, "rms")), (None, A @ X @ W)):
        assert torch.allclose(eq.layer_map(X, W, B, mask=mask, beta=0.7, norm=norm), expected, rtol=1e-13, atol=1e-15)


def test_seed_reproducible():
    assert torch.equal(eq.random_unit_tokens(3, 4, seed=1), eq.random_unit_tokens(3, 4, seed=1))


def test_fixed_points_and_stability():
    W, B = eq.two_token_example(q=0.5)
    for X in (torch.eye(2, dtype=F64), torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=F64)):
        e = eq.analyse(X, W, B, mask=MASK)
        assert e.residual < 1e-14 and abs(e.spectral_radius - 0.5) < 1e-10 and e.stable
    assert eq.analyse(torch.eye(2, dtype=F64), W, B, mask=MASK).rank == 2


def test_tangent_basis_orthonormal_and_tangent():
    X = eq.random_unit_tokens(3, 4, seed=2)
    U = eq.tangent_basis(X)
    assert U.shape == (12, 9)
    assert torch.allclose(U.T @ U, torch.eye(9, dtype=F64), atol=1e-12)
    assert torch.allclose(X.reshape(1, -1) @ U * 0, torch.zeros(1, 9, dtype=F64))
    for i in range(3):
        assert torch.allclose(X[i] @ U[4 * i:4 * i + 4], torch.zeros(9, dtype=F64), atol=1e-12)


def test_polish_converges():
    W, B = eq.two_token_example()
    X = torch.tensor([[1.0, 0.05], [0.1, 1.0]], dtype=F64)
    X = X / X.norm(dim=-1, keepdim=True)
    Xp = eq.polish(X, W, B, mask=MASK)
    assert torch.linalg.matrix_norm(eq.layer_map(Xp, W, B, mask=MASK) - Xp) < 1e-12


def test_numerical_rank_and_unique():
    X = torch.tensor([[1.0, 0.0], [2.0, 0.0]], dtype=F64)
    assert int(eq.numerical_rank(X)) == 1
    S = torch.stack([X, X, X + 1])
    assert len(eq.unique_equilibria(S)) == 2


def test_errors():
    W, B = eq.two_token_example()
    with pytest.raises(ValueError):
        eq.layer_map(torch.ones(2, 3, dtype=F64), W, B)
    with pytest.raises(TypeError):
        eq.layer_map(torch.ones(2, 2, dtype=torch.float32), W, B)
    with pytest.raises(ValueError):
        eq.tangent_basis(torch.ones(2, 2, dtype=F64))
    with pytest.raises(ValueError):
        eq.two_token_example(q=1.5)
    with pytest.raises(ValueError):
        eq.layer_map(eq.random_unit_tokens(2, 2, seed=0), W, B, norm="bad")


def test_triangular_example_matches_two_token_and_shape():
    W, B = eq.triangular_example(2, q=0.5)
    W2, B2 = eq.two_token_example(q=0.5)
    assert torch.equal(W, W2) and torch.equal(B, B2)
    W, B = eq.triangular_example(5, q=0.8)
    assert W.shape == B.shape == (5, 5) and W.dtype == F64
    assert torch.equal(B, torch.triu(torch.ones(5, 5, dtype=F64), 1))
    # telescoping: the uniform average of e_1..e_m times W_V is q^(m-1) e_m / m
    for m in range(1, 6):
        avg = torch.eye(5, dtype=F64)[:m].mean(0) @ W
        assert torch.allclose(avg, 0.8 ** (m - 1) / m * torch.eye(5, dtype=F64)[m - 1], atol=1e-15)


def test_full_rank_radius_is_q():
    for N, q in ((3, 0.5), (4, 0.8)):
        W, B = eq.triangular_example(N, q=q)
        e = eq.analyse(torch.eye(N, dtype=F64), W, B, mask=rcteach.make_mask("causal", N))
        assert e.residual < 1e-14 and abs(e.spectral_radius - q) < 1e-10 and e.rank == N


def test_rank_k_equilibrium_every_rank():
    N = 4
    for k in range(1, N + 1):
        e = eq.rank_k_equilibrium(k, N=N)
        assert e.rank == k and e.residual < 1e-12 and e.stable
        assert torch.allclose(e.X[:k], torch.eye(N, dtype=F64)[:k], atol=1e-12)
        assert torch.allclose(e.X[:, k:], torch.zeros(N, N - k, dtype=F64), atol=1e-12)
    assert eq.rank_k_equilibrium(1, N=3).collapsed


def test_triangular_errors():
    with pytest.raises(ValueError):
        eq.triangular_example(1)
    with pytest.raises(ValueError):
        eq.triangular_example(3, q=1.0)
    with pytest.raises(TypeError):
        eq.triangular_example(3, q="a")
    with pytest.raises(ValueError):
        eq.rank_k_equilibrium(4, N=3)
    with pytest.raises(ValueError):
        eq.rank_k_equilibrium(0, N=3)
    with pytest.raises(ValueError):
        eq.rank_k_equilibrium(1, N=3, steps=-1)
