"""``ingest_upload``: a log that arrives as bytes (the dashboard's file upload), ingested by the
same pipeline as ``planner ingest PATH``, all rows or none.

The bytes are written to a private temporary folder under the uploaded file's own name, so the
format is detected from its suffix and the dataset is named after it as for a file on disk.
Messages and the stored dataset name the uploaded file, never the temporary path.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import BinaryIO

from sqlalchemy import update

from planner.common.text import shown
from planner.errors import InputFileError, PlannerError, UsageError
from planner.ingest.pipeline import IngestOptions, IngestResult, Progress, ingest_file
from planner.store.db import Store
from planner.store.models import Dataset

UPLOADED = "uploaded"  # how the stored source of an uploaded log reads: "NAME (uploaded)"
MAX_FILE_NAME_CHARS = 200


def upload_file_name(name: str) -> str:
    """The file name part of what a browser sent (some send a whole Windows or POSIX path),
    safe to create in a folder: no separators, no control characters, not ``.`` or ``..``."""
    base = PureWindowsPath(PurePosixPath(name).name).name.strip()
    if not base or base in (".", "..") or not base.isprintable() or "\x00" in base:
        raise UsageError(
            f"uploaded file name {shown(name)}: expected a plain file name such as requests.csv"
        )
    if len(base) > MAX_FILE_NAME_CHARS:
        raise UsageError(
            f"uploaded file name {shown(name)}: at most {MAX_FILE_NAME_CHARS} characters"
        )
    return base


def uploaded_source(file_name: str) -> str:
    """The source a dataset from an upload records (there is no path to point at)."""
    return f"{file_name} ({UPLOADED})"


def ingest_upload(
    store: Store,
    file_name: str,
    data: bytes | BinaryIO,
    options: IngestOptions | None = None,
    progress: Progress | None = None,
) -> IngestResult:
    """Ingest an uploaded log called ``file_name`` whose content is ``data`` (bytes, or a binary
    file object read from its current position). Raises the pipeline's located errors, naming
    ``file_name``; on any error nothing is stored."""
    name = upload_file_name(file_name)
    with tempfile.TemporaryDirectory(prefix="planner-upload-") as folder:
        path = Path(folder) / name
        with path.open("wb") as out:
            if isinstance(data, bytes | bytearray | memoryview):
                out.write(data)
            else:
                shutil.copyfileobj(data, out, 1 << 20)
        try:
            result = ingest_file(store, path, options, progress=progress)
        except InputFileError as exc:
            raise InputFileError(name, exc.problem) from exc
        except PlannerError as exc:
            if str(path) not in str(exc):
                raise
            raise _renamed(exc, str(path), name) from exc
    if result.status != "already-present":
        with store.session() as session:
            session.execute(
                update(Dataset)
                .where(Dataset.name == result.dataset)
                .values(source_path=uploaded_source(name))
            )
    return replace(result, path=name)


def _renamed(exc: PlannerError, temporary: str, name: str) -> PlannerError:
    """``exc`` with the temporary path in its message replaced by the uploaded file's name."""
    message = str(exc).replace(temporary, name)
    try:
        return type(exc)(message)
    except TypeError:  # a subclass built from other arguments: keep the message, not the type
        return PlannerError(message)
