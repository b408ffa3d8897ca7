"""One attention layer at initialisation: its settings, its random weights, its forward map.

Introduced in chapter "Rank collapse in depth" (book/05_depth.md).

:func:`rcteach.propagate` stacks these layers. One layer, in this order (tokens are rows of X
(*batch, T, d), attention acts from the left)::

    A  = attention(X)                              # (*batch, T, T): "iid" or "qk", see LayerConfig
                                                   # (logits + logit_bias, softmax over the mask)
    A  = attention_scale * A                       # a constant after the softmax (default 1)
    A  = A * keep / (1 - p)   (dropout=p > 0)      # attention dropout, keep ~ Bernoulli(1 - p)
    Y  = A X W_V                                   # (*batch, T, d), see ``values``
    X' = Y            (skip=None)
       = X + skip * Y (skip a float)
    X' = normalise(X') (norm=None | "rms" | "layernorm"), token by token

That is the post-norm layer (``norm_position="post"``, the default).  The pre-norm layer
(``norm_position="pre"``, Pre-LN) normalises the attention's input instead and leaves the skip
stream alone: with Z = normalise(X), A = attention(Z) and X' = X + skip * A Z W_V.

Randomness (:func:`draw_weights`, then :func:`draw_keep`): first the attention's (logits, or W_Q then
W_K), then W_V, then (dropout > 0) the dropout mask, each with its own draw per batch element, so a
leading batch dimension of X is a batch of independent networks.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

import torch

from . import _validate
from .attention import ATTENTIONS, attention_map_unchecked
from .device import make_generator
from .linalg import matmul
from .logits import qk_logits_unchecked, qk_weights
from .masks import check_batch_mask, check_mask
from .norms import NORMS, normalise_unchecked
from .theory import LN2
from .tokens import orthogonal_matrix

__all__ = ["VALUES", "NORM_POSITIONS", "LayerConfig", "LayerWeights", "check_weight", "check_logit_bias",
           "draw_weights", "draw_keep", "layer",
           "on_tokens"]

VALUES = ("gaussian", "orthogonal", "identity")
NORM_POSITIONS = ("post", "pre")


@dataclass(frozen=True, eq=False)
class LayerConfig:
    """The settings of one attention layer (see the module doc), validated when made.

    ``skip`` accepts True (a = 1) and False (no skip, stored as None).  ``value_var`` is the variance
    of one entry of W_V; the explorers' slider ``value_scale`` is value_var * d, the per-layer growth
    factor of E||X||_F^2 (E||Y W_V||_F^2 = value_var d ||Y||_F^2), so value_var = 1/d keeps the norm.
    """

    # "iid": logits beta g, g_ij ~ N(0, s2) i.i.d. of X; "qk": beta (X W_Q)(X W_K)^T / sqrt(d_qk)
    attention: str = "iid"
    s2: float = LN2  # logit variance ("qk": W_Q, W_K entries N(0, sqrt(s2)), rcteach.logits.qk_weights)
    beta: float = 1.0  # inverse temperature, multiplies the logits; 0 gives uniform attention over the mask
    mask: torch.Tensor | None = None  # bool (T, T) or (*batch, T, T): mask[i, j] iff token i may attend to j
    centred: bool = False  # use A minus its row means over the mask (A_perp = A - 11^T/T unmasked)
    dropout: float = 0.0  # attention dropout p in [0, 1): entries zeroed w.p. p, the rest divided by 1 - p
    norm: str | None = None  # token-wise post-normalisation after the skip: None, "rms" (unit norm), "layernorm"
    skip: float | None = None  # None: X' = A X W_V;  a: X' = X + a A X W_V
    values: str = "gaussian"  # W_V: "gaussian" N(0, value_var) entries, "orthogonal" (Haar), "identity" (no W_V)
    value_var: float = 1.0  # per-entry variance of Gaussian W_V (value_scale = value_var * d)
    d_qk: int | None = None  # query/key width of the drawn W_Q, W_K ("qk" only; default: d)
    attention_scale: float = 1.0  # multiplies A after the softmax (and centring); sqrt(d) with value_var 1/d
    #                               is the same layer in law as value_var 1 (W_V ~ N(0, 1))
    norm_position: str = "post"  # "post": X' = norm(X + skip A X W_V);  "pre": X' = X + skip A(Z) Z W_V, Z = norm(X)
    logit_bias: torch.Tensor | None = None  # (T, T) or (*batch, T, T) added to the logits, e.g. positional
    #                                         (ALiBi: -m |i - j|); entries outside the mask do not matter

    def __post_init__(self):
        field = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        field("attention", _validate.choice("attention", self.attention, ATTENTIONS))
        field("s2", _validate.real("s2", self.s2, minimum=0.0))
        field("beta", _validate.real("beta", self.beta))
        if self.mask is not None:
            check_mask(self.mask)
        field("centred", _validate.flag("centred", self.centred))
        field("dropout", _validate.real("dropout", self.dropout, minimum=0.0, below=1.0))
        field("norm", _validate.choice("norm", self.norm, NORMS))
        if isinstance(self.skip, bool):
            field("skip", 1.0 if self.skip else None)
        elif isinstance(self.skip, numbers.Real):
            field("skip", _validate.real("skip", self.skip))
        elif self.skip is not None:
            raise TypeError(f"skip must be a bool or a real number, got {type(self.skip).__name__}")
        field("values", _validate.choice("values", self.values, VALUES))
        field("value_var", _validate.real("value_var", self.value_var, positive=True))
        if self.d_qk is not None:
            if self.attention != "qk":
                raise ValueError("d_qk applies only to attention='qk'")
            field("d_qk", _validate.integer("d_qk", self.d_qk, minimum=1))
        field("attention_scale", _validate.real("attention_scale", self.attention_scale))
        field("norm_position", _validate.choice("norm_position", self.norm_position, NORM_POSITIONS))
        if self.norm_position == "pre" and (self.norm is None or self.skip is None):
            raise ValueError("norm_position='pre' (Pre-LN) needs a norm ('rms' or 'layernorm') and a skip: "
                             "X' = X + skip * A(Z) Z W_V with Z = norm(X)")
        if self.logit_bias is not None:
            check_logit_bias(self.logit_bias)


@dataclass(frozen=True)
class LayerWeights:
    """One layer's weights; a field is None where the layer has no such weight."""

    logits: torch.Tensor | None = None  # (*batch, T, T), i.i.d. N(0, s2), before beta ("iid")
    W_Q: torch.Tensor | None = None  # (d, d_qk) or (*batch, d, d_qk) ("qk")
    W_K: torch.Tensor | None = None  # (d, d_qk) or (*batch, d, d_qk) ("qk")
    W_V: torch.Tensor | None = None  # (d, d) or (*batch, d, d) (values "gaussian", "orthogonal")
    keep: torch.Tensor | None = None  # (*batch, T, T) bool, the dropout keep mask (dropout > 0)


def check_weight(name, W, rows, cols, batch, *, x_name="X0") -> torch.Tensor:
    """Validate an explicit weight of shape (rows, cols) or (*batch', rows, cols), batch' broadcasting
    with the tokens' ``batch``; ``cols=None`` accepts any number of columns (d_qk)."""
    W = _validate.matrix(name, W)
    if W.shape[-2] != rows or (cols is not None and W.shape[-1] != cols):
        want = f"({rows}, {cols if cols is not None else 'd_qk'})"
        raise ValueError(f"{name} must have shape {want} or (*batch, {want[1:]}, got {tuple(W.shape)}")
    _validate.broadcast(name, W.shape[:-2], x_name, batch)
    return W


def check_logit_bias(bias, X=None, *, x_name="X") -> torch.Tensor:
    """Validate a logit bias: a real floating (T, T) or (*batch, T, T) tensor of finite entries (for tokens X
    (*batch, T, d), of X's T and a batch shape that broadcasts to X's); returned on X's device and dtype."""
    if not isinstance(bias, torch.Tensor) or not bias.is_floating_point():
        raise TypeError(f"logit_bias must be a floating-point torch.Tensor, got "
                        f"{type(bias).__name__ if not isinstance(bias, torch.Tensor) else bias.dtype}")
    if bias.dim() < 2 or bias.shape[-1] != bias.shape[-2]:
        raise ValueError(f"logit_bias must have shape (*batch, T, T), got {tuple(bias.shape)}")
    if not bool(torch.isfinite(bias).all()):
        raise ValueError("logit_bias must be finite (use a mask to forbid pairs)")
    if X is None:
        return bias
    X = _validate.matrix(x_name, X, finite=False)
    if bias.shape[-1] != X.shape[-2]:
        raise ValueError(f"logit_bias must be {X.shape[-2]} x {X.shape[-2]} to match the tokens, got "
                         f"{tuple(bias.shape)}")
    if _validate.broadcast("logit_bias", bias.shape[:-2], x_name, X.shape[:-2]) != tuple(X.shape[:-2]):
        raise ValueError(f"logit_bias's batch shape {tuple(bias.shape[:-2])} must broadcast to {x_name}'s "
                         f"{tuple(X.shape[:-2])}, not enlarge it")
    return bias.to(device=X.device, dtype=X.dtype)


def _check_config(config) -> LayerConfig:
    """``config``, checked to be a :class:`LayerConfig`."""
    if not isinstance(config, LayerConfig):
        raise TypeError(f"config must be a rcteach.LayerConfig, got {type(config).__name__}")
    return config


def _check_draw(config, X, generator, weights, weights_name) -> None:
    """The arguments of :func:`draw_weights` and :func:`draw_keep`: a config, tokens X (*batch, T, d) (their shape,
    device and dtype), a ``torch.Generator`` on X's device, and a :class:`LayerWeights`."""
    _check_config(config)
    X = _validate.matrix("X", X, finite=False)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    make_generator(None, generator, X.device)  # on X's device
    if not isinstance(weights, LayerWeights):
        raise TypeError(f"{weights_name} must be a rcteach.layers.LayerWeights, got {type(weights).__name__}")


def _check_given(w: LayerWeights, config: LayerConfig, X) -> LayerWeights:
    """Validate the explicit weights given to :func:`layer` against the tokens X (*batch, T, d)."""
    *b, T, d = X.shape
    if config.attention == "iid" and (w.W_Q is not None or w.W_K is not None):
        raise ValueError("weights.W_Q and weights.W_K apply only to attention='qk'")
    if config.attention == "qk" and w.logits is not None:
        raise ValueError("weights.logits applies only to attention='iid'")
    if (w.W_Q is None) != (w.W_K is None):
        raise ValueError("pass both weights.W_Q and weights.W_K, or neither")
    if w.logits is not None:
        check_weight("weights.logits", w.logits, T, T, b, x_name="X")
    if w.W_Q is not None:
        check_weight("weights.W_Q", w.W_Q, d, None, b, x_name="X")
        check_weight("weights.W_K", w.W_K, d, w.W_Q.shape[-1], b, x_name="X")
    if w.W_V is not None:
        check_weight("weights.W_V", w.W_V, d, d, b, x_name="X")
    for name in ("logits", "W_Q", "W_K", "W_V"):
        W = getattr(w, name)
        if W is not None and (W.dtype != X.dtype or W.device != X.device):
            raise TypeError(f"weights.{name} must have X's dtype and device ({X.dtype}, {X.device}), "
                            f"got ({W.dtype}, {W.device})")
    if w.keep is not None and (not isinstance(w.keep, torch.Tensor) or w.keep.dtype != torch.bool
                               or tuple(w.keep.shape[-2:]) != (T, T)):
        raise TypeError(f"weights.keep must be a boolean (*batch, {T}, {T}) tensor")
    return w


def draw_weights(config: LayerConfig, X, generator, *, given: LayerWeights = LayerWeights()) -> LayerWeights:
    """Draw the weights of one layer on tokens like X (*batch, T, d), except those ``given``.

    Order: logits ("iid") or W_Q then W_K ("qk"), then W_V; no dropout mask (:func:`draw_keep`).
    Only X's shape, device and dtype are used.
    """
    _check_draw(config, X, generator, given, "given")
    *b, T, d = X.shape
    kw = dict(generator=generator, device=X.device, dtype=X.dtype)
    logits, W_Q, W_K, W_V = given.logits, given.W_Q, given.W_K, given.W_V
    if config.attention == "iid":
        if logits is None:
            logits = math.sqrt(config.s2) * torch.randn(*b, T, T, **kw)
    elif W_Q is None:
        W_Q, W_K = qk_weights(d, config.d_qk or d, config.s2, batch=b, **kw)
    if W_V is None and config.values == "gaussian":
        W_V = math.sqrt(config.value_var) * torch.randn(*b, d, d, **kw)
    elif W_V is None and config.values == "orthogonal":
        W_V = orthogonal_matrix(d, batch=b, **kw)
    return LayerWeights(logits, W_Q, W_K, W_V, given.keep)


def draw_keep(config: LayerConfig, X, generator, weights: LayerWeights) -> LayerWeights:
    """``weights`` with a fresh dropout keep mask (*batch, T, T) ~ Bernoulli(1 - p); unchanged when p = 0."""
    _check_draw(config, X, generator, weights, "weights")
    if config.dropout == 0.0:
        return weights
    *b, T, _ = X.shape
    u = torch.rand(*b, T, T, generator=generator, device=X.device, dtype=X.dtype)
    return replace(weights, keep=u >= config.dropout)


def on_tokens(config: LayerConfig, X, *, x_name="X") -> LayerConfig:
    """``config`` with its mask and logit bias validated against the tokens X (*batch, T, d) and moved to X's
    device (the bias also to X's dtype)."""
    _check_config(config)
    X = _validate.matrix(x_name, X, finite=False)
    if config.mask is not None:
        config = replace(config, mask=check_batch_mask(config.mask, X, x_name=x_name))
    if config.logit_bias is not None:
        config = replace(config, logit_bias=check_logit_bias(config.logit_bias, X, x_name=x_name))
    return config


def layer(X, config: LayerConfig, *, weights: LayerWeights | None = None, generator=None) -> torch.Tensor:
    """One attention layer X (*batch, T, d) -> X' (same shape), as in the module doc.

    Weights not in ``weights`` (all, by default) are drawn from ``generator`` (a fresh
    non-deterministic one when None) in the order of :func:`draw_weights` and :func:`draw_keep`, so
    that ``layer(X0, config, generator=g)`` equals the first layer of ``propagate(X0, 1, ...)`` with a
    generator in the same state.  The mask moves to X's device.
    """
    X = _validate.matrix("X", X, min_rows=2)
    config = on_tokens(config, X)
    if weights is None:
        weights = LayerWeights()
    elif not isinstance(weights, LayerWeights):
        raise TypeError(f"weights must be a rcteach.layers.LayerWeights, got {type(weights).__name__}")
    else:
        weights = _check_given(weights, config, X)
    gen = make_generator(None, generator, X.device)
    weights = draw_weights(config, X, gen, given=weights)
    if weights.keep is None:
        weights = draw_keep(config, X, gen, weights)
    return forward(X, config, weights)


def forward(X, config: LayerConfig, w: LayerWeights) -> torch.Tensor:
    """The layer map with all its weights ``w`` drawn, on validated input (no checks: see :func:`layer`)."""
    pre = config.norm_position == "pre"
    Z = normalise_unchecked(X, config.norm) if pre else X  # the attention's input
    if config.attention == "iid":
        logits = config.beta * w.logits
    else:
        logits = qk_logits_unchecked(Z, w.W_Q, w.W_K, config.beta)
    if config.logit_bias is not None:
        logits = logits + config.logit_bias
    A = attention_map_unchecked(logits, config.mask, centred=config.centred)  # (*batch, T, T)
    if config.attention_scale != 1.0:
        A = config.attention_scale * A
    if w.keep is not None:
        A = A * w.keep / (1.0 - config.dropout)
    Y = matmul(A, Z)  # (*batch, T, d)
    if w.W_V is not None:
        Y = matmul(Y, w.W_V)
    if config.skip is not None:
        Y = X + config.skip * Y
    return Y if pre else normalise_unchecked(Y, config.norm)
