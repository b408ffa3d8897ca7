"""rcteach.linalg: torch's values on the fast path; a failing or NaN-returning element recomputed by the
fallbacks alone, the others untouched; a clear error when every driver fails."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import torch

from rcteach import linalg

NAMES = ("eigvals", "eigvalsh", "svdvals")
MARK = 42.0  # an element with A[0, 0] == MARK is one torch "fails" on, in the tests below


def _inputs(dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    A = torch.randn(2, 3, 6, 6, generator=g, dtype=dtype)
    return {"eigvals": A, "eigvalsh": A + A.mT, "svdvals": torch.randn(2, 3, 6, 4, generator=g, dtype=dtype)}


def _scipy(name, a):
    return {"eigvals": scipy.linalg.eigvals, "eigvalsh": scipy.linalg.eigvalsh,
            "svdvals": scipy.linalg.svdvals}[name](a)


def _failing_on_marked(monkeypatch, mode):
    """torch.linalg.<name> raising ('raise') or giving NaN ('nan') for the marked elements of a batch only."""
    for name in NAMES:
        real = getattr(torch.linalg, name)

        def patched(A, *args, _real=real, **kwargs):
            marked = A[..., 0, 0] == MARK
            if mode == "raise" and marked.any():
                raise torch.linalg.LinAlgError("failed to converge (test)")
            out = _real(A, *args, **kwargs)
            return torch.where(marked[..., None], torch.full_like(out, math.nan), out)
        monkeypatch.setattr(torch.linalg, name, patched)


@pytest.mark.parametrize("name", NAMES)
def test_fast_path_is_torch(name):
    A = _inputs()[name]
    assert torch.equal(getattr(linalg, name)(A), getattr(torch.linalg, name)(A))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("mode", ["raise", "nan"])
@pytest.mark.parametrize("name", NAMES)
def test_a_failing_element_is_recomputed_and_the_others_kept(name, mode, dtype, monkeypatch):
    A = _inputs(dtype)[name].clone()
    A[1, 2, 0, 0] = MARK
    if name == "eigvalsh":
        A[1, 2] = A[1, 2].tril() + A[1, 2].tril(-1).mT
    want = getattr(torch.linalg, name)(A)  # the real solver, before the patch
    _failing_on_marked(monkeypatch, mode)
    got = getattr(linalg, name)(A)
    assert got.shape == want.shape and got.dtype == want.dtype
    good = torch.ones(A.shape[:-2], dtype=torch.bool)
    good[1, 2] = False
    assert torch.equal(got[good], want[good]) if mode == "nan" else torch.allclose(got[good], want[good], rtol=1e-5)
    ref = torch.from_numpy(np.asarray(_scipy(name, A[1, 2].double().numpy())))
    if name == "eigvals":  # unordered: compare as sorted multisets
        g, r = got[1, 2].to(torch.complex128), ref.to(torch.complex128)
        g, r = g[torch.argsort(g.real * 1e3 + g.imag)], r[torch.argsort(r.real * 1e3 + r.imag)]
        assert torch.allclose(g, r, rtol=1e-5, atol=1e-5)
    else:
        assert torch.allclose(got[1, 2].double(), ref.double(), rtol=1e-5, atol=1e-5)


def test_every_driver_failing_is_a_clear_error(monkeypatch):
    _failing_on_marked(monkeypatch, "raise")

    def fail(a):
        raise ValueError("illegal value (test)")
    for name in NAMES:
        monkeypatch.setitem(linalg._FALLBACKS, name, tuple((driver, fail) for driver, _ in linalg._FALLBACKS[name]))
    A = torch.eye(4, dtype=torch.float64).repeat(2, 1, 1)
    A[1, 0, 0] = MARK
    for name in NAMES:
        with pytest.raises(linalg.LinAlgFailure, match=rf"rcteach.linalg.{name}: every driver failed for batch element "
                                                       r"\(1,\) .*failed to converge \(test\).*illegal value \(test\)"):
            getattr(linalg, name)(A)


def test_non_finite_input_is_a_clear_error():
    A = torch.eye(3, dtype=torch.float64).repeat(2, 1, 1)
    A[0, 1, 1] = math.nan
    for name, arg in zip(NAMES, "AHX"):
        with pytest.raises(ValueError, match=rf"{arg} must have finite entries"):
            getattr(linalg, name)(A)


def test_gradients_on_the_fast_path_and_a_warning_on_the_fallback(monkeypatch):
    H = torch.eye(3, dtype=torch.float64).requires_grad_(True)
    linalg.eigvalsh(H).sum().backward()  # d(trace)/dH = I
    assert torch.allclose(H.grad, torch.eye(3, dtype=torch.float64))
    _failing_on_marked(monkeypatch, "raise")
    M = torch.eye(3, dtype=torch.float64)
    M[0, 0] = MARK
    with pytest.warns(UserWarning, match="no gradient"):
        linalg.eigvalsh(M.requires_grad_(True))


@pytest.mark.parametrize("bad, error, match", [
    ([[1.0]], TypeError, "A must be a torch.Tensor"),
    (torch.eye(3, dtype=torch.int64), TypeError, "A must have a real floating dtype"),
    (torch.eye(3, dtype=torch.complex128), TypeError, "A must have a real floating dtype"),
    (torch.ones(3, dtype=torch.float64), ValueError, r"A must have shape \(\*batch, m, n\)"),
    (torch.ones(3, 4, dtype=torch.float64), ValueError, "A must be square"),
])
def test_bad_input(bad, error, match):
    with pytest.raises(error, match=match):
        linalg.eigvals(bad)


@pytest.mark.gpu
def test_cuda_fallback_comes_back_on_the_device(monkeypatch):
    _failing_on_marked(monkeypatch, "raise")
    A = torch.eye(5, dtype=torch.float32, device="cuda").repeat(2, 1, 1)
    A[0, 0, 0] = MARK
    for name in NAMES:
        out = getattr(linalg, name)(A)
        assert out.device.type == "cuda" and torch.isfinite(out).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matmul_is_the_product(dtype):
    """linalg.matmul (numpy's BLAS on the CPU) equals a @ b to rounding, broadcast as torch broadcasts; under
    autograd it is torch's product and keeps the graph."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(5, 7, 3, generator=g, dtype=dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
    for b in (torch.randn(5, 3, 4, generator=g, dtype=dtype), torch.randn(3, 4, generator=g, dtype=dtype),
              a.mT):
        out = linalg.matmul(a, b)
        assert out.dtype == dtype and out.shape == (a @ b).shape
        torch.testing.assert_close(out, a @ b, **tol)
    w = torch.randn(3, 3, generator=g, dtype=dtype, requires_grad=True)
    out = linalg.matmul(a, w)
    assert out.requires_grad
    out.sum().backward()
    torch.testing.assert_close(w.grad, a.sum((0, 1))[:, None].expand(3, 3), **tol)
