"""Simulations that several checks share, computed once per setting.

The eigenvalues of a batch of i.i.d.-logit attention matrices cost O(T^3) each and several checks
measure different statistics of the same law (the bulk radius, the median modulus, the outlier, a
map against softmax on the same logits); so do the stable ranks of one layer's output A X0 W_V
(Frobenius and Gram).  :func:`attention_spectrum` and :func:`width_ranks` keep the
last few results (caches keyed by every argument), so checks that use the same setting and base
seed share one decomposition.  Their measurements are then correlated, which a check against a closed form
does not mind; each check still runs on its own base seeds.
"""

from __future__ import annotations

import functools

import torch

from ..attention import random_attention
from ..metrics import spectrum, stable_ranks_unchecked
from ..width import width_gram_factors


def attention_spectrum(T, s2, seeds, seed, device=None, activation="softmax", bias=0.0, centred=False) -> torch.Tensor:
    """Eigenvalues (seeds, T), sorted by decreasing modulus, of ``seeds`` float64 matrices
    ``random_attention(T, s2, batch=seeds, activation=..., bias=..., centred=..., seed=seed)``.

    The same seed gives the same logits for every activation, so two maps compared "on the same
    logits" share them; and the first n matrices of a batch are the batch of n (the logits are drawn
    in order from one generator), so a smaller batch is read off a larger one already computed.  The
    returned tensor is cached: do not modify it.
    """
    key = (T, s2, seed, device, activation, bias, centred)
    larger = [n for (k, n) in _SPECTRA if k == key and n >= seeds]
    if larger:
        return _SPECTRA[key, min(larger)][:seeds]
    A = random_attention(T, s2, batch=seeds, activation=activation, bias=bias, centred=centred, seed=seed,
                         device=device, dtype=torch.float64)
    _SPECTRA[key, seeds] = spectrum(A)
    while len(_SPECTRA) > _KEEP:
        del _SPECTRA[next(iter(_SPECTRA))]  # the oldest
    return _SPECTRA[key, seeds]


_SPECTRA: dict = {}  # (setting, seeds) -> eigenvalues, oldest first
_KEEP = 64


@functools.lru_cache(maxsize=8)
def width_ranks(T, gamma, s2, seeds, seed, device=None, centred=False) -> tuple[torch.Tensor, torch.Tensor]:
    """Both stable ranks (Frobenius, Gram), each (seeds,), of i.i.d.-attention outputs A X0 W_V (or A_perp X0 W_V),
    drawn exactly in law as :func:`rcteach.width.width_gram_factors` with ``seed``; cached (do not modify them).
    Centred outputs have no dominant singular value: no Lanczos attempt (the same values, to rounding)."""
    return stable_ranks_unchecked(width_gram_factors(T, gamma, s2, seeds=seeds, centred=centred, seed=seed,
                                                     device=device), lanczos=not centred)
