"""Simulations that several checks share, computed once per setting.

The eigenvalues of a batch of i.i.d.-logit attention matrices cost O(T^3) each and several checks
measure different statistics of the same law (the bulk radius, the median modulus, the outlier, a
map against softmax on the same logits); so do the singular values of one layer's output A X0 W_V
(its Frobenius and Gram stable ranks).  :func:`attention_spectrum` and :func:`width_spectrum` keep the
last few results (LRU caches keyed by every argument), so checks that use the same setting and base
seed share one decomposition.  Their measurements are then correlated, which a check against a closed form
does not mind; each check still runs on its own base seeds.
"""

from __future__ import annotations

import functools

import torch

from ..attention import random_attention
from ..metrics import spectrum
from ..width import width_squared_singular_values


@functools.lru_cache(maxsize=64)
def attention_spectrum(T, s2, seeds, seed, device=None, activation="softmax", bias=0.0, centred=False) -> torch.Tensor:
    """Eigenvalues (seeds, T), sorted by decreasing modulus, of ``seeds`` float64 matrices
    ``random_attention(T, s2, batch=seeds, activation=..., bias=..., centred=..., seed=seed)``.

    The same seed gives the same logits for every activation, so two maps compared "on the same
    logits" share them.  The returned tensor is cached: do not modify it.
    """
    A = random_attention(T, s2, batch=seeds, activation=activation, bias=bias, centred=centred, seed=seed,
                         device=device, dtype=torch.float64)
    return spectrum(A)


@functools.lru_cache(maxsize=8)
def width_spectrum(T, gamma, s2, seeds, seed, device=None, centred=False) -> torch.Tensor:
    """Squared singular values (seeds, min(T, d)) of i.i.d.-attention outputs A X0 W_V (or A_perp X0 W_V):
    :func:`rcteach.width.width_squared_singular_values` with ``seed``, cached (do not modify the result)."""
    return width_squared_singular_values(T, gamma, s2, seeds=seeds, centred=centred, seed=seed, device=device)
