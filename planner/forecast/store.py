"""Saving forecasts to the store and reading them back."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from planner.errors import NotFoundError
from planner.forecast.backtest import BacktestResult, TuneResult
from planner.forecast.model import BANDS, Forecast
from planner.forecast.series import _utc
from planner.store.forecast_models import ForecastPoint, ForecastRun


def save_forecast(
    session: Session,
    result: Forecast,
    *,
    backtest: BacktestResult | None = None,
    tuned: TuneResult | None = None,
    quantile: float | None = None,
) -> ForecastRun:
    """Store ``result`` (its settings, the backtest and tuning scores, and every hour with the
    demand at ``quantile``); returns the stored row, with its id."""
    demand = result.demand(quantile)["y"].to_numpy(np.float64) if quantile is not None else None
    scores: dict[str, Any] = {
        "backtest": backtest.to_dict(result.series) if backtest is not None else None,
        "tune": tuned.to_dict() if tuned is not None else None,
        "series": result.series.report.to_dict(),
        "notes": result.notes,
        "warnings": result.warnings,
    }
    settings = result.settings.to_dict()
    settings["growth_resolved"] = result.growth
    run = ForecastRun(
        dataset_id=result.series.dataset_id,
        source=result.series.source,
        model=result.series.model,
        metric=result.metric,
        method=result.method,
        history_start=result.series.start,
        history_end=result.series.end,
        horizon_hours=len(result.points),
        demand_quantile=quantile,
        settings=settings,
        scores=scores,
    )
    columns = {c: result.points[c].to_numpy(np.float64) for c in ("mean", *BANDS)}
    for i, moment in enumerate(result.points["ds"]):
        run.points.append(
            ForecastPoint(
                metric=result.metric,
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
