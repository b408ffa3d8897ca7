"""Device, dtype and random-number conventions.

* :func:`default_device`: ``$RCTEACH_DEVICE`` if set, else CUDA when available, else CPU.
* dtype: float64 on the CPU (spectra and small checks need it), float32 on accelerators; every
  function takes ``dtype=`` to override.
* randomness: every random function takes ``seed=`` *or* ``generator=``; one seed gives the same
  numbers on the same device and dtype.
"""

from __future__ import annotations

import os

import torch

from . import _validate

__all__ = ["DEVICE_ENV", "default_device", "resolve", "make_generator"]

DEVICE_ENV = "RCTEACH_DEVICE"


def default_device() -> torch.device:
    """The device rcteach computes on when none is given.

    ``$RCTEACH_DEVICE`` (a torch device string, e.g. ``"cpu"``, ``"cuda:1"``) if set, else
    ``cuda`` when available, else ``cpu``.  A ValueError when the variable names a device this
    machine lacks (e.g. ``RCTEACH_DEVICE=cuda`` without CUDA).
    """
    name = os.environ.get(DEVICE_ENV, "").strip()
    if name:
        return _validate.device(name, DEVICE_ENV)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve(device=None, dtype=None) -> tuple[torch.device, torch.dtype]:
    """Fill in the default device and dtype (float64 on CPU, float32 elsewhere)."""
    device = default_device() if device is None else _validate.device(device)
    if dtype is None:
        dtype = torch.float64 if device.type == "cpu" else torch.float32
    return device, _validate.dtype(dtype)


def make_generator(seed=None, generator=None, device=None) -> torch.Generator:
    """A ``torch.Generator`` on ``device``: the given one, or a new one seeded with ``seed``.

    With neither, the new generator takes a non-deterministic seed.
    """
    device, _ = resolve(device)
    if generator is not None:
        if seed is not None:
            raise ValueError("pass seed or generator, not both")
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        if generator.device.type != device.type:
            raise ValueError(f"generator lives on {generator.device}, but the tensors are drawn on {device}")
        return generator
    gen = torch.Generator(device=device)
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(_validate.seed(seed))
    return gen
