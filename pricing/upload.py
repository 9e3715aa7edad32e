"""A user price sheet that arrives as a file name and its bytes (the dashboard's upload),
imported exactly as ``planner prices import FILE`` imports a file on disk."""

from __future__ import annotations

from sqlalchemy.orm import Session

from planner.common.text import printable
from planner.common.uploads import upload_file_name, uploaded_file
from planner.errors import UsageError
from pricing.sheets import ImportResult, import_sheet


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
    shown_name = upload_file_name(name)
    if label is not None and (not label.strip() or printable(label) != label):
        raise UsageError("label: expected a name without control characters")
    with uploaded_file(shown_name, data) as path:
        return import_sheet(
            session,
            path,
            label=label or shown_name,
            decimal_comma=decimal_comma,
            force=force,
            source_ref=f"upload {shown_name}",
        )
