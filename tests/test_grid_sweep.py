"""The grid through the sweep runner: the CLI, resuming, settings, executors and dask give one table."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from rcteach import grid
from rcteach.tools.cli import main
from rcteach.sweep import SweepTable, executor_from

SMALL = dict(configs="A_perp + LN,A(X)_perp", T=[6, 8], gamma=[1.0, 0.5], depth=3, seeds=2, progress=False)
COLUMNS = ["config", "T", "gamma", "seed", "layer", "stable_rank", "stable_rank_gram", "relative_mu", "log_norm"]


def _csv(folder):
    return (folder / "depth.csv").read_text()


def test_cli_writes_resumes_and_refuses_other_settings(tmp_path, capsys):
    args = ["sweep", str(tmp_path), "--configs", "A,A(X) + skip", "--T", "6", "8", "--gamma", "1", "0.5",
            "--seeds", "2", "--depth", "3", "--quiet"]
    assert main(args) == 0
    table = SweepTable.read_csv(tmp_path / "depth.csv")
    assert table.columns == COLUMNS and len(table) == 2 * 4 * 2 * 3
    assert sorted(set(table["layer"])) == [1, 2, 3] and set(table["config"]) == {"A", "A(X) + skip"}
    full = _csv(tmp_path)
    lines = full.splitlines()
    (tmp_path / "depth.csv").write_text("\n".join(lines[:1 + 2 * 12]) + "\n")  # keep the first two points
    assert main(args) == 0 and _csv(tmp_path) == full  # resumed: the same table
    assert main(args[:-3] + ["--depth", "4", "--quiet"]) == 2  # other settings: refused
    assert "other settings" in capsys.readouterr().err
    assert main(args[:-3] + ["--depth", "4", "--quiet", "--force"]) == 0
    assert len(SweepTable.read_csv(tmp_path / "depth.csv")) == 2 * 4 * 2 * 4
    assert main(["sweep", str(tmp_path / "x"), "--configs", "B", "--quiet"]) == 2


def test_executor_gives_the_serial_table(tmp_path):
    grid.run_grid(tmp_path / "serial", **SMALL)
    with ThreadPoolExecutor(2) as pool:
        grid.run_grid(tmp_path / "pool", executor=pool, **SMALL)
    assert _csv(tmp_path / "pool") == _csv(tmp_path / "serial")
    with pytest.raises(TypeError, match="executor"):
        grid.run_grid(tmp_path / "bad", executor=object(), **SMALL)


def test_dask_local_cluster_gives_the_serial_table(tmp_path):
    pytest.importorskip("dask.distributed")
    grid.run_grid(tmp_path / "serial", **SMALL)
    client = executor_from("local:2")
    try:
        assert len(client.scheduler_info()["workers"]) == 2
        grid.run_grid(tmp_path / "dask", executor=client, **SMALL)
    finally:
        client.close()
    assert _csv(tmp_path / "dask") == _csv(tmp_path / "serial")
    with pytest.raises(ValueError, match="local:N"):
        executor_from("local:zero")
