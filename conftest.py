"""pytest configuration shared by the unit tests and the chapters.

The chapters are MyST-Markdown notebooks (``book/*.md`` with a jupytext header).  nbval collects
only ``.ipynb`` files, so this collector hands each chapter to nbval read through jupytext; run
``pytest --nbval-lax book`` to execute them.  Cells are tested with ``assert`` statements.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from unittest import mock

import jupytext
import nbformat
import pytest
import torch

BOOK = Path(__file__).parent / "book"


@pytest.fixture
def cpu_env(monkeypatch):
    """The default device pinned to the CPU (``RCTEACH_DEVICE=cpu``) for one test, whatever the machine has.

    A test module uses it for every test with ``pytestmark = pytest.mark.usefixtures("cpu_env")``.
    """
    from rcteach.device import DEVICE_ENV

    monkeypatch.setenv(DEVICE_ENV, "cpu")


class _JupytextFormat:
    """``nbformat`` as nbval sees it, except that ``read`` understands MyST notebooks."""

    def __getattr__(self, name):
        return getattr(nbformat, name)

    @staticmethod
    def read(path, as_version):
        if str(path).endswith(".md"):
            return jupytext.read(path, as_version=as_version)
        return nbformat.read(path, as_version)


def _shared_tmp(tmp_path_factory) -> Path:
    """A temporary folder every pytest-xdist worker of this run sees (the parent of each worker's base
    temporary folder), for what one worker makes under a file lock and the others reuse."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def built_book(tmp_path_factory):
    """The book built once per session (tests/_book.py): ``(the build's CompletedProcess, its HTML folder)``.

    The folder is shared by the xdist workers (:func:`_shared_tmp`); a file lock makes the first worker
    that asks build it while the others wait for it."""
    from filelock import FileLock

    from _book import build_book

    shared = _shared_tmp(tmp_path_factory)
    with FileLock(shared / "book.lock"):
        (shared / "book").mkdir(exist_ok=True)
        return build_book(shared / "book")


@pytest.fixture(scope="session")
def working_sandbox():
    """The grading tests' precondition: a bwrap sandbox that works on this machine.

    Where none does (bwrap missing, or AppArmor refusing unprivileged user namespaces, as on
    Ubuntu 24.04) the test is skipped with the probe's reason, unless ``RCTEACH_REQUIRE_SANDBOX=1``
    (set by ``.ci/run``): then it fails, so that CI never passes without the sandbox tests.
    """
    from rcteach.tools.grading import sandbox

    reason = sandbox.available()
    if reason is not None:
        if os.environ.get("RCTEACH_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"RCTEACH_REQUIRE_SANDBOX=1 but no sandbox works here: {reason}")
        pytest.skip(f"no working bwrap sandbox here: {reason}")


@pytest.fixture(scope="session")
def built_assignments(tmp_path_factory):
    """``{name: {"student": notebook, "autograder": folder}}``: the assignments of ``assignments/`` built
    by ``otter assign`` (without running their tests) once per test run and shared by the pytest-xdist
    workers, since a build costs about 9 s of CPU: the first worker to ask builds them under a file
    lock, the others wait and reuse them.  Needs otter-grader (the tests using it skip without)."""
    from concurrent.futures import ThreadPoolExecutor

    from filelock import FileLock

    from rcteach.tools import grading

    root = _shared_tmp(tmp_path_factory) / "built-assignments"
    masters = grading.masters()
    with FileLock(f"{root}.lock"):
        if not (root / ".complete").exists():
            shutil.rmtree(root, ignore_errors=True)
            with ThreadPoolExecutor(len(masters)) as pool:
                list(pool.map(lambda m: grading.assign(m, root, run_tests=False), masters))
            (root / ".complete").touch()
    return {m.parent.name: {"student": root / m.parent.name / "student" / m.name,
                            "autograder": root / m.parent.name / "autograder"} for m in masters}


def _is_chapter(path: Path) -> bool:
    if path.suffix != ".md" or BOOK not in path.parents:
        return False
    with open(path, encoding="utf-8") as f:
        head = f.read(400)
    return head.startswith("---") and "format_name: myst" in head and "kernelspec" in head


#: Kernel starts tried per chapter.  jupyter_client picks free TCP ports and the kernel binds them a
#: moment later, so a kernel started at the same moment by another process (the other pytest worker,
#: the book build, otter) can take one and this kernel dies at start (jupyter/jupyter_client#487).
KERNEL_START_ATTEMPTS = 3


def _retrying(start_new_kernel):
    """nbval's ``start_new_kernel``, tried again when the kernel dies at start (the port race above)."""
    from nbval import kernel

    def start(*args, **kwargs):
        for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
            try:
                return start_new_kernel(*args, **kwargs)
            except RuntimeError:  # "Kernel died before replying to kernel_info"
                if attempt == KERNEL_START_ATTEMPTS:
                    raise
                kernel.logger.warning("kernel died at start; starting another (attempt %d)", attempt + 1)

    return start


def pytest_collect_file(file_path, parent):
    if parent.config.option.nbval_lax and _is_chapter(file_path):
        from nbval.plugin import IPyNbFile

        class MystNotebook(IPyNbFile):
            """nbval's notebook collector over a MyST-Markdown chapter."""

            def collect(self):
                with mock.patch("nbval.plugin.nbformat", _JupytextFormat()):
                    yield from super().collect()

            def setup(self):
                from nbval import kernel

                with mock.patch.object(kernel, "start_new_kernel", _retrying(kernel.start_new_kernel)):
                    super().setup()

        return MystNotebook.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(config, items):
    # The book build is the longest single test (every chapter executed): its module goes first, so
    # that with ``-n 2 --dist loadscope`` one worker builds the book while the other runs the rest.
    # The browser tests of the built pages go last, each to the worker free first: it waits for the build
    # if it is not done (the ``built_book`` fixture) and runs them while the builder prints the PDF.
    items.sort(key=lambda item: (item.get_closest_marker("book") is None,
                                 item.get_closest_marker("book_pages") is not None))
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
