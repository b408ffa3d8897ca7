"""Benchmark: rcteach against the bare torch kernels on the same sizes (``python -m rcteach bench``).

For each T, on a batch of independent matrices, the median wall time of

* ``random_attention + spectrum``  vs  ``randn -> softmax -> linalg.eigvals``;
* ``stable_rank``  vs  ``linalg.svdvals`` and its sum (the Gram definition costs the same).

The ratio is the overhead of validation, seeding and sorting; the target is <= 1.1.
"""

from __future__ import annotations

import csv
import math
import statistics
import time
from collections.abc import Callable

import torch

from .attention import LN2, random_attention
from .device import resolve
from .metrics import spectrum, stable_rank


def _paired_medians(kit: Callable[[], object], bare: Callable[[], object], repeats: int, device: torch.device):
    """Median seconds of ``kit`` and ``bare``, timed alternately so that drifting load hits both."""
    def timed(fn):
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    timed(kit), timed(bare)  # warm-up
    pairs = [(timed(kit), timed(bare)) for _ in range(repeats)]
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def _cases(T: int, batch: int, device: torch.device, dtype: torch.dtype):
    """(name, rcteach callable, bare-kernel callable) for one size."""
    gen = torch.Generator(device=device)

    def bare_spectrum():
        gen.manual_seed(0)
        g = math.sqrt(LN2) * torch.randn(batch, T, T, generator=gen, device=device, dtype=dtype)
        return torch.linalg.eigvals(torch.softmax(g, dim=-1))

    def kit_spectrum():
        return spectrum(random_attention(T, batch=batch, seed=0, device=device, dtype=dtype))

    X = random_attention(T, batch=batch, seed=1, device=device, dtype=dtype)

    def bare_stable_rank():
        s2 = torch.linalg.svdvals(X).square()
        return s2.sum(-1) / s2[..., 0]

    def kit_stable_rank():
        return stable_rank(X)

    return [("random_attention + spectrum", kit_spectrum, bare_spectrum),
            ("stable_rank", kit_stable_rank, bare_stable_rank)]


def run(sizes=(128, 256, 512, 1024), batch=8, repeats=5, device=None, dtype=None) -> list[dict]:
    """Time every case at every T; returns rows with seconds for rcteach and the bare kernel."""
    device, dtype = resolve(device, dtype)
    rows = []
    for T in sizes:
        for name, kit, bare in _cases(T, batch, device, dtype):
            t_kit, t_bare = _paired_medians(kit, bare, repeats, device)
            rows.append({"case": name, "T": T, "batch": batch, "device": str(device), "dtype": str(dtype).removeprefix("torch."),
                         "bare_s": t_bare, "rcteach_s": t_kit, "ratio": t_kit / t_bare})
    return rows


def format_rows(rows: list[dict]) -> str:
    head = f"{'case':<30} {'T':>5} {'batch':>5} {'bare (s)':>10} {'rcteach (s)':>12} {'ratio':>6}"
    lines = [head, "-" * len(head)]
    lines += [f"{r['case']:<30} {r['T']:>5} {r['batch']:>5} {r['bare_s']:>10.4f} {r['rcteach_s']:>12.4f} {r['ratio']:>6.2f}"
              for r in rows]
    return "\n".join(lines)


def main(args) -> int:
    rows = run(args.sizes, args.batch, args.repeats, args.device)
    print(format_rows(rows))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {args.csv}")
    return 0
