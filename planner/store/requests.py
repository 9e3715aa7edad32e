"""A stored dataset's requests read back as frames and plain columns: for the simulator's
workloads (:func:`planner.usecases.load.from_dataset` and :func:`~planner.usecases.load.token_pool`
make them :class:`~planner.simulate.workload.Workload` values and token pools), a benchmark's
trace, a dataset's summary and the pages that show its requests."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import ColumnElement, Select, func, or_, select
from sqlalchemy.orm import Session

from planner.store.models import Request

if TYPE_CHECKING:
    import pandas as pd

Q = TypeVar("Q", bound="Select[*tuple[Any, ...]]")  # any select, its filters added
FETCH_ROWS = 200_000
#: the columns :func:`request_frame` reads when not told, and those a replay reads
FRAME_COLUMNS = ("arrival_us", "model", "input_tokens", "output_tokens")
REPLAY_COLUMNS = (
    "arrival_us",
    "input_tokens",
    "output_tokens",
    "priority_class",
    "prefix_block_ids",
)
#: the pandas dtype of each column :func:`request_frame` can read
FRAME_DTYPES: dict[str, str] = {
    "arrival_us": "int64",
    "model": "object",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "cached_tokens": "Int64",
    "prefix_block_ids": "object",
    "priority_class": "object",
    "ttft_ms": "float64",
    "e2e_ms": "float64",
    "status": "object",
}


def model_filter(log_models: Sequence[str | None]) -> ColumnElement[bool]:
    """The requests whose ``model`` is one of ``log_models`` (None matches a NULL model, as a
    log without a model column stores it)."""
    names = [m for m in log_models if m is not None]
    clauses = [Request.model.in_(names)] if names else []
    if any(m is None for m in log_models):
        clauses.append(Request.model.is_(None))
    return or_(*clauses) if clauses else Request.id.is_(None)  # an empty list: no request


def _filtered(
    query: Q,
    start_us: int | None,
    end_us: int | None,
    log_models: Sequence[str | None] | None,
) -> Q:
    """``query`` kept to ``[start_us, end_us)`` (either end open when None) and ``log_models``."""
    if start_us is not None:
        query = query.where(Request.arrival_us >= start_us)
    if end_us is not None:
        query = query.where(Request.arrival_us < end_us)
    if log_models is not None:
        query = query.where(model_filter(log_models))
    return query


def model_counts(
    session: Session, dataset_id: int, start_us: int | None = None, end_us: int | None = None
) -> dict[str | None, int]:
    """Dataset ``dataset_id``'s requests per model name as logged (None: without a model), in
    ``[start_us, end_us)`` (either end open when None): one GROUP BY query."""
    query = _filtered(
        select(Request.model, func.count()).where(Request.dataset_id == dataset_id),
        start_us,
        end_us,
        None,
    ).group_by(Request.model)
    return {model: int(count) for model, count in session.execute(query)}


@dataclass(frozen=True)
class RequestSpan:
    """A dataset's requests: the first and last arrival (microseconds since the epoch; None
    when it has none), how many in all, and how many inside the window asked about."""

    first_us: int | None
    last_us: int | None
    count: int
    inside: int


def request_span(
    session: Session,
    dataset_id: int,
    start_us: int | None = None,
    end_us: int | None = None,
    *,
    log_models: Sequence[str | None] | None = None,
) -> RequestSpan:
    """The arrivals and counts of dataset ``dataset_id``'s requests (only those whose model is
    one of ``log_models`` when given: :func:`model_filter`); ``inside`` counts those in
    ``[start_us, end_us)`` (either end open when None)."""
    spanning = select(
        func.min(Request.arrival_us), func.max(Request.arrival_us), func.count()
    ).where(Request.dataset_id == dataset_id)
    first_us, last_us, count = session.execute(_filtered(spanning, None, None, log_models)).one()
    inside = count
    if count and (start_us is not None or end_us is not None):
        counting = select(func.count()).where(Request.dataset_id == dataset_id)
        inside = session.execute(_filtered(counting, start_us, end_us, log_models)).scalar_one()
    return RequestSpan(
        None if first_us is None else int(first_us),
        None if last_us is None else int(last_us),
        int(count),
        int(inside),
    )


def request_frame(
    session: Session,
    dataset_id: int,
    columns: Sequence[str] = FRAME_COLUMNS,
    *,
    start_us: int | None = None,
    end_us: int | None = None,
    log_models: Sequence[str | None] | None = None,
) -> pd.DataFrame:
    """Dataset ``dataset_id``'s requests in ``[start_us, end_us)`` (either end open when None;
    only those whose model is one of ``log_models`` when given: :func:`model_filter`) in
    arrival order, as a DataFrame of the chosen ``columns`` with their :data:`FRAME_DTYPES`
    (empty, with those columns and types, when there are none)."""
    import pandas as pd  # 0.3 s: loaded by the callers that want a frame, not by every query

    query = _filtered(
        select(*(getattr(Request, c) for c in columns)).where(Request.dataset_id == dataset_id),
        start_us,
        end_us,
        log_models,
    ).order_by(Request.arrival_us, Request.id)
    result = session.execute(query.execution_options(yield_per=FETCH_ROWS))
    # rows as plain tuples: pandas and numpy read those three times faster than SQLAlchemy's Rows
    parts = [
        pd.DataFrame(list(map(tuple, part)), columns=list(columns)) for part in result.partitions()
    ]
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(columns))
    return frame.astype({c: FRAME_DTYPES[c] for c in columns})


def token_pairs(
    session: Session, dataset_id: int, *, log_models: Sequence[str | None] | None = None
) -> NDArray[np.int64]:
    """The (input, output) token counts of dataset ``dataset_id``'s requests in arrival order
    (only those whose model is one of ``log_models`` when given), as an ``(n, 2)`` array
    (``n`` may be 0)."""
    query = _filtered(
        select(Request.input_tokens, Request.output_tokens).where(Request.dataset_id == dataset_id),
        None,
        None,
        log_models,
    ).order_by(Request.arrival_us, Request.id)
    # the connection's rows, flattened straight into one array: a quarter of the time of the
    # session's ORM result turned into tuples (numpy reading Row objects is slower still)
    result = session.connection().execute(query.execution_options(yield_per=FETCH_ROWS))
    flat = np.fromiter(itertools.chain.from_iterable(result), dtype=np.int64)
    return flat.reshape(-1, 2)


@dataclass(frozen=True)
class TokenTotals:
    """One model's requests and tokens in a window (a log's model name; None: without one).
    ``cached_known`` counts the requests whose log states their cached tokens."""

    model: str | None
    requests: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cached_known: int


def token_totals(
    session: Session, dataset_id: int, start_us: int | None = None, end_us: int | None = None
) -> list[TokenTotals]:
    """Dataset ``dataset_id``'s requests and token sums per logged model name in ``[start_us,
    end_us)`` (either end open when None): one GROUP BY query, by model name."""
    query = _filtered(
        select(
            Request.model,
            func.count(),
            func.coalesce(func.sum(Request.input_tokens), 0),
            func.coalesce(func.sum(Request.output_tokens), 0),
            func.coalesce(func.sum(Request.cached_tokens), 0),
            func.count(Request.cached_tokens),
        ).where(Request.dataset_id == dataset_id),
        start_us,
        end_us,
        None,
    ).group_by(Request.model)
    rows = [
        TokenTotals(m, int(n), int(i or 0), int(o or 0), int(c or 0), int(k or 0))
        for m, n, i, o, c, k in session.execute(query)
    ]
    return sorted(rows, key=lambda t: (t.model is None, t.model or ""))
