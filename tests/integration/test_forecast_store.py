"""Forecasting from the store (SQLite, and PostgreSQL when configured): hourly series by SQL,
stored forecasts, and demand curves that feed the simulator."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import func, select

import planner.store.forecast_models  # noqa: F401  (registers the forecast tables)
from planner.errors import NotFoundError, UsageError
from planner.forecast.backtest import backtest
from planner.forecast.demand import demand_curve, rate_curve, write_demand_curve
from planner.forecast.model import ForecastSettings, forecast
from planner.forecast.run import forecast_record
from planner.forecast.series import read_servegen
from planner.ingest import IngestOptions, TimeKind, TimeSpec, TimeUnit, ingest_file
from planner.latency.profile import DEFAULT_ENGINE
from planner.latency.registry import resolve_profile
from planner.simulate.fleet import FleetConfig
from planner.simulate.run import ServingSpec, simulate
from planner.simulate.workload import synthetic
from planner.store import Store
from planner.store.calibrations import known_profiles
from planner.store.forecast_models import ForecastPoint, ForecastRun
from planner.store.forecasts import list_forecasts, load_forecast, points_frame, save_forecast
from planner.store.models import Base
from planner.store.queries import delete_dataset
from planner.usecases.forecast import series_from_dataset
from planner.usecases.load import token_pool
from planner.workload.rates import RateCurve, read_rate_curve
from tests.conftest import AZURE_CODE, SERVEGEN

START_S = 1_736_121_600  # 2025-01-06T00:00:00Z, a Monday
HOURS = 5 * 24


def gateway_log(path: Path) -> pd.DataFrame:
    """Five days of two models' requests following ServeGen's hourly shapes, scaled to ~20-60
    requests an hour, with a dead hour and a log starting 20 minutes into its first hour."""
    rng = np.random.default_rng(7)
    rows = []
    for model in ("m-mid", "m-small"):
        shape = read_servegen(SERVEGEN, model=model, zero_windows="zero").values[:HOURS]
        per_hour = rng.poisson(shape / shape.mean() * (40 if model == "m-mid" else 20))
        per_hour[50] = 0  # nobody came (or the gateway was down): a zero hour
        for hour, count in enumerate(per_hour):
            offset = 1200 if hour == 0 else 0  # the log starts at 00:20
            times = START_S + hour * 3600 + rng.uniform(offset, 3600, count)
            for t in times:
                rows.append((t, int(rng.integers(50, 2000)), int(rng.integers(1, 400)), model))
    frame = pd.DataFrame(rows, columns=["ts", "prompt", "completion", "model"])
    frame.to_csv(path, index=False, float_format="%.6f")
    return frame


@pytest.fixture
def gateway(store: Store, tmp_path: Path) -> pd.DataFrame:
    frame = gateway_log(tmp_path / "gateway.csv")
    mapping = {
        "arrival": "ts",
        "input_tokens": "prompt",
        "output_tokens": "completion",
        "model": "model",
    }
    options = IngestOptions(
        name="gateway",
        format="generic",
        mapping=mapping,
        time=TimeSpec(TimeKind.EPOCH, TimeUnit.S),
    )
    ingest_file(store, tmp_path / "gateway.csv", options)
    return frame


def test_forecast_tables_match_their_migration(store: Store) -> None:
    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diffs = compare_metadata(context, Base.metadata)
    # Other issues' tables may be registered elsewhere; these two must match exactly.
    assert [d for d in diffs if "forecast" in repr(d)] == []
    assert {"forecasts", "forecast_points"} <= set(Base.metadata.tables)


def test_hourly_series_from_a_dataset_by_sql(store: Store, gateway: pd.DataFrame) -> None:
    gateway = gateway.assign(hour=(gateway["ts"] // 3600 - START_S // 3600).astype(int))
    with store.session() as session:
        for metric, column in (
            ("requests", None),
            ("input_tokens", "prompt"),
            ("output_tokens", "completion"),
        ):
            for model in (None, "m-small"):
                series = series_from_dataset(session, "gateway", metric=metric, model=model)
                part = gateway if model is None else gateway[gateway["model"] == model]
                grouped = part.groupby("hour")
                sums = grouped.size() if column is None else grouped[column].sum()
                expected = sums.reindex(range(HOURS), fill_value=0).to_numpy(float)
                assert series.hours == HOURS
                assert np.isnan(series.values[0])  # the partial first hour is left out
                np.testing.assert_array_equal(series.values[1:], expected[1:])
        series = series_from_dataset(session, "gateway")
        report = series.report
        assert report.zero_hours == 1 and report.zeros[0].start.hour == 2  # hour 50
        assert report.missing_hours == 1
        assert any("first hour 2025-01-06T00:00:00Z is partial" in n for n in report.notes)
        assert any("all 2 models summed (m-mid, m-small)" in n for n in report.notes)
        assert series.dataset_id is not None
        with pytest.raises(NotFoundError, match="no model 'm-big'"):
            series_from_dataset(session, "gateway", model="m-big")
        with pytest.raises(UsageError, match="metric 'cost'"):
            series_from_dataset(session, "gateway", metric="cost")


def test_forecast_is_stored_and_read_back(store: Store, gateway: pd.DataFrame) -> None:
    with store.session() as session:
        series = series_from_dataset(session, "gateway", model="m-mid")
    settings = ForecastSettings(horizon_hours=48)
    checked = backtest(series, settings)
    assert checked.baseline_name == "same hour yesterday"  # five days: no week to look back
    result = forecast(series, settings)
    with store.session() as session:
        run = save_forecast(session, **forecast_record(result, backtest=checked, quantile=0.9))
        forecast_id = run.id
    with store.session() as session:
        run = load_forecast(session, forecast_id)
        assert (run.metric, run.model, run.method, run.horizon_hours) == (
            "requests",
            "m-mid",
            "prophet",
            48,
        )
        assert run.source == "dataset gateway" and run.demand_quantile == 0.9
        assert run.settings["growth_resolved"] == "flat"
        assert run.scores["backtest"]["prophet"]["points"] == checked.prophet.points
        assert run.scores["series"]["zero_hours"] == series.report.zero_hours == 3  # 50, 87, 88
        stored = points_frame(run)
        assert len(stored) == 48 and set(stored["metric"]) == {"requests"}
        np.testing.assert_allclose(stored["mean"], result.points["mean"])
        np.testing.assert_allclose(stored["upper_95"], result.points["upper_95"])
        np.testing.assert_allclose(stored["demand"], result.demand(0.9)["y"])
        assert (stored["ds"] == result.points["ds"]).all()
        assert [r.id for r in list_forecasts(session, run.dataset_id)] == [forecast_id]
        with pytest.raises(NotFoundError, match="no stored forecast #999"):
            load_forecast(session, 999)
    # Deleting the dataset keeps the forecast (its source still names the dataset).
    with store.session() as session:
        delete_dataset(session, "gateway")
    with store.session() as session:
        run = load_forecast(session, forecast_id)
        assert run.dataset_id is None and len(run.points) == 48
        session.delete(run)
    with store.session() as session:
        assert session.scalar(select(func.count()).select_from(ForecastRun)) == 0
        assert session.scalar(select(func.count()).select_from(ForecastPoint)) == 0


def test_demand_curve_feeds_the_simulator(store: Store, tmp_path: Path) -> None:
    """Forecast ServeGen's small model scaled to a few requests a second, write the demand curve
    at q=0.9, read it as the simulator reads `--rates`, and serve two hours of it."""
    small = read_servegen(SERVEGEN, model="m-small")
    # 1.5-9 million requests an hour, scaled to 750-4,500 (0.2-1.3 a second)
    series = replace(small, frame=small.frame.assign(y=small.values / 2000))
    result = forecast(series, ForecastSettings(horizon_hours=24))
    curve = demand_curve(result, 0.9)
    path = write_demand_curve(curve, tmp_path / "demand.csv")
    assert path.read_text().splitlines()[:2] == [
        "ds,y",
        f"2025-01-20T00:00:00Z,{curve['y'].iloc[0]:.6g}",
    ]
    rates = read_rate_curve(path)
    assert rates.hours == 24 and rates.start == small.end
    np.testing.assert_allclose(rates.requests_per_hour, curve["y"], rtol=1e-5)
    assert (rates.requests_per_hour >= result.points["mean"].to_numpy() * 0.99).all()
    np.testing.assert_allclose(rate_curve(curve).requests_per_hour, curve["y"])

    ingest_file(store, AZURE_CODE)
    with store.session() as session:
        inputs, outputs = token_pool(session, "AzureLLMInferenceTrace_code_2023")
        profile = resolve_profile(known_profiles(session), "H100-SXM", DEFAULT_ENGINE)
    two_hours = RateCurve(rates.start, rates.requests_per_hour[:2])
    workload = synthetic(two_hours, inputs, outputs, seed=1)
    expected = two_hours.total_requests
    assert abs(len(workload) - expected) < 4 * np.sqrt(expected)
    sim = simulate(
        workload,
        ServingSpec(gpu="H100-SXM", model="llama-3.1-8b", precision="fp8"),
        FleetConfig(replicas={"on-demand": 1}),
        profile,
    )
    assert sim.summary["all"]["finished"] == len(workload)
    assert sim.simulated_s >= 3600
