"""Parameter sweeps: a grid of points, a seed per point, a tidy table; stored, resumed, run on executors.

:func:`sweep` calls ``fn(**point, seeds=n, seed=s)`` at every point of a grid (the Cartesian product
of lists of values, e.g. over T, gamma, s2, depth), where ``fn`` returns one value per seed (a tensor
of shape (n,)) or a dict of such.  The result is a tidy :class:`SweepTable`: one row per (point, seed
index), one column per grid parameter, ``seed`` (the index 0..n-1) and one per measured quantity.
The seed of a point is derived from its parameter values (:func:`point_seed`, not from its position
in the grid), so a resumed or reordered sweep gives the same numbers.

With ``path=`` (a CSV file) the sweep is stored as it runs (:mod:`rcteach.sweep_store`): each
finished point is written whole and atomically, the table ``path`` is exported from the stored
points, a rerun reuses every stored point that passes its checks and redoes the others (saying so on
stderr), a second sweep of the same table refuses while the first runs, and a full disk stops the
run with :class:`rcteach.sweep_store.DiskFull`, the finished points kept.  With ``executor=`` (any
``concurrent.futures.Executor`` or a dask ``Client``, :func:`executor_from`) the points run remotely
while this process, the driver, is the only one that writes: the table is the same, value for value,
as the serial run's.  :func:`rcteach.plotting.plot_sweep` draws a column against a parameter.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import os
import re
import statistics
import time
import zlib
from collections.abc import Callable, Iterable, Mapping

import torch

from . import _validate
from .sweep_store import PointSpec, Store, describe, parse_cell, point_key, say

__all__ = ["SweepTable", "grid_points", "point_seed", "sweep", "check_executor", "dask_spec", "executor_from"]


class SweepTable:
    """A tidy table: a list of rows (dicts with the same keys), no pandas needed.

    ``table.columns`` (names, in order), ``table[name]`` (a column as a list), ``len(table)``,
    iteration over rows, :meth:`where` (filter), :meth:`group` (aggregate over seeds),
    :meth:`to_csv` / :meth:`read_csv`.
    """

    def __init__(self, rows: Iterable[Mapping] = ()):
        self.rows = [dict(r) for r in rows]
        self.columns = list(dict.fromkeys(k for r in self.rows for k in r))

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, name: str) -> list:
        self._need(name)
        return [r.get(name) for r in self.rows]

    def __repr__(self) -> str:
        return f"SweepTable({len(self)} rows, columns={self.columns})"

    def _need(self, *names: str) -> None:
        for k in names:
            if k not in self.columns:
                raise KeyError(f"no column {k!r}; columns are {self.columns}")

    def where(self, **equal) -> "SweepTable":
        """The rows whose columns equal the given values, e.g. ``table.where(gamma=0.5)``."""
        self._need(*equal)
        return SweepTable(r for r in self.rows if all(r.get(k) == v for k, v in equal.items()))

    def group(self, by: list[str], value: str) -> "SweepTable":
        """One row per combination of the ``by`` columns: n, mean and sample sd of ``value``."""
        self._need(*by, value)
        groups: dict[tuple, list[float]] = {}
        for r in self.rows:
            groups.setdefault(tuple(r[k] for k in by), []).append(float(r[value]))
        out = []
        for key, vals in groups.items():
            sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
            out.append({**dict(zip(by, key)), "n": len(vals), "mean": statistics.fmean(vals), "sd": sd})
        return SweepTable(out)

    def to_csv(self, path) -> None:
        """Write every row (header = :attr:`columns`)."""
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns)
            writer.writeheader()
            writer.writerows(self.rows)

    @classmethod
    def read_csv(cls, path) -> "SweepTable":
        """Read a CSV written by :meth:`to_csv` or :func:`sweep`; numbers and booleans are parsed.

        A row with another number of fields than the header is a ValueError naming the file and line."""
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader, [])
            rows = []
            for cells in reader:
                if len(cells) != len(header):
                    raise ValueError(f"{path}, line {reader.line_num}: {len(cells)} fields, the header has "
                                     f"{len(header)}: not a table written whole")
                rows.append({k: parse_cell(v) for k, v in zip(header, cells)})
        return cls(rows)


def grid_points(grid: Mapping[str, list]) -> list[dict]:
    """The Cartesian product of a grid {name: [values]} as a list of dicts, last name fastest."""
    if not isinstance(grid, Mapping) or not grid:
        raise ValueError("grid must be a non-empty dict {parameter name: list of values}")
    for k, vals in grid.items():
        if not isinstance(k, str) or k in ("seed", "seeds"):
            raise ValueError(f"grid parameter names must be strings other than 'seed'/'seeds', got {k!r}")
        if isinstance(vals, (str, bytes)) or not isinstance(vals, Iterable):
            raise TypeError(f"grid[{k!r}] must be a list of values, got {type(vals).__name__}")
        if len(list(vals)) == 0:
            raise ValueError(f"grid[{k!r}] is empty")
        keys = [point_key({k: v}) for v in vals]
        if len(set(keys)) < len(keys):
            raise ValueError(f"grid[{k!r}] has a value twice: {list(vals)}")
    names = list(grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(list(grid[k]) for k in names))]


def point_seed(point: Mapping, base: int = 0) -> int:
    """A seed in [0, 2^31) determined by the point's values and ``base`` (order-independent)."""
    return (zlib.crc32(repr(point_key(point)).encode()) + 1_000_003 * base) % (2 ** 31)


def _as_rows(result, seeds: int) -> list[dict]:
    """fn's result -> rows {("layer",) seed, column: float}, one per (layer,) seed.

    A list of dicts (or a :class:`SweepTable`) is already rows and is kept as it is.  Otherwise a column is
    a scalar, a (seeds,) tensor/list, or a (layers, seeds) tensor (e.g. a :class:`rcteach.Trajectory`
    field): then every row gets a ``layer`` index 0..layers-1 and the 1-D columns repeat across layers.
    """
    if isinstance(result, SweepTable) or (isinstance(result, list) and result
                                          and all(isinstance(r, Mapping) for r in result)):
        return [dict(r) for r in result]
    if not isinstance(result, Mapping):
        result = {"value": result}
    cols, layers = {}, None
    for name, v in result.items():
        if isinstance(v, torch.Tensor):
            v = v.detach().cpu().to(torch.float64)
            if v.dim() == 2:
                if v.shape[1] != seeds or (layers is not None and v.shape[0] != layers):
                    raise ValueError(f"fn returned shape {tuple(v.shape)} for {name!r}, expected (layers, {seeds}) "
                                     "with the same number of layers for every column")
                layers = v.shape[0]
                cols[name] = v.tolist()
                continue
            v = v.reshape(-1).tolist()
        elif isinstance(v, (int, float)):
            v = [float(v)] * seeds
        else:
            v = list(v)
        if len(v) != seeds:
            raise ValueError(f"fn returned {len(v)} values for {name!r}, expected one per seed ({seeds})")
        cols[name] = [float(x) for x in v]
    if layers is None:
        return [{"seed": i, **{k: v[i] for k, v in cols.items()}} for i in range(seeds)]
    return [{"layer": ell, "seed": i, **{k: (v[ell][i] if isinstance(v[0], list) else v[i]) for k, v in cols.items()}}
            for ell in range(layers) for i in range(seeds)]


def _timed(fn, point, seeds, seed):
    """(fn's result at ``point``, its wall time in seconds): the unit of work sent to an executor."""
    start = time.perf_counter()
    result = fn(**point, seeds=seeds, seed=seed)
    return result, time.perf_counter() - start


_ADDRESS = re.compile(r"([a-z][a-z0-9+.-]*://)?[^\s:/]+(:\d+)?")


def dask_spec(spec) -> str:
    """``spec`` if it names a dask cluster: ``"local:N"`` (N >= 1 local worker processes) or a scheduler
    address (``"tcp://host:8786"``, ``"host:8786"``); ValueError saying what was expected otherwise."""
    if not isinstance(spec, str):
        raise TypeError(f"a dask cluster is named by a str ('local:N' or a scheduler address), got "
                        f"{type(spec).__name__}")
    workers = spec.removeprefix("local:")
    if workers != spec:
        if not (workers.isdigit() and int(workers) >= 1):
            raise ValueError(f"expected 'local:N' with N >= 1 local workers, got {spec!r}")
    elif not _ADDRESS.fullmatch(spec) or ("://" not in spec and ":" not in spec):
        raise ValueError(f"expected 'local:N' or a scheduler address such as tcp://host:8786, got {spec!r}")
    return spec


def executor_from(spec):
    """A dask ``Client`` from ``spec`` (:func:`dask_spec`): ``"local:N"`` (its own LocalCluster of N
    single-threaded worker processes, closed with the client) or a scheduler address
    (``"tcp://host:8786"``).  Needs ``pip install rcteach[cluster]``; close it with ``client.close()``."""
    spec = dask_spec(spec)
    try:
        from dask.distributed import Client
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("dask is optional: pip install 'rcteach[cluster]' (or -r requirements-cluster.txt)") from err
    if spec.startswith("local:"):
        return Client(n_workers=int(spec.removeprefix("local:")), threads_per_worker=1, processes=True,
                      dashboard_address=None)
    try:
        return Client(spec)
    except OSError as err:  # nothing listening there, or a timeout
        raise ValueError(f"cannot reach a dask scheduler at {spec!r}: {err}") from None


def check_executor(executor):
    """``executor`` if :func:`sweep` can run points on it: None, anything with a ``submit`` method, or a
    dask cluster's name (:func:`dask_spec`); TypeError or ValueError naming ``executor`` otherwise."""
    if isinstance(executor, str):
        try:
            dask_spec(executor)
        except ValueError as err:
            raise ValueError(f"executor: {err}") from None
    elif executor is not None and not callable(getattr(executor, "submit", None)):
        raise TypeError(f"executor must have a submit method (an Executor or a dask Client) or name a dask "
                        f"cluster ('local:N', 'tcp://host:port'), got {type(executor).__name__}")
    return executor


def _seeds_complete(rows, seeds):
    """Rows with a ``seed`` column hold every seed index 0..seeds-1, each equally often (ValueError if not)."""
    if not rows:
        raise ValueError("no rows")
    if all("seed" in r for r in rows):
        counts = {}
        for r in rows:
            counts[r["seed"]] = counts.get(r["seed"], 0) + 1
        if sorted(counts) != list(range(seeds)) or len(set(counts.values())) != 1:
            raise ValueError(f"its rows do not hold every seed 0..{seeds - 1} equally often")


def _results(fn, todo, seeds, base_seed, executor):
    """(point, (result, seconds)) for each point of ``todo`` in order, run here or on ``executor``."""
    if executor is None:
        for point in todo:
            yield point, _timed(fn, point, seeds, point_seed(point, base_seed))
        return
    futures = [executor.submit(_timed, fn, point, seeds, point_seed(point, base_seed)) for point in todo]
    try:
        for point, future in zip(todo, futures):
            yield point, future.result()
    finally:  # stopped early (an error, a full disk): the points not yet started are not run
        for future in futures:
            future.cancel()


EXPORT_EVERY_S = 5.0
"""Seconds between exports of the table while a stored sweep runs (and once at its end)."""


def sweep(fn: Callable, grid: Mapping[str, list], *, seeds=1, path=None, resume=True, force=False, settings=None,
          check_rows=None, base_seed=0, progress=True, desc=None, executor=None, timing=True) -> SweepTable:
    """Run ``fn`` at every point of ``grid`` and collect a tidy table (module doc).

    Parameters
    ----------
    fn : callable
        ``fn(**point, seeds=seeds, seed=point_seed(point, base_seed))`` -> a tensor/list of shape
        (seeds,), a scalar (repeated for every seed), or a dict {column: such values}; a column of
        shape (layers, seeds), e.g. a :class:`rcteach.Trajectory` field, adds a ``layer`` column
        (one row per point, layer and seed).  A list of row dicts is taken as the point's rows (each
        row keeps its own column order; the point's values are filled in).
    grid : dict {name: list of values}
        The parameters and their values (any names but ``seed``/``seeds``; no value twice).
    seeds : int
        Independent draws per point (passed to ``fn``, which should batch over them).
    path : str or PathLike, optional
        The table's CSV file, in an existing folder; the sweep is stored beside it
        (:mod:`rcteach.sweep_store`: ``<stem>.points/``, ``<stem>.json``, ``<stem>.lock``).  Grid values
        and ``fn``'s values must then be numbers, strings, booleans or None, and a point's rows share
        their columns.
    resume : bool
        With ``path``: reuse the stored points that pass their checks and run the others.  False
        starts a new table.
    force : bool
        With ``path`` and ``resume``: a table made with other ``settings`` is replaced by a new one
        (without ``force`` that is a :class:`rcteach.sweep_store.StoreError`).
    settings : dict, optional
        JSON data saying how the table is made, recorded in ``<stem>.json`` and in every stored point
        (default: the grid's names, ``seeds``, ``base_seed`` and ``timing``).
    check_rows : callable, optional
        ``check_rows(point, rows)`` raises ValueError (the reason) unless ``rows`` (dicts) are the
        complete result at ``point``; run on every point before it is stored or reused, after the
        built-in check that rows with a ``seed`` column hold every seed equally often.
    base_seed : int
        Shifts every point's seed (another independent replicate of the whole sweep).
    progress : bool
        Show a tqdm progress bar over the points.
    executor : optional
        Run the points on any ``concurrent.futures.Executor`` or dask ``Client`` (anything with
        ``submit(fn, *args, **kwargs)`` returning a future with ``result()``; ``fn`` must pickle, e.g. a
        top-level function), or on a dask cluster named by a str (:func:`executor_from`: ``"local:N"``,
        a scheduler address), started after the store's checks and closed at the end.  All points are
        submitted at once; the driver collects them in grid order and stores each as it comes.
    timing : bool
        Add the ``seconds`` column (False: a table that depends only on the seeds).

    Returns
    -------
    SweepTable
        One row per (point, [layer,] seed): the parameters, ``seed`` (index), ``fn``'s columns and
        ``seconds`` (the point's wall time, the same on its seed rows); the grid's points in grid
        order, then any other points stored in ``path`` with the same settings.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    points = grid_points(grid)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    base_seed = _validate.integer("base_seed", base_seed, minimum=0)
    resume, force, progress, timing = (_validate.flag(name, flag) for name, flag in
                                       (("resume", resume), ("force", force), ("progress", progress),
                                        ("timing", timing)))
    if check_rows is not None and not callable(check_rows):
        raise TypeError(f"check_rows must be callable or None, got {type(check_rows).__name__}")
    check_executor(executor)
    if desc is not None and not isinstance(desc, str):
        raise TypeError(f"desc must be a str or None, got {type(desc).__name__}")

    def check(point, rows):
        _seeds_complete(rows, seeds)
        if check_rows is not None:
            check_rows(point, rows)

    def rows_of(point, result, seconds):
        rows = [{**(r if point.keys() <= r.keys() else point), **r, **point, **({"seconds": seconds} if timing else {})}
                for r in _as_rows(result, seeds)]
        try:
            check(point, rows)
        except ValueError as err:
            raise RuntimeError(f"fn's result at {describe(point)} fails its own check: {err}") from None
        return rows

    done: dict[tuple, tuple[dict, list]] = {}
    with contextlib.ExitStack() as stack:
        store = None
        if path is not None:
            store = stack.enter_context(Store(_table_path(path, grid), _settings(settings, grid, seeds, base_seed,
                                                                                  timing)))
            store.open(resume=resume, force=force)
            done, bad = store.load(PointSpec(tuple(grid), seeds, lambda p: point_seed(p, base_seed), check), points)
            wanted = {point_key(p) for p in points}
            for point, reason in bad:
                named = isinstance(point, dict)
                redo = named and point_key(point) in wanted
                say(f"{'redoing' if redo else 'dropped'} stored point {describe(point) if named else point}: {reason}")
        todo = [p for p in points if point_key(p) not in done]
        if isinstance(executor, str) and todo:  # a cluster of our own, after every check, closed at the end
            executor = stack.enter_context(contextlib.closing(executor_from(executor)))
        results = stack.enter_context(contextlib.closing(_results(fn, todo, seeds, base_seed, executor)))
        from tqdm.auto import tqdm

        exported = time.monotonic()
        for point, (result, seconds) in tqdm(results, total=len(todo), desc=desc or getattr(fn, "__name__", "sweep"),
                                             disable=not progress, leave=False):
            rows = rows_of(point, result, seconds)
            if store is not None:
                rows = store.put(point, point_seed(point, base_seed), seeds, rows)
            done[point_key(point)] = (point, rows)
            if store is not None and time.monotonic() - exported > EXPORT_EVERY_S:
                store.export(_in_order(done, points))
                exported = time.monotonic()
        table = _in_order(done, points)
        if store is not None:
            store.export(table)
    return SweepTable(table)


def _in_order(done: dict, points: list) -> list[dict]:
    """The rows of the finished points: the grid's in grid order, then the other stored ones (by their key)."""
    order = [point_key(p) for p in points]
    keys = [k for k in order if k in done] + sorted(k for k in done if k not in set(order))
    return [r for k in keys for r in done[k][1]]


def _table_path(path, grid) -> str:
    """``path`` as a str, checked: a CSV file name in an existing folder, and grid values a store can keep."""
    if not isinstance(path, (str, os.PathLike)) or isinstance(os.fspath(path), bytes):
        raise TypeError(f"path must be a file path (str or os.PathLike), got {type(path).__name__}")
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    if not path or not os.path.isdir(folder):
        raise ValueError(f"path must be a CSV file name in an existing folder, got {path!r}")
    for k, vals in grid.items():
        for v in vals:
            if not isinstance(v, (bool, int, float, str)) or parse_cell(str(v)) != v:
                raise TypeError(f"grid[{k!r}]: a stored sweep needs values that a CSV cell keeps (numbers, strings "
                                f"that are not numbers, booleans), got {v!r}")
    return path


def _settings(settings, grid, seeds, base_seed, timing):
    """The settings recorded with a stored sweep: the caller's, or what the engine itself varies."""
    if settings is None:
        return {"grid": sorted(grid), "seeds": seeds, "base_seed": base_seed, "timing": timing}
    if not isinstance(settings, Mapping):
        raise TypeError(f"settings must be a dict of JSON data, got {type(settings).__name__}")
    return settings
