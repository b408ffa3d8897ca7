"""The system calls a sandboxed submission may not make, as a classic-BPF seccomp program.

Everything not named here is allowed (a deny list: Python, numpy, torch and IPython use a few
hundred system calls).  Refused, each with an errno the C library and Python understand:

* **new processes**: ``fork``, ``vfork`` and ``clone`` unless it makes a thread (``CLONE_THREAD``
  set, no namespace flag), ``EAGAIN``; ``clone3`` is ``ENOSYS``, so the C library falls back to
  ``clone`` for threads;
* **namespaces**: ``unshare``, ``setns`` (no nested user namespace with its capabilities);
* **other processes**: ``ptrace``, ``process_vm_readv/writev``, ``process_madvise``, ``kcmp``,
  ``pidfd_getfd``, ``move_pages``, ``migrate_pages``;
* **memory no limit counts**: ``memfd_create``, ``memfd_secret``, System V shared memory,
  semaphores and message queues, POSIX message queues and timers, kernel AIO contexts (``io_setup``:
  pinned, and counted against a limit of the whole machine);
* **kernel interfaces a computation does not need**: io_uring, ``bpf``, ``userfaultfd``,
  ``perf_event_open``, keyrings, mounts and the new mount API, ``chroot``, ``pivot_root``, modules,
  kexec, swap, ``reboot``, ``acct``, ``quotactl``, ``syslog``, ``vhangup``, ``iopl``/``ioperm``, file
  handles, inotify and fanotify, ``personality`` changes (the query is allowed);
* **sockets** other than ``AF_UNIX`` (``network=False``: no ``socket`` at all; ``socketpair`` stays).

A system call of another ABI (x86's 32-bit and x32) kills the process.  :func:`program` returns
the filter as bytes (``struct sock_filter`` array) for ``bwrap --add-seccomp-fd`` or ``prctl``.
"""

from __future__ import annotations

import platform
import struct

__all__ = ["REFUSED", "program", "supported"]

EPERM, EAGAIN, EACCES, ENOSYS, EAFNOSUPPORT = 1, 11, 13, 38, 97

#: Refused system calls (by name) and the errno each returns.
REFUSED = {
    **dict.fromkeys(("fork", "vfork"), EAGAIN),
    "clone3": ENOSYS,
    **dict.fromkeys(("unshare", "setns"), EPERM),
    **dict.fromkeys(("ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd",
                     "move_pages", "migrate_pages"), EPERM),
    **dict.fromkeys(("memfd_create", "memfd_secret", "shmget", "shmat", "semget", "msgget", "mq_open", "timer_create",
                     "io_setup"), ENOSYS),
    **dict.fromkeys(("io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "userfaultfd", "perf_event_open",
                     "keyctl", "add_key", "request_key", "mount", "umount2", "open_tree", "move_mount", "fsopen",
                     "fsconfig", "fsmount", "fspick", "mount_setattr", "pivot_root", "chroot", "init_module",
                     "finit_module", "delete_module", "kexec_load", "kexec_file_load", "swapon", "swapoff", "reboot",
                     "acct", "quotactl", "syslog", "vhangup", "iopl", "ioperm", "uselib", "lookup_dcookie",
                     "open_by_handle_at", "name_to_handle_at", "inotify_init", "inotify_init1", "fanotify_init"),
                     ENOSYS),
}

# System call numbers (x86_64: asm/unistd_64.h; aarch64: asm-generic/unistd.h, which has no fork,
# vfork, inotify_init, iopl, ioperm, uselib).
_X86_64 = dict(
    clone=56, fork=57, vfork=58, clone3=435, unshare=272, setns=308, ptrace=101, process_vm_readv=310,
    process_vm_writev=311, process_madvise=440, kcmp=312, pidfd_getfd=438, move_pages=279, migrate_pages=256,
    memfd_create=319, memfd_secret=447, shmget=29, shmat=30, semget=64, msgget=68, mq_open=240, timer_create=222,
    io_setup=206, io_uring_setup=425,
    io_uring_enter=426, io_uring_register=427, bpf=321, userfaultfd=323, perf_event_open=298, keyctl=250,
    add_key=248, request_key=249, mount=165, umount2=166, open_tree=428, move_mount=429, fsopen=430, fsconfig=431,
    fsmount=432, fspick=433, mount_setattr=442, pivot_root=155, chroot=161, init_module=175, finit_module=313,
    delete_module=176, kexec_load=246, kexec_file_load=320, swapon=167, swapoff=168, reboot=169, acct=163,
    quotactl=179, syslog=103, vhangup=153, iopl=172, ioperm=173, uselib=134, lookup_dcookie=212,
    open_by_handle_at=304, name_to_handle_at=303, inotify_init=253, inotify_init1=294, fanotify_init=300,
    personality=135, socket=41, socketpair=53)
_AARCH64 = dict(
    clone=220, clone3=435, unshare=97, setns=268, ptrace=117, process_vm_readv=270, process_vm_writev=271,
    process_madvise=440, kcmp=272, pidfd_getfd=438, move_pages=239, migrate_pages=238, memfd_create=279,
    memfd_secret=447, shmget=194, shmat=196, semget=190, msgget=186, mq_open=180, timer_create=107, io_setup=0,
    io_uring_setup=425,
    io_uring_enter=426, io_uring_register=427, bpf=280, userfaultfd=282, perf_event_open=241, keyctl=219,
    add_key=217, request_key=218, mount=40, umount2=39, open_tree=428, move_mount=429, fsopen=430, fsconfig=431,
    fsmount=432, fspick=433, mount_setattr=442, pivot_root=41, chroot=51, init_module=105, finit_module=273,
    delete_module=106, kexec_load=104, kexec_file_load=294, swapon=224, swapoff=225, reboot=142, acct=89,
    quotactl=60, syslog=116, vhangup=58, lookup_dcookie=18, open_by_handle_at=265, name_to_handle_at=264,
    inotify_init1=26, fanotify_init=262, personality=92, socket=198, socketpair=199)
#: machine -> (AUDIT_ARCH_* value, system call numbers, whether numbers with bit 30 set (x32) exist)
ARCHES = {"x86_64": (0xC000003E, _X86_64, True), "aarch64": (0xC00000B7, _AARCH64, False)}

CLONE_THREAD = 0x00010000
#: CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
AF_UNIX = 1
PERSONALITY_QUERY = 0xFFFFFFFF

ALLOW, KILL_PROCESS = 0x7FFF0000, 0x80000000
_ERRNO = 0x00050000
# struct seccomp_data: int nr (offset 0), u32 arch (4), u64 ip (8), u64 args[6] (16; the low 32 bits
# of args[0] at 16 on these little-endian machines).
_NR, _ARCH, _ARG0 = 0, 4, 16


def _ld(offset):
    return (0x20, 0, 0, offset)  # BPF_LD | BPF_W | BPF_ABS


def _jeq(k, jt, jf):
    return (0x15, jt, jf, k)  # BPF_JMP | BPF_JEQ | BPF_K


def _jset(k, jt, jf):
    return (0x45, jt, jf, k)  # BPF_JMP | BPF_JSET | BPF_K


def _ret(k):
    return (0x06, 0, 0, k)  # BPF_RET | BPF_K


def refuse(code: int) -> int:
    """The filter's return value that refuses a call with errno ``code``."""
    return _ERRNO | code


def supported(machine: str | None = None) -> bool:
    """Whether :func:`program` knows this machine's system call numbers."""
    return (machine or platform.machine()) in ARCHES


def program(machine: str | None = None, *, network: bool = True) -> bytes:
    """The seccomp filter for ``machine`` (default: this one) as packed ``struct sock_filter``s.

    ``network=True`` allows ``AF_UNIX`` sockets (for a sandbox in its own network namespace);
    ``network=False`` refuses ``socket`` entirely (``socketpair`` of ``AF_UNIX`` stays allowed).
    """
    machine = machine or platform.machine()
    if machine not in ARCHES:
        raise ValueError(f"no seccomp filter for the architecture {machine!r} (known: {', '.join(ARCHES)})")
    arch, nr, has_x32 = ARCHES[machine]

    def rule(name, body):  # if nr == NR[name]: body (which ends in a return on every path)
        return [_jeq(nr[name], 0, len(body)), *body]

    def unix_only(otherwise):
        return [_ld(_ARG0), _jeq(AF_UNIX, 0, 1), _ret(ALLOW), _ret(otherwise)]

    prog = [_ld(_ARCH), _jeq(arch, 1, 0), _ret(KILL_PROCESS), _ld(_NR)]
    if has_x32:
        prog += [(0x35, 0, 1, 0x40000000), _ret(KILL_PROCESS)]  # BPF_JGE: the x32 ABI
    for name, code in REFUSED.items():
        if name in nr:
            prog += rule(name, [_ret(refuse(code))])
    prog += rule("clone", [_ld(_ARG0), _jset(CLONE_NAMESPACES, 2, 0), _jset(CLONE_THREAD, 0, 1), _ret(ALLOW),
                           _ret(refuse(EAGAIN))])
    prog += rule("personality", [_ld(_ARG0), _jeq(PERSONALITY_QUERY, 0, 1), _ret(ALLOW), _ret(refuse(EPERM))])
    prog += rule("socket", unix_only(refuse(EAFNOSUPPORT)) if network else [_ret(refuse(EACCES))])
    prog += rule("socketpair", unix_only(refuse(EAFNOSUPPORT)))
    prog.append(_ret(ALLOW))
    return b"".join(struct.pack("<HBBI", *insn) for insn in prog)
