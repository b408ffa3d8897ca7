"""Tests of rcteach.depth: propagate, weight_gradients, normalise, and the depth theory formulas."""

import math
import warnings

import pytest
import torch

import rcteach
from rcteach import propagate, weight_gradients
from rcteach.norms import normalise

F64 = torch.float64


def tokens(T=16, d=24, batch=(3,), seed=0):
    return rcteach.orthonormal_tokens(T, d, batch=batch, seed=seed, dtype=F64, device="cpu")


# -- shapes, batching, reproducibility -----------------------------------------------------------

@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_shapes(batch):
    X0 = tokens(batch=batch)
    tr = propagate(X0, 5, seed=0, keep_states=True)
    for field in (tr.mu, tr.stable_rank, tr.stable_rank_gram, tr.norm, tr.relative_mu):
        assert field.shape == (6, *batch)
    assert tr.states.shape == (6, *batch, 16, 24)
    assert tr.depth == 5
    assert torch.equal(tr.states[0], X0)
    assert propagate(X0, 5, seed=0).states is None


def test_metrics_match_package_functions():
    tr = propagate(tokens(), 3, seed=1, keep_states=True, value_var=1 / 24)
    assert torch.allclose(tr.mu, rcteach.mu(tr.states))
    assert torch.allclose(tr.stable_rank, rcteach.stable_rank(tr.states))
    assert torch.allclose(tr.stable_rank_gram, rcteach.stable_rank(tr.states, gram=True))
    assert torch.allclose(tr.norm, torch.linalg.matrix_norm(tr.states))


def test_depth_zero():
    tr = propagate(tokens(), 0, seed=0)
    assert tr.mu.shape == (1, 3)
    assert torch.allclose(tr.norm[0], torch.full((3,), 4.0, dtype=F64))  # 16 unit tokens


@pytest.mark.parametrize("attention", ["iid", "qk"])
def test_reproducible_and_seed_dependent(attention):
    X0 = tokens()
    a = propagate(X0, 3, attention=attention, seed=5, keep_states=True).states
    b = propagate(X0, 3, attention=attention, seed=5, keep_states=True).states
    c = propagate(X0, 3, attention=attention, seed=6, keep_states=True).states
    g = propagate(X0, 3, attention=attention, generator=torch.Generator().manual_seed(5), keep_states=True).states
    assert torch.equal(a, b) and torch.equal(a, g)
    assert not torch.equal(a, c)


def test_batch_elements_are_independent_networks():
    X0 = tokens(batch=(1,)).expand(2, 16, 24)  # the same input twice
    st = propagate(X0, 2, seed=0, keep_states=True).states
    assert not torch.allclose(st[1, 0], st[1, 1])


def test_device_and_dtype():
    X0 = tokens()
    tr = propagate(X0, 2, seed=0, dtype=torch.float32, device="cpu", keep_states=True)
    assert tr.states.dtype == torch.float32 and tr.mu.dtype == torch.float32
    assert propagate(X0.float(), 1, seed=0).mu.dtype == torch.float32  # default: X0's dtype


# -- exact invariances ---------------------------------------------------------------------------

def test_identity_attention_and_values_keep_X():
    # beta = 0 with a diagonal mask: each token attends only to itself, A = I
    X0 = tokens()
    tr = propagate(X0, 4, beta=0.0, mask=torch.eye(16, dtype=torch.bool), values="identity", keep_states=True, seed=0)
    assert torch.allclose(tr.states, X0.expand(5, *X0.shape), atol=1e-15)
    assert torch.allclose(tr.mu, tr.mu[0].expand(5, 3))


def test_uniform_attention_collapses_in_one_step():
    X0 = tokens()
    for attention in ("iid", "qk"):
        tr = propagate(X0, 2, attention=attention, beta=0.0, mask=rcteach.make_mask("complete", 16), seed=0)
        assert tr.mu[0].min() > 1
        assert tr.mu[1:].max() < 1e-14
        assert torch.allclose(tr.stable_rank[1:], torch.ones(2, 3, dtype=F64))


def test_tokens_that_become_exactly_zero_warn_at_that_layer():
    """A(X)_perp with identity values: the logits shrink with ||X||^2, the softmax rounds to exactly 1/T and
    A_perp X to exactly 0 at layer 5 (float64): a UserWarning says so, instead of NaN stable ranks without a word."""
    X0 = rcteach.orthonormal_tokens(8, 8, batch=2, seed=0)
    with pytest.warns(UserWarning, match="the tokens became exactly zero at layer 5"):
        tr = propagate(X0, 6, attention="qk", centred=True, values="identity", seed=1)
    assert (tr.norm[5:] == 0).all() and (tr.norm[4] > 0).all() and torch.isnan(tr.stable_rank[5:]).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        propagate(X0, 6, attention="qk", centred=True, values="identity", norm="rms", seed=1)  # kept at unit norm


def test_mu_invariant_under_orthogonal_values():
    # mu(X W) = mu(X) for orthogonal W: one layer with an explicit orthogonal W_V against none
    # (same seed, so the same logits: they are drawn before W_V)
    X0 = tokens()
    W = rcteach.orthonormal_tokens(24, 24, seed=9, dtype=F64, device="cpu")
    one_v = propagate(X0, 1, W_V=W, seed=2, keep_states=True)
    one_i = propagate(X0, 1, values="identity", seed=2, keep_states=True)
    assert torch.allclose(one_v.states[1], one_i.states[1] @ W, atol=1e-14)
    assert torch.allclose(one_v.mu, one_i.mu, rtol=1e-12)
    assert torch.allclose(one_v.norm, one_i.norm, rtol=1e-12)


def test_centring_keeps_mu():
    X0 = tokens()
    a = propagate(X0, 4, seed=3, value_var=1 / 24)
    b = propagate(X0, 4, seed=3, value_var=1 / 24, centred=True)
    assert torch.allclose(a.mu, b.mu, rtol=1e-10)
    assert (b.relative_mu[-1] > 0.5).all() and (a.relative_mu[-1] < 0.1).all()


def test_rms_norm_gives_unit_tokens():
    tr = propagate(tokens(), 3, norm="rms", seed=0, keep_states=True)
    assert torch.allclose(torch.linalg.vector_norm(tr.states[1:], dim=-1), torch.ones(3, 3, 16, dtype=F64))


def test_layernorm_is_centred_with_norm_sqrt_d():
    tr = propagate(tokens(), 2, norm="layernorm", seed=0, keep_states=True)
    Y = tr.states[1:]
    assert Y.mean(-1).abs().max() < 1e-13
    assert torch.allclose(torch.linalg.vector_norm(Y, dim=-1), torch.full(Y.shape[:-1], math.sqrt(24), dtype=F64))


def test_normalise_zero_token_stays_zero():
    X = torch.zeros(4, 3, dtype=F64)
    assert torch.equal(normalise(X, "rms"), X) and torch.equal(normalise(X, "layernorm"), X)
    assert normalise(X, None) is X


def test_skip_semantics():
    X0 = tokens()
    plain = propagate(X0, 1, seed=4, keep_states=True).states[1]  # A X W_V
    s_true = propagate(X0, 1, seed=4, skip=True, keep_states=True).states[1]
    s_half = propagate(X0, 1, seed=4, skip=0.5, keep_states=True).states[1]
    s_zero = propagate(X0, 1, seed=4, skip=0.0, keep_states=True).states[1]
    assert torch.allclose(s_true, X0 + plain)
    assert torch.allclose(s_half, X0 + 0.5 * plain)
    assert torch.allclose(s_zero, X0)


def test_identity_values_and_iid_match_random_attention():
    X0 = tokens()
    st = propagate(X0, 1, values="identity", seed=7, keep_states=True).states
    A = rcteach.random_attention(16, batch=3, seed=7, dtype=F64, device="cpu")
    assert torch.allclose(st[1], A @ X0)


def test_qk_matches_attention_with_explicit_weights():
    X0 = tokens()
    WQ, WK = (torch.randn(24, 8, dtype=F64, generator=torch.Generator().manual_seed(k)) for k in (1, 2))
    WV = torch.randn(24, 24, dtype=F64, generator=torch.Generator().manual_seed(3)) / math.sqrt(24)
    st = propagate(X0, 2, attention="qk", W_Q=WQ, W_K=WK, W_V=WV, beta=0.7, keep_states=True).states
    X1 = rcteach.qk_attention(X0, WQ, WK, beta=0.7) @ X0 @ WV
    X2 = rcteach.qk_attention(X1, WQ, WK, beta=0.7) @ X1 @ WV
    assert torch.allclose(st[1], X1) and torch.allclose(st[2], X2)


def test_shared_weights_repeat():
    X0 = tokens()
    st = propagate(X0, 2, values="identity", shared=True, seed=1, keep_states=True).states
    A = rcteach.random_attention(16, batch=3, seed=1, dtype=F64, device="cpu")
    assert torch.allclose(st[2], A @ A @ X0)


# -- attention dropout ---------------------------------------------------------------------------

def test_dropout_zero_draws_nothing_extra():
    X0 = tokens()
    a = propagate(X0, 3, attention="qk", seed=4, keep_states=True).states
    b = propagate(X0, 3, attention="qk", dropout=0.0, seed=4, keep_states=True).states
    assert torch.equal(a, b)


def test_dropout_masks_and_rescales_attention():
    X0 = tokens(batch=())
    st = propagate(X0, 1, values="identity", dropout=0.5, seed=2, keep_states=True).states
    gen = torch.Generator().manual_seed(2)
    logits = math.sqrt(rcteach.LN2) * torch.randn(16, 16, generator=gen, dtype=F64)
    keep = torch.rand(16, 16, generator=gen, dtype=F64) >= 0.5
    A = torch.softmax(logits, -1) * keep / 0.5
    assert 0 < keep.sum() < 256
    assert torch.allclose(st[1], A @ X0)


def test_dropout_is_fresh_per_layer_with_shared_weights():
    X0 = tokens(batch=())
    st = propagate(X0, 2, values="identity", shared=True, dropout=0.5, seed=1, keep_states=True).states
    gen = torch.Generator().manual_seed(1)
    A = torch.softmax(math.sqrt(rcteach.LN2) * torch.randn(16, 16, generator=gen, dtype=F64), -1)
    keep1, keep2 = (torch.rand(16, 16, generator=gen, dtype=F64) >= 0.5 for _ in range(2))
    assert not torch.equal(keep1, keep2)
    assert torch.allclose(st[2], (A * keep2 / 0.5) @ (A * keep1 / 0.5) @ X0)


def test_dropout_keeps_consensus_and_zeroes_a_fully_dropped_row():
    v = torch.randn(1, 8, dtype=F64, generator=torch.Generator().manual_seed(0))
    X0 = v.expand(6, 8).clone()
    complete = propagate(X0, 5, attention="qk", norm="layernorm", dropout=0.3, seed=0)
    assert complete.mu.max() < 1e-12  # each row of A X is a multiple of v; LayerNorm removes it
    X0 = v.expand(12, 8).clone()
    causal = propagate(X0, 10, attention="qk", mask=rcteach.make_mask("causal", 12), norm="layernorm",
                       dropout=0.3, seed=0, keep_states=True)
    zero = causal.states.abs().sum(-1) == 0  # (layers, T)
    first = int(zero[:, 0].float().argmax())
    assert first > 0 and zero[first:, 0].all()  # token 1 (one entry) was dropped once and stayed zero
    assert not zero[-1].all() and causal.mu[-1] > 0.1


def test_mask_and_centred_iid():
    X0 = tokens()
    mask = rcteach.make_mask("causal", 16)
    st = propagate(X0, 1, mask=mask, values="identity", seed=2, keep_states=True).states
    assert torch.allclose(st[1, :, 0], X0[:, 0])  # the first causal token only sees itself
    ones = torch.ones(3, 16, 24, dtype=F64)
    assert propagate(ones, 1, values="identity", centred=True, seed=2, keep_states=True).states[1].abs().max() < 1e-14


def test_default_qk_weights():
    # default W_Q, W_K: N(0, sigma^2) entries with sigma^2 = sqrt(s2), drawn W_Q then W_K per layer
    X0 = tokens()
    st = propagate(X0, 1, attention="qk", s2=0.7, values="identity", seed=4, keep_states=True).states
    g = torch.Generator().manual_seed(4)
    sigma = 0.7**0.25
    WQ = sigma * torch.randn(3, 24, 24, generator=g, dtype=F64)
    WK = sigma * torch.randn(3, 24, 24, generator=g, dtype=F64)
    assert torch.allclose(st[1], rcteach.qk_attention(X0, WQ, WK) @ X0)
    # so that unit-norm tokens get logit variance s2 (theory.logit_variance takes standard deviations)
    assert rcteach.theory.logit_variance(sigma, sigma, 1.0) == pytest.approx(0.7)


def test_default_qk_logit_variance_is_s2():
    X0 = rcteach.orthonormal_tokens(32, 128, batch=8, seed=0, dtype=F64, device="cpu")
    sigma = 0.7**0.25
    g = torch.Generator().manual_seed(1)
    WQ = sigma * torch.randn(8, 128, 128, generator=g, dtype=F64)
    WK = sigma * torch.randn(8, 128, 128, generator=g, dtype=F64)
    logits = (X0 @ WQ) @ (X0 @ WK).mT / math.sqrt(128)
    assert abs(logits.var().item() / 0.7 - 1) < 0.05  # 8192 logits: sd of the estimate ~2%


# -- autograd -----------------------------------------------------------------------------------

def test_gradients_flow_to_X0_and_explicit_weights():
    X0 = tokens().requires_grad_(True)
    WV = (torch.randn(24, 24, dtype=F64) / 5).requires_grad_(True)
    WQ = torch.randn(24, 24, dtype=F64).requires_grad_(True)
    WK = torch.randn(24, 24, dtype=F64).requires_grad_(True)
    tr = propagate(X0, 3, attention="qk", W_Q=WQ, W_K=WK, W_V=WV, keep_states=True)
    (tr.norm[-1].sum() + tr.mu[-1].sum() + tr.states[-1].sum()).backward()
    for t in (X0, WV, WQ, WK):
        assert t.grad is not None and torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0


def test_weight_gradients_shapes_and_consensus_zero():
    X0 = tokens(batch=(2,))
    g = weight_gradients(X0, 3, attention="qk", seed=0, value_var=1 / 24)
    assert g.W_Q.shape == g.W_K.shape == g.W_V.shape == (3, 2) and g.loss.shape == (2,)
    assert (g.W_Q > 0).all()
    x = torch.randn(2, 1, 24, dtype=F64)
    gc = weight_gradients(x.expand(2, 16, 24), 3, attention="qk", seed=0, value_var=1 / 24)
    assert gc.W_Q.max() < 1e-12 * gc.W_V.min() and gc.W_K.max() < 1e-12 * gc.W_V.min()


def test_weight_gradients_loss_options():
    X0 = tokens(batch=(2,))
    g = weight_gradients(X0, 2, seed=0, values="orthogonal", loss="mu")
    assert g.W_Q is None and g.W_K is None and g.W_V.shape == (2, 2)
    assert torch.allclose(g.loss, propagate(X0, 2, seed=0, values="orthogonal").mu[-1] ** 2)
    gi = weight_gradients(X0, 2, seed=0, values="identity", attention="qk", loss=lambda X: X[..., 0, 0])
    assert gi.W_V is None and gi.W_Q.shape == (2, 2)
    # same seed, same draws as propagate
    assert torch.allclose(weight_gradients(X0, 2, seed=3).loss, propagate(X0, 2, seed=3).norm[-1] ** 2)


def test_weight_gradients_under_no_grad():
    with torch.no_grad():
        g = weight_gradients(tokens(), 2, seed=0)
    assert (g.W_V > 0).all()


# -- theory formulas -----------------------------------------------------------------------------

def test_theory_depth_formulas():
    th = rcteach.theory
    assert th.depth_mu_factor(64, rcteach.LN2) == pytest.approx(1 / 64)
    assert th.depth_mu_factor(64, rcteach.LN2, next_order=True) == pytest.approx((1 - 6 / 64) / 64)
    assert th.depth_mu_ratio(64, rcteach.LN2, 3) == pytest.approx(64.0**-3)
    assert th.depth_mu_ratio(64, rcteach.LN2, 0) == 1.0
    assert th.skip_consensus_factor(64, rcteach.LN2, 1.0) == pytest.approx((1 + 1 / 64) / 4)
    assert th.norm_growth(64, 1 / 64) == pytest.approx(1.0)
    assert th.norm_growth(64, 1.0, T=64, s2=rcteach.LN2, centred=True) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="T and s2"):
        th.norm_growth(64, 1.0, centred=True)
    with pytest.raises(ValueError, match="L"):
        th.depth_mu_ratio(64, 1.0, -1)


# -- errors -------------------------------------------------------------------------------------

X = tokens()
W24 = torch.randn(24, 24, dtype=F64)


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        (([1.0], 2), {}, TypeError, "X0"),
        ((torch.ones(5, dtype=F64), 2), {}, ValueError, "X0"),
        ((torch.ones(1, 4, dtype=F64), 2), {}, ValueError, "X0"),
        ((torch.ones(3, 4, dtype=torch.int64), 2), {}, TypeError, "X0"),
        ((X, 2.5), {}, TypeError, "depth"),
        ((X, -1), {}, ValueError, "depth"),
        ((X, 2), dict(attention="relu"), ValueError, "attention"),
        ((X, 2), dict(s2=-1.0), ValueError, "s2"),
        ((X, 2), dict(s2="big"), TypeError, "s2"),
        ((X, 2), dict(beta=math.inf), ValueError, "beta"),
        ((X, 2), dict(mask=torch.ones(15, 15, dtype=torch.bool)), ValueError, "mask"),
        ((X, 2), dict(mask=torch.ones(16, 16)), TypeError, "mask"),
        ((X, 2), dict(centred=1), TypeError, "centred"),
        ((X, 2), dict(norm="batchnorm"), ValueError, "norm"),
        ((X, 2), dict(skip="yes"), TypeError, "skip"),
        ((X, 2), dict(skip=math.nan), ValueError, "skip"),
        ((X, 2), dict(values="random"), ValueError, "values"),
        ((X, 2), dict(value_var=0.0), ValueError, "value_var"),
        ((X, 2), dict(W_Q=W24, W_K=W24), ValueError, "W_Q"),
        ((X, 2), dict(d_qk=4), ValueError, "d_qk"),
        ((X, 2), dict(attention="qk", W_Q=W24), ValueError, "W_Q and W_K"),
        ((X, 2), dict(attention="qk", W_Q=W24, W_K=W24, d_qk=4), ValueError, "d_qk"),
        ((X, 2), dict(attention="qk", d_qk=0), ValueError, "d_qk"),
        ((X, 2), dict(attention="qk", W_Q=torch.ones(23, 4, dtype=F64), W_K=W24), ValueError, "W_Q"),
        ((X, 2), dict(attention="qk", W_Q=W24, W_K=torch.ones(24, 5, dtype=F64)), ValueError, "W_K"),
        ((X, 2), dict(attention="qk", W_Q=torch.ones(5, 24, 4, dtype=F64), W_K=torch.ones(5, 24, 4, dtype=F64)),
         ValueError, "W_Q"),
        ((X, 2), dict(W_V=torch.ones(24, 23, dtype=F64)), ValueError, "W_V"),
        ((X, 2), dict(W_V=[[1.0]]), TypeError, "W_V"),
        ((X, 2), dict(W_V=W24, values="identity"), ValueError, "W_V"),
        ((X, 2), dict(shared="no"), TypeError, "shared"),
        ((X, 2), dict(dropout=1.0), ValueError, "dropout"),
        ((X, 2), dict(dropout=-0.1), ValueError, "dropout"),
        ((X, 2), dict(dropout="0.1"), TypeError, "dropout"),
        ((X, 2), dict(keep_states=None), TypeError, "keep_states"),
        ((X, 2), dict(seed=-1), ValueError, "seed"),
        ((X, 2), dict(seed=1, generator=torch.Generator()), ValueError, "seed or generator"),
        ((X, 2), dict(dtype=torch.int32), TypeError, "dtype"),
        ((X, 2), dict(device=3), TypeError, "device"),
    ],
)
def test_propagate_errors(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        propagate(*args, **kwargs)


def test_nonfinite_X0():
    bad = tokens().clone()
    bad[0, 0, 0] = math.nan
    with pytest.raises(ValueError, match="X0"):
        propagate(bad, 1)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(W_V=W24), ValueError, "W_V"),
        (dict(shared=True), ValueError, "shared"),
        (dict(keep_states=True), ValueError, "keep_states"),
        (dict(loss="l2"), ValueError, "loss"),
        (dict(widht=3), TypeError, "widht"),
        (dict(loss=lambda X: 1.0), TypeError, "loss"),
    ],
)
def test_weight_gradients_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        weight_gradients(X, 2, seed=0, **kwargs)


def test_weight_gradients_depth_zero():
    with pytest.raises(ValueError, match="depth"):
        weight_gradients(X, 0, seed=0)


def test_normalise_errors():
    with pytest.raises(ValueError, match="norm"):
        normalise(X, "l1")


def test_propagate_without_stable_ranks_keeps_mu_and_norm():
    X0 = rcteach.orthonormal_tokens(8, 8, batch=2, seed=0)
    full = rcteach.propagate(X0, 3, seed=1)
    lean = rcteach.propagate(X0, 3, seed=1, stable_ranks=False)
    assert torch.equal(full.mu, lean.mu) and torch.equal(full.norm, lean.norm)
    assert lean.stable_rank is None and lean.stable_rank_gram is None
    with pytest.raises(TypeError, match="stable_ranks"):
        rcteach.propagate(X0, 3, seed=1, stable_ranks="no")
