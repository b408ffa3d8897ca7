"""The certified top eigenvalue (rcteach.top_eigen): agreement with LAPACK on random and degenerate matrices,
the certificate's bounds, breakdowns, and the dense fallback when a certificate fails."""

import pytest
import torch

from rcteach import top_eigen

M = 300  # above LANCZOS_MIN_SIZE: top_and_rest tries Lanczos first
assert M >= top_eigen.LANCZOS_MIN_SIZE


def _orthogonal(n, m, g):
    return torch.linalg.qr(torch.randn(n, m, m, generator=g, dtype=torch.float64))[0]


def _with_spectrum(lam, g):
    """U diag(lam) U^T, U Haar-orthogonal, one matrix per row of lam (n, m)."""
    U = _orthogonal(lam.shape[0], lam.shape[1], g)
    return U @ torch.diag_embed(lam) @ U.mT


def _cases():
    g = torch.Generator().manual_seed(0)
    u = torch.randn(3, M, 1, generator=g, dtype=torch.float64)
    Z = torch.randn(3, M, M + 1, generator=g, dtype=torch.float64)
    spiked = u @ u.mT * M + Z @ Z.mT / M
    tail = lambda scale: scale * torch.rand(3, M - 3, generator=g, dtype=torch.float64)  # noqa: E731
    return {
        "rank one": u @ u.mT,
        "rank three": (lambda V: V @ V.mT)(torch.randn(3, M, 3, generator=g, dtype=torch.float64)),
        "spiked Wishart": spiked,
        "repeated top eigenvalue (x3), small rest": _with_spectrum(torch.cat([torch.full((3, 3), 5.0), tail(0.01)], 1),
                                                                   g),
        "near-zero second eigenvalue": _with_spectrum(torch.cat([torch.tensor([[1.0, 1e-9, 0.0]] * 3), tail(0.0)], 1),
                                                      g),
        "spread spectrum (Wishart)": Z @ Z.mT,
        "1e-200 x spiked": 1e-200 * spiked,
        "1e150 x spiked": 1e150 * spiked,  # lam_1^2 still finite
        "float32 spiked": spiked.float(),
        "zero": torch.zeros(2, M, M, dtype=torch.float64),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_top_and_rest_agrees_with_all_eigenvalues(name):
    """lam_1 to 1e-12 (relative) and rest = sum_{i >= 2} lam_i^2 to 1e-12 lam_1^2, Lanczos or its fallback."""
    S = _cases()[name]
    w = torch.linalg.eigvalsh(S.double()).clamp_min(0)
    lam, rest = top_eigen.top_and_rest(S)
    assert lam.dtype == rest.dtype == torch.float64
    scale = w[:, -1].clamp_min(torch.finfo(torch.float64).tiny)
    assert ((lam - w[:, -1]).abs() <= 1e-12 * scale).all(), (lam, w[:, -1])
    assert ((rest - w[:, :-1].square().sum(-1)).abs() <= 1e-12 * scale.square()).all()


@pytest.mark.parametrize("name", list(_cases()))
def test_a_certified_top_eigenvalue_lies_between_its_bounds(name):
    S = _cases()[name]
    top = top_eigen.lanczos_top(S)
    lam1 = torch.linalg.eigvalsh(S.double())[:, -1]
    c = top.certified
    if name in ("rank one", "rank three", "spiked Wishart", "1e-200 x spiked", "1e150 x spiked", "float32 spiked",
                "near-zero second eigenvalue"):
        assert c.all(), (name, top.steps)  # a dominant eigenvalue: certified within a few steps
    if name in ("spread spectrum (Wishart)", "zero"):
        assert not c.any(), name  # no dominant eigenvalue (or none at all): not certified, the dense route
    assert (top.steps <= top_eigen.max_steps(M)).all()
    rel = 1e-13  # LAPACK's own rounding of lam_1 (about m eps)
    assert (top.value[c] <= lam1[c] * (1 + rel)).all()  # a Rayleigh quotient, from below
    assert (top.upper[c] >= lam1[c] * (1 - rel)).all() and (top.upper[c] <= top.value[c] * (1 + top_eigen.TOL)).all()
    assert torch.isinf(top.upper[~c]).all()
    unit = torch.linalg.vector_norm(top.vector[c], dim=-1)
    assert torch.allclose(unit, torch.ones_like(unit), rtol=0, atol=1e-12)


def test_a_failed_certificate_falls_back_to_lapack(monkeypatch):
    S = _cases()["spiked Wishart"]
    assert top_eigen.lanczos_top(S).certified.all()
    monkeypatch.setattr(top_eigen, "TOL", -1.0)  # no upper bound can certify now
    assert not top_eigen.lanczos_top(S).certified.any()
    lam, rest = top_eigen.top_and_rest(S)
    dense = top_eigen._dense_top_and_rest(S)
    assert torch.equal(lam, dense[0]) and torch.equal(rest, dense[1])


def test_lanczos_false_is_the_dense_route():
    """lanczos=False goes straight to LAPACK: the dense route's numbers, for any matrix (the same values as the
    default to 1e-12 where Lanczos would certify)."""
    for name in ("spread spectrum (Wishart)", "spiked Wishart"):
        S = _cases()[name]
        lam, rest = top_eigen.top_and_rest_unchecked(S, lanczos=False)
        dense = top_eigen._dense_top_and_rest(S)
        assert torch.equal(lam, dense[0]) and torch.equal(rest, dense[1])
        lam_d, rest_d = top_eigen.top_and_rest_unchecked(S)
        assert torch.allclose(lam, lam_d, rtol=1e-12, atol=0) and torch.allclose(rest, rest_d, rtol=1e-10, atol=0)


def test_breakdown_is_handled_and_same_seed_same_numbers():
    """diag(2, 1, ..., 1): the Krylov space of any start is invariant after two steps (S q = q + q_1 e_1), and
    the mass outside it (M - 2) is above lam_1^2 = 4: the iteration restarts instead of dividing by beta = 0,
    stays finite, and top_and_rest still gives lam_1 = 2 and rest = M - 1."""
    S = torch.diag(torch.cat([torch.tensor([2.0]), torch.ones(M - 1)])).double()[None]
    top = top_eigen.lanczos_top(S)
    assert torch.isfinite(top.value).all() and torch.isfinite(top.vector).all()
    lam, rest = top_eigen.top_and_rest(S)
    assert abs(lam.item() - 2) < 1e-13 and abs(rest.item() - (M - 1)) < 1e-10
    again = top_eigen.lanczos_top(S)
    assert torch.equal(top.value, again.value) and torch.equal(top.vector, again.vector)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("m", [top_eigen.SYEVR_MIN_SIZE - 1, top_eigen.SYEVR_MIN_SIZE])
def test_top_and_rest_leaves_its_input_as_it_was(m, dtype):
    x = torch.randn(3, m, m + 1, generator=torch.Generator().manual_seed(m), dtype=dtype)
    S = x @ x.mT
    before = S.clone()
    top_eigen.top_and_rest(S)
    assert torch.equal(S, before)
