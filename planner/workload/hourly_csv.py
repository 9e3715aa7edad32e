"""Reading hourly ``ds,y`` CSV files: the one place that finds the columns, walks the rows and
parses hour starts, for the forecast's series and the simulator's rate curves alike."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from planner.errors import InputFileError, RowProblem

DS_EXAMPLE = "2025-01-06T00:00:00Z"
DS_Y_COLUMNS = ("ds", "y")


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
            found = ", ".join(repr(h.strip()) for h in header)
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


def parse_hour(path: Path, text: str, row: int, line: int) -> datetime:
    """An ISO 8601 date-time as UTC (naive values are UTC)."""
    value = text.strip()
    hint = f"expected an ISO 8601 hour start like {DS_EXAMPLE}"
    if not value:
        raise InputFileError(path, RowProblem(row, "ds", f"empty; {hint}", line))
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InputFileError(
            path, RowProblem(row, "ds", f"{value!r} is not a date and time; {hint}", line)
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
