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

Only the angle between u W and v W is needed, and it is drawn exactly in law from O(1) numbers a sample, not
O(d^3) (nor O(d)).  The angle is unchanged by W -> W V (V orthogonal), so take u O = e_1, v O = e_2: for O
(u O, v O) is a uniform orthonormal pair, independent of G, and (g_1 V, g_2 V) has the law of (g_1, g_2), the
rows u G, v G (i.i.d. N(0, I/d)).  Then u W = e_1 + eps g_1 and v W = e_2 + eps g_2, and the angle depends on
g_1, g_2 through their first two coordinates (4 normals) and the Gram matrix of the other d - 2, which is
Wishart_2(d - 2, I)/d = L L^T/d with L the 2 x 2 Bartlett factor (:func:`rcteach.grid_kernels.bartlett`).  For
W = G, u G and v G are two i.i.d. N(0, I/d) vectors: their Gram matrix is L L^T/d with L = bartlett(2, d), and
cos^2 theta = L_10^2/(L_10^2 + L_11^2) (a Beta(1/2, (d - 1)/2) variable).
"""

from __future__ import annotations

import math

import torch

from . import _validate
from .device import make_generator
from .grid_kernels import bartlett

__all__ = ["value_log_contraction"]


def value_log_contraction(d, eps=None, *, samples=100_000, seed=None, generator=None) -> tuple[float, float]:
    """Monte Carlo of lambda_2 - lambda_1 = E log sin theta(u W, v W) (module doc): (mean, standard error).

    ``eps``: W = O + eps G; ``None``: W = G.  float64 on the CPU, batched over ``samples``.
    """
    d = _validate.integer("d", d, minimum=2)
    samples = _validate.integer("samples", samples, minimum=2)
    gen = make_generator(seed, generator, torch.device("cpu"))
    eps = None if eps is None else _validate.real("eps", eps, minimum=0.0)
    cos2 = _gaussian_cos2(d, samples, gen) if eps is None else _near_orthogonal_cos2(d, eps, samples, gen)
    log_sin = 0.5 * torch.log1p(-cos2)  # (samples,)
    return log_sin.mean().item(), (log_sin.std() / math.sqrt(samples)).item()


def _gram(dof, d, samples, gen) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(|x|^2, x . y, |y|^2), each (samples,), of two i.i.d. N(0, I/d) vectors x, y of R^dof (dof >= 0), from
    their Bartlett factor L: the Gram matrix L L^T / d."""
    L = bartlett(2, dof, gens=[gen], seeds=samples, dtype=torch.float64) / math.sqrt(d)  # (samples, 2, 2)
    l00, l10, l11 = L[:, 0, 0], L[:, 1, 0], L[:, 1, 1]
    return l00.square(), l00 * l10, l10.square() + l11.square()


def _gaussian_cos2(d, samples, gen) -> torch.Tensor:
    """cos^2 theta(u G, v G), (samples,): the angle of two i.i.d. N(0, I/d) vectors (module doc)."""
    xx, xy, yy = _gram(d, d, samples, gen)
    return xy.square() / (xx * yy)


def _near_orthogonal_cos2(d, eps, samples, gen) -> torch.Tensor:
    """cos^2 theta(u W, v W) for W = O + eps G, (samples,): of e_1 + eps g_1 and e_2 + eps g_2 (module doc), from
    the first two coordinates of g_1, g_2 (normals / sqrt(d)) and the Gram matrix of the other d - 2."""
    a, b = torch.randn(2, 2, samples, generator=gen, dtype=torch.float64) / math.sqrt(d)  # (g_1, g_2)[:2]
    xx, xy, yy = _gram(d - 2, d, samples, gen)
    uv = eps * (a[1] + b[0]) + eps**2 * (a[0] * b[0] + a[1] * b[1] + xy)  # (e_1 + eps g_1) . (e_2 + eps g_2)
    uu = (1 + eps * a[0]).square() + eps**2 * (a[1].square() + xx)  # |e_1 + eps g_1|^2
    vv = (1 + eps * b[1]).square() + eps**2 * (b[0].square() + yy)
    return uv.square() / (uu * vv)
