"""Relatives of centred attention that move the outlier: differential attention.

Introduced in chapter "Centred attention" (book/03_centred_attention.md).

Differential attention (Ye et al., the Diff Transformer) subtracts two softmax attention maps,
D = A1 - lam A2.  Both are row-stochastic, so D 1 = (1 - lam) 1 exactly: the outlier moves from
1 to 1 - lam (lam = 1 gives 0, like centring).  In the i.i.d.-logit model with independent A1,
A2, the rest of the spectrum fills a disc of radius about sqrt((1 + lam^2) c / T)
(:func:`rcteach.theory.differential_bulk_radius`).
"""

from __future__ import annotations

import math

import torch

from . import _validate
from .attention import attention_map
from .device import make_generator, resolve
from .theory import LN2

__all__ = ["random_differential_attention"]


def random_differential_attention(T, lam, s2=LN2, *, batch=(), seed=None, generator=None, device=None,
                                  dtype=None) -> torch.Tensor:
    """Differential attention D = A1 - lam A2 of two independent i.i.d.-logit softmax maps.

    Parameters
    ----------
    T : int
        Number of tokens (>= 2).
    lam : float
        The subtraction weight lambda (any real; the Diff Transformer uses 0 < lam < 1).
    s2 : float
        Logit variance of both maps (logits i.i.d. N(0, s2)); c = e^{s2} - 1.
    batch : int or tuple of int
        Leading batch shape.
    seed, generator, device, dtype
        Randomness and placement (float64 on the CPU by default).

    Returns
    -------
    Tensor, shape (*batch, T, T)
        Rows sum to 1 - lam exactly (up to round-off).
    """
    T = _validate.integer("T", T, minimum=2)
    lam = _validate.real("lam", lam)
    s2 = _validate.real("s2", s2, minimum=0.0)
    batch = _validate.batch_shape(batch)
    device, dtype = resolve(device, dtype)
    gen = make_generator(seed, generator, device)
    logits = math.sqrt(s2) * torch.randn(2, *batch, T, T, generator=gen, device=device, dtype=dtype)
    A = attention_map(logits)  # (2, *batch, T, T): A1 and A2
    return A[0] - lam * A[1]
