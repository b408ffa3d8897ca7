"""Property-based tests (hypothesis) of the public Python API's answer to bad and to extreme input.

* Bad input: for every public function and every argument, hypothesis draws bad values of that
  argument's kind (wrong type, a bool-like string for a flag, negative / zero / NaN / inf numbers,
  wrong shapes, dtypes and batch shapes, masks, devices that do not exist here) into an otherwise
  valid call, which must raise a ValueError or TypeError whose message names the argument.
* Extreme valid input: huge and tiny scales, large s2, deep float32 stacks give finite answers, or
  a UserWarning saying why a formula does not apply; never NaN/inf without a word, never a crash.

Examples per test are few (``FAST``): the suite is a sweep over functions and argument kinds.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import tempfile
import warnings
from dataclasses import dataclass, field

import matplotlib
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rcteach as rc
from rcteach import (
    equilibria,
    explorers,
    free_probability,
    grid,
    linalg,
    matfree,
    norms,
    plotting,
    theory,
    training,
    width,
    wu_table,
)
from rcteach._validate import LOG_FLOAT_MAX
from rcteach.device import DEVICE_ENV
from rcteach.layers import LayerConfig, LayerWeights, check_logit_bias, draw_keep, draw_weights, on_tokens
from rcteach.attention import noniso_attention
from rcteach.logits import leading_term, qk_logits, random_qk_logits, random_logits
from rcteach.sphere import sphere_flow, tail_rate
from rcteach.tokens import near_consensus, orthogonal_matrix
from rcteach.width import noniso_width_ranks

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

models = pytest.importorskip("rcteach.models")  # needs transformers (installed by requirements.txt)
widgets = pytest.importorskip("rcteach.widgets")  # needs ipywidgets
pytestmark = pytest.mark.usefixtures("cpu_env")

FAST = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
F64 = torch.float64

# -- bad values, by the kind of argument -------------------------------------------------------------

NOT_NUMBERS = st.sampled_from(["3", "1.0", "yes", [2], (1,), b"1", 2j, object()])  # None is often the default


def bad_int(minimum=None, maximum=None):
    """Not an int (floats, bools, strings, ...) or an int out of [minimum, maximum]."""
    out = [NOT_NUMBERS, st.booleans(), st.floats(allow_nan=True, allow_infinity=True), st.just(np.float64(2.0))]
    if minimum is not None:
        out.append(st.integers(max_value=minimum - 1, min_value=minimum - 10**6))
    if maximum is not None:
        out.append(st.integers(min_value=maximum + 1, max_value=maximum + 10**6))
    return st.one_of(out)


def bad_real(*, minimum=None, maximum=None, positive=False, below=None):
    """Not a real number, NaN/inf, or a finite float out of range (bounds as in ``_validate.real``)."""
    out = [NOT_NUMBERS, st.booleans(), st.sampled_from([math.nan, math.inf, -math.inf, np.nan])]
    if minimum is not None or positive:
        low = 0.0 if minimum is None else minimum
        out.append(st.floats(max_value=low, exclude_max=not positive, allow_nan=False, min_value=-1e300))
    if maximum is not None:
        out.append(st.floats(min_value=maximum, exclude_min=True, allow_nan=False, allow_infinity=False))
    if below is not None:
        out.append(st.floats(min_value=below, allow_nan=False, allow_infinity=False))
    return st.one_of(out)


BAD_S2 = st.one_of(bad_real(minimum=0.0), st.floats(min_value=LOG_FLOAT_MAX, exclude_min=True, allow_infinity=False))
BAD_FLAG = st.sampled_from(["no", "yes", "False", "True", "", 0, 1, 1.0, None, [], "0"])
BAD_SEED = bad_int(minimum=0, maximum=2**64 - 1)
BAD_BATCH = st.one_of(st.integers(max_value=0, min_value=-5), st.tuples(st.integers(1, 3), st.integers(-3, 0)),
                      st.sampled_from(["2", 2.0, True, [1.5], None, {2}]))
BAD_DEVICE = st.sampled_from(["gpu", "nope", "cuda:x", "", 3, 1.5, ["cpu"], "tpu", "cpu cpu"]
                             + ([] if torch.cuda.is_available() else ["cuda", "cuda:0", "cuda:7"])
                             + ([] if torch.backends.mps.is_available() else ["mps"]))
BAD_DTYPE = st.sampled_from([torch.int64, torch.float16, torch.bfloat16, torch.complex64, torch.bool, "float64", float,
                             np.float64])
BAD_GENERATOR = st.sampled_from([0, "seed", np.random.default_rng(0), 1.5])


def choices(options):
    """A string that is not one of ``options``, or a non-string."""
    return st.one_of(st.text(max_size=6).filter(lambda s: s not in options),
                     st.sampled_from([3, 1.0, b"softmax", ["iid"], ("qk",)]).filter(lambda s: s not in options))


def bad_matrix(rows, cols, *, extra=()):
    """Not a float32/float64 (*batch, rows, cols) tensor with finite entries, or one of ``extra``."""

    def poisoned(value):
        def make(i):
            X = torch.randn(rows, cols, dtype=F64)
            X.view(-1)[i % X.numel()] = value
            return X
        return st.integers(0, 10**6).map(make)

    return st.one_of(
        st.sampled_from([[[1.0, 2.0], [3.0, 4.0]], "X", 3.0, np.ones((rows, cols))]),  # None: often the default
        st.just(torch.ones(rows, dtype=F64)),  # 1-D
        st.just(torch.ones(rows, 0, dtype=F64)),  # no columns
        st.just(torch.ones(0, cols, dtype=F64)),  # no rows
        st.sampled_from([torch.int64, torch.bool, torch.complex128, torch.float16, torch.bfloat16])
          .map(lambda dt: torch.ones(rows, cols).to(dt)),
        poisoned(math.nan), poisoned(math.inf), poisoned(-math.inf),
        st.just(torch.ones(rows, cols, dtype=F64, device="meta")),
        st.just(torch.ones(rows, cols, dtype=F64).to_sparse()),
        *(st.just(x) for x in extra),
    )


def bad_mask(T, *, extra=(), sized=True):
    """Not a boolean (T, T) mask allowing >= 1 position per row (``sized=False``: any T)."""
    empty_row = torch.ones(T, T, dtype=torch.bool)
    empty_row[T // 2] = False
    return st.one_of(
        st.sampled_from([[[True]], "causal", 1, np.ones((T, T), dtype=bool)]),
        st.just(torch.ones(T, T)),  # float, not bool
        *([st.just(torch.ones(T + 1, T + 1, dtype=torch.bool))] if sized else []),
        st.just(torch.ones(T, T + 1, dtype=torch.bool)),
        st.just(torch.ones(T, dtype=torch.bool)),
        st.just(torch.ones(0, 0, dtype=torch.bool)),
        st.just(empty_row),
        st.just(torch.ones(T, T, dtype=torch.bool).to_sparse()),
        *(st.just(x) for x in extra),
    )


# -- valid calls --------------------------------------------------------------------------------------

T, D, K = 4, 4, 2  # tokens, width, query-key width of the valid calls


def X_(*batch):
    return rc.gaussian_tokens(T, D, batch=batch, seed=0)


def W_(*batch, rows=D, cols=K):
    return torch.randn(*batch, rows, cols, generator=torch.Generator().manual_seed(1), dtype=F64)


def A_(*batch):
    return rc.random_attention(T, batch=batch, seed=0)


def unit_X():
    return equilibria.random_unit_tokens(T, D, seed=0)


@dataclass
class Case:
    """A public function, a valid call of it, and a bad-value strategy per argument."""

    name: str
    fn: object
    valid: object  # () -> dict of keyword arguments that make a valid call
    bad: dict = field(default_factory=dict)

    def __repr__(self):
        return self.name


def closing(figure_fn):
    """``figure_fn`` that closes the figures it made."""
    def call(**kwargs):
        try:
            return figure_fn(**kwargs)
        finally:
            plt.close("all")
    return call


def entered(context):
    """Enter and leave the context manager ``context(**kwargs)``."""
    def call(**kwargs):
        with context(**kwargs):
            pass
    return call


@functools.lru_cache(maxsize=None)
def tiny_model():
    """A one-layer TinyBERT-sized model, built once."""
    return models.build_model("tinybert", num_hidden_layers=1, vocab_size=100)


RANDOM = dict(seed=BAD_SEED, device=BAD_DEVICE, dtype=BAD_DTYPE)  # the random functions' shared arguments
S2_REAL = bad_real(minimum=0.0)  # sampling s2: any finite s2 >= 0 is valid (no e^{s2} is formed)

# the explorers' starting arguments, shared by the data functions and the widget constructors
VALUES_KIND = choices(("gaussian", "orthogonal", "identity"))
EXPLORER_VALID = dict(spectrum=lambda: dict(T=8), width=lambda: dict(T_range=(8, 16), points=2, seeds=1),
                      depth=lambda: dict(depth=2, T=4, d=4, seeds=1), mask=lambda: dict(T=4, depth=2, d=4, seeds=1))
EXPLORER_BAD = dict(
    spectrum=dict(T=bad_int(minimum=2), s2=BAD_S2, activation=choices(theory.ACTIVATIONS),
                  bias=st.one_of(bad_real(), st.just(1.0)), centred=BAD_FLAG, attention=choices(explorers.ATTENTION),
                  d_qk=bad_int(minimum=1), seed=BAD_SEED),
    width=dict(T_range=st.sampled_from([8, (8,), (16, 8), (1, 8), (8.0, 16), "8,16", None]),
               gamma=bad_real(positive=True),
               s2=BAD_S2, gram=BAD_FLAG, points=bad_int(minimum=1), seeds=bad_int(minimum=1), seed=BAD_SEED),
    depth=dict(depth=bad_int(minimum=0), T=st.one_of(bad_int(minimum=2), st.just(5)), d=bad_int(minimum=1),
               attention=choices(explorers.ATTENTION), s2=bad_real(minimum=0.0), centred=BAD_FLAG,
               norm=choices(("rms", "layernorm")), skip=BAD_FLAG, values=VALUES_KIND,
               value_scale=bad_real(positive=True),
               seeds=bad_int(minimum=1), seed=BAD_SEED),
    mask=dict(kind=choices(rc.MASK_KINDS), T=st.one_of(bad_int(minimum=2), st.just(5)), window=bad_int(minimum=0),
              beta=bad_real(positive=True), norm=choices(("rms", "layernorm")), values=VALUES_KIND,
              depth=bad_int(minimum=0), d=bad_int(minimum=1), seeds=bad_int(minimum=1), seed=BAD_SEED),
)

LAYER_CONFIG = st.sampled_from([None, "qk", {"attention": "qk"}])
LAYER_TOKENS = st.sampled_from(["X", None, [[1.0] * D] * T, torch.ones(T, dtype=F64),
                                torch.ones(T, D, dtype=torch.int64), torch.ones(T, D, dtype=F64).to_sparse()])

CASES = [
    # tokens, logits, attention
    Case("orthonormal_tokens", rc.orthonormal_tokens, lambda: dict(T=3, d=4),
         dict(T=st.one_of(bad_int(minimum=2), st.just(5)), d=st.one_of(bad_int(minimum=1), st.just(2)),
              batch=BAD_BATCH, **RANDOM, generator=BAD_GENERATOR)),
    Case("orthogonal_matrix", orthogonal_matrix, lambda: dict(d=3),
         dict(d=bad_int(minimum=1), batch=BAD_BATCH, **RANDOM, generator=BAD_GENERATOR)),
    Case("gaussian_tokens", rc.gaussian_tokens, lambda: dict(T=3, d=4),
         dict(T=bad_int(minimum=2), d=bad_int(minimum=1), std=bad_real(minimum=0.0),
              rho=bad_real(minimum=0.0, maximum=1.0), batch=BAD_BATCH, **RANDOM)),
    Case("near_consensus", near_consensus, lambda: dict(T=3, d=4, eps=0.1),
         dict(T=bad_int(minimum=2), d=bad_int(minimum=1), eps=bad_real(minimum=0.0), seeds=bad_int(minimum=1),
              generator=BAD_GENERATOR, **RANDOM)),
    Case("random_logits", random_logits, lambda: dict(T=3, s2=0.5),
         dict(T=bad_int(minimum=2), s2=S2_REAL, m=bad_real(), batch=BAD_BATCH, **RANDOM)),
    Case("random_qk_logits", random_qk_logits, lambda: dict(T=3, d=4, d_qk=2),
         dict(T=bad_int(minimum=2), d=bad_int(minimum=1), d_qk=bad_int(minimum=1),
              token_norm_sq=bad_real(minimum=0.0), sigma_q=bad_real(minimum=0.0), sigma_k=bad_real(minimum=0.0),
              beta=bad_real(), batch=BAD_BATCH, **RANDOM)),
    Case("qk_logits", qk_logits, lambda: dict(X=X_(2), W_Q=W_(), W_K=W_()),
         dict(X=bad_matrix(T, D, extra=[torch.ones(2, T, D + 1, dtype=F64), torch.ones(2, 1, D, dtype=F64),
                                       torch.ones(2, T, D, dtype=torch.float32)]),
              W_Q=bad_matrix(D, K, extra=[W_(rows=D + 1), W_(3), W_(cols=K + 1)]),
              W_K=bad_matrix(D, K, extra=[W_(rows=D + 1), W_(3), W_(cols=K + 1)]), beta=bad_real())),
    Case("leading_term", leading_term, lambda: dict(logits=torch.zeros(T, T, dtype=F64), s2=0.5),
         dict(logits=bad_matrix(T, T, extra=[torch.ones(T, T + 1, dtype=F64)]), s2=S2_REAL, m=bad_real())),
    Case("uniform_attention", rc.uniform_attention, lambda: dict(T=T),
         dict(T=bad_int(minimum=2), mask=bad_mask(T), device=BAD_DEVICE, dtype=BAD_DTYPE)),
    Case("centre", rc.centre, lambda: dict(A=A_(2), mask=rc.make_mask("causal", T)),
         dict(A=bad_matrix(T, T), mask=bad_mask(T, extra=[torch.ones(3, T, T, dtype=torch.bool)]))),
    Case("attention_map", rc.attention_map, lambda: dict(logits=torch.zeros(2, T, T, dtype=F64),
                                                        mask=rc.make_mask("causal", T)),
         dict(logits=bad_matrix(T, T, extra=[torch.ones(T, T + 1, dtype=F64)]),
              mask=bad_mask(T, extra=[torch.ones(3, T, T, dtype=torch.bool)]), activation=choices(theory.ACTIVATIONS),
              centred=BAD_FLAG, bias=st.one_of(bad_real(), st.just(0.5)))),  # bias 0.5 with softmax
    Case("random_attention", rc.random_attention, lambda: dict(T=T, s2=0.5),
         dict(T=bad_int(minimum=2), s2=S2_REAL, batch=BAD_BATCH, activation=choices(theory.ACTIVATIONS),
              bias=st.one_of(bad_real(), st.just(1.0)), centred=BAD_FLAG, generator=BAD_GENERATOR, **RANDOM)),
    Case("qk_attention", rc.qk_attention, lambda: dict(X=X_(), W_Q=W_(), W_K=W_()),
         dict(X=bad_matrix(T, D), W_Q=bad_matrix(D, K, extra=[W_(rows=D + 1)]), W_K=bad_matrix(D, K),
              mask=bad_mask(T), beta=bad_real(), activation=choices(theory.ACTIVATIONS), centred=BAD_FLAG)),
    Case("noniso_attention", noniso_attention, lambda: dict(T=3, d=2, s2=0.5),
         dict(T=bad_int(minimum=2), d=bad_int(minimum=1), s2=S2_REAL, seeds=bad_int(minimum=1), **RANDOM)),
    Case("sphere_flow", sphere_flow, lambda: dict(X0=X_(), depth=2, beta=1.0, h=0.1),
         dict(X0=bad_matrix(T, D), depth=bad_int(minimum=1), beta=bad_real(minimum=0.0), h=bad_real(positive=True))),
    Case("tail_rate", tail_rate, lambda: dict(rel=torch.tensor([1e-4, 1e-6, 1e-8], dtype=F64)),
         dict(rel=st.sampled_from(["x", 1.0, [1e-4], torch.tensor([1e-4, math.nan]), torch.tensor([1e-4, -1.0]),
                                   torch.ones(2, dtype=torch.complex128), torch.zeros(4, dtype=F64),  # no rate to fit
                                   torch.tensor([1, 0]), torch.tensor([1.0, 1e-6])]),  # top reached at the last layer
              top=bad_real(positive=True), span=st.one_of(bad_real(positive=True, below=1.0), st.just(1e300)))),
    Case("noniso_width_ranks", noniso_width_ranks, lambda: dict(T=3, d=2, s2=0.5),
         dict(T=bad_int(minimum=2), d=bad_int(minimum=1), s2=S2_REAL, seeds=bad_int(minimum=1), seed=BAD_SEED,
              device=BAD_DEVICE)),
    Case("random_differential_attention", rc.random_differential_attention, lambda: dict(T=T, lam=0.5),
         dict(T=bad_int(minimum=2), lam=bad_real(), s2=S2_REAL, batch=BAD_BATCH, **RANDOM)),
    # masks
    Case("make_mask", rc.make_mask, lambda: dict(kind="sliding", T=5, window=1),
         dict(kind=choices(rc.MASK_KINDS), T=bad_int(minimum=2), window=bad_int(minimum=0), device=BAD_DEVICE)),
    *(Case(f.__name__, f, lambda: dict(mask=rc.make_mask("causal", T)),
           dict(mask=bad_mask(T, extra=[torch.ones(2, T, T, dtype=torch.bool)], sized=False)))
      for f in (rc.mask_graph, rc.is_strongly_connected, rc.is_quasi_strongly_connected, rc.centre_nodes,
                rc.diameter, rc.centre_eccentricity, rc.consensus_rate)),
    # metrics, norms, matrix-free
    Case("stable_rank", rc.stable_rank, lambda: dict(X=X_()),
         dict(X=bad_matrix(T, D, extra=[torch.zeros(T, D, dtype=F64)]), gram=BAD_FLAG)),
    Case("mu", rc.mu, lambda: dict(X=X_()), dict(X=bad_matrix(T, D))),
    Case("spectrum", rc.spectrum, lambda: dict(A=A_()),
         dict(A=bad_matrix(T, T, extra=[torch.ones(T, T + 1, dtype=F64)]))),
    Case("spectral_gap", rc.spectral_gap, lambda: dict(A=A_()),
         dict(A=bad_matrix(T, T, extra=[torch.ones(1, 1, dtype=F64)]))),
    Case("spectrum_distance", rc.spectrum_distance, lambda: dict(a=torch.ones(3), b=torch.ones(3)),
         dict(a=st.sampled_from([[1.0, 2.0, 3.0], "a", torch.ones(3, 1), torch.tensor([1.0, math.nan, 0.0]),
                                 torch.ones(4)]),
              b=st.sampled_from([None, torch.ones(2), torch.tensor([math.inf, 0.0, 0.0]), [1.0, 1.0, 1.0]]))),
    Case("decay_rate", rc.decay_rate, lambda: dict(values=torch.tensor([1.0, 0.5, 0.25], dtype=F64)),
         dict(values=st.sampled_from([torch.tensor(1.0), torch.tensor([1.0, math.nan]), torch.tensor([1.0, -1.0, 2.0]),
                                      ["a", "b"], None, torch.ones(1), torch.tensor([1.0, 0.0, 0.0])]),
              start=st.one_of(bad_int(), st.just(2)), stop=st.one_of(bad_int(), st.just(1)),
              floor=bad_real(positive=True))),
    Case("normalise", norms.normalise, lambda: dict(X=X_(), kind="rms"),
         dict(X=bad_matrix(T, D), kind=choices(("rms", "layernorm")).filter(lambda s: s is not None))),
    Case("spectral_norm", matfree.spectral_norm, lambda: dict(X=X_()),
         dict(X=bad_matrix(T, D), method=choices(matfree.METHODS), iters=bad_int(minimum=1),
              tol=bad_real(minimum=0.0), seed=BAD_SEED)),
    Case("matfree.stable_rank", matfree.stable_rank, lambda: dict(X=X_()),
         dict(X=bad_matrix(T, D, extra=[torch.zeros(T, D, dtype=F64)]), gram=BAD_FLAG,
              method=choices(matfree.METHODS))),
    Case("frobenius_bulk_radius", matfree.frobenius_bulk_radius, lambda: dict(A=A_()),
         dict(A=bad_matrix(T, T, extra=[torch.ones(T, T + 1, dtype=F64)]))),
    # layers and depth
    Case("LayerConfig", LayerConfig, lambda: dict(attention="qk", d_qk=2),
         dict(attention=choices(("iid", "qk")), s2=bad_real(minimum=0.0), beta=bad_real(),
              mask=bad_mask(T, sized=False),
              centred=BAD_FLAG, dropout=bad_real(minimum=0.0, below=1.0), norm=choices(("rms", "layernorm")),
              skip=st.sampled_from(["yes", "1", math.nan, math.inf, [1.0], 1j]),
              values=choices(("gaussian", "orthogonal", "identity")), value_var=bad_real(positive=True),
              d_qk=bad_int(minimum=1))),
    Case("layer", rc.layer, lambda: dict(X=X_(), config=LayerConfig()),
         dict(X=bad_matrix(T, D), config=st.sampled_from([None, {"s2": 1.0}, "iid"]),
              weights=st.sampled_from([{}, "w", (None,)]), generator=BAD_GENERATOR)),
    Case("layer with a mask", lambda X, mask: rc.layer(X, LayerConfig(mask=mask), generator=torch.Generator()),
         lambda: dict(X=X_(2), mask=rc.make_mask("causal", T)),
         dict(mask=st.sampled_from([torch.ones(3, T, T, dtype=torch.bool), torch.ones(5, 5, dtype=torch.bool),
                                    torch.ones(2, 2, T, T, dtype=torch.bool)]))),
    Case("layer with weights",
         lambda X, weights: rc.layer(X, LayerConfig(), weights=weights, generator=torch.Generator()),
         lambda: dict(X=X_(2), weights=LayerWeights()),
         dict(weights=st.sampled_from([LayerWeights(W_V=torch.ones(3, 3, dtype=F64)),
                                       LayerWeights(logits=torch.ones(5, 5, dtype=F64)),
                                       LayerWeights(W_Q=W_(), W_K=W_()), LayerWeights(W_V=torch.ones(D, D)),
                                       LayerWeights(keep=torch.ones(T, T, dtype=F64)),
                                       LayerWeights(W_V=torch.ones(3, D, D, dtype=F64)),
                                       LayerWeights(W_V=torch.full((D, D), math.nan, dtype=F64))]))),
    # the layer's building blocks (only X's shape, device and dtype are used: NaN tokens are not theirs to reject)
    Case("check_logit_bias", lambda logit_bias, X: check_logit_bias(logit_bias, X),
         lambda: dict(logit_bias=torch.zeros(T, T, dtype=F64), X=X_()),
         dict(logit_bias=st.sampled_from(["b", torch.zeros(T, T, dtype=torch.int64), torch.zeros(T, T + 1, dtype=F64),
                                         torch.zeros(T + 1, T + 1, dtype=F64),
                                         torch.full((T, T), math.nan, dtype=F64)]),
              X=LAYER_TOKENS.filter(lambda X: X is not None))),  # None: no tokens to match (the default)
    Case("draw_weights", lambda config, X, generator, given: draw_weights(config, X, generator, given=given),
         lambda: dict(config=LayerConfig(attention="qk"), X=X_(), generator=torch.Generator(), given=LayerWeights()),
         dict(config=LAYER_CONFIG, X=LAYER_TOKENS, generator=st.one_of(BAD_GENERATOR, st.none()),
              given=st.sampled_from([None, {}, "w"]))),
    Case("draw_keep", draw_keep,
         lambda: dict(config=LayerConfig(dropout=0.5), X=X_(), generator=torch.Generator(), weights=LayerWeights()),
         dict(config=LAYER_CONFIG, X=LAYER_TOKENS, generator=st.one_of(BAD_GENERATOR, st.none()),
              weights=st.sampled_from([None, {}, "w"]))),
    Case("on_tokens", on_tokens, lambda: dict(config=LayerConfig(mask=rc.make_mask("causal", T)), X=X_()),
         dict(config=LAYER_CONFIG, X=LAYER_TOKENS)),
    Case("propagate", rc.propagate, lambda: dict(X0=X_(2), depth=2, seed=0),
         dict(X0=bad_matrix(T, D, extra=[torch.ones(1, D, dtype=F64)]), depth=bad_int(minimum=0), shared=BAD_FLAG,
              keep_states=BAD_FLAG, stable_ranks=BAD_FLAG, seed=BAD_SEED, device=BAD_DEVICE, dtype=BAD_DTYPE,
              generator=BAD_GENERATOR,
              s2=bad_real(minimum=0.0), beta=bad_real(), centred=BAD_FLAG, dropout=bad_real(minimum=0.0, below=1.0),
              norm=choices(("rms", "layernorm")), values=choices(("gaussian", "orthogonal", "identity")),
              value_var=bad_real(positive=True), attention=choices(("iid", "qk")),
              mask=bad_mask(T, extra=[torch.ones(3, T, T, dtype=torch.bool)]),
              W_V=bad_matrix(D, D, extra=[torch.ones(D, D + 1, dtype=F64), torch.ones(3, D, D, dtype=F64)]),
              W_Q=st.just(W_()))),  # W_Q with attention="iid"
    Case("propagate qk", rc.propagate, lambda: dict(X0=X_(2), depth=2, seed=0, attention="qk"),
         dict(W_Q=bad_matrix(D, K, extra=[W_(rows=D + 1), W_(3)]), d_qk=bad_int(minimum=1))),
    Case("weight_gradients", rc.weight_gradients, lambda: dict(X0=X_(), depth=2, seed=0),
         dict(X0=bad_matrix(T, D), depth=st.one_of(bad_int(minimum=1), st.just(0)),
              loss=st.sampled_from(["nrom", 3, None, "MU"]), W_V=st.just(W_(rows=D, cols=D)), shared=st.just(True))),
    Case("width_stable_ranks", rc.width_stable_ranks, lambda: dict(T=8, gamma=1.0, seed=0),
         dict(T=bad_int(minimum=2), gamma=bad_real(positive=True), s2=S2_REAL, seeds=bad_int(minimum=1),
              centred=BAD_FLAG, gram=BAD_FLAG, attention=choices(("iid", "qk")), **RANDOM)),
    Case("width_stable_ranks qk", rc.width_stable_ranks, lambda: dict(T=8, gamma=1.0, seed=0, attention="qk"),
         dict(d_qk=bad_int(minimum=1), gamma=st.just(2.0))),
    Case("width_squared_singular_values", width.width_squared_singular_values, lambda: dict(T=8, gamma=1.0, seed=0),
         dict(T=bad_int(minimum=2), gamma=bad_real(positive=True), s2=S2_REAL, seeds=bad_int(minimum=1),
              centred=BAD_FLAG, attention=choices(("iid", "qk")), **RANDOM)),
    Case("width_gram_factors", width.width_gram_factors, lambda: dict(T=8, gamma=0.5, seed=0),
         dict(T=bad_int(minimum=2), gamma=bad_real(positive=True), s2=S2_REAL, seeds=bad_int(minimum=1),
              centred=BAD_FLAG, seed=BAD_SEED, device=BAD_DEVICE)),
    Case("width_dims", width.width_dims, lambda: dict(T=8, gamma=0.5),
         dict(T=bad_int(minimum=2), gamma=bad_real(positive=True))),
    # equilibria
    Case("layer_map", equilibria.layer_map, lambda: dict(X=unit_X(), W_V=torch.eye(D, dtype=F64)),
         dict(X=bad_matrix(T, D),
              W_V=bad_matrix(D, D, extra=[torch.eye(D + 1, dtype=F64), torch.ones(D, D + 1, dtype=F64)]),
              B=bad_matrix(D, D, extra=[torch.eye(D + 1, dtype=F64)]), mask=bad_mask(T), beta=bad_real(),
              norm=choices(("rms", "layernorm")))),
    Case("random_unit_tokens", equilibria.random_unit_tokens, lambda: dict(N=3, d=2),
         dict(N=bad_int(minimum=2), d=bad_int(minimum=1), batch=BAD_BATCH, **RANDOM)),
    Case("tangent_basis", equilibria.tangent_basis, lambda: dict(X=unit_X()),
         dict(X=bad_matrix(T, D, extra=[torch.ones(T, D, dtype=F64), torch.ones(T, 1, dtype=F64)]))),
    Case("numerical_rank", equilibria.numerical_rank, lambda: dict(X=X_()),
         dict(X=bad_matrix(T, D), rtol=bad_real(positive=True))),
    Case("iterate", equilibria.iterate, lambda: dict(X0=unit_X(), W_V=torch.eye(D, dtype=F64), steps=2),
         dict(X0=bad_matrix(T, D), steps=bad_int(minimum=0), beta=bad_real())),
    Case("polish", equilibria.polish, lambda: dict(X=unit_X(), W_V=torch.eye(D, dtype=F64), steps=1),
         dict(X=bad_matrix(T, D), steps=bad_int(minimum=0), W_V=bad_matrix(D, D))),
    Case("spectral_radius", equilibria.spectral_radius, lambda: dict(M=A_()), dict(M=bad_matrix(T, T))),
    Case("linalg.eigvals", linalg.eigvals, lambda: dict(A=A_(2)),
         dict(A=bad_matrix(T, T, extra=[torch.ones(T, 2, dtype=F64)]))),
    Case("linalg.eigvalsh", linalg.eigvalsh, lambda: dict(H=A_() + A_().mT),
         dict(H=bad_matrix(T, T, extra=[torch.ones(T, 2, dtype=F64)]))),
    Case("linalg.svdvals", linalg.svdvals, lambda: dict(X=X_()), dict(X=bad_matrix(T, D))),
    Case("unique_equilibria", equilibria.unique_equilibria, lambda: dict(states=torch.zeros(2, T, D, dtype=F64)),
         dict(states=bad_matrix(T, D), atol=bad_real(minimum=0.0))),
    Case("two_token_example", equilibria.two_token_example, lambda: dict(),
         dict(q=st.one_of(bad_real(), st.sampled_from([0.0, 1.0, -2.0])), dtype=BAD_DTYPE, device=BAD_DEVICE)),
    Case("triangular_example", equilibria.triangular_example, lambda: dict(N=3),
         dict(N=bad_int(minimum=2), q=st.one_of(bad_real(), st.sampled_from([0.0, 1.0, -0.5])))),
    Case("rank_k_equilibrium", equilibria.rank_k_equilibrium, lambda: dict(k=1, N=2, steps=1, polish_steps=1),
         dict(k=st.one_of(bad_int(minimum=1), st.just(3)), N=bad_int(minimum=2), q=bad_real(), steps=bad_int(minimum=0),
              polish_steps=bad_int(minimum=0))),
    Case("find_equilibria", equilibria.find_equilibria,
         lambda: dict(W_V=torch.eye(2, dtype=F64), N=2, starts=2, steps=2, polish_steps=1, seed=0),
         dict(W_V=bad_matrix(2, 2), N=bad_int(minimum=2), starts=bad_int(minimum=1), steps=bad_int(minimum=0),
              polish_steps=bad_int(minimum=0), tol=bad_real(positive=True), beta=bad_real(), seed=BAD_SEED)),
    # figures and real models
    Case("plot_spectrum", closing(plotting.plot_spectrum),
         lambda: dict(eigenvalues=torch.ones(3, dtype=torch.complex128)),
         dict(eigenvalues=st.sampled_from([["a", "b"], None, "ev", {1: 2}]), radius=bad_real(minimum=0.0),
              outlier=bad_real())),
    Case("draw_mask", closing(plotting.draw_mask), lambda: dict(mask=rc.make_mask("causal", T)),
         dict(mask=bad_mask(T, sized=False), layout=choices(("circular", "line")), show_self_loops=BAD_FLAG)),
    Case("centred_attention", entered(models.centred_attention), lambda: dict(enabled=True), dict(enabled=BAD_FLAG)),
    Case("random_embeddings", models.random_embeddings, lambda: dict(name="gpt2", T=4),
         dict(name=choices(models.MODEL_NAMES), T=bad_int(minimum=2), batch=bad_int(minimum=1),
              std=bad_real(positive=True),
              seed=BAD_SEED)),
    Case("max_positions", models.max_positions, lambda: dict(name="gpt2"), dict(name=choices(models.MODEL_NAMES))),
    Case("shared_fraction", models.shared_fraction, lambda: dict(model=tiny_model(), T=4),
         dict(model=st.sampled_from([None, "tinybert", torch.nn.Linear(2, 2)]),
              T=st.one_of(bad_int(minimum=2), st.just(513)),
              std=bad_real(positive=True))),
    # the 128-layer table of Wu et al. (tiny)
    Case("rho_from_mu0", wu_table.rho_from_mu0, lambda: dict(mu0=2.0, T=4, d=4),
         dict(mu0=st.one_of(bad_real(positive=True), st.just(100.0)), T=bad_int(minimum=2), d=bad_int(minimum=1))),
    Case("logit_s2", wu_table.logit_s2, lambda: dict(d=4, norm="rms"),
         dict(d=bad_int(minimum=1), norm=choices(("rms", "layernorm")), torch_init=BAD_FLAG)),
    Case("layernorm_runs", wu_table.layernorm_runs,
         lambda: dict(T=4, d=4, depth=1, seeds=1, window=1, masks=("causal",)),
         dict(T=bad_int(minimum=2), d=bad_int(minimum=1), depth=bad_int(minimum=0), seeds=bad_int(minimum=1),
              window=bad_int(minimum=0), norm=choices(("rms", "layernorm")), beta=bad_real(), s2=bad_real(minimum=0.0),
              shared=BAD_FLAG, dropout=bad_real(minimum=0.0, below=1.0), rho=bad_real(minimum=0.0, maximum=1.0),
              masks=st.sampled_from([("full",), "causal", (3,)]), seed=BAD_SEED, device=BAD_DEVICE, dtype=BAD_DTYPE)),
    Case("layernorm_table", wu_table.layernorm_table, lambda: dict(layers=(0, 1), T=4, d=4, seeds=1, window=1),
         dict(layers=st.sampled_from([(0, 5.5), ("1",), (-1,), 3, None]))),
    Case("table_rows", wu_table.table_rows,
         lambda: dict(runs=wu_table.layernorm_runs(T=4, d=4, depth=1, seeds=1, masks=("causal",)), layers=(0, 1)),
         dict(runs=st.sampled_from([None, {}.items(), {"causal": 3}, [1]]),
              layers=st.sampled_from([(0, 5.5), ("1",), (-1,), 3, None, (0, 2)]))),
    Case("format_table", wu_table.format_table, lambda: dict(rows=[wu_table.LNRow("causal", 0, 1.0, 0.1, 0.5)]),
         dict(rows=st.sampled_from([None, 3, ["row"], [{"mask": "causal"}]]), scale=bad_real(positive=True))),
    # free probability, training, grid
    Case("fuss_catalan_moment", free_probability.fuss_catalan_moment, lambda: dict(k=2, j=2),
         dict(k=bad_int(minimum=1), j=bad_int(minimum=0))),
    Case("fuss_catalan_edge", free_probability.fuss_catalan_edge, lambda: dict(k=2), dict(k=bad_int(minimum=1))),
    Case("fuss_catalan_density", free_probability.fuss_catalan_density, lambda: dict(k=2, points=8),
         dict(k=bad_int(minimum=1), points=bad_int(minimum=2), dtype=BAD_DTYPE)),
    Case("gram_stable_rank_limit", free_probability.gram_stable_rank_limit, lambda: dict(T=8, k=2),
         dict(T=bad_int(minimum=2), k=bad_int(minimum=1))),
    Case("correlated_bulk_radius", free_probability.correlated_bulk_radius, lambda: dict(X=unit_X(), s2=0.5),
         dict(X=bad_matrix(T, D, extra=[torch.ones(1, D, dtype=F64)]), s2=S2_REAL)),
    Case("train_copy", training.train_copy, lambda: dict(T=3, d=4, vocab=3, depth=1, steps=1, batch=2),
         dict(init=choices(training.INITS), T=bad_int(minimum=2), d=bad_int(minimum=2), vocab=bad_int(minimum=2),
              depth=bad_int(minimum=1), steps=bad_int(minimum=1), lr=bad_real(positive=True), batch=bad_int(minimum=1),
              s2=BAD_S2, seed=BAD_SEED, eval_every=bad_int(minimum=1))),
    Case("consensus_gradients", training.consensus_gradients, lambda: dict(eps=[0.1, 0.01], T=3, d=4, vocab=3),
         dict(eps=st.one_of(st.sampled_from([[], (), 0.1, "0.1", None, [0.1, "1"], [True], [2.0], [1e300]]),
                            st.lists(bad_real(positive=True, maximum=1.0), min_size=1, max_size=2)),
              T=bad_int(minimum=2), d=bad_int(minimum=2), vocab=bad_int(minimum=2), s2=BAD_S2, seed=BAD_SEED)),
    Case("consensus_transient_layer", rc.masks.consensus_transient_layer,
         lambda: dict(mask=rc.make_mask("causal", T), level=0.5),
         dict(mask=bad_mask(T, sized=False), level=bad_real(positive=True), max_layers=bad_int(minimum=0))),
    Case("config_names", grid.config_names, lambda: dict(configs="A,A_perp"),
         dict(configs=st.sampled_from(["", "B", ["A", 3], [], 3, None, ("nope",)]))),
    Case("bartlett", grid.bartlett, lambda: dict(p=3, dof=2, gens=[torch.Generator().manual_seed(0)]),
         dict(p=bad_int(minimum=1), dof=bad_int(minimum=0),
              gens=st.sampled_from([None, [], [0], torch.Generator(), ["g"]]),
              seeds=bad_int(minimum=1), dtype=BAD_DTYPE, device=BAD_DEVICE)),
    Case("centred_softmax", grid.centred_softmax, lambda: dict(logits=torch.zeros(2, T, T, dtype=F64)),
         dict(logits=bad_matrix(T, T, extra=[torch.ones(T, T + 1, dtype=F64)]),
              log_scale=st.sampled_from([0.5, "0", torch.zeros(3, dtype=F64),
                                         torch.tensor([math.nan, 0.0], dtype=F64)]))),
    Case("simulate", grid.simulate, lambda: dict(T=4, gamma=0.5, configs="A", depth=1, seeds=1),
         dict(T=bad_int(minimum=2), gamma=st.one_of(bad_real(positive=True), st.just(2.0)),
              configs=st.sampled_from(["", "B", 3]), depth=bad_int(minimum=1), seeds=bad_int(minimum=1), seed=BAD_SEED,
              authors_skip=BAD_FLAG, dtype=BAD_DTYPE, device=BAD_DEVICE)),
    Case("grid_rows", grid.grid_rows, lambda: dict(T=4, gamma=0.5, configs="A", depth=1, seeds=1),
         dict(T=bad_int(minimum=2), gamma=st.one_of(bad_real(positive=True), st.just(2.0)), depth=bad_int(minimum=1),
              seeds=bad_int(minimum=1), seed=BAD_SEED, authors_skip=BAD_FLAG, dtype=choices(("float32", "float64")),
              device=BAD_DEVICE, configs=st.sampled_from(["", "B", 3, "A,A", ["A", "A"]]))),
    Case("top_and_rest", grid.top_and_rest, lambda: dict(S=(X_(2) @ X_(2).mT)),
         dict(S=bad_matrix(T, T, extra=[torch.ones(T, T + 1, dtype=F64), torch.eye(T, dtype=F64),  # (m, m): no batch
                                       torch.triu(torch.ones(2, T, T, dtype=F64))]))),  # not symmetric
    Case("Config", grid.Config, lambda: dict(attention="qk", skip="plain"),
         dict(attention=choices(("iid", "qk", "identity")), centred=BAD_FLAG,
              skip=choices(("plain", "upscaled")).filter(lambda s: s is not None), layernorm=BAD_FLAG)),
    Case("run_grid", grid.run_grid, lambda: dict(out=tempfile.mkdtemp(), configs="A", T=[4], gamma=[0.5], depth=1,
                                                 seeds=1, progress=False),
         dict(out=st.sampled_from([3, None, b"x", "", __file__, __file__ + "/sub"]),  # a file where a folder belongs
              configs=st.sampled_from(["", "B", 3, "A,A"]),
              T=st.sampled_from([3, [1], ["4"], [4.0], [4, 4]]),
              gamma=st.sampled_from([0.5, [-1.0], [math.nan], ["a"], [2.0], [0.5, 0.5], [1e-300]]),
              depth=bad_int(minimum=1), seeds=bad_int(minimum=1), base_seed=BAD_SEED, authors_skip=BAD_FLAG,
              dtype=choices(("float32", "float64")), device=BAD_DEVICE, force=BAD_FLAG, progress=BAD_FLAG,
              executor=st.sampled_from([object(), 3, "local:0", "nowhere", ""]))),
    # the theory checks from Python (a fast check: the centre node of causal masks)
    Case("run_check", rc.run_check, lambda: dict(name="causal-centre"),
         dict(name=st.sampled_from(["nope", "", 3, None, ["causal-centre"], b"causal-centre"]),
              mode=choices(("quick", "full")), device=BAD_DEVICE)),
    Case("run_check with settings", lambda T, window: rc.run_check("causal-centre", T=T, window=window),
         lambda: dict(T=8, window=2), dict(T=bad_int(minimum=2), window=bad_int(minimum=0))),
    Case("check", lambda names, **kw: rc.check(*names, **kw), lambda: dict(names=("causal-centre",)),
         dict(names=st.sampled_from([(), ("zz-none-*",), (3,), ("causal-centre", None), ([],)]),
              mode=choices(("quick", "full")), device=BAD_DEVICE)),
    Case("run_checks", rc.run_checks, lambda: dict(pattern="causal-centre"),
         dict(mode=choices(("quick", "full")), pattern=st.sampled_from(["zz-none-*", "", 3, None, ["causal-centre"]]),
              device=BAD_DEVICE, progress=BAD_FLAG)),
    # the explorers: data functions, and the widget constructors that wrap them (the same starting arguments)
    *(Case(f"{name}_data", getattr(explorers, f"{name}_data"), EXPLORER_VALID[name],
           dict(EXPLORER_BAD[name], device=BAD_DEVICE, **({"s2": bad_real(minimum=0.0)} if name == "mask" else {})))
      for name in EXPLORER_BAD),
    *(Case(f"{name}_explorer", getattr(widgets, f"{name}_explorer"), EXPLORER_VALID[name], EXPLORER_BAD[name])
      for name in EXPLORER_BAD),
]

# closed forms: (function, valid keyword arguments, bad strategies)
INT_T = bad_int(minimum=2)
THEORY = [
    (theory.c, dict(s2=1.0), dict(s2=BAD_S2)),
    (theory.entry_sd, dict(T=8, s2=1.0), dict(T=INT_T, s2=BAD_S2)),
    (theory.frobenius_sq, dict(s2=1.0), dict(s2=BAD_S2, centred=BAD_FLAG)),
    (theory.top_singular_value, dict(T=8, s2=1.0), dict(T=INT_T, s2=BAD_S2)),
    (theory.bulk_radius, dict(T=8, s2=1.0), dict(T=INT_T, s2=BAD_S2)),
    (theory.frobenius_sq_next_order, dict(T=8, s2=0.5), dict(T=INT_T, s2=BAD_S2, centred=BAD_FLAG)),
    (theory.leading_term_residual, dict(T=8, s2=1.0), dict(T=INT_T, s2=BAD_S2)),
    (theory.eigenvalue_median_modulus, dict(T=8, s2=1.0), dict(T=INT_T, s2=BAD_S2)),
    (theory.singular_value_edge, dict(T=8, s2=1.0), dict(T=INT_T, s2=BAD_S2)),
    (theory.singular_value_median, dict(T=8, s2=1.0), dict(T=INT_T, s2=BAD_S2)),
    (theory.logit_variance, dict(sigma_q=1.0, sigma_k=1.0, token_norm_sq=1.0),
     dict(sigma_q=bad_real(minimum=0.0), sigma_k=bad_real(minimum=0.0), token_norm_sq=bad_real(minimum=0.0),
          beta=bad_real())),
    (theory.model_bulk_logit_variance, dict(d=8, T=8), dict(d=bad_int(minimum=1), T=INT_T, std=bad_real(positive=True),
                                                          shared_fraction=bad_real(minimum=0.0, maximum=1.0))),
    (theory.differential_outlier, dict(lam=0.5), dict(lam=bad_real())),
    (theory.differential_bulk_radius, dict(T=8, s2=1.0, lam=0.5), dict(T=INT_T, s2=BAD_S2, lam=bad_real())),
    (theory.width_stable_rank, dict(s2=1.0), dict(s2=BAD_S2)),
    (theory.width_stable_rank_bias, dict(T=64, gamma=0.5, s2=0.5),
     dict(T=INT_T, gamma=bad_real(positive=True), s2=BAD_S2)),
    (theory.width_stable_rank_gram, dict(T=64, gamma=0.5, s2=0.5),
     dict(T=INT_T, gamma=bad_real(minimum=0.0), s2=BAD_S2)),
    (theory.centred_width_slope, dict(gamma=0.5), dict(gamma=bad_real(minimum=0.0))),
    (theory.centred_width_slope_gram, dict(gamma=0.5), dict(gamma=bad_real(minimum=0.0))),
    (theory.depth_mu_factor, dict(T=8, s2=1.0), dict(T=INT_T, s2=BAD_S2, next_order=BAD_FLAG)),
    (theory.depth_mu_ratio, dict(T=8, s2=1.0, L=3),
     dict(T=INT_T, s2=BAD_S2, L=bad_int(minimum=0), next_order=BAD_FLAG)),
    (theory.skip_consensus_factor, dict(T=8, s2=1.0),
     dict(T=INT_T, s2=BAD_S2, skip=st.one_of(bad_real(), st.just(-1.0)))),
    (theory.norm_growth, dict(d=8, value_var=1.0, T=8, s2=1.0, centred=True),
     dict(d=bad_int(minimum=1), value_var=bad_real(minimum=0.0), T=INT_T, s2=BAD_S2, centred=BAD_FLAG)),
    (theory.activation_moments, dict(activation="sigmoid", s2=1.0),
     dict(activation=choices(theory.ACTIVATIONS), s2=S2_REAL, bias=bad_real())),
    (theory.activation_moments, dict(activation="softmax", s2=1.0), dict(s2=BAD_S2)),  # e^s2 overflows
    (theory.outlier, dict(activation="relu", s2=1.0), dict(activation=choices(theory.ACTIVATIONS), s2=S2_REAL)),
    (theory.map_bulk_radius, dict(T=8, activation="relu", s2=1.0),
     dict(T=INT_T, activation=choices(theory.ACTIVATIONS), s2=S2_REAL)),
    (theory.gap_ratio, dict(T=8, activation="relu", s2=1.0), dict(T=INT_T, s2=st.one_of(S2_REAL, st.just(0.0)))),
    (theory.relative_gap, dict(activation="relu", s2=1.0),
     dict(activation=choices(theory.ACTIVATIONS), s2=st.one_of(S2_REAL, st.just(0.0)))),
    (theory.causal_consensus_rate, dict(window=2), dict(window=bad_int(minimum=0).filter(lambda w: w is not None))),
    (theory.sliding_consensus_rate, dict(T=16, window=2), dict(T=INT_T, window=bad_int(minimum=1))),
    (theory.window_hops, dict(T=16, window=2), dict(T=INT_T, window=bad_int(minimum=1))),
    (theory.dropout_front, dict(T=4, depth=2, p=0.1),
     dict(T=INT_T, depth=bad_int(minimum=0), p=bad_real(minimum=0.0, below=1.0))),
    (theory.dropout_front_mu, dict(T=4, depth=2, p=0.1),
     dict(T=INT_T, depth=bad_int(minimum=0), p=bad_real(minimum=0.0, below=1.0),
          token_norm_sq=bad_real(positive=True))),
    (theory.centred_depth_gram_stable_rank, dict(T=8, depth=1), dict(T=INT_T, depth=bad_int(minimum=1))),
    (theory.first_value_gradient_rms, dict(T=4, d=4, s2=1.0, centred=True),
     dict(T=INT_T, d=st.one_of(bad_int(minimum=1), st.just(3)), s2=BAD_S2, value_var=bad_real(positive=True),
          centred=BAD_FLAG)),
    (theory.first_value_gradient_rms, dict(T=4, d=4, s2=1.0), dict(s2=BAD_S2)),  # s2 checked without centring too
    (theory.noniso_bulk_radius, dict(T=8, d=8, s2=1.0), dict(T=INT_T, d=bad_int(minimum=1), s2=BAD_S2)),
    (theory.noniso_width_slope, dict(gamma=0.5), dict(gamma=bad_real(minimum=0.0))),  # gamma = 0: d -> infinity
    (theory.embedding_gram_stable_rank_excess, dict(T=64, d=8, shared_fraction=1 / 3),
     dict(T=INT_T, d=bad_int(minimum=1), shared_fraction=bad_real(minimum=0.0, maximum=1.0))),
    (theory.gaussian_value_lyapunov, dict(d=4), dict(d=bad_int(minimum=2))),
    (theory.sphere_consensus_rate, dict(h=0.1), dict(h=bad_real(positive=True))),
    (theory.gaussian_value_rate, dict(mask=rc.make_mask("causal", T), d=4),
     dict(mask=bad_mask(T, sized=False), d=bad_int(minimum=2))),
]
CASES += [Case(f"theory.{f.__name__}", f, (lambda kw=kw: dict(kw)), bad) for f, kw, bad in THEORY]

PAIRS = [pytest.param(case, arg, id=f"{case.name}-{arg}") for case in CASES for arg in case.bad]


def names_argument(message: str, arg: str) -> bool:
    """True when the error message names the argument (as a word)."""
    return re.search(rf"(?<![\w.]){re.escape(arg)}(?!\w)", message) is not None


def test_every_valid_call_runs():
    """The valid calls the bad values are put into are valid (so the errors below are the bad value's)."""
    for case in CASES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            case.fn(**case.valid())


@pytest.mark.parametrize("case, arg", PAIRS)
@FAST
@given(data=st.data())
def test_bad_argument_gets_a_clear_error(case, arg, data):
    value = data.draw(case.bad[arg], label=arg)
    with pytest.raises((ValueError, TypeError)) as err:
        case.fn(**{**case.valid(), arg: value})
    assert names_argument(str(err.value), arg), f"{type(err.value).__name__}: {err.value}"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@FAST
@given(name=st.sampled_from(["cuda", "cuda:0", "cuda:3", "gpu", "not a device"]))
def test_bad_device_environment_is_named(monkeypatch, name):
    monkeypatch.setenv(DEVICE_ENV, name)
    with pytest.raises(ValueError, match=DEVICE_ENV):
        rc.random_attention(4, seed=0)


# -- extreme but valid input -------------------------------------------------------------------------

EXPONENT = st.integers(-300, 300)


@FAST
@given(exponent=EXPONENT, seed=st.integers(0, 2**32), gram=st.booleans(), method=st.sampled_from(["exact", "lanczos"]))
def test_stable_rank_is_scale_free(exponent, seed, gram, method):
    from rcteach import matfree

    fn = rc.stable_rank if method == "exact" else matfree.stable_rank
    X = torch.randn(2, 5, 7, generator=torch.Generator().manual_seed(seed), dtype=F64)
    expected = fn(X, gram=gram)
    got = fn(10.0**exponent * X, gram=gram)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=0)


@FAST
@given(exponent=EXPONENT, seed=st.integers(0, 2**32))
def test_mu_and_normalise_at_any_scale(exponent, seed):
    X = torch.randn(6, 5, generator=torch.Generator().manual_seed(seed), dtype=F64)
    s = 10.0**exponent
    torch.testing.assert_close(rc.mu(s * X) / s, rc.mu(X), rtol=1e-12, atol=0)
    torch.testing.assert_close(norms.normalise(s * X, "rms"), norms.normalise(X, "rms"), rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(norms.normalise(s * X, "layernorm"), norms.normalise(X, "layernorm"), rtol=1e-10,
                               atol=1e-12)


@FAST
@given(exponent=EXPONENT, seed=st.integers(0, 2**32), method=st.sampled_from(matfree.METHODS))
def test_matrix_free_estimates_at_any_scale(exponent, seed, method):
    X = torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(seed), dtype=F64)
    s = 10.0**exponent
    torch.testing.assert_close(matfree.spectral_norm(s * X, method=method) / s, matfree.spectral_norm(X, method=method),
                               rtol=1e-10, atol=0)
    torch.testing.assert_close(matfree.frobenius_bulk_radius(s * X) / s, matfree.frobenius_bulk_radius(X), rtol=1e-12,
                               atol=0)


@FAST
@given(s2=st.floats(0.0, 1e6), T=st.integers(2, 64), activation=st.sampled_from(theory.ACTIVATIONS),
       centred=st.booleans(), seed=st.integers(0, 2**32))
def test_random_attention_is_finite_at_any_s2(s2, T, activation, centred, seed):
    A = rc.random_attention(T, s2, activation=activation, centred=centred, seed=seed)
    assert torch.isfinite(A).all()
    if activation == "softmax" and not centred:
        torch.testing.assert_close(A.sum(-1), torch.ones(T, dtype=F64))


THEORY_T_S2 = [f for f, kw, _ in THEORY if set(kw) == {"T", "s2"}] + [theory.c, theory.width_stable_rank]


@FAST
@given(s2=st.one_of(st.floats(0.0, LOG_FLOAT_MAX), st.floats(0.0, 5.0)), T=st.integers(2, 10**9),
       gamma=st.floats(1e-3, 1e3), f=st.sampled_from(THEORY_T_S2 + [theory.width_stable_rank_bias,
                                                                    theory.width_stable_rank_gram]))
def test_theory_is_finite_or_says_why(s2, T, gamma, f):
    """A closed form at any valid (T, s2): a finite float, perhaps with a UserWarning that the expansion
    does not hold there, or a ValueError that it overflows float64: never inf, NaN or a raw OverflowError."""
    kw = {k: v for k, v in dict(T=T, gamma=gamma, s2=s2).items() if k in inspect.signature(f).parameters}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        try:
            value = f(**kw)
        except ValueError as err:
            assert "overflows" in str(err)
            return
    assert math.isfinite(value)


@FAST
@given(s2=st.floats(0.0, 1e4), bias=st.floats(-50.0, 50.0), activation=st.sampled_from(theory.ACTIVATIONS))
def test_map_moments_are_finite(s2, bias, activation):
    bias = bias if activation == "sigmoid" else 0.0
    try:
        mean, var = theory.activation_moments(activation, s2, bias)
    except ValueError as err:
        assert "overflows" in str(err) and activation == "softmax"
        return
    assert math.isfinite(mean) and math.isfinite(var) and var >= 0


def test_theory_warns_outside_its_regime():
    with pytest.warns(UserWarning, match="c << T"):
        theory.bulk_radius(4, 5.0)
    with pytest.warns(UserWarning, match="c\\(1 \\+ 2c\\) << T"):
        assert theory.frobenius_sq_next_order(4, 2.0) <= 0  # the expansion broke down: said, not hidden
    with pytest.warns(UserWarning, match="spike"):
        theory.embedding_gram_stable_rank_excess(64, 64, 0.0)  # no shared part: s_1 is the bulk's edge
    with pytest.raises(ValueError, match="s2 must be <= 709"):
        theory.c(710.0)


@FAST
@given(depth=st.integers(40, 120), s2=st.floats(0.0, 60.0), attention=st.sampled_from(["iid", "qk"]),
       norm=st.sampled_from([None, "rms"]), value_var=st.sampled_from([1.0, 1.0 / 8]), seed=st.integers(0, 1000))
def test_deep_float32_stacks_never_crash(depth, s2, attention, norm, value_var, seed):
    """Deep float32 stacks: finite metrics, or a UserWarning naming the layer where the tokens overflowed."""
    X0 = rc.gaussian_tokens(8, 8, batch=2, seed=seed, dtype=torch.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        tr = rc.propagate(X0, depth, attention=attention, s2=s2, norm=norm, value_var=value_var, seed=seed)
    finite = all(torch.isfinite(t).all() for t in (tr.mu, tr.norm, tr.stable_rank, tr.stable_rank_gram))
    assert finite or any("overflowed" in str(w.message) for w in caught)
    if norm == "rms":
        assert finite  # unit tokens cannot overflow


def test_singular_values_survive_a_failing_eigensolver(monkeypatch):
    """An eigensolver that does not converge (float32 near underflow) gives way to rcteach.linalg's fallback
    (scipy's LAPACK), not a crash."""
    from rcteach.metrics import squared_singular_values

    X = torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(0), dtype=F64)
    expected = squared_singular_values(X)

    def no_convergence(*args, **kwargs):
        raise torch.linalg.LinAlgError("linalg.eigh: The algorithm failed to converge")

    monkeypatch.setattr(torch.linalg, "eigvalsh", no_convergence)
    torch.testing.assert_close(squared_singular_values(X), expected, rtol=1e-12, atol=1e-14)
    assert torch.isfinite(rc.propagate(X.float(), 3, seed=0).stable_rank).all()
