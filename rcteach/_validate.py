"""Argument checks shared by every public function.

Each helper raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, bad value)
with a message that names the argument and says what was expected, so bad input never reaches a
torch kernel and never comes back as a silent NaN.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

import torch

__all__ = ["integer", "real", "flag", "choice", "bias", "batch_shape", "matrix"]


def integer(name: str, value, *, minimum: int | None = None) -> int:
    """Return ``value`` as an ``int``, checking its type and lower bound."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def real(name: str, value, *, minimum: float | None = None, maximum: float | None = None,
         positive: bool = False, below: float | None = None) -> float:
    """Return ``value`` as a finite ``float``; ``minimum`` and ``maximum`` are inclusive, ``positive`` and
    ``below`` strict."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    if below is not None and value >= below:
        raise ValueError(f"{name} must be < {below}, got {value}")
    return value


def flag(name: str, value) -> bool:
    """Check that ``value`` is True or False (not merely truthy)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__}")
    return value


def bias(activation: str, value) -> float:
    """Validate the logit ``bias``, which only the sigmoid map takes (0 for the others)."""
    value = real("bias", value)
    if activation != "sigmoid" and value != 0.0:
        raise ValueError(f"bias applies only to activation='sigmoid', not {activation!r}")
    return value


def choice(name: str, value, options: Iterable[str]) -> str:
    """Check that ``value`` is one of ``options``."""
    options = tuple(options)
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}")
    return value


def batch_shape(batch) -> tuple[int, ...]:
    """Normalise ``batch`` (an int or a tuple of ints, each >= 1) to a tuple."""
    if isinstance(batch, numbers.Integral) and not isinstance(batch, bool):
        batch = (batch,)
    if not isinstance(batch, (tuple, list, torch.Size)):
        raise TypeError(f"batch must be an int or a tuple of ints, got {type(batch).__name__}")
    return tuple(integer("batch", b, minimum=1) for b in batch)


def matrix(name: str, x, *, square: bool = False, min_rows: int = 1) -> torch.Tensor:
    """Check a (*batch, m, n) tensor of real floating type with finite entries."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() < 2:
        raise ValueError(f"{name} must have shape (*batch, m, n), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must have a real floating dtype (float32 or float64), got {x.dtype}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name} must be square in its last two dimensions, got shape {tuple(x.shape)}")
    if x.shape[-2] < min_rows:
        raise ValueError(f"{name} must have at least {min_rows} rows (tokens), got shape {tuple(x.shape)}")
    if x.numel() and not torch.isfinite(x).all():
        raise ValueError(f"{name} must have finite entries (found NaN or inf)")
    return x

