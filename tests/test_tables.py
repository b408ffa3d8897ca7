"""rcteach.tables.TextTable: HTML in a notebook, aligned text elsewhere."""

import pytest

from rcteach.tables import TextTable


def test_text_and_html():
    t = TextTable(("layer", "mu"), [(0, "1.5 (0.2)"), (32, "<1e-5")], caption="a & b")
    assert str(t).splitlines() == ["a & b", "layer         mu", "-----  ---------", "    0  1.5 (0.2)",
                                   "   32      <1e-5"]
    assert t._repr_html_() == ("<table><caption>a &amp; b</caption><thead><tr><th>layer</th><th>mu</th></tr></thead>"
                               "<tbody><tr><td>0</td><td>1.5 (0.2)</td></tr><tr><td>32</td><td>&lt;1e-5</td></tr>"
                               "</tbody></table>")


def test_ragged_rows_refused():
    with pytest.raises(ValueError, match="2 cells"):
        TextTable(("a", "b"), [("1",)])
