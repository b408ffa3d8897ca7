"""Token-wise normalisation: the LayerNorm and RMS operations, without affine parameters.

Introduced in chapter "Rank collapse in depth" (book/05_depth.md).

``X`` has shape (*batch, T, d), tokens as rows; every token is normalised over its d features,
independently of the others.
"""

from __future__ import annotations

import torch

from . import _validate

__all__ = ["NORMS", "normalise", "normalise_unchecked"]

NORMS = (None, "rms", "layernorm")


def normalise(X, kind) -> torch.Tensor:
    """Token-wise post-normalisation, no affine parameters; X (*batch, T, d) -> same shape.

    ``"rms"``: each token x -> x / ||x|| (unit norm, the LayerNorm of Wu et al.);
    ``"layernorm"``: each token centred over its d features and divided by its standard deviation
    (x - mean(x)) / std(x) (biased std, no epsilon), so its norm is sqrt(d);  ``None``: X unchanged.
    A zero token (or, for layernorm, a constant token) is mapped to zero.
    """
    X = _validate.matrix("X", X)
    return normalise_unchecked(X, _validate.choice("kind", kind, NORMS))


def normalise_unchecked(X, kind) -> torch.Tensor:
    """:func:`normalise` of validated arguments (the layers of :func:`rcteach.propagate`: no checks).

    Each token is first divided by its largest |entry|, so that neither its squared norm nor its
    variance overflows or underflows (a token of entries 1e200 still gets norm 1).
    """
    if kind is None:
        return X
    tiny = torch.finfo(X.dtype).tiny
    X = X / X.abs().amax(-1, keepdim=True).clamp_min(tiny)
    if kind == "rms":
        return X / torch.linalg.vector_norm(X, dim=-1, keepdim=True).clamp_min(tiny)
    Xc = X - X.mean(-1, keepdim=True)
    std = Xc.square().mean(-1, keepdim=True).sqrt()
    return Xc / std.clamp_min(tiny)
