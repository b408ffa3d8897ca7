"""Unit tests for rcteach.checks.registry: comparisons, registration, running and reporting."""

import inspect
import json
import math
import uuid

import pytest
import torch

import rcteach
import rcteach.checks.registry as registry_module
from rcteach.checks import (
    Check,
    CheckResult,
    Comparison,
    all_checks,
    mutants_table,
    off_by,
    register,
    results_html,
    results_table,
    run_check,
    run_checks,
)

ONE_OFF = {"one off": lambda p, s: p + 1}  # a mutant for the throwaway numeric checks

FOUNDATION_CHECKS = ["mask-connectivity", "causal-centre", "sliding-diameter", "row-stochastic", "outlier-one",
                     "bulk-radius", "centring-swaps-outlier"]


@pytest.fixture
def throwaway():
    """Unique check names for this test; afterwards every registered name that starts with one is removed."""
    names = []

    def make(tag="check"):
        name = f"zz-unit-test-{tag}-{uuid.uuid4().hex[:8]}"
        names.append(name)
        return name

    yield make
    for registered in list(registry_module._REGISTRY):
        if any(registered.startswith(name) for name in names):
            del registry_module._REGISTRY[registered]


# -- Comparison ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "comparison, passed",
    [
        (Comparison(1.0, 1.0), True),
        (Comparison(1.0, 1.0 + 1e-12), False),  # default tolerance 0
        (Comparison(1.0, 1.1, tolerance=0.1 + 1e-12), True),
        (Comparison(1.0, 1.2, tolerance=0.1), False),
        (Comparison(1.0, 0.85, tolerance=0.1), False),
        (Comparison(1.0, 0.95, tolerance=0.1), True),
        (Comparison(100.0, 104.0, tolerance=0.05, relative=True), True),
        (Comparison(100.0, 106.0, tolerance=0.05, relative=True), False),
        (Comparison(-100.0, -104.0, tolerance=0.05, relative=True), True),  # relative to |prediction|
        (Comparison(100.0, 104.0, tolerance=0.05), False),  # absolute: 4 > 0.05
        (Comparison(0.0, 1e-11, tolerance=1e-10), True),
        (Comparison(0.0, 1e-11, tolerance=1e-10, relative=True), False),  # relative to 0: exact
        (Comparison(2, 2), True),
        (Comparison(torch.tensor(0.5), 0.5), True),
        (Comparison(0.5, torch.tensor(0.7), tolerance=0.1), False),
    ],
)
def test_numeric_comparisons(comparison, passed):
    assert comparison.passed is passed


@pytest.mark.parametrize(
    "comparison",
    [
        Comparison(0.0, math.nan, tolerance=1e9),
        Comparison(math.nan, 0.0, tolerance=1e9),
        Comparison(math.nan, math.nan, tolerance=1e9),
        Comparison(1.0, math.nan, tolerance=1.0, relative=True),
        Comparison(0.0, torch.tensor(math.nan), tolerance=1.0),
        Comparison((math.nan,), (math.nan,)),  # the same float object on both sides
        Comparison((1, (2, math.nan)), (1, (2, math.nan))),
        Comparison([math.nan], [math.nan]),
        Comparison(1.0, math.inf, tolerance=1e9),
        Comparison(math.inf, -math.inf, tolerance=1e9),
    ],
)
def test_nan_and_mismatched_infinities_never_pass(comparison):
    assert comparison.passed is False


def test_matching_infinities_pass():
    # a graph diameter of inf predicted and measured (causal masks) is a pass
    assert Comparison(math.inf, math.inf).passed is True


@pytest.mark.parametrize(
    "prediction, measured, passed",
    [
        ((True, False), (True, False), True),
        ((True, False), (True, True), False),
        (((0,), (0,)), ((0,), (0,)), True),
        (((0,), (0,)), ((0,), (0, 1)), False),
        ((11, 1), (11, 1), True),
        ((11, 1), (11.0, 1.0), True),  # numbers compare by value
        ((1.0, 2.0), (1.0, 2.0000001), False),  # tuples are exact, tolerance or not
        ((1, 2), [1, 2], False),  # a tuple never equals a list
        ([1, 2], [1, 2], True),
        ("complete", "complete", True),
        ("complete", "causal", False),
        (True, True, True),
        (True, False, False),
    ],
)
def test_exact_comparisons(prediction, measured, passed):
    assert Comparison(prediction, measured, tolerance=1.0).passed is passed


def test_comparison_is_frozen():
    c = Comparison(1.0, 1.0)
    with pytest.raises(AttributeError):
        c.tolerance = 5.0


# -- register and registry -------------------------------------------------------------------------

def test_the_registry_module_is_the_module():
    """``rcteach.checks.registry`` is the module (with Check ...); the function is ``all_checks``."""
    assert rcteach.checks.registry is registry_module and registry_module.Check is Check
    assert registry_module.all_checks() == all_checks()


def test_foundation_checks_are_registered():
    names = list(all_checks())
    for name in FOUNDATION_CHECKS:
        assert name in names
    assert all(isinstance(c, Check) for c in all_checks().values())


def test_registry_returns_a_copy(throwaway):
    name = throwaway()
    snapshot = all_checks()
    snapshot[name] = None
    assert name not in all_checks()


def test_register_records_the_check(throwaway):
    name = throwaway()

    @register(name, claim="two is two", source="exact", tolerance_note="exact", mutants=ONE_OFF, quick=dict(x=2),
              full=dict(x=3))
    def f(*, x):
        return Comparison(2, x)

    assert f(x=2).passed  # the decorator returns the function itself
    check = all_checks()[name]
    assert ((check.name, check.claim, check.source, check.tolerance_note, check.func)
            == (name, "two is two", "exact", "exact", f))
    assert check.quick == {"x": 2} and check.full == {"x": 3}
    assert list(all_checks())[-1] == name  # registration order


def test_register_rejects_duplicates(throwaway):
    name = throwaway()
    register(name, claim="a", source="derived", tolerance_note="n", mutants=ONE_OFF)(lambda: Comparison(0, 0))
    original = all_checks()[name]
    with pytest.raises(ValueError, match=name):
        register(name, claim="b", source="derived", tolerance_note="n", mutants=ONE_OFF)(lambda: Comparison(0, 1))
    assert all_checks()[name] is original
    with pytest.raises(ValueError, match="already registered"):
        register("row-stochastic", claim="b", source="exact", tolerance_note="n",
                 mutants=ONE_OFF)(lambda: Comparison(0, 1))


def test_register_rejects_unknown_source(throwaway):
    with pytest.raises(ValueError, match="source"):
        register(throwaway(), claim="a", source="folklore", tolerance_note="n", mutants=ONE_OFF)
    assert not any(n.startswith("zz-unit-test") for n in all_checks())


def test_throwaway_checks_are_cleaned_up():
    # runs after the tests above: nothing they registered is left behind
    assert not any(n.startswith("zz-unit-test") for n in all_checks())


# -- settings and run_check ------------------------------------------------------------------------

@pytest.fixture
def echo(throwaway):
    """A check that records what it was called with; passes iff x == 1."""
    name = throwaway("echo")
    calls = []

    @register(name, claim="x is one", source="derived", tolerance_note="exact", mutants=ONE_OFF,
              quick=dict(x=1, y=2), full=dict(y=20))
    def f(*, x, y, z=5, device=None):
        calls.append(dict(x=x, y=y, z=z, device=device, grad=torch.is_grad_enabled()))
        return Comparison(prediction=1, measured=x)

    return name, calls


def test_settings_layering(echo):
    name, _ = echo
    check = all_checks()[name]
    assert check.settings() == dict(z=5, device=None, x=1, y=2)
    assert check.settings("full") == dict(z=5, device=None, x=1, y=20)
    assert check.settings("full", z=7, x=3) == dict(z=7, device=None, x=3, y=20)
    with pytest.raises(ValueError, match="mode"):
        check.settings("medium")
    with pytest.raises(ValueError, match="bogus"):
        check.settings(bogus=1)


def test_run_check(echo):
    name, calls = echo
    result = run_check(name)
    assert isinstance(result, CheckResult)
    assert result.passed and result.comparison == Comparison(1, 1)
    assert result.setting == dict(z=5, device=None, x=1, y=2)
    assert result.seconds >= 0
    assert calls[-1] == dict(x=1, y=2, z=5, device=None, grad=False)  # runs under no_grad


def test_run_check_overrides_and_modes(echo):
    name, calls = echo
    result = run_check(name, "full", x=2, z=0)
    assert not result.passed
    assert calls[-1]["y"] == 20 and calls[-1]["z"] == 0
    assert result.setting["x"] == 2


def test_run_check_passes_the_device(echo, throwaway):
    name, calls = echo
    run_check(name, device="cpu")
    assert calls[-1]["device"] == torch.device("cpu")
    plain = throwaway("nodevice")
    register(plain, claim="c", source="exact", tolerance_note="n", mutants=ONE_OFF)(lambda: Comparison(0, 0))
    assert run_check(plain, device="cpu").setting == {}  # dropped for checks that do not simulate


def test_run_check_errors(echo):
    name, _ = echo
    with pytest.raises(ValueError, match="no check named"):
        run_check("zz-no-such-check")
    with pytest.raises(ValueError, match="bogus"):
        run_check(name, bogus=3)
    with pytest.raises(ValueError, match="mode"):
        run_check(name, "slow")


def test_run_checks_by_pattern(throwaway):
    prefix = throwaway("group")
    for i, measured in enumerate((0, 0, 1)):
        register(f"{prefix}-{i}", claim="c", source="exact", tolerance_note="n",
                 mutants=ONE_OFF)(lambda m=measured: Comparison(0, m))
    results = run_checks(pattern=f"{prefix}-*")
    assert [r.check.name for r in results] == [f"{prefix}-{i}" for i in range(3)]
    assert [r.passed for r in results] == [True, True, False]
    assert len(run_checks(pattern=f"{prefix}-[01]")) == 2
    assert len(run_checks(pattern=f"{prefix}-*", progress=True)) == 3
    with pytest.raises(ValueError, match="pattern"):
        run_checks(pattern="zz-matches-nothing-*")


def test_foundation_mask_checks_pass():
    for name in ("mask-connectivity", "causal-centre", "sliding-diameter"):
        assert run_check(name).passed, name
    result = run_check("sliding-diameter", T=17, window=4)
    assert result.comparison.prediction == (4, 1) and result.passed


def test_foundation_spectra_checks_pass_small():
    for name in ("row-stochastic", "outlier-one"):
        assert run_check(name, T=32, seeds=2).passed
    assert rcteach.run_check("centring-swaps-outlier", T=32).passed
    # bulk-radius is statistical and costs O(T^3) at its quick T = 500: run by test_quick_mode_kills_every_mutant


# -- reporting -------------------------------------------------------------------------------------

@pytest.fixture
def results(throwaway):
    good, bad = throwaway("good"), throwaway("bad")
    register(good, claim="c <good> & fine", source="exact", tolerance_note="n", mutants=ONE_OFF, quick=dict(T=4))(
        lambda *, T: Comparison(0.0, 1e-12, tolerance=1e-10))
    register(bad, claim="c", source="paper", tolerance_note="n", mutants=ONE_OFF)(
        lambda *, device=None: Comparison(0.0625, 0.07, tolerance=0.05, relative=True))
    return [run_check(good), run_check(bad, device="cpu")]


def test_results_table(results):
    table = results_table(results)
    lines = table.splitlines()
    assert lines[-1] == "1 passed, 1 failed"
    assert lines[0].split() == ["check", "source", "setting", "predicted", "measured", "tolerance", "resolves",
                                "result"]
    assert set(lines[1]) <= {"-", " "}
    assert results[0].check.name in lines[2] and lines[2].rstrip().endswith("PASS")
    assert results[1].check.name in lines[3] and lines[3].rstrip().endswith("FAIL")
    assert "T=4" in lines[2]
    assert "device" not in lines[3]  # the device is not a setting worth a column
    assert "(rel)" in lines[3] and "(abs)" in lines[2]
    assert " - " in lines[2]  # a zero prediction: no relative resolution
    assert "17.9%" in lines[3]  # factors x with 0.0625 x passing against 0.07 lie in [1.067, 1.179]
    assert results_table([]).splitlines()[-1] == "0 passed, 0 failed"
    assert results_table(results[:1] * 3).endswith("3 passed, 0 failed")


def test_results_html_escapes(results):
    html = results_html(results)
    assert html.startswith("<table class='rcteach-checks'>") and html.endswith("</table>")
    assert html.count("<tr") == 3
    assert "c &lt;good&gt; &amp; fine" in html and "<good>" not in html
    assert results[0]._repr_html_() == results_html(results[:1])


def test_as_dict_is_json(results):
    d = results[1].as_dict()
    assert set(d) == {"name", "claim", "source", "setting", "seeds", "seed", "prediction", "measured", "tolerance",
                      "relative", "tolerance_note", "coarse", "passed", "seconds", "resolves", "per_seed", "mutants",
                      "rules"}
    assert d["mutants"][0] == {"name": "one off", "killed": True, "generated": False, "offset": pytest.approx(16.0),
                               "survived_on": []}  # 0.0625 + 1 = 17 x 0.0625
    assert d["seeds"] == [] and d["seed"] is None and len(d["per_seed"]) == 1
    assert d["setting"] == {"device": "cpu"}
    assert d["passed"] is False and d["relative"] is True
    assert json.loads(json.dumps([r.as_dict() for r in results]))[0]["passed"] is True


def test_as_dict_plain_values(throwaway):
    name = throwaway()
    register(name, claim="c", source="exact", tolerance_note="n", mutants=ONE_OFF)(
        lambda: Comparison(torch.tensor(1.0), torch.tensor([1.0, 2.0])[0]))
    d = run_check(name).as_dict()
    assert d["prediction"] == 1.0 and d["measured"] == 1.0
    assert json.dumps(d)


def test_repr(results):
    assert repr(results[0]).endswith("-> PASS)")
    assert repr(results[1]).endswith("-> FAIL)")
    assert "predicted 0.0625" in repr(results[1])


# -- rcteach.check: the one call for chapters --------------------------------------------------------

@pytest.fixture
def pair(throwaway):
    """Two checks under one prefix: `-a` takes x and passes iff x == 1, `-b` takes y and fails unless y == 0."""
    prefix = throwaway("pair")
    register(f"{prefix}-a", claim="a", source="exact", tolerance_note="n", mutants=ONE_OFF, quick=dict(x=1))(
        lambda *, x: Comparison(1.0, float(x), tolerance=0.1, relative=True))
    register(f"{prefix}-b", claim="b", source="exact", tolerance_note="n", mutants=ONE_OFF, quick=dict(y=3))(
        lambda *, y: Comparison(0.0, float(y), tolerance=0.5))
    return prefix


def test_check_returns_results_and_prints_text(pair, capsys):
    results = rcteach.check(f"{pair}-a")
    assert [r.check.name for r in results] == [f"{pair}-a"] and results[0].passed
    out = capsys.readouterr().out
    assert f"{pair}-a" in out and out.rstrip().endswith("1 passed, 0 failed")  # no IPython shell: the text table
    assert rcteach.checks.check is rcteach.check


def test_check_globs_deduplicate_and_keep_registry_order(pair, capsys):
    results = rcteach.check(f"{pair}-a", f"{pair}-[ab]", y=0)
    assert [r.check.name for r in results] == [f"{pair}-a", f"{pair}-b"]
    assert results[1].setting == {"y": 0}  # an override reaches the checks that have the setting


def test_check_raises_naming_each_failure(pair, capsys):
    with pytest.raises(rcteach.checks.CheckFailed) as exc:
        rcteach.check(f"{pair}-*", x=2)
    assert isinstance(exc.value, AssertionError)
    message = str(exc.value)
    assert "2 check(s) failed" in message
    assert f"{pair}-a: predicted 1, measured 2, tolerance 0.1 (rel)" in message
    assert f"{pair}-b: predicted 0, measured 3, tolerance 0.5 (abs)" in message
    assert [r.check.name for r in exc.value.results] == [f"{pair}-a", f"{pair}-b"]
    assert capsys.readouterr().out.rstrip().endswith("0 passed, 2 failed")  # displayed before raising


def test_check_displays_html_in_ipython(pair, monkeypatch):
    IPython = pytest.importorskip("IPython")
    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    rcteach.check(f"{pair}-a")
    assert len(shown) == 1
    assert shown[0].data.startswith("<table class='rcteach-checks'>") and f"{pair}-a" in shown[0].data


def test_check_errors(pair):
    with pytest.raises(ValueError, match="names"):
        rcteach.check()
    with pytest.raises(ValueError, match="matches no check"):
        rcteach.check("zz-matches-nothing-*")
    with pytest.raises(TypeError, match="names"):
        rcteach.check(3)
    with pytest.raises(ValueError, match="bogus"):
        rcteach.check(f"{pair}-*", bogus=1)
    with pytest.raises(ValueError, match="mode"):
        rcteach.check(f"{pair}-a", mode="slow")


# -- resolves: the smallest relative error a comparison detects -------------------------------------

@pytest.mark.parametrize(
    "comparison, expected",
    [
        (Comparison(1.0, 1.0, tolerance=0.05, relative=True), 0.05 / 0.95),  # perfect measurement: t / (1 - t)
        (Comparison(2.0, 2.0, tolerance=0.1), 0.05),  # absolute 0.1 on 2: 5% either way
        (Comparison(-2.0, -2.0, tolerance=0.1), 0.05),  # the sign of the prediction does not matter
        (Comparison(1.0, 1.02, tolerance=0.05, relative=True), 1.02 / 0.95 - 1),  # a bias widens one side
        (Comparison(1.0, 0.98, tolerance=0.05, relative=True), 1 - 0.98 / 1.05),
        (Comparison(1.0, 1.2, tolerance=0.05, relative=True), 1.2 / 0.95 - 1),  # a failing comparison too
        (Comparison(1.0, 1.0, tolerance=1.0, relative=True), math.inf),  # a 100% tolerance detects nothing
        (Comparison(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0]), tolerance=torch.tensor([0.1, 0.1])), 0.05),
    ],
)
def test_resolves(comparison, expected):
    assert comparison.resolves == pytest.approx(expected)


@pytest.mark.parametrize("e", [0.01, 0.049, 0.051, 0.2])
def test_resolves_is_the_threshold_of_scaled_predictions(e):
    c = Comparison(1.0, 1.01, tolerance=0.03, relative=True)
    detects = all(not Comparison(p, c.measured, c.tolerance, True).passed for p in (1 + e, 1 - e))
    assert detects == (e > c.resolves)


def test_resolves_undefined():
    assert Comparison(0.0, 1e-16, tolerance=1e-10).resolves is None  # a deviation compared with 0
    assert Comparison((1, 2), (1, 2)).resolves is None
    assert Comparison(1.0, math.nan, tolerance=0.1).resolves is None


def test_tensor_comparisons_are_element_by_element():
    p = torch.tensor([1.0, 10.0])
    assert Comparison(p, torch.tensor([1.05, 10.5]), tolerance=0.06, relative=True).passed
    assert not Comparison(p, torch.tensor([1.05, 10.7]), tolerance=0.06, relative=True).passed
    assert Comparison(p, torch.tensor([1.5, 10.1]), tolerance=torch.tensor([0.6, 0.2])).passed  # per-element tolerance
    assert not Comparison(p, torch.tensor([1.0, math.nan]), tolerance=1.0).passed


# -- mutants ----------------------------------------------------------------------------------------

def test_register_requires_mutants(throwaway):
    with pytest.raises(ValueError, match="mutant"):
        register(throwaway(), claim="a", source="exact", tolerance_note="n", mutants={})
    with pytest.raises(TypeError, match="mutants"):
        register(throwaway(), claim="a", source="exact", tolerance_note="n", mutants={"x": 3})
    with pytest.raises(TypeError):
        register(throwaway(), claim="a", source="exact", tolerance_note="n")  # the keyword is required
    assert "reconstruction" in registry_module.SOURCES


def test_off_by():
    m = off_by(0.05)
    assert set(m) == {"5% high", "5% low"}
    assert m["5% high"](2.0, {}) == pytest.approx(2.1) and m["5% low"](2.0, {}) == pytest.approx(1.9)


def test_mutants_killed_and_survived(throwaway):
    name = throwaway("mut")
    register(name, claim="c", source="derived", tolerance_note="n", quick=dict(T=4),
             mutants={**off_by(0.05), "T-fold": lambda p, s: p * s["T"]})(
        lambda *, T: Comparison(1.0, 1.01, tolerance=0.03, relative=True))
    r = run_check(name)
    declared = [m for m in r.mutants if not m["generated"]]
    assert [(m["name"], m["killed"]) for m in declared] == [("5% high", True), ("5% low", True), ("T-fold", True)]
    assert [m["offset"] for m in declared] == pytest.approx([0.05, -0.05, 3.0])
    assert r.rules == []  # 5% is within 2 x resolves (4.1%) on both sides
    wide = throwaway("wide")
    register(wide, claim="c", source="derived", tolerance_note="n", mutants=off_by(0.05))(
        lambda: Comparison(1.0, 1.0, tolerance=0.1, relative=True))
    w = run_check(wide)
    assert [m["killed"] for m in w.mutants if not m["generated"]] == [False, False]
    report = mutants_table([r, w])
    assert "SURVIVED  5% high" in report and "killed    T-fold  (+300%)" in report
    assert report.splitlines()[-1] == ("9 of 13 mutants killed (5 declared, 8 generated), 4 survived; "
                                       "0 check(s) failed; 0 rule(s) broken")


def test_every_registered_check_declares_a_mutant_and_an_honest_source():
    for check in all_checks().values():
        assert check.mutants, check.name
        assert check.source in ("paper", "derived", "reconstruction", "exact"), check.name


def test_quick_mode_kills_every_mutant():
    """CI runs the mutant mode: every check passes in quick mode and rejects each of its mutants."""
    from rcteach.tools.cli import main

    assert main(["check", "--mutants", "--json", "--device", "cpu"]) == 0


# -- base seeds: every run on every seed; resolves the worst; mutants killed on every seed ------------

@pytest.fixture
def seeded(throwaway):
    """A check with three base seeds whose measurement depends on the seed: 1.00, 1.01, 0.99 for seeds 1, 2, 3."""
    name = throwaway("seeded")
    calls = []

    def f(*, x=1.0, seed=0):
        calls.append(seed)
        return Comparison(1.0, x * {1: 1.0, 2: 1.01, 3: 0.99}[seed], tolerance=0.03, relative=True)

    register(name, claim="c", source="derived", tolerance_note="n", base_seeds=(1, 2, 3),
             mutants={**off_by(0.05), "2% high": lambda p, s: 1.02 * p})(f)
    return name, calls


def test_run_check_runs_every_base_seed(seeded):
    name, calls = seeded
    r = run_check(name)
    assert calls == [1, 2, 3] and r.seeds == (1, 2, 3) and len(r.comparisons) == 3
    assert "seed" not in r.setting and r.passed
    # resolves is the worst seed's, the seed shown is that one
    assert r.resolves == pytest.approx(max(c.resolves for c in r.comparisons))
    assert r.resolves == pytest.approx(1.01 / 0.97 - 1) and r.seed == 2 and r.comparison.measured == 1.01
    assert run_check(name, seed=3).seeds == (3,) and calls[-1] == 3  # one seed, overridden
    assert "seed=1/2/3" in results_table([r])
    assert "worst of seeds 1/2/3" in mutants_table([r])
    d = r.as_dict()
    assert d["seeds"] == [1, 2, 3] and [row["seed"] for row in d["per_seed"]] == [1, 2, 3]


def test_a_check_fails_when_one_seed_fails(seeded):
    name, _ = seeded
    r = run_check(name, x=1.025)  # 1.025, 1.0353, 1.0148: seed 2 fails
    assert not r.passed and r.seed == 2 and [c.passed for c in r.comparisons] == [True, False, True]
    with pytest.raises(rcteach.checks.CheckFailed, match=r"\(seed 2\): predicted 1"):
        rcteach.check(name, x=1.025)


def test_a_mutant_is_killed_only_on_every_seed(seeded):
    name, _ = seeded
    r = run_check(name)
    two = next(m for m in r.mutants if m["name"] == "2% high")
    assert two["killed"] is False and two["survived_on"] == [1, 2, 3]
    r = run_check(name, x=0.985)  # 0.985, 0.9949, 0.9752: 1.02 passes only against seed 2
    two = next(m for m in r.mutants if m["name"] == "2% high")
    assert two["killed"] is False and two["survived_on"] == [2]
    assert "SURVIVED  2% high  (+2%)  on seed(s) 2" in mutants_table([r])


def test_generated_mutants_and_the_near_mutant_rule(seeded, throwaway):
    name, _ = seeded
    r = run_check(name)
    e = r.resolves
    generated = {m["name"]: m for m in r.mutants if m["generated"]}
    assert len(generated) == 4 and all(m["killed"] for m in generated.values())
    assert [m["offset"] for m in generated.values()] == pytest.approx([1.5 * e, -1.5 * e, 0.05, -0.05])
    assert r.rules == []
    far = throwaway("far")
    register(far, claim="c", source="derived", tolerance_note="n", mutants={"doubled": lambda p, s: 2 * p},
             coarse="one term it cannot resolve, and why")(lambda: Comparison(1.0, 1.0, tolerance=0.1, relative=True))
    f = run_check(far)
    assert [m["name"] for m in f.mutants if m["generated"]] == ["16.7% high (generated: 1.5 x resolves)",
                                                              "16.7% low (generated: 1.5 x resolves)"]  # coarse: no 5%
    assert len(f.rules) == 2 and "above the prediction (nearest +100.00%)" in f.rules[0] and "below" in f.rules[1]
    report = mutants_table([f])
    assert "RULE      no declared mutant within 2 x resolves (22.22%) above" in report
    assert "coarse    one term it cannot resolve" in report and report.endswith("2 rule(s) broken")
    assert all(m["generated"] is False for m in run_check("mask-connectivity").mutants)  # exact: none generated


def test_register_checks_the_base_seeds(throwaway):
    with pytest.raises(ValueError, match="at least 3 distinct base seeds"):
        register(throwaway(), claim="c", source="derived", tolerance_note="n", mutants=ONE_OFF, base_seeds=(1, 2, 2))(
            lambda *, seed: Comparison(0, 0))
    with pytest.raises(ValueError, match="no seed setting"):
        register(throwaway(), claim="c", source="derived", tolerance_note="n", mutants=ONE_OFF, base_seeds=(1, 2, 3))(
            lambda: Comparison(0, 0))
    with pytest.raises(TypeError, match="base_seeds"):
        register(throwaway(), claim="c", source="derived", tolerance_note="n", mutants=ONE_OFF, base_seeds=(1, 2, "3"))
    with pytest.raises(TypeError, match="coarse"):
        register(throwaway(), claim="c", source="derived", tolerance_note="n", mutants=ONE_OFF, coarse=True)


def test_every_simulating_check_runs_on_three_seeds():
    for check in all_checks().values():
        if "seed" in inspect.signature(check.func).parameters:
            assert len(set(check.base_seeds)) >= 3, check.name
