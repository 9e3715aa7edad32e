"""Fitting Prophet to an hourly series and forecasting it, with 80% and 95% bands.

Prophet computes one interval (``interval_width``) per fit. planner fits once (MAP, no MCMC)
and takes both bands, and any planning quantile, from the same predictive samples
(:class:`BandedProphet`), so the bands and the demand curve agree with each other.

Histories under two days cannot separate a daily pattern from noise: they are an error, or with
``allow_baseline`` a seasonal-naive forecast with a warning.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
from cmdstanpy.utils import get_logger
from numpy.typing import NDArray
from prophet import Prophet

from planner.common.text import shown
from planner.errors import InputFileError, PlannerError, RowProblem, UsageError
from planner.forecast import baseline
from planner.forecast.series import HOUR, HourlySeries, iso_hour
from planner.workload.hourly_csv import FIRST_HOUR, HOUR_RANGE, LAST_HOUR

MIN_HISTORY_HOURS = 48
DEFAULT_HORIZON_HOURS = 14 * 24
# Under four weekly cycles a fitted linear trend is mostly the last week's noise, and
# extrapolating it for two weeks does worse than no trend (see docs/forecasting.md).
AUTO_LINEAR_MIN_DAYS = 28
GROWTHS = ("auto", "linear", "flat", "logistic")
MODES = ("additive", "multiplicative")
BANDS = ("lower_80", "upper_80", "lower_95", "upper_95")
POINT_COLUMNS = ("ds", "mean", *BANDS)
MAX_EVENT_DAYS = 31  # an event's days are each a separate effect in the fit
DAILY_FOURIER = 4  # Prophet's defaults for daily and weekly seasonality
WEEKLY_FOURIER = 3


def quiet_prophet() -> None:
    """cmdstanpy logs every optimisation at INFO, Prophet its seasonality choices: silence both."""
    # cmdstanpy sets its own logger up (level DEBUG) on first use: make it do so now.
    get_logger().setLevel(logging.ERROR)
    for name in ("prophet", "prophet.plot"):
        logging.getLogger(name).setLevel(logging.ERROR)


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Around Prophet's fits: seed numpy's global generator (Prophet samples from it), then put
    its state back. Also silences the deprecation warnings newer pandas raises inside Prophet
    (not ours to fix) and cmdstanpy's log: it logs an ERROR line (e.g. "error: code '1'
    Operation not permitted", the optimiser's exit code read as an errno) whenever L-BFGS stops
    early, even though Prophet then retries with Newton and succeeds. A fit that fails for
    good is a :class:`PlannerError` here, not cmdstanpy's RuntimeError.
    """
    state = np.random.get_state()
    np.random.seed(seed)
    stan_log = get_logger()
    level = stan_log.level
    stan_log.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"prophet\.")
            yield
    except RuntimeError as exc:
        reason = shown(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        raise PlannerError(
            f"Prophet could not fit the series (its optimiser failed: {reason}); try --log, "
            "another --growth, or a longer or cleaner history"
        ) from exc
    finally:
        stan_log.setLevel(level)
        np.random.set_state(state)


class BandedProphet(Prophet):
    """Prophet whose intervals are 80% and 95% bands from one set of predictive samples.

    ``predict`` adds ``lower_80``, ``upper_80``, ``lower_95``, ``upper_95`` (``yhat_lower`` and
    ``yhat_upper`` are the 95% band); with ``keep_samples`` the draws of ``yhat`` are kept in
    ``last_samples`` (rows x draws). Cross-validation copies the class, so its forecasts carry
    both bands too.
    """

    keep_samples: bool = False
    last_samples: NDArray[np.float64] | None = None

    def predict_uncertainty(
        self,
        df: pd.DataFrame,
        vectorized: bool,
        regressor_samples: dict[str, NDArray[np.float64]] | None = None,
    ) -> pd.DataFrame:
        sims = self.sample_posterior_predictive(df, vectorized, regressor_samples)
        yhat = sims["yhat"]
        bands = {}
        for width in (80, 95):
            low, high = np.percentile(yhat, [50 - width / 2, 50 + width / 2], axis=1)
            bands[f"lower_{width}"] = low
            bands[f"upper_{width}"] = high
        trend_low, trend_high = np.percentile(sims["trend"], [2.5, 97.5], axis=1)
        if self.keep_samples:
            self.last_samples = yhat
        return pd.DataFrame(
            {
                "yhat_lower": bands["lower_95"],
                "yhat_upper": bands["upper_95"],
                "trend_lower": trend_low,
                "trend_upper": trend_high,
                **bands,
            }
        )


# --- settings --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """A user event (a launch, a campaign): a named day or run of days, like a holiday.

    Prophet learns an event's effect from its earlier occurrences under the same name, so a
    future launch helps only when the history holds one like it.
    """

    name: str
    start: date
    end: date  # inclusive

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "start": self.start.isoformat(), "end": self.end.isoformat()}


@dataclass(frozen=True)
class ForecastSettings:
    """Everything that decides a forecast; stored with it."""

    horizon_hours: int = DEFAULT_HORIZON_HOURS
    growth: str = "auto"  # auto: linear with >= 28 days of history, else flat
    seasonality_mode: str = "additive"
    changepoint_prior_scale: float = 0.05
    seasonality_prior_scale: float = 10.0
    holidays_prior_scale: float = 10.0
    daily_seasonality: bool = True
    weekly_seasonality: bool = True
    country_holidays: str | None = None
    events: tuple[Event, ...] = ()
    log_transform: bool = False
    cap: float | None = None  # logistic growth's capacity, in the metric's units
    uncertainty_samples: int = 1000
    seed: int = 0

    def validate(self) -> None:
        if self.horizon_hours < 1:
            raise UsageError(f"horizon {self.horizon_hours} h: expected at least one hour")
        if self.growth not in GROWTHS:
            raise UsageError(f"growth {shown(self.growth)}: expected one of {', '.join(GROWTHS)}")
        if self.seasonality_mode not in MODES:
            raise UsageError(
                f"seasonality mode {shown(self.seasonality_mode)}: "
                "expected additive or multiplicative"
            )
        for name in ("changepoint_prior_scale", "seasonality_prior_scale", "holidays_prior_scale"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise UsageError(f"{name.replace('_', ' ')} must be a positive number, got {value}")
        if self.growth == "logistic" and self.cap is None:
            raise UsageError("logistic growth needs a cap (--cap N, in the metric's units)")
        if self.cap is not None and not (math.isfinite(self.cap) and self.cap > 0):
            raise UsageError(f"cap {self.cap}: expected a positive number")
        if self.uncertainty_samples < 100:
            raise UsageError("at least 100 uncertainty samples are needed for 95% bands")

    def resolved_growth(self, history_hours: int) -> str:
        if self.cap is not None:
            return "logistic"
        if self.growth != "auto":
            return self.growth
        return "linear" if history_hours >= AUTO_LINEAR_MIN_DAYS * 24 else "flat"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["events"] = [e.to_dict() for e in self.events]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ForecastSettings:
        values = dict(data)
        values["events"] = tuple(
            Event(e["name"], date.fromisoformat(e["start"]), date.fromisoformat(e["end"]))
            for e in values.get("events", [])
        )
        return cls(**values)


def read_events(path: Path | str) -> tuple[Event, ...]:
    """Events from a CSV: ``name,start[,end]`` (dates, ``end`` inclusive; ``date`` may stand for
    ``start``). Names repeat for recurring events (every launch called ``launch``)."""
    path = Path(path)
    expected = "a CSV with columns name,start[,end] (ISO dates)"
    if path.is_dir():
        raise InputFileError(path, f"is a folder; expected {expected}")
    if not path.is_file():
        raise InputFileError(path, f"file not found; expected {expected}")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(path, f"not UTF-8 text; expected {expected}") from exc
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    events: list[Event] = []
    row = 0
    for fields in reader:
        if not any(f.strip() for f in fields):
            continue
        line = reader.line_num
        if header is None:
            header = [f.strip().lower() for f in fields]
            if "start" not in header and "date" in header:
                header[header.index("date")] = "start"
            for column in ("name", "start"):
                if column not in header:
                    raise InputFileError(
                        path, RowProblem(None, column, f"missing column; expected {expected}", line)
                    )
            continue
        row += 1
        if len(fields) != len(header):
            raise InputFileError(
                path, RowProblem(row, None, f"{len(fields)} fields, expected {len(header)}", line)
            )
        values = dict(zip(header, (f.strip() for f in fields), strict=True))
        if not values["name"]:
            raise InputFileError(path, RowProblem(row, "name", "empty; expected a name", line))
        start = _date(path, values["start"], row, line, "start")
        end = _date(path, values.get("end") or values["start"], row, line, "end")
        if end < start:
            raise InputFileError(
                path, RowProblem(row, "end", f"{end} is before the start {start}", line)
            )
        if (end - start).days + 1 > MAX_EVENT_DAYS:
            raise InputFileError(
                path,
                RowProblem(
                    row,
                    "end",
                    f"{start} to {end} is {(end - start).days + 1:,} days; an event spans at most "
                    f"{MAX_EVENT_DAYS} (Prophet fits each of its days as a separate effect)",
                    line,
                ),
            )
        events.append(Event(values["name"], start, end))
    if not events:
        raise InputFileError(path, f"no events; expected {expected}")
    return tuple(events)


def _date(path: Path, text: str, row: int, line: int, column: str) -> date:
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise InputFileError(
            path, RowProblem(row, column, f"{shown(text)}: expected a date like 2025-03-14", line)
        ) from None
    if not FIRST_HOUR.date() <= day < LAST_HOUR.date():
        raise InputFileError(
            path,
            RowProblem(
                row, column, f"{shown(text)}: outside the dates planner handles, {HOUR_RANGE}", line
            ),
        )
    return day


def events_frame(events: tuple[Event, ...]) -> pd.DataFrame | None:
    """Events as Prophet's holidays frame."""
    if not events:
        return None
    return pd.DataFrame(
        {
            "holiday": [e.name for e in events],
            "ds": pd.to_datetime([e.start for e in events]),
            "lower_window": 0,
            "upper_window": [(e.end - e.start).days for e in events],
        }
    )


# --- fitting ---------------------------------------------------------------------------------


def transform(y: NDArray[np.float64] | pd.Series, settings: ForecastSettings) -> Any:
    """The metric as Prophet sees it (log1p when ``log_transform``: zero hours stay finite)."""
    return np.log1p(y) if settings.log_transform else y


def untransform(values: NDArray[np.float64], settings: ForecastSettings) -> NDArray[np.float64]:
    """Back to the metric's units, clipped at zero (demand is never negative)."""
    out = np.expm1(values) if settings.log_transform else values
    result: NDArray[np.float64] = np.maximum(out, 0.0)
    return result


def prophet_frame(series: HourlySeries, settings: ForecastSettings, growth: str) -> pd.DataFrame:
    """The training frame: ``ds``, transformed ``y`` (NaN kept: Prophet skips those rows) and,
    for logistic growth, ``cap`` and ``floor``."""
    frame = pd.DataFrame({"ds": series.frame["ds"], "y": transform(series.values, settings)})
    if growth == "logistic":
        assert settings.cap is not None
        observed = np.nanmax(series.values)
        if settings.cap <= observed:
            raise UsageError(
                f"cap {settings.cap:,.0f} is not above the history's largest value "
                f"{observed:,.0f}; logistic growth needs a cap above every observation"
            )
        frame["cap"] = float(transform(np.array([settings.cap]), settings)[0])
        frame["floor"] = 0.0
    return frame


def build_prophet(settings: ForecastSettings, growth: str, history_hours: int) -> BandedProphet:
    """An unfitted Prophet with the settings' seasonalities, holidays and events."""
    quiet_prophet()
    model = BandedProphet(
        growth=cast(Literal["linear", "flat", "logistic"], growth),
        yearly_seasonality=False,
        weekly_seasonality=False,
        daily_seasonality=False,
        seasonality_mode=cast(Literal["additive", "multiplicative"], settings.seasonality_mode),
        changepoint_prior_scale=settings.changepoint_prior_scale,
        seasonality_prior_scale=settings.seasonality_prior_scale,
        holidays_prior_scale=settings.holidays_prior_scale,
        holidays=events_frame(settings.events),
        mcmc_samples=0,
        interval_width=0.95,
        uncertainty_samples=settings.uncertainty_samples,
    )
    if settings.daily_seasonality:
        model.add_seasonality("daily", period=1, fourier_order=DAILY_FOURIER)
    # A weekly pattern needs at least one whole week to be estimated at all.
    if settings.weekly_seasonality and history_hours >= baseline.WEEK_HOURS:
        model.add_seasonality("weekly", period=7, fourier_order=WEEKLY_FOURIER)
    if settings.country_holidays:
        try:
            model.add_country_holidays(settings.country_holidays)
        except (AttributeError, NotImplementedError) as exc:
            raise UsageError(
                f"country holidays {shown(settings.country_holidays)}: not a country code the "
                "holidays package knows (e.g. US, GB, DE, CN, IN)"
            ) from exc
    return model


@dataclass
class Forecast:
    """A fitted forecast: per hour of the horizon a point forecast (``mean``) and 80%/95% bands,
    plus the predictive draws that demand curves are read from.

    ``mean`` is Prophet's point forecast (trend plus seasonalities; with ``log_transform`` the
    back-transformed one, closer to a median); bands and quantiles come from the draws.
    """

    series: HourlySeries
    settings: ForecastSettings
    growth: str
    method: str  # "prophet" or "seasonal-naive"
    points: pd.DataFrame  # POINT_COLUMNS over the horizon
    samples: NDArray[np.float64]  # horizon x draws
    fitted: pd.DataFrame | None = None  # ds, mean over the history (Prophet only)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    fit_s: float = 0.0
    band_scale: float = 1.0  # bands widened by this factor after the fit (calibration)

    @property
    def metric(self) -> str:
        return self.series.metric

    def demand(self, quantile: float) -> pd.DataFrame:
        """The hourly demand curve at ``quantile`` (``ds``, ``y``): each hour's quantile of the
        predictive draws. Per-hour quantiles: their sum over a day overstates the day's
        quantile, which is the point for capacity (every hour is served at that level)."""
        check_quantile(quantile)
        values = np.quantile(self.samples, quantile, axis=1)
        return pd.DataFrame({"ds": self.points["ds"], "y": np.maximum(values, 0.0)})

    def widened(self, factor: float, why: str) -> Forecast:
        """The forecast with every draw's distance from the point forecast times ``factor``:
        bands and demand quantiles widen (or narrow) around the same point forecast."""
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError(f"band factor {factor}: expected a positive number")
        mean = self.points["mean"].to_numpy(np.float64)
        samples = np.maximum(mean[:, None] + factor * (self.samples - mean[:, None]), 0.0)
        points = self.points.copy()
        for width in (80, 95):
            low, high = np.percentile(samples, [50 - width / 2, 50 + width / 2], axis=1)
            points[f"lower_{width}"] = low
            points[f"upper_{width}"] = high
        note = f"bands scaled by {factor:.2f} around the point forecast: {why}"
        return replace(
            self,
            points=points,
            samples=samples,
            band_scale=self.band_scale * factor,
            notes=[*self.notes, note],
        )

    def daily(self, quantile: float = 0.9) -> pd.DataFrame:
        """Per UTC day of the horizon: the total's point forecast and 80%/95% bands (from each
        draw's daily total, not sums of hourly bands), the peak hour's point forecast and the
        peak of the demand curve at ``quantile``."""
        check_quantile(quantile)
        day = self.points["ds"].dt.floor("D")
        demand = np.quantile(self.samples, quantile, axis=1)
        rows = []
        for moment in day.unique():
            inside = (day == moment).to_numpy()
            totals = self.samples[inside].sum(axis=0)
            low80, high80, low95, high95 = np.quantile(totals, [0.1, 0.9, 0.025, 0.975])
            rows.append(
                {
                    "day": moment,
                    "hours": int(inside.sum()),
                    "mean": float(self.points["mean"].to_numpy()[inside].sum()),
                    "lower_80": float(low80),
                    "upper_80": float(high80),
                    "lower_95": float(low95),
                    "upper_95": float(high95),
                    "peak_mean": float(self.points["mean"].to_numpy()[inside].max()),
                    "peak_demand": float(demand[inside].max()),
                }
            )
        return pd.DataFrame(rows)

    def to_dict(self, *, points: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "method": self.method,
            "metric": self.metric,
            "source": self.series.source,
            "model": self.series.model,
            "growth": self.growth,
            "band_scale": round(self.band_scale, 4),
            "settings": self.settings.to_dict(),
            "history": {
                "start": iso_hour(self.series.start),
                "end": iso_hour(self.series.end),
                **self.series.report.to_dict(),
            },
            "horizon": {
                "start": iso_hour(self.points["ds"].iloc[0]),
                "end": iso_hour(self.points["ds"].iloc[-1] + pd.Timedelta(hours=1)),
                "hours": len(self.points),
            },
            "notes": self.notes,
            "warnings": self.warnings,
            "fit_s": round(self.fit_s, 3),
        }
        if points:
            columns = {c: self.points[c].to_numpy(np.float64) for c in POINT_COLUMNS[1:]}
            data["points"] = [
                {"ds": iso_hour(moment), **{c: float(v[i]) for c, v in columns.items()}}
                for i, moment in enumerate(self.points["ds"])
            ]
        return data


def check_quantile(quantile: float) -> None:
    if not (math.isfinite(quantile) and 0 < quantile < 1):
        raise UsageError(f"quantile {quantile}: expected a number between 0 and 1, e.g. 0.9")


def future_frame(series: HourlySeries, hours: int) -> pd.DataFrame:
    start = series.frame["ds"].iloc[-1] + pd.Timedelta(hours=1)
    return pd.DataFrame({"ds": pd.date_range(start, periods=hours, freq="h")})


def forecast(
    series: HourlySeries, settings: ForecastSettings | None = None, *, allow_baseline: bool = False
) -> Forecast:
    """Fit Prophet to ``series`` and forecast ``settings.horizon_hours`` hours past its end.

    Under 48 observed hours: a :class:`UsageError`, or with ``allow_baseline`` a seasonal-naive
    forecast carrying a warning.
    """
    settings = settings or ForecastSettings()
    settings.validate()
    observed = series.observed_hours
    if observed < MIN_HISTORY_HOURS:
        span = f"{iso_hour(series.start)} to {iso_hour(series.end)}"
        if not allow_baseline:
            raise UsageError(
                f"{series.label}: {observed} hour(s) of data ({span}); Prophet needs at least "
                f"{MIN_HISTORY_HOURS} (two days) to tell the daily pattern from noise. Give a "
                "longer history, or --allow-baseline for a seasonal-naive forecast"
            )
        if observed == 0:
            raise UsageError(f"{series.label}: no observed hours to forecast from")
        result = naive_forecast(series, settings)
        result.warnings.append(
            f"only {observed} hour(s) of history ({span}), under the {MIN_HISTORY_HOURS} Prophet "
            f"needs: this is a seasonal-naive forecast (season {_season_name(result)}), with "
            "bands from the history's own variation; treat it as a rough guide"
        )
        return result
    return prophet_forecast(series, settings)


def _season_name(result: Forecast) -> str:
    season = baseline.season_for(result.series.hours)
    return {168: "one week", 24: "one day"}.get(season, "one hour")


def prophet_forecast(series: HourlySeries, settings: ForecastSettings) -> Forecast:
    began = time.perf_counter()
    growth = settings.resolved_growth(series.hours)
    notes = []
    if settings.growth == "auto" and settings.cap is None:
        days = series.hours / 24
        notes.append(
            f"growth {growth} (auto: {days:.1f} days of history; linear from "
            f"{AUTO_LINEAR_MIN_DAYS} days)"
        )
    if settings.weekly_seasonality and series.hours < baseline.WEEK_HOURS:
        notes.append("weekly seasonality off: the history is shorter than a week")
    train = prophet_frame(series, settings, growth)
    model = build_prophet(settings, growth, series.hours)
    future = future_frame(series, settings.horizon_hours)
    if growth == "logistic":
        future["cap"] = train["cap"].iloc[0]
        future["floor"] = 0.0
    whole = pd.concat([train.drop(columns="y"), future], ignore_index=True)
    with seeded(settings.seed):
        model.fit(train)
        model.keep_samples = True
        predicted = model.predict(whole)
    samples = model.last_samples
    assert samples is not None
    n_hist = len(train)
    point = untransform(predicted["yhat"].to_numpy(np.float64), settings)
    draws = untransform(samples[n_hist:], settings)
    points = pd.DataFrame({"ds": future["ds"], "mean": point[n_hist:]})
    for column in BANDS:
        points[column] = untransform(predicted[column].to_numpy(np.float64)[n_hist:], settings)
    fitted = pd.DataFrame({"ds": train["ds"], "mean": point[:n_hist]})
    return Forecast(
        series=series,
        settings=replace(settings),
        growth=growth,
        method="prophet",
        points=points.reset_index(drop=True),
        samples=draws,
        fitted=fitted,
        notes=notes,
        fit_s=time.perf_counter() - began,
    )


def naive_forecast(series: HourlySeries, settings: ForecastSettings) -> Forecast:
    """The seasonal-naive forecast (a week back, or a day, or an hour for tiny histories)."""
    began = time.perf_counter()
    history = series.values
    season = baseline.season_for(len(history))
    point, steps = baseline.naive_points(history, settings.horizon_hours, season)
    notes = []
    if not np.isfinite(point).all():
        filler = float(np.nanmean(history))
        notes.append(
            f"{int((~np.isfinite(point)).sum())} hour(s) have no observed value a season back: "
            f"forecast at the history's mean ({filler:,.1f})"
        )
        point = np.where(np.isfinite(point), point, filler)
    sigma = baseline.naive_sigma(history, season)
    bands = baseline.naive_bands(point, steps, sigma)
    rng = np.random.default_rng(settings.seed)
    samples = baseline.naive_samples(point, steps, sigma, settings.uncertainty_samples, rng)
    future = future_frame(series, settings.horizon_hours)
    points = pd.DataFrame({"ds": future["ds"], "mean": point, **bands})
    return Forecast(
        series=series,
        settings=settings,
        growth="none",
        method="seasonal-naive",
        points=points,
        samples=samples,
        fitted=None,
        notes=notes,
        fit_s=time.perf_counter() - began,
    )


def horizon_end(series: HourlySeries, hours: int) -> str:
    return iso_hour(series.end + hours * HOUR)
