"""Attention logits at initialisation and the leading 1/T term of softmax attention.

Introduced in chapters "Softmax attention at initialisation: the leading 1/T term" (book/01_leading_term.md) and "The
spectral gap" (book/02_spectral_gap.md).

Shapes: logits g (*batch, T, T), with ``g[..., i, j]`` the score of token i for token j;
:func:`rcteach.attention_map` turns them into attention A (*batch, T, T).

* :func:`random_logits`: the i.i.d. model g_ij ~ N(m, s2).
* :func:`qk_logits`, :func:`random_qk_logits`: query-key logits beta (X W_Q)(X W_K)^T / sqrt(d_qk),
  so that ``attention_map(qk_logits(X, W_Q, W_K, beta=b)) == qk_attention(X, W_Q, W_K, beta=b)``;
  :func:`qk_weights` draws W_Q, W_K whose logits on unit-norm tokens have variance s2.
* :func:`leading_term`: U + (1/T) Z P, the first two terms of the softmax in 1/T.
"""

from __future__ import annotations

import math

import torch

from . import _validate
from .device import make_generator, resolve
from .linalg import matmul

__all__ = ["random_logits", "qk_logits", "qk_weights", "random_qk_logits", "leading_term"]


def random_logits(T, s2, *, m=0.0, batch=(), seed=None, generator=None, device=None, dtype=None) -> torch.Tensor:
    """I.i.d. Gaussian logits g_ij ~ N(m, s2), shape (*batch, T, T).

    ``attention_map(random_logits(T, s2, seed=k))`` equals ``random_attention(T, s2, seed=k)`` for
    ``m = 0`` (same draws), and to float64 round-off for any m: the mean cancels in the softmax.
    """
    T = _validate.integer("T", T, minimum=2)
    s2 = _validate.real("s2", s2, minimum=0.0)
    m = _validate.real("m", m)
    batch = _validate.batch_shape(batch)
    device, dtype = resolve(device, dtype)
    gen = make_generator(seed, generator, device)
    g = math.sqrt(s2) * torch.randn(*batch, T, T, generator=gen, device=device, dtype=dtype)
    return g + m if m != 0.0 else g


def qk_logits(X, W_Q, W_K, *, beta=1.0) -> torch.Tensor:
    """Query-key logits beta (X W_Q)(X W_K)^T / sqrt(d_qk) of tokens X.

    Parameters
    ----------
    X : Tensor, (*batch, T, d)
    W_Q, W_K : Tensor, (d, d_qk) or (*batch, d, d_qk)
    beta : float
        Inverse temperature.

    Returns
    -------
    Tensor, shape (*batch, T, T); its rank is at most d_qk.
    """
    X = _validate.matrix("X", X, min_rows=2)
    W_Q = _validate.matrix("W_Q", W_Q)
    W_K = _validate.matrix("W_K", W_K)
    beta = _validate.real("beta", beta)
    d = X.shape[-1]
    for name, W in (("W_Q", W_Q), ("W_K", W_K)):
        if W.shape[-2] != d:
            raise ValueError(f"{name} must have {d} rows to match X's width, got shape {tuple(W.shape)}")
        if W.dtype != X.dtype or W.device != X.device:
            raise TypeError(f"{name} must have X's dtype and device ({X.dtype}, {X.device}), got ({W.dtype}, "
                            f"{W.device})")
    batch = _validate.broadcast("W_Q", W_Q.shape[:-2], "X", X.shape[:-2])
    _validate.broadcast("W_K", W_K.shape[:-2], "X and W_Q", batch)
    if W_K.shape[-1] != W_Q.shape[-1]:
        raise ValueError(f"W_Q and W_K must have the same number of columns d_qk, got {W_Q.shape[-1]} and "
                         f"{W_K.shape[-1]}")
    return qk_logits_unchecked(X, W_Q, W_K, beta)


def qk_logits_unchecked(X, W_Q, W_K, beta):
    """:func:`qk_logits` of validated arguments: no checks (the layers of :func:`rcteach.propagate`)."""
    return _scores(matmul(X, W_Q), matmul(X, W_K), beta)  # queries and keys (*batch, T, d_qk)


def _scores(Q, K, beta):
    """beta Q K^T / sqrt(d_qk) of queries and keys Q, K (*batch, T, d_qk): logits (*batch, T, T)."""
    return (beta / math.sqrt(Q.shape[-1])) * matmul(Q, K.transpose(-2, -1))


def qk_weights(d, d_qk, s2, *, batch=(), generator=None, device=None, dtype=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Query and key weights W_Q, W_K (*batch, d, d_qk) whose logits on unit-norm tokens have variance s2.

    Entries i.i.d. N(0, sigma^2) with sigma^2 = sqrt(s2) for both, so that by
    ``theory.logit_variance`` the logits beta (X W_Q)(X W_K)^T / sqrt(d_qk) of tokens of norm r have
    variance beta^2 sigma^4 r^4 = beta^2 s2 r^4 (exactly s2 for unit-norm tokens and beta = 1).
    Draws W_Q first, then W_K, from ``generator``.  Callers validate (no checks here).
    """
    sigma = s2**0.25
    W_Q = sigma * torch.randn(*batch, d, d_qk, generator=generator, device=device, dtype=dtype)
    W_K = sigma * torch.randn(*batch, d, d_qk, generator=generator, device=device, dtype=dtype)
    return W_Q, W_K


def random_qk_logits(
    T,
    d,
    d_qk,
    *,
    token_norm_sq=None,
    sigma_q=None,
    sigma_k=None,
    beta=1.0,
    batch=(),
    seed=None,
    generator=None,
    device=None,
    dtype=None,
) -> torch.Tensor:
    """Query-key logits at initialisation, on orthogonal tokens of norm r, shape (*batch, T, T).

    The logits beta (X W_Q)(X W_K)^T / sqrt(d_qk) (:func:`qk_logits`) of X = r * ``orthonormal_tokens(T, d)``
    (r^2 = ``token_norm_sq``, default d: LayerNorm-ed tokens) and W_Q, W_K (d, d_qk) with i.i.d.
    N(0, sigma_q^2), N(0, sigma_k^2) entries (default sigma = 1/sqrt(d)), fresh for every batch element.
    Each logit has variance ``theory.logit_variance(sigma_q, sigma_k, r^2, beta=beta)`` = beta^2
    sigma_q^2 sigma_k^2 r^4 whatever d_qk is (1 with the defaults); unlike the i.i.d. model, the logits
    of one row share the query q_i and those of one column share the key k_j.

    Drawn without forming X or W: Q = X W_Q and K = X W_K are drawn directly as independent T x d_qk
    matrices of i.i.d. N(0, r^2 sigma_q^2) and N(0, r^2 sigma_k^2) entries.  This is exact in law, not an
    approximation: the columns of W_Q are i.i.d. N(0, sigma_q^2 I_d), independent of X, so given X the
    columns X w of Q are i.i.d. N(0, sigma_q^2 X X^T) = N(0, r^2 sigma_q^2 I_T) (X X^T = r^2 I_T), a law
    that does not depend on X; likewise K, independent of Q since W_K is independent of W_Q.  That takes
    2 T d_qk normals instead of T d + 2 d d_qk and a QR.  The draws (Q, then K) differ from those of
    the explicit construction with the same seed; only their law is the same.

    Parameters
    ----------
    T, d, d_qk : int
        Tokens, width (``T <= d``: orthogonal tokens exist) and query-key width.
    """
    T = _validate.integer("T", T, minimum=2)
    d = _validate.integer("d", d, minimum=1)
    if T > d:
        raise ValueError(f"T must be <= d for orthogonal tokens (gamma = T/d <= 1), got T={T}, d={d}")
    d_qk = _validate.integer("d_qk", d_qk, minimum=1)
    r2 = float(d) if token_norm_sq is None else _validate.real("token_norm_sq", token_norm_sq, minimum=0.0)
    sigma_q = 1 / math.sqrt(d) if sigma_q is None else _validate.real("sigma_q", sigma_q, minimum=0.0)
    sigma_k = 1 / math.sqrt(d) if sigma_k is None else _validate.real("sigma_k", sigma_k, minimum=0.0)
    beta = _validate.real("beta", beta)
    batch = _validate.batch_shape(batch)
    device, dtype = resolve(device, dtype)
    gen = make_generator(seed, generator, device)
    r = math.sqrt(r2)
    Q = (r * sigma_q) * torch.randn(*batch, T, d_qk, generator=gen, device=device, dtype=dtype)
    K = (r * sigma_k) * torch.randn(*batch, T, d_qk, generator=gen, device=device, dtype=dtype)
    return _scores(Q, K, beta)


def leading_term(logits, s2, *, m=0.0) -> torch.Tensor:
    """The softmax of i.i.d. N(m, s2) logits to first order in 1/T: U + (1/T) Z P.

    Z_ij = e^{g_ij} / E e^g - 1 = e^{g_ij - m - s2/2} - 1 (i.i.d., mean 0, variance c = e^{s2} - 1),
    U = 11^T/T and (Z P)_ij = Z_ij - mean_k Z_ik.  Every row of the result sums to 1 exactly; it
    differs from softmax(logits) by O(c / T^{3/2}) per entry.

    Parameters
    ----------
    logits : Tensor, (*batch, T, T)
    s2, m : float
        The variance and mean the logits were drawn with.

    Returns
    -------
    Tensor, shape (*batch, T, T)
    """
    logits = _validate.matrix("logits", logits, square=True)
    s2 = _validate.real("s2", s2, minimum=0.0)
    m = _validate.real("m", m)
    T = logits.shape[-1]
    Z = torch.exp(logits - (m + s2 / 2)) - 1  # (*batch, T, T)
    if not torch.isfinite(Z).all():
        raise ValueError(f"logits must be of the size N({m}, {s2}) draws have: e^(g - m - s2/2) overflows "
                         f"{logits.dtype} (max logit {logits.max().item():.3g})")
    return 1.0 / T + (Z - Z.mean(-1, keepdim=True)) / T
