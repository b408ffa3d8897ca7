"""Run an untrusted Python command in a fresh bubblewrap (``bwrap``) sandbox, with limits set from outside.

What the sandbox sees: a read-only view of ``/usr`` (and the ``/lib``, ``/bin`` links), a few files
of ``/etc``, this interpreter's installation and virtual environment, and the folders passed as
``read_only`` (for grading: the rcteach package and a folder holding the submission and the grader's
questions).  It writes only to a private ``/tmp`` (a size-limited tmpfs) and to the pipes it was
given.  It has no network, its own PID, IPC and UTS namespaces, a clean environment, no
capabilities, and a seccomp filter that refuses to create processes (threads are allowed): a fork
bomb or a background process fails at its first ``fork``.  Everything in it dies with ``bwrap``
(``--die-with-parent``, PID namespace), and ``bwrap`` is killed at the wall-clock limit.

Limits (:class:`Limits`) are ``setrlimit`` calls made in the child before it executes ``bwrap``, so
the sandboxed code inherits them and cannot raise them: CPU seconds, address space, size of any
file written, and no core files.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import platform
import resource
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

__all__ = ["Limits", "Outcome", "SandboxUnavailable", "available", "run"]


class SandboxUnavailable(RuntimeError):
    """No working bubblewrap sandbox on this machine (the message says why)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """Limits of one sandboxed run: ``wall`` and ``cpu`` seconds, ``memory`` bytes of address space,
    ``file_size`` bytes per file written, ``scratch`` bytes of ``/tmp``, ``output`` bytes of stdout
    and stderr kept (the rest is read and dropped), ``answers`` bytes accepted on the answer pipe."""

    wall: float = 600.0
    cpu: int = 600
    memory: int = 6 << 30
    file_size: int = 64 << 20
    scratch: int = 256 << 20
    output: int = 64 << 10
    answers: int = 64 << 20

    def __post_init__(self):
        for name in ("wall", "cpu", "memory", "file_size", "scratch", "output", "answers"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be > 0, got {getattr(self, name)!r}")


@dataclasses.dataclass
class Outcome:
    """What came out of one run: ``answers`` (bytes written to the answer pipe, at most
    ``Limits.answers``), ``output`` (stdout and stderr, cut at ``Limits.output``), ``returncode``
    and ``limits_hit`` (plain-words names of the limits the run reached, as seen from outside)."""

    answers: bytes
    output: str
    returncode: int | None
    limits_hit: list[str]
    seconds: float


# seccomp: refuse fork, vfork and clone without CLONE_THREAD (EAGAIN), clone3 (ENOSYS: the C library
# falls back to clone); everything else is allowed.  Offsets in struct seccomp_data: nr 0, arch 4,
# args[0] (low 32 bits, little-endian) 16.
_ARCHES = {"x86_64": (0xC000003E, {"clone": 56, "fork": 57, "vfork": 58, "clone3": 435}),
           "aarch64": (0xC00000B7, {"clone": 220, "clone3": 435})}
_CLONE_THREAD, _EAGAIN, _ENOSYS, _EPERM = 0x00010000, 11, 38, 1
_ALLOW, _ERRNO, _KILL = 0x7FFF0000, 0x00050000, 0x80000000


def _no_new_processes_filter() -> bytes:
    """The classic-BPF seccomp program above for this machine's architecture."""
    if platform.machine() not in _ARCHES:
        raise SandboxUnavailable(f"no process filter for the architecture {platform.machine()}")
    arch, nr = _ARCHES[platform.machine()]
    ld = lambda off: (0x20, 0, 0, off)
    jeq = lambda k, jt, jf: (0x15, jt, jf, k)
    ret = lambda k: (0x06, 0, 0, k)
    prog = [ld(4), jeq(arch, 1, 0), ret(_KILL), ld(0)]
    if "fork" in nr:  # x86_64: the x32 ABI numbers (bit 30) are refused
        prog += [(0x35, 0, 1, 0x40000000), ret(_ERRNO | _EPERM)]
    prog += [jeq(nr["clone3"], 0, 1), ret(_ERRNO | _ENOSYS)]
    for name in ("fork", "vfork"):
        if name in nr:
            prog += [jeq(nr[name], 0, 1), ret(_ERRNO | _EAGAIN)]
    prog += [jeq(nr["clone"], 1, 0), ret(_ALLOW), ld(16), (0x45, 0, 1, _CLONE_THREAD), ret(_ALLOW), ret(_ERRNO | _EAGAIN)]
    return b"".join(struct.pack("<HBBI", *insn) for insn in prog)


_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group", "nsswitch.conf", "alternatives",
        "fonts", "matplotlibrc")


@functools.lru_cache(maxsize=None)
def _sizes_tmpfs(bwrap: str) -> bool:
    """Whether this ``bwrap`` limits a tmpfs's size (``--size``, bubblewrap 0.8 and later; older ones
    leave ``/tmp`` bounded only by the file-size and memory limits)."""
    return "--size" in subprocess.run([bwrap, "--help"], capture_output=True, text=True).stdout


def _bwrap_argv(read_only, packages, limits: Limits, seccomp_fd: int) -> list[str]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (`bwrap`) is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--cap-drop", "ALL",
            "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev",
            # bwrap covers these itself where it can; make sure (as root, kernel knobs are root-owned)
            *[a for p in ("sys", "sysrq-trigger", "irq", "bus", "fs") for a in ("--ro-bind-try", f"/proc/{p}", f"/proc/{p}")],
            *(["--size", str(limits.scratch)] if _sizes_tmpfs(bwrap) else []), "--tmpfs", "/tmp", "--chdir", "/tmp"]
    for link in ("bin", "sbin", "lib", "lib32", "lib64"):
        target = pathlib.Path("/", link)
        if target.is_symlink():
            argv += ["--symlink", os.readlink(target), str(target)]
        elif target.is_dir():
            argv += ["--ro-bind", str(target), str(target)]
    argv += [arg for name in _ETC for arg in ("--ro-bind-try", f"/etc/{name}", f"/etc/{name}")]
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, *read_only, *packages)}
    for path in sorted(roots):
        if path != "/usr" and not path.startswith("/usr/"):
            argv += ["--ro-bind", path, path]
    if sys.prefix != os.path.realpath(sys.prefix):
        argv += ["--symlink", os.path.realpath(sys.prefix), sys.prefix]
    env = {"HOME": "/tmp", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": _pythonpath(packages)}
    for key, value in env.items():
        argv += ["--setenv", key, value]
    return argv + ["--add-seccomp-fd", str(seccomp_fd), "--"]


def _pythonpath(packages) -> str:
    """The folders holding ``packages`` (only the package folders themselves are visible inside)."""
    return os.pathsep.join(os.path.dirname(os.path.realpath(p)) for p in packages)


def _set_limits(limits: Limits):
    """``preexec_fn`` of the ``bwrap`` child: the limits every process in the sandbox inherits."""
    def apply():
        for which, value in ((resource.RLIMIT_CPU, limits.cpu), (resource.RLIMIT_AS, limits.memory),
                             (resource.RLIMIT_FSIZE, limits.file_size), (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(which, (value, value))
    return apply


def run(argv, *, read_only=(), packages=(), limits: Limits = Limits(), unsafe_no_sandbox=False) -> Outcome:
    """Run ``argv`` (``{answers_fd}`` in it is replaced by the answer pipe's descriptor) confined.

    ``read_only``: folders visible (read-only) at their own paths; ``packages``: package folders
    visible the same way and importable (their parent folders are on ``PYTHONPATH``, but nothing
    else of those parents is visible).

    ``unsafe_no_sandbox=True`` runs it with the same limits and a clean environment but without
    ``bwrap``: nothing stops it from reading or writing the grader's files.
    """
    start = time.monotonic()
    ans_r, ans_w = os.pipe()
    filt_r, filt_w = os.pipe()
    os.write(filt_w, _no_new_processes_filter())
    os.close(filt_w)
    try:
        argv = [a.replace("{answers_fd}", str(ans_w)) for a in argv]
        if unsafe_no_sandbox:
            cwd = tempfile.mkdtemp(prefix="rcteach-unsafe-")
            full, env = argv, {"PATH": "/usr/bin:/bin", "HOME": cwd, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                               "PYTHONPATH": _pythonpath(packages), "MPLBACKEND": "Agg"}
        else:
            cwd, full, env = None, _bwrap_argv(read_only, packages, limits, filt_r) + argv, {}
        proc = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                pass_fds=(ans_w, filt_r), env=env, cwd=cwd, preexec_fn=_set_limits(limits),
                                start_new_session=True)
    finally:
        os.close(ans_w)
        os.close(filt_r)
    answers, output, hit = _collect(proc, ans_r, limits, start)
    if unsafe_no_sandbox:
        shutil.rmtree(cwd, ignore_errors=True)
    code = proc.returncode
    if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        hit.append(f"CPU time limit ({limits.cpu} s)")
    elif code in (-signal.SIGKILL, 128 + signal.SIGKILL) and not hit:
        hit.append(f"killed (CPU time {limits.cpu} s or memory {limits.memory >> 20} MiB)")
    return Outcome(answers, output, code, hit, time.monotonic() - start)


def _collect(proc, ans_r, limits, start):
    """Read the answer pipe and the output until both close or the wall-clock limit; then kill."""
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
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # bwrap and its PID namespace (--die-with-parent)
    except ProcessLookupError:
        pass
    proc.wait()
    sel.close()
    os.close(ans_r)
    proc.stdout.close()
    return bytes(kept["answers"]), kept["output"].decode(errors="replace"), hit


@functools.lru_cache(maxsize=None)
def available() -> str | None:
    """None if a sandbox works here, else why not (``bwrap`` missing, or its probe run failed)."""
    try:
        out = run([sys.executable, "-c", "import os; os.write({answers_fd}, b'ok')"], limits=Limits(wall=60, cpu=30))
    except SandboxUnavailable as e:
        return str(e)
    if out.answers != b"ok":
        return f"bwrap is installed but a probe run failed (exit {out.returncode}): {out.output.strip()[-500:]}"
    return None
