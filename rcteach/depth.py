"""Signal propagation through a stack of attention layers at initialisation.

:func:`propagate` runs ``depth`` layers on tokens X0 (*batch, T, d) and records, for every layer
ℓ = 0..depth, the distance to consensus μ(X_ℓ), both stable ranks and the Frobenius norm.
:func:`weight_gradients` differentiates a loss of the last layer with respect to every layer's
W_Q, W_K and W_V.  Introduced in the chapters "Rank collapse in depth" and "Norms and gradients".

One layer, in this order (tokens are rows, attention acts from the left)::

    A  = attention(X)                              # (*batch, T, T), see ``attention=``
    A  = A * keep / (1 - p)   (dropout=p > 0)      # attention dropout, keep ~ Bernoulli(1 - p)
    Y  = A X W_V                                   # (*batch, T, d), see ``values=``
    X' = Y            (skip=False)
       = X + Y        (skip=True)
       = X + skip * Y (skip a float)
    X' = normalise(X') (norm=None | "rms" | "layernorm"), token by token

Randomness: one generator (from ``seed``) draws, layer after layer, first the attention's
randomness (logits or W_Q then W_K), then W_V, then (dropout > 0) the dropout mask.  Each batch
element gets its own draws, so a leading batch dimension of X0 is a batch of independent networks
(a batch over seeds).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from . import _validate
from .attention import attention_map, qk_attention
from .device import make_generator, resolve
from .masks import check_mask
from .metrics import squared_singular_values
from .theory import LN2
from .tokens import orthonormal_tokens

__all__ = ["ATTENTIONS", "VALUES", "NORMS", "Trajectory", "LayerGradients", "propagate", "weight_gradients", "normalise"]

ATTENTIONS = ("iid", "qk")
VALUES = ("gaussian", "orthogonal", "identity")
NORMS = (None, "rms", "layernorm")


@dataclass(frozen=True)
class Trajectory:
    """What :func:`propagate` records at layers ℓ = 0 (the input X0) .. depth.

    Every field but ``states`` has shape (depth + 1, *batch).  ``mu`` and ``norm`` keep the
    autograd graph (differentiate them directly); the stable ranks are computed on detached
    states.  A stable rank is NaN where X_ℓ is exactly zero (it is undefined there).
    """

    mu: torch.Tensor  # μ(X_ℓ) = ||P X_ℓ||_F, distance to consensus (= rcteach.mu)
    stable_rank: torch.Tensor  # Frobenius: sum s_i^2 / s_1^2 (= rcteach.stable_rank)
    stable_rank_gram: torch.Tensor  # Gram: sum s_i^4 / s_1^4 (= rcteach.stable_rank(gram=True))
    norm: torch.Tensor  # ||X_ℓ||_F
    states: torch.Tensor | None = None  # (depth + 1, *batch, T, d) with keep_states=True

    @property
    def depth(self) -> int:
        """Number of layers (the first axis has depth + 1 entries)."""
        return self.mu.shape[0] - 1

    @property
    def relative_mu(self) -> torch.Tensor:
        """μ(X_ℓ) / ||X_ℓ||_F, scale-free distance to consensus in [0, 1], (depth + 1, *batch)."""
        return self.mu / self.norm


@dataclass(frozen=True)
class LayerGradients:
    """Frobenius norms of dL/dW at each layer, each (depth, *batch); None where a layer has no such W."""

    W_Q: torch.Tensor | None
    W_K: torch.Tensor | None
    W_V: torch.Tensor | None
    loss: torch.Tensor  # (*batch,)


def normalise(X, kind) -> torch.Tensor:
    """Token-wise post-normalisation, no affine parameters; X (*batch, T, d) -> same shape.

    ``"rms"``: each token x -> x / ||x|| (unit norm, the LayerNorm of Wu et al.);
    ``"layernorm"``: each token centred over its d features and divided by its standard deviation
    (x - mean(x)) / std(x) (biased std, no epsilon), so its norm is sqrt(d);  ``None``: X unchanged.
    A zero token (or, for layernorm, a constant token) is mapped to zero.
    """
    kind = _validate.choice("norm", kind, NORMS)
    if kind is None:
        return X
    tiny = torch.finfo(X.dtype).tiny
    if kind == "rms":
        return X / torch.linalg.vector_norm(X, dim=-1, keepdim=True).clamp_min(tiny)
    Xc = X - X.mean(-1, keepdim=True)
    std = Xc.square().mean(-1, keepdim=True).sqrt()
    return Xc / std.clamp_min(tiny)


def _metrics(X):
    """μ, Frobenius and Gram stable ranks, norm of X (*batch, T, d): four (*batch,) tensors."""
    mu = torch.linalg.matrix_norm(X - X.mean(-2, keepdim=True))
    norm = torch.linalg.matrix_norm(X)
    s2 = squared_singular_values(X.detach())  # (*batch, min(T, d)), descending
    top = s2[..., 0]
    ok = top > 0
    safe = torch.where(ok, top, torch.ones_like(top))
    nan = torch.full_like(top, math.nan)
    sr = torch.where(ok, s2.sum(-1) / safe, nan)
    sr_gram = torch.where(ok, s2.square().sum(-1) / safe.square(), nan)
    return mu, sr, sr_gram, norm


def _weight(name, W, rows, cols, batch, device, dtype):
    """Validate an explicit weight (rows, cols) or (*batch, rows, cols) and move it to device/dtype."""
    W = _validate.matrix(name, W)
    if W.shape[-2] != rows or (cols is not None and W.shape[-1] != cols):
        want = f"({rows}, {cols if cols is not None else 'd_qk'})"
        raise ValueError(f"{name} must have shape {want} or (*batch, {want[1:]}, got {tuple(W.shape)}")
    try:
        torch.broadcast_shapes(W.shape[:-2], batch)
    except RuntimeError as err:
        raise ValueError(f"{name}'s batch shape {tuple(W.shape[:-2])} does not broadcast with X0's {batch}") from err
    return W.to(device=device, dtype=dtype)


class _Options:
    """Validated settings shared by :func:`propagate` and :func:`weight_gradients`."""

    def __init__(self, X0, depth, *, attention, s2, beta, mask, centred, dropout, norm, skip, values, value_var,
                 d_qk, W_Q, W_K, W_V, shared, seed, generator, device, dtype):
        X0 = _validate.matrix("X0", X0, min_rows=2)
        self.depth = _validate.integer("depth", depth, minimum=0)
        self.attention = _validate.choice("attention", attention, ATTENTIONS)
        self.s2 = _validate.real("s2", s2, minimum=0.0)
        self.beta = _validate.real("beta", beta)
        self.centred = _validate.flag("centred", centred)
        self.dropout = _validate.real("dropout", dropout, minimum=0.0, below=1.0)
        self.norm = _validate.choice("norm", norm, NORMS)
        if isinstance(skip, bool):
            self.skip = 1.0 if skip else None
        elif isinstance(skip, numbers.Real):
            self.skip = _validate.real("skip", skip)
        else:
            raise TypeError(f"skip must be a bool or a real number, got {type(skip).__name__}")
        self.values = _validate.choice("values", values, VALUES)
        self.value_var = _validate.real("value_var", value_var, positive=True)
        self.shared = _validate.flag("shared", shared)

        self.device = X0.device if device is None else resolve(device)[0]
        self.dtype = X0.dtype if dtype is None else resolve(self.device, dtype)[1]
        self.X0 = X0.to(device=self.device, dtype=self.dtype)
        *batch, T, d = self.X0.shape
        self.batch, self.T, self.d = tuple(batch), T, d
        self.mask = None if mask is None else check_mask(mask, T).to(self.device)

        if self.attention == "iid":
            for name, W in (("W_Q", W_Q), ("W_K", W_K), ("d_qk", d_qk)):
                if W is not None:
                    raise ValueError(f"{name} applies only to attention='qk'")
            self.d_qk = None
        else:
            if (W_Q is None) != (W_K is None):
                raise ValueError("pass both W_Q and W_K, or neither")
            if W_Q is not None and d_qk is not None:
                raise ValueError("pass d_qk or explicit W_Q, W_K, not both")
            self.d_qk = d if d_qk is None else _validate.integer("d_qk", d_qk, minimum=1)
            if W_Q is not None:
                W_Q = _weight("W_Q", W_Q, d, None, self.batch, self.device, self.dtype)
                W_K = _weight("W_K", W_K, d, W_Q.shape[-1], self.batch, self.device, self.dtype)
                self.d_qk = W_Q.shape[-1]
        if W_V is not None:
            if self.values != "gaussian":
                raise ValueError(f"pass values={self.values!r} or an explicit W_V, not both")
            W_V = _weight("W_V", W_V, d, d, self.batch, self.device, self.dtype)
        self.W_Q, self.W_K, self.W_V = W_Q, W_K, W_V
        self.gen = make_generator(seed, generator, self.device)

    def draw(self) -> dict:
        """One layer's random weights: logits (iid) or W_Q, W_K (qk), then W_V; explicit ones kept."""
        b, T, d, dev, dt, gen = self.batch, self.T, self.d, self.device, self.dtype, self.gen
        w = {}
        if self.attention == "iid":
            w["logits"] = math.sqrt(self.s2) * torch.randn(*b, T, T, generator=gen, device=dev, dtype=dt)
        elif self.W_Q is not None:
            w["W_Q"], w["W_K"] = self.W_Q, self.W_K
        else:
            # entries N(0, sigma^2) with sigma_Q^2 sigma_K^2 = s2: logit variance beta^2 s2 r^4 (theory.logit_variance)
            sigma = self.s2 ** 0.25
            w["W_Q"] = sigma * torch.randn(*b, d, self.d_qk, generator=gen, device=dev, dtype=dt)
            w["W_K"] = sigma * torch.randn(*b, d, self.d_qk, generator=gen, device=dev, dtype=dt)
        if self.W_V is not None:
            w["W_V"] = self.W_V
        elif self.values == "gaussian":
            w["W_V"] = math.sqrt(self.value_var) * torch.randn(*b, d, d, generator=gen, device=dev, dtype=dt)
        elif self.values == "orthogonal":
            w["W_V"] = orthonormal_tokens(d, d, batch=b, generator=gen, device=dev, dtype=dt)
        return w

    def with_dropout(self, w) -> dict:
        """The weights ``w`` plus, if dropout > 0, a fresh keep mask (*batch, T, T) ~ Bernoulli(1 - p)."""
        if self.dropout == 0.0:
            return w
        u = torch.rand(*self.batch, self.T, self.T, generator=self.gen, device=self.device, dtype=self.dtype)
        return {**w, "keep": u >= self.dropout}

    def layer(self, X, w) -> torch.Tensor:
        """One layer X (*batch, T, d) -> X' with the draws ``w`` (see the module doc)."""
        if self.attention == "iid":
            A = attention_map(self.beta * w["logits"], self.mask, centred=self.centred)  # (*batch, T, T)
        else:
            A = qk_attention(X, w["W_Q"], w["W_K"], mask=self.mask, beta=self.beta, centred=self.centred)
        if "keep" in w:
            A = A * w["keep"] / (1.0 - self.dropout)
        Y = A @ X  # (*batch, T, d)
        if "W_V" in w:
            Y = Y @ w["W_V"]
        if self.skip is not None:
            Y = X + self.skip * Y
        return normalise(Y, self.norm)

    def run(self, layers, keep_states):
        """Run the layers with per-layer draws ``layers`` (a list); return a Trajectory."""
        X = self.X0
        states, metrics = [X], [_metrics(X)]
        for w in layers:
            X = self.layer(X, w)
            metrics.append(_metrics(X))
            if keep_states:
                states.append(X)
        mu, sr, sr_gram, norm = (torch.stack(m) for m in zip(*metrics))
        return Trajectory(mu, sr, sr_gram, norm, torch.stack(states) if keep_states else None), X

    def draws(self) -> list:
        """Every layer's draws; with ``shared`` the weights are drawn once, dropout masks stay fresh."""
        return list(self.lazy_draws())

    def lazy_draws(self):
        """The same draws as :meth:`draws`, made layer by layer as the run consumes them (the
        layers use no randomness, so the numbers are identical): memory O(T^2 + d^2), not O(depth)."""
        shared = self.draw() if self.shared and self.depth else None
        for _ in range(self.depth):
            yield self.with_dropout(shared if shared is not None else self.draw())



def propagate(
    X0,
    depth,
    *,
    attention="iid",
    s2=LN2,
    beta=1.0,
    mask=None,
    centred=False,
    dropout=0.0,
    norm=None,
    skip=False,
    values="gaussian",
    value_var=1.0,
    d_qk=None,
    W_Q=None,
    W_K=None,
    W_V=None,
    shared=False,
    seed=None,
    generator=None,
    keep_states=False,
    device=None,
    dtype=None,
) -> Trajectory:
    """Propagate tokens X0 through ``depth`` attention layers at initialisation.

    One layer (see the module doc): X' = normalise(skip-combine(X, A X W_V)).

    Parameters
    ----------
    X0 : Tensor, (*batch, T, d)
        Input tokens (rows), T >= 2.  Each leading batch element is an independent network with
        its own random draws.  May require grad: the graph is kept through every layer.
    depth : int >= 0
        Number of layers.
    attention : {"iid", "qk"}
        ``"iid"``: the i.i.d.-logit model, logits beta * g with g_ij ~ N(0, s2) drawn independently
        of X (logit variance beta^2 s2; ``rcteach.random_attention`` when beta = 1 and no mask).
        ``"qk"``: input-dependent softmax attention A(X) of the current tokens
        (``rcteach.qk_attention``), logits beta (X W_Q)(X W_K)^T / sqrt(d_qk).
    s2 : float >= 0
        Logit variance.  For ``"qk"`` the default weights have i.i.d. N(0, sigma^2) entries with
        sigma^2 = sqrt(s2), so that by ``theory.logit_variance`` the logits of tokens of norm r
        have variance beta^2 s2 r^4: exactly beta^2 s2 for unit-norm tokens (orthonormal X0, or
        any layer after ``norm="rms"``).  Tokens of other norms scale it by r^4.
    beta : float
        Inverse temperature, multiplies the logits in both models; beta = 0 gives uniform attention
        over the mask.
    mask : bool Tensor (T, T) or (*batch, T, T), optional
        ``mask[i, j]`` True iff token i may attend to token j (``rcteach.make_mask``).
    centred : bool
        Use A - (row mean over the mask), i.e. A_perp = A - 11^T/T without a mask (``rcteach.centre``).
    dropout : float in [0, 1)
        Attention dropout as in a network left in training mode: every entry of A is zeroed with
        probability p and the rest divided by 1 - p (``torch.nn.functional.dropout``), with a fresh
        mask per layer (also with ``shared``).  A row whose unmasked entries are all dropped gives a
        zero token, which normalisation keeps at zero.
    norm : {None, "rms", "layernorm"}
        Post-normalisation of each token after the skip (``normalise``): ``"rms"`` to unit norm
        (Wu et al.), ``"layernorm"`` centred over features and divided by the std (norm sqrt(d)),
        no affine parameters.
    skip : bool or float
        ``False``: X' = A X W_V.  ``True``: X' = X + A X W_V.  A float a: X' = X + a A X W_V
        (so ``skip=1.0`` equals ``skip=True`` and ``skip=0.0`` is the identity layer).
    values : {"gaussian", "orthogonal", "identity"}
        W_V, a fresh (d, d) matrix per layer: i.i.d. N(0, value_var) entries; Haar orthogonal
        (``value_var`` unused); or no value matrix at all (X' from A X).
    value_var : float > 0
        Per-entry variance sigma_V^2 of Gaussian W_V.  E||Y W_V||_F^2 = sigma_V^2 d ||Y||_F^2, so
        ``value_var=1/d`` preserves the norm in expectation; the default 1.0 is the scaling of
        Mind the Gap (with T = d), which multiplies ||X||^2 by about d per layer with attention A.
    d_qk : int, optional
        Query/key width of the default W_Q, W_K (default d).  ``"qk"`` only.
    W_Q, W_K : Tensor (d, d_qk) or (*batch, d, d_qk), optional
        Explicit query and key weights, used at every layer (``"qk"`` only; both or neither).
    W_V : Tensor (d, d) or (*batch, d, d), optional
        Explicit value weights, used at every layer (with the default ``values="gaussian"`` only).
    shared : bool
        Draw the random weights once and use them at every layer (for ``"iid"`` the same logits,
        hence the same A, at every layer).  Default: fresh draws per layer.
    seed : int, optional; generator : torch.Generator, optional
        Randomness (one of the two).  Draw order: per layer, logits or W_Q, W_K, then W_V.
    keep_states : bool
        Also return the states X_0..X_depth, with their autograd graph.
    device, dtype : optional
        Where and in what precision to compute; default X0's.  X0 and explicit weights are moved.

    Returns
    -------
    Trajectory
        ``mu``, ``stable_rank`` (Frobenius), ``stable_rank_gram`` (Gram), ``norm``, each
        (depth + 1, *batch); ``states`` (depth + 1, *batch, T, d) or None.
    """
    opts = _Options(X0, depth, attention=attention, s2=s2, beta=beta, mask=mask, centred=centred,
                    dropout=dropout, norm=norm,
                    skip=skip, values=values, value_var=value_var, d_qk=d_qk, W_Q=W_Q, W_K=W_K, W_V=W_V,
                    shared=shared, seed=seed, generator=generator, device=device, dtype=dtype)
    keep_states = _validate.flag("keep_states", keep_states)
    trajectory, _ = opts.run(opts.lazy_draws(), keep_states)
    return trajectory


LOSSES = ("norm", "mu")


def weight_gradients(X0, depth, *, loss="norm", **options) -> LayerGradients:
    """Gradients of a loss of the last layer with respect to every layer's W_Q, W_K and W_V.

    Draws fresh per-layer weights exactly as :func:`propagate` would with the same ``options``
    (same seed, same numbers), runs the layers with autograd on, and differentiates.

    Parameters
    ----------
    X0 : Tensor, (*batch, T, d)
    depth : int >= 1
    loss : {"norm", "mu"} or callable
        ``"norm"``: L = ||X_depth||_F^2;  ``"mu"``: L = μ(X_depth)^2;  a callable maps X_depth
        (*batch, T, d) to a tensor of shape (*batch,) or ().  Batch elements are independent
        networks, so summing the loss over the batch gives each its own gradients.
    **options
        Any keyword of :func:`propagate` except ``W_Q``, ``W_K``, ``W_V``, ``shared`` and
        ``keep_states`` (weights here are always fresh per layer).

    Returns
    -------
    LayerGradients
        ``W_Q``, ``W_K`` (``attention="qk"`` only, else None) and ``W_V`` (``values`` "gaussian"
        or "orthogonal", else None): ||dL/dW^(l)||_F, shape (depth, *batch); ``loss`` (*batch,).
    """
    for key in ("W_Q", "W_K", "W_V", "shared", "keep_states"):
        if key in options:
            raise ValueError(f"weight_gradients draws fresh per-layer weights; {key} is not accepted")
    unknown = set(options) - set(propagate.__kwdefaults__)
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; see rcteach.propagate")
    settings = {**propagate.__kwdefaults__, **options}
    for key in ("W_Q", "W_K", "W_V", "keep_states"):
        settings.pop(key)
    settings["shared"] = False
    opts = _Options(X0, depth, W_Q=None, W_K=None, W_V=None, **settings)
    if opts.depth < 1:
        raise ValueError(f"depth must be >= 1 for gradients, got {depth}")
    if not (callable(loss) or loss in LOSSES):
        raise ValueError(f"loss must be one of {', '.join(map(repr, LOSSES))} or a callable; got {loss!r}")
    with torch.enable_grad():
        layers = opts.draws()
        names = [k for k in ("W_Q", "W_K", "W_V") if k in layers[0]]
        for w in layers:
            for k in names:
                w[k].requires_grad_(True)
        _, X = opts.run(layers, keep_states=False)
        if loss == "norm":
            L = torch.linalg.matrix_norm(X).square()
        elif loss == "mu":
            L = torch.linalg.matrix_norm(X - X.mean(-2, keepdim=True)).square()
        else:
            L = loss(X)
            if not isinstance(L, torch.Tensor):
                raise TypeError(f"loss must return a torch.Tensor, got {type(L).__name__}")
        params = [w[k] for w in layers for k in names]
        grads = torch.autograd.grad(L.sum(), params, allow_unused=True)
    norms = {k: None for k in ("W_Q", "W_K", "W_V")}
    for j, k in enumerate(names):
        g = [grads[i * len(names) + j] for i in range(len(layers))]
        g = [torch.zeros_like(layers[i][k]) if gi is None else gi for i, gi in enumerate(g)]
        norms[k] = torch.stack([torch.linalg.matrix_norm(gi) for gi in g])  # (depth, *batch)
    return LayerGradients(norms["W_Q"], norms["W_K"], norms["W_V"], L.detach())
