"""Old public names keep working for one release, each with a DeprecationWarning naming the new one."""

import pytest
import torch

import rcteach
from rcteach import _deprecation
from rcteach.attention import qk_attention
from rcteach.width import width_stable_ranks


def test_renamed_keywords_helper():
    @_deprecation.renamed_keywords(old="new")
    def f(*, new=0):
        return new

    with pytest.deprecated_call(match=r"f\(old=...\) is deprecated; use f\(new=...\)"):
        assert f(old=3) == 3
    with pytest.raises(TypeError, match="both old="):
        f(old=1, new=2)
    assert f(new=4) == 4


def test_attention_function_name():
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(5, 4, generator=gen, dtype=torch.float64)
    W_Q, W_K = torch.randn(2, 4, 3, generator=gen, dtype=torch.float64)
    with pytest.deprecated_call(match="rcteach.qk_attention"):
        old = rcteach.attention(X, W_Q, W_K, beta=0.5)
    assert torch.equal(old, qk_attention(X, W_Q, W_K, beta=0.5))
    assert rcteach.attention.qk_attention is rcteach.qk_attention  # still the module
    with pytest.deprecated_call(match="qk_attention"):
        from rcteach.attention import attention
    assert attention is qk_attention


def test_width_logits_keyword():
    new = width_stable_ranks(8, 0.5, seeds=2, attention="qk", d_qk=4, seed=0)
    with pytest.deprecated_call(match="attention="):
        old = width_stable_ranks(8, 0.5, seeds=2, logits="qk", d_qk=4, seed=0)
    assert torch.equal(old, new)
    with pytest.deprecated_call(match="ATTENTIONS"):
        from rcteach.width import LOGIT_MODELS
    assert LOGIT_MODELS == ("iid", "qk")


def test_layernorm_runs_keyword():
    from rcteach.wu_table import layernorm_runs

    kw = dict(T=8, d=8, depth=2, masks=("causal",), seed=0)
    with pytest.deprecated_call(match="seeds="):
        old = layernorm_runs(runs=2, **kw)
    assert torch.equal(old["causal"].mu, layernorm_runs(seeds=2, **kw)["causal"].mu)


def test_activation_names_have_one_home():
    from rcteach import attention, theory

    assert rcteach.ACTIVATIONS is theory.ACTIVATIONS is attention.ACTIVATIONS
    assert rcteach.LN2 is theory.LN2
    with pytest.deprecated_call(match="rcteach.theory.ACTIVATIONS"):
        assert theory.MAP_ACTIVATIONS is theory.ACTIVATIONS


def test_normalise_moved_to_norms():
    from rcteach import depth, norms

    with pytest.deprecated_call(match="rcteach.norms.normalise"):
        assert depth.normalise is norms.normalise
    with pytest.deprecated_call(match="rcteach.norms.NORMS"):
        assert depth.NORMS is norms.NORMS


def test_consensus_rate_moved_to_masks():
    from rcteach import theory

    mask = rcteach.make_mask("causal", 6)
    with pytest.deprecated_call(match="rcteach.masks.consensus_rate"):
        assert theory.consensus_rate(mask) == rcteach.consensus_rate(mask) == 0.5


def test_chapter_helpers_moved_out_of_the_checks():
    from rcteach import attention, tokens, width
    from rcteach.checks import figures

    with pytest.deprecated_call(match="rcteach.tokens.near_consensus"):
        assert figures.near_consensus is tokens.near_consensus
    with pytest.deprecated_call(match="rcteach.attention.noniso_attention"):
        from rcteach.checks.figures import noniso_attention
    assert noniso_attention is attention.noniso_attention
    with pytest.deprecated_call(match="rcteach.width.noniso_width_ranks"):
        from rcteach.checks.figures import noniso_width_ranks
    assert noniso_width_ranks is width.noniso_width_ranks


@pytest.mark.parametrize("old, new", [("rcteach.grading", "rcteach.tools.grading"),
                                      ("rcteach.layernorm", "rcteach.wu_table")])
def test_moved_modules_import_as_the_new_module_with_a_warning(old, new):
    import importlib
    import sys

    sys.modules.pop(old, None)
    with pytest.deprecated_call(match=f"{old} is deprecated; use {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
