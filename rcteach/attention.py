"""Attention matrices: the i.i.d.-logit model and query-key attention.

Introduced in chapter "Softmax attention at initialisation: the leading 1/T term" (book/01_leading_term.md).

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

The two attention models (``attention=`` in :func:`rcteach.propagate` and
:func:`rcteach.width_stable_ranks`, :data:`ATTENTIONS`): ``"iid"``, logits drawn i.i.d. N(0, s2)
independently of the tokens (:func:`random_attention`), and ``"qk"``, query-key attention A(X) of the
tokens themselves (:func:`qk_attention`).
"""

from __future__ import annotations

import math

import torch

from . import _validate
from .device import make_generator, resolve
from .logits import qk_logits, qk_weights, random_logits
from .masks import check_mask
from .norms import normalise_unchecked
from .theory import ACTIVATIONS, LN2
from .tokens import gaussian_tokens

__all__ = [
    "attention_map",
    "centre",
    "uniform_attention",
    "random_attention",
    "qk_attention",
    "noniso_attention",
    "ATTENTIONS",
]

ATTENTIONS = ("iid", "qk")  # the two attention models: i.i.d. logits, query-key attention A(X)



def uniform_attention(T: int, mask=None, *, device=None, dtype=None) -> torch.Tensor:
    """U: uniform weights over each row's allowed positions, (T, T) (11^T/T without a mask)."""
    T = _validate.integer("T", T, minimum=2)
    device, dtype = resolve(device, dtype)
    if mask is None:
        return torch.full((T, T), 1.0 / T, device=device, dtype=dtype)
    allowed = check_mask(mask, T).to(device=device, dtype=dtype)
    return allowed / allowed.sum(-1, keepdim=True)


def centre(A: torch.Tensor, mask=None) -> torch.Tensor:
    """Subtract from each row of A its mean over the allowed positions.

    Without a mask: A - (A1)1^T/T = A P.  For row-stochastic A: A - U.  Masked positions stay 0.
    """
    A = _validate.matrix("A", A)
    if mask is not None:
        mask = check_mask(mask, A.shape[-1])
        _validate.broadcast("mask", mask.shape[:-2], "A", A.shape[:-2])
    return centre_unchecked(A, mask)


def centre_unchecked(A, mask):
    """:func:`centre` of a validated A and mask (None or boolean (T, T), any device)."""
    if mask is None:
        return A - A.mean(-1, keepdim=True)
    allowed = mask.to(device=A.device, dtype=A.dtype)
    row_mean = A.sum(-1, keepdim=True) / allowed.sum(-1, keepdim=True)  # (*batch, T, 1)
    return A - row_mean * allowed


def attention_map(logits: torch.Tensor, mask=None, *, activation="softmax", bias=0.0, centred=False) -> torch.Tensor:
    """Turn logits (*batch, T, T) into attention weights, restricted to ``mask`` (see module doc)."""
    logits = _validate.matrix("logits", logits, square=True)
    activation = _validate.choice("activation", activation, ACTIVATIONS)
    bias = _validate.bias(activation, bias)
    if mask is not None:
        mask = check_mask(mask, logits.shape[-1]).to(logits.device)
        _validate.broadcast("mask", mask.shape[:-2], "logits", logits.shape[:-2])
    centred = _validate.flag("centred", centred)
    return attention_map_unchecked(logits, mask, activation=activation, bias=bias, centred=centred)


SMALL_SOFTMAX = 16
"""Below this many tokens, on the CPU, :func:`attention_map` computes softmax as exp(l - max l) / sum: torch's
kernel is not vectorised along so short a row.  Measured (AMD EPYC, one thread, 2^18 logits): 4.3x faster at
T = 8 in float64, 5.3x in float32, 3.0x at T = 12; at T = 16 torch's float32 kernel is faster (float64: 2.8x
slower).  The same values to rounding (1 ulp)."""


def _softmax(logits) -> torch.Tensor:
    """softmax(logits) over the last dimension (see :data:`SMALL_SOFTMAX`); the shift by the row maximum is
    detached (softmax does not depend on it), so autograd differentiates the softmax itself."""
    if logits.shape[-1] >= SMALL_SOFTMAX or logits.device.type != "cpu":
        return torch.softmax(logits, dim=-1)
    e = (logits - logits.detach().amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def attention_map_unchecked(logits, mask, *, activation="softmax", bias=0.0, centred=False):
    """:func:`attention_map` of validated arguments, ``mask`` None or on the logits' device: no checks,
    for the layers of :func:`rcteach.propagate`, validated once at their entry."""
    T = logits.shape[-1]
    if activation == "softmax":
        if mask is not None:
            logits = logits.masked_fill(~mask, -math.inf)
        A = _softmax(logits)
    else:
        f = torch.relu(logits) if activation == "relu" else torch.sigmoid(logits + bias)
        if mask is None:
            A = f / T
        else:
            allowed = mask.to(f.dtype)
            A = f * allowed / allowed.sum(-1, keepdim=True)
    return centre_unchecked(A, mask) if centred else A


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

    Examples
    --------
    >>> A = rcteach.random_attention(256, seed=0)  # s2 = ln 2: c = e^{s2} - 1 = 1
    >>> A.shape, bool(torch.allclose(A.sum(-1), torch.ones(256, dtype=torch.float64)))  # row-stochastic
    (torch.Size([256, 256]), True)
    """
    logits = random_logits(T, s2, batch=batch, seed=seed, generator=generator, device=device, dtype=dtype)
    return attention_map(logits, activation=activation, bias=bias, centred=centred)


def qk_attention(X, W_Q, W_K, *, mask=None, beta=1.0, activation="softmax", bias=0.0, centred=False) -> torch.Tensor:
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
    logits = qk_logits(X, W_Q, W_K, beta=beta)  # (*batch, T, T)
    return attention_map(logits, mask, activation=activation, bias=bias, centred=centred)


def noniso_attention(T, d, s2=LN2, *, seeds=1, seed=None, device=None, dtype=None) -> torch.Tensor:
    """Query-key attention (seeds, T, T) on Gaussian tokens with unit-norm rows (the rebuttal's Fig. IX).

    X = RMS-normalised :func:`rcteach.gaussian_tokens` (T, d), so X X^T != I (any gamma = d/T, also
    d < T); W_Q, W_K (d, d) with i.i.d. N(0, sqrt(s2)) entries, so every logit
    x_i^T W_Q W_K^T x_j / sqrt(d) has variance s2.  Tokens are drawn from ``seed``, the weights from
    ``seed + 1`` (both from one fresh generator when ``seed`` is None).
    Introduced in chapter "Correlated tokens: non-isometric inputs and deeper layers"
    (book/15_non_isometric_inputs.md).
    """
    s2 = _validate.real("s2", s2, minimum=0.0)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    device, dtype = resolve(device, dtype)
    gen = make_generator(seed, None, device)
    X = normalise_unchecked(gaussian_tokens(T, d, batch=seeds, generator=gen, device=device, dtype=dtype), "rms")
    if seed is not None:
        gen = make_generator((seed + 1) % 2**64, None, device)
    W_Q, W_K = qk_weights(d, d, s2, batch=(seeds,), generator=gen, device=device, dtype=dtype)
    return qk_attention(X, W_Q, W_K)
