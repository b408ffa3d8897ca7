"""Peak memory of one call (:func:`peak_memory_mb`), for the benchmarks.

On CUDA, ``torch.cuda.max_memory_allocated`` above the memory allocated before the call.  On the
CPU torch's allocator keeps no statistics (and tracemalloc does not see it), so on Linux the freed heap is
returned to the OS (``malloc_trim``), the kernel's peak-RSS mark is reset (``/proc/self/clear_refs``)
and the peak resident set size VmHWM above the pre-call VmRSS is reported: every page the call
touched, including LAPACK workspaces and allocator slack, to page granularity (MiB values below
about 0.1 are noise).  Elsewhere the ``ru_maxrss`` increase is used, which is 0 when the call stays
under the process's earlier high-water mark; on Windows (no ``resource`` module) NaN.
"""

from __future__ import annotations

import ctypes
import math
import sys
from collections.abc import Callable

import torch

__all__ = ["peak_memory_mb"]


def _proc_status() -> dict[str, int] | None:
    """VmRSS and VmHWM (bytes) from /proc/self/status, or None without /proc."""
    try:
        with open("/proc/self/status") as f:
            return {k: int(v.split()[0]) * 1024 for k, v in (line.split(":", 1) for line in f)
                    if k in ("VmRSS", "VmHWM")}
    except (OSError, ValueError):
        return None


def _reset_peak_rss() -> bool:
    """Release freed heap to the OS and reset the kernel's peak-RSS mark (Linux); False if impossible.

    (No gc.collect(): tensors are freed by reference counting, and a collection costs ~0.3 s.)
    """
    try:
        ctypes.CDLL(None).malloc_trim(0)  # glibc: give freed arenas back, so reuse shows up as new pages
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current VmRSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def peak_memory_mb(fn: Callable[[], object], device) -> float:
    """Peak memory (MiB) that one call of ``fn`` adds above what was in use before it (module doc)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        out = fn()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - base
        del out
        return peak / 2 ** 20
    if _reset_peak_rss():
        base = _proc_status()["VmRSS"]
        out = fn()
        peak = _proc_status()["VmHWM"] - base
        del out
        return max(peak, 0) / 2 ** 20
    try:
        import resource  # POSIX only
    except ImportError:  # Windows: no peak memory without psutil
        fn()
        return math.nan
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # the process's high-water mark
    out = fn()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    del out
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return max(after - before, 0) * scale / 2 ** 20
