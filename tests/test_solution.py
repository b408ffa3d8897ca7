"""rcteach.solution(): in a kernel, everything a solution cell prints, returns or draws after the
call comes back as one closed ``<details>``; glued values, errors and the next cell are untouched."""

import nbclient
import nbformat

#: what myst_nb.glue("g", 3.5, display=False) displays (importing myst-nb in the kernel costs ~10 CPU s)
GLUE = ("IPython.display.display({'application/papermill.record/text/plain': '3.5'}, raw=True,"
        " metadata={'scrapbook': {'name': 'g', 'mime_prefix': 'application/papermill.record/'}})")
CELLS = [
    "import IPython.display\nimport rcteach",
    "rcteach.solution()\nprint('answer 42')\nfig, ax = rcteach.plotting.axes('t', 'x', 'y')\nax.plot([0, 1])\n"
    f"{GLUE}\n7",
    "print('visible')",
    "rcteach.solution()\nprint('before')\n1 / 0",
]


def test_a_solution_cell_shows_its_output_collapsed():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbclient.NotebookClient(notebook, timeout=120, allow_errors=True).execute()
    glued, answer = notebook.cells[1].outputs
    assert glued.metadata["scrapbook"]["name"] == "g"  # myst-nb's glue still finds it
    html = answer.data["text/html"]
    assert html.startswith('<details class="rcteach-solution"><summary>') and "<details open" not in html
    assert "<pre>answer 42\n</pre>" in html and "<pre>7</pre>" in html and html.count('<img src="data:image/png') == 1
    assert answer.data["text/plain"] == "answer 42\n"
    assert [o.text for o in notebook.cells[2].outputs] == ["visible\n"]  # the capture ended with its cell
    error, partial = notebook.cells[3].outputs
    assert error.ename == "ZeroDivisionError" and "<pre>before\n</pre>" in partial.data["text/html"]


def test_outside_ipython_it_does_nothing(capsys):
    import rcteach

    rcteach.solution()
    print("shown")
    assert capsys.readouterr().out == "shown\n"
