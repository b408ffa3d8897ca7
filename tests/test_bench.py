"""Unit tests for rcteach.tools.bench (tiny sizes: these test the machinery, not the timings)."""

import csv
import math

import pytest
import torch

from rcteach.tools import bench
from rcteach.tools.cli import build_parser, main


def test_fit_exponent():
    x = [16, 32, 64, 128]
    assert bench.fit_exponent(x, [3 * v ** 2.5 for v in x]) == pytest.approx(2.5)
    assert bench.fit_exponent([1, 2], [5.0, 5.0]) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="distinct"):
        bench.fit_exponent([2, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match="distinct"):
        bench.fit_exponent([1, 2], [1.0])
    with pytest.raises(ValueError, match="> 0"):
        bench.fit_exponent([1, 2], [0.0, 1.0])


def test_peak_memory_cpu():
    n = 2 ** 22  # 32 MiB of float64, touched
    mb = bench.peak_memory_mb(lambda: torch.ones(n, dtype=torch.float64), "cpu")
    assert 28 <= mb <= 200
    assert bench.peak_memory_mb(lambda: 1 + 1, "cpu") < 8


def test_cases_compute_the_same_numbers():
    cpu = torch.device("cpu")
    for name, kit, bare in bench._cases(24, 2, cpu, torch.float64, 2):
        k, b = kit(), bare()
        if name == "trajectory":
            k = [k.mu, k.stable_rank, k.stable_rank_gram, k.norm]
            for kk, bb in zip(k, b):
                torch.testing.assert_close(kk, bb, rtol=1e-8, atol=0)
        elif name == "spectrum":
            torch.testing.assert_close(k.abs().sort(-1).values, b.abs().sort(-1).values)
        else:
            torch.testing.assert_close(k, b, rtol=1e-8, atol=0)


def test_run_rows_and_fits():
    rows = bench.run((16, 24), batch=2, repeats=1, cases=("stable_rank", "width"), memory=False)
    assert [(r["case"], r["T"]) for r in rows] == [("stable_rank", 16), ("width", 16),
                                                    ("stable_rank", 24), ("width", 24)]
    assert all(r["section"] == "kernel" and r["bare_s"] > 0 and r["ratio"] > 0 for r in rows)
    assert math.isnan(rows[0]["peak_mb_bare"])
    rows += bench.run_depth(16, (1, 2), batch=2, repeats=1)
    f = bench.fits(rows)
    assert [(r["case"], r["fit_in"]) for r in f] == [("stable_rank", "T"), ("width", "T"), ("trajectory", "depth")]
    assert f[0]["expected"] == 3 and f[-1]["expected"] == 1
    text = bench.format_rows(rows + f)
    assert "fitted exponent" in text and "stable_rank" in text


def test_max_T_and_budget():
    rows = bench.run((16, 24), batch=1, repeats=1, cases=("stable_rank", "width"), memory=False,
                     max_T={"width": 16})
    assert [(r["case"], r["T"]) for r in rows] == [("stable_rank", 16), ("width", 16), ("stable_rank", 24)]
    rows = bench.run((16, 4096), batch=1, repeats=1, cases=("stable_rank",), memory=False, budget_s=1e-3)
    assert [r["T"] for r in rows] == [16]  # 4096 is predicted to overrun the budget


def test_suite_errors():
    with pytest.raises(ValueError, match="preset"):
        bench.suite("huge")


def test_cli_quick_csv(tmp_path, capsys):
    path = tmp_path / "b.csv"
    args = ["bench", "--quick", "--sizes", "16", "24", "--depths", "1", "2", "--batch", "1", "--repeats", "1",
            "--csv", str(path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "preset quick" in out and "fitted exponent" in out and f"wrote {path}" in out
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert {r["section"] for r in rows} == {"kernel", "depth", "fit"}
    assert list(rows[0]) == bench.FIELDS
    assert not (tmp_path / "b.csv.partial").exists()


def test_parser():
    a = build_parser().parse_args(["bench"])
    assert (a.quick, a.gpu_suite, a.sizes, a.budget, a.dtype) == (False, False, None, None, None)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "--quick", "--gpu-suite"])


@pytest.mark.gpu
def test_gpu_suite_tiny(tmp_path):
    rows = bench.run((64, 128), batch=2, repeats=1, device="cuda")
    assert all(r["device"].startswith("cuda") and r["peak_mb_rcteach"] >= 0 for r in rows)
