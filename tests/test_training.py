import math

import pytest
import torch

from rcteach import training
from rcteach.training import consensus_gradients, train_copy


def test_records_and_reproducible():
    a = train_copy("skip", T=6, d=8, vocab=5, depth=2, steps=4, batch=4, seed=3)
    b = train_copy("skip", T=6, d=8, vocab=5, depth=2, steps=4, batch=4, seed=3)
    for field in ("loss", "grad_norm", "grad_norm_qk", "stable_rank"):
        assert getattr(a, field).shape == (5,)
        assert torch.equal(torch.nan_to_num(getattr(a, field)), torch.nan_to_num(getattr(b, field)))
    assert math.isnan(a.grad_norm[-1]) and (a.grad_norm_qk[:-1] <= a.grad_norm[:-1]).all()


def test_eval_every_changes_only_which_steps_are_evaluated():
    """The evaluation draws no random numbers: every evaluated record equals the every-step run's, bitwise."""
    kw = dict(T=6, d=8, vocab=5, depth=2, steps=7, batch=4, seed=1)
    every, some = train_copy("A_perp", **kw), train_copy("A_perp", eval_every=3, **kw)
    evaluated = torch.tensor([0, 3, 6, 7])
    for field in ("loss", "stable_rank"):
        a, b = getattr(every, field), getattr(some, field)
        assert torch.equal(a[evaluated], b[evaluated]) and not a[evaluated].isnan().any()
        assert b[[1, 2, 4, 5]].isnan().all()
    assert torch.equal(every.grad_norm[:-1], some.grad_norm[:-1])


@pytest.mark.parametrize("init", training.INITS)
def test_network_is_the_formula(init):
    """Each layer (rcteach.layers.forward underneath) is A X W_V, A_perp X W_V or X + A X W_V (module doc)."""
    T, d = 5, 6
    E, layers = training._init(d=d, vocab=7, depth=2, s2=1.0, value_var=1.0 / d, g=torch.Generator().manual_seed(2))
    X = E.detach()[torch.tensor([0, 3, 3, 6, 1])]
    expected = X
    for W_Q, W_K, W_V in layers:
        A = torch.softmax((expected @ W_Q) @ (expected @ W_K).mT / math.sqrt(d), dim=-1)
        A = A - 1 / T if init == "A_perp" else A
        expected = (expected if init == "skip" else 0) + A @ expected @ W_V
    out, logits = training._forward(X, E, layers, training._layer_config(init))
    assert torch.allclose(out, expected, rtol=1e-13, atol=1e-15) and torch.equal(logits, out @ E.T)


def test_collapsed_start_for_A():
    run = train_copy("A", T=16, d=32, vocab=16, depth=4, steps=1, seed=0)
    assert run.loss[0] == pytest.approx(math.log(16), rel=0.01)  # collapsed output: chance level
    assert run.stable_rank[0] < 1.05


@pytest.mark.parametrize("kwargs, name", [(dict(init="B"), "init"), (dict(T=1), "T"), (dict(lr=0.0), "lr"),
                                          (dict(steps=0), "steps")])
def test_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        train_copy(**kwargs)


def test_consensus_gradients_shapes_and_mu():
    eps = [1.0, 0.1, 0.01]
    r = consensus_gradients(eps, T=6, d=8, vocab=5, seed=1)
    for field in ("eps", "mu", "grad_qk", "grad_v"):
        assert getattr(r, field).shape == (3,) and getattr(r, field).dtype == torch.float64
    assert torch.allclose(r.mu / r.eps, r.mu[:1].expand(3))  # mu(X) = eps mu(E[ids])


def test_consensus_gradients_reproducible_by_seed():
    a, b, c = (consensus_gradients([0.5, 0.05], seed=s) for s in (3, 3, 4))
    assert torch.equal(a.grad_qk, b.grad_qk) and torch.equal(a.grad_v, b.grad_v)
    assert not torch.equal(a.grad_qk, c.grad_qk)


def test_consensus_gradients_match_one_at_a_time():
    """The batch over eps gives each eps its own gradient (the weights are copied, not shared)."""
    both = consensus_gradients([0.3, 0.03], seed=2)
    for k, e in enumerate([0.3, 0.03]):
        one = consensus_gradients([e], seed=2)
        assert torch.allclose(both.grad_qk[k], one.grad_qk[0], rtol=1e-12)
        assert torch.allclose(both.grad_v[k], one.grad_v[0], rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_qk_gradients_vanish_quadratically(seed):
    """||grad W_Q, W_K|| ~ mu^2 near consensus (slope 2 up to O(mu)); ||grad W_V|| tends to a nonzero limit."""
    r = consensus_gradients([1e-2, 1e-3, 1e-4], seed=seed)
    slopes = r.grad_qk.log().diff() / r.mu.log().diff()
    assert (slopes - 2).abs().max() < 0.02
    assert (slopes[1] - 2).abs() < (slopes[0] - 2).abs()  # the O(mu) correction shrinks with mu
    assert r.grad_v[-1] > 1e-3 and torch.allclose(r.grad_v[1:], r.grad_v[-1:], rtol=1e-3)


@pytest.mark.parametrize("eps", [[], 0.1, [0.1, 0.0], [math.nan], ["0.1"]])
def test_consensus_gradients_bad_eps(eps):
    with pytest.raises((ValueError, TypeError), match="eps"):
        consensus_gradients(eps)


def test_leading_term_of_the_qk_gradient():
    """dL/dM = eps^2/(T sqrt d) xbar gbar^T W_V^T C^T C + O(eps^3), M = W_Q W_K^T, gbar = sum_i dL/dY_i at
    consensus (the chapter's formula), so grad W_Q = (dL/dM) W_K and grad W_K = (dL/dM)^T W_Q."""
    T, d, vocab, eps = 6, 4, 5, 1e-5
    g = torch.Generator().manual_seed(5)
    E, [[W_Q, W_K, W_V]] = training._init(d=d, vocab=vocab, depth=1, s2=1.0, value_var=1.0 / d, g=g)
    E = E.detach()
    ids = torch.randint(vocab, (T,), generator=g)
    xbar = E[ids].mean(0)
    C = E[ids] - xbar
    ce = torch.nn.functional.cross_entropy
    _, logits = training._forward(xbar + eps * C, E, [[W_Q, W_K, W_V]], training._layer_config("A"))
    grad_Q, grad_K = torch.autograd.grad(ce(logits, ids), [W_Q, W_K])
    Y = (xbar @ W_V).detach().expand(T, d).clone().requires_grad_(True)  # the output at consensus
    (G,) = torch.autograd.grad(ce(Y @ E.T, ids), Y)
    dM = eps**2 / (T * math.sqrt(d)) * torch.outer(xbar, C.T @ C @ W_V.detach() @ G.sum(0))
    assert torch.allclose(grad_Q, dM @ W_K.detach(), rtol=1e-3, atol=0)
    assert torch.allclose(grad_K, dM.T @ W_Q.detach(), rtol=1e-3, atol=0)
