"""Student copies of chapters (rcteach.tools.student) and the collapsed solutions of every chapter."""

from __future__ import annotations

import pathlib
import re

import jupytext
import nbformat
import pytest

from rcteach.tools import student
from rcteach.tools.cli import main

BOOK = pathlib.Path(__file__).resolve().parent.parent / "book"
CHAPTERS = sorted(p for p in BOOK.glob("[0-9]*.md"))


def _solution_admonitions(text):
    """(title line, following line) of every admonition titled Solution..."""
    lines = text.split("\n")
    return [(l, lines[i + 1] if i + 1 < len(lines) else "") for i, l in enumerate(lines)
            if student._OPEN.match(l) and student._OPEN.match(l).group("title").lower().startswith("solution")]


#: The one format of an exercise's solution: this dropdown, then its code cell (SOLUTION_CELL).
SOLUTION_DROPDOWN = re.compile(r":::\{admonition\} Solution to exercise (\d+)\n:class: dropdown\n(?:.+\n)+:::\Z")
SOLUTION_CELL = {"tags": ["hide-input", "solution"], "jupyter": {"source_hidden": True}}


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_solutions_have_one_format_and_are_collapsed(chapter):
    """After the list of exercises, each exercise n in turn has a dropdown "Solution to exercise n"
    (the end of a Markdown cell) and then one solution code cell, collapsed alike in the HTML book
    and in JupyterLab: its code hidden (``hide-input``; ``source_hidden``), and its output, which
    JupyterLab shows when the cell runs (``outputs_hidden`` would not survive), under one closed
    ``<details>`` by ``rcteach.solution()``, the cell's first line."""
    cells = jupytext.read(chapter).cells
    start = next((i for i, c in enumerate(cells) if c.cell_type == "markdown" and "## Exercises" in c.source), None)
    if start is None:
        pytest.skip("no exercises")
    listed = cells[start].source.split("## Exercises")[1].split(":::{admonition}")[0]
    n_exercises = len(re.findall(r"^\d+\. ", listed, re.M))
    tail = cells[start:]
    assert len(tail) == 2 * n_exercises, f"{n_exercises} exercises, {len(tail)} cells from the exercises on"
    for n, (prose, code) in enumerate(zip(tail[::2], tail[1::2]), start=1):
        dropdown = ":::{admonition}" + prose.source.rsplit(":::{admonition}", 1)[-1]
        match = SOLUTION_DROPDOWN.match(dropdown)
        assert match and int(match.group(1)) == n, f"solution {n}: {dropdown[:80]!r}"
        assert n == 1 or prose.source == dropdown, f"solution {n}: more than its dropdown in its cell"
        assert code.cell_type == "code" and dict(code.metadata) == SOLUTION_CELL, (n, code.metadata)
        assert code.source.startswith("rcteach.solution()\n"), f"solution {n}: {code.source[:60]!r}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_student_copy_of_every_chapter(chapter, tmp_path):
    out = student.student_copy(chapter, tmp_path)
    assert out == tmp_path / chapter.name
    copy_text = out.read_text()
    assert not _solution_admonitions(copy_text)
    original, copied = jupytext.read(chapter), jupytext.read(out)
    assert not any(student.is_solution_cell(c) for c in copied.cells)
    kept = [c.source for c in original.cells if c.cell_type == "code" and not student.is_solution_cell(c)]
    assert [c.source for c in copied.cells if c.cell_type == "code"] == kept
    assert copied.metadata.get("kernelspec", {}).get("name") == "python3"
    if "## Exercises" in chapter.read_text():
        assert "## Exercises" in copy_text


def test_strip_solutions_on_a_small_notebook():
    md = (
        "# Exercises\n\n1. Prove it.\n\n"
        ":::{admonition} Solution to exercise 1\n:class: dropdown\nBecause.\n\n"
        "::::{note}\nnested\n::::\n:::\n\n"
        ":::{admonition} Caveat\n:class: warning\nKeep me.\n:::\n\n"
        "```{admonition} Solution\n:class: dropdown\nbackticks\n```\nafter"
    )
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(md),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("answer = 42", metadata={"tags": ["hide-input", "solution"]}),
        nbformat.v4.new_markdown_cell(":::{admonition} Solution\n:class: dropdown\nonly this\n:::"),
        nbformat.v4.new_code_cell("shown", metadata={"tags": ["hide-input"]}),
    ])
    out = student.strip_solutions(nb)
    assert [c.source for c in out.cells if c.cell_type == "code"] == ["x = 1", "shown"]
    text = out.cells[0].source
    assert "Prove it." in text and "Keep me." in text and text.endswith("after")
    assert "Because" not in text and "nested" not in text and "backticks" not in text
    assert len(out.cells) == 3  # the markdown cell that held only a solution is gone
    assert len(nb.cells) == 5  # the input is not modified


def test_strip_solution_admonitions_errors():
    with pytest.raises(ValueError, match="unterminated"):
        student.strip_solution_admonitions(":::{admonition} Solution\nno end")


def test_student_copy_errors(tmp_path):
    with pytest.raises(ValueError, match="path"):
        student.student_copy(tmp_path / "missing.md", tmp_path)
    with pytest.raises(ValueError, match="to must be"):
        student.student_copy(CHAPTERS[0], tmp_path, to="pdf")
    with pytest.raises(ValueError, match="overwrite"):
        student.student_copy(CHAPTERS[0], CHAPTERS[0].parent)


def test_student_copy_cli_ipynb(tmp_path, capsys):
    chapter = BOOK / "03_centred_attention.md"
    assert main(["student-copy", str(chapter), "-o", str(tmp_path), "--to", "ipynb"]) == 0
    out = tmp_path / "03_centred_attention.ipynb"
    assert str(out) in capsys.readouterr().out
    nb = nbformat.read(out, as_version=4)
    nbformat.validate(nb)
    assert not any(student.is_solution_cell(c) for c in nb.cells)
    assert all(c.get("outputs", []) == [] for c in nb.cells if c.cell_type == "code")
