"""The registry of theory checks.

A check compares an independent closed-form prediction (from :mod:`rcteach.theory` or an exact
identity) with a simulation.  Each is a plain function of keyword settings that returns a
:class:`Comparison`; :func:`register` records its claim, source, the settings of the quick and
full modes, why its tolerance is what it is, its *base seeds* and its *mutants*.

The rules a check follows (``python -m rcteach check --mutants`` enforces them, in CI):

* **Every seed.**  A check that simulates takes a ``seed`` setting and registers at least
  :data:`MIN_SEEDS` distinct ``base_seeds``; every run (quick or full, chapter or CLI) runs the
  simulation once per base seed.  It passes when every seed passes, and its ``resolves`` is the
  worst over the seeds (:attr:`CheckResult.resolves`).
* **Resolution.**  ``resolves`` (:attr:`Comparison.resolves`) is the smallest relative error of
  the prediction that the check rejects on every seed; it must be at most :data:`RESOLVES`
  (5%), unless the registration says which term the check cannot resolve and why (``coarse``).
* **Mutants** are named wrong predictions ``fn(prediction, setting) -> wrong_prediction``.  A
  mutant is *killed* when the comparison with the wrong prediction, the same measurement and the
  same tolerance fails on every seed.  Each check declares, for each side on which it can fail, a
  mutant within :data:`NEAR` x ``resolves`` of the prediction (too high and too low: ``off_by``),
  and a shape mutant for every exponent, order or next-order term its claim states.
* **Generated mutants.**  Besides the declared ones, every check with a relative resolution is
  run against the prediction off by :data:`GENERATED` x ``resolves`` either way, and (unless it is
  ``coarse``) off by :data:`RESOLVES` either way.

:func:`run_check` runs one check and returns a :class:`CheckResult`; :func:`check` is the one
call for chapters (runs, displays, raises :class:`CheckFailed`).  A check that needs an optional
extra (``extra="models"``: transformers) is SKIPPED where the extra is not installed, with the reason
and the install line: a verdict of its own, next to PASS and FAIL, that fails no run (and has no seeds,
resolves or mutants).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import html
import inspect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .. import _extras, _validate

__all__ = ["Comparison", "Check", "CheckResult", "CheckFailed", "check", "off_by", "off_exponent", "register",
           "all_checks",
           "run_check", "run_checks",
           "results_table", "results_html", "mutants_table", "MODES", "SOURCES", "MIN_SEEDS", "RESOLVES", "NEAR",
           "GENERATED"]

MODES = ("quick", "full")
SOURCES = ("paper", "derived", "reconstruction", "exact")
MIN_SEEDS = 3  # base seeds a simulating check runs on
RESOLVES = 0.05  # the relative error every check rejects, unless it says why it cannot (``coarse``)
NEAR = 2.0  # a declared mutant within NEAR x resolves on each side of the prediction
GENERATED = 1.5  # the generated mutants: the prediction off by GENERATED x resolves either way


@dataclass(frozen=True)
class Comparison:
    """A prediction, the value measured, and how close they must be.

    Passes when |measured - prediction| <= tolerance (absolute), or <= tolerance * |prediction|
    with ``relative=True``.  Booleans, ints, strings and tuples compare exactly (tolerance 0).  A
    prediction that is a tensor of several numbers compares element by element (``measured`` and
    ``tolerance`` broadcast against it) and passes when every element does.
    """

    prediction: object
    measured: object
    tolerance: float = 0.0
    relative: bool = False

    @property
    def exact(self) -> bool:
        """Compared for equality (booleans, strings, tuples, lists)."""
        return any(isinstance(v, (bool, str, tuple, list)) for v in (self.prediction, self.measured))

    @property
    def passed(self) -> bool:
        if self.exact:
            return _equal(self.prediction, self.measured)
        p, m, tol = _arrays(self)
        finite = torch.isfinite(p) & torch.isfinite(m)
        ok = torch.where(finite, (m - p).abs() <= tol * (p.abs() if self.relative else 1.0), p == m)
        return bool(ok.all())

    @property
    def resolves(self) -> float | None:
        """The smallest relative error of the prediction that this comparison detects.

        The least e >= 0 such that, for every e' >= e, the scaled predictions (1 + e') p and
        (1 - e') p both fail against the same measurement: e = max(b - 1, 1 - a, 0), where [a, b] is
        the set of factors x for which x p passes (for a relative tolerance t and one number,
        [m/(p(1 + t)), m/(p(1 - t))]; for a tensor, the intersection over its elements).  A perfect
        measurement gives t/(1 - t) for a relative tolerance t.  ``None`` when a relative error has
        no meaning: exact comparisons, and predictions that are zero (a deviation compared with an
        absolute tolerance).  ``inf`` when no error is detected (relative tolerance >= 1).
        """
        if self.exact:
            return None
        p, m, tol = _arrays(self)
        if not bool(torch.isfinite(p).all() & torch.isfinite(m).all()) or bool((p == 0).any()):
            return None
        if self.relative:  # x p passes iff |m - x p| <= t x |p|, i.e. m/p in [x (1 - t), x (1 + t)] (x > 0)
            r = m / p
            lo = r / (1 + tol)
            hi = torch.where(tol < 1, r / (1 - tol).clamp_min(1e-300), torch.full_like(r, math.inf))
        else:  # |m - x p| <= t: x in [(m - t)/p, (m + t)/p], ordered by the sign of p
            ends = torch.stack([(m - tol) / p, (m + tol) / p])
            lo, hi = ends.min(0).values, ends.max(0).values
        a, b = lo.max().item(), hi.min().item()
        if a > b:  # no factor passes: even the prediction itself fails
            return 0.0
        return max(b - 1.0, 1.0 - a, 0.0)


def _arrays(c: Comparison) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Prediction, measurement and tolerance as broadcast float64 CPU tensors."""
    def as_t(v):
        return torch.as_tensor(v.detach().cpu() if isinstance(v, torch.Tensor) else v, dtype=torch.float64)

    return torch.broadcast_tensors(as_t(c.prediction), as_t(c.measured), as_t(c.tolerance))


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
    source: str  # "paper", "derived" (our derivation), "reconstruction" (our inference of an unstated setting), "exact"
    tolerance_note: str  # why the tolerance is what it is
    func: Callable[..., Comparison]
    quick: dict = field(default_factory=dict)
    full: dict = field(default_factory=dict)
    mutants: dict = field(default_factory=dict)  # label -> fn(prediction, setting) -> wrong prediction
    base_seeds: tuple[int, ...] = ()  # the values of the ``seed`` setting every run runs on; () without one
    coarse: str = ""  # which term the check cannot resolve to RESOLVES, and why ("" when it does)
    extra: str | None = None  # the optional extra it needs (rcteach._extras.EXTRAS), e.g. "models"

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
    """The outcome of one check, run once per base seed: claim, setting, one comparison per seed, verdict.

    ``setting`` holds the settings shared by the seeds (without ``seed``); ``seeds`` the base seeds
    run (empty for a check without a ``seed`` setting) and ``comparisons`` their comparisons, in order.
    ``skipped``: why the check did not run (its optional extra is missing); then ``comparisons`` is empty
    and ``comparison`` None.
    """

    check: Check
    setting: dict
    seeds: tuple
    comparisons: tuple
    seconds: float
    skipped: str | None = None

    @property
    def passed(self) -> bool:
        """Every seed passes (a SKIPPED check does not pass, and fails nothing: see :attr:`verdict`)."""
        return self.skipped is None and all(c.passed for c in self.comparisons)

    @property
    def verdict(self) -> str:
        """"PASS", "FAIL", or "SKIPPED" (not run: see ``skipped``); only FAIL fails a run."""
        return "SKIPPED" if self.skipped is not None else "PASS" if self.passed else "FAIL"

    @functools.cached_property
    def resolves(self) -> float | None:
        """The worst (largest) :attr:`Comparison.resolves` over the seeds: the smallest relative error
        of the prediction rejected on every seed (``None`` when it has no meaning, see there)."""
        values = [c.resolves for c in self.comparisons]
        return None if not values or any(v is None for v in values) else max(values)

    @functools.cached_property
    def _worst(self) -> int:
        """Index of the seed shown: the first that fails, else the one with the largest resolves."""
        failing = [i for i, c in enumerate(self.comparisons) if not c.passed]
        if failing or self.resolves is None:
            return failing[0] if failing else 0
        return max(range(len(self.comparisons)), key=lambda i: self.comparisons[i].resolves)

    @property
    def comparison(self) -> Comparison | None:
        """The comparison of the worst seed (the first failing one, else the one that resolves least);
        ``None`` for a SKIPPED check."""
        return self.comparisons[self._worst] if self.comparisons else None

    @property
    def seed(self):
        """The base seed of :attr:`comparison` (``None`` for a check without seeds)."""
        return self.seeds[self._worst] if self.seeds and self.comparisons else None

    def _seed_setting(self, i: int) -> dict:
        return {**self.setting, "seed": self.seeds[i]} if self.seeds else self.setting

    def _verdict(self, label: str, wrong: Callable, generated: bool) -> dict:
        """A mutant's entry: killed when its comparison fails on every seed; the seeds where it survived;
        its relative offset from the prediction (``None`` unless it scales the prediction uniformly)."""
        survived = []
        for i, c in enumerate(self.comparisons):
            if dataclasses.replace(c, prediction=wrong(c.prediction, self._seed_setting(i))).passed:
                survived.append(self.seeds[i] if self.seeds else None)
        c = self.comparison
        return {"name": label, "killed": not survived, "generated": generated,
                "offset": _offset(c.prediction, wrong(c.prediction, self._seed_setting(self._worst))),
                "survived_on": survived}

    @functools.cached_property
    def mutants(self) -> list[dict]:
        """Each declared mutant, then the generated ones: ``{"name", "killed", "generated", "offset",
        "survived_on"}``.  Generated (for a finite relative resolution e): the prediction GENERATED x e
        too high and too low, and, unless the check is ``coarse``, RESOLVES too high and too low."""
        if self.skipped is not None:
            return []
        out = [self._verdict(label, wrong, False) for label, wrong in self.check.mutants.items()]
        e = self.resolves
        if e is None or not math.isfinite(e) or e == 0:
            return out
        fractions = [(GENERATED * e, f"{GENERATED:g} x resolves")]
        if not self.check.coarse:
            fractions.append((RESOLVES, "the resolution every check claims"))
        for fraction, why in fractions:
            for label, wrong in off_by(fraction).items():
                out.append(self._verdict(f"{label} (generated: {why})", wrong, True))
        return out

    @property
    def rules(self) -> list[str]:
        """The registration rules this result breaks: a side of the prediction without a declared mutant
        within NEAR x resolves (checked when the resolution is finite and relative)."""
        e = self.resolves
        if e is None or not math.isfinite(e) or e == 0:
            return []
        offsets = [m["offset"] for m in self.mutants if not m["generated"] and m["offset"] is not None]
        broken = []
        for side, sign in (("above", 1), ("below", -1)):
            near = [o for o in offsets if 0 < sign * o <= NEAR * e * (1 + 1e-9)]
            if not near:
                nearest = min((o for o in offsets if sign * o > 0), key=abs, default=None)
                broken.append(f"no declared mutant within {NEAR:g} x resolves ({NEAR * e:.2%}) {side} the prediction"
                              + ("" if nearest is None else f" (nearest {nearest:+.2%})"))
        return broken

    def as_dict(self) -> dict:
        c = self.comparison or Comparison(None, None, None)
        return {
            "name": self.check.name,
            "claim": self.check.claim,
            "source": self.check.source,
            "setting": {k: _plain(v) for k, v in self.setting.items()},
            "seeds": list(self.seeds),
            "seed": self.seed,
            "prediction": _plain(c.prediction),
            "measured": _plain(c.measured),
            "tolerance": _plain(c.tolerance),
            "relative": c.relative,
            "tolerance_note": self.check.tolerance_note,
            "coarse": self.check.coarse,
            "passed": self.passed,
            "seconds": round(self.seconds, 3),
            "resolves": self.resolves,
            "per_seed": [{"seed": s, "prediction": _plain(k.prediction), "measured": _plain(k.measured),
                          "tolerance": _plain(k.tolerance), "passed": k.passed, "resolves": k.resolves}
                         for s, k in zip(self.seeds or (None,), self.comparisons)],
            "mutants": self.mutants,
            "rules": self.rules,
            **({"skipped": self.skipped} if self.skipped is not None else {}),
        }

    def _repr_html_(self) -> str:
        return results_html([self])

    def __repr__(self) -> str:
        if self.skipped is not None:
            return f"CheckResult({self.check.name}: SKIPPED, {self.skipped})"
        d = self.as_dict()
        return (f"CheckResult({d['name']}: predicted {_fmt(d['prediction'])}, measured {_fmt(d['measured'])}, "
                f"tolerance {_fmt_tol(self.comparison)} -> {'PASS' if self.passed else 'FAIL'})")


def _offset(prediction, wrong) -> float | None:
    """The relative offset x - 1 when ``wrong`` = x ``prediction`` for one factor x > 0, else ``None``."""
    if any(isinstance(v, (bool, str, tuple, list)) for v in (prediction, wrong)):
        return None
    p, w = (torch.as_tensor(v.detach().cpu() if isinstance(v, torch.Tensor) else v, dtype=torch.float64)
            for v in (prediction, wrong))
    p, w = torch.broadcast_tensors(p, w)
    if not (bool(torch.isfinite(p).all() & torch.isfinite(w).all()) and bool((p != 0).all())):
        return None
    ratio = w / p
    lo, hi = ratio.min().item(), ratio.max().item()
    return lo - 1.0 if lo > 0 and hi - lo <= 1e-9 * hi else None


_REGISTRY: dict[str, Check] = {}


def register(name: str, *, claim: str, source: str, tolerance_note: str, mutants: dict, quick: dict | None = None,
             full: dict | None = None, base_seeds: tuple = (), coarse: str = "", extra: str | None = None):
    """Decorator: register ``func`` as the check ``name`` (names are unique).

    ``source``: "paper" only for what a paper states; "derived" for our derivations,
    "reconstruction" for our inference of a setting a paper does not state, "exact" for identities.
    ``mutants`` (at least one): label -> ``fn(prediction, setting) -> wrong_prediction``.
    ``base_seeds``: for a function with a ``seed`` setting, at least MIN_SEEDS distinct integers, the
    seeds every run uses (choose them far apart when the check draws from ``seed + k``); none otherwise.
    ``coarse``: for a check whose resolution is worse than RESOLVES, which term it cannot resolve and why.
    ``extra``: the optional extra the check needs (``"models"``); without it the check is SKIPPED.
    """
    source = _validate.choice("source", source, SOURCES)
    if extra is not None:
        extra = _validate.choice("extra", extra, tuple(_extras.EXTRAS))
    if not isinstance(mutants, dict) or not mutants:
        raise ValueError(f"mutants: check {name!r} must declare at least one mutant (label -> fn(prediction, setting))")
    bad = [k for k, f in mutants.items() if not (isinstance(k, str) and callable(f))]
    if bad:
        raise TypeError(f"mutants: labels must be str and values callable fn(prediction, setting); bad: {bad}")
    if not isinstance(coarse, str):
        raise TypeError(f"coarse: expected a str (why the check cannot resolve {RESOLVES:.0%}), got "
                        f"{type(coarse).__name__}")
    seeds = tuple(base_seeds)
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise TypeError(f"base_seeds: check {name!r}: expected integers, got {seeds!r}")

    def decorate(func: Callable[..., Comparison]) -> Callable[..., Comparison]:
        if name in _REGISTRY:
            raise ValueError(f"a check named {name!r} is already registered")
        takes_seed = "seed" in inspect.signature(func).parameters
        if takes_seed and len(set(seeds)) < MIN_SEEDS:
            raise ValueError(f"base_seeds: check {name!r} takes a seed and must run on at least {MIN_SEEDS} distinct "
                             f"base seeds, got {seeds!r}")
        if not takes_seed and seeds:
            raise ValueError(f"base_seeds: check {name!r} has no seed setting, so it takes no base seeds (got "
                             f"{seeds!r})")
        _REGISTRY[name] = Check(name, claim, source, tolerance_note, func, dict(quick or {}), dict(full or {}),
                                dict(mutants), seeds, coarse, extra)
        return func

    return decorate


def off_by(fraction: float) -> dict:
    """Two mutants: the prediction ``fraction`` too high and ``fraction`` too low (a constant off by
    between 1 and NEAR times the smallest relative error the check resolves)."""
    label = f"{100 * fraction:.3g}%"
    return {f"{label} high": lambda p, s: p * (1 + fraction), f"{label} low": lambda p, s: p * (1 - fraction)}


def off_exponent(power: float, variable: str = "T", fraction: float = 0.05) -> dict:
    """Two shape mutants for a prediction that scales like ``variable`` ** ``power`` (a setting, T by default):
    the exponent ``fraction`` too large and too small in magnitude, p * variable ** (+-fraction * power)."""
    label = f"{variable}^{power:g}: exponent {100 * fraction:.3g}%"
    return {f"{label} high": lambda p, s: p * s[variable] ** (fraction * power),
            f"{label} low": lambda p, s: p * s[variable] ** (-fraction * power)}


def all_checks() -> dict[str, Check]:
    """All registered checks by name, in registration order."""
    return dict(_REGISTRY)


def run_check(name: str, mode: str = "quick", *, device=None, **overrides) -> CheckResult:
    """Run the check ``name`` in ``mode`` ("quick" or "full") on each of its base seeds, with settings
    overridden by keyword (``seed=s`` runs that one seed instead).

    ``device`` is passed to checks that simulate (those with a ``device`` setting).  A check whose
    optional extra is not installed is not run: its result is SKIPPED, ``skipped`` says why.

    Examples
    --------
    >>> result = rcteach.run_check("row-stochastic")  # quick mode
    >>> result.check.claim, result.passed
    ('Softmax attention is row-stochastic: every row sums to 1 (A1 = 1)', True)
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a check name (str), got {type(name).__name__}")
    if name not in _REGISTRY:
        raise ValueError(f"name: no check named {name!r}; registered: {', '.join(_REGISTRY)}")
    check = _REGISTRY[name]
    device = _device(device)
    if device is not None and "device" in inspect.signature(check.func).parameters:
        overrides["device"] = device
    setting = check.settings(mode, **overrides)
    seeds = (setting.pop("seed"),) if "seed" in overrides else check.base_seeds
    setting.pop("seed", None)
    if check.extra is not None and (reason := _extras.missing(check.extra)) is not None:
        return CheckResult(check, setting, (), (), 0.0, skipped=reason)
    start = time.perf_counter()
    with torch.no_grad():
        comparisons = tuple(check.func(**setting, **({"seed": s} if seeds else {})) for s in seeds or (None,))
    return CheckResult(check, setting, tuple(seeds), comparisons, time.perf_counter() - start)


def _device(device) -> torch.device | None:
    """``device`` (None: each check's default) checked to exist here and to hold data (not ``meta``)."""
    if device is None:
        return None
    device = _validate.device(device)
    if device.type == "meta":
        raise ValueError("device: the meta device holds no data to run a check on; use 'cpu' or 'cuda'")
    return device


def run_checks(mode: str = "quick", *, device=None, pattern: str = "*", progress: bool = False) -> list[CheckResult]:
    """Run every registered check whose name matches the glob ``pattern``."""
    _validate.choice("mode", mode, MODES)
    device = _device(device)
    progress = _validate.flag("progress", progress)
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a glob pattern (str), got {type(pattern).__name__}")
    names = [n for n in _REGISTRY if fnmatch.fnmatch(n, pattern)]
    if not names:
        raise ValueError(f"pattern {pattern!r} matches no check")
    if progress:
        from tqdm.auto import tqdm

        names = tqdm(names, desc=f"theory checks ({mode})", unit="check")
    return [run_check(n, mode, device=device) for n in names]


class CheckFailed(AssertionError):
    """Raised by :func:`check` when a check fails; ``results`` holds the failing :class:`CheckResult` s."""

    def __init__(self, results: list[CheckResult]):
        self.results = list(results)
        lines = [f"{r.check.name}{'' if r.seed is None else f' (seed {r.seed})'}: predicted "
                 f"{_fmt(_plain(r.comparison.prediction))}, measured {_fmt(_plain(r.comparison.measured))}, "
                 f"tolerance {_fmt_tol(r.comparison)}" for r in self.results]
        super().__init__(f"{len(lines)} check(s) failed:\n" + "\n".join(lines))


def check(*names: str, mode: str = "quick", device=None, **overrides) -> list[CheckResult]:
    """Run the named checks, display their results, and raise if any fails: the one call for chapters.

    ``names`` are check names or glob patterns (``"ln-*"``), run in the order given (a pattern's
    matches in registry order), each check at most once.  ``overrides`` set keyword settings of every selected check
    that has them (a setting no selected check has is a ValueError).  In IPython the results table is displayed as
    HTML, elsewhere printed as text.  Returns the list of :class:`CheckResult`; raises
    :class:`CheckFailed` (an AssertionError) naming every failing check with its prediction,
    measurement and tolerance, after displaying the table (a SKIPPED check fails nothing).
    """
    if not names:
        raise ValueError("names: give at least one check name or glob pattern")
    _validate.choice("mode", mode, MODES)
    device = _device(device)
    selected = []
    for pattern in names:
        if not isinstance(pattern, str):
            raise TypeError(f"names: expected check names (str), got {type(pattern).__name__}")
        matches = [n for n in _REGISTRY if fnmatch.fnmatch(n, pattern)]
        if not matches:
            raise ValueError(f"names: {pattern!r} matches no check; registered: {', '.join(_REGISTRY)}")
        selected += [n for n in matches if n not in selected]
    takes = {n: set(inspect.signature(_REGISTRY[n].func).parameters) for n in selected}
    unused = set(overrides) - set().union(*takes.values())
    if unused:
        raise ValueError(f"no selected check has the setting(s) {sorted(unused)}")
    results = [run_check(n, mode, device=device, **{k: v for k, v in overrides.items() if k in takes[n]})
               for n in selected]
    _display(results)
    failed = [r for r in results if r.verdict == "FAIL"]
    if failed:
        raise CheckFailed(failed)
    return results


def _display(results: list[CheckResult]) -> None:
    """HTML in IPython (a notebook), the text table elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import HTML, display
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(HTML(results_html(results)))
    else:
        print(results_table(results))


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
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def _fmt_tol(c: Comparison) -> str:
    if c.exact:
        return "exact"
    tol = _plain(c.tolerance)
    return (f"{tol:.3g}" if isinstance(tol, float) else _fmt(tol)) + (" (rel)" if c.relative else " (abs)")


def _fmt_resolves(r: CheckResult) -> str:
    if r.comparison.exact:
        return "exact"
    e = r.resolves
    if e is None:
        return "-"  # a zero prediction: the deviation is compared with an absolute tolerance
    return f"{e:.1%}" if e < 10 else ">1000%"


COLUMNS = ("check", "source", "setting", "predicted", "measured", "tolerance", "resolves", "result")


def _fmt_seeds(seeds) -> str:
    return "/".join(str(s) for s in seeds)


def _row(r: CheckResult) -> tuple[str, ...]:
    """The table row: the shared setting and base seeds, and the worst seed's prediction and measurement."""
    c = r.comparison
    setting = [f"{k}={_fmt(_plain(v))}" for k, v in r.setting.items() if k != "device"]
    setting += [f"seed={_fmt_seeds(r.seeds)}"] if r.seeds else []
    if r.skipped is not None:
        return (r.check.name, r.check.source, ", ".join(setting), "-", "-", "-", "-", r.verdict)
    return (r.check.name, r.check.source, ", ".join(setting), _fmt(_plain(c.prediction)), _fmt(_plain(c.measured)),
            _fmt_tol(c), _fmt_resolves(r), r.verdict)


def _count(results: list[CheckResult]) -> str:
    """"n passed, m failed", and the skipped ones with each reason once."""
    verdicts = [r.verdict for r in results]
    text = f"{verdicts.count('PASS')} passed, {verdicts.count('FAIL')} failed"
    reasons = list(dict.fromkeys(r.skipped for r in results if r.skipped is not None))
    if reasons:
        text += f", {verdicts.count('SKIPPED')} skipped ({'; '.join(reasons)})"
    return text


def results_table(results: list[CheckResult]) -> str:
    """A plain-text table of results, one row per check (the worst seed's numbers), and a closing count."""
    rows = [COLUMNS] + [_row(r) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(_count(results))
    return "\n".join(lines)


def _fmt_mutant(m: dict) -> str:
    verdict = "killed  " if m["killed"] else "SURVIVED"
    offset = "" if m["offset"] is None or m["generated"] else f"  ({100 * m['offset']:+.3g}%)"
    where = "" if m["killed"] else f"  on seed(s) {_fmt_seeds(m['survived_on'])}"
    return f"    {verdict}  {m['name']}{offset}{where}"


def mutants_table(results: list[CheckResult]) -> str:
    """A plain-text report of the mutants: per check, its verdict, what it resolves (the worst seed), each
    mutant killed or SURVIVED (with its offset from the prediction) and each broken rule; a closing count."""
    lines = []
    for r in results:
        if r.skipped is not None:
            lines.append(f"{r.check.name}  [SKIPPED: {r.skipped}]")
            continue
        seeds = f" (worst of seeds {_fmt_seeds(r.seeds)})" if len(r.seeds) > 1 else ""
        lines.append(f"{r.check.name}  [{r.verdict}, resolves {_fmt_resolves(r)}{seeds}]")
        lines += [_fmt_mutant(m) for m in r.mutants]
        lines += [f"    RULE      {rule}" for rule in r.rules]
        lines += [f"    coarse    {r.check.coarse}"] if r.check.coarse else []
    mutants = [m for r in results for m in r.mutants]
    killed = sum(m["killed"] for m in mutants)
    generated = sum(m["generated"] for m in mutants)
    skipped = sum(r.skipped is not None for r in results)
    lines.append(f"{killed} of {len(mutants)} mutants killed ({len(mutants) - generated} declared, {generated} "
                 f"generated), {len(mutants) - killed} survived; {sum(r.verdict == 'FAIL' for r in results)} check(s) "
                 f"failed"
                 + (f", {skipped} skipped" if skipped else "") + f"; {sum(len(r.rules) for r in results)} rule(s) "
                                                                 f"broken")
    return "\n".join(lines)


def results_html(results: list[CheckResult]) -> str:
    """An HTML table of results (claims as tooltips), for notebooks.  The column "resolves" is
    :attr:`CheckResult.resolves`, the smallest relative error of the prediction the check detects on
    every seed.  Its class ``rcteach-checks`` lets the book keep the verdict column in view on a phone."""
    head = "".join(f"<th>{c}</th>" for c in COLUMNS)
    body = "".join(
        f"<tr title='{html.escape(r.skipped or r.check.claim)}'>"
        + "".join(f"<td>{html.escape(cell)}</td>" for cell in _row(r)) + "</tr>"
        for r in results
    )
    skipped = list(dict.fromkeys(r.skipped for r in results if r.skipped is not None))
    note = f"<p>Skipped: {html.escape('; '.join(skipped))}</p>" if skipped else ""
    return f"<table class='rcteach-checks'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"
