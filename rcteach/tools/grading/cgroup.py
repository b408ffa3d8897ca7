"""A cgroup per sandboxed run, where the host lets this process make one: memory and tasks
bounded together, and every process in it killed at the end.

:func:`create` makes ``rcteach-<random>`` with the ``memory`` and ``pids`` controllers:

* **cgroup v2**: in this process's own cgroup if it delegates both controllers to its children
  (``cgroup.subtree_control``).  A writable cgroup that does not yet (the usual delegated cgroup,
  e.g. a systemd unit with ``Delegate=yes``) is prepared once: this process moves itself into a
  leaf ``rcteach-grader-<pid>`` and enables the controllers in the cgroup it left (the kernel
  allows that only once no process is left in it).  Limits: ``memory.max``, ``memory.swap.max``
  = 0, ``pids.max``; ``cgroup.kill`` ends every process in it.
* **cgroup v1** (as root, or where the hierarchies are delegated): one cgroup in the ``memory``
  hierarchy (``memory.limit_in_bytes``, and ``memory.memsw.limit_in_bytes`` where swap is
  accounted) and one in ``pids`` (``pids.max``), under this process's own cgroups.

Memory counts what the processes in the cgroup allocate, file pages they write included (tmpfs,
``/dev/shm``), so nothing they make is outside it; ``pids.max`` counts threads and processes.
Elsewhere :func:`create` returns None and the sandbox relies on its rlimits.  Each run has its own
cgroup (a random name): safe to use from several threads and processes at once.
"""

from __future__ import annotations

import os
import pathlib
import secrets
import signal
import threading
import time

__all__ = ["Cgroup", "create"]

ROOT = pathlib.Path("/sys/fs/cgroup")
_move_lock = threading.Lock()


def _own(controller: str) -> str | None:
    """This process's cgroup path in the hierarchy of ``controller`` ("" for v2), from /proc/self/cgroup."""
    for line in pathlib.Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return None


def _write(path: pathlib.Path, value) -> None:
    with open(path, "w") as f:
        f.write(str(value))


class Cgroup:
    """The cgroup directories of one run (one for v2; the memory and pids ones for v1)."""

    def __init__(self, dirs: list[pathlib.Path], version: int):
        self.dirs, self.version = dirs, version

    def add(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into the cgroup."""
        for d in self.dirs:
            _write(d / "cgroup.procs", pid)

    def pids(self) -> set[int]:
        found = set()
        for d in self.dirs:
            try:
                found |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the cgroup for exceeding its memory limit."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        for d in self.dirs:
            try:
                fields = dict(line.split() for line in (d / name).read_text().splitlines())
            except (OSError, ValueError):
                continue
            if int(fields.get("oom_kill", 0)) > 0:
                return True
        return False

    def kill(self) -> None:
        """SIGKILL every process in the cgroup until none is left (each through a pidfd, checked
        to be in the cgroup after it was opened, so that a reused process id is never signalled)."""
        if self.version == 2 and (self.dirs[0] / "cgroup.kill").exists():
            _write(self.dirs[0] / "cgroup.kill", 1)
        for _ in range(100):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    fd = os.pidfd_open(pid)
                except OSError:
                    continue
                try:
                    if pid in self.pids():
                        signal.pidfd_send_signal(fd, signal.SIGKILL)
                except OSError:
                    pass
                finally:
                    os.close(fd)
            time.sleep(0.01)

    def remove(self) -> None:
        """Kill what is left and remove the cgroup (its processes may take a moment to leave it)."""
        self.kill()
        for d in self.dirs:
            for _ in range(200):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


def _v2_parent(root: pathlib.Path) -> pathlib.Path | None:
    """The v2 cgroup to make run cgroups in: this process's own if it delegates memory and pids,
    else its own after moving this process into a leaf of it (see the module's docstring)."""
    own = _own("")
    if own is None or not (root / "cgroup.controllers").exists():
        return None
    here = root / own.lstrip("/")
    wanted = {"memory", "pids"}
    with _move_lock:
        for candidate in (here, here.parent) if here.name.startswith("rcteach-grader-") else (here,):
            if wanted <= set((candidate / "cgroup.subtree_control").read_text().split()):
                return candidate
        if not wanted <= set((here / "cgroup.controllers").read_text().split()) or not os.access(here, os.W_OK):
            return None
        leaf = here / f"rcteach-grader-{os.getpid()}"
        leaf.mkdir(exist_ok=True)
        _write(leaf / "cgroup.procs", os.getpid())
        _write(here / "cgroup.subtree_control", "+memory +pids")  # EBUSY while other processes stay in `here`
        return here


def create(*, memory: int, tasks: int, root: pathlib.Path = ROOT) -> Cgroup | None:
    """A new cgroup limited to ``memory`` bytes and ``tasks`` threads and processes, or None when
    this host offers none to this process."""
    name = f"rcteach-{secrets.token_hex(8)}"
    made = []
    try:
        parent = _v2_parent(root)
        if parent is not None:
            made.append(parent / name)
            made[0].mkdir()
            for file, value in (("memory.max", memory), ("memory.swap.max", 0), ("pids.max", tasks)):
                if file != "memory.swap.max" or (made[0] / file).exists():
                    _write(made[0] / file, value)
            return Cgroup(made, 2)
        memory_own, pids_own = _own("memory"), _own("pids")
        if memory_own is None or pids_own is None:
            return None
        for hierarchy, own in (("memory", memory_own), ("pids", pids_own)):
            made.append(root / hierarchy / own.lstrip("/") / name)
            made[-1].mkdir()
        _write(made[0] / "memory.limit_in_bytes", memory)
        if (made[0] / "memory.memsw.limit_in_bytes").exists():
            _write(made[0] / "memory.memsw.limit_in_bytes", memory)
        _write(made[1] / "pids.max", tasks)
        return Cgroup(made, 1)
    except OSError:
        Cgroup(made, 0).remove()
        return None
