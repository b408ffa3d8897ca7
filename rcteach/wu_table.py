"""The 128-layer masks-and-LayerNorm table of Wu et al. (2024), simulated with :func:`rcteach.propagate`.

Introduced in chapter "LayerNorm" (book/10_layernorm.md).

Each layer is X' = normalise(dropout(A(X)) X W_V) with query-key softmax attention restricted to a
mask, optional attention dropout, a fresh Haar-orthogonal W_V and fresh Gaussian W_Q, W_K per layer
(``shared=True``: drawn once). :func:`layernorm_table` records mu(X_l) at chosen layers for every
mask and summarises it over independent networks (``seeds``) as a tidy table (one row per mask and
layer), the format of the authors' table (mean and standard deviation over runs);
:func:`table_pattern` tests its qualitative pattern and :data:`PAPER_SETTING` is our reconstruction
of the authors' setting (chapter "LayerNorm").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import _validate, shipped
from .depth import Trajectory, propagate
from .masks import MASK_KINDS, make_mask
from .norms import NORMS
from .tables import TextTable
from .tokens import gaussian_tokens

__all__ = ["PUBLISHED_TABLE", "PAPER_SETTING", "PATTERN", "LNRow", "rho_from_mu0", "logit_s2", "layernorm_runs",
           "table_pattern", "VARIANTS", "VARIANT_SETTINGS", "VARIANT_LAYERS", "variant_table",
           "variant_data", "shipped_variant_table", "layernorm_table", "table_rows", "format_table"]

#: The authors' published mean (std) of mu over runs, 128 layers, LayerNorm, orthogonal W_V
#: (T, d, window and initialisation not published).  std None where not given.  mu_0 ~ 274.8
#: matches T = 100 LayerNorm-ed tokens of width d = 768 (mu_0^2 ~ d (T - 1)), and the complete
#: mask's 4.6e-5 is the float32 round-off floor of that network (check "ln-complete-float32-floor").
PUBLISHED_TABLE = {
    "complete": {0: (274.76, 2.05), 32: (4.61e-5, None), 64: (4.63e-5, None), 96: (4.64e-5, None),
                 128: (4.62e-5, None)},
    "causal": {0: (274.78, 2.07), 32: (47.12, 16.24), 64: (67.96, 12.34), 96: (82.95, 11.53), 128: (92.33, 11.63)},
    "sliding": {0: (274.69, 1.94), 32: (111.67, 3.47), 64: (95.40, 4.88), 96: (85.63, 5.55), 128: (79.99, 5.62)},
    "sliding-causal": {0: (274.79, 2.01), 32: (161.07, 2.52), 64: (160.51, 3.89), 96: (164.17, 5.30),
                       128: (165.21, 5.42)},
}


def rho_from_mu0(mu0, T, d) -> float:
    """The token correlation rho of :func:`rcteach.gaussian_tokens` whose E mu(X_0)^2 = d (T - 1) (1 - rho)
    equals mu0^2 (unit-variance entries, or LayerNorm-ed tokens of squared norm d)."""
    mu0 = _validate.real("mu0", mu0, positive=True)
    T = _validate.integer("T", T, minimum=2)
    d = _validate.integer("d", d, minimum=1)
    rho = 1.0 - mu0**2 / (d * (T - 1))
    if rho < -1e-12:
        raise ValueError(f"mu0 = {mu0} exceeds sqrt(d (T - 1)) = {math.sqrt(d * (T - 1)):.4g}: no rho in [0, 1]")
    return max(rho, 0.0)


#: Our reconstruction of the authors' setting (inferred, not published): 128-token excerpts of width
#: 768 as in Dong et al.; one head; windows of one token before (and after) as described in the
#: paper; float32; attention dropout 0.1 left on (BERT's ``attention_probs_dropout_prob``, active
#: because a module built from a config starts in training mode); input correlation rho chosen so
#: that mu_0 matches the published 274.76.  Dropout is what keeps the causal masks from collapsing.
PAPER_SETTING = dict(T=128, d=768, window=1, dropout=0.1, rho=rho_from_mu0(274.76, 128, 768), dtype=torch.float32)


@dataclass(frozen=True)
class LNRow:
    """One row of :func:`layernorm_table`: a mask, a layer, and mu over seeds (independent networks)."""

    mask: str
    layer: int
    mean: float
    std: float
    relative: float  # mean of mu(X_l) / ||X_l||_F, in [0, 1]


def logit_s2(d, norm, *, torch_init=True) -> float:
    """The ``s2`` to pass to :func:`rcteach.propagate` for PyTorch-default query/key weights.

    ``nn.Linear`` draws U(-1/sqrt(d), 1/sqrt(d)), variance 1/(3d).  By ``theory.logit_variance``
    the logits of tokens of squared norm r^2 have variance (1/(3d))^2 r^4: 1/9 for LayerNorm-ed
    tokens (r^2 = d).  propagate's Gaussian W_Q, W_K have entries of variance sqrt(s2) and give
    logit variance s2 r^4, so s2 = 1/(9 d^2) for ``"layernorm"`` and 1/9 for unit-norm ``"rms"``
    tokens matches the logit variance of the PyTorch default (``torch_init=False``: s2 such that
    the logit variance is 1 instead).
    """
    d = _validate.integer("d", d, minimum=1)
    norm = _validate.choice("norm", norm, NORMS[1:])
    target = 1.0 / 9.0 if _validate.flag("torch_init", torch_init) else 1.0
    return target / d**2 if norm == "layernorm" else target


def layernorm_runs(*, T=100, d=128, depth=128, seeds=4, window=3, norm="layernorm", beta=1.0, s2=None,
                   values="orthogonal", shared=False, dropout=0.0, rho=0.0, masks=MASK_KINDS, seed=0,
                   stable_ranks=True, device=None, dtype=None) -> dict[str, Trajectory]:
    """mu(X_l) for l = 0..depth, for each mask, over ``seeds`` independent networks.

    Tokens X0: ``rcteach.gaussian_tokens`` with N(0, 1) entries and pairwise correlation ``rho``,
    (seeds, T, d), the same inputs for every mask.  ``dropout``: attention dropout probability
    (``rcteach.propagate``).  Other settings as in :func:`rcteach.propagate` (``stable_ranks=False``: no
    stable ranks, for runs that need only mu).

    Returns
    -------
    dict mask -> :class:`rcteach.Trajectory`, fields (depth + 1, seeds): ``mu``, ``relative_mu``
    (mu / ||X||_F), the stable ranks and the norm.
    """
    T = _validate.integer("T", T, minimum=2)
    d = _validate.integer("d", d, minimum=1)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    window = None if window is None else _validate.integer("window", window, minimum=0)
    if isinstance(masks, str) or not isinstance(masks, (tuple, list)):
        raise TypeError(f"masks must be a tuple of mask kinds, got {type(masks).__name__}")
    norm = _validate.choice("norm", norm, NORMS[1:])
    s2 = logit_s2(d, norm) if s2 is None else _validate.real("s2", s2, minimum=0.0)
    X0 = gaussian_tokens(T, d, rho=rho, batch=seeds, seed=seed, device=device, dtype=dtype)
    out = {}
    for kind in masks:
        _validate.choice("masks", kind, MASK_KINDS)
        mask = make_mask(kind, T, window=window, device=X0.device)
        out[kind] = propagate(X0, depth, attention="qk", s2=s2, beta=beta, mask=mask, dropout=dropout, norm=norm,
                              values=values, shared=shared, seed=seed + 1, stable_ranks=stable_ranks)
    return out


#: The four statements of :func:`table_pattern`, in order; the published table makes all four true.
PATTERN = ("complete collapsed", "causal not collapsed, rising", "sliding not collapsed, decreasing",
           "sliding-causal flat, above sliding")


def table_pattern(runs, *, first=32) -> tuple[bool, bool, bool, bool]:
    """The published table's qualitative pattern, tested on :func:`layernorm_runs` output ``runs``
    ({mask: Trajectory}, all four masks).

    On the mean over seeds, from layer ``first`` to the last: the complete mask is collapsed (relative
    mu < 1e-5, the float32 floor is ~1e-7); the causal mask is not collapsed (relative mu > 1e-2 at
    every layer; a single zero token already gives 1/sqrt(T)) and ends higher than at ``first``; the
    sliding mask is not collapsed and ends lower; the sliding-causal mask ends within 15% of its value
    at ``first`` and stays above the sliding mask.  Returns one bool per entry of :data:`PATTERN`.
    """
    missing = set(MASK_KINDS) - set(runs)
    if missing:
        raise ValueError(f"runs must hold all four masks; missing {sorted(missing)}")
    first = _validate.integer("first", first, minimum=0)
    last = runs["complete"].depth
    if first >= last:
        raise ValueError(f"first must be below the depth {last}, got {first}")
    mu = {kind: runs[kind].mu.mean(-1) for kind in MASK_KINDS}
    rel = {kind: runs[kind].relative_mu.mean(-1) for kind in MASK_KINDS}
    return (
        bool(rel["complete"][last] < 1e-5),
        bool(mu["causal"][last] > mu["causal"][first] and rel["causal"][first:].min() > 1e-2),
        bool(mu["sliding"][last] < mu["sliding"][first] and rel["sliding"][first:].min() > 1e-2),
        bool(abs(mu["sliding-causal"][last] / mu["sliding-causal"][first] - 1) < 0.15
             and (mu["sliding-causal"][first:] > mu["sliding"][first:]).all()),
    )


#: The robustness table of chapter "LayerNorm": one choice of :data:`PAPER_SETTING` changed at a
#: time (name -> change), at the width of :data:`VARIANT_SETTINGS`.
VARIANTS = {"reconstruction": {}, "no dropout": {"dropout": 0.0}, "uncorrelated inputs": {"rho": 0.0},
            "RMS, no centring": {"norm": "rms"}, "shared weights": {"shared": True}, "window 3": {"window": 3},
            "sharper logits (beta 4)": {"beta": 4.0}, "float64": {"dtype": torch.float64}}
#: The runs of each variant: 4 networks of 128 layers, PAPER_SETTING at width 64 (with 2 networks
#: the sliding-causal flatness failed at 3 of 8 base seeds: the tolerance note of "ln-paper-pattern").
VARIANT_SETTINGS = dict(d=64, seeds=4, depth=128, seed=0)
#: The layers at which :func:`variant_table` records the mean relative mu.
VARIANT_LAYERS = (0, 32, 64, 96, 128)


def variant_table(names=tuple(VARIANTS), *, d=64, seeds=4, depth=128, seed=0) -> dict[str, dict]:
    """The robustness table: for each variant ``names`` (keys of :data:`VARIANTS`), :func:`layernorm_runs`
    of PAPER_SETTING with that change at width ``d`` (no stable ranks), summarised as

        {"pattern": table_pattern(runs) as a list of 4 bools,
         "relative_mu": {mask: mean over seeds of mu(X_l) / ||X_l||_F at the layers VARIANT_LAYERS}}

    About 2.5 s of CPU per variant at the defaults, pinned to one thread: the chapter reads the
    shipped result (:func:`shipped_variant_table`).
    """
    if isinstance(names, str) or not isinstance(names, (tuple, list)):
        raise TypeError(f"names must be a tuple of variant names, got {type(names).__name__}")
    for name in names:
        _validate.choice("names", name, tuple(VARIANTS))
    if max(VARIANT_LAYERS) > _validate.integer("depth", depth, minimum=1):
        raise ValueError(f"depth must be at least {max(VARIANT_LAYERS)} (the layers recorded), got {depth}")
    out = {}
    for name in names:
        runs = layernorm_runs(seeds=seeds, depth=depth, seed=seed, stable_ranks=False,
                              **{**PAPER_SETTING, "d": d, **VARIANTS[name]})
        out[name] = {"pattern": list(table_pattern(runs)),
                     "relative_mu": {kind: runs[kind].relative_mu[list(VARIANT_LAYERS)].mean(-1).tolist()
                                     for kind in MASK_KINDS}}
    return out


def variant_data() -> dict:
    """What ``rcteach/ln_variants.json`` holds (:mod:`rcteach.shipped`): ``{"settings": VARIANT_SETTINGS,
    "layers": VARIANT_LAYERS, "variants": variant_table(**VARIANT_SETTINGS)}``."""
    return {"settings": VARIANT_SETTINGS, "layers": list(VARIANT_LAYERS),
            "variants": variant_table(**VARIANT_SETTINGS)}


def shipped_variant_table() -> dict:
    """The shipped :func:`variant_data` (``rcteach/ln_variants.json``, written by ``scripts/precompute.py``;
    tests/test_wu_table.py recomputes a variant and compares)."""
    return shipped.load("ln_variants")


def layernorm_table(*, layers=(0, 32, 64, 96, 128), **settings) -> list[LNRow]:
    """The authors' table, simulated: mean and std over seeds (independent networks) of mu(X_l) for each mask and layer.

    ``settings`` go to :func:`layernorm_runs` (``depth`` defaults to max(layers)).  Returns a
    tidy list of :class:`LNRow`, mask-major (:func:`table_rows` of the runs).
    """
    layers = tuple(_validate.values("layers", layers, _validate.integer, minimum=0))
    settings.setdefault("depth", max(layers))
    return table_rows(layernorm_runs(**settings), layers=layers)


def table_rows(runs, *, layers=(0, 32, 64, 96, 128)) -> list[LNRow]:
    """:func:`layernorm_table` of runs already made: ``runs`` as :func:`layernorm_runs` returns them
    ({mask: Trajectory}), for a chapter that also plots them."""
    layers = tuple(_validate.values("layers", layers, _validate.integer, minimum=0))
    if not isinstance(runs, dict) or not all(isinstance(tr, Trajectory) for tr in runs.values()):
        raise TypeError("runs must be a dict mask -> Trajectory, as layernorm_runs returns")
    rows = []
    for kind, tr in runs.items():
        for l in layers:
            if l > tr.depth:
                raise ValueError(f"layers: layer {l} is deeper than the runs' depth {tr.depth}")
            v = tr.mu[l]
            std = float(v.std()) if v.numel() > 1 else 0.0
            rows.append(LNRow(kind, l, float(v.mean()), std, float(tr.relative_mu[l].mean())))
    return rows


def format_table(rows, *, published=None, scale=1.0) -> TextTable:
    """:func:`layernorm_table` rows as a :class:`rcteach.tables.TextTable`: layers down, masks across, each
    cell "mean (std)"; with ``published`` (e.g. :data:`PUBLISHED_TABLE`) a "(paper)" row under each layer.

    The table displays as HTML in a notebook and prints as aligned text.  ``scale`` multiplies the
    simulated means and stds, e.g. sqrt(768 / d) to compare a simulation of width d with the
    published d = 768 (mu of LayerNorm-ed tokens scales as sqrt(d)).
    """
    scale = _validate.real("scale", scale, positive=True)
    if not isinstance(rows, (list, tuple)) or not all(isinstance(r, LNRow) for r in rows):
        raise TypeError("rows must be a list of LNRow, as layernorm_table returns")
    masks = list(dict.fromkeys(r.mask for r in rows))
    layers = list(dict.fromkeys(r.layer for r in rows))
    cell = {(r.mask, r.layer): f"{scale * r.mean:.3g} ({scale * r.std:.2g})" for r in rows}
    lines = []
    for l in layers:
        lines.append((l, *(cell[(m, l)] for m in masks)))
        if published is not None:
            pub = []
            for m in masks:
                mean, std = published.get(m, {}).get(l, (float("nan"), None))
                pub.append(f"{mean:.3g}" + (f" ({std:.2g})" if std is not None else ""))
            lines.append(("(paper)", *pub))
    return TextTable(("layer", *masks), lines, caption="mu(X_l): mean (std) over seeds")
