"""Dense eigenvalues and singular values that do not depend on the CPU: the one place rcteach computes them.

Every eigen- and singular-value decomposition in rcteach (and in the chapters) goes through
:func:`eigvals`, :func:`eigvalsh` and :func:`svdvals`, which return what ``torch.linalg`` returns,
batched over leading dimensions, but survive a LAPACK driver that fails.

Why.  torch's CPU build calls Intel MKL, whose drivers fail on exactly degenerate but valid input,
and *which* inputs fail depends on the CPU and on MKL's code path (``MKL_ENABLE_INSTRUCTIONS``):
``torch.linalg.eigvals`` of the uniform attention 11^T/T (eigenvalues 1, 0, ..., 0) raises
``LinAlgError`` ("failed to converge") for 36 of the sizes T <= 129 on an AMD EPYC (AVX2) and for
another set on an Intel CPU with AVX-512, and float32 ``eigvalsh`` of a nearly rank-one Gram matrix
returns NaN without raising.  A test that passes on one machine would say little about the next.

How.  Each function first calls torch (MKL's ``geev``, ``syevd``, ``gesdd`` on the CPU; torch's CUDA
solvers on a GPU).  That fast path costs one extra reduction (is every result finite?) and no copy.
Then, for each batch element where torch raised ``LinAlgError`` or returned a non-finite value for
a finite input, and only for those, the element goes on the CPU through a chain of other drivers of
scipy's LAPACK (reference LAPACK built on OpenBLAS, a different implementation from MKL), each a
correct algorithm for any input, until one gives finite values.  The element is first divided by a
power of two near its largest entry (exact; the values are multiplied back): scipy 1.17.1's ``geev``
gives the eigenvalues of 1e150 I as 1.49e138, its own scaling of a huge matrix never undone.

* :func:`eigvals`  (general A): torch ``eigvals`` -> scipy ``geev`` (Hessenberg QR with balancing) ->
  the diagonal of the complex Schur form, ``zgees`` (complex arithmetic, no balancing);
* :func:`eigvalsh` (symmetric H): torch ``eigvalsh`` -> scipy ``syevr`` (relatively robust
  representations) -> scipy ``syev`` (implicit QL/QR) in float64;
* :func:`svdvals`  (any X): torch ``svdvals`` -> scipy ``gesdd`` (divide and conquer) -> scipy
  ``gesvd`` (QR iteration), in float64 for float32 input.

(One caller asks LAPACK for less than all values: :func:`rcteach.top_eigen.top_and_rest` takes the
top eigenpair from scipy's ``syevr`` and, where that fails, all eigenvalues from :func:`eigvalsh`.)

Values from a fallback are cast to the dtype torch would have returned and moved to the input's
device; they carry no autograd graph (a ``UserWarning`` says so when the input requires grad; no
rcteach function differentiates through a spectrum).  If every driver fails for a finite element,
:class:`LinAlgFailure` (a ``RuntimeError``) names the function, the element and each driver's
error: a finite input never comes back as NaN.  The input must be a real float32 or float64 tensor with
finite entries (TypeError or ValueError otherwise, naming the argument: MKL answers NaN input with
finite garbage).  ``eigvals_unchecked``, ``eigvalsh_unchecked`` and ``svdvals_unchecked`` skip that
check, one pass over the input, for callers that validated it (:mod:`rcteach._validate`); a non-finite
element is then left as torch returned it.  ``tests/test_degenerate.py`` forces the torch calls to
raise, and to return NaN, and checks every spectral function of rcteach through the fallbacks;
``tests/test_degenerate_mkl.py`` runs the degenerate-input suite under each MKL code path.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from . import _validate

__all__ = ["LinAlgFailure", "eigvals", "eigvalsh", "svdvals", "eigvals_unchecked", "eigvalsh_unchecked",
           "svdvals_unchecked", "matmul"]


def matmul(a, b) -> torch.Tensor:
    """a @ b (batched, broadcast as ``torch.matmul``); for real float CPU tensors that autograd does not record,
    through numpy's matmul (OpenBLAS, one gemm per matrix), the same product to rounding.

    torch's batched CPU kernel is slow on small matrices: measured (AMD EPYC, one thread) 0.87 ms against
    0.15 ms for (4096, 8, 4) x (4096, 4, 4) in float64, 0.125 against 0.02 for (24, 128, 16) x (24, 16, 16) in
    float32, and still 9.3 against 7.2 for (64, 128, 128) x (64, 128, 128) in float64 (10.2 against 6.5 ms for
    the grid's (125, 150, 151) x (125, 151, 150)).  Elsewhere (a GPU, autograd, other dtypes): ``a @ b``."""
    if (a.device.type == "cpu" and b.device.type == "cpu" and a.dtype == b.dtype
            and a.dtype in (torch.float32, torch.float64) and a.dim() >= 2 and b.dim() >= 2
            and not (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad))):
        return torch.from_numpy(np.matmul(a.detach().numpy(), b.detach().numpy()))
    return a @ b


class LinAlgFailure(RuntimeError):
    """Every driver of a decomposition failed on one (finite) batch element."""


def _scipy_geev(a):
    from scipy.linalg import eigvals as geev  # lazy: scipy is slow to import, and only a fallback needs it

    return geev(a, overwrite_a=False, check_finite=False)


def _scipy_zgees(a):
    from scipy.linalg import schur

    return np.diag(schur(a.astype(np.complex128), output="complex", check_finite=False)[0])


def _scipy_syevr(a):
    from scipy.linalg import eigvalsh as syev

    return syev(a, driver="evr", check_finite=False)


def _scipy_syev64(a):
    from scipy.linalg import eigvalsh as syev

    return syev(a.astype(np.float64), driver="ev", check_finite=False)


def _scipy_gesdd64(a):
    from scipy.linalg import svdvals as gesdd

    return gesdd(a.astype(np.float64), check_finite=False)


def _scipy_gesvd64(a):
    from scipy.linalg import svd

    return svd(a.astype(np.float64), compute_uv=False, lapack_driver="gesvd", check_finite=False)


_FALLBACKS = {
    "eigvals": (("scipy geev", _scipy_geev), ("scipy zgees", _scipy_zgees)),
    "eigvalsh": (("scipy syevr", _scipy_syevr), ("scipy syev (float64)", _scipy_syev64)),
    "svdvals": (("scipy gesdd (float64)", _scipy_gesdd64), ("scipy gesvd (float64)", _scipy_gesvd64)),
}


def _robust(name, primary, A):
    """``primary(A)`` (*batch, k), with each failing finite batch element recomputed through ``_FALLBACKS[name]``."""
    try:
        out = primary(A)
    except torch.linalg.LinAlgError:
        out = None  # torch's batched call raises for the whole batch: find the elements one by one
    else:
        if torch.isfinite(out).all():  # the fast path's one extra reduction
            return out
    flat = A.detach().reshape(-1, *A.shape[-2:])
    if out is None:
        dtype = torch.promote_types(A.dtype, torch.complex64) if name == "eigvals" else A.dtype  # torch's
        k = min(A.shape[-2:]) if name == "svdvals" else A.shape[-1]
        out = torch.full((len(flat), k), math.nan, dtype=dtype, device=A.device)
        reasons = ["non-finite values"] * len(flat)
        for i, a in enumerate(flat):
            try:
                out[i] = primary(a)
            except torch.linalg.LinAlgError as e:
                reasons[i] = str(e).splitlines()[0]
    else:
        out = out.detach().reshape(-1, out.shape[-1]).clone()
        reasons = ["non-finite values"] * len(out)
    bad = (~torch.isfinite(out).all(-1)).nonzero()[:, 0].tolist()
    if A.requires_grad:
        warnings.warn(f"rcteach.linalg.{name}: torch's solver failed on {len(bad)} batch element(s); their "
                      "values come from a scipy LAPACK fallback and carry no gradient", UserWarning, stacklevel=3)
    for i in bad:
        a = flat[i].cpu().numpy()
        if np.isfinite(a).all():  # a non-finite element (unchecked callers only) keeps torch's values
            w = _first_finite(name, a, f"torch: {reasons[i]}", _element(i, A.shape[:-2]))
            out[i] = w.to(dtype=out.dtype, device=out.device)
    return out.reshape(*A.shape[:-2], out.shape[-1])


def _element(i, batch) -> tuple:
    """The batch index of the i-th element of the flattened batch."""
    return tuple(int(k) for k in np.unravel_index(i, tuple(batch))) if len(batch) else ()


def _first_finite(name, a, torch_error, element) -> torch.Tensor:
    """The values of one finite element ``a`` (numpy) from the first fallback that gives finite numbers.

    ``a`` is divided by s, the largest power of two <= max|a_ij| (exact), and the values multiplied back by s
    (they are homogeneous of degree one), so that no driver scales a huge or tiny matrix itself (module doc).
    """
    top = float(np.abs(a).max())
    scale = 2.0 ** math.floor(math.log2(top)) if top > 0 else 1.0
    errors = [torch_error]
    for driver, f in _FALLBACKS[name]:
        try:
            w = f(a / scale)
        except (np.linalg.LinAlgError, ValueError) as e:  # scipy's LinAlgError subclasses numpy's
            errors.append(f"{driver}: {e}")
            continue
        if np.isfinite(w).all():
            return torch.from_numpy(np.ascontiguousarray(w * scale))
        errors.append(f"{driver}: non-finite values")
    raise LinAlgFailure(f"rcteach.linalg.{name}: every driver failed for batch element {element} of a finite "
                        f"{a.shape[0]} x {a.shape[1]} matrix ({'; '.join(errors)})")


def _torch_eigvals(A):
    return torch.linalg.eigvals(A)  # looked up at call time, so that tests can make it fail


def _torch_eigvalsh(H):
    return torch.linalg.eigvalsh(H)


def _torch_svdvals(X):
    return torch.linalg.svdvals(X)


def eigvals(A) -> torch.Tensor:
    """Eigenvalues of square A (*batch, n, n), complex (*batch, n), unordered, as ``torch.linalg.eigvals``.

    Survives a failing driver (module doc: torch ``geev``, then scipy ``geev``, then complex Schur).

    Cost.  float64 ``geev`` has a cliff just above n = 500 (one thread, MKL; scipy's OpenBLAS ``geev`` is the same):
    per matrix 75 ms at n = 500 but 140-155 ms at 511 and 513, 265 ms at 512; 420-450 ms at 1000 but 920-960 ms at
    1024.  Likely LAPACK's iparmq, whose aggressive-early-deflation window grows above n = 500, plus cache aliasing
    at powers of two.  Prefer n = 500 (1000) to 512 (1024) where the size is free.  ``eigvalsh`` has no such cliff
    (22 vs 24 ms at 500 vs 512), ``svdvals`` a smaller one (25 vs 37 ms).

    Examples
    --------
    >>> U = torch.full((4, 4), 0.25, dtype=torch.float64)  # 11^T/T, exactly degenerate
    >>> sorted(round(abs(v), 12) for v in rcteach.linalg.eigvals(U).tolist())
    [0.0, 0.0, 0.0, 1.0]
    """
    return eigvals_unchecked(_validate.matrix("A", A, square=True))


def eigvalsh(H) -> torch.Tensor:
    """Eigenvalues of symmetric H (*batch, n, n), real, ascending, as ``torch.linalg.eigvalsh``.

    Only the lower triangle is read.  Survives a failing driver (module doc: torch ``syevd``, then scipy
    ``syevr``, then ``syev`` in float64).
    """
    return eigvalsh_unchecked(_validate.matrix("H", H, square=True))


def svdvals(X) -> torch.Tensor:
    """Singular values of X (*batch, m, n), real (*batch, min(m, n)), descending, as ``torch.linalg.svdvals``.

    Survives a failing driver (module doc: torch ``gesdd``, then scipy ``gesdd``, then ``gesvd``).
    """
    return svdvals_unchecked(_validate.matrix("X", X))


def eigvals_unchecked(A) -> torch.Tensor:
    """:func:`eigvals` without the input checks, for callers that validated A."""
    return _robust("eigvals", _torch_eigvals, A)


def eigvalsh_unchecked(H) -> torch.Tensor:
    """:func:`eigvalsh` without the input checks, for callers that validated H."""
    return _robust("eigvalsh", _torch_eigvalsh, H)


def svdvals_unchecked(X) -> torch.Tensor:
    """:func:`svdvals` without the input checks, for callers that validated X."""
    return _robust("svdvals", _torch_svdvals, X)
