"""Unit tests for rcteach.sweep: the grid runner, the tidy table, the store, resuming, plots."""

import csv

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from rcteach.plotting import plot_sweep  # noqa: E402
from rcteach.sweep import SweepTable, grid_points, point_seed, sweep  # noqa: E402
from rcteach.width import width_point  # noqa: E402

CALLS = []


def toy(a, b, *, seeds, seed):
    """One value per seed, reproducible from seed, plus a scalar column."""
    CALLS.append((a, b))
    g = torch.Generator().manual_seed(seed)
    return {"x": a * 10 + b + torch.rand(seeds, generator=g, dtype=torch.float64), "const": 1.5}


def test_grid_points_order_and_errors():
    pts = grid_points({"a": [1, 2], "b": ["u", "v", "w"]})
    assert pts[:2] == [{"a": 1, "b": "u"}, {"a": 1, "b": "v"}] and len(pts) == 6
    with pytest.raises(ValueError, match="grid"):
        grid_points({})
    with pytest.raises(ValueError, match="seed"):
        grid_points({"seed": [1]})
    with pytest.raises(TypeError, match="grid"):
        grid_points({"a": "abc"})
    with pytest.raises(ValueError, match="empty"):
        grid_points({"a": []})


def test_point_seed_order_independent():
    assert point_seed({"a": 1, "b": 2.0}) == point_seed({"b": 2.0, "a": 1})
    assert point_seed({"a": 1}) != point_seed({"a": 2})
    assert point_seed({"a": 1}, base=1) != point_seed({"a": 1})
    assert 0 <= point_seed({"a": 1}) < 2 ** 31


def test_sweep_tidy_rows():
    t = sweep(toy, {"a": [1, 2], "b": [3, 4]}, seeds=3, progress=False)
    assert isinstance(t, SweepTable) and len(t) == 12
    assert t.columns == ["a", "b", "seed", "x", "const", "seconds"]
    assert t["seed"][:3] == [0, 1, 2]
    assert t.where(a=2, b=4)["const"] == [1.5] * 3
    assert all(23 <= x < 24 for x in t.where(a=2, b=3)["x"])
    g = t.group(["a"], "x")
    assert g["n"] == [6, 6] and len(g) == 2
    again = sweep(toy, {"b": [4, 3], "a": [2, 1]}, seeds=3, progress=False)  # reordered grid
    assert sorted(again["x"]) == sorted(t["x"])  # same seeds per point


def test_sweep_resume(tmp_path):
    path = tmp_path / "s.csv"
    CALLS.clear()
    first = sweep(toy, {"a": [1], "b": [3, 4]}, seeds=2, path=path, progress=False)
    assert len(CALLS) == 2
    CALLS.clear()
    full = sweep(toy, {"a": [1, 2], "b": [3, 4]}, seeds=2, path=path, progress=False)
    assert CALLS == [(2, 3), (2, 4)]  # only the new points ran
    assert len(full) == 8
    assert full.where(a=1)["x"] == first["x"]
    on_disk = SweepTable.read_csv(path)
    assert len(on_disk) == 8 and on_disk.where(a=2, b=4)["seed"] == [0, 1]
    assert isinstance(on_disk["x"][0], float) and isinstance(on_disk["a"][0], int)
    CALLS.clear()
    sweep(toy, {"a": [1, 2], "b": [3, 4]}, seeds=2, path=path, progress=False)
    assert CALLS == []  # nothing left to do
    fresh = sweep(toy, {"a": [1], "b": [3]}, seeds=2, path=path, resume=False, progress=False)
    assert len(SweepTable.read_csv(path)) == len(fresh) == 2
    with open(path) as f:
        assert next(csv.reader(f)) == ["a", "b", "seed", "x", "const", "seconds"]


def test_sweep_resume_wrong_grid(tmp_path):
    path = tmp_path / "s.csv"
    sweep(toy, {"a": [1], "b": [3]}, path=path, progress=False)
    with pytest.raises(ValueError, match="other settings"):
        sweep(lambda c, seeds, seed: 1.0, {"c": [1]}, path=path, progress=False)


def test_sweep_errors():
    with pytest.raises(TypeError, match="fn"):
        sweep(3, {"a": [1]})
    with pytest.raises(ValueError, match="seeds"):
        sweep(toy, {"a": [1], "b": [1]}, seeds=0)
    with pytest.raises(TypeError, match="resume"):
        sweep(toy, {"a": [1], "b": [1]}, resume=1)
    with pytest.raises(ValueError, match="one per seed"):
        sweep(lambda a, seeds, seed: torch.zeros(seeds + 1), {"a": [1]}, seeds=2, progress=False)


def test_table_io_and_errors(tmp_path):
    t = SweepTable([{"a": 1, "flag": True, "name": "x", "v": 0.5}])
    t.to_csv(tmp_path / "t.csv")
    back = SweepTable.read_csv(tmp_path / "t.csv")
    assert back.rows == t.rows
    with pytest.raises(KeyError, match="zz"):
        t["zz"]
    with pytest.raises(KeyError, match="zz"):
        t.where(zz=1)
    with pytest.raises(KeyError, match="zz"):
        t.group(["zz"], "v")
    assert "1 rows" in repr(t)


def test_plot_sweep():
    t = sweep(toy, {"a": [1, 2, 3], "b": [0, 1]}, seeds=2, progress=False)
    ax = plot_sweep(t, "a", "x", hue="b", ylabel="x (toy)")
    assert len(ax.lines) == 2 and ax.get_legend() is not None
    ax = plot_sweep(t.where(b=0), "a", "x", logy=True)
    assert ax.get_yscale() == "log"
    with pytest.raises(TypeError, match="table"):
        plot_sweep([], "a", "x")
    import matplotlib.pyplot as plt

    plt.close("all")


def test_width_point():
    w = width_point(32, 0.5, seeds=3, seed=0)
    assert set(w) == {"stable_rank", "stable_rank_gram"} and w["stable_rank"].shape == (3,)
    assert (w["stable_rank_gram"] <= w["stable_rank"]).all()
    assert torch.equal(width_point(32, 0.5, seeds=3, seed=0)["stable_rank"], w["stable_rank"])


def test_sweep_layers_column(tmp_path):
    def traj(T, seeds, seed):
        from rcteach import orthonormal_tokens, propagate

        run = propagate(orthonormal_tokens(T, T, batch=seeds, seed=seed), 3, values="identity", seed=seed + 1)
        return {"ratio": run.mu.square() / run.mu[0].square(), "T_again": float(T)}

    t = sweep(traj, {"T": [8, 16]}, seeds=2, path=tmp_path / "t.csv", progress=False)
    assert len(t) == 2 * 4 * 2 and t.columns[:3] == ["T", "layer", "seed"]
    assert t.where(T=8, layer=0)["ratio"] == [1.0, 1.0]
    g = t.where(T=16).group(["layer"], "ratio")
    assert g["layer"] == [0, 1, 2, 3] and g["mean"][3] < g["mean"][1]
    assert len(SweepTable.read_csv(tmp_path / "t.csv")) == len(t)
    with pytest.raises(ValueError, match="layers"):
        sweep(lambda a, seeds, seed: {"x": torch.zeros(3, seeds), "y": torch.zeros(2, seeds)}, {"a": [1]},
              progress=False)


def test_grid_values_twice_or_unstorable_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"grid\['a'\] has a value twice"):
        sweep(toy, {"a": [1, 1], "b": [3]}, progress=False)
    with pytest.raises(TypeError, match=r"grid\['b'\]: a stored sweep needs values that a CSV cell keeps"):
        sweep(toy, {"a": [1], "b": [(3, 4)]}, path=tmp_path / "s.csv", progress=False)
    with pytest.raises(ValueError, match="path must be a CSV file name in an existing folder"):
        sweep(toy, {"a": [1], "b": [3]}, path=tmp_path / "missing" / "s.csv", progress=False)
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_stored_rows_are_what_a_rerun_reads(tmp_path):
    """NumPy scalars are stored as numbers (and returned so); other objects are refused naming the column;
    points stored by an earlier, larger grid stay in the table after the grid's own."""
    import numpy as np

    def rows(a, seeds, seed):
        return [{"seed": s, "x": np.float64(a + s / 10)} for s in range(seeds)]

    path = tmp_path / "s.csv"
    first = sweep(rows, {"a": [1, 2]}, seeds=2, path=path, progress=False, timing=False)
    assert type(first["x"][0]) is float and first["x"] == [1.0, 1.1, 2.0, 2.1]
    again = sweep(rows, {"a": [2]}, seeds=2, path=path, progress=False, timing=False)
    assert again.rows == first.rows[2:] + first.rows[:2]  # the grid's point first, then the other stored one
    assert SweepTable.read_csv(path).rows == again.rows
    with pytest.raises(TypeError, match="fn returned a list in column 'x' at a=3"):
        sweep(lambda a, seeds, seed: [{"seed": s, "x": [1.0]} for s in range(seeds)], {"a": [3]}, seeds=2, path=path,
              progress=False, timing=False)


def test_a_cluster_named_by_a_string_is_started_after_the_checks_and_closed(tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from rcteach import sweep as sweep_module

    started = []

    class Client(ThreadPoolExecutor):  # what executor_from returns: an executor with close()
        close = ThreadPoolExecutor.shutdown

    def fake(spec):
        started.append(spec)
        return Client(1)

    monkeypatch.setattr(sweep_module, "executor_from", fake)
    table = sweep(toy, {"a": [1], "b": [3, 4]}, seeds=2, executor="local:3", progress=False, timing=False)
    assert started == ["local:3"] and table.rows == sweep(toy, {"a": [1], "b": [3, 4]}, seeds=2, progress=False,
                                                           timing=False).rows
    with pytest.raises(ValueError, match="executor: expected 'local:N' with N >= 1"):
        sweep(toy, {"a": [1], "b": [3]}, executor="local:0", progress=False)
    assert started == ["local:3"]


def test_a_foreign_table_is_refused_and_kept(tmp_path):
    """A CSV of other columns where the table goes (no store next to it) is refused, every time, untouched."""
    path = tmp_path / "s.csv"
    SweepTable([{"c": 1, "v": 0.5}]).to_csv(path)
    before = path.read_bytes()
    for _ in range(2):
        with pytest.raises(ValueError, match=r"has no column\(s\) \['a', 'b'\]: not a sweep over this grid"):
            sweep(toy, {"a": [1], "b": [3]}, path=path, progress=False)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["s.csv", "s.lock"]
    assert len(sweep(toy, {"a": [1], "b": [3]}, path=path, resume=False, progress=False)) == 1
