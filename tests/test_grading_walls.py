"""The walls of the grading sandbox, one piece at a time (fast; no notebook is graded here).

The seccomp program is run on a small classic-BPF interpreter for every architecture it knows;
the cgroup of a run is made, filled and emptied for real where this machine offers one; the
comparison core, the text escaping and the reading of a notebook are checked on the values that broke
them.  The adversarial submissions themselves are in test_grading_attacks.py.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

from rcteach.tools.grading import answers, cgroup, harness, seccomp, submissions, verdict


def _verdict(program: bytes, arch: int, nr: int, *args: int) -> int:
    """What the kernel would do with system call ``nr(args)`` of ``arch`` under ``program``."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    insns = [struct.unpack_from("<HBBI", program, 8 * i) for i in range(len(program) // 8)]
    pc = acc = 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld [k]
            acc, pc = struct.unpack_from("<I", data, k)[0], pc + 1
        elif code in (0x15, 0x45, 0x35):  # jeq, jset, jge
            taken = {0x15: acc == k, 0x45: bool(acc & k), 0x35: acc >= k}[code]
            pc += 1 + (jt if taken else jf)
        elif code == 0x06:  # ret k
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_seccomp_refuses_what_it_names_and_allows_the_rest(machine):
    arch, nr, has_x32 = seccomp.ARCHES[machine]
    program = seccomp.program(machine)

    def run(name, *args):
        return _verdict(program, arch, nr[name], *args)

    for name, code in seccomp.REFUSED.items():
        if name in nr:
            assert run(name) == seccomp.refuse(code), name
    thread = 0x00010000 | 0x00000100 | 0x00000800 | 0x00000200 | 0x00000400  # CLONE_THREAD | VM | SIGHAND | FS | FILES
    assert run("clone", thread) == seccomp.ALLOW
    assert run("clone", 17) == seccomp.refuse(seccomp.EAGAIN)  # fork: SIGCHLD only
    assert run("clone", thread | 0x10000000) == run("clone", thread | 0x40000000) == seccomp.refuse(seccomp.EAGAIN)
    assert run("socket", seccomp.AF_UNIX) == run("socketpair", seccomp.AF_UNIX) == seccomp.ALLOW
    assert run("socket", 2) == run("socketpair", 2) == seccomp.refuse(seccomp.EAFNOSUPPORT)
    assert run("personality", 0xFFFFFFFF) == seccomp.ALLOW and run("personality",
                                                                   0x0040000) == seccomp.refuse(seccomp.EPERM)
    for number in (0, 1, 9, 63, 98, 202, 230):  # read/io_setup, write/..., ordinary calls of either table
        if number not in nr.values():
            assert _verdict(program, arch, number) == seccomp.ALLOW
    assert _verdict(program, arch ^ 1, 0) == seccomp.KILL_PROCESS  # another architecture's calls
    if has_x32:
        assert _verdict(program, arch, 0x40000000 | 1) == seccomp.KILL_PROCESS
    no_network = seccomp.program(machine, network=False)
    assert _verdict(no_network, arch, nr["socket"], seccomp.AF_UNIX) == seccomp.refuse(seccomp.EACCES)
    assert _verdict(no_network, arch, nr["socketpair"], seccomp.AF_UNIX) == seccomp.ALLOW


def test_seccomp_knows_only_its_architectures():
    with pytest.raises(ValueError, match="architecture"):
        seccomp.program("sparc64")
    assert not seccomp.supported("sparc64")


def test_a_cgroup_bounds_and_ends_what_runs_in_it():
    group = cgroup.create(memory=256 << 20, tasks=8)
    if group is None:
        pytest.skip("no writable cgroup for this process here (cgroup v1 needs root; v2 a delegated cgroup)")
    proc = subprocess.Popen([sys.executable, "-c", "import threading, time\nn = 0\ntry:\n    while True:\n"
                             "        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n        n "
                             "+= 1\nexcept RuntimeError:\n    print(n, flush=True)\ntime.sleep(60)"],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        group.add(proc.pid)  # moved in before it starts threads: the interpreter takes a while to start
        started = int(proc.stdout.readline())
        assert 0 < started < 8, started  # the cgroup's task limit, not the machine's
        assert group.pids() == {proc.pid} and not group.oom_killed()
        group.kill()
        assert proc.wait(timeout=10) == -9 and group.pids() == set()
    finally:
        proc.kill()
        proc.wait()
        group.remove()
    assert not any(d.exists() for d in group.dirs)


def test_printable_escapes_what_a_terminal_acts_on():
    text = "score\x1b[2J\x1b]0;title\x07\r\u202egood\x9b\nnext\tcolumn"
    shown = answers.printable(text)
    assert shown == "score\\x1b[2J\\x1b]0;title\\x07\\r\\u202egood\\x9b\nnext\tcolumn"
    assert answers.decode("a\x1b") == "a\\x1b" and answers.decode({"$": "other", "v": "T\x1b"}) == "T\\x1b"


@pytest.mark.parametrize("got, want",
                         [(10 ** 400, 1.0), (complex(1.5e308, 1.5e308), 1j), (0j, complex(1.5e308, 1.5e308)),
                                       (-10 ** 400, 10 ** 400), (1e308, -1e308)])
def test_values_that_overflow_a_comparison_are_mismatches(got, want):
    assert verdict.same(got, want) is False
    ask = answers.ASK.value("x")
    assert verdict.mark("q", 2, [ask], [got], [want]).score == 0


def test_the_comparison_is_allclose_without_overflow():
    huge = np.array([1.5e308 + 1.5e308j, 1.0])
    assert verdict.same(huge, huge.copy()) and verdict.same(10 ** 400, 10 ** 400)
    assert not verdict.same(np.zeros(2, dtype=complex), huge)  # np.allclose would say True (inf <= inf)
    assert verdict.same(np.array([1.0, np.inf]), np.array([1.0 + 1e-12, np.inf]))
    assert not verdict.same(np.array([np.inf]), np.array([-np.inf]))
    assert not verdict.same(np.array([np.nan]), np.array([np.nan]))
    assert verdict.same(0.0, 1e-300, atol=1e-200) and not verdict.same(0.0, 1e-300)


def test_judging_never_raises(monkeypatch):
    monkeypatch.setattr(verdict, "same", lambda *a: 1 / 0)
    m = verdict.mark("q", 2, [answers.ASK.value("x")], [1.0], [1.0])
    assert m.score == 0 and m.feedback == ["x: could not be compared with the expected answer (ZeroDivisionError)"]


def test_notes_are_read_escaped_and_bounded():
    stream = b"\n".join([b'{"note": "cell 1 \\u001b[2J stopped"}'] * 30 + [b'{"question": "q", "answers": []}'])
    notes = verdict.read_notes(stream)
    assert len(notes) == 20 and notes[0] == "cell 1 \\x1b[2J stopped"


def test_reading_a_notebook_takes_formats_4_and_3_and_refuses_the_rest(tmp_path):
    v4 = {"nbformat": 4,
          "cells": [{"cell_type": "markdown", "source": "x"}, {"cell_type": "code", "source": ["a = 1\n", "b"]}]}
    (tmp_path / "v4.ipynb").write_text(json.dumps(v4))
    assert harness.code_cells(submissions.read_notebook(tmp_path / "v4.ipynb")[1]) == ["a = 1\nb"]
    v3 = {"nbformat": 3, "worksheets": [{"cells": [{"cell_type": "code", "input": ["a = 1\n", "b"]}]}]}
    (tmp_path / "v3.ipynb").write_text(json.dumps(v3))
    data, notebook = submissions.read_notebook(tmp_path / "v3.ipynb")
    assert harness.code_cells(notebook) == ["a = 1\nb"] and json.loads(data) == notebook  # the sandbox gets format 4
    for content, reason in ((b"{", "not valid JSON"), (b"[]", "no nbformat-4 cells"),
                            (b'{"nbformat": 4, "cells": 3}', "cells"),
                            (b'{"nbformat": 3, "worksheets": 1}', "format 3"), (b'{"cells": []}', "nbformat-4")):
        (tmp_path / "bad.ipynb").write_bytes(content)
        with pytest.raises(submissions.SubmissionError, match=reason):
            submissions.read_notebook(tmp_path / "bad.ipynb")
    os.mkfifo(tmp_path / "fifo")
    start = time.monotonic()
    with pytest.raises(ValueError, match="FIFO"):
        submissions.read_notebook(tmp_path / "fifo")
    assert time.monotonic() - start < 5  # refused, not read (reading would wait for a writer)
    for special, kind in ((tmp_path, "folder"), ("/dev/null", "device")):
        with pytest.raises(ValueError, match=kind):
            submissions.read_notebook(special)
    (tmp_path / "protected").mkdir()
    (tmp_path / "protected" / "solutions.ipynb").write_text(json.dumps(v4))
    os.link(tmp_path / "protected" / "solutions.ipynb", tmp_path / "hard.ipynb")
    (tmp_path / "soft.ipynb").symlink_to(tmp_path / "protected" / "solutions.ipynb")
    for link, reason in (("hard.ipynb", "assignment's own files"), ("soft.ipynb", "symbolic link")):
        with pytest.raises(ValueError, match=reason):
            submissions.read_notebook(tmp_path / link, protected=[tmp_path / "protected"])
    own = tmp_path / "protected" / "solutions.ipynb"  # the instructor grading the solutions where they are
    assert harness.code_cells(submissions.read_notebook(own, protected=[tmp_path / "protected"])[1]) == ["a = 1\nb"]


@pytest.mark.parametrize("delegated", [True, False])
def test_cgroup_v2_files_on_a_fake_hierarchy(tmp_path, monkeypatch, delegated):
    """The cgroup v2 protocol, on files standing for the hierarchy (this machine may have none): a
    run cgroup beside the grader, its limits written; an undelegated cgroup is prepared by moving
    the grader into a leaf and enabling the controllers for the children."""
    own = tmp_path / "grader.service"
    own.mkdir()
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.controllers").write_text("memory pids\n")
    (own / "cgroup.subtree_control").write_text("memory pids\n" if delegated else "\n")
    monkeypatch.setattr(cgroup, "_own", lambda controller: "/grader.service" if controller == "" else None)
    group = cgroup.create(memory=1 << 30, tasks=64, root=tmp_path)
    assert group is not None and group.version == 2 and group.dirs[0].parent == own
    assert (group.dirs[0] / "memory.max").read_text() == str(1 << 30)
    assert (group.dirs[0] / "pids.max").read_text() == "64"
    if not delegated:
        assert (own / f"rcteach-grader-{os.getpid()}" / "cgroup.procs").read_text() == str(os.getpid())
        assert (own / "cgroup.subtree_control").read_text() == "+memory +pids"
    (group.dirs[0] / "cgroup.procs").write_text("")
    assert group.pids() == set() and not group.oom_killed()
    (group.dirs[0] / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert group.oom_killed()
