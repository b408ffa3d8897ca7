"""Argument checks of the command line: argparse ``type=`` functions and :class:`UsageError`.

A ``type=`` function rejects a bad value while parsing (argparse prints the usage and the message;
exit 2).  :class:`UsageError` is for a bad value found later (e.g. a pattern that matches no
check): :func:`rcteach.tools.cli.main` prints its message and exits 2 as well.
"""

from __future__ import annotations

import argparse
import math
import pathlib

import torch

from ..device import DEVICE_ENV, resolve

__all__ = ["UsageError", "positive_int", "nonnegative_int", "positive_float", "existing_dir", "existing_path",
           "existing_file", "file_in_existing_dir", "device_name", "device", "checked_device"]


class UsageError(ValueError):
    """A bad command-line value found after parsing: the CLI prints the message and exits 2."""


def _integer(text: str, minimum: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer {what}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected an integer {what}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (counts and sizes: repeats, batch, seeds, depth, T)."""
    return _integer(text, 1, ">= 1")


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (seeds)."""
    return _integer(text, 0, ">= 0")


def positive_float(text: str) -> float:
    """A finite number > 0 (seconds, ratios)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return value


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


def file_in_existing_dir(text: str) -> str:
    """A file to write, in a folder that exists."""
    return _path(text, lambda p: p.parent.is_dir() and not p.is_dir(), "a file name in an existing folder")


def checked_device(name: str | None = None, origin: str = "--device") -> str:
    """``name`` (default: :func:`rcteach.device.default_device`) as a device string, if torch can use it here.

    Raises :class:`UsageError`, its message starting with ``origin`` (what asked for the device),
    for a string that is no torch device, or a CUDA device that is absent.
    """
    if name is None:
        origin = f"the default device (${DEVICE_ENV}, else cuda if available, else cpu)"
    try:
        dev, _ = resolve(name)  # checks that the device exists here (rcteach._validate.device)
    except (TypeError, ValueError) as err:
        raise UsageError(f"{origin}: {err}" + ("" if name is not None else f"; or unset {DEVICE_ENV}")) from None
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
