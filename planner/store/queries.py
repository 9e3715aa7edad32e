"""Reading datasets back out of the store (their requests: :mod:`planner.store.requests`)."""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from planner.common.text import closest, printable, shown
from planner.errors import NotFoundError
from planner.store.models import Dataset, Request

MAX_SUGGESTED = 5  # names suggested for a dataset that does not exist
MAX_NAME_CHARS = 200


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


def contents_version(session: Session) -> str:
    """A short token that changes whenever the store's contents change (a row added or removed
    in any table readers summarise): callers cache what they read from the store under it."""
    from planner.store.forecast_models import ForecastRun
    from planner.store.models import BenchRunRecord, CalibrationProfile
    from planner.store.price_models import ApiPriceSheetVersion, PriceSheetVersion
    from planner.store.recommend_models import RecommendationRun

    parts = []
    tables = (
        Dataset,
        ForecastRun,
        RecommendationRun,
        PriceSheetVersion,
        CalibrationProfile,
        BenchRunRecord,
        ApiPriceSheetVersion,
    )
    for table in tables:
        count, last = session.execute(select(func.count(), func.max(table.id))).one()
        parts.append(f"{count}.{last or 0}")
    return "-".join(parts)
