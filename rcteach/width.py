"""Rank collapse in width: the stable rank of one attention layer's output A X0 W_V.

Introduced in chapter "Rank collapse in width" (book/04_width.md).

Model (Mind the Gap): X0 (T, d) has orthonormal rows, W_V (d, d) has i.i.d. N(0, 1) entries, so
X0 W_V has exactly i.i.d. N(0, 1) entries; A is random attention, T x T.  The stable rank is
scale-invariant, so the variance of W_V does not matter.  Two attention models:

* ``attention="iid"``: the i.i.d.-logit model, :func:`rcteach.random_attention` with variance ``s2``,
  applied to Y = X0 W_V sampled directly as a (T, d) standard Gaussian matrix;
* ``attention="qk"``: query-key attention :func:`rcteach.qk_attention` on Haar-orthonormal tokens X0,
  with W_Q, W_K (d, d_qk) from :func:`rcteach.logits.qk_weights` (i.i.d. N(0, sqrt(s2)) entries), so
  the logits have variance ``s2`` (:func:`rcteach.theory.logit_variance` with unit token norm), and
  Y = X0 W_V built explicitly.

With ``skip=a`` the output is X0 + a A X0 W_V (a skip connection), and ``norm`` normalises it token by
token (:func:`rcteach.norms.normalise`: the blocks "A + skip", "A + LN", "A + skip + LN" of the authors'
grid at layer 1).  For Gaussian W_V, X0 W_V has the same law given X0 whatever X0 is, so for the i.i.d.
model X0 (Haar orthonormal) and Y are drawn independently.

Stable ranks (see :mod:`rcteach.metrics`): ``gram=False`` gives sum s_i^2 / s_1^2 (Frobenius),
``gram=True`` gives sum s_i^4 / s_1^4 (the Gram matrix's, as in the Mind-the-Gap code).  They are
computed from the smaller Gram matrix of the output, its trace and its top eigenvalue
(:func:`rcteach.metrics.stable_ranks_unchecked`: certified Lanczos for large T, else LAPACK), which is
cheaper than an SVD of the (T, d) output and exact up to float64 round-off.
"""

from __future__ import annotations

import torch

from . import _validate
from .attention import ATTENTIONS, LN2, qk_attention, random_attention
from .device import make_generator, resolve
from .grid_kernels import _mm_lower, bartlett
from .linalg import matmul
from .logits import qk_weights
from .metrics import squared_singular_values, stable_ranks_unchecked
from .norms import NORMS, normalise_unchecked
from .tokens import gaussian_tokens, orthonormal_tokens

__all__ = ["width_dims", "width_outputs", "width_gram_factors", "stable_ranks_of", "width_stable_ranks",
           "width_squared_singular_values", "width_point", "noniso_width_ranks"]


def width_dims(T, gamma) -> tuple[int, int]:
    """(T, d) with d = round(T / gamma), the width for a token-to-width ratio gamma = T/d."""
    T = _validate.integer("T", T, minimum=2)
    gamma = _validate.real("gamma", gamma, positive=True)
    return T, max(1, round(T / gamma))


def width_outputs(T, gamma, s2=LN2, *, seeds=1, centred=False, attention="iid", d_qk=64, skip=None, seed=None,
                  generator=None, device=None, dtype=None) -> torch.Tensor:
    """One attention layer's output A X0 W_V (or A_perp X0 W_V, or X0 + skip * A X0 W_V), (seeds, T, d):
    the draws of :func:`width_stable_ranks` (same arguments, same numbers), before any normalisation."""
    T, d = width_dims(T, gamma)
    s2 = _validate.real("s2", s2, minimum=0.0)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    attention = _validate.choice("attention", attention, ATTENTIONS)
    centred = _validate.flag("centred", centred)
    if skip is not None:
        skip = _validate.real("skip", skip)
    device, dtype = resolve(device, dtype)
    gen = make_generator(seed, generator, device)
    if attention == "iid":
        A = random_attention(T, s2, batch=seeds, centred=centred, generator=gen, device=device, dtype=dtype)
        Y = torch.randn(seeds, T, d, generator=gen, device=device, dtype=dtype)  # = X0 W_V in law
        if skip is not None:  # X0 W_V has the same law whatever X0 is: X0 drawn on its own
            X0 = orthonormal_tokens(T, d, batch=seeds, generator=gen, device=device, dtype=dtype)
    else:
        d_qk = _validate.integer("d_qk", d_qk, minimum=1)
        if T > d:
            raise ValueError(f"attention='qk' needs gamma <= 1 (orthonormal tokens), got T={T} > d={d}")
        X0 = orthonormal_tokens(T, d, batch=seeds, generator=gen, device=device, dtype=dtype)  # (seeds, T, d)
        W_Q, W_K = qk_weights(d, d_qk, s2, batch=(seeds,), generator=gen, device=device, dtype=dtype)
        W_V = torch.randn(seeds, d, d, generator=gen, device=device, dtype=dtype)
        A = qk_attention(X0, W_Q, W_K, centred=centred)  # (seeds, T, T)
        Y = X0 @ W_V  # (seeds, T, d)
    out = A @ Y  # (seeds, T, d)
    return out if skip is None else X0 + skip * out


def width_gram_factors(T, gamma, s2=LN2, *, seeds=1, centred=False, seed=None, device=None) -> torch.Tensor:
    """F (seeds, T, min(T, d)) whose Gram matrix F F^T has the law of (A Y)(A Y)^T, Y = X0 W_V: one i.i.d.-logit
    layer's output (no skip, no normalisation), float64.

    Exact in law, not the draws of :func:`width_outputs`: given A, (A Y)(A Y)^T = A W A^T with W = Y Y^T ~
    Wishart_T(d, I), and W = L L^T with L the (T, T) Bartlett factor (:func:`rcteach.grid_kernels.bartlett`), so
    F = A L for d >= T (T^2/2 normals and a T x T product instead of T d); for d < T, F = A Y itself.  The
    singular values of F and A Y have the same law, hence so do both stable ranks.  A from ``seed``, then L.
    """
    T, d = width_dims(T, gamma)
    s2 = _validate.real("s2", s2, minimum=0.0)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    centred = _validate.flag("centred", centred)
    device, dtype = resolve(device, torch.float64)
    gen = make_generator(seed, None, device)
    A = random_attention(T, s2, batch=seeds, centred=centred, generator=gen, device=device, dtype=dtype)
    if d < T:
        return matmul(A, torch.randn(seeds, T, d, generator=gen, device=device, dtype=dtype))
    return _mm_lower(A, bartlett(T, d, gens=[gen], seeds=seeds, dtype=dtype, device=device))  # BLAS trmm


def stable_ranks_of(out, *, norm=None, gram=False, lanczos=True) -> torch.Tensor:
    """Stable ranks (seeds,) of layer outputs ``out`` (seeds, T, d), normalised token by token first (``norm``);
    ``lanczos=False`` for outputs without a dominant singular value (:func:`rcteach.metrics.stable_ranks_unchecked`)."""
    out = normalise_unchecked(out, _validate.choice("norm", norm, NORMS))
    ranks = stable_ranks_unchecked(out, lanczos=lanczos)[int(_validate.flag("gram", gram))]  # NaN where out = 0
    if torch.isnan(ranks).any():
        raise ValueError("the layer output is zero (at s2 = 0 attention is uniform and A_perp = 0); "
                         "its stable rank is undefined")
    return ranks


def _output_squared_singular_values(out) -> torch.Tensor:
    """Squared singular values (seeds, min(T, d)), descending, of layer outputs ``out`` (seeds, T, d); ValueError
    where one is zero (A_perp = 0 at s2 = 0)."""
    sq = squared_singular_values(out)  # (seeds, min(T, d)), descending
    if not (sq[..., 0] > 0).all():
        raise ValueError("the layer output is zero (at s2 = 0 attention is uniform and A_perp = 0); "
                         "its stable rank is undefined")
    return sq


def width_stable_ranks(T, gamma, s2=LN2, *, seeds=1, centred=False, gram=False, attention="iid", d_qk=64, skip=None,
                       norm=None, seed=None, generator=None, device=None, dtype=None) -> torch.Tensor:
    """Stable rank of one attention layer's output, A X0 W_V (or A_perp X0 W_V), over seeds.

    Parameters
    ----------
    T : int
        Number of tokens (>= 2).
    gamma : float
        gamma = T / d > 0; the width is d = round(T / gamma).  ``attention="qk"`` needs gamma <= 1
        (T orthonormal tokens in R^d).
    s2 : float
        Logit variance; c = e^{s2} - 1.
    seeds : int
        Number of independent draws, batched (leading dimension of the result).
    centred : bool
        Use centred attention A_perp = A - 11^T/T instead of A.
    gram : bool
        False: Frobenius stable rank sum s_i^2 / s_1^2; True: Gram stable rank sum s_i^4 / s_1^4.
    attention : {"iid", "qk"}
        The attention model (module doc).
    d_qk : int
        Query-key width for ``attention="qk"`` (ignored otherwise).
    skip : float, optional
        Output X0 + skip * A X0 W_V instead of A X0 W_V (W_V with N(0, 1) entries, as in the authors' grid).
    norm : {None, "rms", "layernorm"}
        Token-wise normalisation of the output (after the skip).
    seed, generator, device, dtype
        Randomness and placement (float64 on the CPU by default).

    Returns
    -------
    Tensor, shape (seeds,)
        One stable rank per draw.

    Notes
    -----
    Predictions: sr(A X0 W) -> 1 + c (:func:`rcteach.theory.width_stable_rank`), Gram version
    -> 1; sr(A_perp X0 W) / T -> :func:`rcteach.theory.centred_width_slope` (i.i.d. model only);
    with a skip a, sr -> 1 + c + gamma / a^2, normalised or not (:func:`rcteach.theory.skip_width_stable_rank`).

    Examples
    --------
    >>> sr = rcteach.width_stable_ranks(256, 0.5, seeds=4, seed=0)  # T = 256 tokens, d = 512
    >>> sr.shape, round(sr.mean().item(), 2)  # 1 + c = 2 at s2 = ln 2, less O(1/T)
    (torch.Size([4]), 1.92)
    """
    _validate.choice("norm", norm, NORMS)
    _validate.flag("gram", gram)
    out = width_outputs(T, gamma, s2, seeds=seeds, centred=centred, attention=attention, d_qk=d_qk, skip=skip,
                        seed=seed, generator=generator, device=device, dtype=dtype)
    return stable_ranks_of(out, norm=norm, gram=gram)


def width_point(T, gamma, s2=LN2, *, centred=False, seeds=1, seed=None, device=None, dtype=None) -> dict:
    """Both stable ranks of one i.i.d.-logit layer from the same draws: a point of :func:`rcteach.sweep.sweep`.

    Returns {"stable_rank": Frobenius sum s^2/s_1^2, "stable_rank_gram": Gram sum s^4/s_1^4} of
    :func:`width_stable_ranks` (the same numbers for the same seed), each (seeds,).
    """
    out = width_outputs(T, gamma, s2, seeds=seeds, centred=centred, seed=seed, device=device, dtype=dtype)
    return {"stable_rank": stable_ranks_of(out, gram=False), "stable_rank_gram": stable_ranks_of(out, gram=True)}


def width_squared_singular_values(T, gamma, s2=LN2, *, seeds=1, centred=False, attention="iid", d_qk=64, skip=None,
                                  seed=None, generator=None, device=None, dtype=None) -> torch.Tensor:
    """Squared singular values (seeds, min(T, d)), descending, of one attention layer's output (the draws of
    :func:`width_outputs` and :func:`width_stable_ranks`, same arguments): the spectrum behind both stable
    ranks, for a caller that needs both or more.  A ValueError when an output is zero."""
    out = width_outputs(T, gamma, s2, seeds=seeds, centred=centred, attention=attention, d_qk=d_qk, skip=skip,
                        seed=seed, generator=generator, device=device, dtype=dtype)
    return _output_squared_singular_values(out)


def noniso_width_ranks(T, d, s2=LN2, *, seeds=1, seed=0, device=None) -> torch.Tensor:
    """Frobenius stable rank sum s_i^2 / s_1^2 of A_perp X0 W_V per network, shape (seeds,), float64 on the CPU.

    A_perp: i.i.d. centred attention with logit variance ``s2``; X0 (T, d): Gaussian tokens with unit-norm
    rows, so X0 X0^T != I (any gamma = T/d, also d < T, where the rank is at most d); W_V (d, d) with
    i.i.d. N(0, 1) entries (the stable rank is scale-free).  All drawn, in that order, from one generator
    seeded with ``seed``.  Introduced in chapter "Correlated tokens: non-isometric inputs and deeper
    layers" (book/15_non_isometric_inputs.md); :func:`rcteach.theory.noniso_width_slope` predicts it.
    """
    T = _validate.integer("T", T, minimum=2)
    d = _validate.integer("d", d, minimum=1)
    s2 = _validate.real("s2", s2, minimum=0.0)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    device, _ = resolve(device)
    g = make_generator(_validate.seed(seed), None, device)
    f64 = torch.float64
    A = random_attention(T, s2, batch=seeds, centred=True, generator=g, device=device, dtype=f64)
    X = normalise_unchecked(gaussian_tokens(T, d, batch=seeds, generator=g, device=device, dtype=f64), "rms")
    W_V = torch.randn(seeds, d, d, generator=g, device=device, dtype=f64)
    return stable_ranks_of(matmul(matmul(A, X), W_V), lanczos=False).cpu()  # A_perp: no dominant singular value
