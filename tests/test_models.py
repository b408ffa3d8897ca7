"""Tests for rcteach.models (small configurations: 1-2 layers, small vocabularies, small T)."""

import json
import subprocess
import sys

import pytest
import torch

pytest.importorskip("transformers")

import rcteach  # noqa: E402
from rcteach import models, shipped  # noqa: E402

SMALL = dict(vocab_size=4100, num_hidden_layers=2)


@pytest.fixture(scope="module")
def tiny():
    return models.build_model("tinybert", seed=0, **SMALL)


@pytest.fixture(scope="module")
def gpt2():
    return models.build_model("gpt2", seed=0, **SMALL, bos_token_id=0, eos_token_id=0)


def test_import_rcteach_stays_light():
    code = "import sys, rcteach; print('transformers' in sys.modules, rcteach.models.MODEL_NAMES[0])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False bert-base"


def test_model_bulk_logit_variance():
    from rcteach import theory

    base = theory.logit_variance(0.02, 0.02, 768)
    assert theory.model_bulk_logit_variance(768, 384) == pytest.approx(base * (2 / 3) ** 2 * 1.5, rel=1e-14)
    assert theory.model_bulk_logit_variance(768, 384, shared_fraction=0.0, std=0.04) == pytest.approx(base * 16 * 1.5)
    with pytest.raises(ValueError, match="shared_fraction"):
        theory.model_bulk_logit_variance(768, 64, shared_fraction=1.5)
    with pytest.raises(ValueError, match="T"):
        theory.model_bulk_logit_variance(768, 1)
    with pytest.raises(ValueError, match="std"):
        theory.model_bulk_logit_variance(768, 64, std=0.0)


def test_configs_sizes_and_attention():
    for name, d, L in [("bert-base", 768, 12), ("roberta-base", 768, 12), ("tinybert", 312, 4), ("gpt2", 768, 12)]:
        cfg = models.model_config(name)
        assert cfg.hidden_size == d and cfg.num_hidden_layers == L and cfg.num_attention_heads == 12
        assert cfg._attn_implementation == models.ATTN_IMPLEMENTATION
        assert cfg.initializer_range == models.INIT_STD
    assert models.max_positions("gpt2") == 1024 and models.max_positions("roberta-base") == 512


def test_build_seeded_and_global_rng_untouched():
    state = torch.random.get_rng_state()
    a = models.build_model("tinybert", seed=3, **SMALL)
    b = models.build_model("tinybert", seed=3, **SMALL)
    c = models.build_model("tinybert", seed=4, **SMALL)
    assert torch.equal(torch.random.get_rng_state(), state)
    qa, qb, qc = (m.encoder.layer[0].attention.self.query.weight for m in (a, b, c))
    assert torch.equal(qa, qb) and not torch.equal(qa, qc)
    assert qa.dtype == torch.float64 and not a.training


def test_text_ids_shapes_and_windows():
    ids = models.text_token_ids("tinybert", 16, batch=3)
    assert ids.shape == (3, 16) and ids.dtype == torch.long
    assert torch.equal(ids[1, :8], models.text_token_ids("tinybert", 8, start=16)[0])
    bpe = models.text_token_ids("gpt2", 16)
    assert bpe.min() >= 5 and bpe.max() < 4100


def test_measure_shapes_and_exact_facts(tiny):
    T = 24
    r = models.measure(tiny, models.text_token_ids("tinybert", T, batch=2), keep=[1])
    assert r.outlier.shape == (2, 2, 12) and r.bulk_radius.shape == (2, 2, 12)
    assert r.stable_rank.shape == (3, 2) and r.mu.shape == (3, 2) and r.stable_rank_gram.shape == (3, 2)
    assert torch.allclose(r.outlier.abs(), torch.ones(2, 2, 12, dtype=torch.float64), atol=1e-10)
    A = r.attention[1]
    assert A.shape == (2, 12, T, T)
    assert torch.allclose(A.sum(-1), torch.ones(2, 12, T, dtype=A.dtype), atol=1e-12)
    assert torch.allclose(r.token_norm_sq[0], torch.full((2,), 312.0, dtype=torch.float64), rtol=1e-3)
    assert len(r.rows()) == 2 * 12 and r.ratio.shape == (2, 2, 12)


def test_own_attention_matches_builtin_eager(tiny):
    X = models.random_embeddings("tinybert", 16, seed=1)
    ref = models.build_model("tinybert", seed=0, **SMALL, attn_implementation="eager")
    with torch.no_grad():
        a = tiny(inputs_embeds=X).last_hidden_state
        b = ref(inputs_embeds=X).last_hidden_state
    assert torch.allclose(a, b, atol=1e-12)


def test_centring_switch_bert_and_gpt2(tiny, gpt2):
    X = models.random_embeddings("tinybert", 16, seed=2)
    r = models.measure(tiny, inputs_embeds=X, centred=True, keep=[0, 1])
    for A in r.attention.values():
        assert torch.allclose(A.sum(-1), torch.zeros_like(A.sum(-1)), atol=1e-12)
    plain = models.measure(tiny, inputs_embeds=X, keep=[0])
    assert torch.allclose(r.attention[0], rcteach.centre(plain.attention[0]), atol=1e-14)
    assert not models._CENTRED.get()  # switched off again
    Y = models.random_embeddings("gpt2", 12, seed=3)
    g0 = models.measure(gpt2, inputs_embeds=Y, keep=[0]).attention[0]
    g1 = models.measure(gpt2, inputs_embeds=Y, keep=[0], centred=True).attention[0]
    causal = rcteach.make_mask("causal", 12)
    assert torch.allclose(g1, rcteach.centre(g0, causal.expand(g0.shape)), atol=1e-14)
    assert torch.equal(g1.triu(1), torch.zeros_like(g1))


def test_context_manager_nests():
    with models.centred_attention():
        assert models._CENTRED.get()
        with models.centred_attention(False):
            assert not models._CENTRED.get()
        assert models._CENTRED.get()
    assert not models._CENTRED.get()


def test_errors(tiny):
    with pytest.raises(ValueError, match="unknown model name"):
        models.build_model("llama")
    with pytest.raises(TypeError, match="name"):
        models.model_config(3)
    with pytest.raises(ValueError, match="exceeds the 512 positions"):
        models.text_token_ids("bert-base", 513)
    with pytest.raises(ValueError, match="exceeds the 1024 positions"):
        models.random_embeddings("gpt2", 1025)
    with pytest.raises(ValueError, match="exceeds the 512 positions"):
        models.measure(tiny, inputs_embeds=torch.zeros(1, 513, 312, dtype=torch.float64))
    with pytest.raises(ValueError, match="exactly one"):
        models.measure(tiny)
    with pytest.raises(ValueError, match="layer indices"):
        models.measure(tiny, models.text_token_ids("tinybert", 8), keep=[5])
    with pytest.raises(TypeError, match="build_model"):
        models.measure(torch.nn.Linear(2, 2), torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="dtype"):
        models.build_model("tinybert", dtype=torch.int64)
    with pytest.raises(ValueError, match="T"):
        models.text_token_ids("gpt2", 1)
    with pytest.raises(ValueError, match="corpus has"):
        models.text_token_ids("gpt2", 512, batch=10**5)


def test_shared_fraction_is_the_mean_token(tiny):
    """rho from the tables against the LayerNorm-ed embeddings themselves: their mean token has
    |xbar|^2 / mean |x_i|^2 = rho + (1 - rho)/T (the shared part plus the bulk's mean).  The LayerNorm
    rescaling and cross terms scatter it: model seeds 0-2 with input seeds 5, 6 gave -0.8..+2.0% at
    T = 64, d = 312; 5% would still catch rho without the positions (~1/2) or with |t|^2 doubled."""
    T = 64
    rho = models.shared_fraction(tiny, T)
    assert 0.25 < rho < 0.42  # ~1/3: three tables of std 0.02; |t_c|^2 is one chi-square draw
    x = []
    hook = tiny.embeddings.register_forward_hook(lambda m, i, o: x.append(o.detach()))
    with torch.no_grad():
        tiny(inputs_embeds=models.random_embeddings("tinybert", T, batch=8, seed=5))
    hook.remove()
    X = x[0]  # (8, T, d)
    measured = (X.mean(1).square().sum(-1) / X.square().sum(-1).mean(-1)).mean().item()
    assert measured == pytest.approx(rho + (1 - rho) / T, rel=0.05)


def test_shared_fraction_uses_the_models_positions():
    net = models.build_model("roberta-base", seed=0, num_hidden_layers=1, vocab_size=1000)
    rho = models.shared_fraction(net, 16)
    weight = net.embeddings.position_embeddings.weight
    with torch.no_grad():
        weight[:2] = 0.0  # RoBERTa's positions start at 2: rows 0 and 1 are unused
        assert models.shared_fraction(net, 16) == rho
        weight[2:18] *= 2.0
        assert models.shared_fraction(net, 16) < 0.8 * rho
    with pytest.raises(ValueError, match="T = 513"):
        models.shared_fraction(net, 513)


def test_shared_fraction_errors(gpt2):
    with pytest.raises(ValueError, match="model: gpt2"):
        models.shared_fraction(gpt2, 16)
    with pytest.raises(TypeError, match="build_model"):
        models.shared_fraction(torch.nn.Linear(2, 2), 16)


@pytest.mark.parametrize("name", ["tinybert", "gpt2"])
def test_keep_tokens_drops_unused_embedding_rows_and_changes_no_number(name, tiny, gpt2):
    full = tiny if name == "tinybert" else gpt2
    extra = {} if name == "tinybert" else dict(bos_token_id=0, eos_token_id=0)
    small = models.build_model(name, seed=0, **SMALL, **extra, keep_tokens=models.TEXT_VOCABULARY)
    assert small.get_input_embeddings().num_embeddings == models.TEXT_VOCABULARY < SMALL["vocab_size"]
    ids = models.text_token_ids(name, 24, batch=2)
    a, b = models.measure(full, ids, keep=[0]), models.measure(small, ids, keep=[0])
    for field in ("stable_rank", "stable_rank_gram", "mu", "outlier"):
        assert torch.equal(getattr(a, field), getattr(b, field)), field
    assert torch.equal(a.attention[0], b.attention[0])
    with pytest.raises(ValueError, match="input_ids must lie in 0..3999"):
        models.measure(small, torch.full((1, 8), models.TEXT_VOCABULARY))
    with pytest.raises(ValueError, match="keep_tokens"):
        models.build_model(name, seed=0, **SMALL, keep_tokens=SMALL["vocab_size"] + 1)


def test_shipped_deep_stable_ranks_are_what_the_script_writes():
    """rcteach/deep_stable_ranks.json (scripts/precompute.py): the settings of the code, and its T = 32
    column of BERT-base recomputed, softmax and centred, to 1e-5 (float32 forward passes; about 4 s)."""
    data = shipped.load("deep_stable_ranks")
    assert data["settings"] == json.loads(json.dumps(models.DEEP_SETTINGS))
    stored = models.shipped_deep_stable_ranks()
    assert set(stored) == {(n, c) for n in models.DEEP_SETTINGS["names"] for c in (False, True)}
    assert all(v.shape == (13, len(models.DEEP_SETTINGS["Ts"])) for v in stored.values())
    fresh = models.deep_stable_ranks(("bert-base",), (32,))
    for centred in (False, True):
        assert torch.allclose(fresh["bert-base", centred][:, 0], stored["bert-base", centred][:, 0], rtol=1e-5, atol=0)
    assert (stored["bert-base", True][12] > stored["bert-base", False][12]).all()  # the chapter's claim holds in it


def test_deep_stable_ranks_bad_input():
    with pytest.raises(TypeError, match="names"):
        models.deep_stable_ranks("gpt2")
    with pytest.raises(TypeError, match="Ts"):
        models.deep_stable_ranks(("gpt2",), 32)
    with pytest.raises(ValueError, match="name"):
        shipped.load("no such data")


def test_shipped_gram_stable_ranks_are_what_the_script_writes():
    """rcteach/gram_stable_ranks.json (scripts/precompute.py): the settings of the code, and RoBERTa's
    T = 64 text run with centred attention recomputed, to 1e-5 (float32; about 3 s)."""
    assert shipped.load("gram_stable_ranks")["settings"] == json.loads(json.dumps(models.GRAM_SETTINGS))
    stored = models.shipped_gram_stable_ranks()
    assert set(stored) == {(n, *run) for n in models.GRAM_SETTINGS for run in models.GRAM_INPUTS}
    [fresh] = models.gram_stable_ranks("roberta-base", (64,), inputs=[("text", True)]).values()
    assert torch.allclose(fresh[:, 0], stored["roberta-base", "text", True][:, 0], rtol=1e-5, atol=0)
    with pytest.raises(ValueError, match="name"):
        models.gram_stable_ranks("gpt2")
    with pytest.raises(ValueError, match="inputs"):
        models.gram_stable_ranks("tinybert", (8,), inputs=[("noise", False)])
