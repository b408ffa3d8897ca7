"""The first process of a sandbox without bubblewrap: it waits to be confined, drops to an
unprivileged user, installs the seccomp filter and executes the command.

Run by :mod:`.sandbox` as ``python -I -S walls.py RELEASE_FD SECCOMP_FD UID GID -- COMMAND...``
(stdlib only, no site-packages: nothing importable from the sandbox's folders runs here).  In
order: wait until one byte arrives on ``RELEASE_FD`` (meanwhile the grader puts this process in
its cgroup and sets its rlimits), empty the capability bounding set and become ``UID:GID`` with no
supplementary groups (as root; ``-1``: keep this user), set no-new-privileges, install the filter read from ``SECCOMP_FD`` (``-1``: none,
for ``--unsafe-no-sandbox``) and ``execv`` the command, which inherits all of it and cannot undo it.
"""

import ctypes
import os
import sys

PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 24, 38, 22, 2
SIGKILL = 9


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def main(argv) -> int:
    release_fd, seccomp_fd, uid, gid = map(int, argv[:4])
    if argv[4] != "--" or len(argv) < 6:
        raise SystemExit("usage: walls.py RELEASE_FD SECCOMP_FD UID GID -- COMMAND...")
    command = argv[5:]
    if os.read(release_fd, 1) != b"x":  # the grader went away before confining us
        return 1
    os.close(release_fd)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4

    def prctl(*args):
        if libc.prctl(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl{args[:1]}: {os.strerror(err)}")

    if uid >= 0:
        for cap in range(64):  # empty the bounding set: no capability can come back, even through exec
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                break  # EINVAL: past the last capability this kernel knows
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if os.getuid() != uid or os.geteuid() != uid or os.getegid() != gid:
            raise SystemExit("could not drop to the sandbox user")
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)  # after setuid, which clears it
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if seccomp_fd >= 0:
        program = _read_all(seccomp_fd)
        prog = _SockFprog(len(program) // 8, program)
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0)
    try:
        os.execv(command[0], command)
    except PermissionError:
        raise SystemExit(f"user {os.getuid()} may not run {command[0]}: the sandbox user needs read and search "
                         "access to the Python installation, the virtual environment and the packages") from None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
