"""Reading hourly ``ds,y`` CSV files: the one place that finds the columns, walks the rows and
parses hour starts, for the forecast's series and the simulator's rate curves alike."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from planner.common.text import shown
from planner.errors import InputFileError, RowProblem

DS_EXAMPLE = "2025-01-06T00:00:00Z"
DS_Y_COLUMNS = ("ds", "y")
# Hours planner accepts: pandas' timestamps end in 2262 (and start in 1677), and a forecast
# reaches up to a year past its history, so hours stay well inside both ends.
FIRST_HOUR = datetime(1900, 1, 1, tzinfo=UTC)
LAST_HOUR = datetime(2200, 1, 1, tzinfo=UTC)  # exclusive
HOUR_RANGE = f"{FIRST_HOUR:%Y-%m-%d} to {LAST_HOUR:%Y-%m-%d}"


def read_text(path: Path, expected: str) -> str:
    """The file's text; a missing, directory or non-UTF-8 path is an error saying ``expected``."""
    if not path.exists():
        raise InputFileError(path, f"file not found; expected {expected}")
    if path.is_dir():
        raise InputFileError(path, f"is a directory; expected {expected}")
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(
            path, f"not UTF-8 text (byte offset {exc.start}); expected {expected}"
        ) from exc


def csv_rows(path: Path, text: str) -> Iterator[tuple[int, int, list[str]]]:
    """(row, line, fields) of the non-blank CSV rows; row 0 is the header."""
    reader = csv.reader(io.StringIO(text, newline=""))
    row = 0
    try:
        for fields in reader:
            if not any(f.strip() for f in fields):
                continue
            yield row, reader.line_num, fields
            row += 1
    except csv.Error as exc:
        raise InputFileError(
            path, RowProblem(row, None, f"cannot parse as CSV: {exc}", reader.line_num)
        ) from exc


def ds_y_columns(path: Path, header: list[str], line: int) -> tuple[int, int]:
    """Positions of ``ds`` and ``y`` in a header (any case); a missing one is an error."""
    names = [h.strip().lower() for h in header]
    for column in DS_Y_COLUMNS:
        if column not in names:
            found = ", ".join(shown(h.strip()) for h in header[:10])
            if len(header) > 10:
                found += f" and {len(header) - 10} more"
            raise InputFileError(
                path,
                RowProblem(
                    None,
                    column,
                    f"missing column; expected a header with columns ds,y (found {found})",
                    line,
                ),
            )
    return names.index("ds"), names.index("y")


def check_fields(
    path: Path, fields: list[str], header: list[str], row: int, lines: tuple[int, int]
) -> None:
    """A row must have as many fields as the header (``lines``: this row's, the header's)."""
    if len(fields) != len(header):
        raise InputFileError(
            path,
            RowProblem(
                row,
                None,
                f"{len(fields)} fields, expected {len(header)} like the header (line {lines[1]})",
                lines[0],
            ),
        )


def ds_y_rows(path: Path, text: str) -> Iterator[tuple[int, int, str, str]]:
    """(row, line, ds, y) of each data row of a ``ds,y`` CSV's ``text``, the header found first
    (:func:`ds_y_columns`) and each row's fields counted against it (:func:`check_fields`); a
    file without even a header is an error."""
    header: list[str] | None = None
    header_line = 0
    ds_col = y_col = 0
    for row, line, fields in csv_rows(path, text):
        if header is None:
            header = [f.strip() for f in fields]
            header_line = line
            ds_col, y_col = ds_y_columns(path, header, line)
            continue
        check_fields(path, fields, header, row, (line, header_line))
        yield row, line, fields[ds_col], fields[y_col]
    if header is None:
        raise InputFileError(path, "the file is empty; expected a CSV with columns ds,y")


def parse_hour(path: Path, text: str, row: int, line: int) -> datetime:
    """An ISO 8601 date-time as UTC (naive values are UTC)."""
    value = text.strip()
    hint = f"expected an ISO 8601 hour start like {DS_EXAMPLE}"
    if not value:
        raise InputFileError(path, RowProblem(row, "ds", f"empty; {hint}", line))
    try:
        moment = datetime.fromisoformat(value)
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise InputFileError(
            path, RowProblem(row, "ds", f"{shown(value)} is not a date and time; {hint}", line)
        ) from None
    if not FIRST_HOUR <= moment < LAST_HOUR:
        raise InputFileError(
            path,
            RowProblem(
                row,
                "ds",
                f"{shown(value)} is outside the hours planner handles, {HOUR_RANGE} (UTC)",
                line,
            ),
        )
    return moment
