"""Result tables that read in any terminal, 80 columns too: key columns are never cut, the least
important columns are left out first (a note names them; ``--json`` has every field)."""

from __future__ import annotations

from dataclasses import dataclass

from rich import box
from rich.markup import escape
from rich.table import Table

from planner.cli.context import stdout


@dataclass
class Column:
    """A table column: its header, its cells as plain text, and how readily it is left out
    when the terminal is narrow (0: a key column, always shown; higher: left out first)."""

    header: str
    cells: list[str]
    drop: int = 0
    justify: str = "left"

    @property
    def natural(self) -> int:
        return max([len(self.header), *(len(c) for c in self.cells)])


def print_table(columns: list[Column], *, title: str | None = None) -> None:
    """Print a table whose key columns stay readable at any width: when the full table is wider
    than the terminal, it is drawn compactly and the least important columns are left out (a
    note says which; --json has everything); key columns are never cut, and the instance
    type keeps its full width."""
    width = stdout.width
    rows = len(columns[0].cells) if columns else 0
    if sum(c.natural + 3 for c in columns) + 1 <= width:
        table = Table(title=title)
        for c in columns:
            table.add_column(c.header, justify=c.justify)  # type: ignore[arg-type]
        chosen = columns
    else:
        chosen = list(columns)
        for c in sorted((c for c in columns if c.drop), key=lambda c: -c.drop):
            if sum(x.natural for x in chosen) + len(chosen) - 1 <= width:
                break
            chosen.remove(c)
        table = Table(
            title=title,
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            padding=0,
            collapse_padding=True,
        )
        for c in chosen:
            key = c.drop == 0
            table.add_column(
                c.header,
                justify=c.justify,  # type: ignore[arg-type]
                no_wrap=key and c.header != "option",
                min_width=min(c.natural, 40) if key and c.header != "option" else None,
                overflow="fold",
            )
    for i in range(rows):
        table.add_row(*(escape(c.cells[i]) for c in chosen))
    stdout.print(table)
    left_out = [c.header for c in columns if c not in chosen]
    if left_out:
        stdout.print(
            f"(narrow terminal: left out {', '.join(left_out)}; --json has every field)",
            markup=False,
            soft_wrap=False,
        )
