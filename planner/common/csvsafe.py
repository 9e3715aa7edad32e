"""CSV cells a spreadsheet will not run: every CSV planner writes goes through here.

A spreadsheet opening a CSV takes a cell that begins with ``=``, ``+``, ``-`` or ``@`` as a
formula (``=HYPERLINK("http://...")``, ``+cmd|' /C calc'!A0``), and some read a leading tab or
carriage return the same way. As OWASP describes ("CSV Injection"), such a text cell is written
with a single quote in front (``'=HYPERLINK(...)``), which spreadsheets show as text. Numbers stay
numbers: a float or an int is never touched, nor text that is a plain decimal number (``-2.5``,
``+1e-3``), but ``-2+3`` is text and is quoted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas only where a frame is written: the CLI starts without it
    import pandas as pd

#: The first characters that make a spreadsheet read a cell as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def safe_text(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet runs: a single quote in front when it begins with
    one of :data:`FORMULA_STARTS` and is not a plain number."""
    if text.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def safe_cell(value: Any) -> Any:
    """A cell's value as :func:`safe_text` makes it when it is text; anything else unchanged."""
    return safe_text(value) if isinstance(value, str) else value


def safe_row(values: Iterable[Any]) -> list[Any]:
    """A row for :func:`csv.writer`: each cell through :func:`safe_cell`."""
    return [safe_cell(value) for value in values]


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the text of its text columns (and its column names) through
    :func:`safe_text`; number, time and boolean columns as they are. A copy when anything
    changes, else ``frame`` itself."""
    import pandas as pd

    changed: dict[Any, pd.Series] = {}
    for position in range(frame.shape[1]):
        column = frame.iloc[:, position]
        if isinstance(column.dtype, pd.CategoricalDtype):
            categories = list(column.cat.categories)
            if [safe_cell(c) for c in categories] != categories:
                changed[position] = column.astype(object).map(safe_cell)
        elif pd.api.types.is_object_dtype(column.dtype) or pd.api.types.is_string_dtype(
            column.dtype
        ):
            mapped = column.map(safe_cell)
            if not mapped.equals(column):
                changed[position] = mapped
    names = [safe_cell(name) for name in frame.columns]
    if not changed and names == list(frame.columns):
        return frame
    result = frame.copy()
    for position, column in changed.items():
        result.isetitem(position, column.to_numpy())
    result.columns = pd.Index(names)
    return result


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """``frame`` as UTF-8 CSV without its index (what the dashboard's downloads give), its text
    cells through :func:`safe_text`."""
    data: bytes = safe_frame(frame).to_csv(index=False).encode("utf-8")
    return data
