"""The Mind-the-Gap depth grid: 25 configurations, every layer, sampled exactly in law at O(T^3) a layer.

Introduced in chapter "Rank collapse in depth" (book/05_depth.md), section "The authors' whole grid".

The authors' ``stable_ranks.py`` runs the configurations of their ``configs.py`` on orthonormal tokens
X0 (T, d), d = T/gamma, for ``depth`` layers with fresh weights per layer, and records the Gram stable
rank after every block.  One block, tokens as rows (this module's :data:`CONFIGS`, ASCII names)::

    Y  = A X W_V                 W_V (d, d) with i.i.d. N(0, 1) entries
    X' = Y                       (no skip)
       = X + Y                   ("+ skip")
       = X + Y / sqrt(d)         ("+ upscaled skip")
    X' = LN(X')                  ("+ LN": per token, centred over its d features, divided by its std,
                                  no affine parameters and no epsilon, so every token has norm sqrt(d))

with A one of: ``A``, softmax of i.i.d. N(-ln2/2, ln 2) logits independent of X; ``A(X)``, softmax of
(X W_Q)(X W_K)^T / sqrt(d), W_Q and W_K (d, d) Xavier-normal (variance 1/d); ``Identity A`` (X' = X W_V);
``_perp`` = the centred map A - 11^T/T.  The authors' block also multiplies its output by 2 in the
"+ skip" configurations (``x = attended + x; y = LN(x); x = y + y``: an operator-precedence slip in the
MLP branch).  For ``A`` this only shifts ``log_norm`` by ln 2 a layer; for ``A(X)`` it multiplies the
next layer's logits by 4, which sharpens attention.  ``authors_skip=True`` reproduces it.

**Exact-in-law samplers.**  The law of the whole stack is invariant under X -> X O for every
orthogonal O that fixes e = 1_d/sqrt(d) (Gaussian weights are rotation invariant; LayerNorm only
singles out e).  So the state is kept as coordinates in an orthonormal basis of R^d made of e and k =
min(T, d - 1) directions of e^perp: a (T, k + 1) matrix H, never a (T, d) one.  In such a basis W_V is
again a Gaussian matrix; its rows outside the state's span never meet X, and the columns outside it
enter only through their Gram matrix, a Wishart matrix drawn as L L^T with L a Bartlett factor
(chi and normal entries; lower-trapezoidal when it is singular).  Without a skip the new e^perp
part is A H L, L the Bartlett factor of all d - 1 columns (the width grows by one a layer, at most
to d - 1); with a skip, X + a A X W_V needs W_V's k state columns explicitly, and the e^perp part
(width 2k + 1) is folded back to k columns by a QR decomposition (a rotation: the law is unchanged).  For A(X), (X
W_Q)(X W_K)^T = H M H^T with M = G L^T / d in law (G a (k+1)^2 Gaussian, L a Bartlett factor with d degrees of freedom).
No (d, d) matrix is ever drawn: a layer costs O(T^3) whatever gamma is.

**Scale-free, precise metrics.**  The token basis is rotated too: row 0 of the state is sqrt(T)
times the mean token (the consensus direction 1/sqrt(T)), rows 1.. the centred tokens.  The centred
attention part acts on rows 1.. only, with the exact zero block of A 1 = 1 written in, and LayerNorm
is expanded around the mean token, so the distance to consensus keeps its relative precision even
when it is 1e-30 of the norm.  The state is renormalised to Frobenius norm 1 after every layer and
its logarithmic scale carried in ``log_norm`` = log ||X||_F.  For A(X) the logits scale like the
squared norm: :func:`centred_softmax` returns softmax - 1/T as exp(log_scale) * B with B computed
from ``expm1`` for small logits and, when even those underflow, from its exact first-order limit
(B = (l - mean l)/T), so A(X)_perp without LayerNorm, whose signal shrinks like ||X||^3 a layer,
stays finite.  Metrics per layer (all from the same state):

* ``stable_rank``: sum s_i^2 / s_1^2 (Frobenius), ``stable_rank_gram``: sum s_i^4 / s_1^4 (the
  authors' Gram stable rank of X X^T), ``relative_mu``: ||X - 1 xbar^T||_F / ||X||_F,
  ``log_norm``: log ||X||_F.

**Exact collapse.**  Under A_perp + LN the tokens can become exactly equal: at T = 2 the output of
A_perp has rank one, so after LayerNorm the two tokens are equal or opposite, equal with probability
about 1/2 a layer; for A(X)_perp the distance to consensus shrinks doubly exponentially (in float32
below the working precision within a few layers at T = 3, 4 and gamma = 1).  The next layer's A_perp X
is then exactly 0 and LayerNorm of the zero matrix is 0/0 (the authors' ``nn.LayerNorm`` adds eps =
1e-5 to the variance: it gives the zero matrix, whose stable ranks are 0/0 too).  Such a state is kept
as it is, as the skip configurations keep it exactly (X + A_perp X W_V = X): the consensus is
permanent, and its metrics stay stable ranks 1 and relative mu 0.

Both stable ranks need only the top eigenpair of the Gram matrix, not its whole spectrum
(:func:`rcteach.top_eigen.top_and_rest`: the trace, and the deflated Frobenius norm for the rest; a
certified Lanczos iteration for large T).
The samplers and the metrics live in :mod:`rcteach.grid_kernels`; this module holds the
configurations, the layer loop and the sweep.

Randomness: each configuration has its own generator, seeded from (config, T, gamma, seed), so a
subset of configurations gives the same numbers as the whole grid.  Introduced in the chapter
"Rank collapse in depth" (the authors' grid section); ``python -m rcteach sweep`` runs it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch

from . import _validate, denormals
from .attention import LN2
from .device import resolve
from .grid_kernels import (_draws, _initial, _layernorm, _metrics, _mm_lower, _Rotation, bartlett, centred_softmax,
                           centred_softmax_unchecked)
from .linalg import matmul
from .sweep import SweepTable, check_executor, point_seed, sweep
from .top_eigen import top_and_rest
from .width import width_dims

__all__ = ["Config", "CONFIGS", "GRID", "METRICS", "config_names", "centred_softmax", "bartlett", "top_and_rest",
           "simulate",
           "grid_rows", "run_grid"]

METRICS = ("stable_rank", "stable_rank_gram", "relative_mu", "log_norm")
COLUMNS = ["config", "T", "gamma", "seed", "layer", *METRICS]
"""The columns of the grid's table, one row per (configuration, T, gamma, seed, layer)."""
GRID = {"T": [20, 40, 60, 80, 100, 150], "gamma": [1.0, 0.5, 0.2]}
"""T and gamma of the authors' README command (5 runs, 10 layers)."""


@dataclass(frozen=True)
class Config:
    """One block of the authors' grid (module doc)."""

    attention: str  # "iid" (A: i.i.d. logits), "qk" (A(X)), "identity" (no attention)
    centred: bool = False  # A - 11^T/T
    skip: str | None = None  # None, "plain" (X + A X W_V), "upscaled" (X + A X W_V / sqrt(d))
    layernorm: bool = False  # LayerNorm after the skip

    def __post_init__(self):
        _validate.choice("attention", self.attention, ("iid", "qk", "identity"))
        _validate.flag("centred", self.centred)
        if self.skip is not None:
            _validate.choice("skip", self.skip, ("plain", "upscaled"))
        _validate.flag("layernorm", self.layernorm)


def _configs() -> dict[str, Config]:
    """The 25 configurations in the order of the authors' configs.py."""
    blocks = [(None, False, ""), (None, True, " + LN"), ("plain", False, " + skip"),
              ("upscaled", False, " + upscaled skip"), ("plain", True, " + skip + LN"),
              ("upscaled", True, " + upscaled skip + LN")]
    out = {}
    for base, attention in (("A", "iid"), ("A(X)", "qk")):
        for skip, ln, suffix in blocks:
            for centred in (False, True):
                out[base + ("_perp" if centred else "") + suffix] = Config(attention, centred, skip, ln)
        if attention == "iid":
            out["Identity A"] = Config("identity")
    return out


CONFIGS = _configs()


def config_names(configs) -> list[str]:
    """``"all"``, a comma-separated string or a list of names of :data:`CONFIGS` -> a list of names."""
    if isinstance(configs, str):
        configs = list(CONFIGS) if configs == "all" else [c.strip() for c in configs.split(",") if c.strip()]
    if isinstance(configs, (list, tuple)) and configs and all(isinstance(c, str) for c in configs):
        unknown = [c for c in configs if c not in CONFIGS]
        if unknown:
            raise ValueError(f"configs: unknown configuration(s) {unknown}; known: {', '.join(CONFIGS)}")
        twice = sorted({c for c in configs if configs.count(c) > 1})
        if twice:
            raise ValueError(f"configs: {', '.join(map(repr, twice))} named twice")
        return list(configs)
    raise ValueError(f"configs must be 'all', 'NAME,NAME,...' or a non-empty list of names, got {configs!r}")


def _run(names, T, d, depth, seeds, seed, authors_skip, dtype, device) -> dict:
    """One group of configurations with the same attention family and the same skip-or-not, at (T, d).

    Returns {metric: (n_cfg, depth, seeds)}.  With a skip the e^perp part is reduced back to k
    columns by a QR decomposition after each layer (when d - 1 > k); without one the new e^perp
    part is A H L with L a Bartlett factor of all d - 1 columns of W_V, so the width grows by one
    a layer (up to d - 1) and no decomposition is needed.
    """
    cfgs = [CONFIGS[n] for n in names]
    gens = []
    for name in names:
        g = torch.Generator(device=device)
        g.manual_seed(point_seed({"config": name, "T": T, "d": d}, seed))
        gens.append(g)
    n = len(cfgs) * seeds

    def per(f, kind=torch.bool):
        return torch.tensor([f(c) for c in cfgs for _ in range(seeds)], dtype=kind, device=device)

    centred = per(lambda c: c.centred)
    one_plain = (~centred).to(dtype)
    log_a = per(lambda c: -0.5 * math.log(d) if c.skip == "upscaled" else 0.0, torch.float64)
    layernorm = per(lambda c: c.layernorm)
    ln = layernorm.nonzero()[:, 0]
    may_hold = (centred & layernorm).nonzero()[:, 0]
    is_identity = per(lambda c: c.attention == "identity")
    identity, attends = is_identity.nonzero()[:, 0], (~is_identity).nonzero()[:, 0]
    att_gens = [g for g, c in zip(gens, cfgs) if c.attention != "identity"]
    skip = cfgs[0].skip is not None
    doubled = per(lambda c: authors_skip and c.skip == "plain", torch.float64) * math.log(2.0)
    qk = cfgs[0].attention == "qk"

    O = _Rotation(T, dtype, device)
    k = min(T, d - 1)
    Z = O(_initial(gens, seeds, T, d, k, dtype, device)) / math.sqrt(T)  # (n, T, k + 1), ||Z|| = 1
    log_norm = torch.full((n,), 0.5 * math.log(T), dtype=torch.float64, device=device)
    out = []
    for _ in range(depth):
        p = Z.shape[-1]  # 1 + k: the e column and k directions of e^perp
        # tokens exactly equal (centred rows zero) meet A_perp: A_perp X = 0, and LayerNorm would be 0/0 (module doc)
        held = may_hold[(Z[may_hold, 1:] == 0).flatten(1).all(-1)]
        Z_held = Z[held]
        C = O(torch.cat([torch.zeros_like(Z[:, :1]), Z[:, 1:]], dim=1))  # centred tokens (mean row 0 left out)
        if qk:  # logits (X W_Q)(X W_K)^T / sqrt(d) = kappa (H G)(C L)^T / d^1.5 up to row constants
            G = _draws(gens, seeds, (p, p), dtype, device)
            L = bartlett(p, d, gens=gens, seeds=seeds, dtype=dtype, device=device)
            B, log_att = centred_softmax_unchecked(matmul(matmul(O(Z), G), _mm_lower(C, L).mT) / d ** 1.5, 2 * log_norm)
        else:  # i.i.d. logits, drawn only for the configurations with attention
            B, log_att = centred_softmax_unchecked(math.sqrt(LN2) * _draws(att_gens, seeds, (T, T), dtype, device))
        if len(identity):  # no logits drawn for Identity A: log_att 0 there
            log_att = torch.zeros(n, dtype=torch.float64, device=device).index_copy_(0, attends, log_att)
        # A X = 11^T X / T + A_perp X with A_perp = B (times exp(log_att) for A) and A_perp 1 = 0: in rotated
        # coordinates A_perp acts on the centred rows only and the mean row passes (for A) unchanged
        scale = torch.where(centred, 0.0, log_att).exp().to(dtype)[:, None, None]
        if len(identity):  # Identity A: X' = X W_V
            Y = Z.clone()
            Y[attends] = O(matmul(B, C[attends])) * scale[attends]
            Y[attends, 0] += one_plain[attends, None] * Z[attends, 0]
        else:
            Y = O(matmul(B, C)).mul_(scale)  # (n, T, p)
            Y[:, 0] += one_plain[:, None] * Z[:, 0]
        log_term = log_a + torch.where(centred, log_att, 0.0)  # log of the factor on A X W_V
        if skip:  # W_V's e column, its k state directions, the Bartlett factor of the other d - 1 - k
            W = _draws(gens, seeds, (p, p), dtype, device)
            if d - p:
                YW = torch.cat([matmul(Y, W), _mm_lower(Y, bartlett(p, d - p, gens=gens, seeds=seeds, dtype=dtype,
                                                                 device=device))], dim=-1)
            else:
                YW = matmul(Y, W)
            Y = log_term.exp().to(dtype)[:, None, None] * YW
            Y[..., :p] += Z
            if d - p:  # rotate the e^perp part (width 2k + 1) back to k = T columns
                Y = torch.cat([Y[..., :1], torch.linalg.qr(Y[..., 1:].mT, mode="r")[1].mT], dim=-1)
        else:  # W_V's e column, then the Bartlett factor of its d - 1 others (zero columns dropped)
            e_col = _draws(gens, seeds, (p, 1), dtype, device)
            L = bartlett(p, d - 1, gens=gens, seeds=seeds, dtype=dtype, device=device)
            Y = torch.cat([matmul(Y, e_col), _mm_lower(Y, L)[..., :min(p, d - 1)]], dim=-1)
            log_norm = log_norm + log_term
        if len(ln):
            Y[ln] = _layernorm(Y[ln], O, T)
        if len(held):  # the consensus state is kept (its width padded with zero columns, the new ones)
            Y[held] = torch.nn.functional.pad(Z_held, (0, Y.shape[-1] - p))
        norm = Y.norm(dim=(-2, -1))
        Z = Y / norm[:, None, None]
        log_norm = log_norm + norm.log().to(torch.float64)
        log_norm[ln] = 0.5 * math.log(T * d)
        log_norm = log_norm + doubled
        out.append(_metrics(Z, log_norm))
    return {k_: torch.stack([o[k_] for o in out]).reshape(depth, len(cfgs), seeds).transpose(0, 1) for k_ in METRICS}


def simulate(T, gamma, configs="all", *, depth=10, seeds=5, seed=0, authors_skip=False, dtype=torch.float32,
             device=None) -> dict:
    """Every layer's metrics of the configurations ``configs`` at (T, gamma), d = round(T/gamma).

    Returns {config name: {metric: Tensor (depth, seeds)}} (float64 values; row l is after l + 1
    blocks).  ``seed`` (an int >= 0) and the point fix every draw (module doc); ``dtype`` is the
    working precision (float32 is accurate here: the state is renormalised every layer and the
    centred parts are kept separately).  Every value is finite, except ``log_norm`` once log ||X||_F
    itself leaves float64's range (A(X)_perp without LayerNorm, after about 640 layers): then it is
    -inf, with a UserWarning naming the configuration and the layer.  Float32 work on the CPU runs with
    flush-to-zero (:mod:`rcteach.denormals`): a centred part that falls below 2^-126 ~ 1.2e-38 of the norm
    becomes 0 (``relative_mu`` 0) instead of a subnormal number that slows every product a hundredfold.
    """
    names = config_names(configs)
    T, d = _dims(T, gamma)
    depth = _validate.integer("depth", depth, minimum=1)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    seed = _validate.seed(seed)
    authors_skip = _validate.flag("authors_skip", authors_skip)
    device, dtype = resolve(device, dtype)
    out = {}
    with denormals.for_float32(dtype, device):  # collapsing centred parts turn subnormal: flush them
        for part in _groups(names):
            res = _run(part, T, d, depth, seeds, seed, authors_skip, dtype, device)
            out.update({name: {m: res[m][i].cpu() for m in METRICS} for i, name in enumerate(part)})
    for name in names:
        _warn_log_norm(name, out[name]["log_norm"], T, d)
    return {name: out[name] for name in names}


def _groups(names) -> list[list[str]]:
    """The configurations run together (one batch): same attention family, skip or not."""
    groups = [[n for n in names if CONFIGS[n].attention in family and (CONFIGS[n].skip is not None) == skip]
              for family in (("iid", "identity"), ("qk",)) for skip in (False, True)]
    return [g for g in groups if g]


POINT_BYTES = 20
"""A point's peak memory is about POINT_BYTES x (configurations in its largest batch) x seeds x T^2 x itemsize,
plus about 80 MB (measured: 17 x, at T = 150 and 300, seeds 5, all 25 configurations)."""


def _check_memory(names, T, seeds, dtype) -> None:
    """Refuse a grid whose largest point would not fit in this machine's memory (ValueError naming T)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX: nothing to compare with
        return
    batch = max(len(g) for g in _groups(names)) * seeds
    need = POINT_BYTES * batch * max(T) ** 2 * (4 if dtype == "float32" else 8)
    if need > total:
        raise ValueError(f"T={max(T)} needs about {need / 2**30:.0f} GiB a point ({batch} networks of T x T in a "
                         f"batch), more than this machine's {total / 2**30:.0f} GiB: choose a smaller T, fewer "
                         "configurations or seeds, or run the points elsewhere (--dask tcp://...)")


def _warn_log_norm(name, log_norm, T, d) -> None:
    """A UserWarning when ``log_norm`` (depth, seeds) left float64's range, naming the configuration and layer."""
    bad = ~torch.isfinite(log_norm)
    if bad.any():
        layer = int(bad.any(-1).nonzero()[0]) + 1
        _validate.regime(f"log_norm of {name!r} at T={T}, d={d} is {log_norm[bad][0].item()} from layer {layer}: log "
                         f"||X||_F "
                         "left float64's range (||X||_F < exp(-1.8e308): without LayerNorm the signal of A(X)_perp "
                         "shrinks like ||X||^3 a layer, so its logarithm triples); the other metrics stay finite",
                         stacklevel=4)


def grid_rows(T, gamma, *, configs="all", depth=10, seeds=5, seed=0, authors_skip=False, dtype="float32",
              device=None) -> list[dict]:
    """:func:`simulate` as tidy rows {config, T, gamma, seed, layer (1..depth), metrics...}; a sweep point."""
    dt = {"float32": torch.float32, "float64": torch.float64}[_validate.choice("dtype", dtype, ("float32", "float64"))]
    res = simulate(T, gamma, configs, depth=depth, seeds=seeds, seed=seed, authors_skip=authors_skip, dtype=dt,
                   device=device)
    rows = []
    for name, m in res.items():
        cols = {k: m[k].tolist() for k in METRICS}
        rows += [{"config": name, "T": T, "gamma": gamma, "seed": s, "layer": ell + 1,
                  **{k: cols[k][ell][s] for k in METRICS}} for ell in range(depth) for s in range(seeds)]
    return rows


def run_grid(out, configs="all", *, T=None, gamma=None, depth=10, seeds=5, base_seed=0, authors_skip=False,
             dtype="float32", device=None, executor=None, force=False, progress=True) -> SweepTable:
    """Run the grid into ``out/depth.csv`` (stored and resumable) and return it as a :class:`rcteach.sweep.SweepTable`.

    One sweep point per (T, gamma) (default :data:`GRID`), all ``configs`` batched in it, seeded from
    the point (:func:`rcteach.sweep.point_seed`), so serial, resumed and ``executor`` runs give the
    same table.  Every argument is checked before anything is written (gamma <= 1 at every T among
    them).  The store (:mod:`rcteach.sweep_store`) lives in ``out``: ``depth.points/`` (one file per
    finished point), the settings ``depth.json``, the lock ``depth.lock``; resuming a table made with
    other settings raises ValueError unless ``force=True`` (which starts a new table), and every
    reused point is checked (all configurations, seeds and layers, finite values) and redone if it
    fails.  A second run on the same ``out`` refuses while the first runs
    (:class:`rcteach.sweep_store.StoreBusy`); a full disk raises :class:`rcteach.sweep_store.DiskFull`.
    ``executor``: any ``concurrent.futures.Executor`` or dask ``Client`` (see :func:`rcteach.sweep.sweep`).
    """
    if not isinstance(out, (str, os.PathLike)) or isinstance(os.fspath(out), bytes):
        raise TypeError(f"out must be a directory path (str or os.PathLike), got {type(out).__name__}")
    names = config_names(configs)
    grid = {"T": _validate.values("T", GRID["T"] if T is None else T, _validate.integer, minimum=2),
            "gamma": _validate.values("gamma", GRID["gamma"] if gamma is None else gamma, _validate.real,
                                      positive=True)}
    for name, vals in grid.items():
        if len(set(vals)) < len(vals):
            raise ValueError(f"{name} has a value twice: {vals}")
    for t in grid["T"]:
        for g in grid["gamma"]:
            _dims(t, g)
    depth = _validate.integer("depth", depth, minimum=1)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    base_seed = _validate.seed(base_seed, "base_seed")
    authors_skip = _validate.flag("authors_skip", authors_skip)
    _validate.choice("dtype", dtype, ("float32", "float64"))
    force = _validate.flag("force", force)
    progress = _validate.flag("progress", progress)
    settings = dict(configs=names, depth=depth, seeds=seeds, base_seed=base_seed, authors_skip=authors_skip,
                    dtype=dtype, device=resolve(device)[0].type)
    check_executor(executor)
    here = (executor.startswith("local:") if isinstance(executor, str)  # not a dask cluster elsewhere
            else executor is None or not hasattr(executor, "scheduler_info"))
    if here and resolve(device)[0].type == "cpu":
        _check_memory(names, grid["T"], seeds, dtype)
    _make_folder(os.fspath(out))
    fn = _Point(names, depth, seeds, authors_skip, dtype, device)
    return sweep(fn, grid, seeds=seeds, path=os.path.join(out, "depth.csv"), force=force, settings=settings,
                 check_rows=fn.check_rows, base_seed=base_seed, progress=progress, desc="grid", executor=executor,
                 timing=False)


def _dims(T, gamma) -> tuple[int, int]:
    """(T, d), d = round(T/gamma), for orthonormal tokens: T <= d < 2^53 (ValueError naming gamma otherwise)."""
    T, d = width_dims(T, gamma)
    if T > d:
        raise ValueError(f"gamma must be <= 1 (T orthonormal tokens in d = round(T/gamma) dimensions), got "
                         f"gamma={gamma} at T={T}, d={d}")
    if d >= 2 ** 53:
        raise ValueError(f"gamma={gamma} at T={T} gives d = {d:.3g} >= 2^53 dimensions, past what float64 counts "
                         "exactly; choose gamma >= T / 2^53")
    return T, d


def _make_folder(out: str) -> None:
    """Create the folder ``out`` (and its parents); ValueError naming it when that is impossible."""
    if not out:
        raise ValueError("out must be a folder path, got ''")
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"out: {out} is a file, not a folder")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as err:
        raise ValueError(f"out: cannot create the folder {out}: {err.strerror or err}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ValueError(f"out: the folder {out} is not writable")


class _Point:
    """The sweep function of :func:`run_grid` (a picklable callable for executors)."""

    __name__ = "grid"

    def __init__(self, names, depth, seeds, authors_skip, dtype, device):
        self.kw = dict(configs=names, depth=depth, authors_skip=authors_skip, dtype=dtype, device=device)
        self.expected = {(c, s, ell) for c in names for s in range(seeds) for ell in range(1, depth + 1)}

    def __call__(self, T, gamma, seeds, seed):
        return grid_rows(T, gamma, seeds=seeds, seed=seed, **self.kw)

    def check_rows(self, point, rows) -> None:
        """The rows at ``point`` are complete: one per (configuration, seed, layer), every metric finite."""
        got = [(r.get("config"), r.get("seed"), r.get("layer")) for r in rows]
        if len(got) != len(self.expected) or set(got) != self.expected:
            raise ValueError(f"{len(rows)} rows, not the {len(self.expected)} of one per configuration, seed and layer")
        for r in rows:
            if list(r) != COLUMNS or (r["T"], r["gamma"]) != (point["T"], point["gamma"]):
                raise ValueError(f"a row with columns {list(r)} or another point (T={r.get('T')}, "
                                 f"gamma={r.get('gamma')})")
            if not all(_promised(m, r[m]) for m in METRICS):
                raise ValueError(f"a row with a value that is not a number, or not finite (log_norm may be -inf): {r}")


def _promised(metric: str, value) -> bool:
    """A metric as :func:`simulate` promises it: a finite float; log_norm may also be -inf (below float64's range)."""
    return isinstance(value, float) and (math.isfinite(value) or (metric == "log_norm" and value == -math.inf))
