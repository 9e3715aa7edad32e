"""A forecast run as ``planner forecast`` and the Load forecast page make it (planner.forecast.run
on values, planner.usecases.forecast and .forecasts with the store), on the real store: fitted, stored, and
shown again from the store."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import planner.store.forecast_models  # noqa: F401  (registers the forecast tables)
from planner.errors import InputFileError, NotFoundError, UsageError
from planner.forecast.model import ForecastSettings
from planner.forecast.run import (
    BacktestOptions,
    ForecastRunResult,
    backtest_table,
    bundled_series,
    by_day_table,
    demand_csv,
    demand_frame,
    fit_forecast,
    plan_for,
    read_series_upload,
    run_messages,
    run_rows,
    series_models,
    series_upload_models,
)
from planner.forecast.series import HourlySeries, SeriesReport, read_servegen
from planner.store import Store
from planner.store.forecasts import list_forecasts, load_forecast, points_frame, save_forecast
from planner.usecases.forecast import load_series
from planner.usecases.forecasts import stored_history
from planner.workload.rates import read_rate_curve
from tests.conftest import SERVEGEN

# A day ahead from the last of two weeks, one backtest cutoff: a few seconds on a busy core.
SMALL = ForecastSettings(horizon_hours=24)
ONE_CUTOFF = BacktestOptions(cutoffs=1)


Fitted = tuple[HourlySeries, ForecastRunResult, list[tuple[str, int, int]]]


@pytest.fixture(scope="module")
def fitted_small() -> Fitted:
    series = load_series(None, series_file=SERVEGEN, model="m-small")
    stages: list[tuple[str, int, int]] = []
    run = fit_forecast(
        series,
        SMALL,
        ONE_CUTOFF,
        quantile=0.9,
        progress=lambda stage, done, total: stages.append((stage, done, total)),
    )
    return series, run, stages


def test_a_run_backtests_fits_and_reads_the_demand_curve(fitted_small: Fitted) -> None:
    series, run, stages = fitted_small
    assert series.model == "m-small"
    assert stages[0] == ("backtesting", 0, 1) and stages[-1] == ("backtesting", 1, 1)
    assert run.checked is not None and len(run.checked.plan.cutoffs) == 1
    assert run.result.method == "prophet" and len(run.result.points) == 24
    assert run.checked.baseline_name == "same hour last week"
    # the bands were scaled to what the backtest covered, and say so
    assert any(note.startswith("bands scaled by") for note in run.result.notes)
    expected = np.quantile(run.result.samples, 0.9, axis=1)
    assert run.demand["y"].to_numpy() == pytest.approx(np.maximum(expected, 0))


def test_a_stored_run_is_shown_again_as_it_was_fitted(
    store: Store, fitted_small: Fitted, tmp_path: Path
) -> None:
    series, run, _ = fitted_small
    with store.session() as session:
        forecast_id = save_forecast(session, **run.record()).id
    with store.session() as session:
        stored = load_forecast(session, forecast_id)
        points = points_frame(stored)
        history = stored_history(session, stored)  # the bundled file, read again
        table = backtest_table(stored.scores["backtest"])
        by_day = by_day_table(stored.scores["backtest"])
        notes, warnings = run_messages(stored)
        rows = run_rows(list_forecasts(session))
    assert history is not None and run.checked is not None
    pd.testing.assert_frame_equal(history.frame, series.frame)
    assert table["method"].tolist() == ["Prophet", "baseline: same hour last week"]
    assert table.loc[0, "MAPE"] == pytest.approx(run.checked.prophet.mape, abs=1e-5)
    assert table.loc[1, "MAPE"] == pytest.approx(run.checked.baseline.mape, abs=1e-5)
    assert table.loc[1, "80% band coverage"] == pytest.approx(
        run.checked.baseline.coverage_80, abs=1e-5
    )
    assert table["hours scored"].tolist() == [run.checked.prophet.points] * 2
    assert by_day["day ahead"].tolist() == [1]
    assert notes[: len(series.report.lines())] == series.report.lines()
    assert set(run.result.notes) <= set(notes) and warnings == run.result.warnings
    assert rows["id"].tolist() == [forecast_id] and rows.loc[0, "model"] == "m-small"

    # the demand curve downloads as what `simulate --rates` / `recommend --demand` read
    curve = demand_frame(points)
    path = tmp_path / "demand.csv"
    path.write_text(demand_csv(curve))
    read = read_rate_curve(path)
    assert read.requests_per_hour == pytest.approx(run.demand["y"].to_numpy(), rel=1e-5)
    assert pd.Timestamp(read.start).tz_convert(None) == run.demand["ds"].iloc[0]


def test_no_history_when_the_series_is_gone_or_another(store: Store, fitted_small: Fitted) -> None:
    _series, run, _ = fitted_small
    other = replace(run.result.series, source="file my_own_rates.csv")
    with store.session() as session:
        mine = save_forecast(
            session, **replace(run, result=replace(run.result, series=other)).record()
        ).id
        shifted = replace(
            run.result.series, frame=run.result.series.frame.iloc[24:].reset_index(drop=True)
        )
        moved = save_forecast(
            session, **replace(run, result=replace(run.result, series=shifted)).record()
        ).id
    with store.session() as session:
        assert stored_history(session, load_forecast(session, mine)) is None
        # a bundled file of that name that spans other hours than the fit's is not its history
        assert stored_history(session, load_forecast(session, moved)) is None


def test_a_stored_run_without_a_demand_curve_says_so() -> None:
    points = pd.DataFrame({"ds": pd.date_range("2025-01-06", periods=2, freq="h")})
    points["demand"] = [1.0, None]
    with pytest.raises(NotFoundError, match="no demand curve"):
        demand_frame(points)
    assert backtest_table(None).empty and by_day_table(None).empty


def test_backtest_plans_as_the_cli_did() -> None:
    series = read_servegen(SERVEGEN, model="m-small")
    short = series.head(40)
    assert plan_for(short, SMALL, BacktestOptions()) == (
        None,
        "no backtest: the history is too short",
    )
    with pytest.raises(UsageError, match="too few to backtest"):
        plan_for(short, SMALL, BacktestOptions(wanted=True))
    assert plan_for(series, SMALL, BacktestOptions(wanted=False)) == (None, None)
    plan, note = plan_for(series, SMALL, BacktestOptions(cutoffs=3))
    assert note is None and plan is not None and len(plan.cutoffs) == 3
    with pytest.raises(UsageError, match="cannot go with --no-backtest"):
        BacktestOptions(wanted=False, tune=True).validate()
    plan, note = plan_for(series, SMALL, BacktestOptions(horizon_hours=400))
    assert plan is None and note is not None and note.startswith("no backtest: ")


def test_series_sources_are_checked_as_the_cli_checks_them() -> None:
    with pytest.raises(UsageError, match="exactly one of --dataset NAME or --series"):
        load_series(None)
    with pytest.raises(UsageError, match="exactly one of"):
        load_series(None, dataset="x", series_file=SERVEGEN)
    with pytest.raises(UsageError, match="--metric applies to datasets"):
        load_series(None, series_file=SERVEGEN, metric="input_tokens")
    with pytest.raises(NotFoundError, match="no model 'm-large'"):
        load_series(None, series_file=SERVEGEN, model="m-large")


def test_bundled_and_uploaded_series() -> None:
    assert SERVEGEN in bundled_series()
    assert series_models(SERVEGEN) == ["m-mid", "m-small"]
    data = SERVEGEN.read_bytes()
    assert series_upload_models("rates.csv", data) == ["m-mid", "m-small"]
    uploaded = read_series_upload("C:\\data\\rates.csv", data, model="m-mid")
    pd.testing.assert_frame_equal(uploaded.frame, read_servegen(SERVEGEN, model="m-mid").frame)
    assert uploaded.source == "ServeGen rates.csv"
    plain = b"ds,y\n2025-01-06T00:00:00Z,10\n2025-01-06T01:00:00Z,12\n"
    assert series_upload_models("plain.csv", plain) == []
    assert read_series_upload("plain.csv", plain).values.tolist() == [10.0, 12.0]


def test_a_bad_upload_is_located_by_its_own_name() -> None:
    bad = b"ds,y\n2025-01-06T00:00:00Z,10\n2025-01-06T01:00:00Z,lots\n"
    with pytest.raises(InputFileError) as raised:
        read_series_upload("../my series.csv", bad)
    message = str(raised.value)
    assert message.startswith("my series.csv: row 2, line 3, column 'y'"), message
    assert "planner-series-" not in message
    with pytest.raises(NotFoundError) as missing:
        read_series_upload("rates.csv", SERVEGEN.read_bytes(), model="m-large")
    assert "rates.csv: no model 'm-large'" in str(missing.value)
    assert "planner-series-" not in str(missing.value)


def test_a_series_report_survives_the_store() -> None:
    series = read_servegen(SERVEGEN, model="m-small").zeros_as_gaps()
    report = series.report
    assert report.missing  # ServeGen's gap windows
    assert SeriesReport.from_dict(report.to_dict()) == report
