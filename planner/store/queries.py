"""Reading datasets and their requests back out of the store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from planner.common.text import closest, printable, shown
from planner.errors import NotFoundError
from planner.store.models import Dataset, Request

if TYPE_CHECKING:
    import pandas as pd

MAX_SUGGESTED = 5  # names suggested for a dataset that does not exist
MAX_NAME_CHARS = 200

# Columns of request_frame, with their pandas dtypes.
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


def list_datasets(session: Session) -> list[Dataset]:
    return list(session.scalars(select(Dataset).order_by(Dataset.created_at, Dataset.id)))


def get_dataset(session: Session, name: str) -> Dataset:
    """The dataset called ``name``; a missing one is an error naming the closest known names."""
    dataset = session.scalars(select(Dataset).where(Dataset.name == name)).first()
    if dataset is None:
        known = list(session.scalars(select(Dataset.name)))
        if not known:
            hint = "; the store has no datasets yet"
        else:
            ranked = closest(name[:MAX_NAME_CHARS], known).split(", ")
            names = ", ".join(printable(n, limit=MAX_NAME_CHARS) for n in ranked[:MAX_SUGGESTED])
            more = len(known) - MAX_SUGGESTED
            hint = f"; known datasets: {names}" + (
                f" and {more:,} more (`planner datasets list`)" if more > 0 else ""
            )
        raise NotFoundError(f"no dataset named {shown(name)}{hint}")
    return dataset


def delete_dataset(session: Session, name: str) -> int:
    """Delete a dataset and its requests; returns the number of requests removed."""
    dataset = get_dataset(session, name)
    count = dataset.row_count
    session.execute(delete(Request).where(Request.dataset_id == dataset.id))
    session.delete(dataset)
    return count


def dataset_models(session: Session, dataset: Dataset) -> list[str | None]:
    query = (
        select(Request.model)
        .where(Request.dataset_id == dataset.id)
        .group_by(Request.model)
        .order_by(func.count().desc())
    )
    return list(session.scalars(query))


def request_frame(
    session: Session,
    dataset: Dataset,
    columns: Sequence[str] = ("arrival_us", "model", "input_tokens", "output_tokens"),
) -> pd.DataFrame:
    """The dataset's requests, sorted by arrival, as a DataFrame of the chosen columns."""
    import pandas as pd  # 0.3 s: loaded by the callers that want a frame, not by every query

    selected = [getattr(Request, c) for c in columns]
    query = (
        select(*selected)
        .where(Request.dataset_id == dataset.id)
        .order_by(Request.arrival_us, Request.id)
    )
    result = session.execute(query.execution_options(yield_per=200_000))
    parts = [pd.DataFrame(part, columns=list(columns)) for part in result.partitions()]
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(columns))
    return frame.astype({c: FRAME_DTYPES[c] for c in columns})


def contents_version(session: Session) -> str:
    """A short token that changes whenever the store's contents change (a row added or removed
    in any table readers summarise): callers cache what they read from the store under it."""
    from planner.store.forecast_models import ForecastRun
    from planner.store.models import BenchRunRecord, CalibrationProfile
    from planner.store.price_models import PriceSheetVersion
    from planner.store.recommend_models import RecommendationRun

    parts = []
    tables = (
        Dataset,
        ForecastRun,
        RecommendationRun,
        PriceSheetVersion,
        CalibrationProfile,
        BenchRunRecord,
    )
    for table in tables:
        count, last = session.execute(select(func.count(), func.max(table.id))).one()
        parts.append(f"{count}.{last or 0}")
    return "-".join(parts)
