"""Errors a user can act on.

Everything raised as a :class:`PlannerError` is shown to the user as one clear message (never a
stack trace); anything else escaping the CLI is a bug in planner.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def printable(text: str, limit: int | None = None) -> str:
    """``text`` with control characters escaped (for tables and plain output), optionally cut."""
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class PlannerError(Exception):
    """An error caused by input or configuration, with a message written for the user."""

    exit_code = 1


class UsageError(PlannerError):
    """A bad option or combination of options."""

    exit_code = 2


class StoreError(PlannerError):
    """The store cannot be opened or is in a state planner does not understand."""


class NotFoundError(PlannerError):
    """A named thing (dataset, ...) does not exist in the store."""


@dataclass(frozen=True)
class RowProblem:
    """One bad value in an input file: where it is and what was expected there."""

    row: int | None  # 1-based data row; None when the problem is not tied to a row
    column: str | None
    message: str
    line: int | None = None  # 1-based physical line, where the format has lines

    def location(self) -> str:
        parts = []
        if self.row is not None:
            parts.append(f"row {self.row}")
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.column is not None:
            parts.append(f"column {self.column!r}")
        return ", ".join(parts)

    def describe(self) -> str:
        where = self.location()
        return f"{where}: {self.message}" if where else self.message


class InputFileError(PlannerError):
    """A problem with an input file, naming the file and, where known, the row and column."""

    def __init__(self, path: Path | str, problem: RowProblem | str):
        self.path = str(path)
        self.problem = (
            problem if isinstance(problem, RowProblem) else RowProblem(None, None, problem)
        )
        super().__init__(f"{printable(self.path)}: {self.problem.describe()}")
