"""The grid through the sweep engine: the CLI, the store, resuming, settings, executors and dask give one table.

Fault injection (issue 27): a torn or cut table, an old table without a store, damaged point and
settings files, a second sweep at the same time, a full disk (a file-size limit, and a real small
filesystem where we may mount one), a killed run.  Each ends with the table of the uninterrupted run,
byte for byte, or with a clean refusal (exit 1 or 2, one line naming the file).  The processes are
forked from the test process (torch already imported), each a real process with its own lock and limits.
"""

import contextlib
import glob
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rcteach import grid
from rcteach.sweep import SweepTable, executor_from, sweep
from rcteach.sweep_store import Store
from rcteach.tools.cli import main

SMALL = dict(configs="A_perp + LN,A(X)_perp", T=[6, 8], gamma=[1.0, 0.5], depth=3, seeds=2, progress=False)
COLUMNS = ["config", "T", "gamma", "seed", "layer", "stable_rank", "stable_rank_gram", "relative_mu", "log_norm"]
ARGS = ["--configs", "A,A_perp", "--T", "6", "8", "--gamma", "1", "0.5", "--seeds", "2", "--depth", "3", "--quiet"]
ROWS, POINTS = 48, 4  # 4 points (T, gamma) x 2 configurations x 2 seeds x 3 layers


def _csv(folder):
    return (folder / "depth.csv").read_text()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run's depth.csv (bytes)."""
    out = tmp_path_factory.mktemp("reference") / "out"
    assert main(["sweep", str(out), *ARGS]) == 0
    table = (out / "depth.csv").read_bytes()
    assert len(SweepTable.read_csv(out / "depth.csv")) == ROWS
    return table


def _sweep(out, capsys, *extra):
    """Run the sweep into ``out`` in this process: (exit status, stderr)."""
    status = main(["sweep", str(out), *ARGS, *extra])
    return status, capsys.readouterr().err


def _fork(argv, log, *, fsize=None, point_s=0.0):
    """``main(argv)`` in a forked process, stderr to the file ``log``, at most ``fsize`` bytes per file, each
    grid point taking at least ``point_s`` seconds; its pid."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 99
        try:
            sys.stderr = open(log, "w")
            if fsize is not None:  # a write past the limit then fails with EFBIG instead of killing the process
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            if point_s:
                rows = grid.grid_rows
                grid.grid_rows = lambda *a, **k: (time.sleep(point_s), rows(*a, **k))[1]
            code = main(argv)
        finally:
            sys.stderr.flush()
            os._exit(code)
    return pid


def _wait(pid) -> int:
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_cli_writes_resumes_and_refuses_other_settings(tmp_path, capsys):
    args = ["sweep", str(tmp_path), "--configs", "A,A(X) + skip", "--T", "6", "8", "--gamma", "1", "0.5",
            "--seeds", "2", "--depth", "3", "--quiet"]
    assert main(args) == 0
    table = SweepTable.read_csv(tmp_path / "depth.csv")
    assert table.columns == COLUMNS and len(table) == 2 * 4 * 2 * 3
    assert sorted(set(table["layer"])) == [1, 2, 3] and set(table["config"]) == {"A", "A(X) + skip"}
    full = _csv(tmp_path)
    for name in sorted(glob.glob(str(tmp_path / "depth.points" / "*.json")))[:2]:
        os.remove(name)  # two points lost
    assert main(args) == 0 and _csv(tmp_path) == full  # redone: the same table
    assert main(args[:-3] + ["--depth", "4", "--quiet"]) == 2  # other settings: refused
    assert "other settings" in capsys.readouterr().err
    assert main(args[:-3] + ["--depth", "4", "--quiet", "--force"]) == 0
    assert len(SweepTable.read_csv(tmp_path / "depth.csv")) == 2 * 4 * 2 * 4
    assert main(["sweep", str(tmp_path / "x"), "--configs", "B", "--quiet"]) == 2


CUTS = {  # where a crash or a full disk cut depth.csv: (description, bytes kept)
    "torn mid-row (early)": lambda t: int(0.3 * len(t)) + 5,
    "torn mid-row (middle)": lambda t: int(0.55 * len(t)) + 7,
    "torn mid-row (late)": lambda t: int(0.8 * len(t)) + 3,
    "cut at a row boundary inside a point": lambda t: _line_end(t, 1 + ROWS // POINTS + 5),
    "cut right after the header": lambda t: _line_end(t, 1),
    "empty": lambda t: 0,
}


def _line_end(text: bytes, lines: int) -> int:
    """The offset just after the first ``lines`` lines of ``text``."""
    end = 0
    for _ in range(lines):
        end = text.index(b"\n", end) + 1
    return end


@pytest.mark.parametrize("cut", CUTS)
def test_a_cut_table_is_rewritten_from_the_store(cut, reference, tmp_path, capsys):
    out = tmp_path / "out"
    assert _sweep(out, capsys)[0] == 0
    (out / "depth.csv").write_bytes(reference[:CUTS[cut](reference)])
    assert _sweep(out, capsys)[0] == 0
    assert (out / "depth.csv").read_bytes() == reference


@pytest.mark.parametrize("cut", CUTS)
def test_an_old_table_without_a_store_is_imported_point_by_point(cut, reference, tmp_path, capsys):
    """A folder from the previous release (depth.csv and depth.json, no store), cut: its whole points are
    reused, the others redone, each said on stderr; the table is the uninterrupted one."""
    out = tmp_path / "out"
    assert _sweep(out, capsys)[0] == 0
    shutil.rmtree(out / "depth.points")
    kept = reference[:CUTS[cut](reference)]
    (out / "depth.csv").write_bytes(kept)
    status, err = _sweep(out, capsys)
    assert status == 0 and (out / "depth.csv").read_bytes() == reference, err
    rows = max(kept.count(b"\n") - 1, 0)  # whole rows kept (a torn last one is dropped)
    assert err.count("not importing point") == (rows % (ROWS // POINTS) != 0), err
    assert ("torn write" in err) == (rows > 0 and not kept.endswith(b"\n")), err


def test_a_glued_row_is_dropped_and_its_point_redone(reference, tmp_path, capsys):
    """A row torn by a crash and the next row glued to it (14 fields): dropped, and its point redone."""
    out = tmp_path / "out"
    assert _sweep(out, capsys)[0] == 0
    shutil.rmtree(out / "depth.points")
    lines = reference.split(b"\r\n")
    glued = b"\r\n".join(lines[:5] + [lines[5][:20] + lines[6]] + lines[7:])
    (out / "depth.csv").write_bytes(glued)
    with pytest.raises(ValueError, match="line 6: 14 fields, the header has 9"):
        SweepTable.read_csv(out / "depth.csv")
    status, err = _sweep(out, capsys)
    assert status == 0 and (out / "depth.csv").read_bytes() == reference
    assert "dropped 1 row(s) with another number of fields" in err
    assert err.count("not importing point T=6, gamma=1.0") == 1


DAMAGE = {
    "truncated": lambda b: b[: len(b) // 2],
    "empty": lambda b: b"",
    "a digit changed": lambda b: b.replace(b"0.", b"1.", 1),
    "no checksum": lambda b: b.split(b"\n")[0] + b"\n",
    "not text": lambda b: b"\xff\xfe" + b,
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_point_is_redone_saying_so(damage, reference, tmp_path, capsys):
    out = tmp_path / "out"
    assert _sweep(out, capsys)[0] == 0
    victim = sorted(glob.glob(str(out / "depth.points" / "*.json")))[1]
    Path(victim).write_bytes(DAMAGE[damage](Path(victim).read_bytes()))
    Path(str(victim) + ".tmp-12345").write_bytes(b'{"format"')  # what a killed writer leaves
    status, err = _sweep(out, capsys)
    assert status == 0 and (out / "depth.csv").read_bytes() == reference
    assert err.count("redoing stored point T=") == 1 and "damaged" in err, err
    assert not glob.glob(str(out / "depth.points" / "*.tmp-*"))


def test_a_point_of_other_settings_or_another_point_is_redone(reference, tmp_path, capsys):
    """A point file copied under another point's name, or made with another seed, is not reused."""
    out = tmp_path / "out"
    assert _sweep(out, capsys)[0] == 0
    files = sorted(glob.glob(str(out / "depth.points" / "*.json")))
    shutil.copy(files[0], files[1])
    status, err = _sweep(out, capsys)
    assert status == 0 and (out / "depth.csv").read_bytes() == reference
    assert "stored under another point's name" in err


SETTINGS_DAMAGE = {"truncated": lambda b: b[: len(b) // 2], "empty": lambda b: b"", "a list": lambda b: b"[1, 2]"}


@pytest.mark.parametrize("damage", SETTINGS_DAMAGE)
def test_damaged_settings_are_refused_naming_the_file(damage, reference, tmp_path, capsys):
    out = tmp_path / "out"
    assert _sweep(out, capsys)[0] == 0
    settings = out / "depth.json"
    settings.write_bytes(SETTINGS_DAMAGE[damage](settings.read_bytes()))
    status, err = _sweep(out, capsys)
    assert status == 2 and f"{settings} is damaged" in err and "Delete it" in err and "--force" in err
    assert err.strip().count("\n") == 0
    assert _sweep(out, capsys, "--force")[0] == 0 and (out / "depth.csv").read_bytes() == reference
    settings.unlink()  # the other way on: every stored point is checked against this run's settings
    status, err = _sweep(out, capsys)
    assert status == 0 and (out / "depth.csv").read_bytes() == reference and "redoing" not in err


def test_a_second_sweep_refuses_while_the_first_holds_out(reference, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    with Store(out / "depth.csv", {}):  # another sweep holds the lock
        status, err = _sweep(out, capsys)
    assert status == 2 and f"{out} is in use by pid {os.getpid()}" in err
    assert sorted(p.name for p in out.iterdir()) == ["depth.lock"]  # nothing else written
    assert _sweep(out, capsys)[0] == 0 and (out / "depth.csv").read_bytes() == reference


@pytest.mark.parametrize("fresh", [True, False], ids=["two sweeps into a fresh OUT", "two resumes of one OUT"])
def test_two_sweeps_at_once(fresh, reference, tmp_path, capsys):
    """Two processes on one OUT at the same time: each finishes the table or refuses (exit 2, "in use");
    the table is the uninterrupted one, without a duplicate row."""
    out = tmp_path / "out"
    if not fresh:
        assert _sweep(out, capsys)[0] == 0
        for name in sorted(glob.glob(str(out / "depth.points" / "*.json")))[1:]:
            os.remove(name)
    pids = [_fork(["sweep", str(out), *ARGS], tmp_path / f"err{i}") for i in range(2)]
    codes = [_wait(pid) for pid in pids]
    errors = [(tmp_path / f"err{i}").read_text() for i in range(2)]
    assert 0 in codes and set(codes) <= {0, 2}, (codes, errors)
    for code, err in zip(codes, errors):
        # "by pid N", or "by another process" when the holder has locked but not yet written its pid
        assert code == 0 or "is in use by" in err, err
    assert (out / "depth.csv").read_bytes() == reference


@pytest.mark.parametrize("share", [0.37, 0.81])
def test_a_file_size_limit_stops_cleanly_and_the_rerun_finishes(share, reference, tmp_path, capsys):
    """RLIMIT_FSIZE at 37 % / 81 % of the table: exit 1, "the disk is full" naming the file; with space the
    rerun finishes the table, value for value."""
    out = tmp_path / "out"
    code = _wait(_fork(["sweep", str(out), *ARGS], tmp_path / "err", fsize=int(share * len(reference))))
    err = (tmp_path / "err").read_text()
    assert code == 1 and "the disk is full (or a file-size limit was reached) writing " + str(out) in err, (code, err)
    assert "rerun the same command to finish the table" in err and err.strip().count("\n") == 0
    assert not glob.glob(str(out / "*.tmp-*")) + glob.glob(str(out / "depth.points" / "*.tmp-*"))
    status, err = _sweep(out, capsys)
    assert status == 0 and (out / "depth.csv").read_bytes() == reference and "redoing" not in err


@contextlib.contextmanager
def _tmpfs(folder, options):
    """A tmpfs mounted at ``folder`` with ``options`` (needs root and mount rights; the test is skipped otherwise)."""
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.fixture
def small_filesystem(tmp_path):
    """A 20 KiB tmpfs at tmp_path/disk."""
    with _tmpfs(tmp_path / "disk", "size=20k") as disk:
        yield disk


def test_an_out_that_cannot_hold_the_store_is_refused(tmp_path, capsys):
    """A folder where depth.csv belongs, a file where depth.points/ belongs, a read-only OUT: exit 2 naming it."""
    for name in ("depth.csv", "depth.points"):
        out = tmp_path / name.replace(".", "-")
        out.mkdir()
        (out / name).mkdir() if name.endswith(".csv") else (out / name).write_text("")
        status, err = _sweep(out, capsys)
        assert status == 2 and f"{out / name} is a " in err and "move it away" in err, err
    with _tmpfs(tmp_path / "readonly", "ro,size=16k") as readonly:
        status, err = _sweep(readonly, capsys)
        assert status == 2 and "is not writable" in err, err  # refused while parsing OUT
        with pytest.raises(ValueError, match=f"out: the folder {readonly} is not writable"):
            grid.run_grid(readonly, **SMALL)
        with pytest.raises(ValueError, match=f"cannot write in {readonly}: Read-only file system"):
            sweep(lambda a, seeds, seed: 1.0, {"a": [1]}, path=readonly / "t.csv", progress=False)


def test_a_full_disk_stops_cleanly_and_the_rerun_with_space_finishes(small_filesystem, reference, capsys):
    """ENOSPC on a real filesystem: exit 1 naming the disk; after growing it the rerun finishes the table."""
    out = small_filesystem / "out"
    filler = small_filesystem / "filler"
    filler.write_bytes(b"\0" * 8192)  # leave too little for the whole store
    status, err = _sweep(out, capsys)
    assert status == 1 and "the disk is full" in err and "No space left on device" in err, err
    subprocess.run(["mount", "-o", "remount,size=1m", str(small_filesystem)], check=True)
    status, err = _sweep(out, capsys)
    assert status == 0 and (out / "depth.csv").read_bytes() == reference


def test_a_killed_sweep_resumes_to_the_same_table(tmp_path, capsys):
    """SIGKILL while the points are being written (after the first is stored); the rerun gives the table of
    an uninterrupted run."""
    args = ["--configs", "A,A(X) + LN", "--T", *map(str, range(6, 14)), "--gamma", "1", "--depth", "3", "--quiet"]
    assert main(["sweep", str(tmp_path / "reference"), *args]) == 0
    out = tmp_path / "out"
    pid = _fork(["sweep", str(out), *args], tmp_path / "err", point_s=0.1)
    deadline = time.monotonic() + 60
    while not glob.glob(str(out / "depth.points" / "*.json")) and time.monotonic() < deadline:
        time.sleep(0.002)
    os.kill(pid, signal.SIGKILL)
    assert _wait(pid) == -signal.SIGKILL
    stored = len(glob.glob(str(out / "depth.points" / "*.json")))
    assert 1 <= stored < 8, stored  # killed mid-run
    assert main(["sweep", str(out), *args]) == 0
    assert _csv(out) == _csv(tmp_path / "reference")
    capsys.readouterr()


def test_executor_gives_the_serial_table(tmp_path):
    grid.run_grid(tmp_path / "serial", **SMALL)
    with ThreadPoolExecutor(2) as pool:
        grid.run_grid(tmp_path / "pool", executor=pool, **SMALL)
    assert _csv(tmp_path / "pool") == _csv(tmp_path / "serial")
    with pytest.raises(TypeError, match="executor"):
        grid.run_grid(tmp_path / "bad", executor=object(), **SMALL)
    with pytest.raises(ValueError, match="executor: expected 'local:N' with N >= 1"):
        grid.run_grid(tmp_path / "bad", executor="local:0", **SMALL)
    assert not (tmp_path / "bad").exists()  # refused before anything was written


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
