"""Other attention maps (ReLU, sigmoid): their outlier, bulk and gap against softmax's.

Introduced in chapter "Other attention maps" (book/07_other_maps.md).
"""

from __future__ import annotations

import math

from .. import _validate
from .spectra import c

__all__ = ["ACTIVATIONS", "activation_moments", "outlier", "map_bulk_radius", "gap_ratio", "relative_gap"]


ACTIVATIONS = ("softmax", "relu", "sigmoid")  # the attention maps f of rcteach.attention_map


@_validate.finite_result
def activation_moments(activation, s2, bias=0.0) -> tuple[float, float]:
    """Mean and variance of f(g), g ~ N(0, s2), for the element-wise form of an attention map.

    To leading order in 1/T every map of :func:`rcteach.attention_map` is element-wise,
    A_ij ~ f(g_ij) / T, with

    * ``"relu"``: f(g) = max(g, 0).  Closed form: E f = s / sqrt(2 pi), E f^2 = s2 / 2, so
      Var f = s2 (1/2 - 1/(2 pi)) = s2 (pi - 1) / (2 pi).
    * ``"sigmoid"``: f(g) = 1 / (1 + e^{-(g + b)}), b = ``bias``.  No closed form: E f and
      E (f - E f)^2 are integrals of f(s z + b) against the standard normal density, computed by
      adaptive quadrature (``scipy.integrate.quad``, absolute error < 1e-13).  At b = 0,
      E f = 1/2 exactly (f(x) + f(-x) = 1).
    * ``"softmax"``: f(g) = e^g / E e^g.  The row normaliser sum_k e^{g_ik} is T E e^g
      (1 + O(sqrt(c/T))), so softmax is this map to leading order: mean 1, variance
      c = e^{s2} - 1 (see :func:`c`).

    ``bias`` applies to ``"sigmoid"`` only, as in :func:`rcteach.attention_map`.

    Returns
    -------
    (mean, variance) : tuple of float
    """
    activation = _validate.choice("activation", activation, ACTIVATIONS)
    s2 = _validate.real("s2", s2, minimum=0.0)  # softmax: c(s2) checks that e^s2 is finite
    bias = _validate.bias(activation, bias)
    if activation == "softmax":
        return 1.0, c(s2)
    if activation == "relu":
        return math.sqrt(s2 / (2 * math.pi)), s2 * (math.pi - 1) / (2 * math.pi)
    from scipy import integrate, special

    s = math.sqrt(s2)
    if s == 0.0:
        return float(special.expit(bias)), 0.0
    # f(x) = 1 - f(-x) and z -> -z: the moments at bias b follow from those at -|b|, where f is
    # small and a relative tolerance keeps every digit
    b = -abs(bias)

    def expect(h):
        value, _ = integrate.quad(lambda z: h(special.expit(s * z + b)) * math.exp(-0.5 * z * z),
                                  -math.inf, math.inf, epsabs=0.0, epsrel=1e-12, limit=200)
        return value / math.sqrt(2 * math.pi)

    mean = expect(lambda f: f)
    var = expect(lambda f: (f - mean) ** 2)  # E (f - E f)^2: no cancellation at small s2
    return (mean if bias <= 0 else 1.0 - mean), var


@_validate.finite_result
def outlier(activation, s2, bias=0.0) -> float:
    """The outlier eigenvalue of attention with an element-wise map: lambda_1 ~ E f(g).

    A = (E f) 11^T / T + Z / T with Z_ij = f(g_ij) - E f i.i.d., mean 0: a rank-one matrix with
    eigenvalue E f plus noise whose eigenvalues are O(sd f / sqrt(T)); the outlier moves by
    O(sd f / T) only.  Softmax: exactly 1.  See :func:`activation_moments` for f.
    """
    return activation_moments(activation, s2, bias)[0]


@_validate.finite_result
def map_bulk_radius(T, activation, s2, bias=0.0) -> float:
    """Radius of the disc of non-outlier eigenvalues of an attention map: sqrt(Var f(g) / T).

    Circular law for Z / T, Z i.i.d. with variance Var f (the rank-one part leaves the bulk
    alone).  Softmax: sqrt(c / T), the same as :func:`bulk_radius`.  Centring (A P) keeps it.
    """
    T = _validate.integer("T", T, minimum=2)
    return math.sqrt(activation_moments(activation, s2, bias)[1] / T)


@_validate.finite_result
def gap_ratio(T, activation, s2, bias=0.0) -> float:
    """Size of the spectral gap, |outlier| / bulk radius ~ sqrt(T) E f / sd f.

    Scale-free (multiplying f by a constant changes neither), the quantity
    :attr:`rcteach.SpectralGap.ratio` measures.  Softmax: sqrt(T / c); ReLU: sqrt(T / (pi - 1))
    whatever s2.  Needs s2 > 0 (at s2 = 0 the bulk is a point and the ratio infinite).
    """
    T = _validate.integer("T", T, minimum=2)
    s2 = _validate.real("s2", s2, positive=True)
    mean, var = activation_moments(activation, s2, bias)
    return math.sqrt(T) * abs(mean) / math.sqrt(var)


@_validate.finite_result
def relative_gap(activation, s2, bias=0.0) -> float:
    """gap_ratio(map) / gap_ratio(softmax) at the same logit variance: sqrt(c) E f / sd f.

    Independent of T to leading order.  Below 1 the map has the smaller gap.  ReLU:
    sqrt(c / (pi - 1)), below 1 exactly when s2 < ln(pi).  Needs s2 > 0.
    """
    s2 = _validate.real("s2", s2, positive=True)
    mean, var = activation_moments(activation, s2, bias)
    return math.sqrt(c(s2)) * abs(mean) / math.sqrt(var)
