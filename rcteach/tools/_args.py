"""Argument checks of the command line: argparse ``type=`` functions and :class:`UsageError`.

A ``type=`` function rejects a bad value while parsing (argparse prints the usage and the message;
exit 2).  :class:`UsageError` is for a bad value found later (e.g. a pattern that matches no
check): :func:`rcteach.tools.cli.main` prints its message and exits 2 as well.
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib

import torch

from ..device import DEVICE_ENV, resolve

__all__ = ["UsageError", "positive_int", "token_count", "nonnegative_int", "seed", "positive_float", "ratio",
           "existing_dir", "existing_path", "existing_file", "chapter_file", "file_in_existing_dir", "output_dir",
           "dask_address", "distinct", "device_name", "device", "checked_device"]


class UsageError(ValueError):
    """A bad command-line value found after parsing: the CLI prints the message and exits 2."""


def _integer(text: str, minimum: int, what: str, maximum: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer {what}, got {text!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        raise argparse.ArgumentTypeError(f"expected an integer {what}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (counts and sizes: repeats, batch, seeds, depth)."""
    return _integer(text, 1, ">= 1")


def token_count(text: str) -> int:
    """A number of tokens T, an integer >= 2."""
    return _integer(text, 2, ">= 2 (a number of tokens)")


def nonnegative_int(text: str) -> int:
    """An integer >= 0."""
    return _integer(text, 0, ">= 0")


def seed(text: str) -> int:
    """A random seed: an integer in [0, 2^64 - 1] (what ``torch.Generator.manual_seed`` takes)."""
    return _integer(text, 0, "in [0, 2^64 - 1]", maximum=2**64 - 1)


def _number(text: str, ok, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a {what}, got {text!r}") from None
    if not (math.isfinite(value) and ok(value)):
        raise argparse.ArgumentTypeError(f"expected a finite {what}, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (seconds)."""
    return _number(text, lambda v: v > 0, "number > 0")


def ratio(text: str) -> float:
    """A ratio gamma = T/d of orthonormal tokens: a number in (0, 1]."""
    return _number(text, lambda v: 0 < v <= 1, "number in (0, 1] (gamma = T/d, orthonormal tokens need T <= d)")


def _path(text: str, ok, what: str) -> str:
    if not ok(pathlib.Path(text)):
        raise argparse.ArgumentTypeError(f"{text} is not {what}")
    return text


def existing_dir(text: str) -> str:
    """A folder that exists."""
    return _path(text, pathlib.Path.is_dir, "an existing folder")


def existing_file(text: str) -> str:
    """A file that exists."""
    return _path(text, pathlib.Path.is_file, "an existing file")


def existing_path(text: str) -> str:
    """A file or folder that exists."""
    return _path(text, pathlib.Path.exists, "an existing file or folder")


def chapter_file(text: str) -> str:
    """A chapter that exists: a MyST ``.md`` or ``.ipynb`` notebook."""
    existing_file(text)
    return _path(text, lambda p: p.suffix in (".md", ".ipynb"), "a chapter (a .md or .ipynb notebook)")


def file_in_existing_dir(text: str) -> str:
    """A file to write, in a folder that exists and is writable."""
    _path(text, lambda p: p.parent.is_dir() and not p.is_dir(), "a file name in an existing folder")
    return _path(text, lambda p: os.access(p.parent, os.W_OK | os.X_OK), "in a writable folder")


def output_dir(text: str) -> str:
    """A folder to write into: one that exists, or that can be created (no file on its way, a writable parent)."""
    if not text:
        raise argparse.ArgumentTypeError("expected a folder, got ''")
    path = pathlib.Path(text)
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise argparse.ArgumentTypeError(f"{text} is a file, not a folder" if p == path else
                                                 f"{text}: {p} is a file, not a folder")
            if not os.access(p, os.W_OK | os.X_OK):
                raise argparse.ArgumentTypeError(f"{text}: the folder {p} is not writable")
            return text
    return text


def dask_address(text: str) -> str:
    """``local:N`` (N >= 1 local worker processes) or a dask scheduler address (:func:`rcteach.sweep.dask_spec`)."""
    from ..sweep import dask_spec

    try:
        return dask_spec(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def distinct(option: str, values):
    """``values`` (a list, or None) unchanged if none is given twice; UsageError naming ``option`` otherwise."""
    if values is None:
        return None
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise UsageError(f"{option}: {', '.join(map(str, twice))} given twice")
    return values


def checked_device(name: str | None = None, origin: str = "--device") -> str:
    """``name`` (default: :func:`rcteach.device.default_device`) as a device string, if torch can use it here.

    Raises :class:`UsageError`, its message starting with ``origin`` (what asked for the device),
    for a string that is no torch device, a CUDA device that is absent, or the meta device (no data).
    """
    if name is None:
        origin = f"the default device (${DEVICE_ENV}, else cuda if available, else cpu)"
    try:
        dev, _ = resolve(name)  # checks that the device exists here (rcteach._validate.device)
    except (TypeError, ValueError) as err:
        raise UsageError(f"{origin}: {err}" + ("" if name is not None else f"; or unset {DEVICE_ENV}")) from None
    if dev.type == "meta":
        raise UsageError(f"{origin}: the meta device holds no data to compute with; use cpu or cuda")
    return str(dev)


def device_name(text: str) -> str:
    """A torch device string, not necessarily usable here (e.g. a GPU of remote workers)."""
    try:
        return str(torch.device(text))
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"device must be a torch device string such as 'cpu' or 'cuda:0', "
                                         f"got {text!r}") from None


def device(text: str) -> str:
    """A torch device string that is usable here (``type=`` form of :func:`checked_device`)."""
    try:
        return checked_device(text, origin="")
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix(": ")) from None
