"""A user price sheet that arrives as a file name and its bytes (the dashboard's upload),
imported exactly as ``planner prices import FILE`` imports a file on disk."""

from __future__ import annotations

import tempfile
from pathlib import Path

from sqlalchemy.orm import Session

from planner.common.text import printable
from planner.errors import InputFileError, UsageError
from pricing.sheets import ImportResult, import_sheet


def upload_name(name: str) -> str:
    """The name an uploaded sheet is read and stored under: its base name, without path parts
    or characters a file name cannot hold (the suffix, .csv or .xlsx, is kept)."""
    base = Path(name.replace("\\", "/")).name
    cleaned = "".join(c if c.isalnum() or c in "-_. ()" else "-" for c in base).strip(" .")
    return cleaned or "sheet"


def import_sheet_bytes(
    session: Session,
    name: str,
    data: bytes,
    *,
    label: str | None = None,
    decimal_comma: bool = False,
    force: bool = False,
) -> ImportResult:
    """Import an uploaded sheet as a new ``user`` version (see
    :func:`pricing.sheets.import_sheet`: the same checks, the same located errors, nothing
    stored on failure). Errors name the uploaded file, not where it was put to be read."""
    shown_name = upload_name(name)
    if label is not None and (not label.strip() or printable(label) != label):
        raise UsageError("label: expected a name without control characters")
    with tempfile.TemporaryDirectory(prefix="planner-sheet-") as folder:
        path = Path(folder) / shown_name
        path.write_bytes(data)
        try:
            return import_sheet(
                session,
                path,
                label=label or shown_name,
                decimal_comma=decimal_comma,
                force=force,
                source_ref=f"upload {shown_name}",
            )
        except InputFileError as exc:
            raise InputFileError(shown_name, exc.problem) from None
