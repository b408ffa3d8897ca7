"""Result tables that display as HTML tables in a notebook and as aligned text everywhere else."""

from __future__ import annotations

import html
from dataclasses import dataclass

__all__ = ["TextTable"]


@dataclass(frozen=True, repr=False)
class TextTable:
    """A table of strings: ``columns`` (the header) and ``rows`` (tuples of the same length).

    ``print(table)`` and ``str(table)`` give aligned plain text; a notebook shows the HTML of
    ``_repr_html_`` when the table is a cell's last expression.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""

    def __post_init__(self):
        object.__setattr__(self, "columns", tuple(map(str, self.columns)))
        object.__setattr__(self, "rows", tuple(tuple(map(str, row)) for row in self.rows))
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"every row must have {len(self.columns)} cells, got {row}")

    def __str__(self) -> str:
        lines = [self.columns, *self.rows]
        widths = [max(len(line[k]) for line in lines) for k in range(len(self.columns))]
        fmt = lambda line: "  ".join(cell.rjust(w) for cell, w in zip(line, widths)).rstrip()  # noqa: E731
        text = [fmt(self.columns), "  ".join("-" * w for w in widths), *map(fmt, self.rows)]
        return "\n".join(([self.caption] if self.caption else []) + text)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        cells = lambda tag, line: "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in line)  # noqa: E731
        caption = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        body = "".join(f"<tr>{cells('td', row)}</tr>" for row in self.rows)
        return f"<table>{caption}<thead><tr>{cells('th', self.columns)}</tr></thead><tbody>{body}</tbody></table>"
