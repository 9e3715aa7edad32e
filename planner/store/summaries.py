"""What a dataset looks like, aggregated in the database: the datasets as a table, requests per
time bucket, token-length counts and the split by model.

Each aggregate is one ``GROUP BY`` query, so a page or a report can show a million-request log
without pulling its requests: the database returns at most a few thousand rows. Buckets and
histograms are the same on SQLite and PostgreSQL (integer arithmetic on microseconds and token
counts).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from planner.errors import UsageError
from planner.store.models import Dataset, Request
from planner.store.queries import list_datasets
from planner.store.requests import request_frame
from planner.workload.charts import TOKEN_COLUMNS, TokenColumn
from planner.workload.summary import DatasetSummary, summarize

MICROS = 1_000_000
SUMMARY_BATCH = 200_000  # rows fetched at a time for a summary
NO_MODEL = "(none)"  # how requests without a model are labelled, as in summarize


def dataset_records(session: Session, *, with_key: bool = False) -> list[dict[str, Any]]:
    """Every dataset as a row: name, format, rows, skipped_rows, start_at, end_at, source_path,
    sha256, created_at (what ``planner datasets list --json`` prints), oldest first; with
    ``with_key`` also its ``content_key``."""
    records = []
    for d in list_datasets(session):
        record: dict[str, Any] = {
            "name": d.name,
            "format": d.format,
            "rows": d.row_count,
            "skipped_rows": d.skipped_rows,
            "start_at": d.start_at,
            "end_at": d.end_at,
            "source_path": d.source_path,
            "sha256": d.sha256,
            "created_at": d.created_at,
        }
        if with_key:
            record["content_key"] = content_key(d)
        records.append(record)
    return records


def content_key(dataset: Dataset) -> str:
    """A token that changes whenever the dataset's requests may have: an ingest never changes
    the requests of a stored dataset (a replacement is a new row), and SQLite may reuse a
    deleted row's id, so the id goes with the file's hash and the creation time. Cache what is
    derived from one dataset under it, not under the whole store's version."""
    return f"{dataset.id}-{dataset.sha256[:16]}-{dataset.created_at.isoformat()}"


def summary_columns(session: Session, dataset: Dataset) -> pd.DataFrame:
    """The columns ``summarize`` reads (arrival_us, model, input_tokens, output_tokens) of every
    request, in no particular order: several times faster than ``request_frame``, which sorts
    (``summarize`` sorts what it needs itself)."""
    query = select(
        Request.arrival_us, Request.model, Request.input_tokens, Request.output_tokens
    ).where(Request.dataset_id == dataset.id)
    parts: list[pd.DataFrame] = []
    # Core, not ORM, execution: the ORM's per-row work doubles the time for a million rows.
    result = session.connection().execute(query.execution_options(yield_per=SUMMARY_BATCH))
    for rows in result.partitions():
        arrival, model, inputs, outputs = zip(*rows, strict=True)
        parts.append(
            pd.DataFrame(
                {
                    "arrival_us": np.array(arrival, dtype=np.int64),
                    "model": np.array(model, dtype=object),
                    "input_tokens": np.array(inputs, dtype=np.int64),
                    "output_tokens": np.array(outputs, dtype=np.int64),
                }
            )
        )
    if not parts:
        return request_frame(session, dataset.id)  # no requests: the same empty, typed frame
    return pd.concat(parts, ignore_index=True)


def dataset_summary(session: Session, dataset: Dataset) -> DatasetSummary:
    """The summary ``planner datasets show`` prints: span, token lengths (mean, P50, P99) and
    request rates (mean and the busiest sliding minute and hour), per model too. Reads the
    four columns it needs of every request (a few seconds for a million): cache it."""
    return summarize(summary_columns(session, dataset))


def arrivals_per_bucket(session: Session, dataset: Dataset, bucket_s: int = 60) -> pd.DataFrame:
    """Requests per ``bucket_s`` seconds, clock-aligned in UTC (a minute bucket starts at :00),
    from the first request's bucket to the last one's, empty buckets as 0. Columns: ``start``
    (UTC timestamps), ``requests`` and ``per_minute`` (the bucket's mean rate per minute)."""
    if bucket_s <= 0 or bucket_s != int(bucket_s):
        raise UsageError(f"bucket of {bucket_s!r} s: expected a whole positive number of seconds")
    bucket_us = int(bucket_s) * MICROS
    bounds = session.execute(
        select(func.min(Request.arrival_us), func.max(Request.arrival_us)).where(
            Request.dataset_id == dataset.id
        )
    ).one()
    if bounds[0] is None:
        return pd.DataFrame(
            {
                "start": pd.Series([], dtype="datetime64[us, UTC]"),
                "requests": pd.Series([], dtype="int64"),
                "per_minute": pd.Series([], dtype="float64"),
            }
        )
    # Buckets count from the one holding the first request: differences are never negative, so
    # integer division floors on every backend (it truncates towards zero).
    origin_us = int(bounds[0]) // bucket_us * bucket_us
    bucket = ((Request.arrival_us - origin_us) // bucket_us).label("bucket")
    rows = session.execute(
        select(bucket, func.count())
        .where(Request.dataset_id == dataset.id)
        .group_by(bucket)
        .order_by(bucket)
    ).all()
    last = (int(bounds[1]) - origin_us) // bucket_us
    counts = np.zeros(last + 1, dtype=np.int64)
    for index, count in rows:
        counts[int(index)] = int(count)
    starts = origin_us + np.arange(last + 1, dtype=np.int64) * bucket_us
    return pd.DataFrame(
        {
            "start": pd.to_datetime(starts, unit="us", utc=True),
            "requests": counts,
            "per_minute": counts * (60.0 / bucket_s),
        }
    )


def token_counts(session: Session, dataset: Dataset, column: TokenColumn) -> pd.DataFrame:
    """How many requests have each token length: columns ``tokens`` and ``requests``, by
    length. Logs hold a few thousand distinct lengths, so this is small for any dataset."""
    if column not in TOKEN_COLUMNS:
        raise UsageError(f"token column {column!r}: expected one of {', '.join(TOKEN_COLUMNS)}")
    value = getattr(Request, column)
    rows = session.execute(
        select(value, func.count())
        .where(Request.dataset_id == dataset.id)
        .group_by(value)
        .order_by(value)
    ).all()
    return pd.DataFrame(
        {
            "tokens": np.array([int(r[0]) for r in rows], dtype=np.int64),
            "requests": np.array([int(r[1]) for r in rows], dtype=np.int64),
        }
    )


def model_split(session: Session, dataset: Dataset) -> pd.DataFrame:
    """Requests and tokens per model, busiest first: columns ``model`` (``(none)`` for requests
    without one), ``requests``, ``input_tokens``, ``output_tokens``, ``share`` (of requests)."""
    rows = session.execute(
        select(
            Request.model,
            func.count(),
            func.sum(Request.input_tokens),
            func.sum(Request.output_tokens),
        )
        .where(Request.dataset_id == dataset.id)
        .group_by(Request.model)
    ).all()
    frame = pd.DataFrame(
        [
            (m if m is not None else NO_MODEL, int(n), int(i or 0), int(o or 0))
            for m, n, i, o in rows
        ],
        columns=["model", "requests", "input_tokens", "output_tokens"],
    )
    frame = frame.sort_values(["requests", "model"], ascending=[False, True], ignore_index=True)
    total = int(frame["requests"].sum())
    frame["share"] = frame["requests"] / total if total else 0.0
    return frame


__all__ = [
    "arrivals_per_bucket",
    "content_key",
    "dataset_records",
    "dataset_summary",
    "model_split",
    "summary_columns",
    "token_counts",
]
