"""The authors' whole grid side by side with their code (``python -m rcteach bench --grid [--official PATH]``).

:func:`grid_side_by_side` runs rcteach's 25-configuration grid (:mod:`rcteach.grid`) and, when
``official`` names a checkout of the Mind-the-Gap code, their ``stable_ranks.py``, each in its own
process on one core (``OMP_NUM_THREADS=1``), rcteach before and after the official run so that
drifting load hits both: CPU and wall seconds, their ratio, peak memory, non-finite values, and
rcteach's fitted cost exponents in T and in d (:func:`fit_cost_exponents`).  It also measures a floor
under any exact implementation on one core (:func:`kernel_floor`), and with it the largest ratio
such an implementation could reach.
"""

from __future__ import annotations

import csv
import math
import os
import statistics
import sys
import time

import torch

GRID_REFERENCE_S = 116.0
"""Seconds the official Mind-the-Gap code took for its README grid on one core (issue 16's measurement)."""

POINT = dict(T=1000, gamma=1.0, configs=("A", "A_perp", "A + LN", "A(X)"), seeds=5, depth=10)
"""The large point timed next to the README grid: the paper's claims concern T and d of order 10^2-10^3."""

_OFFICIAL_NAMES = {"A_perp": "$A^{\\perp}$", "A(X)_perp": "$A(X)^{\\perp}$"}  # ours -> their configs.py keys


def lean_point(T, gamma, configs=POINT["configs"], *, depth=10, seeds=5, seed=0) -> dict:
    """The baseline of the large point: the plain float32 d x d simulation, batched over seeds, in torch.

    Orthonormal tokens X0 (T, d), d = round(T/gamma); per layer W_V (d, d) with N(0, 1) entries and the
    attention (``iid``: softmax of N(0, ln 2) logits; ``qk``: softmax((X W_Q)(X W_K)^T / sqrt(d)) with
    W_Q, W_K N(0, 1/d)), X <- A X W_V (A - 1/T when centred; then LayerNorm when the configuration has
    it), and the Gram stable rank sum s^4 / s_1^4 from ``eigvalsh`` of the Gram matrix of X / ||X||_F.
    No skip configurations.  Returns {config: Tensor (depth, seeds)} (NaN where X overflowed).
    """
    from ..grid import CONFIGS
    from ..theory import LN2

    d = round(T / gamma)
    g = torch.Generator().manual_seed(seed)
    X0 = torch.linalg.qr(torch.randn(seeds, d, T, generator=g)).Q.mT  # (seeds, T, d), orthonormal rows
    out = {}
    for name in configs:
        cfg = CONFIGS[name]
        X, ranks = X0, []
        for _ in range(depth):
            if cfg.attention == "qk":
                W_Q, W_K = (torch.randn(seeds, d, d, generator=g) / math.sqrt(d) for _ in range(2))
                A = torch.softmax((X @ W_Q) @ (X @ W_K).mT / math.sqrt(d), dim=-1)
            else:
                A = torch.softmax(math.sqrt(LN2) * torch.randn(seeds, T, T, generator=g), dim=-1)
            X = (A - 1.0 / T if cfg.centred else A) @ X @ torch.randn(seeds, d, d, generator=g)
            if cfg.layernorm:
                X = torch.nn.functional.layer_norm(X, (d,))
            U = X / torch.linalg.matrix_norm(X)[:, None, None]
            finite = torch.isfinite(U).all((-2, -1))
            lam = torch.linalg.eigvalsh((U @ U.mT)[finite])
            rank = torch.full((seeds,), math.nan)
            rank[finite] = lam.square().sum(-1) / lam[:, -1].square()
            ranks.append(rank)
        out[name] = torch.stack(ranks).double()
    return out


def _point_child(side: str, T: int, gamma: float, configs: list, seeds: int, depth: int) -> None:
    """In a fresh process: the large point with rcteach (``side="rcteach"``) or the lean loop; prints JSON
    {compute_s, nonfinite}."""
    import json

    torch.set_num_threads(1)
    start = time.process_time()
    if side == "rcteach":
        from .. import grid

        res = grid.simulate(T, gamma, configs, depth=depth, seeds=seeds, seed=0)
        values = [v for m in res.values() for v in m.values()]
    else:
        values = list(lean_point(T, gamma, configs, depth=depth, seeds=seeds).values())
    seconds = time.process_time() - start
    print(json.dumps({"compute_s": seconds, "nonfinite": sum(int((~torch.isfinite(v)).sum()) for v in values)}))


def _grid_child(gammas: list[float], Ts: list[int], seeds: int, depth: int) -> None:
    """In a fresh process: rcteach's whole grid; prints JSON {points: [[T, d, cpu s]], nonfinite}."""
    import json

    from .. import grid

    torch.set_num_threads(1)
    points, bad = [], 0
    for gamma in gammas:
        for T in Ts:
            start = time.process_time()
            res = grid.simulate(T, gamma, "all", depth=depth, seeds=seeds, seed=0)
            points.append([T, round(T / gamma), time.process_time() - start])
            bad += sum(int((~torch.isfinite(v)).sum()) for m in res.values() for v in m.values())
    print(json.dumps({"points": points, "nonfinite": bad}))


def _tridiagonal_child(Ts: list[int], per_T: int) -> None:
    """In a fresh process: CPU seconds of LAPACK's ``ssytrd`` on ``per_T`` Gram matrices (T, T) per T
    (Wishart, the Gram of a (T, T + 1) state); prints them."""
    import numpy as np
    from scipy.linalg import lapack

    sytrd = lapack.get_lapack_funcs("sytrd", dtype=np.float32)
    rng = np.random.default_rng(0)
    seconds = 0.0
    for T in Ts:
        Z = rng.standard_normal((per_T, T, T + 1), dtype=np.float32)
        S = np.matmul(Z, Z.transpose(0, 2, 1))
        start = time.process_time()
        for a in S:
            sytrd(a, lower=1)
        seconds += time.process_time() - start
    print(seconds)


def _child(cmd, cwd, env) -> dict:
    """Run ``cmd`` to completion; its own CPU seconds (user + sys), wall seconds, peak RSS (MB) and stdout."""
    import subprocess
    import tempfile

    with tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{text[-2000:]}")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall, "peak_mb": usage.ru_maxrss / 1024,
            "stdout": text}


def _official_nonfinite(folder) -> tuple[int, int]:
    """(non-finite, all) stable-rank values in the CSVs the official code wrote under ``folder``."""
    bad = total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            if name.endswith(".csv"):
                with open(os.path.join(root, name), newline="") as f:
                    for row in csv.DictReader(f):
                        total += 1
                        bad += not math.isfinite(float(row["stable_rank"]))
    return bad, total


def kernel_floor(T=None, gamma=None, *, seeds=5, depth=10, env=None) -> dict:
    """A floor, in CPU seconds on one core, under any exact computation of the grid in one torch process.

    Every stable rank needs the top eigenvalue of a (T, T) Gram matrix (per network, layer and
    (T, gamma): 25 x seeds x depth x len(gamma) matrices per T), and every dense symmetric eigensolver
    first reduces the matrix to tridiagonal form (LAPACK ``ssytrd``, (4/3) T^3 flops); the process
    also starts Python and imports torch.  Each is measured in a fresh process with
    OMP_NUM_THREADS=1: {import_s (a process that only imports rcteach.grid), eig_s, total_s}.  The
    draws, the products A X W_V and everything else come on top, so the floor is not reachable.
    """
    import tempfile

    from .. import grid

    Ts = list(grid.GRID["T"] if T is None else T)
    n_gamma = len(grid.GRID["gamma"] if gamma is None else gamma)
    per_T = len(grid.CONFIGS) * seeds * depth * n_gamma
    env = env or {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    code = f"from rcteach.tools.bench_grid import _tridiagonal_child; _tridiagonal_child({Ts!r}, {per_T})"
    with tempfile.TemporaryDirectory() as tmp:
        import_s = _child([sys.executable, "-c", "import rcteach.grid"], tmp, env)["cpu_s"]
        eig_s = float(_child([sys.executable, "-c", code], tmp, env)["stdout"].strip().splitlines()[-1])
    return {"import_s": import_s, "eig_s": eig_s, "total_s": import_s + eig_s}


def fit_cost_exponents(points) -> tuple[float, float]:
    """(p, q) of time ~ T^p d^q by least squares on log time over points [(T, d, seconds), ...]."""
    A = torch.tensor([[1.0, math.log(T), math.log(d)] for T, d, _ in points], dtype=torch.float64)
    y = torch.tensor([[math.log(s)] for _, _, s in points], dtype=torch.float64)
    coef = torch.linalg.lstsq(A, y).solution[:, 0]
    return float(coef[1]), float(coef[2])


def grid_side_by_side(official=None, *, T=None, gamma=None, seeds=5, depth=10, point=True, log=print) -> dict:
    """Time the authors' grid: rcteach (:mod:`rcteach.grid`, all 25 configurations, every layer) and, with
    ``official`` (a checkout of the Mind-the-Gap code), their ``stable_ranks.py`` on the same grid.

    Each run is a fresh process with OMP_NUM_THREADS=1, imports included: rcteach, then the official
    code (their README command, one process), then rcteach again, so that a drifting load hits both
    sides (rcteach's numbers are the mean of its two runs).  Reported per side: CPU seconds of the
    process (user + sys: robust to a loaded machine), wall seconds, peak RSS; for rcteach also the
    compute-only CPU time, the fitted exponents of its cost time ~ T^p d^q over the grid points (the
    faster of the two runs per point), and the count of non-finite values (the official count is
    read from its CSVs).  Without ``official``, one rcteach run, compared with :data:`GRID_REFERENCE_S`.
    ``point``: then also the large point :data:`POINT` (:func:`point_side_by_side`), under ``"point"``.
    """
    import json
    import tempfile

    from .. import grid

    Ts = list(grid.GRID["T"] if T is None else T)
    gammas = list(grid.GRID["gamma"] if gamma is None else gamma)
    env = _env()
    if official is not None:
        script = os.path.join(official, "stable_ranks.py")
        if not os.path.exists(script):
            raise ValueError(f"official must be a checkout of the Mind-the-Gap code with stable_ranks.py, got "
                             f"{official}")
    load_before = os.getloadavg()
    runs, theirs = [], None
    code = f"from rcteach.tools.bench_grid import _grid_child; _grid_child({gammas!r}, {Ts!r}, {seeds}, {depth})"
    with tempfile.TemporaryDirectory() as tmp:
        for side in ("rcteach", "official", "rcteach") if official is not None else ("rcteach",):
            if side == "rcteach":
                r = _child([sys.executable, "-c", code], tmp, env)
                r.update(json.loads(r["stdout"].strip().splitlines()[-1]))
                runs.append(r)
            else:
                r = _child([sys.executable, script, "--list_gammas", *map(str, gammas), "--n_simulations", str(seeds),
                            "--n_layers", str(depth), "--list_n", *map(str, Ts)], tmp, _official_env(env, tmp))
                theirs = {k: r[k] for k in ("cpu_s", "wall_s", "peak_mb")}
                theirs["nonfinite"], theirs["values"] = _official_nonfinite(tmp)
            log(f"{side:8s}: {r['cpu_s']:.1f} s CPU, {r['wall_s']:.1f} s wall")
    ours = {k: statistics.fmean(r[k] for r in runs) for k in ("cpu_s", "wall_s")}
    ours["peak_mb"] = max(r["peak_mb"] for r in runs)
    ours["compute_s"] = statistics.fmean(sum(p[2] for p in r["points"]) for r in runs)
    ours["points"] = [[T_, d_, min(r["points"][i][2] for r in runs)] for i, (T_, d_, _) in enumerate(runs[0]["points"])]
    ours["nonfinite"] = max(r["nonfinite"] for r in runs)
    ours["exponent_T"], ours["exponent_d"] = fit_cost_exponents(ours["points"])
    floor = kernel_floor(Ts, gammas, seeds=seeds, depth=depth, env=env)
    out = {"rcteach": ours, "official": theirs, "floor": floor, "load_before": load_before,
           "load_after": os.getloadavg(), "values": len(Ts) * len(gammas) * seeds * depth * len(grid.CONFIGS)}
    reference = theirs["cpu_s"] if theirs else GRID_REFERENCE_S
    out["ratio_cpu"] = reference / ours["cpu_s"]
    out["ratio_floor"] = reference / floor["total_s"]
    out["ratio_wall"] = (theirs["wall_s"] if theirs else GRID_REFERENCE_S) / ours["wall_s"]
    out["point"] = point_side_by_side(official, log=log, **POINT) if point else None
    return out


def _env() -> dict:
    """The environment of every timed process: one thread, this checkout of rcteach first on the path."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _official_env(env, tmp) -> dict:
    """``env`` for the official code, run in ``tmp``: their utils.py imports omegaconf for helpers the grid
    never uses, so a one-line stand-in goes on the path where it is not installed."""
    import importlib.util

    if importlib.util.find_spec("omegaconf") is not None:
        return env
    with open(os.path.join(tmp, "omegaconf.py"), "w") as f:
        f.write("DictConfig = dict  # stand-in: the grid never uses it\n")
    return {**env, "PYTHONPATH": tmp}


def point_side_by_side(official=None, *, T=POINT["T"], gamma=POINT["gamma"], configs=POINT["configs"],
                       seeds=POINT["seeds"], depth=POINT["depth"], log=print) -> dict:
    """One large point (T, gamma) of a few configurations, every layer: rcteach, the lean float32 loop
    (:func:`lean_point`) and, with ``official``, the official code's ``produce_stable_ranks`` for the same
    configurations, each in a fresh one-thread process (rcteach before and after the others; its numbers
    are the mean of its two runs).  Returns {side: {cpu_s, wall_s, peak_mb, compute_s, nonfinite}} and the
    compute-time ratios of the official code and of the lean loop to rcteach."""
    import json
    import tempfile

    configs = list(configs)
    env = _env()
    if official is not None and not os.path.exists(os.path.join(official, "stable_ranks.py")):
        raise ValueError(f"official must be a checkout of the Mind-the-Gap code with stable_ranks.py, got {official}")
    names = [_OFFICIAL_NAMES.get(c, c) for c in configs]
    their_code = (f"import sys, time; sys.path.insert(0, {os.path.abspath(official or '.')!r}); import torch; "
                  "torch.set_num_threads(1); import stable_ranks, configs; start = time.process_time(); "
                  f"[stable_ranks.produce_stable_ranks(n, configs.configs[n], {depth}, list_n=[{T}], "
                  f"n_simulations={seeds}, list_gammas=[{gamma}]) for n in {names!r}]; "
                  "print('{\"compute_s\": %r}' % (time.process_time() - start))")
    sides = ("rcteach", "lean", "official", "rcteach") if official is not None else ("rcteach", "lean", "rcteach")
    runs = {side: [] for side in sides}
    with tempfile.TemporaryDirectory() as tmp:
        for side in sides:
            if side == "official":
                r = _child([sys.executable, "-c", their_code], tmp, _official_env(env, tmp))
            else:
                code = (f"from rcteach.tools.bench_grid import _point_child; "
                        f"_point_child({side!r}, {T}, {gamma}, {configs!r}, {seeds}, {depth})")
                r = _child([sys.executable, "-c", code], tmp, env)
            r.update(json.loads(r["stdout"].strip().splitlines()[-1]))
            if side == "official":
                r["nonfinite"] = _official_nonfinite(tmp)[0]
            runs[side].append(r)
            log(f"T={T} {side:8s}: {r['compute_s']:.1f} s CPU computing, {r['cpu_s']:.1f} s CPU in all")
    out = {side: {k: statistics.fmean(r[k] for r in rs) for k in ("cpu_s", "wall_s", "peak_mb", "compute_s")}
           | {"nonfinite": max(r["nonfinite"] for r in rs)} for side, rs in runs.items()}
    out["settings"] = dict(T=T, gamma=gamma, configs=configs, seeds=seeds, depth=depth)
    for side in ("official", "lean"):
        if side in out:
            out[f"ratio_{side}"] = out[side]["compute_s"] / out["rcteach"]["compute_s"]
    return out


def format_point(res: dict) -> str:
    """The result of :func:`point_side_by_side` as lines of text."""
    p = res["settings"]
    lines = [f"large point: T = {p['T']}, gamma = {p['gamma']:g}, {', '.join(p['configs'])}, {p['depth']} layers, "
             f"{p['seeds']} seeds, one core each (CPU seconds computing, and of the whole process)"]
    for side, label in (("official", "official code"), ("lean", "lean f32 loop"), ("rcteach", "rcteach")):
        if side in res:
            r = res[side]
            lines.append(f"  {label:13s} : {r['compute_s']:7.1f} s ({r['cpu_s']:.1f} s)  peak {r['peak_mb']:6.0f} MB  "
                         f"non-finite {r['nonfinite']:.0f}")
    ratios = [f"{res[f'ratio_{side}']:.1f}x less CPU than the {label}" for side, label in
              (("official", "official code"), ("lean", "lean loop")) if f"ratio_{side}" in res]
    lines.append("  rcteach       : " + ", ".join(ratios))
    return "\n".join(lines)


def format_grid(res: dict) -> str:
    """The side-by-side result of :func:`grid_side_by_side` as lines of text."""
    o, t = res["rcteach"], res["official"]
    lines = [f"authors' grid: 25 configurations x {len({p[0] for p in o['points']})} T x gamma, every layer "
             f"({res['values']} stable ranks per side), one core each (OMP_NUM_THREADS=1)"]
    if t is not None:
        lines.append(f"  official code : {t['cpu_s']:7.1f} s CPU  {t['wall_s']:7.1f} s wall  peak {t['peak_mb']:6.0f} "
                     f"MB  non-finite {t['nonfinite']} of {t['values']}")
    else:
        lines.append(f"  official code : {GRID_REFERENCE_S:7.1f} s (reference: issue 16, one core; pass --official "
                     f"PATH "
                     "to time it here)")
    lines.append(f"  rcteach       : {o['cpu_s']:7.1f} s CPU  {o['wall_s']:7.1f} s wall  peak {o['peak_mb']:6.0f} MB  "
                 f"non-finite {o['nonfinite']}  (compute only {o['compute_s']:.1f} s CPU)")
    lines.append(f"  ratio         : {res['ratio_cpu']:.1f}x (CPU)  {res['ratio_wall']:.1f}x (wall)")
    lines.append(f"  rcteach cost  : time ~ T^{o['exponent_T']:.2f} d^{o['exponent_d']:.2f} over the grid points")
    f = res["floor"]
    lines.append(f"  floor         : {f['import_s']:.1f} s starting Python and importing torch + {f['eig_s']:.1f} s of "
                 f"tridiagonal reductions (one per stable rank) = {f['total_s']:.1f} s CPU: no computation with a "
                 f"dense eigensolver in one torch process can beat {res['ratio_floor']:.1f}x")
    lines.append(load_line(res["load_before"], res["load_after"]))
    if res.get("point") is not None:
        lines.append(format_point(res["point"]))
    return "\n".join(lines)


def load_line(before, after) -> str:
    """The load averages (1, 5, 15 min) before and after a timed run, as one line of a report."""
    return "  load average  : {:.2f} {:.2f} {:.2f} before, {:.2f} {:.2f} {:.2f} after".format(*before, *after)
