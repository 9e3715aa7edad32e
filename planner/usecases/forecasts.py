"""Stored forecasts, shown again: the Load forecast page lists the stored forecasts
(:func:`stored_forecasts`) and opens one (:func:`open_forecast`), with the history it was
fitted on read again where it still can be (:func:`stored_history`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from planner.errors import PlannerError
from planner.forecast.run import (
    SAMPLES,
    backtest_table,
    by_day_table,
    run_label,
    run_messages,
    run_rows,
)
from planner.forecast.series import HourlySeries, _utc, read_series
from planner.paths import data_dir
from planner.store.forecast_models import ForecastRun
from planner.store.forecasts import list_forecasts, load_forecast, points_frame
from planner.usecases import SessionScope
from planner.usecases.forecast import series_from_dataset, store_scope

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


@dataclass(frozen=True)
class StoredForecast:
    """Everything the page shows of a stored forecast (plain values: cached by pickling)."""

    id: int
    label: str
    title: str
    metric: str
    method: str
    quantile: float | None
    settings: dict[str, Any]
    points: pd.DataFrame
    history: pd.DataFrame | None  # ds, y of the series it was fitted on, where still there
    backtest: pd.DataFrame
    backtest_plan: dict[str, Any] | None
    beats_baseline: bool | None
    by_day: pd.DataFrame
    tune: pd.DataFrame
    notes: list[str]
    warnings: list[str]


@dataclass(frozen=True)
class StoredForecasts:
    """The stored forecasts: one row each (what ``--demand ID`` refers to) and their labels."""

    rows: pd.DataFrame
    labels: dict[int, str]


def open_forecast(forecast_id: int, sessions: SessionScope) -> StoredForecast:
    """Stored forecast ``forecast_id`` as the page shows it, with the history it was fitted on
    read again where it still can be (:func:`stored_history`)."""
    with store_scope(sessions)() as session:
        run = load_forecast(session, forecast_id)
        points = points_frame(run)
        history = stored_history(session, run)
        notes, warnings = run_messages(run)
        scores = run.scores or {}
        backtest = scores.get("backtest")
        tuned = scores.get("tune")
        return StoredForecast(
            id=run.id,
            label=run_label(run),
            title=f"{run.metric.replace('_', ' ')} per hour, {run.source}"
            + (f", model {run.model}" if run.model else ""),
            metric=run.metric,
            method=run.method,
            quantile=run.demand_quantile,
            settings=run.settings,
            points=points,
            history=history.frame if history is not None else None,
            backtest=backtest_table(backtest),
            backtest_plan=(backtest or {}).get("plan"),
            beats_baseline=(backtest or {}).get("beats_baseline"),
            by_day=by_day_table(backtest),
            tune=pd.DataFrame((tuned or {}).get("candidates") or []),
            notes=notes,
            warnings=warnings,
        )


def stored_forecasts(sessions: SessionScope) -> StoredForecasts:
    """Every stored forecast, oldest first."""
    with store_scope(sessions)() as session:
        runs = list_forecasts(session)
        return StoredForecasts(run_rows(runs), {r.id: run_label(r) for r in runs})


def stored_history(session: Session, run: ForecastRun) -> HourlySeries | None:
    """The history a stored forecast was fitted on, read again where it still can be: its
    dataset (while it is in the store), or a series bundled in ``data/samples/`` under the
    file name it was read from. None when neither is there, or what is there now spans other
    hours than the fit's (another file of that name, a dataset changed since)."""
    try:
        if run.dataset_id is not None and run.source.startswith("dataset "):
            series = series_from_dataset(
                session, run.source.removeprefix("dataset "), metric=run.metric, model=run.model
            )
            if series.dataset_id != run.dataset_id:
                return None
        else:
            kind, _, name = run.source.partition(" ")
            path = data_dir() / SAMPLES / name
            if kind not in ("ServeGen", "file") or not name or not path.is_file():
                return None
            series = read_series(path, model=run.model)
            if series.metric != run.metric:
                return None
    except (PlannerError, ValueError):
        return None
    if series.start != _utc(run.history_start) or series.end != _utc(run.history_end):
        return None
    return series
