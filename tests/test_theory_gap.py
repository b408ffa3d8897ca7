"""Unit tests for the theory functions of the chapters on the leading 1/T term and the spectral gap."""

import math

import pytest
from scipy import integrate, optimize

from rcteach import LN2, theory


def test_quarter_circle_median():
    def density(x):
        return math.sqrt(4 - x * x) / math.pi

    assert integrate.quad(density, 0, 2)[0] == pytest.approx(1.0, abs=1e-10)
    median = optimize.brentq(lambda m: integrate.quad(density, 0, m)[0] - 0.5, 0, 2, xtol=1e-14)
    assert theory.QUARTER_CIRCLE_MEDIAN == pytest.approx(median, abs=1e-10)


@pytest.mark.parametrize("T,s2", [(16, 0.25), (256, LN2), (1000, 2.0)])
def test_singular_value_and_eigenvalue_scales(T, s2):
    R = math.sqrt(math.expm1(s2) / T)
    assert theory.singular_value_edge(T, s2) == pytest.approx(2 * R)
    assert theory.singular_value_median(T, s2) == pytest.approx(theory.QUARTER_CIRCLE_MEDIAN * R)
    assert theory.eigenvalue_median_modulus(T, s2) == pytest.approx(R / math.sqrt(2))
    assert theory.leading_term_residual(T, s2) == pytest.approx(R)


def test_frobenius_next_order():
    T, s2 = 256, LN2  # c = 1: (1 + 1)(1 - 3/256)
    assert theory.frobenius_sq_next_order(T, s2) == pytest.approx(2 * (1 - 3 / 256))
    assert theory.frobenius_sq_next_order(T, s2, centred=True) == pytest.approx(2 * (1 - 3 / 256) - 1)
    assert theory.frobenius_sq_next_order(10**9, 1.0) == pytest.approx(theory.frobenius_sq(1.0), rel=1e-8)
    assert theory.frobenius_sq_next_order(7, 0.0) == 1.0


@pytest.mark.parametrize("func", [theory.singular_value_edge, theory.singular_value_median,
                                  theory.eigenvalue_median_modulus, theory.leading_term_residual,
                                  theory.frobenius_sq_next_order])
def test_errors(func):
    with pytest.raises(ValueError, match="T"):
        func(1, 1.0)
    with pytest.raises(TypeError, match="T"):
        func(2.5, 1.0)
    with pytest.raises(ValueError, match="s2"):
        func(8, -1.0)
