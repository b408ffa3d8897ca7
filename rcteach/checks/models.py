"""Checks on real architectures at initialisation (chapter "Real transformers at initialisation").

The models come from ``transformers`` configurations (imported lazily, on the first run of one of
these checks); without the ``models`` extra they are SKIPPED.  Quick settings use the TinyBERT-sized BERT with a small
vocabulary (the inputs are random embeddings, so the vocabulary size does not matter) and few layers.
"""

from __future__ import annotations

import functools
import math

import torch

from .. import theory
from ..metrics import spectrum_distance
from .registry import Comparison, off_by, register


def _small(model):
    """A small vocabulary: random-embedding inputs never touch the word embeddings."""
    extra = dict(bos_token_id=0, eos_token_id=0) if model == "gpt2" else {}
    return dict(vocab_size=1000, **extra)


def _models():
    from .. import models

    return models


@register(
    "bert-layer1-outlier-one",
    extra="models",
    claim="In a BERT at initialisation, every layer-1 head's attention has the outlier eigenvalue exactly 1",
    source="exact",
    tolerance_note="softmax rows sum to 1 in float64; eigenvalue round-off ~T * 1e-16, 1e-10 leaves a wide margin",
    mutants={"outlier 1 - 1/T": lambda p, s: 1 / s["T"]},  # the deviation it implies
    quick=dict(model="tinybert", T=64, batch=2),
    full=dict(model="bert-base", T=256, batch=2),
    base_seeds=(0, 1000, 2000),
)
def bert_layer1_outlier_one(*, model, T, batch, seed=0, device=None) -> Comparison:
    models = _models()
    net = models.build_model(model, seed=seed, num_hidden_layers=1, **_small(model))
    r = models.measure(net, inputs_embeds=models.random_embeddings(model, T, batch=batch, seed=seed + 1))
    return Comparison(prediction=0.0, measured=(r.outlier[0] - 1).abs().max().item(), tolerance=1e-10)


@register(
    "bert-layer1-bulk-radius",
    extra="models",
    claim=("Consistency check (~20%): in layer 1 of a BERT at initialisation (std 0.02, LayerNorm-ed tokens) the "
           "largest bulk modulus is sqrt(c/T) with the effective s2 = 0.02^4 d^2 (1 - 1/3)^2 (1 + T/d)"),
    source="derived",
    tolerance_note=(
        "relative 15%, so the check resolves ~20% in the radius (~40% in s2; an s2 20% too high still passes): an "
        "exception.  The i.i.d. model's bulk edge sits 2-5% above sqrt(c/T) at T = 256..1024 and more at "
        "smaller T; over 20 seeds the quick setting measured +5.5% on average with a seed spread (sd) "
        "of 3.8% at batch 2 (about 2.7% at batch 4), bert-base at T = 256 +6.2% with sd 1.8%, roberta-base at "
        "T = 128 +5.6% with sd 1.1% (12 seeds); the (1 + gamma) and 1/3 factors are leading-order estimates.  The "
        "disc statistic of bulk-radius does not apply: with head width 26 < T the bulk is far from a uniform disc "
        "(sqrt(2 mean |lambda|^2) is 58% below the edge)"
    ),
    mutants={**off_by(0.35), "s2 doubled": lambda p, s: _radius_at(p, s["T"], 2.0),
             "the shared fraction ignored ((1 - 1/3)^2 dropped)": lambda p, s: _radius_at(p, s["T"], 9 / 4)},
    quick=dict(model="tinybert", T=128, batch=4),
    full=dict(model="bert-base", T=256, batch=4),
    base_seeds=(0, 1000, 2000),
    coarse=('the largest bulk modulus with head width 26 < T: an edge excess of ~5.5% with a seed spread of 3.8%, and '
            'leading-order (1 + gamma) and 1/3 factors'),
)
def bert_layer1_bulk_radius(*, model, T, batch, seed=0, device=None) -> Comparison:
    models = _models()
    net = models.build_model(model, seed=seed, num_hidden_layers=1, **_small(model))
    r = models.measure(net, inputs_embeds=models.random_embeddings(model, T, batch=batch, seed=seed + 1))
    s2 = theory.model_bulk_logit_variance(net.config.hidden_size, T, std=models.INIT_STD)
    return Comparison(prediction=theory.bulk_radius(T, s2), measured=r.bulk_radius[0].mean().item(),
                      tolerance=0.15, relative=True)


def _radius_at(radius, T, factor):
    """The bulk radius sqrt(c/T) with s2 multiplied by ``factor`` (s2 = log(1 + T radius^2))."""
    s2 = math.log1p(T * radius**2)
    return theory.bulk_radius(T, factor * s2)


@register(
    "centred-model-no-outlier",
    extra="models",
    claim=("Switching a BERT-type model to centred attention sends each layer-1 head's outlier 1 to 0 and "
           "keeps the rest of its spectrum exactly (for GPT-2's causal rows it does not: see the chapter)"),
    source="exact",
    tolerance_note="matched eigenvalues agree to float64 eigensolver accuracy (~1e-15 here); 1e-10 leaves margin",
    mutants={"centring keeps the outlier 1": lambda p, s: 1.0},
    quick=dict(model="tinybert", T=64),
    full=dict(model="bert-base", T=256),
    base_seeds=(0, 1000, 2000),
)
def centred_model_no_outlier(*, model, T, seed=0, device=None) -> Comparison:
    models = _models()
    net = models.build_model(model, seed=seed, num_hidden_layers=1, **_small(model))
    X = models.random_embeddings(model, T, seed=seed + 1)
    plain = models.measure(net, inputs_embeds=X, keep=[0]).eigenvalues[0][0]  # (H, T)
    cent = models.measure(net, inputs_embeds=X, keep=[0], centred=True).eigenvalues[0][0]
    zero = torch.zeros(plain.shape[0], 1, dtype=plain.dtype)
    expected = torch.cat([zero, plain[:, 1:]], dim=1)
    worst = max(spectrum_distance(cent[h], expected[h]) for h in range(plain.shape[0]))
    return Comparison(prediction=0.0, measured=worst, tolerance=1e-10)


@register(
    "gpt2-eigenvalues-diagonal",
    extra="models",
    claim="GPT-2's causal attention is lower triangular: its eigenvalues are its diagonal entries, all real",
    source="exact",
    tolerance_note="eigenvalues of a triangular matrix are read off its diagonal up to round-off ~1e-15; 1e-10 leaves "
                   "margin",
    mutants={"the eigenvalues are the row sums, all 1 (off by 1 - A_kk)": lambda p, s: 1 - 1 / s["T"]},
    quick=dict(T=32),
    full=dict(T=256),
    base_seeds=(0, 1000, 2000),
)
def gpt2_eigenvalues_diagonal(*, T, seed=0, device=None) -> Comparison:
    models = _models()
    net = models.build_model("gpt2", seed=seed, num_hidden_layers=1, **_small("gpt2"))
    r = models.measure(net, inputs_embeds=models.random_embeddings("gpt2", T, seed=seed + 1), keep=[0])
    A, ev = r.attention[0][0], r.eigenvalues[0][0]  # (H, T, T), (H, T)
    diag = torch.diagonal(A, dim1=-2, dim2=-1).to(ev.dtype)
    worst = max(spectrum_distance(ev[h], diag[h]) for h in range(A.shape[0]))
    return Comparison(prediction=0.0, measured=worst, tolerance=1e-10)


def _gram_excess(model, T, batch, seeds, seed, layer):
    """Predicted and measured Gram stable-rank excess sr_Gram - 1 of hidden state ``layer`` (0 = embeddings).

    One 1-layer model per seed seed, ..., seed + seeds - 1, each with its own shared fraction rho (from its
    tables) and ``batch`` random distinct-token inputs (measured: the mean over them).  Returns two
    (seeds,) tensors.  model-gram-embeddings and tinybert-gram-layer1 share the models (:func:`_gram_runs`).
    """
    pred, measured = _gram_runs(model, T, batch, seeds, seed)
    return pred, measured[:, layer]


@functools.lru_cache(maxsize=4)
def _gram_runs(model, T, batch, seeds, seed):
    """(prediction (seeds,), measured excess (seeds, layers + 1)) of :func:`_gram_excess`, cached."""
    models = _models()
    pred, measured = [], []
    for k in range(seeds):
        net = models.build_model(model, seed=seed + k, num_hidden_layers=1, **_small(model))
        rho = models.shared_fraction(net, T)
        pred.append(theory.embedding_gram_stable_rank_excess(T, net.config.hidden_size, rho))
        x = models.random_embeddings(model, T, batch=batch, seed=seed + k + 1)
        sr = models.measure(net, inputs_embeds=x, spectra=None).stable_rank_gram  # (layers + 1, batch)
        measured.append(sr.mean(-1) - 1)
    return torch.tensor(pred, dtype=torch.float64), torch.stack(measured).to(torch.float64)


def _growth(s):
    """The Marchenko-Pastur factor 1 + (T - 1)/d of a setting."""
    return 1 + (s["T"] - 1) / _models().model_config(s["model"]).hidden_size


# the excess of the Frobenius stable rank, sum s^2 / s_1^2 - 1 = (T - 1)(1 - rho)/(T rho + 1 - rho), is
# (T - 1) q with q^2 = excess_Gram / ((T - 1)(1 + (T - 1)/d)): rho is read back from the prediction
_GRAM_MUTANTS = {
    "rho = 1/3 nominal": lambda p, s: theory.embedding_gram_stable_rank_excess(
        s["T"], _models().model_config(s["model"]).hidden_size, 1 / 3),
    "no shared part (rho = 0)": lambda p, s: (s["T"] - 1) * _growth(s),
    "Frobenius stable rank instead of Gram": lambda p, s: (s["T"] - 1) * (p / ((s["T"] - 1) * _growth(s))).sqrt(),
    "(1 + (T - 1)/d) dropped": lambda p, s: p / _growth(s),
}


@register(
    "model-gram-embeddings",
    extra="models",
    claim=("The Gram stable rank (sum s^4 / s_1^4) of a BERT/RoBERTa's embeddings at initialisation, distinct "
           "tokens, exceeds 1 by (1 - rho)^2 (T - 1)(1 + (T - 1)/d) / (T rho + 1 - rho)^2, rho the shared "
           "(token-type) fraction computed from the model's own tables"),
    source="derived",
    tolerance_note=(
        "relative 8% per model seed (4 seeds, batch 4 each).  measured/predicted excess over 30 seeds of the quick "
        "setting (TinyBERT, T = 128): mean 0.991, sd 0.023, range 0.939-1.025; roberta-base at T = 512 (8 seeds): "
        "mean 0.999, sd 0.007; at T = 64..512 seeds 0-2 of TinyBERT stay within 0.95-1.03.  The neglected cross "
        "terms move s_1^2 by ~(1 - rho)/(rho d), 0.6% for d = 312.  rho itself varies over seeds from 0.28 to 0.37 "
        "(|t_c|^2 is one chi-square draw), which is what the 'rho = 1/3' mutant misses"
    ),
    mutants={**_GRAM_MUTANTS, **off_by(0.1)},
    quick=dict(model="tinybert", T=128, batch=4, seeds=4),
    full=dict(model="roberta-base", T=512),
    base_seeds=(0, 1000, 2000),
    coarse=("per model: measured/predicted spreads by 2.6% (sd over model seeds, not over inputs: 16 random inputs "
            "per model leave it unchanged), so a per-model comparison resolves ~8%; the closed form uses the model's "
            "shared fraction rho, not its other table statistics"),
)
def model_gram_embeddings(*, model, T, batch, seeds, seed=0, device=None) -> Comparison:
    pred, measured = _gram_excess(model, T, batch, seeds, seed, layer=0)
    return Comparison(prediction=pred, measured=measured, tolerance=0.08, relative=True)


@register(
    "tinybert-gram-layer1",
    extra="models",
    claim=("Layer 1 of a TinyBERT-sized BERT at initialisation keeps its embeddings' Gram stable rank: the "
           "excess sr_Gram - 1 of its output is the embeddings' closed form (model-gram-embeddings)"),
    source="derived",
    tolerance_note=(
        "relative 15% per model seed (4 seeds, batch 4 each).  measured/predicted excess after layer 1 over 30 "
        "seeds of the quick setting (T = 128): mean 0.968, sd 0.044, range 0.877-1.073 (the attention and value "
        "weights of each seed add scatter and a ~3% loss to the embeddings' sd of 0.023).  RoBERTa's layer 1 "
        "is not claimed: it loses 4-21% of the excess (roberta-base, 8 seeds: 0.79-0.91 at T = 128, 0.83-0.96 at "
        "T = 512)"
    ),
    mutants={**{k: v for k, v in _GRAM_MUTANTS.items() if k != "rho = 1/3 nominal"}, **off_by(0.2)},
    quick=dict(model="tinybert", T=128, batch=4, seeds=4),
    full=dict(T=512, seeds=8),
    base_seeds=(0, 1000, 2000),
    coarse=("per model: measured/predicted spreads by 5% (sd over model seeds; the attention and value weights add "
            "scatter to the embeddings' 2.6%) with a ~3% loss in layer 1, so a per-model comparison resolves ~15% and "
            "cannot reject rho = 1/3 nominal on every seed"),
)
def tinybert_gram_layer1(*, model, T, batch, seeds, seed=0, device=None) -> Comparison:
    pred, measured = _gram_excess(model, T, batch, seeds, seed, layer=1)
    return Comparison(prediction=pred, measured=measured, tolerance=0.15, relative=True)


@register(
    "roberta-fix-keeps-gram",
    extra="models",
    claim=("RoBERTa at initialisation (rebuttal Figs. V and VI): with centred attention (the fix) the hidden states "
           "keep the Gram stable-rank excess of their embeddings, (1 - rho)^2 (T - 1)(1 + (T - 1)/d)/(T rho + 1 - "
           "rho)^2, at layer 1 and at the last layer; without it the excess falls layer after layer (the fix changes "
           "width a little and depth a lot)"),
    source="derived",
    tolerance_note=(
        "relative 8% at layer 1 and 25% at the last layer, so the check resolves ~8-13%, not 5%: an exception.  The "
        "fix removes the attention's consensus spike, but the MLPs and the value/output projections (not modelled) "
        "still move the bulk, more with every layer: measured/predicted with the fix 0.96-0.99 at layer 1 and "
        "0.78-1.05 at layer 4 (model seeds 0, 100, 200; 0.93-1.10 over the 12 layers of roberta-base at seed 0), "
        "against 0.76-0.83 (layer 1), 0.39 (layer 4) and 0.13 (layer 12) without it"
    ),
    mutants={"the fix falls like the uncentred network (x0.8 a layer)":
             lambda p, s: p * torch.tensor([0.8, 0.8 ** s["layers"]]),
             "15% high": lambda p, s: p * 1.15, "15% low": lambda p, s: p * 0.85},
    coarse=("the MLPs and value/output projections, not modelled, move the bulk: measured/predicted 0.96-0.99 at "
            "layer 1 and 0.78-1.05 at the last layer, so the check resolves 11% (worst of base seeds 0, 100, 200)"),
    quick=dict(T=64, layers=4, batch=2),
    full=dict(T=128, layers=12, batch=2),
    base_seeds=(0, 100, 200),
)
def roberta_fix_keeps_gram(*, T, layers, batch, seed=0, device=None) -> Comparison:
    models = _models()
    net = models.build_model("roberta-base", seed=seed, num_hidden_layers=layers, vocab_size=1000)
    prediction = theory.embedding_gram_stable_rank_excess(T, net.config.hidden_size, models.shared_fraction(net, T))
    x = models.random_embeddings("roberta-base", T, batch=batch, seed=seed + 1)
    excess = models.measure(net, inputs_embeds=x, centred=True, spectra=None).stable_rank_gram.mean(1) - 1
    return Comparison(prediction=torch.full((2,), prediction, dtype=torch.float64), measured=excess[[1, layers]],
                      tolerance=torch.tensor([0.08, 0.25], dtype=torch.float64), relative=True)
