"""The first process of every sandboxed run, outside the sandbox: it starts the sandbox, and ends
everything the sandbox started when the sandbox's command ends or when the grader dies.

Run by :mod:`.sandbox` as ``python -I -S walls.py INFO_FD RELEASE_FD SECCOMP_FD UID GID -- COMMAND...``
(stdlib only, no site-packages: nothing importable from the sandbox's folders runs here).

*The supervisor* (this process) is a child subreaper: every process started below it that loses
its parent becomes its child, wherever it moved (new session, cleared parent-death signal).  It
forks the command and waits for it; then, or when the grader dies (its parent-death signal,
SIGTERM, which nothing in the sandbox can clear: the sandbox cannot signal or trace it), it kills
all its children until none is left, and exits with the command's status (``128 + signal`` if a
signal ended it).

*The command* (the forked child), for the container backend: writes its process id to
``INFO_FD`` as ``{"child-pid": N}`` and waits until one byte arrives on ``RELEASE_FD`` (meanwhile
the grader puts it in its cgroup and sets its rlimits); then empties its capability bounding set,
becomes ``UID:GID`` with no supplementary groups, sets no-new-privileges, installs the seccomp
filter read from ``SECCOMP_FD`` and executes ``COMMAND``, which inherits all of it and cannot undo
it.  For bwrap (``-1`` for all five) it executes ``COMMAND`` (``bwrap ...``) at once: bwrap holds
and confines the sandbox itself.  For ``--unsafe-no-sandbox``, ``SECCOMP_FD``, ``UID`` and ``GID``
are ``-1``.
"""

import ctypes
import json
import os
import signal
import sys

PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 1, 24, 22, 38, 36
SECCOMP_MODE_FILTER = 2

libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4


def prctl(*args) -> None:
    if libc.prctl(*args, *[0] * (5 - len(args))) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({args[0]}): {os.strerror(err)}")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _become_sandbox(info_fd, release_fd, seccomp_fd, uid, gid, command) -> None:
    """The forked child: wait to be confined, drop everything, execute the command."""
    if info_fd >= 0:
        os.write(info_fd, json.dumps({"child-pid": os.getpid()}).encode())
        os.close(info_fd)
    if release_fd >= 0:
        if os.read(release_fd, 1) != b"x":  # the grader went away before confining us
            os._exit(1)
        os.close(release_fd)
    if uid >= 0:
        for cap in range(64):  # empty the bounding set: no capability can come back, even through exec
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                break  # EINVAL: past the last capability this kernel knows
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if os.getuid() != uid or os.geteuid() != uid or os.getegid() != gid:
            raise SystemExit("could not drop to the sandbox user")
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid, which clears it
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if seccomp_fd >= 0:
        program = _read_all(seccomp_fd)
        prog = _SockFprog(len(program) // 8, program)
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog))
    try:
        os.execv(command[0], command)
    except PermissionError:
        raise SystemExit(f"user {os.getuid()} may not run {command[0]}: the sandbox user needs read and search "
                         "access to the Python installation, the virtual environment and the packages") from None


def _children() -> list[int]:
    """The process ids whose parent is this process (from /proc/*/stat)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == me:
                found.append(int(entry))
    return found


def _end_all() -> None:
    """SIGKILL every child (they are unreaped, so their ids are theirs) and reap them, until none is
    left: an orphan further down becomes a child here when its parent dies."""
    while True:
        for pid in _children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


class _GraderDied(Exception):
    pass


def _on_term(signum, frame):
    raise _GraderDied


def main(argv) -> int:
    info_fd, release_fd, seccomp_fd, uid, gid = map(int, argv[:5])
    if argv[5:6] != ["--"] or len(argv) < 7:
        raise SystemExit("usage: walls.py INFO_FD RELEASE_FD SECCOMP_FD UID GID -- COMMAND...")
    command = argv[6:]
    grader = os.getppid()
    signal.signal(signal.SIGTERM, _on_term)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != grader:  # the grader died before the parent-death signal was set
        return 1
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            _become_sandbox(info_fd, release_fd, seccomp_fd, uid, gid, command)
        except BaseException as e:  # noqa: BLE001 - said on the run's output, which the grader reports
            print(e.code if isinstance(e, SystemExit) else f"walls: {type(e).__name__}: {e}", file=sys.stderr,
                  flush=True)
        os._exit(1)
    null = os.open(os.devnull, os.O_RDWR)  # hold none of the sandbox's pipes: their ends are its own
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    status = None
    try:
        while status is None:
            pid, code = os.waitpid(-1, 0)  # the command, or an orphan reparented here
            if pid == child:
                status = code
    except _GraderDied:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _end_all()
    if status is None:
        return 128 + signal.SIGTERM
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
