"""The registry of theory checks.

A check compares an independent closed-form prediction (from :mod:`rcteach.theory` or an exact
identity) with a simulation.  Each is a plain function of keyword settings that returns a
:class:`Comparison`; :func:`register` records its claim, source, the settings of the quick and
full modes and why its tolerance is what it is.  :func:`run_check` runs one and returns a
:class:`CheckResult`; chapters assert ``result.passed`` and display the result.
"""

from __future__ import annotations

import fnmatch
import html
import inspect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .. import _validate

__all__ = ["Comparison", "Check", "CheckResult", "register", "registry", "run_check", "run_checks", "MODES", "SOURCES"]

MODES = ("quick", "full")
SOURCES = ("paper", "derived", "exact")


@dataclass(frozen=True)
class Comparison:
    """A prediction, the value measured, and how close they must be.

    Passes when |measured - prediction| <= tolerance (absolute), or <= tolerance * |prediction|
    with ``relative=True``.  Booleans, ints, strings and tuples compare exactly (tolerance 0).
    """

    prediction: object
    measured: object
    tolerance: float = 0.0
    relative: bool = False

    @property
    def passed(self) -> bool:
        p, m = self.prediction, self.measured
        if isinstance(p, (bool, str, tuple, list)) or isinstance(m, (bool, str, tuple, list)):
            return _equal(p, m)
        p, m = float(p), float(m)
        if not (math.isfinite(m) and math.isfinite(p)):
            return p == m
        bound = self.tolerance * (abs(p) if self.relative else 1.0)
        return abs(m - p) <= bound


def _equal(p, m) -> bool:
    """Exact equality, element by element for tuples and lists; NaN never equals anything.

    (Plain ``==`` on tuples treats an element as equal to itself, so ``(nan,) == (nan,)`` would pass
    when both hold the same float object, e.g. ``math.nan``.)
    """
    if isinstance(p, (tuple, list)) and isinstance(m, (tuple, list)):
        same_kind = isinstance(p, tuple) == isinstance(m, tuple)  # as ==: a tuple never equals a list
        return same_kind and len(p) == len(m) and all(_equal(a, b) for a, b in zip(p, m))
    return bool(p == m)


@dataclass(frozen=True)
class Check:
    """A registered claim and the function that tests it."""

    name: str
    claim: str
    source: str  # "paper", "derived" (our derivation, see theory notes) or "exact" (an identity)
    tolerance_note: str  # why the tolerance is what it is
    func: Callable[..., Comparison]
    quick: dict = field(default_factory=dict)
    full: dict = field(default_factory=dict)
    mutants: dict = field(default_factory=dict)  # label -> fn(prediction, setting) -> wrong prediction

    def settings(self, mode: str = "quick", **overrides) -> dict:
        """The keyword settings of a run: the function's defaults, then the mode's, then overrides."""
        mode = _validate.choice("mode", mode, MODES)
        params = inspect.signature(self.func).parameters
        unknown = set(overrides) - set(params)
        if unknown:
            raise ValueError(f"check {self.name!r} has no setting {sorted(unknown)}; it takes {sorted(params)}")
        defaults = {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}
        return {**defaults, **(self.quick if mode == "quick" else {**self.quick, **self.full}), **overrides}


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check: claim, setting, prediction, measured value, tolerance, verdict."""

    check: Check
    setting: dict
    comparison: Comparison
    seconds: float

    @property
    def passed(self) -> bool:
        return self.comparison.passed

    def as_dict(self) -> dict:
        c = self.comparison
        return {
            "name": self.check.name,
            "claim": self.check.claim,
            "source": self.check.source,
            "setting": {k: _plain(v) for k, v in self.setting.items()},
            "prediction": _plain(c.prediction),
            "measured": _plain(c.measured),
            "tolerance": c.tolerance,
            "relative": c.relative,
            "tolerance_note": self.check.tolerance_note,
            "passed": self.passed,
            "seconds": round(self.seconds, 3),
        }

    def _repr_html_(self) -> str:
        return results_html([self])

    def __repr__(self) -> str:
        d = self.as_dict()
        return (f"CheckResult({d['name']}: predicted {_fmt(d['prediction'])}, measured {_fmt(d['measured'])}, "
                f"tolerance {_fmt_tol(self.comparison)} -> {'PASS' if self.passed else 'FAIL'})")


_REGISTRY: dict[str, Check] = {}


def register(name: str, *, claim: str, source: str, tolerance_note: str, quick: dict | None = None, full: dict | None = None,
             mutants: dict | None = None):
    """Decorator: register ``func`` as the check ``name`` (names are unique).

    ``mutants``: label -> ``fn(prediction, setting) -> wrong_prediction`` (the agreed mutant API).
    """
    source = _validate.choice("source", source, SOURCES)

    def decorate(func: Callable[..., Comparison]) -> Callable[..., Comparison]:
        if name in _REGISTRY:
            raise ValueError(f"a check named {name!r} is already registered")
        _REGISTRY[name] = Check(name, claim, source, tolerance_note, func, dict(quick or {}), dict(full or {}), dict(mutants or {}))
        return func

    return decorate


def registry() -> dict[str, Check]:
    """All registered checks by name, in registration order."""
    return dict(_REGISTRY)


def run_check(name: str, mode: str = "quick", *, device=None, **overrides) -> CheckResult:
    """Run the check ``name`` in ``mode`` ("quick" or "full"), with settings overridden by keyword.

    ``device`` is passed to checks that simulate (those with a ``device`` setting).
    """
    if name not in _REGISTRY:
        raise ValueError(f"no check named {name!r}; registered: {', '.join(_REGISTRY)}")
    check = _REGISTRY[name]
    if device is not None:
        if "device" not in inspect.signature(check.func).parameters:
            device = None
        else:
            overrides["device"] = torch.device(device)
    setting = check.settings(mode, **overrides)
    start = time.perf_counter()
    with torch.no_grad():
        comparison = check.func(**setting)
    return CheckResult(check, setting, comparison, time.perf_counter() - start)


def run_checks(mode: str = "quick", *, device=None, pattern: str = "*", progress: bool = False) -> list[CheckResult]:
    """Run every registered check whose name matches the glob ``pattern``."""
    names = [n for n in _REGISTRY if fnmatch.fnmatch(n, pattern)]
    if not names:
        raise ValueError(f"pattern {pattern!r} matches no check")
    if progress:
        from tqdm.auto import tqdm

        names = tqdm(names, desc=f"theory checks ({mode})", unit="check")
    return [run_check(n, mode, device=device) for n in names]


# -- formatting ---------------------------------------------------------------------------------

def _plain(v):
    if isinstance(v, torch.Tensor):
        v = v.item() if v.numel() == 1 else v.tolist()
    if isinstance(v, torch.device):
        return str(v)
    if isinstance(v, complex):
        return [v.real, v.imag]
    return v


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _fmt_tol(c: Comparison) -> str:
    if isinstance(c.prediction, (bool, str, tuple, list)):
        return "exact"
    return f"{c.tolerance:.3g}" + (" (rel)" if c.relative else " (abs)")


COLUMNS = ("check", "source", "setting", "predicted", "measured", "tolerance", "result")


def _row(r: CheckResult) -> tuple[str, ...]:
    d = r.as_dict()
    setting = ", ".join(f"{k}={_fmt(v)}" for k, v in d["setting"].items() if k != "device")
    return (d["name"], d["source"], setting, _fmt(d["prediction"]), _fmt(d["measured"]),
            _fmt_tol(r.comparison), "PASS" if r.passed else "FAIL")


def results_table(results: list[CheckResult]) -> str:
    """A plain-text table of results, one row per check, and a closing count."""
    rows = [COLUMNS] + [_row(r) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    n_pass = sum(r.passed for r in results)
    lines.append(f"{n_pass} passed, {len(results) - n_pass} failed")
    return "\n".join(lines)


def results_html(results: list[CheckResult]) -> str:
    """An HTML table of results (claims as tooltips), for notebooks."""
    head = "".join(f"<th>{c}</th>" for c in COLUMNS)
    body = "".join(
        f"<tr title='{html.escape(r.check.claim)}'>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in _row(r)) + "</tr>"
        for r in results
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
