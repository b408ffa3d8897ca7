"""Real transformer architectures at initialisation (Hugging Face ``transformers``).

Introduced in chapter "Real transformers at initialisation" (book/12_real_transformers.md).

Builds BERT-base, RoBERTa-base, a TinyBERT-sized BERT (d = 312, 4 layers, 12 heads) and GPT-2
small from their configurations at random initialisation -- no weights, tokenizers or anything
else is downloaded -- and measures, in one forward pass with forward hooks, per layer and head
the spectrum of the attention probabilities and per layer the stable ranks and mu of the hidden
states.  A context manager, :func:`centred_attention`, makes every self-attention use its centred
probabilities A - U (U uniform over each row's allowed positions: the whole row for BERT, the
prefix for GPT-2's causal rows), which is exactly ``rcteach.centre(A, mask)``.

Conventions: tokens are rows, hidden states X (batch, T, d); attention probabilities
(batch, heads, T, T) act from the left.  Layers are counted from 1 in prose and indexed from 0 in
tensors: ``outlier[l]`` is layer l + 1; ``hidden`` index 0 is the input of layer 1 (the
embeddings, after BERT's embedding LayerNorm), index l the output of layer l.

Attention runs through our own attention function, registered with ``transformers``'
``AttentionInterface`` under the name ``"rcteach_eager"``: it is the eager computation
(softmax(q k^T * scaling + mask) v), returns the probabilities, and centres them inside
:func:`centred_attention`.  ``transformers`` is imported only when this module is used.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
from dataclasses import dataclass
from importlib import resources

import torch

from . import _extras, _validate, shipped
from .attention import centre
from .metrics import mu, spectrum, stable_rank

__all__ = [
    "MODEL_NAMES",
    "INIT_STD",
    "TEXT_VOCABULARY",
    "ATTN_IMPLEMENTATION",
    "model_config",
    "build_model",
    "max_positions",
    "corpus_text",
    "text_token_ids",
    "random_embeddings",
    "shared_fraction",
    "centred_attention",
    "ModelMeasurement",
    "measure",
    "DEEP_SETTINGS",
    "deep_stable_ranks",
    "deep_stable_rank_data",
    "shipped_deep_stable_ranks",
    "GRAM_SETTINGS",
    "GRAM_INPUTS",
    "gram_stable_ranks",
    "gram_stable_rank_data",
    "shipped_gram_stable_ranks",
]

MODEL_NAMES = ("bert-base", "roberta-base", "tinybert", "gpt2")
INIT_STD = 0.02  # initializer_range of all four configurations
TEXT_VOCABULARY = 4000  # the vocabulary of the text tokenizers: text_token_ids < TEXT_VOCABULARY
ATTN_IMPLEMENTATION = "rcteach_eager"
_TOKENIZER_KIND = {"bert-base": "wordpiece", "tinybert": "wordpiece", "roberta-base": "bpe", "gpt2": "bpe"}
_POSITION_OFFSET = {"roberta-base": 2}  # RoBERTa's positions start after its padding index 1
_CENTRED = contextvars.ContextVar("rcteach_centred_attention", default=False)


def _check_name(name) -> str:
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, one of {MODEL_NAMES}, got {type(name).__name__}")
    key = name.lower()
    if key not in MODEL_NAMES:
        raise ValueError(f"unknown model name {name!r}: choose one of {MODEL_NAMES}")
    return key


# -- the attention function -------------------------------------------------------------------

def _rcteach_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention (query, key, value: (batch, heads, T, d_head)); centred inside centred_attention()."""
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling  # (batch, heads, T, T)
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    if _CENTRED.get():
        T = probs.shape[-1]
        if attention_mask is None:
            allowed = torch.ones(T, T, dtype=torch.bool, device=probs.device)
        else:  # eager masks: 0 where allowed, the dtype's minimum where not
            allowed = (attention_mask > torch.finfo(attention_mask.dtype).min / 2).expand(probs.shape)
        probs = centre(probs, allowed)
    probs = torch.nn.functional.dropout(probs, p=dropout, training=module.training)
    out = torch.matmul(probs, value).transpose(1, 2).contiguous()  # (batch, T, heads, d_head)
    return out, probs


@functools.lru_cache(maxsize=None)
def _transformers():
    """Import transformers (lazily) and register the attention function and its mask once.

    Without the ``models`` extra, a ModuleNotFoundError that gives the install line."""
    if (reason := _extras.missing("models")) is not None:
        raise ModuleNotFoundError(f"rcteach.models {reason}", name="transformers")
    import transformers
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    transformers.AttentionInterface.register(ATTN_IMPLEMENTATION, _rcteach_attention)
    AttentionMaskInterface.register(ATTN_IMPLEMENTATION, eager_mask)
    return transformers


@contextlib.contextmanager
def centred_attention(enabled: bool = True):
    """Inside this block every self-attention of models from :func:`build_model` uses A - U.

    U is the uniform attention over each row's allowed positions (``rcteach.centre(A, mask)``):
    the outlier eigenvalue 1 goes to 0 and the rest of the spectrum is kept.  Nesting is allowed;
    ``enabled=False`` switches centring off inside an enclosing block.
    """
    token = _CENTRED.set(_validate.flag("enabled", enabled))
    try:
        yield
    finally:
        _CENTRED.reset(token)


# -- configurations and models ----------------------------------------------------------------

def model_config(name, **overrides):
    """The ``transformers`` configuration of a named model, with our attention function.

    ``name``: ``"bert-base"`` (d = 768, 12 layers, 12 heads), ``"roberta-base"`` (same sizes,
    514 positions), ``"tinybert"`` (BERT with d = 312, 4 layers, 12 heads, d_ff = 1200) or
    ``"gpt2"`` (small: d = 768, 12 layers, 12 heads, 1024 positions, causal).  ``overrides``
    are passed to the configuration (e.g. ``num_hidden_layers=2``).  Dropout is irrelevant: the
    models are put in eval mode.
    """
    key = _check_name(name)
    tf = _transformers()
    common = dict(attn_implementation=ATTN_IMPLEMENTATION)
    if key == "bert-base":
        cfg = tf.BertConfig(**common, **overrides)
    elif key == "tinybert":
        cfg = tf.BertConfig(**{**dict(hidden_size=312, num_hidden_layers=4, num_attention_heads=12,
                                      intermediate_size=1200), **common, **overrides})
    elif key == "roberta-base":
        cfg = tf.RobertaConfig(**{**dict(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1,
                                         pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                         layer_norm_eps=1e-5), **common, **overrides})
    else:
        cfg = tf.GPT2Config(**common, **overrides)
    return cfg


def max_positions(name) -> int:
    """The largest T a named model accepts (RoBERTa: 514 positions minus its offset of 2)."""
    key = _check_name(name)
    return {"bert-base": 512, "tinybert": 512, "roberta-base": 512, "gpt2": 1024}[key]


def build_model(name, *, seed=0, dtype=torch.float64, keep_tokens=None, **overrides):
    """A named model at random initialisation, in eval mode, reproducible from ``seed``.

    The weights are drawn by ``transformers``' own initialisation (normal with std 0.02, biases
    0, LayerNorm weight 1 and bias 0) under ``torch.manual_seed(seed)`` inside a
    ``torch.random.fork_rng`` block, so the global random state is left untouched.  Returns the
    base model (``BertModel``, ``RobertaModel`` or ``GPT2Model``) in ``dtype`` (float64 default).
    Eval mode matters: a module built from a config starts in training mode, where attention
    dropout zeroes whole rows under sparse masks and keeps causal tokens apart (chapter "LayerNorm").

    ``keep_tokens``: keep only the first ``keep_tokens`` rows of the word-embedding table (the ids
    below it, e.g. :data:`TEXT_VOCABULARY` for :func:`text_token_ids`; random embeddings use none).
    The rows are dropped after the initialisation, so every weight kept is the full model's, and a
    12-layer model in float64 needs about 0.7 GB instead of 0.9-1.0 GB (its table of 30522 or 50257
    rows is a fifth to a third of it).
    """
    key = _check_name(name)
    seed = _validate.seed(seed)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    cfg = model_config(key, **overrides)
    if keep_tokens is not None:
        keep_tokens = _validate.integer("keep_tokens", keep_tokens, minimum=1)
        if keep_tokens > cfg.vocab_size:
            raise ValueError(f"keep_tokens = {keep_tokens} exceeds the vocabulary of {cfg.vocab_size} tokens")
    tf = _transformers()
    cls = {"bert-base": tf.BertModel, "tinybert": tf.BertModel, "roberta-base": tf.RobertaModel,
           "gpt2": tf.GPT2Model}[key]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        kwargs = {"add_pooling_layer": False} if key != "gpt2" else {}
        model = cls(cfg, **kwargs)
    if keep_tokens is not None:  # before the float64 copy: the full table never exists in float64
        table = model.get_input_embeddings()
        pad = table.padding_idx if table.padding_idx is not None and table.padding_idx < keep_tokens else None
        model.set_input_embeddings(torch.nn.Embedding.from_pretrained(table.weight.detach()[:keep_tokens].clone(),
                                                                      freeze=False, padding_idx=pad))
        model.config.vocab_size = keep_tokens
    model = model.to(dtype).eval()
    model.rcteach_name = key
    return model


# -- inputs --------------------------------------------------------------------------------------

def corpus_text() -> str:
    """The fixed text of the text inputs, shipped with the package (``rcteach/corpus.txt``, 190 kB).

    It is the prose of the book's chapters as of rcteach 0.1.0, frozen (front matter, code cells and
    admonition fences left out): the same text, hence the same token ids, in a checkout and in any
    installation, whatever the chapters say later.
    """
    return resources.files(__package__).joinpath("corpus.txt").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=None)
def _tokenizer(kind: str):
    """A WordPiece or byte-level BPE tokenizer trained on :func:`corpus_text` (kept in memory)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    if kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(vocab_size=TEXT_VOCABULARY, special_tokens=specials, show_progress=False)
    else:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=TEXT_VOCABULARY, special_tokens=specials, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    text = corpus_text()
    tok.train_from_iterator([line for line in text.splitlines() if line.strip()], trainer=trainer)
    ids = torch.tensor(tok.encode(text).ids, dtype=torch.long)
    return tok, ids[ids >= len(specials)]  # the token stream, special tokens (incl. [UNK]) dropped


def text_token_ids(name, T, *, batch=1, start=0, stride=None):
    """Windows of T consecutive tokens of the fixed text :func:`corpus_text`, tokenized for model ``name``.

    BERT-type models use a WordPiece tokenizer, RoBERTa and GPT-2 a byte-level BPE tokenizer,
    both trained here on :func:`corpus_text` (vocabulary :data:`TEXT_VOCABULARY` = 4000; ids < every model's
    vocabulary).
    Window b starts at token ``start + b * stride`` (``stride`` default T) of the stream.

    Returns
    -------
    LongTensor, shape (batch, T)
    """
    key = _check_name(name)
    T = _validate.integer("T", T, minimum=2)
    if T > max_positions(key):
        raise ValueError(f"T = {T} exceeds the {max_positions(key)} positions of {key!r}")
    batch = _validate.integer("batch", batch, minimum=1)
    start = _validate.integer("start", start, minimum=0)
    stride = T if stride is None else _validate.integer("stride", stride, minimum=1)
    _, stream = _tokenizer(_TOKENIZER_KIND[key])
    need = start + (batch - 1) * stride + T
    if need > stream.numel():
        raise ValueError(f"the corpus has {stream.numel()} tokens; batch={batch}, T={T}, start={start}, "
                         f"stride={stride} need {need}")
    idx = start + stride * torch.arange(batch)[:, None] + torch.arange(T)[None, :]
    return stream[idx]


def random_embeddings(name, T, *, batch=1, std=INIT_STD, seed=0, dtype=torch.float64):
    """Random input embeddings (batch, T, d): i.i.d. N(0, std^2), as if all T tokens were distinct.

    Passed as ``inputs_embeds``, they replace the word embeddings (the model still adds its
    position and token-type embeddings).  Distinct random rows are nearly orthogonal (T <= d).
    """
    key = _check_name(name)
    T = _validate.integer("T", T, minimum=2)
    if T > max_positions(key):
        raise ValueError(f"T = {T} exceeds the {max_positions(key)} positions of {key!r}")
    batch = _validate.integer("batch", batch, minimum=1)
    std = _validate.real("std", std, positive=True)
    seed = _validate.seed(seed)
    d = 312 if key == "tinybert" else 768
    g = torch.Generator().manual_seed(seed)
    return std * torch.randn(batch, T, d, generator=g, dtype=dtype)


def _positions(key: str, T: int) -> torch.Tensor:
    """The position ids of T tokens: 0..T-1, for RoBERTa 2..T+1 (what the models use by default)."""
    offset = _POSITION_OFFSET.get(key, 0)
    return torch.arange(offset, offset + T)


def shared_fraction(model, T, *, std=INIT_STD) -> float:
    """rho, the fraction of a LayerNorm-ed token's squared norm shared by all T tokens, from ``model``'s tables.

    BERT and RoBERTa add to each word embedding w_i a position embedding p_i and the token-type
    embedding t (type 0, the same for every token); LayerNorm centres over the features (subscript
    c) and rescales.  With i.i.d. N(0, ``std``^2) word embeddings (distinct tokens,
    :func:`random_embeddings`), E|w_c|^2 = (d - 1) std^2 and

        rho = |t_c|^2 / (|t_c|^2 + (d - 1) std^2 + mean_i |p_i,c|^2),

    the mean over the T positions the model uses (:func:`measure`'s; RoBERTa's start at 2).  At
    initialisation all three tables have std 0.02, so rho ~ 1/3, but |t_c|^2 is one chi-square draw
    (relative sd sqrt(2/d)): rho varies with the seed.  Used by
    :func:`rcteach.theory.embedding_gram_stable_rank_excess`.  GPT-2 has no token-type embedding
    (and no LayerNorm before its first layer): a ValueError.
    """
    key = getattr(model, "rcteach_name", None)
    if key is None:
        raise TypeError("model must come from rcteach.models.build_model")
    if key == "gpt2":
        raise ValueError("model: gpt2 has no token-type embedding shared by all tokens (and no embedding LayerNorm)")
    T = _validate.integer("T", T, minimum=2)
    if T > max_positions(key):
        raise ValueError(f"T = {T} exceeds the {max_positions(key)} positions of {key!r}")
    std = _validate.real("std", std, positive=True)
    emb = model.embeddings
    with torch.no_grad():
        rows = torch.cat([emb.token_type_embeddings.weight[:1],
                          emb.position_embeddings.weight[_positions(key, T)]]).to(torch.float64)  # (1 + T, d)
    sq = (rows - rows.mean(-1, keepdim=True)).square().sum(-1)  # |t_c|^2, then |p_i,c|^2
    shared, d = sq[0].item(), rows.shape[1]
    return shared / (shared + (d - 1) * std**2 + sq[1:].mean().item())


# -- measurement ---------------------------------------------------------------------------------

@dataclass
class ModelMeasurement:
    """What :func:`measure` returns (L layers, H heads, B inputs; layer l + 1 at index l).

    outlier : complex (L, B, H)     eigenvalue of largest modulus of each head's attention
    bulk_radius : real (L, B, H)    largest modulus of the other eigenvalues
    stable_rank : (L + 1, B)        Frobenius stable rank sum s^2 / s_1^2 of the hidden states
    stable_rank_gram : (L + 1, B)   Gram stable rank sum s^4 / s_1^4 of the hidden states
    mu : (L + 1, B)                 distance to consensus ||P X||_F of the hidden states
    token_norm_sq : (L + 1, B)      mean squared token norm ||x_i||^2 of the hidden states
    attention : {l: (B, H, T, T)}   the probabilities of the layers asked for in ``keep``
    eigenvalues : {l: (B, H, T)}    their spectra, complex, by decreasing modulus
    """

    name: str
    T: int
    centred: bool
    outlier: torch.Tensor
    bulk_radius: torch.Tensor
    stable_rank: torch.Tensor
    stable_rank_gram: torch.Tensor
    mu: torch.Tensor
    token_norm_sq: torch.Tensor
    attention: dict
    eigenvalues: dict

    @property
    def ratio(self) -> torch.Tensor:
        """|outlier| / bulk radius per layer, input and head, (L, B, H)."""
        return self.outlier.abs() / self.bulk_radius

    def rows(self) -> list[dict]:
        """One dict per layer (1-based) and head, averaged over the inputs: a tidy table."""
        out = []
        for l in range(self.outlier.shape[0]):
            for h in range(self.outlier.shape[2]):
                out.append(dict(model=self.name, T=self.T, centred=self.centred, layer=l + 1, head=h,
                                outlier=self.outlier[l, :, h].abs().mean().item(),
                                bulk_radius=self.bulk_radius[l, :, h].mean().item(),
                                stable_rank=self.stable_rank[l + 1].mean().item(),
                                mu=self.mu[l + 1].mean().item()))
        return out


def _layers(model):
    if hasattr(model, "encoder"):
        return list(model.encoder.layer), model.embeddings, [m.attention.self for m in model.encoder.layer]
    return list(model.h), model.drop, [m.attn for m in model.h]


def measure(model, input_ids=None, *, inputs_embeds=None, centred=False, spectra="all", keep=()):
    """One forward pass of ``model`` (from :func:`build_model`) with hooks; see :class:`ModelMeasurement`.

    Parameters
    ----------
    input_ids : LongTensor (B, T), or ``inputs_embeds`` : Tensor (B, T, d) -- exactly one.
    centred : bool
        Run under :func:`centred_attention` (every self-attention uses A - U).
    spectra : "all", None or iterable of 0-based layer indices
        Layers whose attention eigenvalues are computed (O(T^3) per head; the others get NaN).
    keep : iterable of 0-based layer indices
        Layers whose attention probabilities and full spectra are returned.
    """
    centred = _validate.flag("centred", centred)
    key = getattr(model, "rcteach_name", None)
    if key is None:
        raise TypeError("model must come from rcteach.models.build_model")
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("pass exactly one of input_ids and inputs_embeds")
    x = input_ids if input_ids is not None else inputs_embeds
    if not isinstance(x, torch.Tensor) or x.dim() != (2 if input_ids is not None else 3):
        raise ValueError("input_ids must be a (B, T) tensor, inputs_embeds a (B, T, d) tensor")
    T = x.shape[1]
    if T > max_positions(key):
        raise ValueError(f"T = {T} exceeds the {max_positions(key)} positions of {key!r}")
    if T < 2:
        raise ValueError(f"T must be >= 2, got {T}")
    vocabulary = model.get_input_embeddings().num_embeddings
    if input_ids is not None and (input_ids.min() < 0 or input_ids.max() >= vocabulary):
        raise ValueError(f"input_ids must lie in 0..{vocabulary - 1}, the model's word-embedding rows "
                         f"(build_model(keep_tokens=...) keeps only the first rows), got "
                         f"{input_ids.min()}..{input_ids.max()}")
    layers, embed, attns = _layers(model)
    L = len(layers)
    spectra = range(L) if spectra == "all" else (() if spectra is None else spectra)
    spectra, keep = set(int(l) for l in spectra), set(int(l) for l in keep)
    if not all(0 <= l < L for l in spectra | keep):
        raise ValueError(f"layer indices in spectra/keep must lie in 0..{L - 1}")
    hidden, probs = [None] * (L + 1), [None] * L

    def first(out):
        return out[0] if isinstance(out, (tuple, list)) else out

    handles = [embed.register_forward_hook(lambda m, i, o: hidden.__setitem__(0, first(o).detach()))]
    for l, (layer, attn) in enumerate(zip(layers, attns)):
        handles.append(layer.register_forward_hook(lambda m, i, o, l=l: hidden.__setitem__(l + 1, first(o).detach())))
        if l in spectra | keep:  # only the probabilities asked for are kept (B H T^2 numbers per layer)
            handles.append(attn.register_forward_hook(lambda m, i, o, l=l: probs.__setitem__(l, o[1].detach())))
    kwargs = {}
    if key == "roberta-base" and input_ids is not None:  # explicit positions: our ids may equal RoBERTa's pad id
        kwargs["position_ids"] = _positions(key, T).expand_as(input_ids)
    try:
        with torch.no_grad(), centred_attention(centred):
            if input_ids is not None:
                model(input_ids=input_ids, **kwargs)
            else:
                model(inputs_embeds=inputs_embeds.to(next(model.parameters()).dtype))
    finally:
        for h in handles:
            h.remove()
    B, H = x.shape[0], model.config.num_attention_heads
    outlier = torch.full((L, B, H), complex("nan"), dtype=torch.complex128)
    radius = torch.full((L, B, H), math.nan, dtype=torch.float64)
    eigenvalues = {}

    for l in sorted(spectra | keep):
        ev = spectrum(probs[l].to(torch.float64))
        outlier[l], radius[l] = ev[..., 0].to(torch.complex128), ev[..., 1].abs()
        if l in keep:
            eigenvalues[l] = ev
    Hs = torch.stack([h.to(torch.float64) for h in hidden])  # (L + 1, B, T, d)
    return ModelMeasurement(
        name=key, T=T, centred=bool(centred), outlier=outlier, bulk_radius=radius,
        stable_rank=stable_rank(Hs), stable_rank_gram=stable_rank(Hs, gram=True), mu=mu(Hs),
        token_norm_sq=Hs.square().sum(-1).mean(-1),
        attention={l: probs[l] for l in sorted(keep)}, eigenvalues=eigenvalues,
    )


# -- the twelve-layer stable ranks of chapter "Real transformers" ---------------------------------

#: The settings of :func:`deep_stable_ranks` shipped in ``rcteach/deep_stable_ranks.json``.
DEEP_SETTINGS = dict(names=("bert-base", "gpt2"), Ts=(32, 64, 128), seed=0)


def deep_stable_ranks(names=DEEP_SETTINGS["names"], Ts=DEEP_SETTINGS["Ts"], *, seed=0) -> dict:
    """Frobenius stable rank of every hidden state of the full models ``names`` on the book's text.

    Each model is built at ``seed`` in float32 (``keep_tokens=TEXT_VOCABULARY``), one at a time,
    and measured on ``text_token_ids(name, T)`` for each T, with softmax and with centred attention.
    Returns {(name, centred): float64 tensor (L + 1, len(Ts))}, index 0 the embeddings.  About
    12 s of CPU pinned for the defaults (two twelve-layer models, 12 forward passes): the chapter
    reads :func:`shipped_deep_stable_ranks`.
    """
    if isinstance(names, str) or not isinstance(names, (tuple, list)):
        raise TypeError(f"names must be a tuple of model names, got {type(names).__name__}")
    Ts = tuple(_validate.values("Ts", Ts, _validate.integer))
    out = {}
    for name in names:
        net = build_model(name, seed=seed, keep_tokens=TEXT_VOCABULARY, dtype=torch.float32)
        for centred in (False, True):
            out[name, centred] = torch.stack([measure(net, text_token_ids(name, T), centred=centred,
                                                      spectra=None).stable_rank[:, 0] for T in Ts], 1)
        del net  # one twelve-layer model in memory at a time
    return out


def deep_stable_rank_data() -> dict:
    """What ``rcteach/deep_stable_ranks.json`` holds (:mod:`rcteach.shipped`): the settings and
    :func:`deep_stable_ranks` at them, as {name: {"softmax" | "centred": (L + 1) x len(Ts) lists}}."""
    ranks = deep_stable_ranks(**DEEP_SETTINGS)
    return {"settings": DEEP_SETTINGS,
            "stable_rank": {name: {("centred" if c else "softmax"): v.tolist() for (n, c), v in ranks.items()
                                   if n == name} for name in DEEP_SETTINGS["names"]}}


def shipped_deep_stable_ranks() -> dict:
    """The shipped :func:`deep_stable_ranks` at :data:`DEEP_SETTINGS`, in its format
    ({(name, centred): tensor (L + 1, len(Ts))}; ``scripts/precompute.py`` writes it, tests/test_models.py
    recomputes a column and compares)."""
    data = shipped.load("deep_stable_ranks")["stable_rank"]
    return {(name, centred): torch.tensor(data[name]["centred" if centred else "softmax"], dtype=torch.float64)
            for name in data for centred in (False, True)}


# -- the Gram stable ranks of chapter "Real transformers" ------------------------------------------

#: The runs of :func:`gram_stable_ranks` shipped in ``rcteach/gram_stable_ranks.json``: the models
#: (built at seed 0, ``keep_tokens=TEXT_VOCABULARY``, in ``dtype``), their T and random-input batch.
GRAM_SETTINGS = {"tinybert": dict(Ts=(64, 128, 256, 512), batch=4, dtype="float64"),
                 "roberta-base": dict(Ts=(64, 128), batch=1, dtype="float32")}
#: The inputs of :func:`gram_stable_ranks`: (input, centred).
GRAM_INPUTS = (("random", False), ("text", False), ("text", True))


def gram_stable_ranks(name, Ts=None, *, inputs=GRAM_INPUTS) -> dict:
    """Gram stable rank (sum s^4 / s_1^4) of every hidden state of model ``name`` at initialisation.

    The model as :data:`GRAM_SETTINGS` builds it; for each T (default: the settings' Ts) and each
    (input, centred) of ``inputs``: ``random_embeddings(name, T, batch=batch, seed=1)`` (distinct
    random tokens) or ``text_token_ids(name, T)`` (the book's text), softmax or centred attention.
    Returns {(input, centred): float64 tensor (L + 1, len(Ts))}, the mean over the batch, index 0
    the embeddings.  About 9 s of CPU pinned for both models at the settings (18 forward passes):
    the chapter reads :func:`shipped_gram_stable_ranks`.
    """
    key = _check_name(name)
    if key not in GRAM_SETTINGS:
        raise ValueError(f"name must be one of {tuple(GRAM_SETTINGS)}, got {name!r}")
    setting = GRAM_SETTINGS[key]
    Ts = tuple(_validate.values("Ts", setting["Ts"] if Ts is None else Ts, _validate.integer))
    for inp, centred in inputs:
        _validate.choice("inputs", inp, ("random", "text"))
    net = build_model(key, seed=0, keep_tokens=TEXT_VOCABULARY, dtype=getattr(torch, setting["dtype"]))
    out = {}
    for inp, centred in inputs:
        vals = []
        for T in Ts:
            x = (dict(input_ids=text_token_ids(key, T)) if inp == "text" else
                 dict(inputs_embeds=random_embeddings(key, T, batch=setting["batch"], seed=1)))
            vals.append(measure(net, **x, centred=centred, spectra=None).stable_rank_gram.mean(1))
        out[inp, centred] = torch.stack(vals, 1)
    return out


def _run_label(inp, centred) -> str:
    return f"{inp}, centred" if centred else inp


def gram_stable_rank_data() -> dict:
    """What ``rcteach/gram_stable_ranks.json`` holds (:mod:`rcteach.shipped`): the settings and
    :func:`gram_stable_ranks` of each model, as {name: {"random" | "text" | "text, centred": lists}}."""
    return {"settings": GRAM_SETTINGS,
            "gram_stable_rank": {name: {_run_label(*k): v.tolist() for k, v in gram_stable_ranks(name).items()}
                                 for name in GRAM_SETTINGS}}


def shipped_gram_stable_ranks() -> dict:
    """The shipped :func:`gram_stable_ranks` of both models at :data:`GRAM_SETTINGS`:
    {(name, input, centred): tensor (L + 1, len(Ts))} (tests/test_models.py recomputes one and compares)."""
    data = shipped.load("gram_stable_ranks")["gram_stable_rank"]
    return {(name, *k): torch.tensor(data[name][_run_label(*k)], dtype=torch.float64)
            for name in data for k in GRAM_INPUTS}
