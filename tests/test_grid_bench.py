"""``bench --grid``: the side-by-side timing of the authors' grid (small settings, a stand-in official script)."""

import math

from rcteach.tools import bench_grid

FAKE = '''import argparse, os, time
p = argparse.ArgumentParser()
for a in ("--list_gammas", "--list_n"):
    p.add_argument(a, nargs="+")
p.add_argument("--n_simulations"); p.add_argument("--n_layers")
args = p.parse_args()
os.makedirs("results/x", exist_ok=True)
t = time.process_time()
while time.process_time() - t < 0.3:
    pass
with open("results/x/x.csv", "w") as f:
    f.write("gamma,sim,T,l,stable_rank\\n1,0,6,0,2.5\\n1,0,6,1,nan\\n")
'''


def test_grid_side_by_side(tmp_path):
    (tmp_path / "stable_ranks.py").write_text(FAKE)
    lines = []
    res = bench_grid.grid_side_by_side(str(tmp_path), T=[6, 12], gamma=[1.0, 0.5], seeds=2, depth=2, point=False,
                                          log=lines.append)
    o, t = res["rcteach"], res["official"]
    assert [line.split(":")[0].strip() for line in lines] == ["rcteach", "official", "rcteach"]
    assert t["cpu_s"] >= 0.3 and t["nonfinite"] == 1 and t["values"] == 2
    assert o["nonfinite"] == 0 and len(o["points"]) == 4 and o["peak_mb"] > 0
    assert math.isclose(res["ratio_cpu"], t["cpu_s"] / o["cpu_s"])
    assert math.isfinite(o["exponent_T"]) and math.isfinite(o["exponent_d"])
    text = bench_grid.format_grid(res)
    f = res["floor"]
    assert f["import_s"] > 0 and f["eig_s"] > 0 and math.isclose(f["total_s"], f["import_s"] + f["eig_s"])
    assert math.isclose(res["ratio_floor"], t["cpu_s"] / f["total_s"])
    assert "ratio" in text and "load average" in text and "floor" in text


FAKE_POINT = '''import os, time
def produce_stable_ranks(name, config, depth, list_n, n_simulations, list_gammas):
    os.makedirs("results", exist_ok=True)
    t = time.process_time()
    while time.process_time() - t < 0.1:
        pass
    with open(f"results/{len(os.listdir('results'))}.csv", "w") as f:
        f.write("gamma,sim,T,l,stable_rank\\n1,0,6,0,2.5\\n1,0,6,1,inf\\n")
'''


def test_point_side_by_side(tmp_path):
    (tmp_path / "stable_ranks.py").write_text(FAKE_POINT)
    (tmp_path / "configs.py").write_text("configs = {'A': 0, '$A^{\\\\perp}$': 1}\n")
    lines = []
    res = bench_grid.point_side_by_side(str(tmp_path), T=8, gamma=1.0, configs=("A", "A_perp"), seeds=2, depth=2,
                                        log=lines.append)
    assert [line.split()[1].rstrip(":") for line in lines] == ["rcteach", "lean", "official", "rcteach"]
    assert res["official"]["compute_s"] >= 0.2 and res["official"]["nonfinite"] == 2
    assert res["rcteach"]["nonfinite"] == 0 and res["lean"]["nonfinite"] == 0
    for side in ("official", "lean"):
        assert math.isclose(res[f"ratio_{side}"], res[side]["compute_s"] / res["rcteach"]["compute_s"])
    assert "less CPU than the official code" in bench_grid.format_point(res)


def test_lean_point_matches_the_grid_in_law():
    """The lean loop and the grid simulate the same networks: at T = 32 their mean Gram stable ranks agree
    within 4 standard errors per configuration and layer (independent draws, 64 seeds each)."""
    from rcteach import grid

    T, depth = 32, 3
    lean = bench_grid.lean_point(T, 1.0, ("A", "A(X)"), depth=depth, seeds=64, seed=1)
    ours = grid.simulate(T, 1.0, ["A", "A(X)"], depth=depth, seeds=64, seed=2)
    for name, ranks in lean.items():
        kit = ours[name]["stable_rank_gram"].double()
        se = (ranks.var(-1) / ranks.shape[-1] + kit.var(-1) / kit.shape[-1]).sqrt()
        assert ((ranks.mean(-1) - kit.mean(-1)).abs() <= 4 * se).all(), name


def test_fit_cost_exponents():
    pts = [(T, d, 1e-6 * T ** 3 * d ** 0.5) for T in (10, 20, 40) for d in (40, 80)]
    p, q = bench_grid.fit_cost_exponents(pts)
    assert math.isclose(p, 3.0, abs_tol=1e-9) and math.isclose(q, 0.5, abs_tol=1e-9)


def test_cli_official_needs_grid_and_the_official_script(capsys, tmp_path):
    from rcteach.tools.cli import main

    assert main(["bench", "--official", str(tmp_path)]) == 2  # --official without --grid
    assert "--grid" in capsys.readouterr().err
    assert main(["bench", "--grid", "--official", str(tmp_path)]) == 2  # a folder without the official code
    assert "stable_ranks.py" in capsys.readouterr().err
