"""Argument checks shared by every public function.

Each helper raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, bad value)
with a message that names the argument and says what was expected, so bad input never reaches a
torch kernel and never comes back as a silent NaN.
"""

from __future__ import annotations

import functools
import math
import numbers
import sys
import warnings
from collections.abc import Iterable

import numpy as np
import torch

__all__ = ["LOG_FLOAT_MAX", "integer", "seed", "real", "log_variance", "flag", "choice", "bias", "batch_shape",
           "broadcast",
           "device", "dtype", "matrix", "values", "regime", "finite_result"]

LOG_FLOAT_MAX = math.log(sys.float_info.max)  # ~709.78: e^x overflows float64 above it
DTYPES = (torch.float32, torch.float64)


def integer(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as an ``int``, checking its type and bounds (inclusive)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
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


def seed(value, name: str = "seed") -> int:
    """A random seed: an int in [0, 2^64 - 1] (what ``torch.Generator.manual_seed`` accepts)."""
    return integer(name, value, minimum=0, maximum=2**64 - 1)


def log_variance(name: str, value) -> float:
    """A logit variance s2 >= 0 small enough that e^{s2} (and so c = e^{s2} - 1) is a finite float64."""
    value = real(name, value, minimum=0.0)
    if value > LOG_FLOAT_MAX:
        raise ValueError(f"{name} must be <= {LOG_FLOAT_MAX:.2f} (e^{name} overflows float64 above it), got {value}")
    return value


def values(name: str, values, check, **bounds) -> list:
    """A non-empty list or tuple of values, each checked by ``check(name, value, **bounds)`` (e.g. :func:`real`)."""
    if not isinstance(values, (list, tuple)) or not values:
        raise TypeError(f"{name} must be a non-empty list, got {values!r}")
    return [check(name, v, **bounds) for v in values]


def flag(name: str, value) -> bool:
    """Check that ``value`` is True or False (a Python or NumPy bool, not merely truthy)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__}")
    return bool(value)


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


def broadcast(name: str, shape, other: str, other_shape) -> tuple[int, ...]:
    """The broadcast of two batch shapes; a ValueError naming both arguments when they do not broadcast."""
    try:
        return tuple(torch.broadcast_shapes(tuple(shape), tuple(other_shape)))
    except RuntimeError:
        raise ValueError(f"{name}'s batch shape {tuple(shape)} does not broadcast with {other}'s "
                         f"{tuple(other_shape)}") from None


def device(value, name: str = "device") -> torch.device:
    """A ``torch.device`` from a device or a device string, checked to exist on this machine.

    CUDA (and Apple's MPS) asked for where it is absent is a ValueError saying so, not a driver
    error from deep inside torch.
    """
    if not isinstance(value, (str, torch.device)):
        raise TypeError(f"{name} must be a str or torch.device, got {type(value).__name__}")
    try:
        dev = torch.device(value)
    except RuntimeError:
        raise ValueError(f"{name} must be a torch device string such as 'cpu' or 'cuda:0', got {value!r}") from None
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"{name}={str(dev)!r} asks for CUDA, but CUDA is not available on this machine "
                             "(no GPU or a CPU-only torch); use 'cpu'")
        if dev.index is not None and dev.index >= count:
            raise ValueError(f"{name}={str(dev)!r}: this machine has {count} CUDA device(s), 0..{count - 1}")
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"{name}={str(dev)!r} asks for Apple MPS, which is not available here; use 'cpu'")
    elif dev.type not in ("cpu", "meta"):  # meta: shapes only, no hardware
        raise ValueError(f"{name} must be a 'cpu', 'cuda', 'mps' or 'meta' device, got {str(dev)!r}")
    return dev


def dtype(value, name: str = "dtype") -> torch.dtype:
    """``torch.float32`` or ``torch.float64``."""
    if value not in DTYPES:
        raise TypeError(f"{name} must be torch.float32 or torch.float64, got {value!r}")
    return value


def matrix(name: str, x, *, square: bool = False, min_rows: int = 1, finite: bool = True) -> torch.Tensor:
    """Check a dense (*batch, m, n) float32 or float64 tensor, n >= 1, m >= ``min_rows``, with finite entries
    (``finite=False``: the caller checks finiteness itself, e.g. on a cheaper reduction)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.layout != torch.strided or x.device.type == "meta":
        raise TypeError(f"{name} must be a dense tensor holding data, got layout {x.layout} on {x.device}")
    if x.dim() < 2:
        raise ValueError(f"{name} must have shape (*batch, m, n), got shape {tuple(x.shape)}")
    if x.dtype not in DTYPES:
        raise TypeError(f"{name} must have a real floating dtype (float32 or float64), got {x.dtype}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name} must be square in its last two dimensions, got shape {tuple(x.shape)}")
    if x.shape[-2] < min_rows:
        raise ValueError(f"{name} must have at least {min_rows} rows (tokens), got shape {tuple(x.shape)}")
    if x.shape[-1] < 1:
        raise ValueError(f"{name} must have at least one column, got shape {tuple(x.shape)}")
    if finite and x.numel() and not torch.isfinite(x).all():
        raise ValueError(f"{name} must have finite entries (found NaN or inf)")
    return x



def regime(message: str, *, stacklevel: int = 3) -> None:
    """Warn (``UserWarning``) that valid input lies outside the regime where a formula holds."""
    warnings.warn(message, UserWarning, stacklevel=stacklevel)


def _short(value) -> str:
    """repr of an argument, a tensor by its shape only."""
    return f"<tensor of shape {tuple(value.shape)}>" if isinstance(value, torch.Tensor) else repr(value)


def finite_result(fn):
    """Decorate a closed-form prediction: an overflow (``OverflowError`` or a non-finite float or tensor
    result) becomes a ValueError naming the arguments, never a silent inf or NaN."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            out = fn(*args, **kwargs)
        except (OverflowError, ZeroDivisionError):
            out = math.inf
        values = out if isinstance(out, tuple) else (out,)
        if not all(math.isfinite(v) if isinstance(v, float) else bool(torch.isfinite(v).all())
                   for v in values if isinstance(v, (float, torch.Tensor))):
            given = ", ".join([*map(_short, args), *(f"{k}={_short(v)}" for k, v in kwargs.items())])
            raise ValueError(f"{fn.__name__}({given}) overflows or underflows float64: these arguments (s2 in "
                             f"particular, "
                             "c = e^s2 - 1) are far outside the range the formula describes")
        return out

    return wrapper
