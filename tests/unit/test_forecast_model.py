"""Prophet forecasts on the real ServeGen series and on made-up ones: accuracy against the
seasonal-naive baseline on held-out days, band coverage, short histories, options."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import numpy as np
import pandas as pd
import pytest

from planner.errors import InputFileError, UsageError
from planner.forecast.backtest import backtest, calibrate, holdout_plan
from planner.forecast.model import Event, ForecastSettings, forecast, read_events
from planner.forecast.series import HourlySeries, read_servegen
from tests.conftest import SERVEGEN, WriteFile

HELD_OUT = 48  # the last two days


def servegen(model: str | None) -> HourlySeries:
    return read_servegen(SERVEGEN, model=model)


def synthetic(hours: int, seed: int = 1, level: float = 1000.0) -> HourlySeries:
    """A daily and weekly pattern with noise, starting on a Monday."""
    rng = np.random.default_rng(seed)
    t = np.arange(hours)
    daily = 1 + 0.4 * np.sin(2 * np.pi * (t % 24) / 24)
    weekly = np.where((t // 24) % 7 >= 5, 0.7, 1.0)
    y = level * daily * weekly * rng.lognormal(0, 0.05, hours)
    ds = pd.date_range("2025-01-06", periods=hours, freq="h")
    return HourlySeries(pd.DataFrame({"ds": ds, "y": y}), source="synthetic")


@pytest.mark.parametrize("model", ["m-small", "m-mid", None])
def test_prophet_beats_the_seasonal_naive_baseline_on_the_last_two_days(
    model: str | None,
) -> None:
    """Fit on the first 12 days of real traffic, forecast the last 2, on the same hours as the
    baseline (same hour one week earlier). Measured: MAPE 17.3% vs 19.4% (m-small), 17.2% vs
    22.0% (m-mid), 13.9% vs 16.9% (both models)."""
    series = servegen(model)
    result = backtest(series, ForecastSettings(), holdout_plan(series, HELD_OUT))
    assert result.growth == "flat"  # auto: 12 days of history is under the 28 for a trend
    assert result.prophet.points >= 38  # the held-out hours that were collected
    assert result.prophet.mape < result.baseline.mape
    assert result.prophet.smape < result.baseline.smape
    assert result.prophet.mase < result.baseline.mase
    assert result.prophet.mape < 0.2  # accuracy above 80%


def test_the_seed_articles_settings_do_not_beat_the_baseline_here() -> None:
    """changepoint_prior_scale=0.15 with multiplicative seasonality (and Prophet's default linear
    trend), as the seed articles suggest: on these two weeks it extrapolates a noisy trend and
    loses to the baseline (MAPE 28.1% vs 19.4%): "about 87% accuracy" does not carry over."""
    series = servegen("m-small")
    seed = ForecastSettings(
        growth="linear", changepoint_prior_scale=0.15, seasonality_mode="multiplicative"
    )
    result = backtest(series, seed, holdout_plan(series, HELD_OUT))
    assert result.prophet.mape > result.baseline.mape
    assert result.prophet.accuracy < 0.87


@pytest.mark.parametrize("model", ["m-small", "m-mid", None])
def test_band_coverage_on_held_out_days(model: str | None) -> None:
    """Stated band: Prophet's own 80% band covers 60-85% of the held-out hours (it is too narrow
    on real traffic: measured 68%, 70%, 71%); calibrated by a backtest on the history, the 80%
    band covers 80-100% (measured 93%, 98%, 100%) and the 95% band 90-100%."""
    series = servegen(model)
    history, held_out = series.split(HELD_OUT)
    settings = ForecastSettings(horizon_hours=HELD_OUT)
    raw = forecast(history, settings)
    calibrated = calibrate(raw, backtest(history, settings))
    assert calibrated.band_scale > 1.5
    y = held_out.values
    seen = np.isfinite(y)

    def coverage(points: pd.DataFrame, width: int) -> float:
        low = points[f"lower_{width}"].to_numpy()[seen]
        high = points[f"upper_{width}"].to_numpy()[seen]
        return float(np.mean((y[seen] >= low) & (y[seen] <= high)))

    assert 0.6 <= coverage(raw.points, 80) <= 0.85
    assert 0.8 <= coverage(calibrated.points, 80) <= 1.0
    assert 0.9 <= coverage(calibrated.points, 95) <= 1.0
    np.testing.assert_allclose(calibrated.points["mean"], raw.points["mean"])


def test_bands_and_demand_come_from_the_same_draws() -> None:
    result = forecast(servegen("m-small"), ForecastSettings(horizon_hours=72))
    p = result.points
    assert len(p) == 72 and result.samples.shape == (72, 1000)
    assert p["ds"].iloc[0] == pd.Timestamp("2025-01-20 00:00")
    assert (p["lower_95"] <= p["lower_80"]).all() and (p["lower_80"] <= p["upper_80"]).all()
    assert (p["upper_80"] <= p["upper_95"]).all() and (p["lower_95"] >= 0).all()
    # the 80% band runs from the 10th to the 90th percentile: q=0.9 is its upper edge
    np.testing.assert_allclose(result.demand(0.9)["y"], p["upper_80"], rtol=1e-9)
    assert (result.demand(0.5)["y"] < result.demand(0.9)["y"]).all()
    daily = result.daily(0.9)
    assert list(daily["hours"]) == [24, 24, 24]
    np.testing.assert_allclose(daily["mean"], p["mean"].to_numpy().reshape(3, 24).sum(axis=1))
    # a day's band is narrower than the sum of its hours' bands (errors partly cancel)
    assert (daily["upper_80"] < p["upper_80"].to_numpy().reshape(3, 24).sum(axis=1)).all()
    with pytest.raises(UsageError, match="quantile 1.5: expected a number between 0 and 1"):
        result.demand(1.5)


def test_same_seed_same_forecast() -> None:
    series = synthetic(96)
    one = forecast(series, ForecastSettings(horizon_hours=24, seed=3))
    two = forecast(series, ForecastSettings(horizon_hours=24, seed=3))
    np.testing.assert_array_equal(one.samples, two.samples)
    other = forecast(series, ForecastSettings(horizon_hours=24, seed=4))
    assert not np.array_equal(one.samples, other.samples)


def test_under_two_days_is_an_error_or_with_allow_baseline_a_seasonal_naive_forecast() -> None:
    series = synthetic(47)
    with pytest.raises(UsageError, match=r"47 hour\(s\) of data .* at least 48 \(two days\)"):
        forecast(series)
    result = forecast(series, ForecastSettings(horizon_hours=30), allow_baseline=True)
    assert result.method == "seasonal-naive"
    assert "seasonal-naive forecast (season one day)" in result.warnings[0]
    # the same hour one day back (two days back for the hours past the first day)
    y = series.values
    np.testing.assert_allclose(result.points["mean"][:24], y[23:47])
    np.testing.assert_allclose(result.points["mean"][24:], y[23:29])
    assert (result.points["upper_95"] > result.points["upper_80"]).all()
    # 50 hours with three of them missing is still too few observed hours
    gappy = synthetic(50).with_gaps(
        [(pd.Timestamp("2025-01-06 03:00", tz="UTC"), pd.Timestamp("2025-01-06 06:00", tz="UTC"))]
    )
    with pytest.raises(UsageError, match=r"47 hour\(s\) of data"):
        forecast(gappy)


def test_missing_hours_are_fitted_around_not_filled() -> None:
    series = synthetic(24 * 10)
    gapped = series.with_gaps(
        [(pd.Timestamp("2025-01-08 00:00", tz="UTC"), pd.Timestamp("2025-01-09 00:00", tz="UTC"))]
    )
    assert gapped.observed_hours == series.hours - 24
    result = forecast(gapped, ForecastSettings(horizon_hours=24))
    assert result.fitted is not None and len(result.fitted) == gapped.hours
    assert np.isfinite(result.points["mean"]).all()
    assert result.points["mean"].mean() == pytest.approx(np.nanmean(series.values[-168:]), rel=0.1)


def test_log_transform_and_logistic_growth_with_a_cap() -> None:
    series = synthetic(24 * 8)
    logged = forecast(series, ForecastSettings(horizon_hours=48, log_transform=True))
    assert logged.points["mean"].min() > 0
    assert logged.points["mean"].mean() == pytest.approx(np.mean(series.values), rel=0.15)
    capped = forecast(series, ForecastSettings(horizon_hours=48, cap=1600))
    assert capped.growth == "logistic"
    assert capped.points["mean"].max() <= 1600 * 1.01
    with pytest.raises(UsageError, match="cap 1,000 is not above the history's largest value"):
        forecast(series, ForecastSettings(cap=1000))
    with pytest.raises(UsageError, match="logistic growth needs a cap"):
        forecast(series, ForecastSettings(growth="logistic"))


def test_linear_growth_follows_a_trend_and_auto_picks_it_from_four_weeks() -> None:
    base = synthetic(24 * 28)
    trend = base.values * np.linspace(1.0, 2.0, base.hours)
    series = replace(base, frame=base.frame.assign(y=trend))
    result = forecast(series, ForecastSettings(horizon_hours=24 * 7))
    assert result.growth == "linear"
    flat = forecast(series, ForecastSettings(horizon_hours=24 * 7, growth="flat"))
    assert result.points["mean"].mean() > trend[-168:].mean()  # still growing
    assert result.points["mean"].mean() > 1.1 * flat.points["mean"].mean()


def test_country_holidays_and_events(write: WriteFile) -> None:
    # Launch days double the load; the next launch is in the horizon.
    series = synthetic(24 * 21)
    launches = [date(2025, 1, 8), date(2025, 1, 15), date(2025, 1, 29)]  # Wednesdays
    y = series.values.copy()
    days = series.frame["ds"].dt.date.to_numpy()
    for day in launches[:2]:
        y[days == day] *= 2
    series = replace(series, frame=series.frame.assign(y=y))
    path = write("events.csv", "name,start\n" + "".join(f"launch,{d}\n" for d in launches))
    events = read_events(path)
    assert events == tuple(Event("launch", d, d) for d in launches)
    settings = ForecastSettings(horizon_hours=24 * 7, events=events, country_holidays="US")
    result = forecast(series, settings)
    day = result.points["ds"].dt.date
    launch = result.points[day == launches[2]]["mean"].mean()
    around = result.points[day.isin([date(2025, 1, 28), date(2025, 1, 30)])]["mean"].mean()
    assert launch > 1.5 * around
    with pytest.raises(UsageError, match="country holidays 'XX'"):
        forecast(series, replace(settings, country_holidays="XX"))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("name\nlaunch\n", r"column 'start': missing column"),
        ("name,start\nlaunch,soon\n", r"row 1, line 2, column 'start': 'soon': expected a date"),
        ("name,start,end\nsale,2025-02-03,2025-02-01\n", r"row 1, line 2, column 'end'"),
        ("name,date\n,2025-02-03\n", r"row 1, line 2, column 'name': empty"),
        ("name,date\n", r"no events"),
    ],
)
def test_bad_events_files(write: WriteFile, content: str, message: str) -> None:
    with pytest.raises(InputFileError, match=message):
        read_events(write("e.csv", content))


def test_settings_are_checked() -> None:
    with pytest.raises(UsageError, match="seasonality mode 'sideways'"):
        ForecastSettings(seasonality_mode="sideways").validate()
    with pytest.raises(UsageError, match="changepoint prior scale must be a positive number"):
        ForecastSettings(changepoint_prior_scale=0).validate()
    with pytest.raises(UsageError, match="growth 'exponential'"):
        ForecastSettings(growth="exponential").validate()
    stored = ForecastSettings(events=(Event("x", date(2025, 1, 1), date(2025, 1, 2)),))
    assert ForecastSettings.from_dict(stored.to_dict()) == stored
