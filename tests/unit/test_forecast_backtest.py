"""Backtests: the plan, the metrics by hand, the baseline on the same hours, tuning."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from planner.errors import UsageError
from planner.forecast import baseline
from planner.forecast.backtest import (
    BacktestPlan,
    BacktestResult,
    backtest,
    band_scale,
    candidates,
    plan_backtest,
    score,
    tune,
)
from planner.forecast.model import ForecastSettings
from planner.forecast.series import HourlySeries, read_servegen
from tests.conftest import SERVEGEN


@pytest.fixture(scope="module")
def small() -> HourlySeries:
    return read_servegen(SERVEGEN, model="m-small")


def test_the_last_cutoff_leaves_a_horizon_before_the_last_hour_with_a_value(
    small: HourlySeries,
) -> None:
    """Prophet's history ends at the last hour with a value: a series whose last hours are
    missing (a partial last hour left out) cuts that many hours earlier, and the backtest runs
    (it failed with Prophet's "no value for cross-validation remaining")."""
    frame = small.frame.copy()
    frame.loc[frame.index[-3:], "y"] = np.nan
    gappy = HourlySeries(frame, source="gappy")
    full = plan_backtest(small, forecast_horizon_hours=24, max_cutoffs=2)
    cut = plan_backtest(gappy, forecast_horizon_hours=24, max_cutoffs=2)
    assert cut.cutoffs == tuple(c - 3 for c in full.cutoffs)
    result = backtest(gappy, ForecastSettings(horizon_hours=24), cut)
    assert len(result.frame) > 0


def test_default_plan_for_two_weeks(small: HourlySeries) -> None:
    plan = plan_backtest(small, forecast_horizon_hours=336)
    # 3-day forecasts from the last 5 daily cutoffs, each fit on at least a week
    assert plan.horizon_hours == 72 and plan.initial_hours == 168 and plan.period_hours == 24
    assert plan.cutoffs == (167, 191, 215, 239, 263)
    assert plan.to_dict(small)["cutoffs"][0] == "2025-01-12T23:00:00Z"
    short = plan_backtest(small, forecast_horizon_hours=24, max_cutoffs=2)
    assert short.horizon_hours == 24 and short.cutoffs == (287, 311)
    with pytest.raises(UsageError, match="336 hours are too few to backtest a 168 h horizon"):
        plan_backtest(small, horizon_hours=168, initial_hours=200)
    with pytest.raises(UsageError, match="each fit needs at least 48 hours"):
        plan_backtest(small, initial_hours=24)


def test_naive_points_skip_missing_values_a_season_back() -> None:
    history = np.array([1.0, 2.0, np.nan, 4.0, 5.0, 6.0, 7.0, np.nan])
    points, steps = baseline.naive_points(history, 5, season=3)
    # hour 8 <- hour 5; 9 <- 6; 10 <- 7 is missing, so two seasons back: 4; 11 and 12 are
    # two seasons past the history: 5 and 6
    np.testing.assert_array_equal(points, [6.0, 7.0, 5.0, 6.0, 7.0])
    np.testing.assert_array_equal(steps, [1, 1, 2, 2, 2])
    assert baseline.season_for(400) == 168 and baseline.season_for(30) == 24
    assert baseline.naive_scale(np.array([1.0, 2.0, 4.0, 8.0]), 2) == pytest.approx(4.5)


def test_scores_by_hand() -> None:
    frame = pd.DataFrame(
        {
            "y": [100.0, 200.0, 0.0, 50.0],
            "p_mean": [110.0, 150.0, 10.0, 50.0],
            "p_lower_80": [95.0, 210.0, 1.0, 40.0],
            "p_upper_80": [105.0, 240.0, 5.0, 60.0],
            "p_lower_95": [90.0, 140.0, 0.0, 30.0],
            "p_upper_95": [120.0, 260.0, 20.0, 70.0],
            "scale": [20.0, 20.0, 20.0, 20.0],
        }
    )
    s = score(frame, "p_")
    assert s.mape == pytest.approx((0.1 + 0.25 + 0.0) / 3)  # the zero hour is left out
    assert s.mape_points == 3 and s.points == 4
    assert s.smape == pytest.approx((20 / 210 + 100 / 350 + 2 + 0) / 4)
    assert s.mase == pytest.approx((10 + 50 + 10 + 0) / 4 / 20)
    assert s.coverage_80 == 0.5 and s.coverage_95 == 1.0
    assert s.accuracy == pytest.approx(1 - s.mape)


def test_backtest_scores_prophet_and_the_baseline_on_the_same_hours(
    small: HourlySeries,
) -> None:
    calls: list[tuple[int, int]] = []
    result = backtest(
        small,
        ForecastSettings(),
        plan_backtest(small, horizon_hours=48, max_cutoffs=3),
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls == [(1, 3), (2, 3), (3, 3)]
    frame = result.frame
    assert set(frame["cutoff"]) == {small.frame["ds"].iloc[c] for c in result.plan.cutoffs}
    assert frame[["y", "p_mean", "b_mean"]].notna().all().all()
    assert result.prophet.points == result.baseline.points == len(frame)
    # the baseline is the same hour one week earlier, read straight off the series
    position = ((frame["ds"] - small.frame["ds"].iloc[0]) / pd.Timedelta(hours=1)).astype(int)
    week_back = small.values[position - 168]
    found = np.isfinite(week_back)
    np.testing.assert_array_equal(frame["b_mean"].to_numpy()[found], week_back[found])
    np.testing.assert_array_equal(frame["y"].to_numpy(), small.values[position])
    # missing hours are never scored
    assert np.isfinite(small.values[position]).all()
    assert [d["day_ahead"] for d in result.by_day] == [1, 2]
    assert result.baseline_name == "same hour last week"
    assert result.to_dict(small)["plan"]["cutoffs"][-1] == "2025-01-17T23:00:00Z"


def test_band_scale_is_the_quantile_of_errors_over_half_widths() -> None:
    rows = 100
    frame = pd.DataFrame(
        {
            "y": np.full(rows, 100.0),
            "p_mean": 100.0 + np.linspace(0, 20, rows),  # errors 0..20
            "p_lower_80": 95.0,
            "p_upper_80": 105.0,  # half-width 5
        }
    )
    result = BacktestResult(
        plan=BacktestPlan(horizon_hours=100, initial_hours=48, period_hours=24, cutoffs=(47,)),
        settings=ForecastSettings(),
        growth="flat",
        prophet=score(frame.assign(scale=1.0, p_lower_95=0.0, p_upper_95=1.0), "p_"),
        baseline=score(frame.assign(scale=1.0, p_lower_95=0.0, p_upper_95=1.0), "p_"),
        frame=frame,
    )
    # 80% of the errors are under 16: the band must be 16/5 = 3.2 times as wide
    assert band_scale(result) == pytest.approx(np.quantile(np.linspace(0, 20, rows), 0.8) / 5)
    assert math.isclose(band_scale(result), 3.2, rel_tol=0.01)


def test_tune_picks_the_lowest_backtest_mape(small: HourlySeries) -> None:
    settings = ForecastSettings(growth="linear")
    grid = {"changepoint_prior_scale": (0.01, 0.5), "seasonality_mode": ("additive",)}
    plan = plan_backtest(small, horizon_hours=48, max_cutoffs=2)
    seen: list[int] = []
    result = tune(small, settings, plan, grid=grid, progress=lambda d, t: seen.append(t))
    assert set(seen) == {4}
    mapes = [row["mape"] for row in result.table]
    assert mapes == sorted(mapes) and len(mapes) == 2
    assert result.best.changepoint_prior_scale == result.table[0]["changepoint_prior_scale"]
    again = backtest(small, result.best, plan)
    assert again.prophet.mape == pytest.approx(result.table[0]["mape"], abs=1e-5)


def test_candidates_follow_the_resolved_growth() -> None:
    # auto on a short history is flat: no changepoints, so only the seasonality grid varies
    flat = candidates(ForecastSettings(), history_hours=14 * 24)
    assert len(flat) == 4 and {c.growth for c in flat} == {"flat"}
    linear = candidates(ForecastSettings(), history_hours=60 * 24)
    assert len(linear) == 16 and {c.growth for c in linear} == {"linear"}
    with pytest.raises(UsageError, match="cannot tune holidays_prior_scale"):
        candidates(ForecastSettings(), 400, {"holidays_prior_scale": (1.0,)})
