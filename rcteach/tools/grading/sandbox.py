"""Run an untrusted Python command confined, with limits set from outside it.

Two backends (``backend=``; ``"auto"`` takes the first that works here):

* ``"bwrap"``: a fresh bubblewrap (``bwrap``) sandbox in new user, PID, mount, network, IPC, UTS
  and cgroup namespaces.  It sees a read-only view of ``/usr`` (and the ``/lib``, ``/bin`` links), a
  few files of ``/etc``, this interpreter's installation and virtual environment, and the folders
  passed as ``read_only`` (for grading: the rcteach package and a folder holding the submission
  and the grader's questions).  ``/`` and ``/dev`` are read-only; it writes only to a private
  ``/tmp`` (a tmpfs of ``Limits.scratch`` bytes, or an on-disk folder where ``bwrap`` cannot size
  one) and to the pipes it was given.  The command is the PID namespace's first process
  (``--as-pid-1``): when it is killed, everything in the namespace dies with it, and nothing can
  leave a PID namespace.  No capabilities, no further user namespaces (``--disable-userns``).
* ``"container"``: for a root process in a fresh container per submission (Gradescope's
  autograder), where user namespaces are unavailable: the command runs as an unprivileged user
  (``nobody``) with no groups, in a private scratch folder, under the same filter and limits; what it
  leaves in the world-writable folders (``/tmp``, ``/var/tmp``, ``/dev/shm``) is removed afterwards.
  With one such user, runs of this backend take turns (a lock on this machine).
  Files are protected by their modes only: the grader keeps what the user must not read in
  folders of mode 0700 (see :func:`.grading.grade`).

Both: a clean environment; the seccomp filter of :mod:`.seccomp` (no new processes, no ptrace, no
namespaces, no io_uring, no memory outside the limits, no network sockets); ``no_new_privs``;
rlimits (:class:`Limits`) set by this process on the sandbox's first process before it runs anything
(``prlimit``): CPU seconds, address space, bytes per file, open files, tasks, no core files and no
message queues; an OOM score of 1000 (the kernel's first choice under memory pressure); and, where
the host lets this process make one, a cgroup (:mod:`.cgroup`) bounding memory (files it writes to
memory-backed folders included) and tasks.  The sandbox's first process is held (bwrap
``--block-fd``, or :mod:`.walls`) until all of this is in place.  Every run starts under
:mod:`.walls`, a supervisor outside the sandbox (a child subreaper) that ends everything below it
when the command ends or when the grader dies.  At the end the sandbox's first process is killed
through a pidfd (never a reused process id), then the cgroup's processes, then what is left below
the supervisor.

Which limit stopped a run is read from outside: the wall clock here, the CPU time from the
``wait4`` resource usage, the memory limit from the cgroup's OOM count, never from the exit status
alone (a submission can exit with any status).
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import json
import os
import pathlib
import pwd
import select
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import BACKENDS
from . import cgroup as _cgroup
from . import seccomp
from .answers import printable

__all__ = ["BACKENDS", "Limits", "Outcome", "SandboxUnavailable", "available", "resolve", "run"]

WALLS = pathlib.Path(__file__).resolve().with_name("walls.py")
#: World-writable folders where the container backend's user may leave files, swept after each run.
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


class SandboxUnavailable(RuntimeError):
    """No working sandbox of the requested backend on this machine (the message says why)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """Limits of one sandboxed run: ``wall`` and ``cpu`` seconds, ``memory`` bytes of address space,
    ``file_size`` bytes per file written, ``scratch`` bytes of ``/tmp``, ``output`` bytes of stdout
    and stderr kept (the rest is read and dropped), ``answers`` bytes accepted on the answer pipe,
    ``tasks`` threads (and processes) at once, ``files`` open file descriptors."""

    wall: float = 600.0
    cpu: int = 600
    memory: int = 6 << 30
    file_size: int = 64 << 20
    scratch: int = 256 << 20
    output: int = 64 << 10
    answers: int = 64 << 20
    tasks: int = 256
    files: int = 256

    def __post_init__(self):
        for field in dataclasses.fields(self):
            if not getattr(self, field.name) > 0:
                raise ValueError(f"Limits.{field.name} must be > 0, got {getattr(self, field.name)!r}")


@dataclasses.dataclass
class Outcome:
    """What came out of one run: ``answers`` (bytes written to the answer pipe, at most
    ``Limits.answers``), ``output`` (stdout and stderr, cut at ``Limits.output``, control characters
    escaped), ``returncode``, ``limits_hit`` (plain-words names of the limits the run reached, as
    seen from outside), wall ``seconds``, ``cpu_seconds`` and the ``backend`` it ran in."""

    answers: bytes
    output: str
    returncode: int | None
    limits_hit: list[str]
    seconds: float
    cpu_seconds: float = 0.0
    backend: str = "bwrap"


_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group", "nsswitch.conf", "alternatives",
        "fonts", "matplotlibrc")
#: bwrap options the sandbox cannot do without (bubblewrap 0.6 and later).  Used where present:
#: --size (0.7; else /tmp is an on-disk folder) and --disable-userns (0.8; else only the seccomp
#: filter keeps the sandbox from making user namespaces).
_NEEDED = ("--as-pid-1", "--block-fd", "--info-fd", "--add-seccomp-fd")


@functools.lru_cache(maxsize=None)
def _bwrap_options(bwrap: str) -> frozenset:
    """The options this ``bwrap`` knows (from its ``--help``)."""
    text = subprocess.run([bwrap, "--help"], capture_output=True, text=True).stdout
    return frozenset(word for word in text.split() if word.startswith("--"))


def _bwrap() -> str:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (`bwrap`) is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
    missing = [opt for opt in _NEEDED if opt not in _bwrap_options(bwrap)]
    if missing:
        raise SandboxUnavailable(f"{bwrap} is too old: it lacks {', '.join(missing)} (bubblewrap 0.6 or later needed)")
    return bwrap


def _environment(home: str, packages) -> dict:
    return {"HOME": home, "TMPDIR": home, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": _pythonpath(packages)}


def _bwrap_argv(read_only, packages, limits: Limits, scratch, fds: dict) -> list[str]:
    bwrap = _bwrap()
    options = _bwrap_options(bwrap)
    tmp = ["--size", str(limits.scratch), "--tmpfs", "/tmp"] if "--size" in options else ["--bind", scratch, "/tmp"]
    argv = [bwrap, "--unshare-all", "--unshare-user", *(["--disable-userns"] if "--disable-userns" in options else []),
            "--die-with-parent", "--new-session", "--as-pid-1", "--clearenv", "--cap-drop", "ALL", "--ro-bind", "/usr",
            "/usr", "--proc", "/proc", "--dev", "/dev",
            # bwrap covers these itself where it can; make sure (as root, kernel knobs are root-owned)
            *[a for p in ("sys", "sysrq-trigger", "irq", "bus", "fs")
              for a in ("--ro-bind-try", f"/proc/{p}", f"/proc/{p}")],
            *tmp, "--chdir", "/tmp"]
    for link in ("bin", "sbin", "lib", "lib32", "lib64"):
        target = pathlib.Path("/", link)
        if target.is_symlink():
            argv += ["--symlink", os.readlink(target), str(target)]
        elif target.is_dir():
            argv += ["--ro-bind", str(target), str(target)]
    argv += [arg for name in _ETC for arg in ("--ro-bind-try", f"/etc/{name}", f"/etc/{name}")]
    for path in sorted(_visible(read_only, packages)):
        if path != "/usr" and not path.startswith("/usr/"):
            argv += ["--ro-bind", path, path]
    if sys.prefix != os.path.realpath(sys.prefix):
        argv += ["--symlink", os.path.realpath(sys.prefix), sys.prefix]
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
    for key, value in _environment("/tmp", packages).items():
        argv += ["--setenv", key, value]
    return argv + ["--add-seccomp-fd", str(fds["seccomp"]), "--block-fd", str(fds["release"]),
                   "--info-fd", str(fds["info"]), "--"]


def _visible(read_only, packages) -> set[str]:
    return {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, *read_only, *packages)}


def _pythonpath(packages) -> str:
    """The folders holding ``packages`` (only the package folders themselves are visible inside)."""
    return os.pathsep.join(os.path.dirname(os.path.realpath(p)) for p in packages)


def _sandbox_user() -> tuple[int, int]:
    """The unprivileged user of the container backend: ``nobody`` (65534 where it has no entry)."""
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


def resolve(backend: str = "auto") -> str:
    """The backend ``backend`` names (``"auto"``: ``"bwrap"`` if its probe works here, else
    ``"container"`` as root); raises :class:`SandboxUnavailable` saying why none works."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend != "auto":
        if (reason := available(backend)) is not None:
            raise SandboxUnavailable(reason)
        return backend
    reasons = {}
    for candidate in BACKENDS[1:]:
        reasons[candidate] = available(candidate)
        if reasons[candidate] is None:
            return candidate
    raise SandboxUnavailable("; ".join(f"{name}: {why}" for name, why in reasons.items()))


_RLIMITS = {"cpu": "RLIMIT_CPU", "memory": "RLIMIT_AS", "file_size": "RLIMIT_FSIZE", "tasks": "RLIMIT_NPROC",
            "files": "RLIMIT_NOFILE"}


def _confine(pid: int, limits: Limits, group):
    """Set the rlimits of the held process ``pid`` and move it into ``group``; returns the group,
    or None if the process could not join it (then the rlimits alone hold)."""
    import resource

    values = {getattr(resource, name): getattr(limits, field) for field, name in _RLIMITS.items()}
    values |= {resource.RLIMIT_CORE: 0, resource.RLIMIT_MSGQUEUE: 0}
    for which, value in values.items():
        hard = resource.prlimit(pid, which)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.prlimit(pid, which, (value, value))
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    if group is not None:
        try:
            group.add(pid)
        except OSError:
            group.remove()
            return None
    return group


def _read_info(fd: int, deadline: float) -> int | None:
    """The sandbox's first process id from bwrap's ``--info-fd`` (None if bwrap stopped before)."""
    data = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline and sel.select(timeout=max(deadline - time.monotonic(), 0)):
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def _pidfd(pid: int | None, ancestor: int) -> int | None:
    """A pidfd of ``pid``, checked (after opening it, so that it is that process) to descend from
    ``ancestor`` within two generations (walls.py, then bwrap's outer process)."""
    if pid is None:
        return None
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    up = pid
    for _ in range(2):
        try:
            up = int(pathlib.Path(f"/proc/{up}/status").read_text().split("\nPPid:\t", 1)[1].split("\n", 1)[0])
        except (OSError, IndexError, ValueError):
            break
        if up == ancestor:
            return fd
    os.close(fd)
    return None


def run(argv, *, read_only=(), packages=(), limits: Limits = Limits(), backend: str = "auto",
        unsafe_no_sandbox=False) -> Outcome:
    """Run ``argv`` (``{answers_fd}`` in it is replaced by the answer pipe's descriptor) confined.

    ``read_only``: folders visible (read-only) at their own paths; ``packages``: package folders
    visible the same way and importable (their parent folders are on ``PYTHONPATH``, but nothing
    else of those parents is visible).  ``backend``: ``"auto"``, ``"bwrap"`` or ``"container"``
    (raises :class:`SandboxUnavailable` if it does not work here).

    ``unsafe_no_sandbox=True`` runs it with the same limits and a clean environment but with no
    walls: nothing stops it from reading or writing the grader's files.
    """
    return _run(argv, read_only, packages, limits, "unsafe" if unsafe_no_sandbox else resolve(backend))


def _run(argv, read_only, packages, limits: Limits, kind: str) -> Outcome:
    if kind != "container":
        return _confined_run(argv, read_only, packages, limits, kind)
    with open(WALLS, "rb") as lock:  # one sandbox user: one run at a time on this machine (its sweep is then safe)
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _confined_run(argv, read_only, packages, limits, kind)


def _confined_run(argv, read_only, packages, limits: Limits, kind: str) -> Outcome:
    start = time.monotonic()
    pipes = {name: os.pipe() for name in ("answers", "release", "info")}
    if kind != "unsafe":
        pipes["seccomp"] = os.pipe()
        os.write(pipes["seccomp"][1], seccomp.program(network=kind == "bwrap"))
        os.close(pipes["seccomp"][1])
    mine = {name: r for name, (r, w) in pipes.items() if name in ("answers", "info")}
    theirs = {name: (w if name in ("answers", "info") else r) for name, (r, w) in pipes.items()}
    release = pipes["release"][1]
    uid, gid = _sandbox_user() if kind == "container" else (-1, -1)
    scratch = tempfile.mkdtemp(prefix="rcteach-scratch-")
    group = _cgroup.create(memory=limits.memory + limits.scratch, tasks=limits.tasks) if kind != "unsafe" else None
    proc = pidfd = None
    answers, output, hit = b"", "", []
    try:
        argv = [a.replace("{answers_fd}", str(theirs["answers"])) for a in argv]
        if kind == "bwrap":  # bwrap holds, filters and reports the sandbox itself
            walls, env, cwd = ["-1"] * 5, {}, None
            argv = _bwrap_argv(read_only, packages, limits, scratch, theirs) + argv
        else:
            if uid >= 0:
                os.chown(scratch, uid, gid)
            walls = [str(theirs["info"]), str(theirs["release"]), str(theirs.get("seccomp", -1)), str(uid), str(gid)]
            env, cwd = _environment(scratch, packages), scratch
        try:
            proc = subprocess.Popen([sys.executable, "-I", "-S", str(WALLS), *walls, "--", *argv],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    pass_fds=tuple(theirs.values()), env=env, cwd=cwd, start_new_session=True)
        finally:
            for fd in theirs.values():
                os.close(fd)
        pid = _read_info(mine["info"], start + min(limits.wall, 60))
        pidfd = _pidfd(pid, ancestor=proc.pid)
        if pidfd is None:  # it stopped before it could be confined (the reason is in its output): never release it
            os.kill(proc.pid, signal.SIGTERM)  # walls.py ends what it started
        else:
            group = _confine(pid, limits, group)
            try:
                os.write(release, b"x")
            except BrokenPipeError:  # it died while held (killed from outside): nothing ran
                pass
        answers, output, hit = _collect(proc, mine["answers"], limits, start)
    finally:
        code, cpu, running = _end(proc, pidfd, group, grace=0.0 if hit else 1.0)
        for fd in (release, *mine.values()):
            os.close(fd)
        oom = group is not None and group.oom_killed()
        if group is not None:
            group.remove()
        if uid >= 0:
            _sweep(uid)
        shutil.rmtree(scratch, ignore_errors=True)
    if running and not hit:
        hit.append("killed at the end: still running after it closed its output")
    if code == 128 + signal.SIGKILL:
        if cpu >= limits.cpu - 0.05:
            hit.append(f"CPU time limit ({limits.cpu} s)")
        elif oom:
            hit.append(f"memory limit ({(limits.memory + limits.scratch) >> 20} MiB)")
    return Outcome(answers, printable(output), code, hit, time.monotonic() - start, cpu, kind)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _end(proc, pidfd, group, grace: float) -> tuple[int | None, float, bool]:
    """Kill the sandbox: its first process through ``pidfd``, then what is left in ``group``, then
    ask walls.py to end what is left below it (SIGTERM; SIGKILL if it does not within 2 s), giving
    it a moment to reap, so that the CPU time is counted.  Returns the exit status (walls.py's:
    the command's, ``128 + signal`` if a signal ended it), the CPU seconds of the whole run and
    whether the first process was still running ``grace`` seconds after its output closed."""
    running = False
    if pidfd is not None:
        poll = select.poll()
        poll.register(pidfd, select.POLLIN)  # readable once the process has exited
        running = not poll.poll(int(grace * 1000))
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(pidfd)
    if group is not None:
        group.kill()
    if proc is None:
        return None, 0.0, running
    for attempt in range(400):
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if attempt == 200:
            os.kill(proc.pid, signal.SIGTERM)
        time.sleep(0.01)
    else:
        _kill_group(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()
    return proc.returncode, usage.ru_utime + usage.ru_stime, running


def _sweep(uid: int) -> None:
    """Remove what user ``uid`` left in the world-writable folders (container backend)."""
    for folder in SHARED_WRITABLE:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def _collect(proc, ans_r, limits, start):
    """Read the answer pipe and the output until both close or the wall-clock limit."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "output")
    sel.register(ans_r, selectors.EVENT_READ, "answers")
    kept = {"output": bytearray(), "answers": bytearray()}
    caps = {"output": limits.output, "answers": limits.answers}
    hit = []
    while sel.get_map():
        left = limits.wall - (time.monotonic() - start)
        if left <= 0:
            hit.append(f"wall-clock limit ({limits.wall:g} s)")
            break
        for key, _ in sel.select(timeout=min(left, 1.0)):
            chunk = os.read(key.fd, 1 << 16)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            name = key.data
            room = caps[name] - len(kept[name])
            kept[name] += chunk[:max(room, 0)]
            if room < len(chunk) and f"{name} limit" not in " ".join(hit):
                hit.append(f"{name} limit ({caps[name] >> 10} KiB; the rest was dropped)")
    sel.close()
    return bytes(kept["answers"]), kept["output"].decode(errors="replace"), hit


@functools.lru_cache(maxsize=None)
def available(backend: str = "bwrap") -> str | None:
    """None if ``backend`` (``"bwrap"`` or ``"container"``) works here, else why not (``bwrap``
    missing or too old, not root, or a probe run failed)."""
    if backend not in BACKENDS[1:]:
        raise ValueError(f"backend must be 'bwrap' or 'container', got {backend!r}")
    if not seccomp.supported():
        return f"no seccomp filter for this architecture ({os.uname().machine})"
    if backend == "container" and os.geteuid() != 0:
        return "the container backend runs as root (it drops to an unprivileged user for the submission)"
    try:
        out = _run([sys.executable, "-c", "import os; os.write({answers_fd}, b'ok')"], (), (),
                   Limits(wall=60, cpu=30), backend)
    except (SandboxUnavailable, OSError) as e:
        return str(e)
    if out.answers != b"ok":
        return f"{backend} is set up but a probe run failed (exit {out.returncode}): {out.output.strip()[-500:]}"
    return None
