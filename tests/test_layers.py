"""rcteach.layer and rcteach.LayerConfig: one layer, the building block of rcteach.propagate."""

import dataclasses

import pytest
import torch

import rcteach
from rcteach import LayerConfig, layer
from rcteach.layers import LayerWeights

F64 = torch.float64


def tokens(T=8, d=8, batch=2, seed=0):
    return rcteach.orthonormal_tokens(T, d, batch=batch, seed=seed)


@pytest.mark.parametrize("options", [
    dict(),
    dict(attention="qk", d_qk=4),
    dict(attention="qk", mask=rcteach.make_mask("causal", 8), dropout=0.2, norm="rms", skip=True, values="orthogonal"),
    dict(centred=True, beta=0.5, values="identity", skip=0.3, norm="layernorm", value_var=0.25),
])
def test_layer_is_one_step_of_propagate(options):
    X0 = tokens()
    X1 = layer(X0, LayerConfig(**options), generator=torch.Generator().manual_seed(5))
    states = rcteach.propagate(X0, 1, seed=5, keep_states=True, **options).states
    assert torch.equal(X1, states[1])


def test_layer_with_given_weights():
    X = tokens(batch=1)[0]
    W_Q, W_K, W_V = torch.randn(3, 8, 8, generator=torch.Generator().manual_seed(1), dtype=F64)
    config = LayerConfig(attention="qk", beta=0.7)
    expected = rcteach.qk_attention(X, W_Q, W_K, beta=0.7) @ X @ W_V
    assert torch.allclose(layer(X, config, weights=LayerWeights(W_Q=W_Q, W_K=W_K, W_V=W_V)), expected, atol=1e-15)


def test_config_normalises_and_is_frozen():
    config = LayerConfig(skip=True, s2=1)
    assert config.skip == 1.0 and LayerConfig(skip=False).skip is None and isinstance(config.s2, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.beta = 2.0


@pytest.mark.parametrize("options, exc, match", [
    (dict(attention="relu"), ValueError, "attention"),
    (dict(s2=-1.0), ValueError, "s2"),
    (dict(mask=torch.ones(4, 4)), TypeError, "mask"),
    (dict(dropout=1.0), ValueError, "dropout"),
    (dict(skip="yes"), TypeError, "skip"),
    (dict(values="random"), ValueError, "values"),
    (dict(d_qk=4), ValueError, "d_qk"),
    (dict(width=3), TypeError, "width"),
])
def test_config_errors(options, exc, match):
    with pytest.raises(exc, match=match):
        LayerConfig(**options)


def test_layer_errors():
    with pytest.raises(TypeError, match="config"):
        layer(tokens(), dict(attention="qk"))
    with pytest.raises(ValueError, match="mask"):
        layer(tokens(), LayerConfig(mask=rcteach.make_mask("causal", 5)))
    with pytest.raises(TypeError, match="weights"):
        layer(tokens(), LayerConfig(), weights={"W_V": None})
