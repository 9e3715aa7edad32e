"""Stored forecasts and the hourly counts forecasts are fitted on: the store's side of
forecasting (SQL in, values out). The forecasting itself (``planner.forecast``) works on values
and never reads the store; ``planner.usecases.forecast`` joins the two."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from planner.errors import NotFoundError
from planner.store.forecast_models import ForecastPoint, ForecastRun
from planner.store.models import Request
from planner.store.queries import get_dataset

BANDS = ("lower_80", "upper_80", "lower_95", "upper_95")  # as planner.forecast.model.BANDS
HOUR_US = 3_600_000_000


# --- what a forecast is fitted on ------------------------------------------------------------


@dataclass(frozen=True)
class DatasetHours:
    """A dataset's requests summed per (hour, model) in SQL, and the first and last arrival.

    ``table`` columns: ``hour`` (hours since the epoch), ``model`` (None where the log names
    none), ``requests``, ``input_tokens``, ``output_tokens``; ``first_us`` and ``last_us`` are
    None when the dataset holds no requests.
    """

    dataset_id: int
    table: pd.DataFrame
    first_us: int | None
    last_us: int | None


def dataset_hours(session: Session, name: str) -> DatasetHours:
    """Requests, input and output tokens per (hour, model) of dataset ``name``."""
    dataset = get_dataset(session, name)
    # Integer division buckets exactly on SQLite and PostgreSQL alike.
    bucket = (Request.arrival_us // HOUR_US).label("hour")
    query = (
        select(
            bucket,
            Request.model,
            func.count().label("requests"),
            func.sum(Request.input_tokens).label("input_tokens"),
            func.sum(Request.output_tokens).label("output_tokens"),
        )
        .where(Request.dataset_id == dataset.id)
        .group_by(bucket, Request.model)
        .order_by(bucket)
    )
    rows = session.execute(query).all()
    frame = pd.DataFrame(
        rows, columns=["hour", "model", "requests", "input_tokens", "output_tokens"]
    ).astype(
        {
            "hour": "int64",
            "requests": "float64",
            "input_tokens": "float64",
            "output_tokens": "float64",
        }
    )
    bounds = session.execute(
        select(func.min(Request.arrival_us), func.max(Request.arrival_us)).where(
            Request.dataset_id == dataset.id
        )
    ).one()
    first_us = None if bounds[0] is None else int(bounds[0])
    last_us = None if bounds[1] is None else int(bounds[1])
    return DatasetHours(dataset.id, frame, first_us, last_us)


# --- stored forecasts ------------------------------------------------------------------------


def _utc(moment: datetime | pd.Timestamp) -> datetime:
    """An hour start as an aware UTC datetime (naive means UTC)."""
    stamp = pd.Timestamp(moment)
    stamp = stamp.tz_localize(UTC) if stamp.tzinfo is None else stamp.tz_convert(UTC)
    result: datetime = stamp.to_pydatetime()
    return result


def save_forecast(
    session: Session,
    *,
    dataset_id: int | None,
    source: str,
    model: str | None,
    metric: str,
    method: str,
    history_start: datetime,
    history_end: datetime,
    demand_quantile: float | None,
    settings: dict[str, Any],
    scores: dict[str, Any],
    points: pd.DataFrame,
) -> ForecastRun:
    """Store a forecast: what was forecast and how, and its hours (``points``: ``ds``, the
    hour start in UTC, naive or aware; ``mean``; the bands; ``demand``, or no such column);
    returns the stored row, with its id."""
    run = ForecastRun(
        dataset_id=dataset_id,
        source=source,
        model=model,
        metric=metric,
        method=method,
        history_start=history_start,
        history_end=history_end,
        horizon_hours=len(points),
        demand_quantile=demand_quantile,
        settings=settings,
        scores=scores,
    )
    columns = {c: points[c].to_numpy(np.float64) for c in ("mean", *BANDS)}
    demand = points["demand"].to_numpy(np.float64) if "demand" in points else None
    for i, moment in enumerate(points["ds"]):
        run.points.append(
            ForecastPoint(
                metric=metric,
                hour_start=_utc(moment),
                **{c: float(v[i]) for c, v in columns.items()},
                demand=None if demand is None else float(demand[i]),
            )
        )
    session.add(run)
    session.flush()
    return run


def load_forecast(session: Session, forecast_id: int) -> ForecastRun:
    run = session.get(ForecastRun, forecast_id)
    if run is None:
        raise NotFoundError(f"no stored forecast #{forecast_id}")
    return run


def list_forecasts(session: Session, dataset_id: int | None = None) -> list[ForecastRun]:
    query = select(ForecastRun).order_by(ForecastRun.created_at, ForecastRun.id)
    if dataset_id is not None:
        query = query.where(ForecastRun.dataset_id == dataset_id)
    return list(session.scalars(query))


def points_frame(run: ForecastRun) -> pd.DataFrame:
    """A stored forecast's hours: ``ds`` (naive UTC), metric, mean, bands, demand."""
    rows = [
        {
            "ds": pd.Timestamp(p.hour_start).tz_convert("UTC").tz_localize(None),
            "metric": p.metric,
            "mean": p.mean,
            **{band: getattr(p, band) for band in BANDS},
            "demand": p.demand,
        }
        for p in run.points
    ]
    return pd.DataFrame(rows)
