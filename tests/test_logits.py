"""Unit tests for rcteach.logits: shapes, batching, seeds, exact identities, error paths."""


import pytest
import torch

from rcteach import LN2, attention_map, orthonormal_tokens, qk_attention, random_attention, theory
from rcteach.logits import leading_term, qk_logits, random_logits, random_qk_logits


pytestmark = pytest.mark.usefixtures("cpu_env")


def test_random_logits_shape_dtype_seed():
    g = random_logits(8, 1.0, batch=(2, 3), seed=1)
    assert g.shape == (2, 3, 8, 8) and g.dtype == torch.float64
    assert torch.equal(g, random_logits(8, 1.0, batch=(2, 3), seed=1))
    assert not torch.equal(g, random_logits(8, 1.0, batch=(2, 3), seed=2))
    gen = torch.Generator().manual_seed(1)
    assert torch.equal(g, random_logits(8, 1.0, batch=(2, 3), generator=gen))
    assert random_logits(8, 1.0, dtype=torch.float32, seed=0).dtype == torch.float32


def test_random_logits_matches_random_attention_and_mean_cancels():
    g = random_logits(16, LN2, batch=3, seed=5)
    assert torch.equal(attention_map(g), random_attention(16, LN2, batch=3, seed=5))
    g_shift = random_logits(16, LN2, m=-2.5, batch=3, seed=5)
    assert torch.allclose(g_shift, g - 2.5, atol=1e-15)
    assert torch.allclose(attention_map(g_shift), attention_map(g), atol=1e-15)


def test_random_logits_moments():
    g = random_logits(256, 2.0, m=0.5, batch=4, seed=0)
    assert g.mean().item() == pytest.approx(0.5, abs=0.02)  # 262144 draws: sd of the mean ~0.003
    assert g.var().item() == pytest.approx(2.0, rel=0.02)


def test_qk_logits_matches_attention():
    X = orthonormal_tokens(10, 20, batch=2, seed=0)
    gen = torch.Generator().manual_seed(1)
    W_Q = torch.randn(20, 4, generator=gen, dtype=torch.float64)
    W_K = torch.randn(2, 20, 4, generator=gen, dtype=torch.float64)
    g = qk_logits(X, W_Q, W_K, beta=0.7)
    assert g.shape == (2, 10, 10)
    assert torch.allclose(g, 0.7 * (X @ W_Q) @ (X @ W_K).transpose(-2, -1) / 2.0, atol=1e-14)
    assert torch.allclose(attention_map(g), qk_attention(X, W_Q, W_K, beta=0.7), atol=1e-15)
    assert torch.linalg.matrix_rank(g[0]).item() <= 4


def test_qk_logits_errors():
    X = torch.zeros(5, 6, dtype=torch.float64)
    W = torch.zeros(6, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="W_Q"):
        qk_logits(X, torch.zeros(7, 3, dtype=torch.float64), W)
    with pytest.raises(ValueError, match="d_qk"):
        qk_logits(X, W, torch.zeros(6, 4, dtype=torch.float64))
    with pytest.raises(TypeError, match="W_K"):
        qk_logits(X, W, W.float())
    with pytest.raises(TypeError, match="X"):
        qk_logits([[1.0]], W, W)
    with pytest.raises(TypeError, match="beta"):
        qk_logits(X, W, W, beta="hot")


def test_random_qk_logits_shape_seed_variance():
    g = random_qk_logits(32, 64, 8, batch=3, seed=2)
    assert g.shape == (3, 32, 32) and g.dtype == torch.float64
    assert torch.equal(g, random_qk_logits(32, 64, 8, batch=3, seed=2))
    g = random_qk_logits(64, 128, 32, token_norm_sq=4.0, sigma_q=0.5, sigma_k=0.25, beta=2.0, batch=8, seed=3)
    predicted = theory.logit_variance(0.5, 0.25, 4.0, beta=2.0)
    assert g.var().item() == pytest.approx(predicted, rel=0.05)  # 8 heads: spread of the pooled variance ~1.5%


def _qk_moments(g):
    """Per-draw statistics (n, 4) of logits g (n, T, T): the means of g_ij^2, of g_ij^2 g_ik^2 (one row,
    j != k), of g_ij^2 g_kj^2 (one column, i != k) and of g_ij g_ji (i != j)."""
    sq, T = g.square(), g.shape[-1]
    pairs = T * (T - 1)  # ordered pairs j != k in a row (i != k in a column), and off-diagonal entries
    row = (sq.sum(-1).square() - sq.square().sum(-1)).sum(-1) / (T * pairs)
    col = (sq.sum(-2).square() - sq.square().sum(-2)).sum(-1) / (T * pairs)
    sym = ((g * g.transpose(-2, -1)).sum((-2, -1)) - g.diagonal(dim1=-2, dim2=-1).square().sum(-1)) / pairs
    return torch.stack([sq.mean((-2, -1)), row, col, sym], dim=-1)


def _mean_se(stats):
    """Mean and standard error over the draws (dim 0)."""
    return stats.mean(0), stats.std(0) / stats.shape[0] ** 0.5


def test_random_qk_logits_exact_in_law():
    # Q, K drawn directly against the explicit construction X = r * orthonormal_tokens, W ~ N(0, sigma^2), and
    # both against the closed forms.  With v = beta^2 sigma_q^2 sigma_k^2 r^4: E g^2 = v, E g_ij^2 g_ik^2 =
    # E g_ij^2 g_kj^2 = v^2 (1 + 2/d_qk) (a shared query or key: E|q|^4 = (d_qk^2 + 2 d_qk) Var(q_l)^2; i.i.d.
    # logits would give v^2) and E g_ij g_ji = 0 (Q, K independent).  Tokens not orthogonal, a K sharing Q,
    # a wrong scale or i.i.d. logits each move one of these by far more than 4 standard errors.
    T, d, d_qk, n = 4, 6, 2, 40000
    r2, sq, sk, beta = 3.0, 0.7, 1.3, 0.8
    fast = random_qk_logits(T, d, d_qk, token_norm_sq=r2, sigma_q=sq, sigma_k=sk, beta=beta, batch=n, seed=11)
    gen = torch.Generator().manual_seed(12)
    X = r2**0.5 * orthonormal_tokens(T, d, batch=n, generator=gen)
    W_Q = sq * torch.randn(n, d, d_qk, generator=gen, dtype=torch.float64)
    W_K = sk * torch.randn(n, d, d_qk, generator=gen, dtype=torch.float64)
    slow = qk_logits(X, W_Q, W_K, beta=beta)
    (m_fast, se_fast), (m_slow, se_slow) = _mean_se(_qk_moments(fast)), _mean_se(_qk_moments(slow))
    v = theory.logit_variance(sq, sk, r2, beta=beta)
    closed = torch.tensor([v, v**2 * (1 + 2 / d_qk), v**2 * (1 + 2 / d_qk), 0.0], dtype=torch.float64)
    assert ((m_fast - m_slow).abs() <= 4 * (se_fast.square() + se_slow.square()).sqrt()).all()
    for m, se in ((m_fast, se_fast), (m_slow, se_slow)):
        assert ((m - closed).abs() <= 4 * se).all()
        assert (m[1:3] - v**2).abs().min() > 20 * se[1:3].max()  # the i.i.d. value v^2 is far outside


def test_random_qk_logits_errors():
    with pytest.raises(ValueError, match="T"):
        random_qk_logits(64, 32, 8)  # T > d: no orthonormal tokens
    with pytest.raises(ValueError, match="d_qk"):
        random_qk_logits(8, 16, 0)
    with pytest.raises(ValueError, match="sigma_q"):
        random_qk_logits(8, 16, 4, sigma_q=-1.0)
    with pytest.raises(ValueError, match="seed or generator"):
        random_qk_logits(8, 16, 4, seed=1, generator=torch.Generator())


def test_leading_term_exact_properties():
    g = random_logits(32, 1.0, m=0.3, batch=2, seed=4)
    L = leading_term(g, 1.0, m=0.3)
    assert L.shape == (2, 32, 32)
    assert torch.allclose(L.sum(-1), torch.ones(2, 32, dtype=torch.float64), atol=1e-14)
    Z = torch.exp(g - 0.3 - 0.5) - 1
    assert torch.allclose(L, 1 / 32 + (Z - Z.mean(-1, keepdim=True)) / 32, atol=1e-15)
    assert torch.allclose(leading_term(torch.zeros(4, 4, dtype=torch.float64), 0.0),
                          torch.full((4, 4), 0.25, dtype=torch.float64))


def test_leading_term_accuracy():
    T, s2 = 256, LN2
    g = random_logits(T, s2, batch=4, seed=6)
    A, L = attention_map(g), leading_term(g, s2)
    ratio = (torch.linalg.matrix_norm(A - L) / torch.linalg.matrix_norm(L - 1 / T)).mean().item()
    assert ratio == pytest.approx(theory.leading_term_residual(T, s2), rel=0.2)  # per-seed spread ~4%


def test_leading_term_errors():
    with pytest.raises(ValueError, match="logits"):
        leading_term(torch.zeros(3, 4, dtype=torch.float64), 1.0)
    with pytest.raises(ValueError, match="s2"):
        leading_term(torch.zeros(3, 3, dtype=torch.float64), -1.0)
    with pytest.raises(TypeError, match="m"):
        leading_term(torch.zeros(3, 3, dtype=torch.float64), 1.0, m=None)
    with pytest.raises(ValueError, match="s2"):
        random_logits(4, -0.1)
    with pytest.raises(TypeError, match="T"):
        random_logits(4.0, 1.0)
