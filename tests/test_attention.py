"""Unit tests for rcteach.attention: attention maps, centring, the i.i.d.-logit model, QK attention."""

import math

import pytest
import torch

from rcteach import (
    ACTIVATIONS,
    LN2,
    qk_attention,
    attention_map,
    centre,
    make_mask,
    random_attention,
    spectrum,
    spectrum_distance,
    uniform_attention,
)
from rcteach.attention import attention_map_unchecked, noniso_attention

T = 6


pytestmark = pytest.mark.usefixtures("cpu_env")


def logits(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def masks(T=T):
    return [make_mask("causal", T), make_mask("sliding", T, window=1), make_mask("sliding-causal", T, window=2)]


def P(T, dtype=torch.float64):
    return torch.eye(T, dtype=dtype) - torch.full((T, T), 1 / T, dtype=dtype)


def test_constants():
    assert ACTIVATIONS == ("softmax", "relu", "sigmoid")
    assert LN2 == math.log(2)
    assert math.expm1(LN2) == pytest.approx(1.0, abs=1e-15)  # c = 1 at s2 = ln 2


# -- uniform_attention -----------------------------------------------------------------------------

def test_uniform_without_mask():
    U = uniform_attention(T)
    assert U.shape == (T, T) and U.dtype == torch.float64
    assert torch.equal(U, torch.full((T, T), 1 / T, dtype=torch.float64))
    assert uniform_attention(T, dtype=torch.float32).dtype == torch.float32


@pytest.mark.parametrize("mask", masks(), ids=["causal", "sliding", "sliding-causal"])
def test_uniform_over_mask(mask):
    U = uniform_attention(T, mask)
    n = mask.sum(-1, keepdim=True).to(torch.float64)
    assert torch.equal(U == 0, ~mask)
    assert torch.allclose(U, mask.to(torch.float64) / n, atol=0)
    assert torch.allclose(U.sum(-1), torch.ones(T, dtype=torch.float64), atol=1e-15)


@pytest.mark.parametrize(
    "args, error, match",
    [
        ((1,), ValueError, "T"),
        ((2.5,), TypeError, "T"),
        ((T, make_mask("causal", T + 1)), ValueError, "mask"),
        ((T, torch.ones(T, T)), TypeError, "mask"),
        ((T, torch.zeros(T, T, dtype=torch.bool)), ValueError, "mask"),
    ],
)
def test_uniform_errors(args, error, match):
    with pytest.raises(error, match=match):
        uniform_attention(*args)


# -- centre ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_centre_is_right_multiplication_by_P(activation):
    A = attention_map(logits(2, 3, T, T), activation=activation)
    Ap = centre(A)
    assert Ap.shape == (2, 3, T, T)
    assert torch.allclose(Ap, A @ P(T), atol=1e-15)
    assert Ap.sum(-1).abs().max() < 1e-15


def test_centre_softmax_is_A_minus_U():
    A = attention_map(logits(4, T, T))
    assert torch.allclose(centre(A), A - uniform_attention(T), atol=1e-15)


@pytest.mark.parametrize("mask", masks(), ids=["causal", "sliding", "sliding-causal"])
def test_centre_with_mask(mask):
    A = attention_map(logits(3, T, T), mask)
    Ap = centre(A, mask)
    assert torch.allclose(Ap, A - uniform_attention(T, mask), atol=1e-15)
    assert (Ap[..., ~mask] == 0).all()
    assert Ap.sum(-1).abs().max() < 1e-15


def test_centre_errors():
    A = attention_map(logits(T, T))
    with pytest.raises(TypeError, match="A"):
        centre(A.tolist())
    with pytest.raises(ValueError, match="A"):
        centre(torch.full((T, T), math.nan))
    with pytest.raises(TypeError, match="mask"):
        centre(A, torch.ones(T, T))  # a float mask is refused, not used as weights
    with pytest.raises(ValueError, match="mask"):
        centre(A, make_mask("causal", T + 1))


# -- attention_map ---------------------------------------------------------------------------------

def test_softmax_rows_sum_to_one():
    g = 3 * logits(2, 3, T, T)
    A = attention_map(g)
    assert A.shape == (2, 3, T, T)
    assert (A > 0).all()
    assert (A.sum(-1) - 1).abs().max() < 1e-15
    assert torch.allclose(A, g.exp() / g.exp().sum(-1, keepdim=True), atol=1e-15)


def test_softmax_ignores_the_logit_mean():
    g = logits(T, T)
    assert torch.allclose(attention_map(g + 5.0), attention_map(g), atol=1e-15)


@pytest.mark.parametrize("mask", masks(), ids=["causal", "sliding", "sliding-causal"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_masked_maps_put_no_weight_outside_the_mask(mask, activation):
    A = attention_map(logits(2, 3, T, T), mask, activation=activation)
    assert A.shape == (2, 3, T, T)
    assert (A[..., ~mask] == 0).all()
    if activation == "softmax":
        assert (A.sum(-1) - 1).abs().max() < 1e-15
        assert (A[..., mask] > 0).all()


def test_masked_softmax_is_softmax_over_allowed_positions():
    mask = make_mask("sliding", T, window=1)
    g = logits(T, T)
    A = attention_map(g, mask)
    for i in range(T):
        allowed = mask[i].nonzero().flatten()
        assert torch.allclose(A[i, allowed], torch.softmax(g[i, allowed], -1), atol=1e-15)


def test_relu_and_sigmoid_formulas():
    g = logits(2, T, T)
    assert torch.allclose(attention_map(g, activation="relu"), g.clamp(min=0) / T, atol=1e-15)
    assert torch.allclose(attention_map(g, activation="sigmoid"), torch.sigmoid(g) / T, atol=1e-15)
    assert torch.allclose(attention_map(g, activation="sigmoid", bias=-2.0), torch.sigmoid(g - 2) / T, atol=1e-15)
    mask = make_mask("causal", T)
    n = mask.sum(-1, keepdim=True)
    assert torch.allclose(attention_map(g, mask, activation="relu"), g.clamp(min=0) * mask / n, atol=1e-15)
    assert torch.allclose(attention_map(g, mask, activation="sigmoid", bias=1.0),
                          torch.sigmoid(g + 1) * mask / n, atol=1e-15)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_centred_flag_matches_centre(activation):
    g = logits(2, T, T)
    mask = make_mask("sliding-causal", T, window=2)
    assert torch.equal(attention_map(g, activation=activation, centred=True),
                       centre(attention_map(g, activation=activation)))
    assert torch.equal(attention_map(g, mask, activation=activation, centred=True),
                       centre(attention_map(g, mask, activation=activation), mask))


def test_masked_centred_softmax_is_A_minus_U():
    mask = make_mask("causal", T)
    g = logits(3, T, T)
    Ap = attention_map(g, mask, centred=True)
    A = attention_map(g, mask)
    U = uniform_attention(T, mask)
    assert torch.allclose(Ap[..., mask], (A - U)[..., mask], atol=1e-15)
    assert (Ap[..., ~mask] == 0).all()


def test_batched_masks():
    g = logits(2, T, T)
    m = torch.stack([make_mask("causal", T), make_mask("complete", T)])
    A = attention_map(g, m)
    assert torch.equal(A[0], attention_map(g[0], m[0]))
    assert torch.equal(A[1], attention_map(g[1]))


def test_float32_maps():
    A = attention_map(logits(T, T, dtype=torch.float32), make_mask("causal", T), centred=True)
    assert A.dtype == torch.float32


@pytest.mark.parametrize(
    "g, kwargs, error, match",
    [
        (logits(T, T), dict(activation="tanh"), ValueError, "activation"),
        (logits(T, T), dict(bias=0.5), ValueError, "bias"),
        (logits(T, T), dict(activation="relu", bias=0.5), ValueError, "bias"),
        (logits(T, T), dict(activation="sigmoid", bias=math.nan), ValueError, "bias"),
        (logits(T, T), dict(activation="sigmoid", bias="1"), TypeError, "bias"),
        (torch.full((T, T), math.nan), {}, ValueError, "logits"),
        (torch.full((T, T), math.inf), {}, ValueError, "logits"),
        (logits(T, T + 1), {}, ValueError, "logits"),
        (logits(T), {}, ValueError, "logits"),
        (torch.zeros(T, T, dtype=torch.int64), {}, TypeError, "logits"),
        (logits(T, T).tolist(), {}, TypeError, "logits"),
        (logits(T, T), dict(mask=make_mask("causal", T + 1)), ValueError, "mask"),
        (logits(T, T), dict(mask=torch.ones(T, T)), TypeError, "mask"),
        (logits(T, T), dict(mask=torch.zeros(T, T, dtype=torch.bool)), ValueError, "mask"),
    ],
)
def test_attention_map_errors(g, kwargs, error, match):
    with pytest.raises(error, match=match):
        attention_map(g, **kwargs)


# -- random_attention ------------------------------------------------------------------------------

@pytest.mark.parametrize("batch, shape", [((), ()), (3, (3,)), ((2, 3), (2, 3))])
def test_random_attention_shapes(batch, shape):
    A = random_attention(T, batch=batch, seed=0)
    assert A.shape == (*shape, T, T)
    assert A.dtype == torch.float64 and A.device == torch.device("cpu")
    assert (A.sum(-1) - 1).abs().max() < 1e-15


def test_random_attention_float32():
    A = random_attention(T, batch=2, seed=0, dtype=torch.float32)
    assert A.dtype == torch.float32
    assert (A.sum(-1) - 1).abs().max() < 1e-6


def test_random_attention_seeds():
    A = random_attention(T, batch=2, seed=5)
    assert torch.equal(A, random_attention(T, batch=2, seed=5))
    assert not torch.equal(A, random_attention(T, batch=2, seed=6))
    assert not torch.equal(A[0], A[1])
    gen = torch.Generator().manual_seed(5)
    assert torch.equal(random_attention(T, batch=2, generator=gen), A)
    assert not torch.equal(random_attention(T, batch=2, generator=gen), A)  # the generator advanced
    with pytest.raises(ValueError, match="seed"):
        random_attention(T, seed=1, generator=torch.Generator())


@pytest.mark.parametrize("activation, bias", [("softmax", 0.0), ("relu", 0.0), ("sigmoid", -1.5)])
@pytest.mark.parametrize("centred", [False, True])
def test_random_attention_is_the_map_of_gaussian_logits(activation, bias, centred):
    s2 = 0.7
    g = math.sqrt(s2) * logits(2, T, T, seed=9)
    expected = attention_map(g, activation=activation, bias=bias, centred=centred)
    A = random_attention(T, s2, batch=2, seed=9, activation=activation, bias=bias, centred=centred)
    assert torch.allclose(A, expected, atol=1e-15)


def test_zero_variance_gives_uniform_attention():
    A = random_attention(T, 0.0, batch=2, seed=0)
    assert torch.allclose(A, uniform_attention(T).expand(2, T, T), atol=1e-15)
    assert random_attention(T, 0.0, centred=True, seed=0).abs().max() < 1e-15


def test_centred_random_attention():
    A = random_attention(T, batch=(2, 3), seed=1)
    Ap = random_attention(T, batch=(2, 3), seed=1, centred=True)
    assert torch.allclose(Ap, A @ P(T), atol=1e-15)
    assert Ap.sum(-1).abs().max() < 1e-15


def test_centring_keeps_the_bulk():
    A = random_attention(32, seed=3)
    ev = spectrum(A)
    assert abs(ev[0] - 1) < 1e-12
    expected = torch.cat([torch.zeros(1, dtype=ev.dtype), ev[1:]])
    assert spectrum_distance(spectrum(centre(A)), expected) < 1e-10
    # and the outlier really is gone: 1 is not an eigenvalue of A_perp
    assert (spectrum(centre(A)) - 1).abs().min() > 0.1


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((1,), {}, ValueError, "T"),
        ((4.0,), {}, TypeError, "T"),
        ((T, -0.1), {}, ValueError, "s2"),
        ((T, math.inf), {}, ValueError, "s2"),
        ((T, "1"), {}, TypeError, "s2"),
        ((T,), dict(activation="gelu"), ValueError, "activation"),
        ((T,), dict(bias=1.0), ValueError, "bias"),
        ((T,), dict(batch=0), ValueError, "batch"),
        ((T,), dict(dtype=torch.float16), TypeError, "dtype"),
        ((T,), dict(device="gpu0"), ValueError, "device"),
    ],
)
def test_random_attention_errors(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        random_attention(*args, **kwargs)


# -- attention (query-key) -------------------------------------------------------------------------

def qk(batch=(), T=T, d=5, d_qk=3, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(*batch, T, d, generator=gen, dtype=dtype)
    W_Q = torch.randn(d, d_qk, generator=gen, dtype=dtype)
    W_K = torch.randn(d, d_qk, generator=gen, dtype=dtype)
    return X, W_Q, W_K


def test_attention_formula():
    X, W_Q, W_K = qk(batch=(2, 3))
    beta = 0.7
    A = qk_attention(X, W_Q, W_K, beta=beta)
    assert A.shape == (2, 3, T, T)
    g = beta * (X @ W_Q) @ (X @ W_K).transpose(-2, -1) / math.sqrt(3)
    assert torch.allclose(A, torch.softmax(g, -1), atol=1e-15)
    assert torch.allclose(qk_attention(X, W_Q, W_K, beta=beta, activation="relu"), torch.relu(g) / T, atol=1e-15)


def test_attention_batched_weights():
    X, _, _ = qk(batch=(2,))
    gen = torch.Generator().manual_seed(1)
    W_Q = torch.randn(2, 5, 3, generator=gen, dtype=torch.float64)
    W_K = torch.randn(2, 5, 3, generator=gen, dtype=torch.float64)
    A = qk_attention(X, W_Q, W_K)
    for b in range(2):
        assert torch.allclose(A[b], qk_attention(X[b], W_Q[b], W_K[b]), atol=1e-15)


@pytest.mark.parametrize("mask", [None] + masks(), ids=["none", "causal", "sliding", "sliding-causal"])
def test_beta_zero_is_uniform_over_the_mask(mask):
    X, W_Q, W_K = qk(batch=(2,))
    A = qk_attention(X, W_Q, W_K, mask=mask, beta=0.0)
    assert torch.allclose(A, uniform_attention(T, mask).expand(2, T, T), atol=1e-15)


@pytest.mark.parametrize("mask", masks(), ids=["causal", "sliding", "sliding-causal"])
def test_masked_attention(mask):
    X, W_Q, W_K = qk(batch=(2, 3))
    A = qk_attention(X, W_Q, W_K, mask=mask, beta=2.0)
    assert (A[..., ~mask] == 0).all()
    assert (A.sum(-1) - 1).abs().max() < 1e-14
    Ap = qk_attention(X, W_Q, W_K, mask=mask, beta=2.0, centred=True)
    U = uniform_attention(T, mask)
    assert torch.allclose(Ap[..., mask], (A - U)[..., mask], atol=1e-15)
    assert (Ap[..., ~mask] == 0).all()


def test_attention_float32():
    X, W_Q, W_K = qk(dtype=torch.float32)
    A = qk_attention(X, W_Q, W_K)
    assert A.dtype == torch.float32
    assert torch.allclose(A.double(), qk_attention(X.double(), W_Q.double(), W_K.double()), atol=1e-6)


def test_attention_errors():
    X, W_Q, W_K = qk()
    cases = [
        ((X[0], W_Q, W_K), {}, ValueError, "X"),
        ((X[:1], W_Q, W_K), {}, ValueError, "X"),
        ((X.to(torch.int64), W_Q, W_K), {}, TypeError, "X"),
        ((X.numpy(), W_Q, W_K), {}, TypeError, "X"),
        ((torch.full_like(X, math.nan), W_Q, W_K), {}, ValueError, "X"),
        ((X, W_Q[:4], W_K), {}, ValueError, "W_Q"),
        ((X, W_Q, W_K[:4]), {}, ValueError, "W_K"),
        ((X, W_Q, W_K[:, :2]), {}, ValueError, "W_K"),
        ((X, W_Q.float(), W_K), {}, TypeError, "W_Q"),
        ((X, W_Q, W_K.float()), {}, TypeError, "W_K"),
        ((X, W_Q[0], W_K), {}, ValueError, "W_Q"),
        ((X, W_Q, W_K * math.inf), {}, ValueError, "W_K"),
        ((X, W_Q, W_K), dict(beta=math.nan), ValueError, "beta"),
        ((X, W_Q, W_K), dict(beta="1"), TypeError, "beta"),
        ((X, W_Q, W_K), dict(activation="exp"), ValueError, "activation"),
        ((X, W_Q, W_K), dict(bias=0.1), ValueError, "bias"),
        ((X, W_Q, W_K), dict(mask=make_mask("causal", T - 1)), ValueError, "mask"),
        ((X, W_Q, W_K), dict(mask=torch.ones(T, T, dtype=torch.uint8)), TypeError, "mask"),
        ((X, W_Q, W_K), dict(mask=torch.zeros(T, T, dtype=torch.bool)), ValueError, "mask"),
    ]
    for args, kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            qk_attention(*args, **kwargs)


# -- CUDA ------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_cuda_random_attention():
    A = random_attention(64, batch=2, seed=0, device="cuda")
    assert A.device.type == "cuda" and A.dtype == torch.float32
    assert torch.equal(A, random_attention(64, batch=2, seed=0, device="cuda"))
    assert (A.sum(-1) - 1).abs().max() < 1e-5


@pytest.mark.gpu
def test_cuda_attention_matches_cpu():
    X, W_Q, W_K = qk(batch=(2,), T=16, d=8, d_qk=4)
    mask = make_mask("sliding", 16, window=2)
    for centred in (False, True):
        cpu = qk_attention(X, W_Q, W_K, mask=mask, centred=centred)
        gpu = qk_attention(X.cuda(), W_Q.cuda(), W_K.cuda(), mask=mask, centred=centred)  # the mask moves itself
        assert gpu.device.type == "cuda"
        assert torch.allclose(gpu.cpu(), cpu, atol=1e-12)
    U = uniform_attention(16, mask, device="cuda")
    assert U.device.type == "cuda" and torch.allclose(U.cpu().double(), uniform_attention(16, mask), atol=1e-7)
    g = logits(2, 16, 16)
    assert torch.allclose(centre(g.cuda(), mask.cuda()).cpu(), centre(g, mask), atol=1e-12)


def test_noniso_attention_rows_and_logit_variance():
    """Rows sum to 1; the logits log A_ij (up to a row constant) spread over j with variance ~ s2."""
    s2 = 0.5
    A = noniso_attention(128, 128, s2, seeds=2, seed=3)
    assert A.shape == (2, 128, 128) and A.dtype == torch.float64
    assert torch.allclose(A.sum(-1), torch.ones(2, 128, dtype=torch.float64))
    assert A.log().var(-1).mean().item() == pytest.approx(s2, rel=0.1)
    assert torch.equal(A, noniso_attention(128, 128, s2, seeds=2, seed=3))
    assert noniso_attention(6, 3, seeds=1, seed=0).shape == (1, 6, 6)  # d < T allowed



@pytest.mark.parametrize("T", [2, 8, 15, 16, 40])
def test_small_softmax_matches_torch(T):
    """Below SMALL_SOFTMAX tokens the softmax is exp(l - max)/sum: torch.softmax's values to rounding, masked
    (-inf) entries exactly 0, and autograd gives torch's gradient."""
    g = torch.Generator().manual_seed(T)
    logits = 3 * torch.randn(4, T, T, generator=g, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    A = attention_map_unchecked(logits, mask)
    reference = torch.softmax(logits.masked_fill(~mask, -math.inf), dim=-1)
    torch.testing.assert_close(A, reference, rtol=1e-14, atol=1e-15)
    assert (A[..., ~mask] == 0).all()
    weights = torch.randn(4, T, T, generator=g, dtype=torch.float64)
    mine, = torch.autograd.grad((A * weights).sum(), logits)
    theirs, = torch.autograd.grad((reference * weights).sum(), logits)
    torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-14)
