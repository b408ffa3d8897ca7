"""Benchmark suite: rcteach against the bare torch kernels, cost growth and memory (``python -m rcteach bench``).

Three sections, measured in one run and written to one tidy CSV (``--csv``, a ``section`` column):

``kernel``
    For each case and each T, the median wall time of the rcteach call and of the bare torch
    kernels computing the same numbers on the same tensors, timed alternately (paired) so that
    drifting load hits both; ``ratio`` = the median over pairs of rcteach / bare (robust to load
    that drifts between pairs); ``ratio_min`` = min rcteach / min bare, robust to preemption on a
    loaded machine (prefer it for calls of a few milliseconds).  Each case has a target
    (:data:`TARGETS`, column ``target``): the row says ``MISSED`` when both ratios exceed it, and the
    table ends with the count of misses.  Peak memory of one extra run of each (``peak_mb_*``, see
    below).  Cases (batch B of independent matrices):

    * ``spectrum``: ``random_attention`` + ``spectrum`` vs randn -> softmax -> ``linalg.eigvals``;
    * ``stable_rank``: ``stable_rank`` vs ``linalg.eigvalsh`` of the Gram matrix and its sums;
    * ``stable_rank_lanczos``: the matrix-free ``matfree.stable_rank(method="lanczos")`` of A vs the same
      dense ``eigvalsh`` kernel (a ratio < 1 is the saving of not decomposing; no target: another
      algorithm, O(k T^2) against O(T^3), slower below a few hundred tokens -- see its fitted exponent);
    * ``bulk_radius_frobenius``: ``matfree.frobenius_bulk_radius`` vs the centring and norm in torch;
    * ``width``: ``width_stable_ranks`` (gamma = 1) vs randn/softmax/matmul/``eigvalsh``;
    * ``trajectory``: ``propagate`` over ``depth`` layers (d = T, Gaussian values, all metrics per
      layer) vs the same loop of bare kernels.

``fit``
    Per case, the exponent p of time ~ T^p by log-log least squares (:func:`fit_exponent`) for
    rcteach and for the bare kernel, next to the kernel's complexity (``expected``): 3 for the
    dense decompositions, 2 for the O(T^2) and matrix-free paths.  "No step worse than its kernel"
    means p(rcteach) <= p(bare) up to timing noise.

``depth``
    ``propagate`` at one T for several depths, with the fitted exponent in the depth (expected 1).

Peak memory: :func:`rcteach.tools.memory.peak_memory_mb`, one extra untimed call after the timed ones.
``--grid``: the authors' whole grid side by side with their code (:mod:`rcteach.tools.bench_grid`).
``--threads``: the README's ``check`` in a default environment against pinned threads
(:mod:`rcteach.tools.bench_threads`).

Presets: ``--quick`` (T <= 256, a few seconds), the default (T up to 1024), and
``--gpu-suite`` (CUDA, T up to 16384 within a time budget; see scripts/gpu_benchmark.sh).
"""

from __future__ import annotations

import csv
import math
import os
import statistics
import time

import torch

from ..attention import random_attention
from ..depth import propagate
from ..device import resolve
from ..matfree import frobenius_bulk_radius
from ..matfree import stable_rank as matfree_stable_rank
from ..metrics import spectrum, stable_rank
from ..theory import LN2
from ..width import width_stable_ranks
from ._args import UsageError, checked_device, distinct
from .memory import peak_memory_mb

__all__ = ["CASES", "PRESETS", "TARGETS", "missed", "run", "run_depth", "fit_exponent", "fits", "suite", "format_rows",
           "write_csv", "peak_memory_mb", "main"]

CASES = ("spectrum", "stable_rank", "stable_rank_lanczos", "bulk_radius_frobenius", "width", "trajectory")
EXPECTED = {"spectrum": 3, "stable_rank": 3, "stable_rank_lanczos": 2, "bulk_radius_frobenius": 2, "width": 3,
            "trajectory": 3}
TARGETS = {"spectrum": 1.1, "stable_rank": 1.1, "stable_rank_lanczos": None, "bulk_radius_frobenius": 1.1, "width": 1.1,
           "trajectory": 1.1}
"""Largest acceptable rcteach / bare ratio per case: the kit's own work (validation, scaling, dispatch) within
10 % of the bare kernels.  None for ``stable_rank_lanczos``: a different algorithm, not the kernel's wrapper."""


def missed(row) -> bool:
    """True where a kernel or depth row misses its target: both its median ratio and its ratio of minima
    exceed :data:`TARGETS` (one ratio within it means the miss could be load on a shared machine)."""
    target = TARGETS.get(row.get("case"))
    if target is None or row.get("section") not in ("kernel", "depth"):
        return False
    ratios = [row.get("ratio", math.nan), row.get("ratio_min", math.nan)]
    return all(not (r <= target) for r in ratios if not math.isnan(r)) and any(not math.isnan(r) for r in ratios)

# sizes, batch, repeats, depths (for the depth section), trajectory depth, and per-case size caps
PRESETS = {
    "quick": dict(sizes=(64, 128, 256), batch=4, repeats=5, depths=(1, 2, 4, 8), depth=4, depth_T=128, max_T={}),
    # the general (non-symmetric) eigensolver costs ~10x an SVD: spectra stop at T = 512 on the CPU
    "default": dict(sizes=(128, 256, 512, 1024), batch=8, repeats=5, depths=(1, 2, 4, 8, 16), depth=4, depth_T=256,
                    max_T={"spectrum": 512}),
    # one H200: the general eigensolver (geev) runs partly on the host, so spectra stop at 4096;
    # dense symmetric/SVD kernels at 8192; the O(T^2) and matrix-free paths go to 16384
    "gpu": dict(sizes=(1024, 2048, 4096, 8192, 16384), batch=1, repeats=3, depths=(1, 2, 4, 8), depth=4, depth_T=2048,
                max_T={"spectrum": 4096, "stable_rank": 8192, "width": 8192, "trajectory": 8192}),
}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _paired(kit, bare, repeats, device):
    """(median kit s, median bare s, median of the per-pair ratios kit/bare, min kit s / min bare s).

    The median ratio is robust to load that drifts between pairs; the ratio of the minima to
    preemption on a shared machine (a millisecond call either finishes in its time slice or waits
    for the next one, so its times are bimodal and the medians of short calls are noise)."""
    def timed(fn):
        start = time.perf_counter()
        fn()
        _sync(device)
        return time.perf_counter() - start

    timed(kit), timed(bare)  # warm-up
    pairs = [(timed(kit), timed(bare)) for _ in range(repeats)]
    return (statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs),
            statistics.median(p[0] / p[1] for p in pairs), min(p[0] for p in pairs) / min(p[1] for p in pairs))


def _cases(T: int, batch: int, device: torch.device, dtype: torch.dtype, depth: int, only=CASES):
    """(name, rcteach callable, bare-kernel callable) for one size; the same tensors for both."""
    gen = torch.Generator(device=device)
    s = math.sqrt(LN2)
    out = []

    if "spectrum" in only:
        def bare_spectrum():
            gen.manual_seed(0)
            g = s * torch.randn(batch, T, T, generator=gen, device=device, dtype=dtype)
            return torch.linalg.eigvals(torch.softmax(g, dim=-1))

        def kit_spectrum():
            return spectrum(random_attention(T, batch=batch, seed=0, device=device, dtype=dtype))

        out.append(("spectrum", kit_spectrum, bare_spectrum))

    needs_A = {"stable_rank", "stable_rank_lanczos", "bulk_radius_frobenius"} & set(only)
    A = random_attention(T, batch=batch, seed=1, device=device, dtype=dtype) if needs_A else None

    def bare_stable_rank():  # squared singular values from the Gram matrix, as rcteach.stable_rank
        lam = torch.linalg.eigvalsh(A @ A.mT).clamp_min(0.0)
        return lam.sum(-1) / lam[..., -1]

    if "stable_rank" in only:
        out.append(("stable_rank", lambda: stable_rank(A), bare_stable_rank))
    if "stable_rank_lanczos" in only:
        out.append(("stable_rank_lanczos", lambda: matfree_stable_rank(A, method="lanczos"), bare_stable_rank))
    if "bulk_radius_frobenius" in only:
        def bare_bulk():
            return torch.linalg.matrix_norm(A - A.mean(-1, keepdim=True)) / math.sqrt(T)

        out.append(("bulk_radius_frobenius", lambda: frobenius_bulk_radius(A), bare_bulk))

    if "width" in only:
        def bare_width():
            gen.manual_seed(2)
            A = torch.softmax(s * torch.randn(batch, T, T, generator=gen, device=device, dtype=dtype), dim=-1)
            Y = torch.randn(batch, T, T, generator=gen, device=device, dtype=dtype)
            out = A @ Y
            lam = torch.linalg.eigvalsh(out @ out.mT).clamp_min(0.0)
            return lam.sum(-1) / lam[..., -1]

        def kit_width():
            return width_stable_ranks(T, 1.0, seeds=batch, seed=2, device=device, dtype=dtype)

        out.append(("width", kit_width, bare_width))

    if "trajectory" in only:
        X0 = torch.randn(batch, T, T, generator=gen.manual_seed(3), device=device, dtype=dtype) / math.sqrt(T)

        def bare_metrics(X):
            mu = torch.linalg.matrix_norm(X - X.mean(-2, keepdim=True))
            norm = torch.linalg.matrix_norm(X)
            s2 = torch.linalg.eigvalsh(X @ X.mT).clamp_min(0).flip(-1)
            return mu, s2.sum(-1) / s2[..., 0], s2.square().sum(-1) / s2[..., 0].square(), norm

        def bare_trajectory():
            gen.manual_seed(4)
            X, metrics = X0, [bare_metrics(X0)]
            for _ in range(depth):
                A = torch.softmax(s * torch.randn(batch, T, T, generator=gen, device=device, dtype=dtype), dim=-1)
                W = torch.randn(batch, T, T, generator=gen, device=device, dtype=dtype)
                X = (A @ X) @ W
                metrics.append(bare_metrics(X))
            return [torch.stack(m) for m in zip(*metrics)]

        def kit_trajectory():
            return propagate(X0, depth, seed=4)

        out.append(("trajectory", kit_trajectory, bare_trajectory))
    return out


def _row(section, name, T, depth, batch, device, dtype, t_kit, t_bare, mem_kit=math.nan, mem_bare=math.nan,
         ratio=None, ratio_min=math.nan):
    row = {"section": section, "case": name, "T": T, "depth": depth, "batch": batch, "device": str(device),
           "dtype": str(dtype).removeprefix("torch."), "bare_s": t_bare, "rcteach_s": t_kit,
           "ratio": ratio if ratio is not None else t_kit / t_bare if t_bare else math.nan, "ratio_min": ratio_min,
           "target": TARGETS.get(name) if section in ("kernel", "depth") else None,
           "peak_mb_bare": mem_bare, "peak_mb_rcteach": mem_kit,
           "exponent_bare": math.nan, "exponent_rcteach": math.nan, "expected": math.nan}
    row["missed"] = missed(row)
    return row


def run(sizes=(128, 256, 512, 1024), batch=8, repeats=5, device=None, dtype=None, *, cases=CASES, depth=4,
        memory=True, max_T=None, budget_s=None, log=None) -> list[dict]:
    """Time every case at every T (section ``kernel``); returns one row per (case, T).

    ``max_T`` caps T per case; ``budget_s`` skips a (case, T) whose predicted time (from the case's
    previous size and its expected exponent) would exceed what is left of the budget; ``log`` is
    called with each finished row (e.g. to append it to a file at once).
    """
    device, dtype = resolve(device, dtype)
    max_T = max_T or {}
    start = time.perf_counter()
    last: dict[str, tuple[int, float]] = {}
    rows = []
    for T in sizes:
        todo = [c for c in cases if T <= max_T.get(c, math.inf)]
        if budget_s is not None:
            left = budget_s - (time.perf_counter() - start)
            keep = []
            for c in todo:  # a case whose predicted time no longer fits what is left is skipped
                if c in last:
                    T0, t0 = last[c]
                    predicted = t0 * (T / T0) ** EXPECTED[c] * (2 * repeats + 4)
                    if predicted > left:
                        continue
                    left -= predicted
                keep.append(c)
            todo = keep
        for name, kit, bare in _cases(T, batch, device, dtype, depth, only=todo):
            t0 = time.perf_counter()
            t_kit, t_bare, ratio, ratio_min = _paired(kit, bare, repeats, device)
            mem_kit = peak_memory_mb(kit, device) if memory else math.nan
            mem_bare = peak_memory_mb(bare, device) if memory else math.nan
            last[name] = (T, (time.perf_counter() - t0) / (2 * repeats + 4))
            row = _row("kernel", name, T, depth if name == "trajectory" else 1, batch, device, dtype,
                       t_kit, t_bare, mem_kit, mem_bare, ratio, ratio_min)
            rows.append(row)
            if log is not None:
                log(row)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def run_depth(T=256, depths=(1, 2, 4, 8, 16), batch=8, repeats=5, device=None, dtype=None, log=None,
              budget_s=None) -> list[dict]:
    """``propagate`` against the bare loop at one T for several depths (section ``depth``).

    With ``budget_s``, stops before a depth once the elapsed time exceeds half the budget.
    """
    device, dtype = resolve(device, dtype)
    rows = []
    start = time.perf_counter()
    for L in depths:
        if budget_s is not None and time.perf_counter() - start > budget_s / 2:
            break
        (name, kit, bare), = _cases(T, batch, device, dtype, L, only=("trajectory",))
        t_kit, t_bare, ratio, ratio_min = _paired(kit, bare, repeats, device)
        row = _row("depth", name, T, L, batch, device, dtype, t_kit, t_bare, ratio=ratio, ratio_min=ratio_min)
        rows.append(row)
        if log is not None:
            log(row)
    return rows


def fit_exponent(x, y) -> float:
    """Slope p of log y = a + p log x by least squares (y ~ x^p); needs >= 2 distinct x, y > 0."""
    x, y = [float(v) for v in x], [float(v) for v in y]
    if len(x) != len(y) or len(set(x)) < 2:
        raise ValueError("fit_exponent needs x and y of the same length with >= 2 distinct x")
    if min(x) <= 0 or min(y) <= 0:
        raise ValueError("fit_exponent needs x > 0 and y > 0 (a log-log fit)")
    lx, ly = [math.log(v) for v in x], [math.log(v) for v in y]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def fits(rows: list[dict]) -> list[dict]:
    """Section ``fit``: per case, the fitted exponents in T (kernel rows) and in depth (depth rows)."""
    out = []
    for section, var in (("kernel", "T"), ("depth", "depth")):
        for name in dict.fromkeys(r["case"] for r in rows if r["section"] == section):
            part = [r for r in rows if r["section"] == section and r["case"] == name]
            if len({r[var] for r in part}) < 2:
                continue
            xs = [r[var] for r in part]
            row = _row("fit", name, f"{min(xs)}-{max(xs)}" if var == "T" else part[0]["T"],
                       f"{min(xs)}-{max(xs)}" if var == "depth" else part[0]["depth"], part[0]["batch"],
                       part[0]["device"], part[0]["dtype"], math.nan, math.nan)
            row["ratio"] = math.nan
            row["exponent_bare"] = fit_exponent(xs, [r["bare_s"] for r in part])
            row["exponent_rcteach"] = fit_exponent(xs, [r["rcteach_s"] for r in part])
            row["expected"] = EXPECTED[name] if var == "T" else 1
            row["fit_in"] = var
            out.append(row)
    return out


def suite(preset="default", *, device=None, dtype=None, sizes=None, batch=None, repeats=None, depths=None,
          budget_s=None, log=None) -> list[dict]:
    """The three sections with a preset's settings (``"quick"``, ``"default"``, ``"gpu"``), overridable."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(map(repr, PRESETS))}; got {preset!r}")
    p = dict(PRESETS[preset])
    sizes = tuple(sizes or p["sizes"])
    batch = batch or p["batch"]
    repeats = repeats or p["repeats"]
    depths = tuple(depths or p["depths"])
    device, dtype = resolve(device, dtype)
    start = time.perf_counter()
    rows = run(sizes, batch, repeats, device, dtype, depth=p["depth"], max_T=p["max_T"],
               budget_s=None if budget_s is None else 0.8 * budget_s, log=log)
    depth_T = min(p["depth_T"], max(sizes))
    left = None if budget_s is None else budget_s - (time.perf_counter() - start)
    if left is None or left > 0.1 * budget_s:
        rows += run_depth(depth_T, depths, batch, repeats, device, dtype, log=log, budget_s=left)
    return rows + fits(rows)


def _fmt(v, spec):
    if isinstance(v, float) and math.isnan(v):
        return ""
    return format(v, spec) if isinstance(v, (int, float)) else str(v)


def format_rows(rows: list[dict]) -> str:
    """The kernel, depth and fit sections as plain-text tables."""
    parts = []
    kernel = [r for r in rows if r.get("section", "kernel") in ("kernel", "depth")]
    if kernel:
        head = (f"{'section':<7} {'case':<22} {'T':>6} {'depth':>5} {'batch':>5} {'bare (s)':>10} {'rcteach (s)':>12} "
                f"{'ratio':>6} {'r(min)':>6} {'target':>6} {'peak MB bare':>12} {'peak MB rct':>12}")
        lines = [head, "-" * len(head)]
        for r in kernel:
            target = TARGETS.get(r["case"])
            lines.append(f"{r.get('section', 'kernel'):<7} {r['case']:<22} {r['T']:>6} {r.get('depth', 1):>5} "
                         f"{r['batch']:>5} {r['bare_s']:>10.4f} {r['rcteach_s']:>12.4f} {r['ratio']:>6.2f} "
                         f"{_fmt(r.get('ratio_min', math.nan), '.2f'):>6} {_fmt(target or math.nan, '.2f'):>6} "
                         f"{_fmt(r.get('peak_mb_bare', math.nan), '.1f'):>12} "
                         f"{_fmt(r.get('peak_mb_rcteach', math.nan), '.1f'):>12}"
                         + ("  MISSED target" if missed(r) else ""))
        misses = sum(map(missed, kernel))
        with_target = sum(TARGETS.get(r["case"]) is not None for r in kernel)
        lines.append(f"{misses} of {with_target} ratios MISSED their target" if misses else
                     f"all {with_target} ratios within their target")
        parts.append("\n".join(lines))
    fit = [r for r in rows if r.get("section") == "fit"]
    if fit:
        head = f"{'fitted exponent':<22} {'in':>5} {'range':>12} {'bare':>6} {'rcteach':>8} {'expected':>8}"
        lines = [head, "-" * len(head)]
        for r in fit:
            rng = r["T"] if r["fit_in"] == "T" else r["depth"]
            lines.append(f"{r['case']:<22} {r['fit_in']:>5} {rng:>12} {r['exponent_bare']:>6.2f} "
                         f"{r['exponent_rcteach']:>8.2f} {r['expected']:>8}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


FIELDS = ["section", "case", "T", "depth", "batch", "device", "dtype", "bare_s", "rcteach_s", "ratio", "ratio_min",
          "target", "missed", "peak_mb_bare", "peak_mb_rcteach", "exponent_bare", "exponent_rcteach", "expected",
          "fit_in"]


def write_csv(rows: list[dict], path) -> None:
    """All sections in one tidy CSV (empty cells where a column does not apply)."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: _fmt(r.get(k, math.nan), "") if isinstance(r.get(k), float) else r.get(k, "")
                             for k in FIELDS})


_NOT_WITH_GRID = ("quick", "gpu_suite", "sizes", "depths", "batch", "repeats", "device", "dtype", "budget", "csv")


def _check_options(args) -> None:
    """Refuse contradictory options before anything runs: --grid takes only --official (and --official needs
    --grid); a size or depth given twice."""
    given = [k for k in _NOT_WITH_GRID if getattr(args, k, None) not in (None, False)]
    if getattr(args, "grid", False) and given:
        raise UsageError(f"--grid times the authors' whole grid and takes only --official; "
                         f"--{given[0].replace('_', '-')} does not apply to it")
    if not getattr(args, "grid", False) and getattr(args, "official", None):
        raise UsageError("--official needs --grid")
    if getattr(args, "official", None) and not os.path.isfile(os.path.join(args.official, "stable_ranks.py")):
        raise UsageError(f"--official: {args.official} is not a checkout of the Mind-the-Gap code (no stable_ranks.py)")
    distinct("--sizes", getattr(args, "sizes", None))
    distinct("--depths", getattr(args, "depths", None))


def main(args) -> int:
    _check_options(args)
    if getattr(args, "threads", False):
        from .bench_threads import format_threads, threads_side_by_side

        print(format_threads(threads_side_by_side(repeats=args.repeats or 1)))
        return 0
    if getattr(args, "grid", False):
        from .bench_grid import format_grid, grid_side_by_side

        print(format_grid(grid_side_by_side(args.official)))
        return 0
    preset = "gpu" if getattr(args, "gpu_suite", False) else "quick" if getattr(args, "quick", False) else "default"
    device = args.device
    if preset == "gpu" and device is None:
        device = checked_device("cuda", origin="--gpu-suite")
    dtype = {None: None, "float32": torch.float32, "float64": torch.float64}[getattr(args, "dtype", None)]
    budget = getattr(args, "budget", None)
    if preset == "gpu" and budget is None:
        budget = 360.0
    partial = writer = None
    if args.csv:  # rows land on disk as they finish, so a killed run keeps them
        try:
            partial = open(args.csv + ".partial", "w", newline="")
        except OSError as err:
            raise UsageError(f"--csv: cannot write {args.csv}.partial: {err.strerror or err}") from None
        writer = csv.DictWriter(partial, fieldnames=FIELDS)
        writer.writeheader()

    def to_disk(row):
        writer.writerow({k: row.get(k, "") for k in FIELDS})
        partial.flush()

    started = time.perf_counter()
    try:
        rows = suite(preset, device=device, dtype=dtype, sizes=args.sizes, batch=args.batch, repeats=args.repeats,
                     depths=getattr(args, "depths", None), budget_s=budget, log=to_disk if args.csv else None)
    finally:
        if partial is not None:
            partial.close()
    dev, dt = resolve(device, dtype)
    print(f"rcteach bench, preset {preset}, device {dev}, dtype {str(dt).removeprefix('torch.')}, "
          f"torch threads {torch.get_num_threads()}, {time.perf_counter() - started:.1f} s")
    print(format_rows(rows))
    if args.csv:
        write_csv(rows, args.csv)
        os.remove(args.csv + ".partial")
        print(f"wrote {args.csv}")
    return 0
