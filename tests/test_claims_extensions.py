"""The extensions behind the papers' remaining claims: attention scale, Pre-LN, logit biases, time-varying masks
and their reach graphs, skip rates under masks, skip + LayerNorm in width, residual moments, the embedded
counterexample and the Lyapunov gap of near-orthogonal values."""

import math

import pytest
import torch

import rcteach
from rcteach import LayerConfig, equilibria as eq, layer, masks as mk, theory
from rcteach.lyapunov import value_log_contraction
from rcteach.norms import normalise
from rcteach.tokens import orthogonal_matrix

F64 = torch.float64


def tokens(T=8, d=8, batch=2, seed=0):
    return rcteach.orthonormal_tokens(T, d, batch=batch, seed=seed)


# -- LayerConfig: attention_scale, norm_position, logit_bias --------------------------------------------------

@pytest.mark.parametrize("options", [
    dict(attention_scale=2.5, centred=True),
    dict(norm="rms", skip=0.5, norm_position="pre", attention="qk"),
    dict(logit_bias=-0.3 * torch.rand(8, 8, generator=torch.Generator().manual_seed(1), dtype=F64),
         mask=rcteach.make_mask("causal", 8)),
])
def test_new_fields_are_one_step_of_propagate(options):
    X0 = tokens()
    X1 = layer(X0, LayerConfig(**options), generator=torch.Generator().manual_seed(5))
    assert torch.equal(X1, rcteach.propagate(X0, 1, seed=5, keep_states=True, **options).states[1])


def test_attention_scale_is_value_scale_exactly():
    X0, d = tokens(T=8, d=16), 16
    a = rcteach.propagate(X0, 3, centred=True, value_var=1.0 / d, attention_scale=math.sqrt(d), seed=2)
    b = rcteach.propagate(X0, 3, centred=True, value_var=1.0, seed=2)
    assert torch.allclose(a.norm, b.norm, rtol=1e-12)


def test_pre_norm_layer_by_hand():
    X = tokens(batch=1)[0] * 3.0
    W = rcteach.orthonormal_tokens(8, 8, seed=3)
    mask = rcteach.make_mask("sliding", 8, window=1)
    out = layer(X, LayerConfig(beta=0.0, mask=mask, norm="rms", skip=0.7, norm_position="pre"),
                weights=rcteach.layers.LayerWeights(logits=torch.zeros(8, 8, dtype=F64), W_V=W))
    Z = normalise(X, "rms")
    U = mask.to(F64) / mask.sum(-1, keepdim=True)
    assert torch.allclose(out, X + 0.7 * U @ Z @ W, atol=1e-14)


def test_logit_bias_is_added_before_the_softmax():
    X = tokens(batch=1)[0]
    bias = -torch.arange(8, dtype=F64).expand(8, 8)
    out = layer(X, LayerConfig(beta=0.0, values="identity", logit_bias=bias))
    A = torch.softmax(bias, -1)
    assert torch.allclose(out, A @ X, atol=1e-14)


@pytest.mark.parametrize("options, exc, match", [
    (dict(norm_position="middle"), ValueError, "norm_position"),
    (dict(norm_position="pre", skip=1.0), ValueError, "Pre-LN"),
    (dict(norm_position="pre", norm="rms"), ValueError, "Pre-LN"),
    (dict(attention_scale="2"), TypeError, "attention_scale"),
    (dict(logit_bias=torch.zeros(3, 3, dtype=torch.int64)), TypeError, "logit_bias"),
    (dict(logit_bias=torch.zeros(3, 4)), ValueError, "logit_bias"),
    (dict(logit_bias=torch.full((3, 3), math.inf)), ValueError, "finite"),
])
def test_new_field_errors(options, exc, match):
    with pytest.raises(exc, match=match):
        LayerConfig(**options)


def test_logit_bias_must_match_the_tokens():
    with pytest.raises(ValueError, match="logit_bias"):
        layer(tokens(), LayerConfig(logit_bias=torch.zeros(5, 5, dtype=F64)))
    with pytest.raises(ValueError, match="enlarge"):
        rcteach.propagate(tokens(batch=1)[0], 1, logit_bias=torch.zeros(3, 8, 8, dtype=F64))


# -- time-varying masks ---------------------------------------------------------------------------------------

def test_masks_schedule_cycles_and_matches_layer_by_layer():
    X0 = tokens(T=8, d=8)
    m1, m2 = rcteach.make_mask("causal", 8), rcteach.make_mask("sliding", 8, window=1)
    run = rcteach.propagate(X0, 3, masks=[m1, m2], seed=4, keep_states=True)
    gen = torch.Generator().manual_seed(4)
    X = X0
    for m in (m1, m2, m1):
        X = layer(X, LayerConfig(mask=m), generator=gen)
    assert torch.allclose(run.states[-1], X, atol=1e-14)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(masks=[]), TypeError, "masks"),
    (dict(masks=rcteach.make_mask("causal", 8)), TypeError, "masks"),
    (dict(masks=[rcteach.make_mask("causal", 5)]), ValueError, "mask"),
    (dict(masks=[rcteach.make_mask("causal", 8)], mask=rcteach.make_mask("causal", 8)), ValueError, "not both"),
])
def test_masks_schedule_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        rcteach.propagate(tokens(T=8), 2, **kwargs)


def test_reach_union_and_window_centres():
    A, B = mk.block_mask((4, 4)), mk.block_mask((2, 4, 2))
    assert torch.equal(mk.reach_mask([A]), A)
    assert torch.equal(mk.union_mask([A, B]), A | B)
    reach = mk.reach_mask([A, B])
    brute = (B.to(torch.int64) @ A.to(torch.int64)) > 0
    assert torch.equal(reach, brute)
    assert mk.window_centres([A, B]) == [] and mk.window_centres([A, B, A]) == list(range(8))
    assert not mk.is_quasi_strongly_connected(A) and mk.is_quasi_strongly_connected(mk.union_mask([A, B]))
    causal = rcteach.make_mask("causal", 6)
    assert mk.window_centres([causal]) == [0]


def test_periodic_rate_and_second_eigenvalue():
    A, B = mk.block_mask((16, 16)), mk.block_mask((8, 16, 8))
    assert mk.periodic_consensus_rate([A, B]) == pytest.approx(0.5, abs=1e-12)
    assert mk.periodic_consensus_rate([A]) == pytest.approx(1.0, abs=1e-12)
    assert theory.alternating_blocks_rate((16, 16), (8, 16, 8)) == pytest.approx(0.5, abs=1e-12)
    causal = rcteach.make_mask("causal", 8)
    U = causal.to(F64) / causal.sum(-1, keepdim=True)
    assert mk.second_eigenvalue_modulus(U) == pytest.approx(mk.consensus_rate(causal), abs=1e-9)
    assert mk.second_eigenvalue_modulus(torch.full((5, 5), 0.2, dtype=F64)) == 0.0
    with pytest.raises(ValueError, match="row-stochastic"):
        mk.second_eigenvalue_modulus(torch.eye(3, dtype=F64) * 2)


def test_consensus_rate_with_skip():
    causal, complete = rcteach.make_mask("causal", 10), rcteach.make_mask("complete", 10)
    assert mk.consensus_rate(causal, skip=1.0) == pytest.approx(0.75)
    assert mk.consensus_rate(causal, skip=0.5) == pytest.approx((1 + 0.25) / 1.5)
    assert mk.consensus_rate(complete, skip=2.0) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="skip"):
        mk.consensus_rate(causal, skip=-1.0)


def test_alibi_causal_rate_is_the_diagonal():
    T, m = 12, 0.7
    i = torch.arange(T, dtype=F64)
    bias = -m * (i[:, None] - i[None, :]).abs()
    A = torch.softmax(bias.masked_fill(~rcteach.make_mask("causal", T), -math.inf), -1)
    assert theory.alibi_causal_rate(m) == pytest.approx(sorted(A.diagonal().tolist())[-2], abs=1e-12)


def test_sinks_and_blocks():
    mask = mk.with_sinks(rcteach.make_mask("sliding-causal", 16, window=2))
    assert mk.centre_nodes(mask) == [0] and mk.centre_eccentricity(mask) == 1
    two = mk.with_sinks(rcteach.make_mask("sliding", 16, window=1), sinks=2)
    assert two[:, :2].all() and mk.centre_eccentricity(two) == 1
    assert torch.equal(mk.block_mask([1, 2]), torch.tensor([[1, 0, 0], [0, 1, 1], [0, 1, 1]], dtype=torch.bool))
    with pytest.raises(ValueError, match="sinks"):
        mk.with_sinks(rcteach.make_mask("causal", 4), sinks=5)
    with pytest.raises(TypeError, match="sizes"):
        mk.block_mask([])


# -- width with skip and normalisation ------------------------------------------------------------------------

def test_width_skip_output_by_hand():
    sr = rcteach.width_stable_ranks(16, 0.5, seeds=3, skip=1.0, norm="rms", seed=7)
    gen = torch.Generator().manual_seed(7)
    A = rcteach.random_attention(16, rcteach.LN2, batch=3, generator=gen)
    Y = torch.randn(3, 16, 32, generator=gen, dtype=F64)
    X0 = rcteach.orthonormal_tokens(16, 32, batch=3, generator=gen)
    assert torch.allclose(sr, rcteach.stable_rank(normalise(X0 + A @ Y, "rms")), rtol=1e-10)


def test_skip_width_theory():
    s2 = rcteach.LN2
    assert theory.skip_width_stable_rank(s2, 0.5, 2.0) == pytest.approx(2 + 0.5 / 4)
    # a -> infinity gives back the bias without a skip
    assert theory.skip_width_stable_rank_bias(256, 0.5, s2, 1e6) == pytest.approx(
        theory.width_stable_rank_bias(256, 0.5, s2), rel=1e-6)
    assert theory.skip_width_stable_rank_bias(100, 1.0, s2) == pytest.approx(-14 / 100)
    with pytest.raises(ValueError, match="skip"):
        theory.skip_width_stable_rank(s2, 0.5, 0.0)


# -- depth: the gap and the residual moments ------------------------------------------------------------------

def test_layer_gap_and_residual_moments():
    T, s2 = 64, rcteach.LN2
    alpha = theory.depth_mu_factor(T, s2, next_order=True)
    assert theory.layer_gap_squared(T, s2) == pytest.approx(1 / alpha)
    assert theory.layer_gap_squared(T, s2, 1.0) == pytest.approx(4 / (1 + alpha))
    mus, cons = theory.residual_moments(T, s2, 3, skip=0.0)
    assert mus == [T - 1] * 4 and cons == [1.0] * 4  # no attention branch: nothing moves
    mus, cons = theory.residual_moments(T, s2, 16, skip=0.25)
    assert cons[-1] == pytest.approx((1 + 1 / 16) ** 16, rel=0.01) and mus[-1] / mus[0] == pytest.approx(
        (1 + alpha / 16) ** 16)
    assert theory.norm_growth(16, 1 / 16, attention_scale=4.0) == pytest.approx(16.0)


# -- the counterexample in any basis and width; near-orthogonal values ---------------------------------------

def test_embedded_example_is_a_conjugated_fixed_point():
    W_V, B, X = eq.embedded_example(3, 5, q=0.8, r=0.2, seed=0)
    mask = rcteach.make_mask("causal", 3)
    assert torch.allclose(eq.layer_map(X, W_V, B, mask=mask), X, atol=1e-13)
    assert torch.allclose(X @ X.T, torch.eye(3, dtype=F64), atol=1e-13)
    assert eq.embedded_radius(3, q=0.8, r=0.2) == 0.8 and eq.embedded_radius(3, q=0.5, r=0.5) == 2.0
    W3, B3, X3 = eq.embedded_example(3, 3, q=0.8, seed=1)  # d = N: only the change of basis
    assert torch.allclose(eq.layer_map(X3, W3, B3, mask=mask), X3, atol=1e-13)
    with pytest.raises(ValueError, match="d"):
        eq.embedded_example(4, 3)


def test_value_log_contraction():
    mean, se = value_log_contraction(8, 0.0, samples=1000, seed=0)
    assert mean == pytest.approx(0.0, abs=1e-12)  # orthogonal values: no contraction
    mean, se = value_log_contraction(8, None, samples=20000, seed=1)
    assert abs(mean - theory.gaussian_value_lyapunov(8)) < 4 * se
    with pytest.raises(ValueError, match="samples"):
        value_log_contraction(8, 0.1, samples=1)


def _explicit_log_sin(d, eps, samples, seed):
    """log sin theta(e_1 W, e_2 W), (samples,), of full matrices W = O + eps G (eps None: W = G), O Haar."""
    gen = torch.Generator().manual_seed(seed)
    W = torch.randn(samples, d, d, generator=gen, dtype=torch.float64) / math.sqrt(d)
    if eps is not None:
        W = orthogonal_matrix(d, batch=samples, generator=gen) + eps * W
    u, v = W[:, 0], W[:, 1]
    cos2 = (u * v).sum(-1).square() / (u.square().sum(-1) * v.square().sum(-1))
    return 0.5 * torch.log1p(-cos2)


@pytest.mark.parametrize("d, eps", [(2, 1.0), (3, 0.5), (6, 0.3), (6, 1.0), (2, None), (6, None)])
def test_value_log_contraction_exact_in_law(d, eps):
    # the O(1)-a-sample angle (lyapunov module doc) against full d x d value matrices: means agree at 4 s.e.
    # (d = 2, 3: no or one coordinate left for the Bartlett part)
    mean, se = value_log_contraction(d, eps, samples=40000, seed=5)
    explicit = _explicit_log_sin(d, eps, 40000, seed=6)
    assert abs(mean - explicit.mean().item()) < 4 * math.hypot(se, explicit.std().item() / 200)
