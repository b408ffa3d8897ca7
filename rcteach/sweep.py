"""Parameter sweeps: a grid runner with a progress bar, a tidy CSV table, resuming, and plots.

:func:`sweep` calls ``fn(**point, seeds=n, seed=s)`` at every point of a grid (the Cartesian
product of lists of values, e.g. over T, gamma, s2, depth), where ``fn`` returns one value per
seed (a tensor of shape (n,)) or a dict of such.  The result is a tidy :class:`Table`: one row
per (point, seed index), one column per grid parameter, ``seed`` (the index 0..n-1) and one per
measured quantity.  With ``path=`` every finished point is appended to a CSV file at once, and a
rerun with ``resume=True`` skips the points already there, so an interrupted sweep picks up where
it stopped.  The seed of a point is derived from its parameter values (not from its position in
the grid), so a resumed or reordered sweep gives the same numbers.

:func:`width_point` and :func:`depth_point` are the two experiments of the book (one attention
layer; a stack of layers); :data:`AUTHORS_GRID` and :func:`authors_grid` reproduce the grid of
the Mind-the-Gap public code.  :func:`plot_sweep` draws a column against a parameter, mean and
spread over seeds, one line per value of another parameter.
"""

from __future__ import annotations

import csv
import itertools
import os
import statistics
import time
import zlib
from collections.abc import Callable, Iterable, Mapping

import torch

from . import _validate
from .depth import propagate
from .device import make_generator, resolve
from .theory import LN2
from .tokens import orthonormal_tokens
from .width import width_dims, width_stable_ranks

__all__ = ["Table", "grid_points", "point_seed", "sweep", "plot_sweep", "width_point", "depth_point",
           "AUTHORS_GRID", "authors_grid"]


def _parse(text: str):
    """A CSV cell back to int, float, bool or str."""
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class Table:
    """A tidy table: a list of rows (dicts with the same keys), no pandas needed.

    ``table.columns`` (names, in order), ``table[name]`` (a column as a list), ``len(table)``,
    iteration over rows, :meth:`where` (filter), :meth:`group` (aggregate over seeds),
    :meth:`to_csv` / :meth:`read_csv`.
    """

    def __init__(self, rows: Iterable[Mapping] = ()):
        self.rows = [dict(r) for r in rows]
        cols: list[str] = []
        for r in self.rows:
            cols += [k for k in r if k not in cols]
        self.columns = cols

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, name: str) -> list:
        if name not in self.columns:
            raise KeyError(f"no column {name!r}; columns are {self.columns}")
        return [r.get(name) for r in self.rows]

    def __repr__(self) -> str:
        return f"Table({len(self)} rows, columns={self.columns})"

    def where(self, **equal) -> "Table":
        """The rows whose columns equal the given values, e.g. ``table.where(gamma=0.5)``."""
        for k in equal:
            if k not in self.columns:
                raise KeyError(f"no column {k!r}; columns are {self.columns}")
        return Table(r for r in self.rows if all(r.get(k) == v for k, v in equal.items()))

    def group(self, by: list[str], value: str) -> "Table":
        """One row per combination of the ``by`` columns: n, mean and sample sd of ``value``."""
        for k in [*by, value]:
            if k not in self.columns:
                raise KeyError(f"no column {k!r}; columns are {self.columns}")
        groups: dict[tuple, list[float]] = {}
        for r in self.rows:
            groups.setdefault(tuple(r[k] for k in by), []).append(float(r[value]))
        out = []
        for key, vals in groups.items():
            sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
            out.append({**dict(zip(by, key)), "n": len(vals), "mean": statistics.fmean(vals), "sd": sd})
        return Table(out)

    def to_csv(self, path) -> None:
        """Write every row (header = :attr:`columns`)."""
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns)
            writer.writeheader()
            writer.writerows(self.rows)

    @classmethod
    def read_csv(cls, path) -> "Table":
        """Read a CSV written by :meth:`to_csv` or :func:`sweep`; numbers and booleans are parsed."""
        with open(path, newline="") as f:
            return cls({k: _parse(v) for k, v in row.items()} for row in csv.DictReader(f))


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
    names = list(grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(list(grid[k]) for k in names))]


def _key(point: Mapping) -> tuple:
    """A point's identity as strings (what a CSV round trip preserves)."""
    return tuple((k, str(_parse(str(v)))) for k, v in sorted(point.items()))


def point_seed(point: Mapping, base: int = 0) -> int:
    """A seed in [0, 2^31) determined by the point's values and ``base`` (order-independent)."""
    return (zlib.crc32(repr(_key(point)).encode()) + 1_000_003 * base) % (2 ** 31)


def _as_rows(result, seeds: int) -> list[dict]:
    """fn's result -> rows {("layer",) seed, column: float}, one per (layer,) seed.

    A column is a scalar, a (seeds,) tensor/list, or a (layers, seeds) tensor (e.g. a
    :class:`rcteach.Trajectory` field): then every row gets a ``layer`` index 0..layers-1 and
    the 1-D columns repeat across layers.
    """
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


def sweep(fn: Callable, grid: Mapping[str, list], *, seeds=1, path=None, resume=True, base_seed=0,
          progress=True, desc=None) -> Table:
    """Run ``fn`` at every point of ``grid`` and collect a tidy table (module doc).

    Parameters
    ----------
    fn : callable
        ``fn(**point, seeds=seeds, seed=point_seed(point, base_seed))`` -> a tensor/list of shape
        (seeds,), a scalar (repeated for every seed), or a dict {column: such values}; a column of
        shape (layers, seeds), e.g. a :class:`rcteach.Trajectory` field, adds a ``layer`` column
        (one row per point, layer and seed).
    grid : dict {name: list of values}
        The parameters and their values (any names but ``seed``/``seeds``).
    seeds : int
        Independent draws per point (passed to ``fn``, which should batch over them).
    path : str or PathLike, optional
        CSV file: each finished point is appended (and flushed) at once.
    resume : bool
        With ``path``: keep the rows already in the file and skip their points.  False starts a
        new file.
    base_seed : int
        Shifts every point's seed (another independent replicate of the whole sweep).
    progress : bool
        Show a tqdm progress bar over the points.

    Returns
    -------
    Table
        One row per (point, [layer,] seed): the parameters, ``seed`` (index), ``fn``'s columns and
        ``seconds`` (the point's wall time, the same on its seed rows).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    points = grid_points(grid)
    seeds = _validate.integer("seeds", seeds, minimum=1)
    base_seed = _validate.integer("base_seed", base_seed, minimum=0)
    for name, flag in (("resume", resume), ("progress", progress)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
    rows: list[dict] = []
    done: set[tuple] = set()
    if path is not None and resume and os.path.exists(path) and os.path.getsize(path) > 0:
        old = Table.read_csv(path)
        missing = [k for k in grid if k not in old.columns]
        if missing:
            raise ValueError(f"{path} has no column(s) {missing}: not a sweep over this grid (pass resume=False)")
        rows = old.rows
        done = {_key({k: r[k] for k in grid}) for r in rows}
    todo = [p for p in points if _key(p) not in done]
    writer = handle = None
    fieldnames = None
    if path is not None and rows:
        fieldnames = list(Table(rows).columns)
    try:
        from tqdm.auto import tqdm

        bar = tqdm(todo, desc=desc or getattr(fn, "__name__", "sweep"), disable=not progress, leave=False)
        for point in bar:
            start = time.perf_counter()
            result = fn(**point, seeds=seeds, seed=point_seed(point, base_seed))
            seconds = time.perf_counter() - start
            new = [{**point, **r, "seconds": seconds} for r in _as_rows(result, seeds)]
            rows += new
            if path is not None:
                if writer is None:
                    fieldnames = fieldnames or list(new[0])
                    extra = [k for k in new[0] if k not in fieldnames]
                    if extra:
                        raise ValueError(f"fn returned columns {extra} that {path} does not have")
                    fresh = not done  # no rows kept from an earlier run: start a new file
                    handle = open(path, "w" if fresh else "a", newline="")
                    writer = csv.DictWriter(handle, fieldnames=fieldnames)
                    if fresh:
                        writer.writeheader()
                writer.writerows(new)
                handle.flush()
    finally:
        if handle is not None:
            handle.close()
    order = {_key(p): i for i, p in enumerate(points)}
    rows.sort(key=lambda r: (order.get(_key({k: r[k] for k in grid}), len(order)), r.get("layer", 0), r.get("seed", 0)))
    return Table(rows)


def plot_sweep(table: Table, x: str, y: str, *, hue=None, ax=None, title=None, ylabel=None, logx=False,
               logy=False, label="{hue}={value}"):
    """Plot the mean of column ``y`` against parameter ``x`` with a +-1 sd band over seeds.

    One line per value of ``hue`` (another column), labelled by ``label`` (a format string with
    ``{hue}`` and ``{value}``).  Say which stable rank in ``ylabel``.  Returns the axes.
    """
    from .plotting import axes

    if not isinstance(table, Table):
        raise TypeError(f"table must be a rcteach.sweep.Table, got {type(table).__name__}")
    _, ax = axes(title or f"{y} against {x}", x, ylabel or y, ax=ax)
    hues = [None] if hue is None else sorted(set(table[hue]), key=lambda v: (str(type(v)), v))
    for h in hues:
        part = table if h is None else table.where(**{hue: h})
        g = part.group([x], y)
        pts = sorted(zip(g[x], g["mean"], g["sd"]))
        xs = [p[0] for p in pts]
        mean = [p[1] for p in pts]
        sd = [p[2] for p in pts]
        lbl = None if h is None else label.format(hue=hue, value=h)
        line, = ax.plot(xs, mean, marker="o", label=lbl)
        ax.fill_between(xs, [m - s for m, s in zip(mean, sd)], [m + s for m, s in zip(mean, sd)],
                        color=line.get_color(), alpha=0.2)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    if hue is not None:
        ax.legend()
    return ax


def width_point(T, gamma, s2=LN2, *, centred=False, seeds=1, seed=None, device=None, dtype=None) -> dict:
    """One attention layer (:func:`rcteach.width_stable_ranks`, i.i.d. logits): both stable ranks.

    Returns {"stable_rank": Frobenius sum s^2/s_1^2, "stable_rank_gram": Gram sum s^4/s_1^4},
    each (seeds,), from the same draws.
    """
    kw = dict(seeds=seeds, centred=centred, seed=seed, device=device, dtype=dtype)
    return {"stable_rank": width_stable_ranks(T, gamma, s2, gram=False, **kw),
            "stable_rank_gram": width_stable_ranks(T, gamma, s2, gram=True, **kw)}


def depth_point(T, gamma, depth, s2=LN2, *, centred=False, seeds=1, seed=None, device=None, dtype=None) -> dict:
    """A stack of ``depth`` i.i.d.-logit layers with Gaussian values on orthonormal tokens (T, d).

    d = round(T / gamma) (gamma <= 1), X0 Haar-orthonormal rows, then :func:`rcteach.propagate`
    (fresh A or A_perp and W_V per layer).  Returns the last layer's Frobenius and Gram stable
    ranks and its relative distance to consensus mu/||X||_F, each (seeds,).
    """
    T, d = width_dims(T, gamma)
    if T > d:
        raise ValueError(f"depth_point needs gamma <= 1 (orthonormal tokens), got T={T} > d={d}")
    device, dtype = resolve(device, dtype)
    gen = make_generator(seed, None, device)
    X0 = orthonormal_tokens(T, d, batch=seeds, generator=gen, device=device, dtype=dtype)
    tr = propagate(X0, depth, s2=s2, centred=centred, generator=gen)
    return {"stable_rank": tr.stable_rank[-1], "stable_rank_gram": tr.stable_rank_gram[-1],
            "relative_mu": tr.relative_mu[-1]}


AUTHORS_GRID = {"T": [20, 40, 60, 80, 100, 150], "gamma": [1.0, 0.5, 0.2]}
"""The grid of the Mind-the-Gap public code: 5 runs, 10 layers, attention A and A_perp."""


def authors_grid(path=None, *, seeds=5, depth=10, progress=True, device=None, dtype=None) -> dict:
    """Run the authors' grid (:data:`AUTHORS_GRID` x centred in {False, True}) through :func:`sweep`.

    Width (one layer, :func:`width_point`) and depth (``depth`` layers, :func:`depth_point`),
    ``seeds`` runs each.  With ``path`` (a folder) the two tables go to ``width.csv`` and
    ``depth.csv`` there (resumable).  Returns {"width": Table, "depth": Table, "seconds": float}.
    """
    grid = {**AUTHORS_GRID, "centred": [False, True]}
    files = {}
    if path is not None:
        os.makedirs(path, exist_ok=True)
        files = {k: os.path.join(path, f"{k}.csv") for k in ("width", "depth")}
    start = time.perf_counter()

    def width(T, gamma, centred, seeds, seed):
        return width_point(T, gamma, centred=centred, seeds=seeds, seed=seed, device=device, dtype=dtype)

    def depth_fn(T, gamma, centred, seeds, seed):
        return depth_point(T, gamma, depth, centred=centred, seeds=seeds, seed=seed, device=device, dtype=dtype)

    out = {"width": sweep(width, grid, seeds=seeds, path=files.get("width"), progress=progress, desc="width"),
           "depth": sweep(depth_fn, grid, seeds=seeds, path=files.get("depth"), progress=progress, desc="depth")}
    out["seconds"] = time.perf_counter() - start
    return out
