"""Result tables that read in any terminal, 80 columns too: key columns are never cut, the least
important columns are left out first (a note names them; ``--json`` has every field)."""

from __future__ import annotations

from dataclasses import dataclass

from rich import box
from rich.errors import MarkupError
from rich.markup import escape
from rich.table import Column as RichColumn
from rich.table import Table
from rich.text import Text

from planner.cli.context import stdout


@dataclass
class Column:
    """A table column: its header, its cells as plain text, and how readily it is left out
    when the terminal is narrow (0: a key column, always shown; higher: left out first)."""

    header: str
    cells: list[str]
    drop: int = 0
    justify: str = "left"
    wrap: bool = False  # a label column: may fold between words, never inside one

    @property
    def natural(self) -> int:
        return max([len(self.header), *(len(c) for c in self.cells)])

    @property
    def narrowest(self) -> int:
        """The width below which a cell would be cut: for a label column that wraps, its header
        and its longest word; its whole widest cell otherwise."""
        if not self.wrap:
            return self.natural
        return max([len(self.header), *(len(w) for text in self.cells for w in text.split())])


def compact_width(columns: list[Column]) -> int:
    """The narrowest width print_table draws these columns in without cutting a cell."""
    return sum(c.narrowest for c in columns) + len(columns) - 1


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
            if compact_width(chosen) <= width:
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
            key = c.drop == 0 and c.header != "option"
            if key and c.wrap:
                min_width: int | None = c.narrowest
            else:
                min_width = min(c.natural, 40) if key else None
            table.add_column(
                c.header,
                justify=c.justify,  # type: ignore[arg-type]
                no_wrap=key and not c.wrap,
                min_width=min_width,
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


def _longest_word(column: RichColumn, *, markup: bool) -> int:
    """The widest word of a column's header and cells (markup aside): the width below which a
    number or a word would be cut."""
    words = [0]
    for text in (column.header, *column.cells):
        if not isinstance(text, str):
            continue
        try:
            plain = Text.from_markup(text).plain if markup else text
        except MarkupError:
            plain = text
        words.extend(len(word) for word in plain.split())
    return max(words)


def _natural_width(column: RichColumn, *, markup: bool) -> int:
    """The widest line of a column's header and cells (markup aside): its width unwrapped."""
    widest = [0]
    for text in (column.header, *column.cells):
        if not isinstance(text, str):
            continue
        try:
            plain = Text.from_markup(text) if markup else Text(text)
        except MarkupError:
            plain = Text(text)
        widest.extend(Text(line).cell_len for line in plain.plain.split("\n"))
    return max(widest)


def _least_width(table: Table, floors: list[int]) -> int:
    padding = sum(table._get_padding_width(i) for i in range(len(table.columns)))
    return sum(floors) + padding + table._extra_width


def print_whole(table: Table) -> None:
    """Print a rich table so that no cell is cut to an ellipsis: every column keeps at least
    its longest word (a number whole; a label folds between words); a boxed table too wide
    for the terminal so is drawn compactly instead, as print_table does."""
    floors = [_longest_word(c, markup=True) for c in table.columns]
    for column, floor in zip(table.columns, floors, strict=True):
        column.overflow = "fold"
        column.min_width = max(column.min_width or 0, floor)
    width = stdout.width
    if table.box is not None and _least_width(table, floors) > width:
        table.box = box.SIMPLE_HEAD
        table.show_edge = False
        table.pad_edge = False
        table.padding = (0, 0)
        table.collapse_padding = True
    for i in sorted(range(len(floors)), key=lambda i: -floors[i]):
        if _least_width(table, floors) <= width:
            break
        table.columns[i].min_width = None  # the longest words fold, every character shown
        floors[i] = 1
    naturals = [
        max(_natural_width(c, markup=True), f) for c, f in zip(table.columns, floors, strict=True)
    ]
    slack = width - _least_width(table, floors)
    if _least_width(table, naturals) > width and slack >= 0:
        # Rich narrows the widest columns first, then widens any below its floor again, and
        # the table can come out wider than the terminal: give each column its floor, then
        # share the room left fairly, the narrow ones (a label) whole first, so a long value
        # column folds rather than a short label
        room = [n - f for n, f in zip(naturals, floors, strict=True)]
        widths = list(floors)
        order = sorted(range(len(room)), key=lambda i: room[i])
        for k, i in enumerate(order):
            give = min(room[i], slack // (len(order) - k))
            widths[i] += give
            slack -= give
        for column, chosen in zip(table.columns, widths, strict=True):
            column.width = chosen
    stdout.print(table)
