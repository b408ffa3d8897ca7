"""How fast random value matrices turn tangent directions: the Lyapunov gap of products of W_V.

Introduced in chapter "Equilibria of every rank" (book/11_equilibria.md), section on the authors' runs;
chapter "Theorem 2 of Wu et al., settled numerically" uses the Gaussian case.

With RMS LayerNorm a token near consensus, v + delta, is mapped to N((v + delta) W): the feature part of
delta follows the derivative of the projective action u -> u W / |u W|, which contracts tangent
directions by exp(lambda_2 - lambda_1) per layer, lambda_1 >= lambda_2 the top Lyapunov exponents of the
product of the fresh value matrices.  For a law of W invariant under W -> U W V (U, V orthogonal) this gap
is one expectation (Newman): lambda_2 - lambda_1 = E log sin theta(u W, v W) for any orthonormal u, v.
:func:`value_log_contraction` estimates it by Monte Carlo for

* ``W = O + eps G`` (O Haar orthogonal, G with i.i.d. N(0, 1/d) entries): orthogonal values at eps = 0
  (gap 0), slightly non-orthogonal ones for small eps (:func:`rcteach.theory.near_orthogonal_value_lyapunov`);
* ``eps=None``: W = G, Gaussian values (:func:`rcteach.theory.gaussian_value_lyapunov`).

Only u W and v W are needed: for O they are two orthonormal vectors uniform on the sphere (Gram-Schmidt on
two independent Gaussian vectors of R^d), for G two independent N(0, I/d) vectors, so a sample costs O(d), not
O(d^3).
"""

from __future__ import annotations

import math

import torch

from . import _validate
from .device import make_generator

__all__ = ["value_log_contraction"]


def value_log_contraction(d, eps=None, *, samples=100_000, seed=None, generator=None) -> tuple[float, float]:
    """Monte Carlo of lambda_2 - lambda_1 = E log sin theta(u W, v W) (module doc): (mean, standard error).

    ``eps``: W = O + eps G; ``None``: W = G.  float64 on the CPU, batched over ``samples``.
    """
    d = _validate.integer("d", d, minimum=2)
    samples = _validate.integer("samples", samples, minimum=2)
    gen = make_generator(seed, generator, torch.device("cpu"))
    f64 = torch.float64
    G = torch.randn(samples, 2, d, generator=gen, dtype=f64) / math.sqrt(d)  # u G, v G
    if eps is None:
        wu, wv = G[:, 0], G[:, 1]
    else:
        eps = _validate.real("eps", eps, minimum=0.0)
        a, b = torch.randn(2, samples, d, generator=gen, dtype=f64)  # u O, v O: Gram-Schmidt, uniform in law
        a = a / torch.linalg.vector_norm(a, dim=-1, keepdim=True)
        b = b - (a * b).sum(-1, keepdim=True) * a
        b = b / torch.linalg.vector_norm(b, dim=-1, keepdim=True)
        wu, wv = a + eps * G[:, 0], b + eps * G[:, 1]
    cos2 = (wu * wv).sum(-1).square() / (wu.square().sum(-1) * wv.square().sum(-1))
    log_sin = 0.5 * torch.log1p(-cos2)  # (samples,)
    return log_sin.mean().item(), (log_sin.std() / math.sqrt(samples)).item()
