"""Signal propagation through a stack of attention layers at initialisation.

Introduced in chapters "Rank collapse in depth" (book/05_depth.md) and "Norms and gradients"
(book/06_norms_gradients.md).

:func:`propagate` runs ``depth`` layers (:func:`rcteach.layer`, configured by a
:class:`rcteach.LayerConfig`) on tokens X0 (*batch, T, d) and records, for every layer ℓ = 0..depth,
the distance to consensus μ(X_ℓ), both stable ranks and the Frobenius norm. :func:`weight_gradients`
differentiates a loss of the last layer with respect to every layer's W_Q, W_K and W_V (chapter
"Norms and gradients").

Randomness: one generator (from ``seed``) draws, layer after layer, first the attention's
randomness (logits or W_Q then W_K), then W_V, then (dropout > 0) the dropout mask
(:mod:`rcteach.layers`).  Each batch element gets its own draws, so a leading batch dimension of X0
is a batch of independent networks (a batch over seeds).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from . import _validate, denormals
from .attention import ATTENTIONS  # noqa: F401 (re-exported: its home is rcteach.attention)
from .device import make_generator, resolve
from .layers import VALUES, LayerConfig, LayerWeights, check_weight, draw_keep, draw_weights, forward, on_tokens  # noqa: F401 (VALUES)
from .metrics import frobenius_norm, mu_unchecked, stable_ranks_unchecked

__all__ = ["Trajectory", "LayerGradients", "propagate", "weight_gradients"]


@dataclass(frozen=True)
class Trajectory:
    """What :func:`propagate` records at layers ℓ = 0 (the input X0) .. depth.

    Every field but ``states`` has shape (depth + 1, *batch).  ``mu`` and ``norm`` keep the
    autograd graph (differentiate them directly); the stable ranks are computed on detached
    states.  A stable rank is NaN where X_ℓ is exactly zero (it is undefined there).
    """

    mu: torch.Tensor  # μ(X_ℓ) = ||P X_ℓ||_F, distance to consensus (= rcteach.mu)
    stable_rank: torch.Tensor | None  # Frobenius: sum s_i^2 / s_1^2 (= rcteach.stable_rank); None if not computed
    stable_rank_gram: torch.Tensor | None  # Gram: sum s_i^4 / s_1^4 (= rcteach.stable_rank(gram=True)); None likewise
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


def _metrics(X, ranks=True):
    """μ, Frobenius and Gram stable ranks, norm of X (*batch, T, d): four (*batch,) tensors.

    μ and the norm keep the autograd graph; the stable ranks, of the detached X scaled to ||X||_F = 1
    (so that no Gram matrix overflows), are NaN where X = 0 or X is not finite (an overflowed stack), and
    None with ``ranks=False`` (no eigenvalues computed).
    """
    norm = frobenius_norm(X)
    if not ranks:
        return mu_unchecked(X), None, None, norm
    scale = norm.detach()[..., None, None]
    ok = torch.isfinite(scale) & (scale > 0)  # (*batch, 1, 1); a non-finite entry makes the norm non-finite
    Xs = X.detach() / scale if ok.all() else torch.where(ok, X.detach() / torch.where(ok, scale, 1.0), 0.0)
    sr, sr_gram = stable_ranks_unchecked(Xs)
    return mu_unchecked(X), sr, sr_gram, norm


def _setup(X0, depth, layer_options, *, W_Q=None, W_K=None, W_V=None, seed=None, generator=None, device=None,
           dtype=None):
    """Validate the inputs of :func:`propagate` once: X0 on its device and dtype, depth, the
    :class:`LayerConfig` of ``layer_options`` with its mask and logit bias on that device, the explicit
    weights (as a :class:`LayerWeights`) and the generator."""
    X0 = _validate.matrix("X0", X0, min_rows=2)
    depth = _validate.integer("depth", depth, minimum=0)
    config = LayerConfig(**layer_options)
    device = X0.device if device is None else resolve(device)[0]
    dtype = X0.dtype if dtype is None else resolve(device, dtype)[1]
    X0 = X0.to(device=device, dtype=dtype)
    *batch, T, d = X0.shape
    batch = tuple(batch)
    config = on_tokens(config, X0, x_name="X0")
    if config.attention == "iid":
        for name, W in (("W_Q", W_Q), ("W_K", W_K)):
            if W is not None:
                raise ValueError(f"{name} applies only to attention='qk'")
    else:
        if (W_Q is None) != (W_K is None):
            raise ValueError("pass both W_Q and W_K, or neither")
        if W_Q is not None and config.d_qk is not None:
            raise ValueError("pass d_qk or explicit W_Q, W_K, not both")
        if W_Q is not None:
            W_Q = check_weight("W_Q", W_Q, d, None, batch).to(device=device, dtype=dtype)
            W_K = check_weight("W_K", W_K, d, W_Q.shape[-1], batch).to(device=device, dtype=dtype)
    if W_V is not None:
        if config.values != "gaussian":
            raise ValueError(f"pass values={config.values!r} or an explicit W_V, not both")
        W_V = check_weight("W_V", W_V, d, d, batch).to(device=device, dtype=dtype)
    return X0, depth, config, LayerWeights(W_Q=W_Q, W_K=W_K, W_V=W_V), make_generator(seed, generator, device)


def _draws(X0, depth, config, given, gen, *, shared):
    """Every layer's weights, drawn lazily as the layers consume them (memory O(T^2 + d^2), not
    O(depth)); with ``shared`` the weights are drawn once and only the dropout masks are fresh."""
    fixed = draw_weights(config, X0, gen, given=given) if shared and depth else None
    for _ in range(depth):
        yield draw_keep(config, X0, gen, fixed if fixed is not None else draw_weights(config, X0, gen, given=given))


def _warn_overflow(norm, dtype):
    """A UserWarning when the states overflowed ``dtype`` (norm inf or NaN), naming the first such layer."""
    bad = ~torch.isfinite(norm.detach())  # (depth + 1, *batch)
    if bad.any():
        layer = int(bad.reshape(bad.shape[0], -1).any(-1).nonzero()[0])
        _validate.regime(f"the tokens overflowed {dtype} at layer {layer}: from there on the metrics are inf or "
                         "NaN, not measurements.  With Gaussian values "
                         "||X||_F^2 grows by value_var * d per layer: pass value_var=1/d, a norm "
                         "('rms', 'layernorm'), fewer layers or dtype=torch.float64", stacklevel=5)


def _warn_zero(norm):
    """A UserWarning when the states became exactly zero after a nonzero X0, naming the first such layer."""
    zero = (norm.detach() == 0) & (norm.detach()[:1] > 0)  # (depth + 1, *batch)
    if zero.any():
        layer = int(zero.reshape(zero.shape[0], -1).any(-1).nonzero()[0])
        _validate.regime(f"the tokens became exactly zero at layer {layer}: from there on the stable ranks are NaN and "
                         "mu and the norm 0, not measurements.  Centred attention maps tokens at consensus, or with "
                         "logits below rounding (attention='qk' on shrinking tokens: softmax exactly 1/T, so A_perp = "
                         "0), to zero; the true state is tiny, not 0.  Pass a norm ('rms', 'layernorm'), fewer layers, "
                         "or use rcteach.grid (which keeps the scale apart, in log_norm)", stacklevel=5)


def _schedule(config, masks, X0, depth):
    """The config of every layer: ``config`` throughout, or with layer l's mask ``masks[l % len(masks)]``
    (each validated against X0 and moved to its device)."""
    if masks is None:
        return [config] * depth
    if config.mask is not None:
        raise ValueError("pass mask (the same at every layer) or masks (one per layer, cycled), not both")
    if isinstance(masks, torch.Tensor) or not isinstance(masks, (list, tuple)) or not masks:
        raise TypeError("masks must be a non-empty list or tuple of boolean (T, T) masks, one per layer "
                        "(cycled when shorter than depth)")
    configs = [on_tokens(replace(config, mask=m), X0, x_name="X0") for m in masks]
    return [configs[layer % len(configs)] for layer in range(depth)]


def _run(X0, configs, draws, keep_states, ranks=True):
    """Run the layers (layer l with ``configs[l]``) with the weights ``draws``; return the Trajectory and the
    last state."""
    X = X0
    states, metrics = [X], [_metrics(X, ranks)]
    with denormals.for_float32(X0.dtype, X0.device):  # collapsing float32 states: subnormals flushed
        for config, w in zip(configs, draws):
            X = forward(X, config, w)
            metrics.append(_metrics(X, ranks))
            if keep_states:
                states.append(X)
    mu, sr, sr_gram, norm = (None if m[0] is None else torch.stack(m) for m in zip(*metrics))
    _warn_overflow(norm, X0.dtype)
    _warn_zero(norm)
    return Trajectory(mu, sr, sr_gram, norm, torch.stack(states) if keep_states else None), X


def propagate(X0, depth, *, W_Q=None, W_K=None, W_V=None, shared=False, masks=None, seed=None, generator=None,
              keep_states=False, stable_ranks=True, device=None, dtype=None, **layer_options) -> Trajectory:
    """Propagate tokens X0 through ``depth`` attention layers at initialisation.

    Builds ``config = LayerConfig(**layer_options)`` and applies :func:`rcteach.layer` ``depth`` times,
    with fresh random weights per layer (see the module doc for the draw order).

    Parameters
    ----------
    X0 : Tensor, (*batch, T, d)
        Input tokens (rows), T >= 2.  Each leading batch element is an independent network with
        its own random draws.  May require grad: the graph is kept through every layer.
    depth : int >= 0
        Number of layers.
    **layer_options
        The fields of :class:`rcteach.LayerConfig`, each with its default there: ``attention``
        ("iid" or "qk"), ``s2``, ``beta``, ``mask``, ``centred``, ``dropout``, ``norm``, ``skip``,
        ``values``, ``value_var``, ``d_qk``, ``attention_scale``, ``norm_position``, ``logit_bias``.
        With ``attention="qk"`` and the default weights, the
        logits of tokens of norm r have variance beta^2 s2 r^4 (``theory.logit_variance``): exactly
        beta^2 s2 for unit-norm tokens (orthonormal X0, or any layer after ``norm="rms"``).
        Dropout draws a fresh mask per layer (also with ``shared``); a row whose unmasked entries
        are all dropped gives a zero token, which normalisation keeps at zero.
    W_Q, W_K : Tensor (d, d_qk) or (*batch, d, d_qk), optional
        Explicit query and key weights, used at every layer (``"qk"`` only; both or neither).
    W_V : Tensor (d, d) or (*batch, d, d), optional
        Explicit value weights, used at every layer (with the default ``values="gaussian"`` only).
    shared : bool
        Draw the random weights once and use them at every layer (for ``"iid"`` the same logits,
        hence the same A, at every layer).  Default: fresh draws per layer.
    masks : list of bool Tensors (T, T) or (*batch, T, T), optional
        Time-varying masks: layer l (l = 0..depth-1) uses ``masks[l % len(masks)]`` (a periodic
        schedule; pass ``depth`` masks for an arbitrary one).  Instead of ``mask``.
        :func:`rcteach.masks.reach_mask` says which tokens reach which over a run of layers.
    seed : int, optional; generator : torch.Generator, optional
        Randomness (one of the two).
    keep_states : bool
        Also return the states X_0..X_depth, with their autograd graph.
    stable_ranks : bool
        Compute the two stable ranks per layer (an SVD each); ``False`` leaves them None, for runs
        that need only μ and the norm.
    device, dtype : optional
        Where and in what precision to compute; default X0's.  X0 and explicit weights are moved.
        Float32 on the CPU runs with flush-to-zero (:mod:`rcteach.denormals`): values below 2^-126
        become 0 instead of subnormal numbers that slow every product a hundredfold.

    Returns
    -------
    Trajectory
        ``mu``, ``stable_rank`` (Frobenius), ``stable_rank_gram`` (Gram), ``norm``, each
        (depth + 1, *batch); ``states`` (depth + 1, *batch, T, d) or None.

    Examples
    --------
    >>> X0 = rcteach.orthonormal_tokens(32, 32, batch=4, seed=0)  # 4 networks
    >>> run = rcteach.propagate(X0, 3, values="identity", seed=1)
    >>> run.mu.shape  # layers 0..3, networks
    torch.Size([4, 4])
    >>> bool((run.mu[1:] < run.mu[:-1]).all())  # collapse: mu shrinks at every layer
    True
    """
    X0, depth, config, given, gen = _setup(X0, depth, layer_options, W_Q=W_Q, W_K=W_K, W_V=W_V, seed=seed,
                                           generator=generator, device=device, dtype=dtype)
    shared = _validate.flag("shared", shared)
    keep_states = _validate.flag("keep_states", keep_states)
    ranks = _validate.flag("stable_ranks", stable_ranks)
    configs = _schedule(config, masks, X0, depth)
    trajectory, _ = _run(X0, configs, _draws(X0, depth, config, given, gen, shared=shared), keep_states, ranks)
    return trajectory


LOSSES = ("norm", "mu")


def weight_gradients(X0, depth, *, loss="norm", seed=None, generator=None, device=None, dtype=None,
                     **layer_options) -> LayerGradients:
    """Gradients of a loss of the last layer with respect to every layer's W_Q, W_K and W_V.

    Draws fresh per-layer weights exactly as :func:`propagate` would with the same options
    (same seed, same numbers), runs the layers with autograd on, and differentiates.

    Parameters
    ----------
    X0 : Tensor, (*batch, T, d)
    depth : int >= 1
    loss : {"norm", "mu"} or callable
        ``"norm"``: L = ||X_depth||_F^2;  ``"mu"``: L = μ(X_depth)^2;  a callable maps X_depth
        (*batch, T, d) to a tensor of shape (*batch,) or ().  Batch elements are independent
        networks, so summing the loss over the batch gives each its own gradients.
    seed, generator, device, dtype
        As in :func:`propagate`.
    **layer_options
        The fields of :class:`rcteach.LayerConfig` (weights here are always fresh per layer: no
        ``W_Q``, ``W_K``, ``W_V``, ``shared`` or ``keep_states``).

    Returns
    -------
    LayerGradients
        ``W_Q``, ``W_K`` (``attention="qk"`` only, else None) and ``W_V`` (``values`` "gaussian"
        or "orthogonal", else None): ||dL/dW^(l)||_F, shape (depth, *batch); ``loss`` (*batch,).
    """
    for key in ("W_Q", "W_K", "W_V", "shared", "keep_states"):
        if key in layer_options:
            raise ValueError(f"weight_gradients draws fresh per-layer weights; {key} is not accepted")
    X0, depth, config, given, gen = _setup(X0, depth, layer_options, seed=seed, generator=generator, device=device,
                                           dtype=dtype)
    if depth < 1:
        raise ValueError(f"depth must be >= 1 for gradients, got {depth}")
    if not (callable(loss) or loss in LOSSES):
        raise ValueError(f"loss must be one of {', '.join(map(repr, LOSSES))} or a callable; got {loss!r}")
    with torch.enable_grad():
        layers = list(_draws(X0, depth, config, given, gen, shared=False))
        names = [k for k in ("W_Q", "W_K", "W_V") if getattr(layers[0], k) is not None]
        for w in layers:
            for k in names:
                getattr(w, k).requires_grad_(True)
        _, X = _run(X0, [config] * depth, layers, keep_states=False, ranks=False)
        if loss == "norm":
            L = torch.linalg.matrix_norm(X).square()
        elif loss == "mu":
            L = mu_unchecked(X).square()
        else:
            L = loss(X)
            if not isinstance(L, torch.Tensor):
                raise TypeError(f"loss must return a torch.Tensor, got {type(L).__name__}")
        params = [getattr(w, k) for w in layers for k in names]
        grads = torch.autograd.grad(L.sum(), params, allow_unused=True)
    norms = {k: None for k in ("W_Q", "W_K", "W_V")}
    for j, k in enumerate(names):
        g = [grads[i * len(names) + j] for i in range(len(layers))]
        g = [torch.zeros_like(getattr(layers[i], k)) if gi is None else gi for i, gi in enumerate(g)]
        norms[k] = torch.stack([torch.linalg.matrix_norm(gi) for gi in g])  # (depth, *batch)
    return LayerGradients(norms["W_Q"], norms["W_K"], norms["W_V"], L.detach())
