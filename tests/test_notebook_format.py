"""The chapters as notebooks: JupyterLab saves an untouched chapter unchanged, and code fits the page.

JupyterLab opens a chapter (``book/*.md``) through jupytext and, on save, writes the notebook back
as MyST with ``book/jupytext.toml``: after a run the notebook also holds outputs, execution counts,
the kernel's ``language_info`` and cell state.  None of that may reach the file (outputs are not
committed), and the header must already say what JupyterLab writes, so that ``git status`` stays
clean for a student who opens, runs and saves a chapter.
"""

from __future__ import annotations

import base64
import copy
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupytext.config import (JupytextConfiguration, find_jupytext_configuration_file,
                             load_jupytext_configuration_file)

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
CHAPTERS = sorted(BOOK.glob("*.md"))
CONFIG = load_jupytext_configuration_file(find_jupytext_configuration_file(str(BOOK)))
MAX_LINE = 88  # characters of a code line: what fits in the book's code boxes and on a printed page


def _as_jupyterlab_saves_it(notebook):
    """``notebook`` after a run in JupyterLab: the kernel's spec and language, outputs, cell state."""
    spec = KernelSpecManager().get_kernel_spec("python3")
    nb = copy.deepcopy(notebook)
    nb.metadata["kernelspec"] = {"display_name": spec.display_name, "language": spec.language, "name": "python3"}
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3", "version": "3.11.0",
                                    "codemirror_mode": {"name": "ipython", "version": 3}}
    for count, cell in enumerate((c for c in nb.cells if c.cell_type == "code"), start=1):
        cell.execution_count = count
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
        cell.metadata["scrolled"] = True
        cell.metadata["execution"] = {"iopub.status.idle": "2026-01-01T00:00:00.000000Z"}
    return nb


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_saving_an_untouched_chapter_leaves_it_unchanged(chapter):
    text = chapter.read_text(encoding="utf-8")
    notebook = jupytext.reads(text, fmt="md:myst")
    saved = jupytext.writes(_as_jupyterlab_saves_it(notebook), fmt="md:myst", config=CONFIG)
    assert saved == text, "\n".join(
        f"{chapter.name} line {i}: {a!r} -> {b!r}"
        for i, (a, b) in enumerate(zip(text.splitlines() + ["<end>"], saved.splitlines() + ["<end>"]), 1)
        if a != b)[:2000]


def test_the_project_config_drops_what_a_user_config_would_keep():
    """The round trip above can fail: a user-level config keeping all metadata (which the project
    file shadows) writes the kernel's language_info and the cell state into the chapter."""
    notebook = _as_jupyterlab_saves_it(jupytext.reads("```{code-cell} ipython3\nx = 1\n```\n", fmt="md:myst"))
    keep_all = JupytextConfiguration(notebook_metadata_filter="all", cell_metadata_filter="all")
    leaky = jupytext.writes(notebook, fmt="md:myst", config=keep_all)
    saved = jupytext.writes(notebook, fmt="md:myst", config=CONFIG)
    assert "language_info" in leaky and "scrolled" in leaky
    assert "language_info" not in saved and "scrolled" not in saved and "iopub" not in saved


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_code_lines_fit_the_page(chapter):
    """Every line of every code cell has at most MAX_LINE characters."""
    notebook = jupytext.read(chapter)
    long = [f"{chapter.name} code cell {i}: {len(line)} characters: {line[:60]}..."
            for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"
            for line in cell.source.splitlines() if len(line) > MAX_LINE]
    assert not long, "\n".join(long)


@pytest.mark.parametrize("path", sorted(p.relative_to(ROOT / "venv-config") for p in (ROOT / "venv-config").rglob("*")
                                        if p.is_file()), ids=str)
def test_the_venv_holds_the_project_settings(path):
    """``make setup`` copied venv-config/ into the venv (JupyterLab and the kernels read them there)."""
    installed = Path(sys.prefix) / path
    assert installed.exists(), f"{installed} is missing: run make setup"
    wanted = (ROOT / "venv-config" / path).read_bytes()
    assert installed.read_bytes() == wanted, f"{installed} is outdated: run make setup"


def test_kernels_draw_retina_figures():
    """The venv's kernel config: inline figures as PNG at twice the resolution they are shown at."""
    import nbclient

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(4, 3), dpi=100)\nax.plot([0, 1])")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbclient.NotebookClient(notebook, timeout=60).execute()
    (figure,) = [o for o in notebook.cells[0].outputs if "image/png" in o.get("data", {})]
    shown = figure.metadata["image/png"]["width"]
    png = base64.b64decode(figure.data["image/png"])
    width = int.from_bytes(png[16:20], "big")  # the IHDR chunk
    assert width // 2 == shown  # IPython's retina figures: shown at half the pixel width (odd widths round down)


def test_a_chapter_as_a_notebook_links_the_other_chapters_notebooks():
    """``rcteach notebooks`` and the book's download write ``NN_name.ipynb`` side by side: a link to
    ``NN_name.md`` there would be dead, so clean_notebook points it at ``NN_name.ipynb``."""
    from rcteach.tools.notebooks import clean_notebook

    chapter = BOOK / "02_spectral_gap.md"
    assert "](01_leading_term.md)" in chapter.read_text(encoding="utf-8")
    text = "".join(cell.source for cell in clean_notebook(chapter).cells if cell.cell_type == "markdown")
    assert "](01_leading_term.ipynb)" in text and ".md)" not in text and ".md#" not in text
