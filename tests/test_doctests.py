"""The examples in rcteach's docstrings run and print what they show (every module with a ``>>>`` line).

Each example may use ``rcteach`` and ``torch`` without importing them, as if after ``import rcteach, torch``.
"""

import doctest
import importlib
from pathlib import Path

import pytest
import torch

import rcteach

PACKAGE = Path(rcteach.__file__).parent
MODULES = sorted(
    ".".join(("rcteach", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
    for path in PACKAGE.rglob("*.py")
    if ">>> " in path.read_text(encoding="utf-8")
)


def test_the_central_functions_have_examples():
    assert len(MODULES) >= 6, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, extraglobs={"rcteach": rcteach, "torch": torch}) if t.examples]
    assert tests, f"{name} has a '>>> ' line but no doctest"
    for test in tests:
        runner.run(test)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, f"{failed} of {attempted} examples in {name} failed (output above)"
