"""Adversarial submissions against the trusted grader (rcteach.tools.grading with rcteach.tools.grading.sandbox).

Threat model: a submission is code written by a student who can read this repository, otter's
source and the student notebook.  One submission per attack class of the grading issue; each must
score what an honest blank submission scores (the student notebook as handed out), and nothing
outside the sandbox may change.  The attacks are small notebooks (most without torch, so that they
grade in a second or two) ending with the student notebook's ``grader.check`` cells.
"""

from __future__ import annotations

import ast
import base64
import errno
import hashlib
import io
import json
import os
import pathlib
import pickle
import platform
import re
import shutil
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor

import nbformat
import numpy as np
import pytest

pytest.importorskip("otter", reason="otter-grader not installed: pip install -e .[assign]")

from rcteach.tools.grading import answers, sandbox, seccomp, verdict

from rcteach.tools import grading  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
MASTER = ROOT / "assignments" / "a1_spectral_gap" / "a1_spectral_gap.ipynb"
SECRET = "rcteach-grader-secret-7f3a"  # an environment variable of the grading process
MARK = "rcteach-attack-marker"
COMM = "linger-attack"  # the process name (at most 15 characters) a lingering submission gives itself
WALL = 10  # seconds: the wall-clock limit of the submissions that never stop
SCRATCH = 16 << 20  # bytes of /tmp for the submission that fills every memory-backed folder
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # what a terminal acts on


def _fingerprint(*folders) -> dict:
    """Hash of every file under ``folders`` (the package, the autograder, the masters)."""
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in folders for p in sorted(pathlib.Path(folder).rglob("*")) if p.is_file()}


# The way out of the sandbox (x86_64): attach to bwrap's first process (only if that is what
# PID 1 is), make it call prctl(PR_SET_PDEATHSIG, 0) at the system call instruction it is stopped
# after, restore its registers and detach.  Then killing bwrap's outer process no longer ends it.
_DISARM_BWRAP_INIT = (
    "import platform\nlibc.ptrace.restype = ctypes.c_long\n"
    "libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]\n"
    "if os.getpid() != 1 and platform.machine() == 'x86_64' and open('/proc/1/comm').read().strip() == 'bwrap':\n"
    "    if libc.ptrace(16, 1, None, None) != 0:  # PTRACE_ATTACH\n"
    "        print('attach refused', ctypes.get_errno())\n"
    "    else:\n"
    "        os.waitpid(1, 0)\n        Regs = ctypes.c_ulonglong * 27\n        saved, regs = Regs(), Regs()\n"
    "        libc.ptrace(12, 1, None, ctypes.byref(saved))  # PTRACE_GETREGS\n"
    "        ctypes.memmove(regs, saved, ctypes.sizeof(saved))\n"
    "        regs[16] -= 2  # rip: back onto its `syscall` instruction\n"
    "        regs[10], regs[14], regs[13] = 157, 1, 0  # rax = prctl, rdi = PR_SET_PDEATHSIG, rsi = 0\n"
    "        libc.ptrace(13, 1, None, ctypes.byref(regs))  # PTRACE_SETREGS\n"
    "        libc.ptrace(9, 1, None, None)  # PTRACE_SINGLESTEP\n        os.waitpid(1, 0)\n"
    "        libc.ptrace(13, 1, None, ctypes.byref(saved))\n        libc.ptrace(17, 1, None, None)  # PTRACE_DETACH\n"
    "        print('disarmed the parent-death signal of PID 1')\n"
    "else:\n    print('PID 1 is', open('/proc/1/comm').read().strip())\n")


def _attacks(autograder: pathlib.Path, outside: pathlib.Path) -> dict:
    """Attack name -> (cell sources, extra grade() arguments).  ``outside``: a host folder a
    submission must not be able to write into (nor have the grader write into)."""
    home = os.path.expanduser("~")
    targets = [grading.PACKAGE_DIR / f"{MARK}.py", pathlib.Path(sys.prefix) / f"{MARK}.pth",
               pathlib.Path(home) / MARK, outside / MARK, MASTER.parent / MARK, autograder / MARK]
    payload = io.BytesIO()
    np.save(payload, np.array([_Payload(str(outside / "unpickled"))], dtype=object), allow_pickle=True)
    pickled = base64.b64encode(payload.getvalue()).decode()
    return {
        "forge the checker": ([
            "import otter\nfrom otter.execute import Checker\nfrom otter.test_files.abstract_test import TestFile",
            "Checker.check = classmethod(lambda cls, *a, **k: None)\n"
            "TestFile.all_passed = property(lambda self: True)\nTestFile.score = property(lambda self: 1200.0)\n"
            "grader = otter.Notebook('a1_spectral_gap.ipynb')\ngrader.check = lambda *a, **k: None",
        ], {}),
        "patch the comparisons": ([
            "import math, numpy, numpy.testing, torch, rcteach.tools.grading.verdict\n"
            "torch.allclose = lambda *a, **k: True\nnumpy.testing.assert_allclose = lambda *a, **k: None\n"
            "numpy.allclose = lambda *a, **k: True\nmath.isclose = lambda *a, **k: True\n"
            "rcteach.tools.grading.verdict.same = lambda *a, **k: True",
            "class Anything(float):\n    __eq__ = lambda self, other: True\n    __ne__ = lambda self, other: False\n"
            "c_expr = measured_radius = measured_gap_ratio = swap_error = Anything(0)\n"
            "predicted_radius = swapped_spectrum = my_centre = lambda *a: Anything(0)",
        ], {}),
        "exceed the maximum": ([
            "import json, os\nforged = {'question': 'q1b', 'answers': [{'ok': 1200.0}] * 3, 'score': 1200}\n"
            "line = (json.dumps(forged) + '\\n').encode() * 200\nfor fd in range(3, 64):\n    try:\n"
            "        os.write(fd, line)\n    except OSError:\n        pass\nscore = grade = 1200",
        ], {}),
        "tamper with the autograder": ([
            f"import os\nfound = [{str(autograder)!r}]\nfor pid in os.listdir('/proc'):\n    try:\n"
            "        found += open(f'/proc/{pid}/cmdline').read().split('\\0')\n    except OSError:\n        pass\n"
            "for top in ('/work', '/root', '/home', '/tmp'):\n    for d, _, files in os.walk(top):\n"
            "        found += [os.path.join(d, f) for f in files if f.endswith(('.zip', 'key.py', 'questions.json'))]\n"
            "for path in found:\n    for name in ([path] if os.path.isfile(path) else\n"
            "                 [os.path.join(path, f) for f in (os.listdir(path) if os.path.isdir(path) else [])]):\n"
            "        try:\n            open(name, 'w').write('PWNED')\n"
            "        except OSError as e:\n            print('could not write', name, e)",
        ], {}),
        "read the hidden tests": ([
            f"import glob\nfor path in [{str(MASTER)!r}, {str(autograder / grading.KEY)!r}, "
            f"{str(autograder / 'a1_spectral_gap.ipynb')!r}] + [p for top in ('/work', '/root', '/tmp') for p in "
            f"glob.glob(top + '/**/key.py', recursive=True)]:\n"
            "    try:\n        print(open(path).read())\n    except OSError as e:\n        print('hidden', e)\n"
            "print(open('/proc/1/cmdline').read(), open('/proc/self/cmdline').read())\n"
            "def predicted_radius(T, s2):\n    raise RuntimeError(open(" f"{str(MASTER)!r}" ").read())",
        ], {}),
        "leak the environment": ([
            "import os\nprint(dict(os.environ), open('/proc/1/environ').read())\n"
            "def predicted_radius(T, s2):\n    raise RuntimeError(repr(dict(os.environ)) + "
            "open('/proc/1/environ').read())\nraise RuntimeError(repr(dict(os.environ)))",
        ], {}),
        "pickle payload": ([
            "import json, os, pickle, sys\nfd = int(sys.argv[-2])\n"
            f"record = {{'question': 'q1c', 'answers': [{{'ok': {{'$': 'ndarray', 'v': {pickled!r}}}}}] * 2}}\n"
            "os.write(fd, (json.dumps(record) + '\\n').encode())\n"
            f"pickle.dump(1, open('results.pkl', 'wb'))\nmeasured_radius = measured_gap_ratio = "
            f"{{'$': 'ndarray', 'v': {pickled!r}}}",
        ], {}),
        "write outside": ([
            f"for path in {[str(t) for t in targets]!r}:\n    try:\n        open(path, 'w').write('import os')\n"
            "    except OSError as e:\n        print('write', e)",
        ], {}),
        "background process": ([
            "import os, subprocess, sys\n"
            f"cmd = [sys.executable, '-c', 'import time; time.sleep(300)  # {MARK}']\n"
            "for start in (lambda: subprocess.Popen(cmd, start_new_session=True), lambda: os.system(' '.join(cmd) + ' "
            "&'),\n              lambda: os.posix_spawn(cmd[0], cmd, {}), lambda: os.fork() or os._exit(0)):\n"
            "    try:\n        start()\n    except OSError as e:\n        print('start', e)",
        ], {}),
        "disarm the time limit": ([
            "import signal, time\nsignal.setitimer(signal.ITIMER_REAL, 0)\nsignal.signal(signal.SIGALRM, "
            "signal.SIG_IGN)\nwhile True:\n    try:\n        time.sleep(0.05)\n    except BaseException:\n        pass",
        ], {"timeout": WALL}),
        "huge output": ([
            "import os, sys\nfor _ in range(50):\n    sys.stdout.write('x' * (1 << 20))\n"
            "try:\n    open('/tmp/big', 'wb').write(b'0' * (1 << 30))\nexcept OSError as e:\n    print(e)\n"
            "os.write(int(sys.argv[-2]), b'{' * (20 << 20))",
        ], {}),
        "fork bomb": (["import os\nwhile True:\n    os.fork()"], {}),
        "memory hog": ([
            "blocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))",
            "x = bytearray(1 << 40)",
        ], {"limits": sandbox.Limits(wall=60, cpu=60, memory=1 << 30)}),
        # issue 25, containment 1: clear the parent-death signal of bwrap's first process (ptrace), and its own;
        # ignore signals; keep a thread alive
        "outlive the grading": ([
            "import ctypes, os, signal, threading, time\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            f"libc.prctl(15, {COMM!r}.encode(), 0, 0, 0)  # PR_SET_NAME\nlibc.prctl(1, 0, 0, 0, 0)  # "
            f"PR_SET_PDEATHSIG: none\n"
            "for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n    signal.signal(sig, signal.SIG_IGN)\n"
            f"{_DISARM_BWRAP_INIT}"
            "threading.Thread(target=lambda: time.sleep(10 ** 6)).start()  # not a daemon: the process waits for it\n"
            "print('lingering', flush=True)",
        ], {"timeout": WALL}),
        # issue 25, containment 2: answers that overflow a float comparison
        "break the judge": ([
            "import sympy as sp\ns2 = sp.symbols('s2', positive=True)\nc_expr = sp.Float('1.5e308') * (1 + sp.I) + 0 * "
            "s2\nmeasured_radius, measured_gap_ratio, swap_error = 10 ** 400, complex(1.5e308, 1.5e308), -10 ** 400\n"
            "predicted_radius = lambda *a: complex(1.5e308, -1.5e308)\nswapped_spectrum = lambda A: [10 ** 400] * "
            "A.shape[-1]\nmy_centre = lambda A: complex(-1.5e308, 1.5e308)",
        ], {}),
        # issue 25, containment 3: fill every writable folder, memory file and shared memory segment
        "memory outside the limits": ([
            "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nblock, total = b'0' * (1 << 20), 0\n"
            "for path in ('/big', '/dev/big', '/dev/shm/big', '/run/big', '/var/tmp/big', '/tmp/big', '/tmp/big2'):\n"
            "    try:\n        with open(path, 'wb') as f:\n            while True:\n"
            "                f.write(block)\n                f.flush()\n                total += len(block)\n"
            "    except OSError as e:\n        print('fill', path, e.errno)\n"
            f"for name, nr, args in (('memfd_create', {NR['memfd_create']}, (b'x', 0)), ('shmget', {NR['shmget']}, (0, "
            f"1 << 30, 0o1600)),\n                       ('mq_open', {NR['mq_open']}, (b'q', 0o100, 0o600, 0))):\n"
            "    print(name, libc.syscall(nr, *args), ctypes.get_errno())\n"
            "try:\n    from multiprocessing import shared_memory\n    shared_memory.SharedMemory(create=True, size=1 "
            "<< 30)\n    total += 1 << 30\nexcept OSError as e:\n    print('shm_open', e)\nprint('MEMORY-WRITTEN', "
            "total)",
        ], {"limits": sandbox.Limits(wall=60, cpu=60, scratch=SCRATCH)}),
        # issue 25, containment 4: threads (and file descriptors) without limit
        "threads without limit": ([
            "import os, threading\nstop = threading.Event()\nthreads = files = 0\ntry:\n    while threads < 100000:\n"
            "        threading.Thread(target=stop.wait, daemon=True).start()\n        threads += 1\n"
            "except RuntimeError as e:\n    print('threads', e)\ntry:\n    while files < 100000:\n"
            "        os.open('/dev/null', os.O_RDONLY)\n        files += 1\nexcept OSError as e:\n    print('files', "
            "e)\nprint('THREADS-STARTED', threads, 'FILES-OPENED', files)\nstop.set()",
        ], {}),
        # issue 25, containment 5: kernel interfaces, sockets, a forged exit status and terminal escapes
        "weaker walls": ([
            "import ctypes, errno, os, socket, sys\nlibc = ctypes.CDLL(None, use_errno=True)\nbuf = "
            "ctypes.create_string_buffer(256)\n"
            f"for name, nr, args in {_kernel_calls()!r}:\n"
            "    args = [buf if a == 'buf' else a for a in args]\n    result = libc.syscall(nr, *args)\n"
            "    print('ALLOWED' if result >= 0 else 'refused', name, errno.errorcode.get(ctypes.get_errno()))\n"
            "for family in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET):\n    try:\n"
            "        socket.socket(family, socket.SOCK_RAW if family == socket.AF_PACKET else socket.SOCK_DGRAM)\n"
            "        print('ALLOWED socket', family)\n    except OSError as e:\n        print('refused socket', "
            "family, e.errno)",
            "def predicted_radius(T, s2):\n    raise RuntimeError('\\x1b[2J\\x1b[1;1Halice: 12 / 12\\r\\u202e')",
            'grader.check("q1b")',
            "import os, sys\nsys.stdout.write('\\x1b]0;owned\\x07\\x1b[2J\\x1b[Hbob: 12 / "
            "12\\x1b[8m\\r\\u202e')\nsys.stdout.flush()\nos._exit(152)  # 128 + SIGXCPU",
        ], {}),
        # issue 25, containment 5: the per-cell limit (a soft limit) is reported, and follows --cell-timeout
        "slow cell": (["import time\ntime.sleep(3)"], {"cell_timeout": 1}),
    }


NR = seccomp.ARCHES[platform.machine()][1] if seccomp.supported() else {}


def _kernel_calls() -> list:
    """(name, number, arguments) of system calls the filter refuses, each one that would succeed
    without it (``"buf"``: a zeroed buffer)."""
    wanted = {"unshare": (0x10000000,), "setns": (0, 0), "io_uring_setup": (1, "buf"), "bpf": (0, "buf", 128),
              "userfaultfd": (0,), "perf_event_open": ("buf", 0, -1, -1, 0), "keyctl": (0, -3, 0),
              "add_key": (b"user", b"k", b"v", 1, -3), "ptrace": (0, 0, 0, 0), "personality": (0x0040000,),
              "mount": (b"none", b"/tmp", b"tmpfs", 0, 0), "memfd_create": (b"x", 0), "inotify_init1": (0,),
              "fanotify_init": (0, 0), "kcmp": (1, 1, 0, 0, 0), "process_vm_readv": (1, "buf", 1, "buf", 1, 0)}
    return [(name, NR[name], args) for name, args in wanted.items() if name in NR]


class _Payload:
    """Unpickling this creates a file: proof that the grader unpickled the submission's data."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _notebook(cells, path) -> pathlib.Path:
    checks = [f'grader.check("{q}")' for q in grading.question_points(MASTER)] + ["grader.check_all()"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in list(cells) + checks])
    nb.nbformat_minor = 4  # as the student notebooks: no cell ids
    for cell in nb.cells:
        cell.pop("id", None)
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def built(built_assignments):
    """Assignment 1 built by ``assign`` (once per test run, conftest.py): the student notebook, the
    autograder folder (with its zips)."""
    return built_assignments["a1_spectral_gap"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory, working_sandbox, built):
    tmp = tmp_path_factory.mktemp("attacks")
    outside = tmp / "outside"
    outside.mkdir()
    attacks = _attacks(built["autograder"], outside)
    before = _fingerprint(grading.PACKAGE_DIR, built["autograder"], MASTER.parent)
    os.environ["RCTEACH_GRADER_TOKEN"] = SECRET
    try:
        with ThreadPoolExecutor(2) as pool:
            blank = pool.submit(grading.grade, built["student"], built["autograder"], timeout=120)
            jobs = {name: pool.submit(grading.grade, _notebook(cells, tmp / f"{i}.ipynb"), built["autograder"],
                                      **{"timeout": 60, **kwargs})
                    for i, (name, (cells, kwargs)) in enumerate(attacks.items())}
            results = {name: job.result() for name, job in jobs.items()}
            blank = blank.result()
    finally:
        del os.environ["RCTEACH_GRADER_TOKEN"]
    after = _fingerprint(grading.PACKAGE_DIR, built["autograder"], MASTER.parent)
    print({name: round(r["seconds"], 1) for name, r in results.items()}, "blank", round(blank["seconds"], 1))
    return {"results": results, "blank": blank, "before": before, "after": after, "outside": outside,
            "autograder": built["autograder"]}


ATTACKS = list(_attacks(pathlib.Path("/x"), pathlib.Path("/y")))


@pytest.mark.parametrize("attack", ATTACKS)
def test_attack_scores_like_a_blank_submission(graded, attack):
    r = graded["results"][attack]
    assert graded["blank"]["score"] == 0 and graded["blank"]["possible"] == 12
    assert r["score"] == graded["blank"]["score"] and r["possible"] == 12, [(t["name"], t["feedback"])
                                                                            for t in r["tests"]]
    assert all(0 <= t["score"] <= t["max_score"] for t in r["tests"])
    text = json.dumps(r)
    assert SECRET not in text  # the grader's environment never reaches the sandbox
    # nor the key / hidden tests
    assert "def asks(rng, ask)" not in text and "rcteach.theory.bulk_radius(T_, s2_)" not in text


def _left_running() -> list[str]:
    """Processes of this machine started by a submission (its marker in the command line or name)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            text = pathlib.Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
            name = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if MARK in text or name == COMM:
            found.append(f"{pid} {name} {text[:100]}")
    return found


def test_nothing_outside_the_sandbox_changed(graded):
    assert graded["after"] == graded["before"]
    assert not any(graded["outside"].iterdir())
    home, prefix = pathlib.Path(os.path.expanduser("~")), pathlib.Path(sys.prefix)
    assert not (home / MARK).exists() and not (prefix / f"{MARK}.pth").exists()
    assert _left_running() == []  # no process started by a submission is left, whatever it did


def test_limits_are_reported(graded):
    r = graded["results"]
    assert any("wall-clock" in hit for hit in r["disarm the time limit"]["limits_hit"])
    assert r["disarm the time limit"]["seconds"] < WALL + 10
    assert any("output limit" in hit for hit in r["huge output"]["limits_hit"])
    assert len(r["huge output"]["output"]) <= sandbox.Limits().output
    assert "Resource temporarily unavailable" in r["fork bomb"]["output"]
    assert "MemoryError" in r["memory hog"]["output"]
    assert "cell 1 was stopped at the per-cell time limit of 1 s" in r["slow cell"]["notes"]


def test_a_submission_cannot_outlive_its_grading(graded):
    r = graded["results"]["outlive the grading"]
    assert "lingering" in r["output"]
    assert r["limits_hit"] == [f"wall-clock limit ({WALL} s)"] and r["seconds"] < WALL + 10
    assert _left_running() == []


def test_a_submission_dies_with_a_killed_grader(graded, built, tmp_path):
    """The grader itself killed (SIGKILL) while a submission that cleared its parent-death signal
    runs: walls.py, the sandbox's supervisor outside it, ends the submission."""
    notebook = _notebook(_attacks(built["autograder"], tmp_path)["outlive the grading"][0], tmp_path / "linger.ipynb")
    grader = subprocess.Popen([sys.executable, "-c", "import sys\nfrom rcteach.tools import grading\n"
                               "grading.grade(sys.argv[1], sys.argv[2], timeout=120)", str(notebook),
                               str(built["autograder"])],
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 100
        while not _left_running() and time.monotonic() < deadline and grader.poll() is None:
            time.sleep(0.2)
        assert _left_running(), "the submission never started"
    finally:
        grader.kill()
        grader.wait()
    deadline = time.monotonic() + 10
    while _left_running() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _left_running()
    for entry in left:  # do not leave it running if the test fails
        os.kill(int(entry.split()[0]), 9)
    assert left == []


def test_answers_that_break_a_comparison_are_mismatches(graded):
    r = graded["results"]["break the judge"]
    feedback = {t["name"]: t["feedback"] for t in r["tests"]}
    assert r["error"] is None and all(feedback[q] for q in feedback)
    assert any("expected" in line for line in feedback["q1c"])


def test_memory_backed_folders_are_bounded(graded):
    r = graded["results"]["memory outside the limits"]
    written = int(re.search(r"MEMORY-WRITTEN (\d+)", r["output"]).group(1))
    assert 0 < written <= SCRATCH, r["output"]  # only the sized /tmp took data
    for call in ("memfd_create", "shmget", "mq_open"):
        assert re.search(rf"^{call} -1 {seccomp.ENOSYS}$", r["output"], re.M), r["output"]


def test_threads_and_files_are_bounded(graded):
    r = graded["results"]["threads without limit"]
    threads, files = map(int, re.search(r"THREADS-STARTED (\d+) FILES-OPENED (\d+)", r["output"]).groups())
    assert 0 < threads < sandbox.Limits().tasks and 0 < files < sandbox.Limits().files


def test_kernel_interfaces_are_refused_and_exit_statuses_are_not_limits(graded):
    r = graded["results"]["weaker walls"]
    lines = r["output"].splitlines()
    assert not any(line.startswith("ALLOWED") for line in lines), r["output"]
    for name, _, _ in _kernel_calls():  # refused by the filter, with its errno, not by the kernel
        assert f"refused {name} {errno.errorcode[seccomp.REFUSED.get(name, seccomp.EPERM)]}" in lines, r["output"]
    assert r["limits_hit"] == [] and r["error"].startswith("exit status 152")  # not "CPU time limit"
    shown = [r["output"], r["error"], *r["notes"], *(line for t in r["tests"] for line in t["feedback"])]
    assert not any(CONTROL.search(text) for text in shown), shown  # nothing a terminal would act on
    assert "\\x1b[2J" in r["error"] and any("\\x1b[2J" in line for line in shown[3:])  # shown escaped


def test_decode_accepts_only_plain_data():
    arr = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(answers.decode(answers.encode(arr)), arr)
    mixed = (True, 1, 2.5, float("inf"), 1j)
    assert answers.decode(answers.encode({"a": mixed})) == {"a": list(mixed)}
    obj = io.BytesIO()
    np.save(obj, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    for bad in ({"$": "ndarray", "v": base64.b64encode(obj.getvalue()).decode()},
                {"$": "ndarray", "v": base64.b64encode(pickle.dumps([1])).decode()},
                {"$": "pickle", "v": ""}, {"x": 1}, {"$": "dict", "v": {}, "extra": 1}):
        with pytest.raises(answers.DecodeError):
            answers.decode(bad)
    with pytest.raises(answers.DecodeError):
        answers.decode(json.loads("[" * 40 + "]" * 40))


def test_read_answers_ignores_malformed_records():
    asks = {"q1": [answers.ASK.value("x")]}
    stream = b"\n".join([b"not json", b'{"question": "q9", "answers": [{"ok": 1}]}',
                         b'{"question": "q1", "answers": [{"ok": 1}, {"ok": 2}]}',
                         b'{"question": "q1", "answers": [{"ok": 3.0}]}',
                         b'{"question": "q1", "answers": [{"bad": 1}]}'])
    assert verdict.read_answers(stream, asks) == {"q1": [3.0]}


def test_same_compares_kind_shape_and_value():
    assert verdict.same(1.0, 1.0 + 1e-12) and not verdict.same(1.0, 1.1)
    assert not verdict.same(True, 1) and not verdict.same(1, True) and verdict.same(3.0, 3)
    assert not verdict.same(float("nan"), float("nan")) and verdict.same(float("inf"), float("inf"))
    assert not verdict.same(np.zeros(3), np.zeros(4)) and not verdict.same(np.zeros(3, dtype=bool), np.zeros(3))
    assert not verdict.same(verdict.Error("x"), 1.0) and not verdict.same([1.0], [1.0, 2.0])
    assert verdict.mark("q", 2, [answers.ASK.value("x")], None, [1.0]).score == 0


def test_grade_refuses_without_a_sandbox(graded, monkeypatch, tmp_path):
    student = tmp_path / "s.ipynb"
    _notebook(["x = 1"], student)
    monkeypatch.setattr(sandbox, "available", lambda backend="bwrap": f"{backend}: not here")
    with pytest.raises(sandbox.SandboxUnavailable, match="--unsafe-no-sandbox"):
        grading.grade(student, graded["autograder"])
    from rcteach.tools.cli import main

    assert main(["grade", str(student), "-a", str(graded["autograder"])]) == 2
    r = grading.grade(student, graded["autograder"], unsafe_no_sandbox=True, timeout=60)
    assert r["score"] == 0 and r["possible"] == 12


def test_sandbox_probe_names_a_missing_bwrap(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "bwrap" in sandbox.available.__wrapped__()


def test_cli_grades_a_folder_into_a_csv(graded, tmp_path, capsys):
    """A submission that breaks the comparison is graded (0) like the others, and the class goes on."""
    import csv

    from rcteach.tools.cli import main

    cells = {"alice": _attacks(graded["autograder"], graded["outside"])["break the judge"][0], "bob": ["x = 1"]}
    for student, source in cells.items():
        (tmp_path / "class" / student).mkdir(parents=True)
        _notebook(source, tmp_path / "class" / student / "a1_spectral_gap.ipynb")
    out = tmp_path / "results"
    assert main(["grade", str(tmp_path / "class"), "-a", str(graded["autograder"]), "--timeout", "60", "-o",
                 str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"{tmp_path / 'class' / s / 'a1_spectral_gap.ipynb'}: 0 / 12" for s in ("alice", "bob")]
    with open(out / "scores.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["student"], r["notebook"].split("/")[-2]) for r in rows] == [("alice", "alice"), ("bob", "bob")]
    assert rows[0]["possible"] == "12" and {"q1a", "q3", "notes", "seed"} <= set(rows[0])
    assert sorted(p.name for p in (out / "results").glob("*.json")) == ["alice.json", "bob.json"]
    assert sorted(p.name for p in (out / "feedback").glob("*.md")) == ["alice.md", "bob.md"]


def test_links_to_the_solutions_score_nothing(graded, tmp_path, capsys):
    """A symbolic or hard link in the submissions folder to the solutions notebook (or the key) is
    never graded as a submission: collection takes regular files inside the folder, and the grader
    refuses a file that is one of the autograder's."""
    import csv

    from rcteach.tools.cli import main

    solutions = graded["autograder"] / "a1_spectral_gap.ipynb"
    for student in ("mallory", "trudy", "carol"):
        (tmp_path / "class" / student).mkdir(parents=True)
    (tmp_path / "class" / "mallory" / "a1_spectral_gap.ipynb").symlink_to(solutions)
    os.link(solutions, tmp_path / "class" / "trudy" / "a1_spectral_gap.ipynb")
    _notebook(["x = 1"], tmp_path / "class" / "carol" / "a1_spectral_gap.ipynb")
    out = tmp_path / "results"
    main(["grade", str(tmp_path / "class"), "-a", str(graded["autograder"]), "--timeout", "60", "-o", str(out)])
    with open(out / "scores.csv") as f:
        scores = {r["notebook"].split("/")[-2]: float(r["score"]) for r in csv.DictReader(f)}
    assert scores.get("carol") == 0 and scores.get("mallory", 0) == 0 and scores.get("trudy", 0) == 0, scores
    for link in ("mallory", "trudy"):
        with pytest.raises(ValueError, match="symbolic link|assignment's own files"):
            grading.grade(tmp_path / "class" / link / "a1_spectral_gap.ipynb", graded["autograder"], timeout=60)


def test_special_files_and_malformed_notebooks(graded, tmp_path):
    """A FIFO is refused at once (reading it would hang the grader); a file that is not a notebook of
    format 4 or 3 is refused with the reason (a row with 0 in a class); a format-3 notebook is run."""
    fifo = tmp_path / "fifo.ipynb"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="a FIFO"):
        grading.grade(fifo, graded["autograder"], timeout=60)
    for name, content in {"dict cells": {"nbformat": 4, "cells": {"0": {"cell_type": "code"}}},
                          "version 5": {"nbformat": 5, "cells": []}, "not an object": [1, 2]}.items():
        path = tmp_path / f"{name}.ipynb"
        path.write_text(json.dumps(content))
        with pytest.raises(ValueError, match="not a notebook"):
            grading.grade(path, graded["autograder"], timeout=60)
    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [
        {"cell_type": "markdown", "source": "# old"},
        {"cell_type": "code", "input": ["print('RAN', ", "'FORMAT 3')"]}]}]}
    (tmp_path / "v3.ipynb").write_text(json.dumps(v3))
    r = grading.grade(tmp_path / "v3.ipynb", graded["autograder"], timeout=60)
    assert "RAN FORMAT 3" in r["output"] and r["error"] is None and r["score"] == 0


def test_the_per_cell_limit_follows_the_timeout(graded, tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(sandbox, "run", lambda argv, **kw: seen.append(argv) or sandbox.Outcome(b"", "", 0, [], 0.0))
    _notebook(["x = 1"], tmp_path / "s.ipynb")
    for kwargs, cell_seconds in (({"timeout": 600}, 600), ({"timeout": 600, "cell_timeout": 65}, 65)):
        grading.grade(tmp_path / "s.ipynb", graded["autograder"], **kwargs)
        assert float(seen[-1][-1]) == cell_seconds


def test_grading_from_inside_a_submissions_folder_imports_nothing_from_it(tmp_path):
    for module in ("csv", "json", "secrets", "zipfile", "yaml"):
        (tmp_path / f"{module}.py").write_text(f"open({str(tmp_path / ('IMPORTED-' + module))!r}, 'w')\n")
    proc = subprocess.run([sys.executable, "-m", "rcteach", "grade", "--help"], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.glob("IMPORTED-*"))


def test_sandbox_sees_kernel_knobs_read_only_and_no_grader_files(working_sandbox):
    code = ("import os\nfor path in ('/proc/sys/kernel/hostname', '/proc/sysrq-trigger'):\n    try:\n"
            "        os.open(path, os.O_WRONLY)\n        print('writable', path)\n    except OSError as e:\n"
            "        print('refused', path, e.errno)\n"
            f"print('visible' if os.path.exists({str(MASTER)!r}) else 'hidden')")
    out = sandbox.run([sys.executable, "-c", code], limits=sandbox.Limits(wall=30))
    assert "writable" not in out.output and out.output.count("refused") == 2 and "hidden" in out.output, out.output


# --- The container backend, in Gradescope's layout -------------------------------------------------------------------

GRADESCOPE_TIMEOUT = 120


def _like_a_container(paths) -> str:
    """Bash lines, for a private mount namespace as root, that make this machine look like an
    autograder container: each top-level folder holding one of ``paths`` (the Python installation,
    the environment, the package, the test's folder), the home folders and ``/tmp`` are covered by
    a tmpfs holding only those paths, so the sandbox user finds what a container has (rcteach
    installed, not its repository: no master notebooks, no other checkouts, no one else's files); so is
    every other top-level folder that is not the system's own."""
    targets = [pathlib.Path(os.path.realpath(p)) for p in paths]
    system = {"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "run", "sbin", "sys", "usr",
              "var"}
    others = {p for p in pathlib.Path("/").iterdir() if p.name not in system}  # checkouts, data, /opt, /srv ...
    tops = {pathlib.Path("/", t.parts[1]) for t in targets} | {pathlib.Path(p) for p in ("/root", "/home", "/tmp")}
    tops |= others
    lines = ["set -e"]
    for top in sorted(tops):
        if top.is_symlink() or not top.is_dir() or top == pathlib.Path("/usr"):
            continue
        mode = "1777" if top == pathlib.Path("/tmp") else "0755"
        lines += ["shim=$(mktemp -d)", f'mount -t tmpfs -o mode={mode} rcteach-shim "$shim"']
        for target in targets:
            if top in target.parents:
                inside = target.relative_to(top)
                lines += [f'mkdir -p "$shim/{inside}"', f'mount --rbind "{target}" "$shim/{inside}"']
        lines += [f'mount --rbind "$shim" "{top}"']
    return "\n".join(lines)


def _tamper_and_linger(root: pathlib.Path) -> list[str]:
    """A submission for the container backend: read the key and the solutions (and say so in an
    answer's error), write into the results and the source, leave a file in /tmp, then, once the
    harness is done, close its pipes and stay (signals ignored, parent-death signal cleared)."""
    secrets = [root / "source" / "autograder" / name for name in ("key.py", "a1_spectral_gap.ipynb")]
    writes = [root / "results" / "results.json", root / "source" / "run_autograder"]
    return [
        "import ctypes, glob, os, signal, threading, time\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"libc.prctl(15, {COMM!r}.encode(), 0, 0, 0)\nlibc.prctl(1, 0, 0, 0, 0)\n"
        "for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n    signal.signal(sig, signal.SIG_IGN)\n"
        f"found = {[str(p) for p in secrets]!r} + [p for top in ('/work', '/root', '/home', '/autograder', '/tmp')\n"
        "                                         for depth in range(5)\n"  # not '/**': a venv there takes minutes
        "                                         for p in glob.glob(top + '/*' * depth + '/key.py')]\n"
        "leaked = []\nfor path in found:\n    try:\n        leaked.append(f'READ {path}: {open(path).read(80)!r}')\n"
        "    except OSError:\n        pass\n"
        f"for path in {[str(p) for p in writes]!r}:\n    try:\n        open(path, 'w').write('PWNED')\n"
        "        leaked.append(f'WROTE {path}')\n    except OSError:\n        pass\n"
        f"open({str(pathlib.Path('/tmp') / COMM)!r}, 'w').write('left behind')  # world-writable: allowed, swept "
        f"after\n"
        "def predicted_radius(T, s2):\n    raise RuntimeError(' | '.join(leaked) or 'nothing leaked')\n"
        "def linger():\n    threading.main_thread().join()  # the harness has returned: all its answers are out\n"
        "    for fd in range(1024):\n        try:\n            os.close(fd)\n"
        "        except OSError:\n            pass\n    while True:\n        time.sleep(1)\n"
        "threading.Thread(target=linger).start()",
    ]


@pytest.fixture(scope="module")
def gradescope(built, tmp_path_factory):
    """Four submissions (the solutions, the blank student notebook, two attacks) graded by the
    Gradescope autograder's ``run_autograder`` in Gradescope's directory layout, with the container
    backend, each in its own private mount namespace that looks like a fresh container."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        if os.environ.get("RCTEACH_REQUIRE_SANDBOX") == "1" and os.geteuid() == 0:
            pytest.fail("RCTEACH_REQUIRE_SANDBOX=1 but `unshare` (util-linux) is missing")
        pytest.skip("the container backend runs as root (and the test needs util-linux's unshare)")
    tmp = tmp_path_factory.mktemp("gradescope")
    archive = tmp / "autograder.zip"
    grading.gradescope.autograder_zip(built["autograder"], archive, timeout=GRADESCOPE_TIMEOUT)
    shim = _like_a_container([sys.base_prefix, sys.prefix, grading.PACKAGE_DIR, tmp])
    roots = {name: tmp / name for name in ("full", "blank", "walls", "tamper")}
    notebooks = {"full": built["autograder"] / "a1_spectral_gap.ipynb", "blank": built["student"]}
    for name, root in roots.items():
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(root / "source")
        (root / "submission").mkdir()
        (root / "results").mkdir()
        target = root / "submission" / "a1_spectral_gap.ipynb"
        if name in notebooks:
            shutil.copyfile(notebooks[name], target)
        else:
            cells = _attacks(built["autograder"],
                             tmp)["weaker walls"][0] if name == "walls" else _tamper_and_linger(root)
            _notebook(cells, target)
    before = {name: _fingerprint(root / "source") for name, root in roots.items()}

    def run(root):
        env = {**os.environ, "RCTEACH_AUTOGRADER_ROOT": str(root), "RCTEACH_PYTHON": sys.executable,
               "RCTEACH_BACKEND": "container"}  # what "auto" picks in Gradescope's containers (no user namespaces)
        left = "find /tmp /var/tmp /dev/shm -maxdepth 1 -user nobody -printf 'LEFT %p\\n'"  # after the run
        proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c",
                               f'{shim}\nbash "$1"\n{left}', "_", str(root / "source" / "run_autograder")],
                              env=env, capture_output=True, text=True, timeout=3 * GRADESCOPE_TIMEOUT)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads((root / "results" / "results.json").read_text()), proc.stdout.split("LEFT ")[1:]

    with ThreadPoolExecutor(2) as pool:
        ran = dict(zip(roots, pool.map(run, roots.values())))
    return {"results": {name: r for name, (r, _) in ran.items()},
            "left": {name: left for name, (_, left) in ran.items()},
            "roots": roots, "before": before}


def test_assign_writes_zips_that_install_torch_and_rcteach(built):
    folder = built["autograder"]
    with zipfile.ZipFile(folder / "a1_spectral_gap-gradescope.zip") as zf:
        names = set(zf.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        requirements, setup = zf.read("requirements.txt").decode(), zf.read("setup.sh").decode()
        run = zf.read("run_autograder").decode()
    assert {"setup.sh", "run_autograder", "requirements.txt", "autograder/key.py", "autograder/questions.json",
            "autograder/a1_spectral_gap.ipynb", "rcteach-src/pyproject.toml", "rcteach-src/README.md",
            "rcteach-src/rcteach/__init__.py", "rcteach-src/rcteach/tools/grading/walls.py"} <= names
    assert not any(n.startswith(("rcteach-src/assignments", "rcteach-src/tests")) or "__pycache__" in n for n in names)
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert re.search(r"^torch==\d", requirements, re.M) and re.search(r"^numpy==\d", requirements, re.M)
    assert "download.pytorch.org/whl/cpu" in setup and "/autograder/source/rcteach-src" in setup
    assert "gradescope-run" in run and "chmod -R go-rwx" in run
    otter = next(p for p in folder.glob("*.zip") if "gradescope" not in p.name)
    with zipfile.ZipFile(otter) as zf:
        environment = zf.read("environment.yml").decode()
        assert "files/rcteach-src/pyproject.toml" in zf.namelist()
    assert re.search(r"- torch==\d", environment) and "/autograder/source/files/rcteach-src" in environment


def test_gradescope_results_follow_its_schema(gradescope):
    for name, results in gradescope["results"].items():
        assert set(results) >= {"score", "output", "tests", "visibility", "execution_time"}, name
        assert [t["name"] for t in results["tests"]] == ["q1a", "q1b", "q1c", "q2", "q3"]
        for test in results["tests"]:
            assert set(test) == {"name", "score", "max_score", "status", "output", "visibility"}
            assert 0 <= test["score"] <= test["max_score"] and isinstance(test["output"], str)


def test_gradescope_scores_with_the_container_backend(gradescope):
    scores = {name: r["score"] for name, r in gradescope["results"].items()}
    assert scores == {"full": 12, "blank": 0, "walls": 0, "tamper": 0}, {n: r["output"]
                                                                         for n, r in gradescope["results"].items()}


def test_gradescope_attacks_change_nothing_and_leave_nothing(gradescope):
    tamper = json.dumps(gradescope["results"]["tamper"])
    assert "nothing leaked" in tamper and "READ" not in tamper and "WROTE" not in tamper
    assert "still running after it closed its output" in tamper
    for name, root in gradescope["roots"].items():
        assert _fingerprint(root / "source") == gradescope["before"][name], name
        assert "PWNED" not in (root / "results" / "results.json").read_text()
    assert gradescope["left"] == {name: [] for name in gradescope["roots"]}  # the /tmp file: swept after the run
    assert _left_running() == []
    walls = gradescope["results"]["walls"]
    assert "exit status 152" in walls["output"] and "CPU time" not in walls["output"]
    assert not CONTROL.search(json.dumps(walls, ensure_ascii=False).replace("\\n", ""))


def test_an_older_bwrap_gets_an_on_disk_tmp(working_sandbox, monkeypatch):
    """bubblewrap 0.6 (Ubuntu 22.04) has neither --size nor --disable-userns: /tmp is then a
    private on-disk folder that vanishes, and the filter alone refuses user namespaces."""
    options = sandbox._bwrap_options(sandbox._bwrap()) - {"--size", "--disable-userns"}
    monkeypatch.setattr(sandbox, "_bwrap_options", lambda bwrap: options)
    code = ("import ctypes, os\nopen('/tmp/x', 'w').write('x')\nprint('tmp', os.listdir('/tmp'))\n"
            f"print('unshare', ctypes.CDLL(None, use_errno=True).syscall({NR.get('unshare', -1)}, 0x10000000), "
            f"ctypes.get_errno())\n"
            "os.write({answers_fd}, b'ok')")
    out = sandbox.run([sys.executable, "-c", code], limits=sandbox.Limits(wall=30))
    # /tmp holds x, and the mount points of the Python and the package when they live under /tmp (a CI clone)
    mounts = {pathlib.Path(os.path.realpath(p)) for p in (sys.prefix, sys.base_prefix, sandbox.__file__)}
    allowed = {"x"} | {m.parts[2] for m in mounts if m.parts[:2] == ("/", "tmp") and len(m.parts) > 2}
    listed = ast.literal_eval(out.output.splitlines()[0].removeprefix("tmp "))
    assert out.answers == b"ok" and "x" in listed and set(listed) <= allowed, out.output
    assert "unshare -1 1" in out.output, out.output
