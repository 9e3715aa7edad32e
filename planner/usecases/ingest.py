"""Ingest: a request log into the store as a dataset, all rows or none. ``planner ingest PATH``
and the Request logs page's upload both build an :class:`IngestRequest` and call :func:`ingest`.

The log is checked first (its format, columns, options and the dataset's name: no store is
opened for a log that cannot be read); then it is stored in one session of ``sessions``
(:func:`planner.ingest.pipeline.store_log`). An upload is read as a file of its own name
(``planner.common.uploads``), so its format is detected from its suffix and the dataset is named
after it as for a file on disk; messages and the stored dataset name the uploaded file, never
the temporary path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from planner.access import Action, require
from planner.common.uploads import upload_file_name, uploaded_file
from planner.errors import UsageError
from planner.ingest.pipeline import (
    IngestOptions,
    IngestResult,
    Progress,
    prepare_log,
    store_log,
    uploaded_source,
)
from planner.usecases import SessionScope
from planner.usecases.audit import record

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


@dataclass(frozen=True)
class Upload:
    """A log that arrives as bytes (the dashboard's file upload): the name the browser sent
    and the content (bytes, or a binary file read from its current position)."""

    file_name: str
    data: bytes | BinaryIO


@dataclass(frozen=True)
class IngestRequest:
    """One ingest: a log file on disk, or an upload, and the checked options
    (:func:`planner.ingest.options.ingest_options` builds them from what the user typed)."""

    log: Path | Upload
    options: IngestOptions = field(default_factory=IngestOptions)


def ingest(
    request: IngestRequest, sessions: SessionScope, *, progress: Progress | None = None
) -> IngestResult:
    """Ingest ``request.log``; ``progress(rows done, estimated total)`` after each chunk.
    Raises the pipeline's located errors (naming an upload by its file name); on any error
    nothing is stored."""
    require(Action.UPLOAD)
    store_sessions = _needing_store(sessions)
    if isinstance(request.log, Upload):
        name = upload_file_name(request.log.file_name)
        with uploaded_file(name, request.log.data) as path:
            log = prepare_log(path, request.options, source_path=uploaded_source(name))
            result = replace(store_log(store_sessions, log, progress), path=name)
    else:
        result = store_log(store_sessions, prepare_log(request.log, request.options), progress)
    if result.status != "already-present":
        record(
            sessions,
            Action.UPLOAD,
            f"dataset {result.dataset}",
            f"{result.rows:,} rows from {result.path}",
        )
    return result


def _needing_store(sessions: SessionScope) -> Callable[[], AbstractContextManager[Session]]:
    """``sessions``, refusing to run without a store (an ingest has nowhere else to go)."""

    @contextmanager
    def opened() -> Iterator[Session]:
        with sessions() as session:
            if session is None:
                raise UsageError("an ingest needs a store: there is none to write the dataset to")
            yield session

    return opened
