"""The on-disk store of a sweep: whole points written atomically, checked before reuse, one writer at a time.

A sweep written to ``<stem>.csv`` (:func:`rcteach.sweep.sweep` with ``path=``) keeps next to it:

``<stem>.points/``
    One file per finished point.  It is written to a temporary file in that folder, flushed to the
    disk (``fsync``) and renamed into place (``os.replace``, atomic on POSIX and Windows), so a point is
    stored whole or not at all: a crash, a kill or a full disk leaves at most a temporary file, which
    the next run removes.  A file holds one line of JSON, ``{format, point, seed, seeds, settings,
    columns, rows}`` (every row a list of numbers, strings, booleans or nulls, in the order of
    ``columns``), and a second line, the SHA-256 of the first: a damaged file fails the checksum.
``<stem>.json``
    The sweep's settings, written atomically.  A rerun with other settings is refused
    (:class:`StoreError`) unless ``force``, which starts a new table.  A damaged settings file is
    refused too, naming the file and the two ways on.
``<stem>.lock``
    Locked (``fcntl.flock``, exclusive, non-blocking; ``msvcrt.locking`` on Windows) for as long as a
    sweep uses the store, and holding its pid: a second sweep of the same table refuses at once
    (:class:`StoreBusy`, "in use by pid N") rather than waiting for an unknown time.  The lock goes with its
    process, so a killed run leaves none behind.
``<stem>.csv``
    The table: an export of the store, rewritten atomically (temporary file, ``os.replace``) during
    a run and at its end, the stored points in order.  It is never read back while the store exists.

Reuse.  Every stored point is checked before it is reused: the checksum, the format, the point's
parameters, its seed and number of seeds against this run's, the settings, one value per column in
every row, the types, and the sweep's own check of the rows (:class:`PointSpec`; e.g. every seed and
layer present, finite values).  A point that fails is deleted and redone, with a line on stderr
naming it and why.  A folder written before this store existed (``<stem>.csv`` without
``<stem>.points/``) is imported: its rows are grouped by point and each point is checked the same
way; a row that a crash tore (another number of fields, no line end) is dropped, and its point redone.

A full disk (``ENOSPC``, ``EDQUOT``, or ``EFBIG`` past a file-size limit) raises :class:`DiskFull`, an
``OSError`` that names the file and says that the points finished so far are kept: rerun with space
and the table is finished, value for value what an uninterrupted run writes.
"""

from __future__ import annotations

import csv
import errno
import glob
import hashlib
import io
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["FORMAT", "PointSpec", "Store", "StoreError", "StoreBusy", "DiskFull", "point_key", "describe"]

FORMAT = "rcteach-sweep-point/1"
_FULL = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
_SCALARS = (bool, int, float, str, type(None))


class StoreError(ValueError):
    """The store cannot be used as asked: made with other settings, or its settings file is damaged."""


class StoreBusy(StoreError):
    """Another process holds the store's lock (another sweep is writing the same table)."""


class DiskFull(OSError):
    """No space left on the disk (or past a file-size limit) while writing the store; finished points are kept."""


def point_key(point: Mapping) -> tuple:
    """A point's identity: its (name, value) pairs sorted by name, each value as the text a CSV cell keeps."""
    return tuple((k, str(parse_cell(str(v)))) for k, v in sorted(point.items()))


def parse_cell(text: str):
    """A CSV cell back to int, float, bool or str."""
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def describe(point: Mapping) -> str:
    """``"T=20, gamma=1.0"``: a point for messages."""
    return ", ".join(f"{k}={v}" for k, v in point.items())


def say(message: str) -> None:
    """One line on stderr (what a resume redoes, and why)."""
    print(f"rcteach sweep: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class PointSpec:
    """What a stored point must be to be reused in this run.

    ``names``: the grid's parameter names; ``seeds``: runs per point; ``seed_of(point)``: the seed the
    sweep derives for a point; ``check_rows(point, rows)``: raises ValueError (the reason) unless the
    rows (dicts) are the complete result at ``point``.
    """

    names: tuple[str, ...]
    seeds: int
    seed_of: Callable[[Mapping], int]
    check_rows: Callable[[Mapping, list], None]


def _columns(rows: Sequence[Mapping]) -> list[str]:
    """Every key of ``rows`` in order of first appearance."""
    return list(dict.fromkeys(k for r in rows for k in r))


class Store:
    """The store of the sweep whose table is ``path`` (module doc); a context manager holding its lock.

    ``settings``: JSON data describing how the table is made (recorded in ``<stem>.json`` and in every
    point).  Use: ``with Store(path, settings) as store: store.open(...); store.load(spec); store.put(...)``.
    """

    def __init__(self, path, settings: Mapping):
        path = os.fspath(path)
        stem = path[:-4] if path.endswith(".csv") else path
        self.csv, self.points = path, stem + ".points"
        self.settings_file, self.lock_file = stem + ".json", stem + ".lock"
        try:
            self.settings = json.loads(json.dumps(settings, allow_nan=False))
        except (TypeError, ValueError) as err:
            message = f"settings must be JSON data (a dict of numbers, strings, lists), got {settings!r}"
            raise TypeError(message) from err
        self._lock = None

    # -- the lock ---------------------------------------------------------------------------------------

    def __enter__(self) -> "Store":
        for path, folder in ((self.csv, False), (self.settings_file, False), (self.lock_file, False),
                             (self.points, True)):
            if os.path.exists(path) and os.path.isdir(path) != folder:
                raise StoreError(f"{path} is a {'file' if folder else 'folder'}, where the sweep keeps its "
                                 f"{'points (a folder)' if folder else 'files'}: move it away")
        try:
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            if err.errno in _FULL:
                raise self._full(self.lock_file, err) from None
            folder = os.path.dirname(self.lock_file) or "."
            raise StoreError(f"cannot write in {folder}: {err.strerror or err}") from None
        try:
            if not _try_lock(fd):
                holder = os.read(fd, 32).decode(errors="replace").strip()
                raise StoreBusy(f"{os.path.dirname(self.csv) or '.'} is in use by "
                                f"{'pid ' + holder if holder.isdigit() else 'another process'} (a sweep writing "
                                f"{os.path.basename(self.csv)}): wait until it has finished, or write to another "
                                f"folder")
            os.ftruncate(fd, 0)
            self._os(os.write, fd, f"{os.getpid()}\n".encode())
        except BaseException:
            os.close(fd)
            raise
        self._lock = fd
        return self

    def __exit__(self, *exc) -> None:
        os.close(self._lock)  # closing the file releases the lock
        self._lock = None

    # -- settings -------------------------------------------------------------------------------------------

    def open(self, *, resume: bool = True, force: bool = False) -> None:
        """Get the store ready: a new table if not ``resume``, or if the table was made with other settings
        and ``force``; other settings without ``force``, or a damaged settings file, raise :class:`StoreError`."""
        leftovers = _matching(self.points, "/*.tmp-*") + _matching(self.csv, ".tmp-*")
        for tmp in leftovers + _matching(self.settings_file, ".tmp-*"):
            os.remove(tmp)  # what a killed writer left behind (there is no other writer: we hold the lock)
        if resume and (self._stored() or os.path.isfile(self.csv)):
            try:
                recorded = self._recorded_settings()
            except StoreError:
                if not force:
                    raise
                recorded, resume = None, False
            if recorded is not None and recorded != self.settings:
                if not force:
                    raise StoreError(f"{self.csv} was made with other settings ({recorded}, now {self.settings}); "
                                     "pass force=True (--force) to start a new table")
                resume = False
        if not resume:  # a new table: no stored point, no old table to import
            for name in self._stored() + _matching(self.csv, ""):
                os.remove(name)
            self._os(os.makedirs, self.points, exist_ok=True)

    def _recorded_settings(self):
        """The settings in ``<stem>.json`` (None if there is no such file); StoreError if it is damaged."""
        if not os.path.exists(self.settings_file):
            return None
        try:
            with open(self.settings_file, "rb") as f:
                recorded = json.loads(f.read().decode())
            if not isinstance(recorded, dict):
                raise ValueError(f"JSON {type(recorded).__name__}, not an object")
        except (ValueError, UnicodeDecodeError) as err:
            raise StoreError(f"{self.settings_file} is damaged ({err}); it records how the table next to it was made. "
                             f"Delete it to check every stored point against this run's settings (points made with "
                             f"others are redone), or pass force=True (--force) to start a new table") from None
        return recorded

    # -- points -----------------------------------------------------------------------------------------

    def _file(self, point: Mapping) -> str:
        return os.path.join(self.points, hashlib.sha256(repr(point_key(point)).encode()).hexdigest()[:24] + ".json")

    def put(self, point: Mapping, seed: int, seeds: int, rows: Sequence[Mapping]) -> list[dict]:
        """Store a finished point (atomically) and return its rows as stored (NumPy and 0-d torch scalars
        unwrapped); the rows must all have the same columns and hold only scalars."""
        columns = list(rows[0]) if rows else []
        body = []
        for r in rows:
            if list(r) != columns:
                raise ValueError(f"the rows at {describe(point)} have different columns ({list(r)} and {columns}): "
                                 "a stored point needs one set of columns")
            body.append([_scalar(r[c], c, point) for c in columns])
        record = json.dumps({"format": FORMAT, "point": dict(point), "seed": seed, "seeds": seeds,
                             "settings": self.settings, "columns": columns, "rows": body}, separators=(",", ":"))
        self._write(self._file(point), f"{record}\n{hashlib.sha256(record.encode()).hexdigest()}\n".encode())
        return [dict(zip(columns, r)) for r in body]

    def load(self, spec: PointSpec, points: Sequence[Mapping] = ()) -> tuple[dict, list]:
        """The stored points that pass every check, {point key: (point, rows)}, and those that do not,
        [(point, or file name if it is none of ``points``, reason)] (their files deleted); then records this
        run's settings.  Imports a table written without a store first."""
        if not os.path.isdir(self.points):  # a new store, or a table written before the store existed
            old = self._old_points(spec) if os.path.isfile(self.csv) else []
            self._os(os.makedirs, self.points)
            for point, rows in old:
                self.put(point, spec.seed_of(point), spec.seeds, rows)
            if os.path.isfile(self.csv):
                say(f"imported {len(old)} complete point(s) of {self.csv} (a table without a store) into {self.points}")
        named = {self._file(p): p for p in points}
        good, bad = {}, []
        for name in sorted(self._stored()):
            try:
                point, rows = self._read(name, spec)
            except ValueError as err:
                bad.append((getattr(err, "point", None) or named.get(name, os.path.basename(name)), str(err)))
                os.remove(name)
                continue
            good[point_key(point)] = (point, rows)
        self._write(self.settings_file, (json.dumps(self.settings, indent=1) + "\n").encode())
        return good, bad

    def _stored(self) -> list[str]:
        """The point files."""
        return _matching(self.points, "/*.json")

    def _read(self, name: str, spec: PointSpec):
        """(point, rows) of the point file ``name``, or ValueError saying why it cannot be reused."""
        try:
            with open(name, "rb") as f:
                text = f.read().decode()
        except UnicodeDecodeError:
            raise ValueError("not text (a damaged file)") from None
        record, _, digest = text.rstrip("\n").rpartition("\n")
        if not record or hashlib.sha256(record.encode()).hexdigest() != digest:
            raise ValueError("its checksum does not match (a damaged or truncated file)")
        try:
            rec = json.loads(record)
        except ValueError:
            raise ValueError("not valid JSON (a damaged file)") from None
        if not isinstance(rec, dict) or rec.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file")
        point = rec.get("point")
        if not isinstance(point, dict) or sorted(point) != sorted(spec.names):
            raise ValueError(f"its parameters {sorted(point) if isinstance(point, dict) else point} are not "
                             f"this grid's {sorted(spec.names)}")
        if name != self._file(point):
            raise _Invalid(point, "it is stored under another point's name")
        if rec.get("settings") != self.settings:
            raise _Invalid(point, f"it was made with other settings ({rec.get('settings')})")
        if rec.get("seeds") != spec.seeds or rec.get("seed") != spec.seed_of(point):
            raise _Invalid(point, f"it was made with seed {rec.get('seed')} and {rec.get('seeds')} seeds, this run "
                                  f"uses seed {spec.seed_of(point)} and {spec.seeds} seeds")
        columns, body = rec.get("columns"), rec.get("rows")
        if not isinstance(columns, list) or not isinstance(body, list) \
                or not all(isinstance(r, list) and len(r) == len(columns) for r in body):
            raise _Invalid(point, "a row has another number of fields than the columns")
        if not all(isinstance(v, _SCALARS) for r in body for v in r):
            raise _Invalid(point, "a value is not a number, string, boolean or null")
        rows = [dict(zip(columns, r)) for r in body]
        _check(spec, point, rows)
        return point, rows

    def _old_points(self, spec: PointSpec) -> list[tuple[dict, list]]:
        """The complete, valid points of ``<stem>.csv`` written before the store existed: (point, rows) each.

        Rows that a crash tore (no line end, another number of fields) are dropped and a point that is not
        complete is left out, each said on stderr; a table of other columns is a :class:`StoreError`."""
        with open(self.csv, newline="") as f:
            text = f.read()
        lines = list(csv.reader(io.StringIO(text)))
        header, records = (lines[0], lines[1:]) if lines else ([], [])
        if records and not text.endswith(("\n", "\r")):
            records = records[:-1]
            say(f"{self.csv}: dropped its last row (no line end: a torn write)")
        whole = [r for r in records if len(r) == len(header)]
        if len(whole) < len(records):
            say(f"{self.csv}: dropped {len(records) - len(whole)} row(s) with another number of fields than its "
                f"{len(header)} columns (a torn write)")
        if whole and not set(spec.names) <= set(header):
            raise StoreError(f"{self.csv} has no column(s) {sorted(set(spec.names) - set(header))}: not a sweep over "
                             "this grid; pass force=True (--force, or resume=False) to start a new table")
        groups: dict[tuple, tuple[dict, list]] = {}
        for r in whole:
            row = {k: parse_cell(v) for k, v in zip(header, r)}
            point = {k: row[k] for k in spec.names}
            groups.setdefault(point_key(point), (point, []))[1].append(row)
        complete = []
        for point, rows in groups.values():
            try:
                _check(spec, point, rows)
            except ValueError as err:
                say(f"{self.csv}: not importing point {describe(point)}: {err}")
                continue
            complete.append((point, rows))
        return complete

    # -- the table ------------------------------------------------------------------------------------

    def export(self, rows: Sequence[Mapping]) -> None:
        """Write the table ``rows`` to ``<stem>.csv`` atomically (header: every column, in order of appearance)."""
        buffer = io.StringIO(newline="")
        writer = csv.DictWriter(buffer, fieldnames=_columns(rows))
        writer.writeheader()
        writer.writerows(rows)
        self._write(self.csv, buffer.getvalue().encode())

    # -- files ----------------------------------------------------------------------------------------

    def _write(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` atomically: a temporary file beside it, fsync, os.replace, fsync of the folder."""
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException as err:
            if os.path.exists(tmp):
                os.remove(tmp)
            if isinstance(err, OSError) and err.errno in _FULL:
                raise self._full(path, err) from None
            raise
        _fsync_folder(os.path.dirname(path) or ".")

    def _os(self, call, path, *args, **kwargs):
        """``call(path, ...)``, a full disk reported as :class:`DiskFull`."""
        try:
            return call(path, *args, **kwargs)
        except OSError as err:
            if err.errno in _FULL:
                raise self._full(path if isinstance(path, str) else self.lock_file, err) from None
            raise

    def _full(self, path: str, err: OSError) -> DiskFull:
        kept = len(self._stored())
        return DiskFull(err.errno, f"the disk is full (or a file-size limit was reached) writing {path}: "
                                   f"{os.strerror(err.errno)}.  The {kept} point(s) finished so far are stored in "
                                   f"{self.points}; free some space and rerun the same command to finish the table")


class _Invalid(ValueError):
    """A stored point that cannot be reused, with the point it claims to be."""

    def __init__(self, point, reason):
        super().__init__(reason)
        self.point = point


def _check(spec: PointSpec, point: Mapping, rows: list) -> None:
    """``spec.check_rows``, its ValueError carrying the point."""
    try:
        spec.check_rows(point, rows)
    except _Invalid:
        raise
    except ValueError as err:
        raise _Invalid(point, str(err)) from None


def _scalar(value, column, point):
    """``value`` as a JSON scalar (a NumPy or 0-d torch scalar is unwrapped); TypeError for anything else."""
    if type(value) not in _SCALARS and callable(getattr(value, "item", None)):  # numpy.float64 too
        try:
            value = value.item()
        except (ValueError, RuntimeError):
            pass
    if not isinstance(value, _SCALARS):
        raise TypeError(f"fn returned a {type(value).__name__} in column {column!r} at {describe(point)}: a stored "
                        "sweep keeps numbers, strings, booleans and None")
    return value


def _matching(literal: str, wildcard: str) -> list[str]:
    """The files named ``literal`` (taken as it is) followed by anything matching ``wildcard``."""
    return glob.glob(glob.escape(literal) + wildcard)


def _try_lock(fd: int) -> bool:
    """Lock ``fd`` exclusively without waiting; False if another process holds it."""
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _fsync_folder(folder: str) -> None:
    """Make a rename in ``folder`` durable (POSIX; Windows cannot open a folder and needs nothing)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
