"""``ingest_upload``: a log that arrives as bytes (the dashboard's file upload), ingested by the
same pipeline as ``planner ingest PATH``, all rows or none.

The upload is read as a file of its own name (``planner.common.uploads``), so the format is
detected from its suffix and the dataset is named after it as for a file on disk. Messages and
the stored dataset name the uploaded file, never the temporary path.
"""

from __future__ import annotations

from dataclasses import replace
from typing import BinaryIO

from sqlalchemy import update

from planner.common.uploads import upload_file_name, uploaded_file
from planner.ingest.pipeline import IngestOptions, IngestResult, Progress, ingest_file
from planner.store.db import Store
from planner.store.models import Dataset

UPLOADED = "uploaded"  # how the stored source of an uploaded log reads: "NAME (uploaded)"


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
    with uploaded_file(name, data) as path:
        result = ingest_file(store, path, options, progress=progress)
    if result.status != "already-present":
        with store.session() as session:
            session.execute(
                update(Dataset)
                .where(Dataset.name == result.dataset)
                .values(source_path=uploaded_source(name))
            )
    return replace(result, path=name)
