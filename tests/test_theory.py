"""Unit tests for the closed forms of rcteach.theory that the foundation ships.

Each formula is checked against an independent computation: its defining expression, numerical
integration or optimisation, or a small seeded simulation with a tolerance justified inline.
"""

import math

import pytest
import torch
from scipy import integrate, optimize

from rcteach import LN2, centre, gaussian_tokens, orthonormal_tokens, random_attention, stable_rank, theory

S2 = [0.0, 0.1, LN2, 1.0, 2.5]


pytestmark = pytest.mark.usefixtures("cpu_env")


# -- c ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("s2", S2)
def test_c_definition(s2):
    assert theory.c(s2) == pytest.approx(math.exp(s2) - 1, rel=1e-14, abs=1e-300)


@pytest.mark.parametrize("s2, m", [(0.3, 0.0), (LN2, -LN2 / 2), (1.2, 0.7)])
def test_c_is_squared_coefficient_of_variation_of_lognormal(s2, m):
    """c = Var(e^g) / (E e^g)^2 for g ~ N(m, s2), by numerical integration (independent of m)."""
    sd = math.sqrt(s2)
    density = lambda x: math.exp(-((x - m) ** 2) / (2 * s2)) / math.sqrt(2 * math.pi * s2)  # noqa: E731
    lo, hi = m - 14 * sd, m + 14 * sd
    m1 = integrate.quad(lambda x: math.exp(x) * density(x), lo, hi, epsabs=0, epsrel=1e-12)[0]
    m2 = integrate.quad(lambda x: math.exp(2 * x) * density(x), lo, hi, epsabs=0, epsrel=1e-12)[0]
    assert theory.c(s2) == pytest.approx(m2 / m1**2 - 1, rel=1e-8)


def test_c_at_ln2_is_one_and_zero_at_zero():
    assert theory.c(LN2) == pytest.approx(1.0, abs=1e-15)
    assert theory.c(0) == 0.0
    assert theory.c(1e-20) == pytest.approx(1e-20, rel=1e-12)  # expm1: no cancellation


# -- formulas in c ---------------------------------------------------------------------------------

@pytest.mark.parametrize("T", [2, 16, 1000])
@pytest.mark.parametrize("s2", S2)
def test_formulas_in_c(T, s2):
    c = math.exp(s2) - 1
    assert theory.entry_sd(T, s2) == pytest.approx(math.sqrt(c) / T, rel=1e-13, abs=1e-300)
    assert theory.bulk_radius(T, s2) == pytest.approx(math.sqrt(c / T), rel=1e-13, abs=1e-300)
    assert theory.top_singular_value(T, s2) == pytest.approx(1 + c / (2 * T), rel=1e-14)
    assert theory.frobenius_sq(s2) == pytest.approx(1 + c, rel=1e-14)
    assert theory.frobenius_sq(s2, centred=True) == pytest.approx(c, rel=1e-13, abs=1e-300)
    assert theory.width_stable_rank(s2) == pytest.approx(1 + c, rel=1e-14)


def test_values_at_ln2():
    assert theory.bulk_radius(256, LN2) == pytest.approx(1 / 16, rel=1e-14)
    assert theory.entry_sd(100, LN2) == pytest.approx(0.01, rel=1e-14)
    assert theory.top_singular_value(50, LN2) == pytest.approx(1.01, rel=1e-14)
    assert theory.frobenius_sq(LN2) == pytest.approx(2.0, rel=1e-14)
    assert theory.width_stable_rank(LN2) == pytest.approx(2.0, rel=1e-14)


# -- centred_width_slope ---------------------------------------------------------------------------

def slope_by_optimisation(gamma):
    f = lambda z: -z / ((1 + z) ** 2 * (1 + gamma * z))  # noqa: E731
    res = optimize.minimize_scalar(f, bounds=(1e-9, 1e3), method="bounded", options=dict(xatol=1e-12))
    return -res.fun


@pytest.mark.parametrize("gamma", [0.0, 1e-6, 0.1, 0.5, 1.0, 3.0])
def test_centred_width_slope_is_the_maximum(gamma):
    assert theory.centred_width_slope(gamma) == pytest.approx(slope_by_optimisation(gamma), rel=1e-9)


def test_centred_width_slope_limits():
    assert theory.centred_width_slope(0) == 0.25
    assert theory.centred_width_slope(1e-9) == pytest.approx(0.25, rel=1e-8)  # continuous at 0
    values = [theory.centred_width_slope(g) for g in (0.0, 0.25, 0.5, 1.0, 2.0)]
    assert all(a > b for a, b in zip(values, values[1:]))  # wider gamma, smaller slope
    z = (math.sqrt(9) - 1) / 4  # gamma = 1: z* = 1/2
    assert theory.centred_width_slope(1.0) == pytest.approx(z / ((1 + z) ** 2 * (1 + z)), rel=1e-14)


# -- logit_variance --------------------------------------------------------------------------------

def test_logit_variance_formula():
    assert theory.logit_variance(0.5, 0.8, 2.25) == pytest.approx(0.25 * 0.64 * 2.25**2, rel=1e-14)
    assert theory.logit_variance(0.5, 0.8, 2.25, beta=3.0) == pytest.approx(9 * theory.logit_variance(0.5, 0.8, 2.25))
    assert theory.logit_variance(0.02, 0.02, 768) == pytest.approx(0.094, abs=5e-4)  # BERT/GPT-2, notes section 1


def test_logit_variance_by_simulation():
    """Logits q.k / sqrt(d_qk) of orthogonal tokens of squared norm r2 have variance s_q^2 s_k^2 r2^2.

    200 independent draws of 8 x 8 logits: the sample variance scatters by ~1% (three seeds gave
    0.802, 0.809, 0.806 against 0.81); 5% is a wide margin.
    """
    d, T, d_qk, r2, sq, sk, n = 32, 8, 16, 2.25, 0.5, 0.8, 200
    X = math.sqrt(r2) * orthonormal_tokens(T, d, batch=n, seed=0)
    W_Q = gaussian_tokens(d, d_qk, std=sq, batch=n, seed=1)
    W_K = gaussian_tokens(d, d_qk, std=sk, batch=n, seed=2)
    g = (X @ W_Q) @ (X @ W_K).transpose(-2, -1) / math.sqrt(d_qk)
    assert g.var().item() == pytest.approx(theory.logit_variance(sq, sk, r2), rel=0.05)


# -- the 1/T expansion against simulation ----------------------------------------------------------

def test_leading_order_against_simulation():
    """T = 128, 8 matrices at s2 = ln 2.

    Finite-T bias and seed spread (three seeds measured): ||A_perp||_F^2 / c in 0.94-0.97 (the
    leading term drops O(1/T) and O(sqrt(c/T)) corrections), sd(A_perp) / entry_sd in 0.97-0.99,
    (sigma_1 - 1) / (c / 2T) in 0.94-1.02.  Tolerances: 10%, 6%, 20%.
    """
    T = 128
    A = random_attention(T, LN2, batch=8, seed=0)
    Ap = centre(A)
    frob = Ap.square().sum((-2, -1)).mean().item()
    assert frob == pytest.approx(theory.frobenius_sq(LN2, centred=True), rel=0.10)
    assert A.square().sum((-2, -1)).mean().item() == pytest.approx(theory.frobenius_sq(LN2), rel=0.05)
    assert Ap.std().item() == pytest.approx(theory.entry_sd(T, LN2), rel=0.06)
    s1 = torch.linalg.svdvals(A)[..., 0].mean().item()
    assert s1 - 1 == pytest.approx(theory.top_singular_value(T, LN2) - 1, rel=0.20)


# -- errors ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "f, args, kwargs, error, match",
    [
        (theory.c, (-0.1,), {}, ValueError, "s2"),
        (theory.c, (math.nan,), {}, ValueError, "s2"),
        (theory.c, (math.inf,), {}, ValueError, "s2"),
        (theory.c, ("1",), {}, TypeError, "s2"),
        (theory.entry_sd, (1, LN2), {}, ValueError, "T"),
        (theory.entry_sd, (4.0, LN2), {}, TypeError, "T"),
        (theory.entry_sd, (4, -1.0), {}, ValueError, "s2"),
        (theory.bulk_radius, (1, LN2), {}, ValueError, "T"),
        (theory.bulk_radius, (4, -1.0), {}, ValueError, "s2"),
        (theory.top_singular_value, (0, LN2), {}, ValueError, "T"),
        (theory.top_singular_value, (4, math.nan), {}, ValueError, "s2"),
        (theory.frobenius_sq, (-1.0,), {}, ValueError, "s2"),
        (theory.width_stable_rank, (-1.0,), {}, ValueError, "s2"),
        (theory.centred_width_slope, (-0.5,), {}, ValueError, "gamma"),
        (theory.centred_width_slope, (math.inf,), {}, ValueError, "gamma"),
        (theory.logit_variance, (-1.0, 1.0, 1.0), {}, ValueError, "sigma_q"),
        (theory.logit_variance, (1.0, -1.0, 1.0), {}, ValueError, "sigma_k"),
        (theory.logit_variance, (1.0, 1.0, -1.0), {}, ValueError, "token_norm_sq"),
        (theory.logit_variance, (1.0, 1.0, 1.0), dict(beta=math.nan), ValueError, "beta"),
        (theory.logit_variance, (1.0, 1.0, 1.0), dict(beta="2"), TypeError, "beta"),
    ],
)
def test_errors(f, args, kwargs, error, match):
    with pytest.raises(error, match=match):
        f(*args, **kwargs)


# -- the dropout zero front -------------------------------------------------------------------------

def test_dropout_front_two_tokens_exact():
    p = 0.3
    dist = theory.dropout_front(2, 1, p)
    assert dist[0] == [1.0, 0.0, 0.0]
    assert dist[1] == pytest.approx([1 - p, p - p**3, p**3])  # P(J >= 1) = p, P(J >= 2) = p^3


def test_dropout_front_rows_are_distributions_and_near_binomial():
    T, depth, p = 40, 30, 0.05
    dist = theory.dropout_front(T, depth, p)
    assert len(dist) == depth + 1 and all(len(row) == T + 1 for row in dist)
    assert all(sum(row) == pytest.approx(1.0) for row in dist)
    binomial = [math.comb(depth, k) * p**k * (1 - p) ** (depth - k) for k in range(T + 1)]
    # jumps of 2 or more have probability p^3 per layer: total variation O(depth p^3)
    assert sum(abs(a - b) for a, b in zip(dist[-1], binomial)) < 4 * depth * p**3


def test_dropout_front_mu():
    mean, std = theory.dropout_front_mu(10, 5, 0.0, token_norm_sq=4.0)
    assert mean == [0.0] * 6 and std == [0.0] * 6
    T, r2 = 10, 3.0
    dist = theory.dropout_front(T, 4, 0.2)[-1]
    mean, std = theory.dropout_front_mu(T, 4, 0.2, token_norm_sq=r2)
    mu = [math.sqrt(r2 * k * (T - k) / T) for k in range(T + 1)]
    assert mean[-1] == pytest.approx(sum(q * m for q, m in zip(dist, mu)))
    assert std[-1] ** 2 == pytest.approx(sum(q * m * m for q, m in zip(dist, mu)) - mean[-1] ** 2)


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((1, 4, 0.1), {}, ValueError, "T"),
        ((8, -1, 0.1), {}, ValueError, "depth"),
        ((8, 4, 1.0), {}, ValueError, "p"),
        ((8, 4, -0.1), {}, ValueError, "p"),
        ((8, 4, 0.1), dict(token_norm_sq=0.0), ValueError, "token_norm_sq"),
    ],
)
def test_dropout_front_errors(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        theory.dropout_front_mu(*args, **kwargs)


def test_top_singular_value_next_order():
    T, s2 = 256, LN2  # c = 1: sigma_1^2 = 1 + (1/T)(1 - (6 - 1)/T)
    assert theory.top_singular_value_next_order(T, s2) == pytest.approx(math.sqrt(1 + (1 - 5 / T) / T), rel=1e-14)
    # the leading order is recovered for large T, with a relative deficit (1+c)(1+2c)/T of the excess
    big = 10**6
    excess = theory.top_singular_value_next_order(big, s2) - 1
    assert excess == pytest.approx(theory.top_singular_value(big, s2) - 1, rel=1e-5)
    assert theory.top_singular_value_next_order(T, 0.0) == 1.0
    with pytest.raises(ValueError, match="T"):
        theory.top_singular_value_next_order(1, s2)


# -- the Gram stable rank of embeddings with a shared part -------------------------------------------

def test_embedding_gram_excess_values():
    # T = 101, d = 100, rho = 1/2: (1/4) * 100 * 2 / 51^2
    assert theory.embedding_gram_stable_rank_excess(101, 100, 0.5) == pytest.approx(50 / 2601, rel=1e-14)
    assert theory.embedding_gram_stable_rank_excess(64, 312, 1.0) == 0.0  # all shared: rank one
    values = [theory.embedding_gram_stable_rank_excess(128, 312, rho) for rho in (0.2, 0.3, 1 / 3, 0.4)]
    assert values == sorted(values, reverse=True)
    with pytest.warns(UserWarning, match="spike"):
        theory.embedding_gram_stable_rank_excess(64, 64, 0.02)


def test_embedding_gram_excess_by_simulation():
    """Rows a + u_i, |a|^2 = rho d, u_i i.i.d. N(0, 1 - rho): the mean over 16 draws of sr_Gram - 1.

    The neglected cross terms lower the measurement by ~2 (1 - rho)/(rho d) (1% at d = 400, rho = 1/3);
    seeds 0-3 gave ratios 0.985-0.989 (T = 200, d = 400, rho = 1/3) and 0.980-0.993 (T = 128, d = 256,
    rho = 1/2), the scatter of the mean ~0.5%: 4% is wide.
    """
    for T, d, rho in ((200, 400, 1 / 3), (128, 256, 0.5)):
        g = torch.Generator().manual_seed(0)
        a = torch.randn(d, generator=g, dtype=torch.float64)
        noise = torch.randn(16, T, d, generator=g, dtype=torch.float64)
        X = math.sqrt(rho * d) * a / a.norm() + math.sqrt(1 - rho) * noise
        measured = (stable_rank(X, gram=True) - 1).mean().item()
        assert measured == pytest.approx(theory.embedding_gram_stable_rank_excess(T, d, rho), rel=0.04)


def test_leading_term_residual_next_order():
    T = 512
    # c = 1: mu_3 = 4, mu_4 = 41, K = 41 - 4 - 32 + 9 = 14, so the squared ratio is (c/T)(1 + 15/T)
    expected = math.sqrt((1 + 15 / T) / T)
    assert theory.leading_term_residual(T, LN2, next_order=True) == pytest.approx(expected, rel=1e-14)
    assert theory.leading_term_residual(T, LN2) == pytest.approx(math.sqrt(1 / T), rel=1e-14)
    # small c: 1 + K/c^2 -> c, the correction vanishes with the tails
    c = theory.c(1e-4)
    assert theory.leading_term_residual(T, 1e-4, next_order=True) / theory.leading_term_residual(T, 1e-4) == (
        pytest.approx(math.sqrt(1 + c / T), rel=1e-6))
    assert theory.leading_term_residual(T, 0.0, next_order=True) == 0.0
