"""Rolling-origin backtests with Prophet's own cross-validation, next to the seasonal-naive
baseline on exactly the same cutoffs and hours, and tuning of the settings by backtest.

At each cutoff Prophet is refitted on the hours up to it (``prophet.diagnostics
.cross_validation``) and forecasts the next ``horizon_hours``; the baseline forecasts the same
hours from the same history (the same hour a week earlier). Scores: MAPE, sMAPE, MASE (errors
over the in-sample mean absolute weekly difference up to each cutoff) and the share of actual
hours inside the 80% and 95% bands. Missing hours are never scored; zero hours are left out of
MAPE only (it divides by the actual value).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from prophet.diagnostics import cross_validation

from planner.errors import UsageError
from planner.forecast import baseline
from planner.forecast.model import (
    BANDS,
    MIN_HISTORY_HOURS,
    Forecast,
    ForecastSettings,
    build_prophet,
    prophet_frame,
    seeded,
    untransform,
)
from planner.forecast.series import HourlySeries, iso_hour

Progress = Callable[[int, int], None]
DEFAULT_MAX_CUTOFFS = 5
# The tuning grid: Prophet's documented useful ranges, kept small (every cell is a backtest).
DEFAULT_GRID: dict[str, tuple[Any, ...]] = {
    "changepoint_prior_scale": (0.01, 0.05, 0.15, 0.5),
    "seasonality_prior_scale": (1.0, 10.0),
    "seasonality_mode": ("additive", "multiplicative"),
}


@dataclass(frozen=True)
class BacktestPlan:
    """Where the backtest cuts: forecasts from each cutoff hour for ``horizon_hours`` hours."""

    horizon_hours: int
    initial_hours: int
    period_hours: int
    cutoffs: tuple[int, ...]  # positions in the series of the last hour each fit sees

    def to_dict(self, series: HourlySeries | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "horizon_hours": self.horizon_hours,
            "initial_hours": self.initial_hours,
            "period_hours": self.period_hours,
            "cutoff_positions": list(self.cutoffs),
        }
        if series is not None:
            data["cutoffs"] = [iso_hour(series.frame["ds"].iloc[c]) for c in self.cutoffs]
        return data


def plan_backtest(
    series: HourlySeries,
    *,
    horizon_hours: int | None = None,
    initial_hours: int | None = None,
    period_hours: int | None = None,
    max_cutoffs: int = DEFAULT_MAX_CUTOFFS,
    forecast_horizon_hours: int | None = None,
) -> BacktestPlan:
    """Cutoffs for a rolling-origin backtest of ``series``.

    Defaults: horizon the forecast's horizon, at most a week and at most a quarter of the history
    (whole days); initial window half the history (at least two days); a cutoff a day; the latest
    ``max_cutoffs`` cutoffs.
    """
    # Prophet's history ends at the last hour with a value (hours without one, e.g. a last
    # hour left out as partial, are skipped), and every cutoff's horizon must end inside it
    observed = np.flatnonzero(~np.isnan(np.asarray(series.values, dtype=np.float64)))
    n = int(observed[-1]) + 1 if len(observed) else 0
    if horizon_hours is None:
        quarter_days = max(1, n // 4 // 24) * 24
        horizon_hours = min(forecast_horizon_hours or 7 * 24, 7 * 24, quarter_days)
    if initial_hours is None:
        initial_hours = max(n // 2, MIN_HISTORY_HOURS)
    if period_hours is None:
        period_hours = 24
    for name, value in (
        ("horizon", horizon_hours),
        ("initial window", initial_hours),
        ("period", period_hours),
    ):
        if value < 1:
            raise UsageError(f"backtest {name} {value} h: expected at least one hour")
    if initial_hours < MIN_HISTORY_HOURS:
        raise UsageError(
            f"backtest initial window {initial_hours} h: each fit needs at least "
            f"{MIN_HISTORY_HOURS} hours (two days)"
        )
    if max_cutoffs < 1:
        raise UsageError("a backtest needs at least one cutoff")
    last = n - 1 - horizon_hours
    first = initial_hours - 1
    if last < first:
        raise UsageError(
            f"{series.label}: {n} hours are too few to backtest a {horizon_hours} h horizon after "
            f"an initial {initial_hours} h (needs {initial_hours + horizon_hours}); shorten the "
            "backtest horizon or the initial window, or use --no-backtest"
        )
    cutoffs = list(range(last, first - 1, -period_hours))[:max_cutoffs]
    return BacktestPlan(horizon_hours, initial_hours, period_hours, tuple(sorted(cutoffs)))


def holdout_plan(series: HourlySeries, test_hours: int) -> BacktestPlan:
    """One cutoff: fit on all but the last ``test_hours`` hours, forecast those."""
    return BacktestPlan(
        horizon_hours=test_hours,
        initial_hours=series.hours - test_hours,
        period_hours=test_hours,
        cutoffs=(series.hours - test_hours - 1,),
    )


@dataclass(frozen=True)
class Scores:
    """Accuracy of one method over a backtest's scored hours."""

    mape: float  # mean absolute percentage error, as a share (0.12 = 12%)
    smape: float
    mase: float
    mae: float
    coverage_80: float  # share of actual hours inside the 80% band
    coverage_95: float
    points: int  # hours scored
    mape_points: int  # hours with a non-zero actual (MAPE's)

    @property
    def accuracy(self) -> float:
        """1 - MAPE: the "accuracy" articles quote."""
        return 1.0 - self.mape

    def to_dict(self) -> dict[str, Any]:
        return {
            "mape": _round(self.mape),
            "smape": _round(self.smape),
            "mase": _round(self.mase),
            "mae": _round(self.mae, 3),
            "coverage_80": _round(self.coverage_80),
            "coverage_95": _round(self.coverage_95),
            "accuracy": _round(self.accuracy),
            "points": self.points,
            "mape_points": self.mape_points,
        }


def _round(value: float, digits: int = 5) -> float | None:
    return None if not math.isfinite(value) else round(value, digits)


def score(frame: pd.DataFrame, prefix: str) -> Scores:
    """Scores of columns ``{prefix}mean`` and bands against ``y``; ``scale`` divides for MASE."""
    y = frame["y"].to_numpy(np.float64)
    mean = frame[f"{prefix}mean"].to_numpy(np.float64)
    error = np.abs(mean - y)
    nonzero = y > 0
    denominator = np.abs(y) + np.abs(mean)
    smape_terms = np.where(
        denominator > 0, 2 * error / np.where(denominator > 0, denominator, 1), 0
    )
    scale = frame["scale"].to_numpy(np.float64)
    scaled = np.isfinite(scale) & (scale > 0)

    def inside(width: int) -> float:
        low = frame[f"{prefix}lower_{width}"].to_numpy(np.float64)
        high = frame[f"{prefix}upper_{width}"].to_numpy(np.float64)
        return float(np.mean((y >= low) & (y <= high))) if len(y) else math.nan

    return Scores(
        mape=float(np.mean(error[nonzero] / y[nonzero])) if nonzero.any() else math.nan,
        smape=float(np.mean(smape_terms)) if len(y) else math.nan,
        mase=float(np.mean(error[scaled] / scale[scaled])) if scaled.any() else math.nan,
        mae=float(np.mean(error)) if len(y) else math.nan,
        coverage_80=inside(80),
        coverage_95=inside(95),
        points=len(y),
        mape_points=int(nonzero.sum()),
    )


@dataclass
class BacktestResult:
    plan: BacktestPlan
    settings: ForecastSettings
    growth: str
    prophet: Scores
    baseline: Scores
    frame: pd.DataFrame  # cutoff, ds, y, scale, prophet's and the baseline's mean and bands
    by_day: list[dict[str, Any]] = field(default_factory=list)  # MAPE by day ahead
    skipped_points: int = 0  # hours Prophet forecast but the baseline could not (no week back)
    seconds: float = 0.0
    baseline_seasons: tuple[int, ...] = (168,)  # the seasons (hours) the baseline looked back

    @property
    def baseline_name(self) -> str:
        """What the baseline was: a week back, unless some cutoff had less than a week."""
        names = {168: "same hour last week", 24: "same hour yesterday", 1: "previous hour"}
        if len(self.baseline_seasons) == 1:
            return names.get(self.baseline_seasons[0], "seasonal naive")
        return "seasonal naive (" + ", ".join(f"{s} h" for s in self.baseline_seasons) + ")"

    @property
    def beats_baseline(self) -> bool:
        return self.prophet.mape < self.baseline.mape

    def to_dict(self, series: HourlySeries | None = None) -> dict[str, Any]:
        return {
            "plan": self.plan.to_dict(series),
            "growth": self.growth,
            "prophet": self.prophet.to_dict(),
            "baseline": self.baseline.to_dict(),
            "beats_baseline": self.beats_baseline,
            "baseline_name": self.baseline_name,
            "by_day": self.by_day,
            "skipped_points": self.skipped_points,
            "seconds": round(self.seconds, 3),
        }


def backtest(
    series: HourlySeries,
    settings: ForecastSettings | None = None,
    plan: BacktestPlan | None = None,
    *,
    progress: Progress | None = None,
) -> BacktestResult:
    """Backtest Prophet with ``settings`` on ``series`` at ``plan``'s cutoffs, and the baseline on
    the same hours. ``progress(done, total)`` is called after each cutoff."""
    settings = settings or ForecastSettings()
    settings.validate()
    plan = plan or plan_backtest(series, forecast_horizon_hours=settings.horizon_hours)
    began = time.perf_counter()
    growth = settings.resolved_growth(series.hours)
    train = prophet_frame(series, settings, growth)
    model = build_prophet(settings, growth, series.hours)
    ds = series.frame["ds"]
    horizon = pd.Timedelta(hours=plan.horizon_hours)
    parts = []
    with seeded(settings.seed):
        model.fit(train)  # cross_validation copies a fitted model's settings and history
        for done, cutoff in enumerate(plan.cutoffs, start=1):
            predicted = cross_validation(
                model,
                horizon=horizon,
                cutoffs=[ds.iloc[cutoff]],
                parallel=None,
                disable_tqdm=True,
                extra_output_columns=list(BANDS),
            )
            parts.append(_with_baseline(series, cutoff, predicted, settings, plan.horizon_hours))
            if progress is not None:
                progress(done, len(plan.cutoffs))
    frame = pd.concat(parts, ignore_index=True)
    usable = frame["b_mean"].notna()
    scored = frame[usable].reset_index(drop=True)
    if scored.empty:
        raise UsageError(f"{series.label}: the backtest found no hours to score")
    return BacktestResult(
        plan=plan,
        settings=settings,
        growth=growth,
        prophet=score(scored, "p_"),
        baseline=score(scored, "b_"),
        frame=scored,
        by_day=_by_day(scored),
        skipped_points=int((~usable).sum()),
        seconds=time.perf_counter() - began,
        baseline_seasons=tuple(sorted({baseline.season_for(c + 1) for c in plan.cutoffs})),
    )


def _with_baseline(
    series: HourlySeries,
    cutoff: int,
    predicted: pd.DataFrame,
    settings: ForecastSettings,
    horizon_hours: int,
) -> pd.DataFrame:
    """One cutoff's Prophet forecasts joined with the actuals and the baseline's forecasts."""
    history = series.values[: cutoff + 1]
    season = baseline.season_for(len(history))
    points, steps = baseline.naive_points(history, horizon_hours, season)
    bands = baseline.naive_bands(points, steps, baseline.naive_sigma(history, season))
    ds = series.frame["ds"].iloc[cutoff + 1 : cutoff + 1 + horizon_hours].to_numpy()
    naive = pd.DataFrame({"ds": ds, "b_mean": points, **{f"b_{k}": v for k, v in bands.items()}})
    naive["y"] = series.values[cutoff + 1 : cutoff + 1 + horizon_hours]
    naive["ahead"] = np.arange(1, len(ds) + 1)
    mase_season = baseline.WEEK_HOURS if len(history) > baseline.WEEK_HOURS else baseline.DAY_HOURS
    naive["scale"] = baseline.naive_scale(history, mase_season)
    ours = pd.DataFrame({"ds": predicted["ds"]})
    ours["p_mean"] = untransform(predicted["yhat"].to_numpy(np.float64), settings)
    for column in BANDS:
        ours[f"p_{column}"] = untransform(predicted[column].to_numpy(np.float64), settings)
    # Prophet forecasts only hours with an observed value, so the join keeps exactly those.
    joined = ours.merge(naive, on="ds", how="left")
    joined.insert(0, "cutoff", series.frame["ds"].iloc[cutoff])
    return joined[joined["y"].notna()]


def _by_day(frame: pd.DataFrame) -> list[dict[str, Any]]:
    rows = []
    day = (frame["ahead"].to_numpy() - 1) // 24 + 1
    for d in np.unique(day):
        part = frame[day == d]
        rows.append(
            {
                "day_ahead": int(d),
                "prophet_mape": _round(score(part, "p_").mape),
                "baseline_mape": _round(score(part, "b_").mape),
                "points": len(part),
            }
        )
    return rows


def band_scale(result: BacktestResult, level: int = 80) -> float:
    """How much Prophet's bands must widen (or narrow) for the ``level``% band to have covered
    ``level``% of the backtest's hours: that quantile of ``|actual - mean|`` over the band's
    half-width. Prophet's noise is independent hour to hour, so on real traffic, whose errors
    come in runs, its bands are usually too narrow."""
    frame = result.frame
    half = (frame[f"p_upper_{level}"] - frame[f"p_lower_{level}"]).to_numpy(np.float64) / 2
    error = (frame["y"] - frame["p_mean"]).abs().to_numpy(np.float64)
    usable = half > 0
    if usable.sum() < 10:
        return 1.0
    return float(np.quantile(error[usable] / half[usable], level / 100))


def calibrate(result: Forecast, checked: BacktestResult, level: int = 80) -> Forecast:
    """``result`` with its bands scaled by :func:`band_scale` of ``checked``, the backtest of
    the same settings: the ``level``% band then has the width that covered ``level``% of the
    backtest's hours."""
    factor = band_scale(checked, level)
    covered = getattr(checked.prophet, f"coverage_{level}")
    why = (
        f"Prophet's {level}% band covered {covered:.0%} of the backtest's hours; scaled to the "
        f"width that covered {level}%"
    )
    return result.widened(factor, why)


# --- tuning ----------------------------------------------------------------------------------


@dataclass
class TuneResult:
    best: ForecastSettings
    best_backtest: BacktestResult
    table: list[dict[str, Any]]  # one row per candidate: its settings and scores, best first

    def to_dict(self) -> dict[str, Any]:
        return {"best": _grid_values(self.best), "candidates": self.table}


def _grid_values(settings: ForecastSettings) -> dict[str, Any]:
    return {
        "growth": settings.growth,
        "changepoint_prior_scale": settings.changepoint_prior_scale,
        "seasonality_prior_scale": settings.seasonality_prior_scale,
        "seasonality_mode": settings.seasonality_mode,
    }


def candidates(
    settings: ForecastSettings,
    history_hours: int,
    grid: Mapping[str, Sequence[Any]] | None = None,
) -> list[ForecastSettings]:
    """The settings to try: ``settings`` with each combination of ``grid`` values.

    Growth is not tuned: ``auto`` is resolved for the history first. A flat trend has no
    changepoints, so with flat growth the changepoint prior is left out of the grid.
    """
    grid = dict(grid or DEFAULT_GRID)
    unknown = set(grid) - {"changepoint_prior_scale", "seasonality_prior_scale", "seasonality_mode"}
    if unknown:
        raise UsageError(f"cannot tune {', '.join(sorted(unknown))}")
    growth = settings.resolved_growth(history_hours)
    if growth == "flat":
        grid["changepoint_prior_scale"] = (settings.changepoint_prior_scale,)
    names = list(grid)
    result: list[ForecastSettings] = []
    for values in itertools.product(*(grid[n] for n in names)):
        candidate = replace(settings, growth=growth, **dict(zip(names, values, strict=True)))
        candidate.validate()
        result.append(candidate)
    return result


def tune(
    series: HourlySeries,
    settings: ForecastSettings | None = None,
    plan: BacktestPlan | None = None,
    *,
    grid: Mapping[str, Sequence[Any]] | None = None,
    progress: Progress | None = None,
) -> TuneResult:
    """Backtest every candidate of :func:`candidates` on the same cutoffs; the lowest MAPE wins
    (sMAPE breaks ties). ``progress(done, total)`` counts cutoffs over all candidates."""
    settings = settings or ForecastSettings()
    settings.validate()
    plan = plan or plan_backtest(series, forecast_horizon_hours=settings.horizon_hours)
    options = candidates(settings, series.hours, grid)
    total = len(options) * len(plan.cutoffs)
    results: list[BacktestResult] = []
    for i, candidate in enumerate(options):

        def step(done: int, _total: int, offset: int = i * len(plan.cutoffs)) -> None:
            if progress is not None:
                progress(offset + done, total)

        results.append(backtest(series, candidate, plan, progress=step))
    order = sorted(
        range(len(results)), key=lambda k: (results[k].prophet.mape, results[k].prophet.smape)
    )
    table = [
        {
            **_grid_values(results[k].settings),
            **results[k].prophet.to_dict(),
            "beats_baseline": results[k].beats_baseline,
        }
        for k in order
    ]
    best = results[order[0]]
    return TuneResult(best=best.settings, best_backtest=best, table=table)
