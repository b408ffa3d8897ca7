"""A tiny training experiment: attention-only layers learning to copy their input tokens.

Introduced in chapter "Theorem 2 of Wu et al., settled numerically, and training briefly" (book/14_theorem2.md).

The chapter uses it to ask whether the initialisation's collapse matters
once the weights move.  The model, for token ids (B, T) over a vocabulary of size V:

    X_0 = E[ids]                                    # (B, T, d), E (V, d) with N(0, 1/d) entries
    X_l = A_l(X_{l-1}) X_{l-1} W_V^l                # l = 1..depth, A_l = softmax(X W_Q W_K^T / sqrt d);
                                                    # A_l - 11^T/T for init "A_perp",
                                                    # X_{l-1} + A_l X_{l-1} W_V^l for init "skip"
    logits = X_depth E^T                            # (B, T, V), tied read-out

Each layer is the public one, :func:`rcteach.layers.forward` with ``LayerConfig(attention="qk", ...)``
and its weights given (the network's parameters).

and the task is to output, at every position, the token that came in there (cross-entropy).  A
collapsed X_depth (all rows equal) cannot do it; the identity can.  At initialisation W_Q, W_K have
i.i.d. N(0, s2^(1/2)) entries, so the logits of unit-norm tokens have variance s2 (as in
``rcteach.propagate``), and W_V has N(0, value_var) entries with the norm-keeping choice of the
chapter "Norms and gradients": 1/d with A, T/(d c) with A_perp (c = e^{s2} - 1).  Trained with Adam
on fresh random batches.

:func:`consensus_gradients` takes one layer of that network and pulls its input towards consensus, to
measure how the query and key gradients vanish there (like mu^2): why escaping collapse is slow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import _validate
from .layers import LayerConfig, LayerWeights, forward
from .metrics import mu_unchecked, stable_rank

__all__ = ["ConsensusGradients", "TrainingRun", "consensus_gradients", "train_copy"]

INITS = ("A", "A_perp", "skip")


@dataclass(frozen=True)
class TrainingRun:
    """Per-step records of :func:`train_copy` (each a float64 tensor of shape (steps + 1,), step 0 = init)."""

    init: str
    loss: torch.Tensor  # cross-entropy on a fixed evaluation batch (log V = chance); NaN at unevaluated steps
    # (train_copy's eval_every), as stable_rank
    grad_norm: torch.Tensor  # ||gradient||_F over all weights, on the training batch (NaN at the last entry)
    grad_norm_qk: torch.Tensor  # the part of it from W_Q and W_K
    stable_rank: torch.Tensor  # Frobenius stable rank of X_depth on the evaluation batch, mean over its sequences
    # whose X_depth is nonzero (A_perp can give exactly 0: on equal tokens, or where softmax - 1/T rounds to 0
    # near consensus, as with a small vocabulary; a zero matrix has no stable rank; NaN if every one is zero)


@dataclass(frozen=True)
class ConsensusGradients:
    """The gradients of :func:`consensus_gradients`, float64 tensors of shape (n,), one entry per eps."""

    eps: torch.Tensor
    mu: torch.Tensor  # mu(X) = ||X - 1 xbar^T||_F = eps mu(E[ids])
    grad_qk: torch.Tensor  # sqrt(||dL/dW_Q||_F^2 + ||dL/dW_K||_F^2)
    grad_v: torch.Tensor  # ||dL/dW_V||_F


def _layer_config(init) -> LayerConfig:
    """The layer of initialisation ``init`` (module doc): query-key attention, centred for "A_perp", with a
    skip connection for "skip"."""
    return LayerConfig(attention="qk", centred=init == "A_perp", skip=init == "skip")


def _forward(X, E, layers, config):
    """The network on input tokens X (*batch, T, d): the output tokens and their logits (*batch, T, V).
    Weights may carry the batch dimensions too (one network per batch element)."""
    for W_Q, W_K, W_V in layers:
        X = forward(X, config, LayerWeights(W_Q=W_Q, W_K=W_K, W_V=W_V))
    return X, X @ E.T  # (*batch, T, d), (*batch, T, V)


def _init(*, d, vocab, depth, s2, value_var, g):
    """The embedding E (vocab, d) and ``depth`` layers [W_Q, W_K, W_V] (d, d) at initialisation (module doc),
    float64 leaves that require gradients."""
    stds = (s2**0.25, s2**0.25, math.sqrt(value_var))  # W_Q, W_K, W_V

    def draw(rows, std):
        return (std * torch.randn(rows, d, generator=g, dtype=torch.float64)).requires_grad_(True)

    E = draw(vocab, 1.0 / math.sqrt(d))  # tokens of norm ~1
    return E, [[draw(d, std) for std in stds] for _ in range(depth)]


def train_copy(init="A", *, T=16, d=32, vocab=16, depth=4, steps=150, lr=3e-3, batch=32, s2=1.0,
               seed=0, eval_every=1) -> TrainingRun:
    """Train the copy task from initialisation ``init``: "A" (softmax attention, no skip), "A_perp"
    (centred attention, no skip) or "skip" (softmax attention with X + A X W_V); see the module doc.

    The evaluation batch (loss and stable rank of the records) is run at steps 0, ``eval_every``,
    2 ``eval_every``, ... and at the last step; the records are NaN at the other steps.  The
    evaluation draws no random numbers, so the training and every evaluated record are the same
    for any ``eval_every`` (``eval_every=steps``: the start and the end only, for a run whose final
    loss is all that is needed; the evaluation of 128 sequences costs more than a training step).
    """
    init = _validate.choice("init", init, INITS)
    T, d, vocab = (_validate.integer(n, v, minimum=2) for n, v in (("T", T), ("d", d), ("vocab", vocab)))
    depth, steps, batch, eval_every = (
        _validate.integer(n, v, minimum=1)
        for n, v in (("depth", depth), ("steps", steps), ("batch", batch), ("eval_every", eval_every)))
    lr = _validate.real("lr", lr, positive=True)
    s2 = _validate.real("s2", _validate.log_variance("s2", s2), positive=True)  # e^{s2} - 1 > 0, finite
    g = torch.Generator().manual_seed(_validate.seed(seed))
    value_var = T / (d * math.expm1(s2)) if init == "A_perp" else 1.0 / d
    E, layers = _init(d=d, vocab=vocab, depth=depth, s2=s2, value_var=value_var, g=g)
    params = [E] + [w for layer in layers for w in layer]
    qk = [w for layer in layers for w in layer[:2]]
    opt = torch.optim.Adam(params, lr=lr)
    config = _layer_config(init)
    eval_ids = torch.randint(vocab, (128, T), generator=g)
    loss_f = torch.nn.functional.cross_entropy
    records = {k: [] for k in ("loss", "grad_norm", "grad_norm_qk", "stable_rank")}
    for step in range(steps + 1):
        if step % eval_every and step < steps:
            records["loss"].append(math.nan)
            records["stable_rank"].append(math.nan)
        else:
            with torch.no_grad():
                X, logits = _forward(E[eval_ids], E, layers, config)
                records["loss"].append(loss_f(logits.reshape(-1, vocab), eval_ids.reshape(-1)).item())
                ranked = X[X.abs().amax((-2, -1)) > 0]  # the sequences with a stable rank (TrainingRun)
                records["stable_rank"].append(stable_rank(ranked).mean().item() if len(ranked) else math.nan)
        if step == steps:
            records["grad_norm"].append(math.nan)
            records["grad_norm_qk"].append(math.nan)
            break
        ids = torch.randint(vocab, (batch, T), generator=g)
        _, logits = _forward(E[ids], E, layers, config)
        opt.zero_grad()
        loss_f(logits.reshape(-1, vocab), ids.reshape(-1)).backward()
        records["grad_norm"].append(math.sqrt(sum(p.grad.square().sum().item() for p in params)))
        records["grad_norm_qk"].append(math.sqrt(sum(p.grad.square().sum().item() for p in qk)))
        opt.step()
    return TrainingRun(init, **{k: torch.tensor(v, dtype=torch.float64) for k, v in records.items()})


def consensus_gradients(eps, *, T=16, d=32, vocab=16, s2=1.0, seed=0) -> ConsensusGradients:
    """The weight gradients of one softmax attention layer of the copy task, its input pulled towards consensus.

    One network as :func:`train_copy` draws it for init "A" with ``depth=1`` (E, W_Q, W_K with logit
    variance ``s2``, W_V with N(0, 1/d) entries) and one sequence ``ids`` of T tokens; the input is the
    copy task's X_0 = E[ids] shrunk towards its mean token by ``eps``:

        X = 1 xbar^T + eps C,    xbar = mean of the rows of E[ids],  C = E[ids] - 1 xbar^T  (T, d)
        Y = A X W_V,  A = softmax(X W_Q W_K^T X^T / sqrt d),  loss = cross-entropy(Y E^T, ids), mean over tokens

    so mu(X) = eps mu(E[ids]) and eps = 1 is the task's own input.  Near consensus (eps -> 0) the
    gradient of the loss with respect to the logits, S_ij = a_ij (g_ij - sum_k a_ik g_ik) with
    g_ij = <dL/dY_i, x_j W_V>, is O(eps) (the part of g_ij constant in j cancels) and its rows sum to 0,
    so S X = eps S C and dL/dM = X^T S X / sqrt d = O(eps^2), M = W_Q W_K^T; to leading order

        dL/dM = eps^2 / (T sqrt d) xbar gbar^T W_V^T C^T C,   gbar = sum_i dL/dY_i at consensus (column vectors),

    with grad W_Q = (dL/dM) W_K, grad W_K = (dL/dM)^T W_Q: the query and key gradients vanish like mu^2,
    while the value gradient (A X)^T dL/dY tends to xbar gbar^T (derived in the chapter).

    Parameters
    ----------
    eps : list or tuple of floats, each in (0, 1]
        The shrink factors (1: the task's own input); the networks for all of them share E, ids and the weights.
    T, d, vocab : int >= 2
        Tokens, width, vocabulary size.
    s2 : float > 0
        Logit variance at initialisation.
    seed : int
        Seeds the one ``torch.Generator`` that draws E, the weights and ids.

    Returns
    -------
    ConsensusGradients with eps, mu, grad_qk, grad_v, each of shape (len(eps),).
    """
    eps = _validate.values("eps", eps, _validate.real, positive=True, maximum=1.0)
    T, d, vocab = (_validate.integer(n, v, minimum=2) for n, v in (("T", T), ("d", d), ("vocab", vocab)))
    s2 = _validate.real("s2", _validate.log_variance("s2", s2), positive=True)
    g = torch.Generator().manual_seed(_validate.seed(seed))
    E, [layer] = _init(d=d, vocab=vocab, depth=1, s2=s2, value_var=1.0 / d, g=g)
    ids = torch.randint(vocab, (T,), generator=g)
    X0 = E[ids].detach()  # (T, d)
    xbar = X0.mean(0)
    shrink = torch.tensor(eps, dtype=torch.float64)[:, None, None]  # (n, 1, 1)
    X = xbar + shrink * (X0 - xbar)  # (n, T, d)
    with torch.enable_grad():  # also under no_grad (the check runner)
        weights = [w.detach().expand(len(eps), d, d).clone().requires_grad_(True) for w in layer]  # a copy per eps
        _, logits = _forward(X, E.detach(), [weights], _layer_config("A"))  # (n, T, V)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), ids.repeat(len(eps)), reduction="sum")
        grads = torch.autograd.grad(loss / T, weights)  # of the sum of the per-eps losses: one per copy
    W_Q, W_K, W_V = (w.flatten(1).norm(dim=1) for w in grads)
    return ConsensusGradients(eps=shrink.flatten(), mu=mu_unchecked(X), grad_qk=torch.hypot(W_Q, W_K), grad_v=W_V)
