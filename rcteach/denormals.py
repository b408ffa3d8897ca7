"""Flush-to-zero for float32 work on the CPU: subnormal numbers are read and written as 0.

Why.  A collapsing stack keeps its distance to consensus apart from its consensus part (the grid's
rotated state, :mod:`rcteach.grid`), and that centred part shrinks layer after layer until it falls
below float32's smallest normal number, 2^-126 ~ 1.2e-38, into the subnormal range.  x86 CPUs
handle subnormal operands in microcode: a (2, 1000, 1000) float32 product whose operands are
subnormal took 7.3 s instead of 30 ms (issue 30).  With flush-to-zero (FTZ: subnormal results
become 0) and denormals-are-zero (DAZ: subnormal inputs are read as 0) the same product runs at full
speed.  Every value at or above 2^-126 in magnitude is computed exactly as before; only values that
would have been subnormal become 0 (in float64 the same holds below 2^-1022).

How.  :func:`flush_denormals` is a context manager around ``torch.set_flush_denormal``: it reads the
current setting (:func:`flushing`, a one-element probe), switches, and restores what it found on
exit, also after an exception, so it nests.  The setting lives in the CPU's control register
(MXCSR) of the *calling thread*: other Python threads keep theirs (so it is thread-safe), and so do
torch's intra-op worker threads, which is why it takes full effect with one intra-op thread, the
setting this project runs with.  NumPy's BLAS (the grid's products) runs in the calling thread and
is flushed too.  Where the CPU has no DAZ flag (``set_flush_denormal`` returns False), nothing
changes.
"""

from __future__ import annotations

import contextlib

import torch

__all__ = ["flushing", "flush_denormals", "for_float32"]

_SMALLEST_NORMAL = 2.0 ** -126  # float32


def flushing() -> bool:
    """True when the calling thread flushes subnormal float32 values to zero."""
    return (torch.tensor(_SMALLEST_NORMAL, dtype=torch.float32) * 0.5).item() == 0.0  # 2^-127 is subnormal


@contextlib.contextmanager
def flush_denormals(enabled: bool = True):
    """Within this block the calling thread flushes subnormal numbers to zero (``enabled=False``: does not).

    The previous setting is restored on exit, also when the block raises.  A no-op where the CPU
    cannot flush (module doc).
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool, got {type(enabled).__name__}")
    before = flushing()
    switched = enabled != before and torch.set_flush_denormal(enabled)
    try:
        yield
    finally:
        if switched:
            torch.set_flush_denormal(before)


def for_float32(dtype, device):
    """:func:`flush_denormals` for float32 work on the CPU (where subnormal states arise and cost), else a no-op
    block."""
    on = dtype == torch.float32 and torch.device(device).type == "cpu"
    return flush_denormals() if on else contextlib.nullcontext()
