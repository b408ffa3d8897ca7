"""Input token matrices X0 (tokens are rows: shape (*batch, T, d)).

Introduced in chapter "Rank collapse in attention" (book/intro.md).
"""

from __future__ import annotations

import math

import torch

from . import _validate
from .device import make_generator, resolve
from .norms import normalise_unchecked

__all__ = ["orthonormal_tokens", "orthogonal_matrix", "gaussian_tokens", "near_consensus"]


def orthonormal_tokens(T, d, *, batch=(), seed=None, generator=None, device=None, dtype=None) -> torch.Tensor:
    """T orthonormal tokens in R^d, Haar distributed: X X^T = I_T.

    The rows of X are the first T rows of a Haar-random d x d orthogonal matrix, built as the QR
    factor of a (d, T) standard Gaussian matrix with the sign fix (each column of Q multiplied by
    the sign of R's diagonal, which makes the distribution exactly Haar).

    Parameters
    ----------
    T, d : int
        Tokens and width, ``2 <= T <= d`` (γ = T/d <= 1; more than d orthonormal rows do not exist).
    batch : int or tuple of int
        Leading batch shape.

    Returns
    -------
    Tensor, shape (*batch, T, d)
    """
    T = _validate.integer("T", T, minimum=2)
    d = _validate.integer("d", d, minimum=1)
    if T > d:
        raise ValueError(f"T must be <= d for orthonormal tokens (gamma = T/d <= 1), got T={T}, d={d}")
    return _haar_rows(T, d, batch, seed, generator, device, dtype)


def orthogonal_matrix(d, *, batch=(), seed=None, generator=None, device=None, dtype=None) -> torch.Tensor:
    """A Haar-random orthogonal matrix W (*batch, d, d), d >= 1 (W W^T = I; d = 1: W = +-1).

    The same draws as ``orthonormal_tokens(d, d, ...)`` (the rows of a Haar orthogonal matrix); the
    orthogonal values W_V of a layer (``values="orthogonal"``).
    """
    d = _validate.integer("d", d, minimum=1)
    return _haar_rows(d, d, batch, seed, generator, device, dtype)


def _haar_rows(T, d, batch, seed, generator, device, dtype) -> torch.Tensor:
    """The first T rows (*batch, T, d) of a Haar orthogonal d x d matrix (module doc of orthonormal_tokens),
    1 <= T <= d."""
    batch = _validate.batch_shape(batch)
    device, dtype = resolve(device, dtype)
    gen = make_generator(seed, generator, device)
    G = torch.randn(*batch, d, T, generator=gen, device=device, dtype=dtype)  # (*batch, d, T)
    Q, R = torch.linalg.qr(G)  # Q: (*batch, d, T)
    signs = torch.sgn(torch.diagonal(R, dim1=-2, dim2=-1))  # (*batch, T)
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    return (Q * signs.unsqueeze(-2)).transpose(-2, -1)  # (*batch, T, d)


def gaussian_tokens(T, d, *, std=1.0, rho=0.0, batch=(), seed=None, generator=None, device=None,
                    dtype=None) -> torch.Tensor:
    """Gaussian tokens, shape (*batch, T, d): x_i = std (sqrt(1 - rho) z_i + sqrt(rho) c).

    z_1..z_T and c are i.i.d. N(0, I_d); c is one direction shared by all tokens of a batch element,
    so E||x_i||^2 = std^2 d and E x_i.x_j = rho std^2 d for i != j (pairwise correlation ``rho``,
    the anisotropy of real embeddings).  ``rho=0`` (default): i.i.d. N(0, std^2) entries, and c is
    not drawn (the same numbers as without ``rho``).  Then E mu(X)^2 = std^2 d (T - 1) (1 - rho).
    """
    T = _validate.integer("T", T, minimum=2)
    d = _validate.integer("d", d, minimum=1)
    std = _validate.real("std", std, minimum=0.0)
    rho = _validate.real("rho", rho, minimum=0.0, maximum=1.0)
    batch = _validate.batch_shape(batch)
    device, dtype = resolve(device, dtype)
    gen = make_generator(seed, generator, device)
    X = torch.randn(*batch, T, d, generator=gen, device=device, dtype=dtype)
    if rho > 0.0:
        c = torch.randn(*batch, 1, d, generator=gen, device=device, dtype=dtype)
        X = (1.0 - rho) ** 0.5 * X + rho**0.5 * c
    return std * X


def near_consensus(T, d, eps, *, seeds=1, seed=None, generator=None, device=None, dtype=None) -> torch.Tensor:
    """Unit tokens at distance ~eps from consensus, shape (seeds, T, d): x_i = (v + eps delta_i) / ||v + eps delta_i||.

    v is one uniformly random unit direction per network (shared by its T tokens), delta_i i.i.d.
    N(0, I_d / d), so ||delta_i|| ~ 1 and mu(X) / ||X||_F ~ eps for small eps.  Starts a run at a chosen
    distance from consensus.  Use float64 (the CPU default): the deviations are small.
    Introduced in chapter "Wider reading" (book/16_wider_reading.md).
    """
    T = _validate.integer("T", T, minimum=2)
    d = _validate.integer("d", d, minimum=1)
    eps = _validate.real("eps", eps, minimum=0.0)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    device, dtype = resolve(device, dtype)
    gen = make_generator(seed, generator, device)
    v = torch.randn(seeds, 1, d, generator=gen, device=device, dtype=dtype)
    delta = torch.randn(seeds, T, d, generator=gen, device=device, dtype=dtype) / math.sqrt(d)
    return normalise_unchecked(v / v.norm(dim=-1, keepdim=True) + eps * delta, "rms")
