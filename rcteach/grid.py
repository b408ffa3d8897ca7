"""The Mind-the-Gap depth grid: 25 configurations, every layer, sampled exactly in law at O(T^3) a layer.

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
(width 2k + 1) is folded back to k columns by a QR decomposition (a rotation: the law is unchanged).  For A(X), (X W_Q)(X W_K)^T = H M H^T with M = G L^T / d in law (G a (k+1)^2 Gaussian,
L a Bartlett factor with d degrees of freedom).  No (d, d) matrix is ever drawn: a layer costs
O(T^3) whatever gamma is.

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

Randomness: each configuration has its own generator, seeded from (config, T, gamma, seed), so a
subset of configurations gives the same numbers as the whole grid.  Introduced in the chapter
"Rank collapse in depth" (the authors' grid section); ``python -m rcteach sweep`` runs it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import torch

from . import _validate
from .attention import LN2
from .device import resolve
from .tools.sweep import Table, point_seed, sweep
from .width import width_dims

__all__ = ["Config", "CONFIGS", "GRID", "METRICS", "config_names", "centred_softmax", "bartlett", "simulate",
           "grid_rows", "run_grid"]

METRICS = ("stable_rank", "stable_rank_gram", "relative_mu", "log_norm")
GRID = {"T": [20, 40, 60, 80, 100, 150], "gamma": [1.0, 0.5, 0.2]}
"""T and gamma of the authors' README command (5 runs, 10 layers)."""


@dataclass(frozen=True)
class Config:
    """One block of the authors' grid (module doc)."""

    attention: str  # "iid" (A: i.i.d. logits), "qk" (A(X)), "identity" (no attention)
    centred: bool = False  # A - 11^T/T
    skip: str | None = None  # None, "plain" (X + A X W_V), "upscaled" (X + A X W_V / sqrt(d))
    layernorm: bool = False  # LayerNorm after the skip


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
        return list(dict.fromkeys(configs))
    raise ValueError(f"configs must be 'all', 'NAME,NAME,...' or a non-empty list of names, got {configs!r}")


# ---------------------------------------------------------------------------------------------- sampling

def _draws(gens, seeds, shape, dtype, device) -> torch.Tensor:
    """Standard normals (len(gens) * seeds, *shape): block i from generator i."""
    out = torch.empty(len(gens), seeds, *shape, dtype=dtype, device=device)
    for i, g in enumerate(gens):
        torch.randn(seeds, *shape, generator=g, out=out[i])
    return out.reshape(len(gens) * seeds, *shape)


def _chi2(gens, seeds, dof, dtype, device) -> torch.Tensor:
    """Chi-square draws (len(gens) * seeds, len(dof)) with dof[j] > 0 degrees of freedom."""
    alpha = torch.as_tensor(dof, dtype=dtype, device=device).div(2).expand(seeds, len(dof)).contiguous()
    return torch.cat([2 * torch._standard_gamma(alpha, generator=g) for g in gens])


def bartlett(p, dof, *, gens, seeds=1, dtype=torch.float64, device=None) -> torch.Tensor:
    """Bartlett factors L (len(gens) * seeds, p, p): L L^T ~ Wishart_p(dof, I) = G G^T, G (p, dof) Gaussian.

    L is lower triangular with L_jj ~ chi_{dof - j} and N(0, 1) entries below the diagonal (j from 0).
    When dof < p (a singular Wishart matrix), columns j >= dof are zero: G = L Q with L
    lower-trapezoidal.  Draws normals first, then chi-squares, from each generator in ``gens``.
    """
    p = _validate.integer("p", p, minimum=1)
    dof = _validate.integer("dof", dof, minimum=0)
    if not isinstance(gens, (list, tuple)) or not gens or not all(isinstance(g, torch.Generator) for g in gens):
        raise TypeError(f"gens must be a non-empty list of torch.Generator, got {gens!r}")
    seeds = _validate.integer("seeds", seeds, minimum=1)
    device, dtype = resolve(device, dtype)
    cols = min(p, dof)
    L = torch.tril(_draws(gens, seeds, (p, p), dtype, device), diagonal=-1)
    L[..., cols:] = 0
    if cols:
        chi = _chi2(gens, seeds, [dof - j for j in range(cols)], dtype, device).sqrt()  # (n, cols)
        idx = torch.arange(cols, device=device)
        L[..., idx, idx] = chi
    return L


def centred_softmax(logits, log_scale=None) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(kappa * logits) - 1/T in scaled form exp(log_out) * B, precise for tiny logits.

    ``logits`` l (*batch, T, T), ``log_scale`` log kappa (*batch,) (default 0).  With m = max |l| and
    x = kappa m (computed in logs, never overflowing):

    * x > 1: B = softmax(kappa l) - 1/T, log_out = 0 (kappa capped so kappa l stays finite; beyond the
      cap the softmax is already its one-hot limit);
    * eps <= x <= 1: with E = expm1(kappa l), B = (E - mean_row E) / (T + sum_row E) / x, log_out = log x
      (the exact formula, without the cancellation of exp(kappa l) - 1);
    * x < eps (machine epsilon): B = (l/m - mean_row l/m) / T, log_out = log x, its exact first-order
      limit (the next term is below rounding), finite however small kappa is.

    Rows of B sum to 0.  Returns (B, log_out).
    """
    logits = _validate.matrix("logits", logits, square=True)
    T = logits.shape[-1]
    dt = logits.dtype
    if log_scale is None:
        log_scale = torch.zeros(logits.shape[:-2], dtype=torch.float64, device=logits.device)
    if not isinstance(log_scale, torch.Tensor) or log_scale.shape != logits.shape[:-2]:
        raise TypeError(f"log_scale must be a tensor of the batch shape {tuple(logits.shape[:-2])}, got {log_scale!r}")
    if not torch.isfinite(log_scale).all():
        raise ValueError("log_scale must have finite entries (found NaN or inf)")
    m = logits.detach().abs().amax((-2, -1)).clamp_min(torch.finfo(dt).tiny)  # (*batch,)
    ell = logits / m[..., None, None]  # max |ell| = 1
    log_x = log_scale.to(torch.float64) + m.to(torch.float64).log()
    x = log_x.clamp(max=math.log(torch.finfo(dt).max) - 2).exp().to(dt)[..., None, None]
    large, small = log_x > 0, log_x < math.log(torch.finfo(dt).eps)
    middle = ~(large | small)
    B = torch.empty_like(ell)
    if large.any():
        B[large] = torch.softmax(x[large] * ell[large], dim=-1) - 1.0 / T
    if middle.any():
        E = torch.expm1(x[middle] * ell[middle])
        B[middle] = (E - E.mean(-1, keepdim=True)) / (T + E.sum(-1, keepdim=True)) / x[middle]
    if small.any():
        B[small] = (ell[small] - ell[small].mean(-1, keepdim=True)) / T
    return B, torch.where(log_x > 0, torch.zeros_like(log_x), log_x)


class _Rotation:
    """The Householder reflection O (T, T) with O e_0 = 1/sqrt(T) (O = O^T = O^{-1})."""

    def __init__(self, T, dtype, device):
        v = torch.full((T,), -1.0 / math.sqrt(T), dtype=dtype, device=device)
        v[0] += 1.0
        self.v, self.beta = v, 2.0 / float(v @ v)

    def __call__(self, M):
        """O M for M (*batch, T, q)."""
        return M - self.beta * self.v[:, None] * (self.v @ M)[..., None, :]

    def conjugate(self, A):
        """O A O for A (*batch, T, T)."""
        return self(self(A).mT).mT


def _initial(gens, seeds, T, d, k, dtype, device) -> torch.Tensor:
    """Haar-orthonormal tokens X0 (T, d) in coordinates [e | k directions of e^perp]: (n, T, k + 1).

    x_e = X0 e is the first T coordinates of a uniform unit vector of R^d (g / sqrt(|g|^2 + chi2_{d-T}));
    the e^perp part has Gram I - x_e x_e^T, factored as Q diag(sqrt(1 - |x_e|^2), 1, ..) with Q the
    Householder reflection sending e_0 to x_e/|x_e| (first column dropped when k = T - 1, d = T).
    """
    g = _draws(gens, seeds, (T,), dtype, device)  # (n, T)
    sq = g.square().sum(-1)
    if d > T:
        sq = sq + _chi2(gens, seeds, [d - T], dtype, device)[:, 0]
    x = g / sq.sqrt()[:, None]
    rho = x.norm(dim=-1, keepdim=True)
    w = -x / rho
    w[:, 0] += 1.0
    Q = torch.eye(T, dtype=dtype, device=device) - 2 * w[:, :, None] * w[:, None, :] / (w * w).sum(-1)[:, None, None]
    Q[:, :, 0] *= (1 - rho.square()).clamp_min(0).sqrt()
    return torch.cat([x[:, :, None], Q[:, :, T - k:]], dim=-1)


def _layernorm(Z, O, T) -> torch.Tensor:
    """LayerNorm (unit-norm tokens, e dropped) of a state Z (n, T, p) in rotated token coordinates.

    With m the mean token and c_i the centred ones (e^perp coordinates), y_i = (m + c_i) q_i,
    q_i = 1 / |m + c_i|; the centred part of y is c_i q_i - mean(c q) + (q_i - mean q) m, where
    q_i - mean q = (eps_i - mean eps)/|m| with eps_i = (1 + delta_i)^(-1/2) - 1 from expm1/log1p,
    delta_i = (2 m.c_i + |c_i|^2)/|m|^2: no cancellation when the tokens have nearly collapsed.
    Returns the rotated coordinates of y (tokens of norm 1), e column zero.
    """
    X = Z[..., 1:]
    m = X[:, 0] / math.sqrt(T)  # (n, k) mean token
    C = O(torch.cat([torch.zeros_like(X[:, :1]), X[:, 1:]], dim=1))  # (n, T, k) centred tokens
    mm = m.square().sum(-1, keepdim=True)  # (n, 1)
    mc = (C @ m[:, :, None])[..., 0]  # (n, T)
    cc = C.square().sum(-1)
    tiny = torch.finfo(Z.dtype).tiny
    q = (mm + 2 * mc + cc).clamp_min(tiny).rsqrt()  # (n, T)
    ok = mm > 0
    delta = (2 * mc + cc) / torch.where(ok, mm, 1.0)
    e = torch.expm1(-0.5 * torch.log1p(delta.clamp_min(-1 + torch.finfo(Z.dtype).eps)))
    dq = torch.where(ok, (e - e.mean(-1, keepdim=True)) / torch.where(ok, mm, 1.0).sqrt(), q - q.mean(-1, keepdim=True))
    Cq = C * q[..., None]
    mean_cq = Cq.mean(1, keepdim=True)  # (n, 1, k)
    centred = Cq - mean_cq + dq[..., None] * m[:, None, :]
    Y = O(centred)
    Y[:, 0] = math.sqrt(T) * (m * q.mean(-1, keepdim=True) + mean_cq[:, 0])
    return torch.cat([torch.zeros_like(Z[..., :1]), Y], dim=-1)


def _metrics(Z, log_norm) -> dict:
    """The four metrics (module doc) of states Z (n, T, p) with ||Z||_F = 1."""
    S = Z @ Z.mT
    try:  # backward stable: every eigenvalue to rounding relative to s_1^2, all a stable rank needs
        lam = torch.linalg.eigvalsh(S).to(torch.float64)
    except torch.linalg.LinAlgError:
        lam = torch.full(S.shape[:-1], math.nan, dtype=torch.float64, device=S.device)
    bad = ~torch.isfinite(lam).all(-1)  # float32 may fail to converge on a nearly rank-one S: redo in float64
    if bad.any():
        lam[bad] = torch.linalg.eigvalsh(S[bad].to(torch.float64))
    lam = lam.clamp_min(0)  # (n, T) ascending
    Z = Z.to(torch.float64)
    top = lam[:, -1]
    return {"stable_rank": lam.sum(-1) / top, "stable_rank_gram": lam.square().sum(-1) / top.square(),
            "relative_mu": Z[:, 1:].norm(dim=(-2, -1)) / Z.norm(dim=(-2, -1)),
            "log_norm": log_norm.clone()}


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
    plain = (~centred).nonzero()[:, 0]
    log_a = per(lambda c: -0.5 * math.log(d) if c.skip == "upscaled" else 0.0, torch.float64)
    ln = per(lambda c: c.layernorm).nonzero()[:, 0]
    identity = per(lambda c: c.attention == "identity").nonzero()[:, 0]
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
        if qk:  # logits (X W_Q)(X W_K)^T / sqrt(d) = kappa (H G)(C L)^T / d^1.5 up to row constants
            G = _draws(gens, seeds, (p, p), dtype, device)
            L = bartlett(p, d, gens=gens, seeds=seeds, dtype=dtype, device=device)
            H = O(Z)  # tokens
            C = O(torch.cat([torch.zeros_like(Z[:, :1]), Z[:, 1:]], dim=1))  # centred tokens
            B, log_att = centred_softmax((H @ G) @ (C @ L).mT / d ** 1.5, 2 * log_norm)
        else:
            B, log_att = centred_softmax(math.sqrt(LN2) * _draws(gens, seeds, (T, T), dtype, device))
        At = O.conjugate(B)  # rotated A_perp (over its scale): first column exactly zero
        At[:, :, 0] = 0.0
        if len(plain):  # A = 11^T/T + A_perp: rotated, e_0 e_0^T plus the scaled A_perp
            At[plain] *= log_att[plain].exp().to(dtype)[:, None, None]
            At[plain, 0, 0] = 1.0
        At[identity] = torch.eye(T, dtype=dtype, device=device)
        log_term = log_a + torch.where(centred, log_att, 0.0)  # log of the factor on A X W_V
        Y = At @ Z  # (n, T, p)
        if skip:  # W_V's e column, its k state directions, the Bartlett factor of the other d - 1 - k
            W = [_draws(gens, seeds, (p, p), dtype, device)]
            if d - p:
                W.append(bartlett(p, d - p, gens=gens, seeds=seeds, dtype=dtype, device=device))
            Y = log_term.exp().to(dtype)[:, None, None] * (Y @ torch.cat(W, dim=-1))
            Y[..., :p] += Z
            if d - p:  # rotate the e^perp part (width 2k + 1) back to k = T columns
                Y = torch.cat([Y[..., :1], torch.linalg.qr(Y[..., 1:].mT, mode="r")[1].mT], dim=-1)
        else:  # W_V's e column, then the Bartlett factor of its d - 1 others (zero columns dropped)
            W = torch.cat([_draws(gens, seeds, (p, 1), dtype, device),
                           bartlett(p, d - 1, gens=gens, seeds=seeds, dtype=dtype, device=device)], dim=-1)
            Y = (Y @ W)[..., :1 + min(p, d - 1)]
            log_norm = log_norm + log_term
        if len(ln):
            Y[ln] = _layernorm(Y[ln], O, T)
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
    centred parts are kept separately).
    """
    names = config_names(configs)
    T, d = width_dims(T, gamma)
    if T > d:
        raise ValueError(f"gamma must be <= 1 (orthonormal tokens), got T={T}, d={d}")
    depth = _validate.integer("depth", depth, minimum=1)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    seed = _validate.seed(seed)
    authors_skip = _validate.flag("authors_skip", authors_skip)
    device, dtype = resolve(device, dtype)
    out = {}
    for family in (("iid", "identity"), ("qk",)):
        for skip in (False, True):
            part = [n for n in names if CONFIGS[n].attention in family and (CONFIGS[n].skip is not None) == skip]
            if not part:
                continue
            res = _run(part, T, d, depth, seeds, seed, authors_skip, dtype, device)
            out.update({name: {m: res[m][i].cpu() for m in METRICS} for i, name in enumerate(part)})
    return {name: out[name] for name in names}


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


def _settings(**kw) -> dict:
    return json.loads(json.dumps(kw))


def _values(name, values, check, **bounds) -> list:
    """A non-empty list of values, each checked by ``check(name, value, **bounds)``."""
    if not isinstance(values, (list, tuple)) or not values:
        raise TypeError(f"{name} must be a non-empty list, got {values!r}")
    return [check(name, v, **bounds) for v in values]


def run_grid(out, configs="all", *, T=None, gamma=None, depth=10, seeds=5, base_seed=0, authors_skip=False,
             dtype="float32", device=None, executor=None, force=False, progress=True) -> Table:
    """Run the grid into ``out/depth.csv`` (resumable) and return it as a :class:`rcteach.tools.sweep.Table`.

    One sweep point per (T, gamma) (default :data:`GRID`), all ``configs`` batched in it, seeded from
    the point (:func:`rcteach.tools.sweep.point_seed`), so serial, resumed and ``executor`` runs give the
    same table.  The settings go to ``out/depth.json``; resuming a CSV made with other settings raises
    ValueError unless ``force=True`` (which starts a new table).  ``executor``: any
    ``concurrent.futures.Executor`` or dask ``Client`` (see :func:`rcteach.tools.sweep.sweep`).
    """
    if not isinstance(out, (str, os.PathLike)) or isinstance(os.fspath(out), bytes):
        raise TypeError(f"out must be a directory path (str or os.PathLike), got {type(out).__name__}")
    names = config_names(configs)
    grid = {"T": _values("T", GRID["T"] if T is None else T, _validate.integer, minimum=2),
            "gamma": _values("gamma", GRID["gamma"] if gamma is None else gamma, _validate.real, positive=True)}
    depth = _validate.integer("depth", depth, minimum=1)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    base_seed = _validate.seed(base_seed, "base_seed")
    authors_skip = _validate.flag("authors_skip", authors_skip)
    _validate.choice("dtype", dtype, ("float32", "float64"))
    force = _validate.flag("force", force)
    progress = _validate.flag("progress", progress)
    settings = _settings(configs=names, depth=depth, seeds=seeds, base_seed=base_seed, authors_skip=authors_skip,
                         dtype=dtype, device=resolve(device)[0].type)
    os.makedirs(out, exist_ok=True)
    csv_path, meta_path = os.path.join(out, "depth.csv"), os.path.join(out, "depth.json")
    resume = True
    if os.path.exists(csv_path) and os.path.getsize(csv_path) > 0:
        old = json.load(open(meta_path)) if os.path.exists(meta_path) else None
        if old != settings:
            if not force:
                raise ValueError(f"{csv_path} was made with other settings ({old}, now {settings}); "
                                 "pass force=True (--force) to start a new table")
            resume = False
    with open(meta_path, "w") as f:
        json.dump(settings, f, indent=1)
    fn = _Point(names, depth, authors_skip, dtype, device)
    return sweep(fn, grid, seeds=seeds, path=csv_path, resume=resume, base_seed=base_seed, progress=progress,
                 desc="grid", executor=executor, timing=False)


class _Point:
    """The sweep function of :func:`run_grid` (a picklable callable for executors)."""

    __name__ = "grid"

    def __init__(self, names, depth, authors_skip, dtype, device):
        self.kw = dict(configs=names, depth=depth, authors_skip=authors_skip, dtype=dtype, device=device)

    def __call__(self, T, gamma, seeds, seed):
        return grid_rows(T, gamma, seeds=seeds, seed=seed, **self.kw)
