"""Attention matrices: the i.i.d.-logit model and query-key attention.

Shapes: tokens X (*batch, T, d); attention A (*batch, T, T), acting from the left (A X).
For every map, ``A[i, j]`` is the weight token i puts on token j; a mask restricts j to the
positions ``mask[i, j]`` allows (see :mod:`rcteach.masks`).

Maps (``activation``), with n_i the number of positions row i may attend to (T unmasked):

* ``"softmax"``: A_ij = exp(g_ij) / sum_k exp(g_ik) over allowed k.  Row-stochastic: A1 = 1.
* ``"relu"``:    A_ij = max(g_ij, 0) / n_i.
* ``"sigmoid"``: A_ij = sigmoid(g_ij + bias) / n_i.

Centring (``centred=True``) subtracts from each row its mean over the allowed positions.  For
a row-stochastic A this is exactly A - U, with U the uniform attention over the mask (11^T/T for
the complete mask), and without a mask it is A P with P = I - 11^T/T.  It kills the outlier
eigenvalue (A_perp 1 = 0) and keeps the bulk.
"""

from __future__ import annotations

import math

import torch

from . import _validate
from .device import make_generator, resolve
from .masks import check_mask

__all__ = [
    "ACTIVATIONS",
    "LN2",
    "attention_map",
    "centre",
    "uniform_attention",
    "random_attention",
    "attention",
]

ACTIVATIONS = ("softmax", "relu", "sigmoid")
LN2 = math.log(2.0)  # the logit variance of the Mind-the-Gap code: e^g then has variance 1


def uniform_attention(T: int, mask=None, *, device=None, dtype=None) -> torch.Tensor:
    """U: uniform weights over each row's allowed positions, (T, T) (11^T/T without a mask)."""
    device, dtype = resolve(device, dtype)
    if mask is None:
        return torch.full((T, T), 1.0 / T, device=device, dtype=dtype)
    allowed = check_mask(mask, T).to(device=device, dtype=dtype)
    return allowed / allowed.sum(-1, keepdim=True)


def centre(A: torch.Tensor, mask=None) -> torch.Tensor:
    """Subtract from each row of A its mean over the allowed positions.

    Without a mask: A - (A1)1^T/T = A P.  For row-stochastic A: A - U.  Masked positions stay 0.
    """
    if mask is None:
        return A - A.mean(-1, keepdim=True)
    allowed = mask.to(A.dtype)
    row_mean = A.sum(-1, keepdim=True) / allowed.sum(-1, keepdim=True)  # (*batch, T, 1)
    return A - row_mean * allowed


def attention_map(logits: torch.Tensor, mask=None, *, activation="softmax", bias=0.0, centred=False) -> torch.Tensor:
    """Turn logits (*batch, T, T) into attention weights, restricted to ``mask`` (see module doc)."""
    activation = _validate.choice("activation", activation, ACTIVATIONS)
    bias = _validate.real("bias", bias)
    if activation != "sigmoid" and bias != 0.0:
        raise ValueError(f"bias applies only to activation='sigmoid', not {activation!r}")
    T = logits.shape[-1]
    if mask is not None:
        mask = check_mask(mask, T).to(logits.device)
    if activation == "softmax":
        if mask is not None:
            logits = logits.masked_fill(~mask, -math.inf)
        A = torch.softmax(logits, dim=-1)
    else:
        f = torch.relu(logits) if activation == "relu" else torch.sigmoid(logits + bias)
        if mask is None:
            A = f / T
        else:
            allowed = mask.to(f.dtype)
            A = f * allowed / allowed.sum(-1, keepdim=True)
    return centre(A, mask) if centred else A


def random_attention(
    T,
    s2=LN2,
    *,
    batch=(),
    activation="softmax",
    bias=0.0,
    centred=False,
    seed=None,
    generator=None,
    device=None,
    dtype=None,
) -> torch.Tensor:
    """The i.i.d.-logit model of attention at initialisation (Mind the Gap).

    Logits g_ij ~ N(0, s2) i.i.d.; A = activation(g) as in the module doc.  For softmax, the mean
    of the logits cancels, so only s2 matters; c = e^{s2} - 1 sets every scale
    (:mod:`rcteach.theory`).

    Returns
    -------
    Tensor, shape (*batch, T, T)
    """
    T = _validate.integer("T", T, minimum=2)
    s2 = _validate.real("s2", s2, minimum=0.0)
    batch = _validate.batch_shape(batch)
    device, dtype = resolve(device, dtype)
    gen = make_generator(seed, generator, device)
    logits = math.sqrt(s2) * torch.randn(*batch, T, T, generator=gen, device=device, dtype=dtype)
    return attention_map(logits, activation=activation, bias=bias, centred=centred)


def attention(X, W_Q, W_K, *, mask=None, beta=1.0, activation="softmax", bias=0.0, centred=False) -> torch.Tensor:
    """Query-key attention of tokens X: logits beta * (X W_Q)(X W_K)^T / sqrt(d_qk).

    Parameters
    ----------
    X : Tensor, (*batch, T, d)
    W_Q, W_K : Tensor, (d, d_qk) or (*batch, d, d_qk)
    mask : bool Tensor (T, T) or None
        Disallowed positions get no weight.
    beta : float
        Inverse temperature; beta = 0 gives uniform attention over the mask.

    Returns
    -------
    Tensor, shape (*batch, T, T)
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
            raise TypeError(f"{name} must have X's dtype and device ({X.dtype}, {X.device}), got ({W.dtype}, {W.device})")
    if W_K.shape[-1] != W_Q.shape[-1]:
        raise ValueError(f"W_Q and W_K must have the same number of columns d_qk, got {W_Q.shape[-1]} and {W_K.shape[-1]}")
    Q = X @ W_Q  # (*batch, T, d_qk)
    K = X @ W_K  # (*batch, T, d_qk)
    logits = (beta / math.sqrt(Q.shape[-1])) * (Q @ K.transpose(-2, -1))  # (*batch, T, T)
    return attention_map(logits, mask, activation=activation, bias=bias, centred=centred)
