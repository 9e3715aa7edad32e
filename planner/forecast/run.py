"""A forecast run as ``planner forecast`` and the dashboard's Load forecast page make it, on
values: plan the backtest, backtest (or tune) against the seasonal-naive baseline, fit, scale
the bands to what the backtest covered, read the demand curve at the planning quantile, and
the record the store keeps of it (:meth:`ForecastRunResult.record`). Reading a dataset and
storing are ``planner.usecases.forecast``'s.

Also what the page needs to show a stored run again: its backtest scores as a table, its notes,
its label, and the demand curve as the CSV ``simulate --rates`` and ``recommend --demand`` read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from planner.common.uploads import uploaded_file
from planner.errors import NotFoundError, UsageError
from planner.forecast.backtest import (
    DEFAULT_MAX_CUTOFFS,
    BacktestPlan,
    BacktestResult,
    TuneResult,
    backtest,
    calibrate,
    candidates,
    plan_backtest,
    tune,
)
from planner.forecast.model import (
    BANDS,
    MIN_HISTORY_HOURS,
    Forecast,
    ForecastSettings,
    check_quantile,
    forecast,
)
from planner.forecast.series import (
    SERVEGEN_COLUMNS,
    HourlySeries,
    SeriesReport,
    _utc,
    hourly_csv_text,
    read_series,
)
from planner.paths import data_dir
from planner.workload.hourly_csv import csv_rows, read_text

# Longest horizon: an hourly forecast a year out is already mostly trend and noise, and every
# forecast hour keeps its predictive draws (1,000 floats) in memory.
MAX_HORIZON_HOURS = 365 * 24
SAMPLES = "samples"  # the bundled series live in data/samples/

#: ``progress(stage, done, total)``: stage is "tuning" or "backtesting"; done of total fits.
RunProgress = Callable[[str, int, int], None]


# --- the series ------------------------------------------------------------------------------


def check_source(dataset: str | None, series_file: Path | str | None) -> None:
    if (dataset is None) == (series_file is None):
        raise UsageError("give exactly one of --dataset NAME or --series FILE.csv")


def read_series_upload(name: str, data: bytes, *, model: str | None = None) -> HourlySeries:
    """A series from an uploaded file's name and bytes, read exactly as ``--series`` reads a
    file; errors name the uploaded file (not where it was put to be read)."""
    with uploaded_file(name, data) as path:
        return read_series(path, model=model)


def series_models(path: Path | str) -> list[str]:
    """The models a series file holds: ServeGen's model names (``--model`` picks one), or none
    for a ``ds,y`` file (a series of one model)."""
    path = Path(path)
    text = read_text(path, "a CSV with columns ds,y")
    rows = csv_rows(path, text)
    header = next(iter(rows), None)
    if header is None:
        return []
    names = [h.strip().lower() for h in header[2]]
    if not set(SERVEGEN_COLUMNS) <= set(names):
        return []
    column = names.index("model")
    found = {fields[column].strip() for _row, _line, fields in rows if len(fields) > column}
    return sorted(m for m in found if m)


def series_upload_models(name: str, data: bytes) -> list[str]:
    """:func:`series_models` of an uploaded file."""
    with uploaded_file(name, data) as path:
        return series_models(path)


def bundled_series() -> list[Path]:
    """The series files bundled in ``data/samples/`` (ServeGen's rates, any ``ds,y``)."""
    folder = data_dir() / SAMPLES
    return sorted(p for p in folder.glob("*.csv") if p.is_file()) if folder.is_dir() else []


# --- fitting ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BacktestOptions:
    """How to check a forecast before trusting it (the CLI's backtest options).

    ``wanted``: None backtests when the history allows (skipped with a note otherwise); True
    makes an impossible backtest an error; False skips it. ``horizon_hours`` and
    ``initial_hours`` default as :func:`plan_backtest` says.
    """

    wanted: bool | None = None
    tune: bool = False
    horizon_hours: int | None = None
    initial_hours: int | None = None
    cutoffs: int = DEFAULT_MAX_CUTOFFS
    calibrate: bool = True

    def validate(self) -> None:
        if self.tune and self.wanted is False:
            raise UsageError("--tune chooses settings by backtest; it cannot go with --no-backtest")
        if self.cutoffs < 1:
            raise UsageError(f"{self.cutoffs} backtest cutoffs: expected at least one")


def plan_for(
    series: HourlySeries, settings: ForecastSettings, options: BacktestOptions
) -> tuple[BacktestPlan | None, str | None]:
    """The backtest plan, or None and why not. Asked for explicitly (or by tuning), a backtest
    that cannot be done is an error; by default it is skipped with a note."""
    if options.wanted is False:
        return None, None
    insist = bool(options.wanted or options.tune)
    if series.observed_hours < MIN_HISTORY_HOURS:
        if insist:
            raise UsageError(
                f"{series.label}: {series.observed_hours} observed hour(s) are too few to "
                f"backtest (each fit needs {MIN_HISTORY_HOURS})"
            )
        return None, "no backtest: the history is too short"
    try:
        plan = plan_backtest(
            series,
            horizon_hours=options.horizon_hours,
            initial_hours=options.initial_hours,
            max_cutoffs=options.cutoffs,
            forecast_horizon_hours=settings.horizon_hours,
        )
    except UsageError as exc:
        if insist:
            raise
        return None, f"no backtest: {exc}"
    return plan, None


@dataclass
class ForecastRunResult:
    """A fitted forecast with its backtest (or tuning) and its demand curve at ``quantile``."""

    result: Forecast
    checked: BacktestResult | None
    tuned: TuneResult | None
    quantile: float
    demand: pd.DataFrame  # ds, y

    def record(self) -> dict[str, Any]:
        """What the store keeps of this run (see :func:`forecast_record`)."""
        return forecast_record(
            self.result, backtest=self.checked, tuned=self.tuned, quantile=self.quantile
        )


def fit_forecast(
    series: HourlySeries,
    settings: ForecastSettings,
    options: BacktestOptions | None = None,
    *,
    quantile: float = 0.9,
    allow_baseline: bool = False,
    progress: RunProgress | None = None,
) -> ForecastRunResult:
    """Backtest (or tune) ``settings`` on ``series`` against the seasonal-naive baseline, fit
    and forecast, scale the bands to the width that covered 80% in the backtest, and read the
    demand curve at ``quantile``. Nothing is stored (see :func:`store_run`)."""
    options = options or BacktestOptions()
    options.validate()
    check_quantile(quantile)
    settings.validate()
    plan, skipped = plan_for(series, settings, options)
    tuned: TuneResult | None = None
    checked: BacktestResult | None = None

    def report(stage: str) -> Callable[[int, int], None] | None:
        if progress is None:
            return None
        return lambda done, total: progress(stage, done, total)

    if plan is not None and options.tune:
        if progress is not None:
            progress("tuning", 0, len(candidates(settings, series.hours)) * len(plan.cutoffs))
        tuned = tune(series, settings, plan, progress=report("tuning"))
        settings = tuned.best
        checked = tuned.best_backtest
    elif plan is not None:
        if progress is not None:
            progress("backtesting", 0, len(plan.cutoffs))
        checked = backtest(series, settings, plan, progress=report("backtesting"))
    result = forecast(series, settings, allow_baseline=allow_baseline)
    if checked is not None and options.calibrate and result.method == "prophet":
        result = calibrate(result, checked)
    if skipped:
        result.notes.append(skipped)
    if checked is not None and not checked.beats_baseline:
        result.warnings.append(
            f"in the backtest Prophet's MAPE ({checked.prophet.mape:.1%}) is no better than "
            f"the seasonal-naive baseline's ({checked.baseline.mape:.1%}): "
            + ("" if options.tune else "try --tune, or ")
            + "plan with the baseline's view of next week in mind"
        )
    return ForecastRunResult(result, checked, tuned, quantile, result.demand(quantile))


def forecast_record(
    result: Forecast,
    *,
    backtest: BacktestResult | None = None,
    tuned: TuneResult | None = None,
    quantile: float | None = None,
) -> dict[str, Any]:
    """What the store keeps of ``result`` (the keywords of
    :func:`planner.store.forecasts.save_forecast`): its settings, the backtest and tuning
    scores, and every hour with the demand at ``quantile``."""
    scores: dict[str, Any] = {
        "backtest": backtest.to_dict(result.series) if backtest is not None else None,
        "tune": tuned.to_dict() if tuned is not None else None,
        "series": result.series.report.to_dict(),
        "notes": result.notes,
        "warnings": result.warnings,
    }
    settings = result.settings.to_dict()
    settings["growth_resolved"] = result.growth
    points = result.points[["ds", "mean", *BANDS]].copy()
    if quantile is not None:
        points["demand"] = result.demand(quantile)["y"].to_numpy(np.float64)
    return {
        "dataset_id": result.series.dataset_id,
        "source": result.series.source,
        "model": result.series.model,
        "metric": result.metric,
        "method": result.method,
        "history_start": result.series.start,
        "history_end": result.series.end,
        "demand_quantile": quantile,
        "settings": settings,
        "scores": scores,
        "points": points,
    }


# --- a stored run, shown again ---------------------------------------------------------------


class StoredRun(Protocol):
    """What the page shows of a stored forecast (``planner.store.forecast_models.ForecastRun``)."""

    @property
    def id(self) -> int: ...
    @property
    def source(self) -> str: ...
    @property
    def model(self) -> str | None: ...
    @property
    def metric(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def horizon_hours(self) -> int: ...
    @property
    def demand_quantile(self) -> float | None: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def scores(self) -> dict[str, Any]: ...


def run_label(run: StoredRun) -> str:
    """``#1 · ServeGen servegen_rates_10min.csv · m-small · requests · 2026-12-01 10:00``."""
    parts = [f"#{run.id}", run.source]
    if run.model:
        parts.append(run.model)
    parts.append(run.metric)
    parts.append(f"{_utc(run.created_at):%Y-%m-%d %H:%M} UTC")
    return " · ".join(parts)


def run_rows(runs: Sequence[StoredRun]) -> pd.DataFrame:
    """One row per stored forecast: what the page's picker and ``--demand ID`` refer to."""
    return pd.DataFrame(
        [
            {
                "id": r.id,
                "source": r.source,
                "model": r.model or "all",
                "metric": r.metric,
                "method": r.method,
                "horizon_hours": r.horizon_hours,
                "demand_quantile": r.demand_quantile,
                "created": _utc(r.created_at).strftime("%Y-%m-%d %H:%M UTC"),
            }
            for r in runs
        ],
        columns=[
            "id",
            "source",
            "model",
            "metric",
            "method",
            "horizon_hours",
            "demand_quantile",
            "created",
        ],
    )


SCORE_COLUMNS = {
    "mape": "MAPE",
    "smape": "sMAPE",
    "mase": "MASE",
    "coverage_80": "80% band coverage",
    "coverage_95": "95% band coverage",
    "accuracy": "accuracy (1 - MAPE)",
    "points": "hours scored",
}


def backtest_table(backtest_scores: dict[str, Any] | None) -> pd.DataFrame:
    """A stored backtest's scores (``BacktestResult.to_dict()``): Prophet's row and the
    seasonal-naive baseline's ("same hour last week") on the same hours. Shares stay shares
    (0.12 = 12%); a score that could not be computed is NaN. Empty without a backtest."""
    columns = ["method", *SCORE_COLUMNS.values()]
    if not backtest_scores:
        return pd.DataFrame(columns=columns)
    rows = []
    for key, name in (
        ("prophet", "Prophet"),
        ("baseline", f"baseline: {backtest_scores.get('baseline_name', 'seasonal naive')}"),
    ):
        scores = backtest_scores.get(key) or {}
        row: dict[str, Any] = {"method": name}
        for field_name, title in SCORE_COLUMNS.items():
            value = scores.get(field_name)
            row[title] = math.nan if value is None else value
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def by_day_table(backtest_scores: dict[str, Any] | None) -> pd.DataFrame:
    """MAPE by day ahead in a stored backtest, Prophet beside the baseline."""
    columns = ["day ahead", "Prophet MAPE", "baseline MAPE", "hours scored"]
    rows = (backtest_scores or {}).get("by_day") or []
    return pd.DataFrame(
        [
            [
                r["day_ahead"],
                math.nan if r["prophet_mape"] is None else r["prophet_mape"],
                math.nan if r["baseline_mape"] is None else r["baseline_mape"],
                r["points"],
            ]
            for r in rows
        ],
        columns=columns,
    )


def run_messages(run: StoredRun) -> tuple[list[str], list[str]]:
    """(notes, warnings) of a stored forecast: what the series held (gaps, zeros) and how it
    was fitted, as ``planner forecast`` prints them."""
    scores = run.scores or {}
    notes: list[str] = []
    if scores.get("series"):
        notes.extend(SeriesReport.from_dict(scores["series"]).lines())
    notes.extend(scores.get("notes") or [])
    return notes, list(scores.get("warnings") or [])


def demand_frame(points: pd.DataFrame) -> pd.DataFrame:
    """A stored forecast's demand curve (``ds``, ``y``) from its points (see
    :func:`planner.store.forecasts.points_frame`)."""
    if points.empty or "demand" not in points or points["demand"].isna().any():
        raise NotFoundError("this forecast has no demand curve stored; fit it again")
    return pd.DataFrame({"ds": points["ds"], "y": points["demand"].astype(np.float64)})


def demand_csv(curve: pd.DataFrame) -> str:
    """A demand curve as the ``ds,y`` CSV ``planner simulate --rates`` and ``planner recommend
    --demand`` read (what ``planner forecast --demand-out`` writes)."""
    return hourly_csv_text(curve["ds"], curve["y"].to_numpy(np.float64))
