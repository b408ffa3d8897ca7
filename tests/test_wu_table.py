"""Tests of rcteach.wu_table: the LayerNorm table of Wu et al. (layernorm_runs, layernorm_table, format_table)."""

import math

import pytest
import torch

from rcteach import Trajectory
from rcteach import wu_table
from rcteach.masks import MASK_KINDS


def test_logit_s2():
    assert wu_table.logit_s2(768, "layernorm") == pytest.approx(1 / (9 * 768**2))
    assert wu_table.logit_s2(768, "rms") == pytest.approx(1 / 9)


def test_table_shape_and_reproducible():
    kw = dict(T=8, d=16, seeds=2, layers=(0, 4), window=1)
    rows = wu_table.layernorm_table(**kw, seed=0)
    assert len(rows) == 8 and {r.mask for r in rows} == set(MASK_KINDS)
    assert rows == wu_table.layernorm_table(**kw, seed=0)
    runs = wu_table.layernorm_runs(T=8, d=16, seeds=2, depth=4, window=1, seed=0)
    assert wu_table.table_rows(runs, layers=(0, 4)) == rows  # the table of runs already made
    assert all(0 <= r.relative <= 1 + 1e-12 for r in rows)
    table = wu_table.format_table(rows, published=wu_table.PUBLISHED_TABLE)
    assert "complete" in str(table) and "<th>complete</th>" in table._repr_html_()


def test_errors():
    with pytest.raises(ValueError):
        wu_table.layernorm_runs(T=8, d=8, depth=2, norm="bad")
    with pytest.raises(ValueError):
        wu_table.layernorm_table(T=8, d=8, seeds=1, layers=(0, 4), depth=2)
    with pytest.raises(ValueError):
        wu_table.layernorm_runs(T=8, d=8, depth=2, masks=("nope",))


def test_rho_from_mu0_round_trip():
    rho = wu_table.rho_from_mu0(200.0, 128, 768)
    assert 768 * 127 * (1 - rho) == pytest.approx(200.0**2)
    assert wu_table.rho_from_mu0(math.sqrt(768 * 127), 128, 768) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="mu0"):
        wu_table.rho_from_mu0(400.0, 128, 768)
    with pytest.raises(ValueError, match="mu0"):
        wu_table.rho_from_mu0(0.0, 128, 768)


def test_paper_setting_runs_and_mu0_matches():
    setting = {**wu_table.PAPER_SETTING, "d": 16}
    res = wu_table.layernorm_runs(seeds=64, depth=1, seed=0, masks=("complete",), **setting)
    assert set(res) == {"complete"} and isinstance(res["complete"], Trajectory)
    mu0 = res["complete"].mu[0]
    expected = math.sqrt(16 * (setting["T"] - 1) * (1 - setting["rho"]))
    assert abs(mu0.mean().item() / expected - 1) < 0.05
    assert mu0.dtype == torch.float32


def _fake_runs(values):
    """layernorm_runs-shaped output with mu = relative mu = values[kind] (depth + 1 values, 1 seed)."""
    runs = {}
    for kind, v in values.items():
        mu = torch.tensor(v, dtype=torch.float64)[:, None]
        runs[kind] = Trajectory(mu, torch.ones_like(mu), torch.ones_like(mu), torch.ones_like(mu))
    return runs


def test_table_pattern():
    good = {"complete": [1.0, 1e-7, 1e-7], "causal": [1.0, 0.2, 0.3], "sliding": [1.0, 0.5, 0.4],
            "sliding-causal": [1.0, 0.6, 0.62]}
    assert wu_table.table_pattern(_fake_runs(good), first=1) == (True, True, True, True)
    bad = {**good, "causal": [1.0, 1e-7, 1e-7], "sliding-causal": [1.0, 0.6, 0.3]}
    assert wu_table.table_pattern(_fake_runs(bad), first=1) == (True, False, True, False)
    with pytest.raises(ValueError, match="first"):
        wu_table.table_pattern(_fake_runs(good), first=2)
    with pytest.raises(ValueError, match="causal"):
        wu_table.table_pattern(_fake_runs({"complete": [1.0, 1.0, 1.0]}))


def test_format_table_scale():
    rows = [wu_table.LNRow("causal", 0, 2.0, 0.5, 1.0)]
    table = wu_table.format_table(rows, scale=3.0)
    assert table.columns == ("layer", "causal") and table.rows == (("0", "6 (1.5)"),)
    assert "<td>6 (1.5)</td>" in table._repr_html_() and str(table).splitlines()[-1].split() == ["0", "6", "(1.5)"]
    with pytest.raises(ValueError, match="scale"):
        wu_table.format_table(rows, scale=0.0)


def test_shipped_variant_table_is_what_the_script_writes():
    """rcteach/ln_variants.json (scripts/precompute.py): the settings and layers of the code, every
    variant, and one variant recomputed: the same pattern and, where mu is not at the float32 floor
    (relative mu > 1e-3; the floor's round-off differs between CPUs), the same relative mu to 1e-4.
    About 2 s of CPU ("no dropout": no dropout draws)."""
    shipped = wu_table.shipped_variant_table()
    assert shipped["settings"] == wu_table.VARIANT_SETTINGS and tuple(shipped["layers"]) == wu_table.VARIANT_LAYERS
    assert list(shipped["variants"]) == list(wu_table.VARIANTS)
    [(name, fresh)] = wu_table.variant_table(["no dropout"], **wu_table.VARIANT_SETTINGS).items()
    stored = shipped["variants"][name]
    assert fresh["pattern"] == stored["pattern"] == [True, False, True, True]
    for kind in MASK_KINDS:
        a, b = torch.tensor(fresh["relative_mu"][kind]), torch.tensor(stored["relative_mu"][kind])
        assert torch.allclose(a[b > 1e-3], b[b > 1e-3], rtol=1e-4, atol=0), kind


def test_variant_table_bad_names():
    with pytest.raises(ValueError, match="names"):
        wu_table.variant_table(["no such variant"])
    with pytest.raises(TypeError, match="names"):
        wu_table.variant_table("reconstruction")
    with pytest.raises(ValueError, match="depth"):
        wu_table.variant_table(["reconstruction"], depth=64)
