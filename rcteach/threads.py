"""How many threads rcteach computes with: chosen by the kit unless the user chose.

rcteach's work is many small batched matrices (T up to a few thousand, batches of seeds).  torch's
default, one intra-op thread per core, only adds OpenMP start-up and spinning there, and on a small
or shared machine that costs many times over: ``python -m rcteach check`` took 302 s of CPU with
torch's default threads and 39 s with one thread (2 cores under load, issue 24).  So ``import
rcteach`` calls :func:`configure`, which sets torch's intra-op thread count
(:func:`torch.set_num_threads`) once, in this order of precedence:

1. ``$RCTEACH_THREADS`` (a positive integer): that many threads;
2. ``$OMP_NUM_THREADS`` or ``$MKL_NUM_THREADS`` set: the user chose, and torch read them when it
   loaded; rcteach leaves the count as it is;
3. otherwise :data:`KIT_THREADS` (1).

A :func:`torch.set_num_threads` call made *after* ``import rcteach`` is the user's and stays (rcteach
sets the count only at import).  One made *before* it cannot be told from torch's own default (one
thread per physical core), so it is replaced: set ``RCTEACH_THREADS``, or call it after the import.
Every entry point imports rcteach: the command line, the chapters' kernels, the explorers, the grader
and its sandboxed harness (which also runs with ``OMP_NUM_THREADS=1``).

The same count goes to the OpenBLAS of numpy and scipy (:func:`rcteach.linalg.matmul` multiplies small
batches through numpy; scipy holds the LAPACK fallbacks): to those already loaded through threadpoolctl,
to those loaded later through ``OPENBLAS_NUM_THREADS`` (read when the library loads; set only when
unset).  Without it numpy's OpenBLAS starts one thread per core: the quick checks that multiply through
numpy took 14.1 s of CPU in a default environment against 10.5 s with one thread (the same wall time).
When the user chose (case 2), OpenBLAS reads ``OMP_NUM_THREADS`` itself.
"""

from __future__ import annotations

import os

import threadpoolctl
import torch

__all__ = ["THREADS_ENV", "KIT_THREADS", "USER_ENV", "OPENBLAS_ENV", "chosen", "configure"]

THREADS_ENV = "RCTEACH_THREADS"
#: The variables of the threading libraries themselves: set, they are the user's choice.
USER_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: Read by numpy's and scipy's OpenBLAS when they load.
OPENBLAS_ENV = "OPENBLAS_NUM_THREADS"
#: The kit's choice: one intra-op thread, also for the larger T of ``bench`` and the grid.  Measured on
#: this project's shared 2-core machine (load average 9-13), fresh processes, three calls each: the
#: stable ranks of 4 matrices at T = 1024 took 3.8-3.9 s of CPU (15-22 s wall) with one thread and 48.5 s
#: (175 s) with two; the spectra of 4 attention matrices at T = 512, 4.4-4.5 s (17-27 s) against 89.5 s
#: (329 s).  Where other jobs hold the cores, a second thread spins waiting for them.
KIT_THREADS = 1


def chosen(environ=None) -> tuple[int | None, str]:
    """``(threads, who chose)``: the count rcteach sets, or None to leave torch's as it is.

    ``environ`` (default ``os.environ``) is read for the variables above.  A ``RCTEACH_THREADS`` that
    is not a positive integer is a ValueError naming it.
    """
    environ = os.environ if environ is None else environ
    text = environ.get(THREADS_ENV, "").strip()
    if text:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(f"{THREADS_ENV} must be a positive integer (rcteach's torch threads), got {text!r}")
        return value, THREADS_ENV
    user = [name for name in USER_ENV if environ.get(name, "").strip()]
    if user:
        return None, user[0]
    return KIT_THREADS, "rcteach's default"


def configure(environ=None) -> int:
    """Apply :func:`chosen`: set torch's intra-op threads, and numpy's and scipy's OpenBLAS threads (module doc),
    unless the user chose; returns torch's count in use.  ``OPENBLAS_NUM_THREADS`` is set in ``os.environ``
    only when ``environ`` is None (the process's own environment)."""
    threads, _ = chosen(environ)
    if threads is not None:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        threadpoolctl.threadpool_limits(threads, user_api="blas")
        if environ is None:
            os.environ.setdefault(OPENBLAS_ENV, str(threads))
    return torch.get_num_threads()
