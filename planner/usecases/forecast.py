"""Forecast: fit an hourly load forecast and store it.

``planner forecast`` and the Load forecast page's fit both build a :class:`ForecastRequest` and
call :func:`forecast`: the request is checked first (the source, the metric, the quantile, the
backtest options, the settings and the output paths: no store is opened and no fit is made for
a request that cannot run), then the series is read (a dataset's hours from the store, a file,
or an upload), backtested and fitted on values (:func:`planner.forecast.run.fit_forecast`), the
files written (each whole or not at all, so a failed write stores nothing), and the forecast
stored. The page shows a stored forecast with
:func:`planner.usecases.forecasts.open_forecast`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from planner.access import Action, require
from planner.common.files import check_output_path
from planner.errors import UsageError
from planner.forecast.demand import write_demand_curve
from planner.forecast.model import ForecastSettings, check_quantile
from planner.forecast.run import (
    BacktestOptions,
    ForecastRunResult,
    RunProgress,
    check_source,
    fit_forecast,
    read_series_upload,
)
from planner.forecast.series import HourlySeries, check_metric, read_series, series_from_hours
from planner.store.forecasts import dataset_hours, save_forecast
from planner.usecases import SessionScope
from planner.usecases.audit import record

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


@dataclass(frozen=True)
class ForecastRequest:
    """One forecast: where its series comes from (exactly one of ``dataset``, ``series_file``
    or ``upload``, an uploaded file's name and bytes), how to fit and check it, and the files
    to write besides storing it."""

    settings: ForecastSettings
    dataset: str | None = None
    series_file: Path | None = None
    upload: tuple[str, bytes] | None = None
    model: str | None = None
    metric: str = "requests"
    gaps: tuple[tuple[datetime, datetime], ...] = ()
    zeros_as_gaps: bool = False
    checks: BacktestOptions = field(default_factory=BacktestOptions)
    quantile: float = 0.9
    allow_baseline: bool = False
    demand_out: Path | None = None
    plot: Path | None = None

    def check(self) -> None:
        """Everything that can be checked before the store is opened or a fit made."""
        if self.upload is not None:
            if self.dataset is not None or self.series_file is not None:
                raise UsageError("give exactly one series: a dataset, a file or an upload")
        else:
            check_source(self.dataset, self.series_file)
        self.checks.validate()
        check_metric(self.metric)
        check_quantile(self.quantile)
        # Output files are checked before any work, so a bad path never costs a fit.
        if self.demand_out is not None:
            check_output_path(self.demand_out, "--demand-out")
        if self.plot is not None:
            check_output_path(self.plot, "--plot")
        self.settings.validate()


@dataclass
class ForecastResult:
    """A stored forecast run: the series it was fitted on (gaps flagged), the fit with its
    backtest and demand curve, and its id in the store."""

    series: HourlySeries
    fitted: ForecastRunResult
    forecast_id: int


def forecast(
    request: ForecastRequest, sessions: SessionScope, *, progress: RunProgress | None = None
) -> ForecastResult:
    """Fit, write and store the forecast ``request`` asks for; ``progress(stage, done, total)``
    counts the backtest's (or tuning's) fits."""
    request.check()
    require(Action.FORECAST)
    series = _series(request, sessions)
    fitted = fit_forecast(
        series,
        request.settings,
        request.checks,
        quantile=request.quantile,
        allow_baseline=request.allow_baseline,
        progress=progress,
    )
    # The files first (each written whole or not at all), so a write that fails leaves
    # nothing stored behind the error.
    if request.demand_out is not None:
        write_demand_curve(fitted.demand, request.demand_out, "--demand-out")
    if request.plot is not None:
        from planner.forecast.plot import write_html  # plotly: only for a chart

        write_html(fitted.result, request.plot, fitted.demand, request.quantile, "--plot")
    with store_scope(sessions)() as session:
        forecast_id = save_forecast(session, **fitted.record()).id
    record(
        sessions, Action.FORECAST, f"forecast {forecast_id}", f"{series.metric} of {series.source}"
    )
    if request.demand_out is not None and request.metric != "requests":
        fitted.result.notes.append(
            f"the demand curve holds {request.metric} per hour; `planner simulate --rates` "
            "reads y as requests per hour"
        )
    return ForecastResult(series, fitted, forecast_id)


def _series(request: ForecastRequest, sessions: SessionScope) -> HourlySeries:
    """The series ``request`` names, with its gaps flagged."""
    if request.upload is not None:
        name, data = request.upload
        series = read_series_upload(name, data, model=request.model)
    elif request.dataset is not None:
        with store_scope(sessions)() as session:
            series = load_series(
                session, dataset=request.dataset, model=request.model, metric=request.metric
            )
    else:
        series = load_series(
            None, series_file=request.series_file, model=request.model, metric=request.metric
        )
    if request.gaps:
        series = series.with_gaps(request.gaps)
    if request.zeros_as_gaps:
        series = series.zeros_as_gaps()
    return series


def store_scope(sessions: SessionScope) -> Callable[[], AbstractContextManager[Session]]:
    """``sessions``, refusing to run without a store (a forecast is stored)."""

    @contextmanager
    def opened() -> Iterator[Session]:
        with sessions() as session:
            if session is None:
                raise UsageError("a forecast needs a store: there is none to keep it in")
            yield session

    return opened


# --- the series ------------------------------------------------------------------------------


def load_series(
    session: Session | None,
    *,
    dataset: str | None = None,
    series_file: Path | str | None = None,
    model: str | None = None,
    metric: str = "requests",
) -> HourlySeries:
    """The series to forecast: a dataset's hourly ``metric`` (one ``model``'s or all summed), or
    a series file (``ds,y``, or ServeGen's rates file with ``model`` picking one series)."""
    check_source(dataset, series_file)
    check_metric(metric)
    if dataset is not None:
        if session is None:
            raise ValueError("reading a dataset needs a store session")
        return series_from_dataset(session, dataset, metric=metric, model=model)
    assert series_file is not None
    if metric != "requests":
        raise UsageError(
            f"--metric {metric}: a series file holds one metric, read as given; "
            "--metric applies to datasets"
        )
    return read_series(series_file, model=model)


def series_from_dataset(
    session: Session, name: str, *, metric: str = "requests", model: str | None = None
) -> HourlySeries:
    """The hourly ``metric`` of dataset ``name`` (one ``model``'s, or all models' summed),
    summed in SQL (see :func:`planner.forecast.series.series_from_hours`)."""
    check_metric(metric)
    hours = dataset_hours(session, name)
    return series_from_hours(
        name,
        hours.table,
        hours.first_us,
        hours.last_us,
        dataset_id=hours.dataset_id,
        metric=metric,
        model=model,
    )
