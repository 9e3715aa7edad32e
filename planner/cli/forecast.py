"""``planner forecast``."""

from __future__ import annotations

import math
import re
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from planner.cli.context import print_json, sessions_from, stderr, stdout
from planner.cli.tables import print_whole
from planner.common.text import shown
from planner.errors import UsageError

# Prophet takes half a second to import: planner.forecast loads inside the command, so the
# other commands don't pay for it.
if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from planner.forecast.backtest import BacktestResult, Scores, TuneResult
    from planner.forecast.model import Forecast
    from planner.forecast.series import HourlySeries
    from planner.usecases.forecast import ForecastRequest, ForecastResult

METRICS = ("requests", "input_tokens", "output_tokens")  # planner.forecast.series.METRICS

DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(h|d|w)\s*$")
HOURS_PER = {"h": 1, "d": 24, "w": 168}
# Longest horizon (as planner.forecast.run.MAX_HORIZON_HOURS, not imported: it loads Prophet):
# an hourly forecast a year out is already mostly trend and noise, and every forecast hour keeps
# its predictive draws (1,000 floats) in memory.
MAX_HORIZON_HOURS = 365 * 24
# Longest span any duration option may name (backtest windows are checked against the history).
MAX_HOURS = 100 * 365 * 24


def parse_hours(option: str, text: str | None, most: int = MAX_HOURS) -> int | None:
    """``48h``, ``14d``, ``2w``, ``1.5d`` -> whole hours, at most ``most``."""
    if text is None:
        return None
    match = DURATION.match(text.lower())
    hours = float(match.group(1)) * HOURS_PER[match.group(2)] if match else 0.0
    if not match or not math.isfinite(hours) or hours < 1 or hours != int(hours):
        raise UsageError(f"{option} {shown(text)}: expected whole hours such as 48h, 14d or 2w")
    if hours > most:
        raise UsageError(
            f"{option} {shown(text)}: {hours:,.0f} hours is too far; at most {most:,} hours "
            f"({most // 24:,} days)"
            + (
                ": an hourly forecast further out than a year is trend and noise"
                if most == MAX_HORIZON_HOURS
                else ""
            )
        )
    return int(hours)


def _gaps(items: list[str]) -> list[tuple[datetime, datetime]]:
    from planner.ingest.options import parse_start

    ranges = []
    for item in items:
        start, sep, end = item.partition("/")
        if not sep:
            raise UsageError(
                f"--gap {shown(item)}: expected START/END in ISO 8601, "
                "e.g. 2025-01-09T15:00Z/2025-01-09T17:00Z"
            )
        lo, hi = parse_start(start, "--gap"), parse_start(end, "--gap")
        assert lo is not None and hi is not None
        ranges.append((lo, hi))
    return ranges


class _Bars:
    """A progress bar per stage of a run ("tuning", "backtesting"), counting fits, on stderr
    when it is a terminal."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.stage: str | None = None
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __enter__(self) -> _Bars:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def update(self, stage: str, done: int, total: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        if stage != self.stage:
            if self.bar is not None:
                self.bar.stop()
            self.stage = stage
            self.bar = Progress(
                TextColumn(stage),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("fits"),
                TimeElapsedColumn(),
                console=stderr,
                disable=self.quiet or not stderr.is_terminal,
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task(stage, total=total)
        assert self.bar is not None and self.task is not None
        self.bar.update(self.task, completed=done, total=total)


def forecast_command(
    ctx: typer.Context,
    dataset: str | None = typer.Option(None, "--dataset", help="Forecast an ingested dataset."),
    series_file: Path | None = typer.Option(
        None,
        "--series",
        help="Or: an hourly series CSV (ds,y), or ServeGen's 10-minute rates file.",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="One model of a multi-model log: its name as logged, or a catalog model (every "
        "log name that maps to it, e.g. llama-3.1-8b finds meta-llama/Llama-3.1-8B-Instruct); "
        "default: all models summed.",
    ),
    metric: str = typer.Option(
        "requests", "--metric", help=f"What to forecast per hour: {', '.join(METRICS)}."
    ),
    horizon: str = typer.Option("14d", "--horizon", help="How far ahead: e.g. 48h, 14d, 2w."),
    quantile: float = typer.Option(
        0.9, "--quantile", help="Planning quantile of the demand curve (0.9: 90% of outcomes)."
    ),
    do_tune: bool = typer.Option(
        False, "--tune", help="Choose the priors and seasonality mode by backtest MAPE."
    ),
    allow_baseline: bool = typer.Option(
        False,
        "--allow-baseline",
        help="Under two days of history: a seasonal-naive forecast instead of an error.",
    ),
    holidays: str | None = typer.Option(
        None, "--holidays", help="Country holidays as effects, e.g. US, GB, CN."
    ),
    seasonality_mode: str = typer.Option(
        "additive", "--seasonality-mode", help="additive or multiplicative."
    ),
    growth: str = typer.Option(
        "auto",
        "--growth",
        help="Trend: auto (linear from 28 days of history, else flat), linear, flat, logistic.",
    ),
    changepoint_prior_scale: float = typer.Option(
        0.05, "--changepoint-prior-scale", help="Trend flexibility (Prophet's; 0.001-0.5)."
    ),
    seasonality_prior_scale: float = typer.Option(
        10.0, "--seasonality-prior-scale", help="Seasonality flexibility (Prophet's; 0.01-10)."
    ),
    log: bool = typer.Option(False, "--log", help="Fit log(1 + y): growth in proportion."),
    cap: float | None = typer.Option(
        None, "--cap", help="Logistic growth up to this many (metric units) per hour."
    ),
    events: Path | None = typer.Option(
        None, "--events", help="Launch days and such: CSV name,start[,end]."
    ),
    gap: list[str] = typer.Option(
        [], "--gap", help="Flag START/END (ISO 8601) as a collection gap; repeatable."
    ),
    zeros_as_gaps: bool = typer.Option(
        False, "--zeros-as-gaps", help="Take every zero hour as a collection gap."
    ),
    run_backtest: bool | None = typer.Option(
        None,
        "--backtest/--no-backtest",
        help="Rolling-origin backtest against the seasonal-naive baseline "
        "(default: when the history allows).",
    ),
    backtest_horizon: str | None = typer.Option(
        None, "--backtest-horizon", help="Horizon of each backtest forecast (default: up to 7d)."
    ),
    backtest_initial: str | None = typer.Option(
        None, "--backtest-initial", help="History before the first cutoff (default: half)."
    ),
    cutoffs: int = typer.Option(5, "--cutoffs", min=1, help="Most backtest cutoffs, a day apart."),
    calibrate_bands: bool = typer.Option(
        True,
        "--calibrate/--no-calibrate",
        help="Scale the bands to the width that covered 80% in the backtest (when one ran).",
    ),
    demand_out: Path | None = typer.Option(
        None, "--demand-out", help="Write the demand curve (CSV ds,y) for `simulate --rates`."
    ),
    plot: Path | None = typer.Option(None, "--plot", help="Write an interactive chart (HTML)."),
    seed: int = typer.Option(
        0, "--seed", min=0, max=2**32 - 1, help="Random seed of the predictive draws."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Forecast hourly load with Prophet: backtest against a seasonal-naive baseline, 80%/95%
    bands, a demand curve at a planning quantile; the forecast is stored."""
    from planner.forecast.model import DEFAULT_HORIZON_HOURS, ForecastSettings, read_events
    from planner.forecast.run import BacktestOptions
    from planner.usecases.forecast import ForecastRequest, forecast

    checks = BacktestOptions(
        wanted=run_backtest,
        tune=do_tune,
        horizon_hours=parse_hours("--backtest-horizon", backtest_horizon),
        initial_hours=parse_hours("--backtest-initial", backtest_initial),
        cutoffs=cutoffs,
        calibrate=calibrate_bands,
    )
    horizon_hours = parse_hours("--horizon", horizon, MAX_HORIZON_HOURS) or DEFAULT_HORIZON_HOURS
    settings = ForecastSettings(
        horizon_hours=horizon_hours,
        growth=growth,
        seasonality_mode=seasonality_mode,
        changepoint_prior_scale=changepoint_prior_scale,
        seasonality_prior_scale=seasonality_prior_scale,
        country_holidays=holidays,
        events=read_events(events) if events is not None else (),
        log_transform=log,
        cap=cap,
        seed=seed,
    )
    request = ForecastRequest(
        settings,
        dataset=dataset,
        series_file=series_file,
        model=model,
        metric=metric,
        gaps=tuple(_gaps(gap)),
        zeros_as_gaps=zeros_as_gaps,
        checks=checks,
        quantile=quantile,
        allow_baseline=allow_baseline,
        demand_out=demand_out,
        plot=plot,
    )
    with ExitStack() as opened:
        bars = opened.enter_context(_Bars(quiet))
        sessions = opened.enter_context(sessions_from(ctx))
        done = forecast(request, sessions, progress=bars.update)
    if as_json:
        print_json(_json(done, request))
        for warning in done.fitted.result.warnings:
            stderr.print(f"warning: {warning}", markup=False, soft_wrap=True)
        return
    _print(done, request)


def _json(done: ForecastResult, request: ForecastRequest) -> dict[str, Any]:
    import numpy as np

    from planner.forecast.series import iso_hour

    result, demand, quantile = done.fitted.result, done.fitted.demand, request.quantile
    checked, tuned = done.fitted.checked, done.fitted.tuned
    data = result.to_dict()
    data["id"] = done.forecast_id
    data["quantile"] = quantile
    data["demand"] = [
        {"ds": iso_hour(d), "y": float(y)}
        for d, y in zip(demand["ds"], demand["y"].to_numpy(np.float64), strict=True)
    ]
    data["daily"] = [
        {
            "day": iso_hour(row["day"])[:10],
            **{k: (float(v) if k != "hours" else int(v)) for k, v in row.items() if k != "day"},
        }
        for row in result.daily(quantile).to_dict("records")
    ]
    data["backtest"] = checked.to_dict(done.series) if checked is not None else None
    data["tune"] = tuned.to_dict() if tuned is not None else None
    data["demand_out"] = str(request.demand_out) if request.demand_out is not None else None
    data["plot"] = str(request.plot) if request.plot is not None else None
    return data


def _pct(value: float) -> str:
    import numpy as np

    return "-" if not np.isfinite(value) else f"{value:.1%}"


def _num(value: float) -> str:
    import numpy as np

    if not np.isfinite(value):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def _scores_row(name: str, s: Scores) -> list[str]:
    import numpy as np

    return [
        name,
        _pct(s.mape),
        _pct(s.smape),
        "-" if not np.isfinite(s.mase) else f"{s.mase:.2f}",
        _pct(s.coverage_80),
        _pct(s.coverage_95),
        _pct(s.accuracy),
    ]


def _print(done: ForecastResult, request: ForecastRequest) -> None:
    result = done.fitted.result
    _print_header(result)
    if done.fitted.tuned is not None:
        print_whole(_tuning_table(done.fitted.tuned))
    if done.fitted.checked is not None:
        print_whole(_backtest_table(result.series, done.fitted.checked))
    print_whole(_daily_table(result, request.quantile))
    stdout.print(
        f"stored as forecast #{done.forecast_id}"
        + (
            f"; demand curve written to {escape(str(request.demand_out))}"
            if request.demand_out
            else ""
        )
        + (f"; chart written to {escape(str(request.plot))}" if request.plot else "")
    )
    for warning in result.warnings:
        stderr.print(f"warning: {warning}", markup=False, soft_wrap=True)


def _print_header(result: Forecast) -> None:
    """What was forecast and how, its span, and the notes on the series and the fit."""
    from planner.forecast.series import iso_hour

    s = result.settings
    series = result.series
    how = (
        f"Prophet, growth {result.growth}, {s.seasonality_mode} seasonality, changepoint prior "
        f"{s.changepoint_prior_scale:g}, seasonality prior {s.seasonality_prior_scale:g}"
        + (", log(1+y)" if s.log_transform else "")
        + (f", {s.country_holidays} holidays" if s.country_holidays else "")
        + (f", {len(s.events)} event(s)" if s.events else "")
        if result.method == "prophet"
        else "seasonal-naive baseline"
    )
    stdout.print(f"[bold]{escape(series.label)}[/]: {escape(how)}")
    stdout.print(
        f"history {iso_hour(series.start)} to {iso_hour(series.end)}: {series.hours:,} h, "
        f"{series.observed_hours:,} observed; forecast {len(result.points):,} h from "
        f"{iso_hour(result.points['ds'].iloc[0])}"
    )
    for line in series.report.lines():
        stderr.print(f"note: {line}", markup=False, soft_wrap=True)
    for note in result.notes:
        stderr.print(f"note: {note}", markup=False, soft_wrap=True)


def _tuning_table(tuned: TuneResult) -> Table:
    import numpy as np

    table = Table(
        "growth",
        "changepoint prior",
        "seasonality prior",
        "mode",
        "MAPE",
        "sMAPE",
        "MASE",
        title=f"tuning: {len(tuned.table)} candidates by backtest MAPE (best 5)",
    )
    for row in tuned.table[:5]:
        table.add_row(
            row["growth"],
            f"{row['changepoint_prior_scale']:g}",
            f"{row['seasonality_prior_scale']:g}",
            row["seasonality_mode"],
            _pct(row["mape"] if row["mape"] is not None else np.nan),
            _pct(row["smape"] if row["smape"] is not None else np.nan),
            f"{row['mase']:.2f}" if row["mase"] is not None else "-",
        )
    return table


def _backtest_table(series: HourlySeries, checked: BacktestResult) -> Table:
    from planner.forecast.series import iso_hour

    plan = checked.plan
    first = iso_hour(series.frame["ds"].iloc[plan.cutoffs[0]])
    last = iso_hour(series.frame["ds"].iloc[plan.cutoffs[-1]])
    table = Table(
        "method",
        "MAPE",
        "sMAPE",
        "MASE",
        "80% band",
        "95% band",
        "accuracy",
        title=(
            f"backtest: {len(plan.cutoffs)} cutoff(s) {first} to {last}, each forecasting "
            f"{plan.horizon_hours} h; {checked.prophet.points:,} hours scored"
        ),
    )
    table.add_row(*_scores_row("Prophet", checked.prophet))
    table.add_row(*_scores_row(checked.baseline_name, checked.baseline))
    return table


def _daily_table(result: Forecast, quantile: float) -> Table:
    import pandas as pd

    table = Table(
        "day (UTC)",
        "hours",
        f"{result.metric} (mean)",
        "80% band",
        "95% band",
        "peak hour",
        f"peak at q{quantile:g}",
        title=f"forecast by day (bands of the day's total); demand curve at quantile {quantile:g}",
    )
    for day in result.daily(quantile).to_dict("records"):
        table.add_row(
            pd.Timestamp(day["day"]).strftime("%Y-%m-%d %a"),
            str(day["hours"]),
            _num(day["mean"]),
            f"{_num(day['lower_80'])} - {_num(day['upper_80'])}",
            f"{_num(day['lower_95'])} - {_num(day['upper_95'])}",
            _num(day["peak_mean"]),
            _num(day["peak_demand"]),
        )
    return table
