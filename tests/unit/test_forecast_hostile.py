"""Hostile input to the forecast's library: dates pandas cannot hold, horizons past a year,
output files that cannot be written, cmdstanpy's noise on a fit that succeeded."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cmdstanpy.utils import get_logger

from planner.cli.forecast import MAX_HORIZON_HOURS, parse_hours
from planner.errors import InputFileError, PlannerError, UsageError
from planner.forecast.demand import write_demand_curve
from planner.forecast.model import ForecastSettings, naive_forecast, read_events, seeded
from planner.forecast.plot import write_html
from planner.forecast.series import HourlySeries, read_series_csv
from planner.workload.rates import read_rate_curve
from tests.conftest import WriteFile

# --- dates outside pandas' range ------------------------------------------------------------


@pytest.mark.parametrize("ds", ["9999-12-31 00:00", "0001-01-01T00:00:00", "2262-06-01T00:00Z"])
def test_series_hours_outside_the_range_are_located_errors(write: WriteFile, ds: str) -> None:
    path = write("far.csv", f"ds,y\n2025-01-06T00:00:00Z,5\n{ds},5\n")
    with pytest.raises(InputFileError) as caught:
        read_series_csv(path)
    message = str(caught.value)
    assert "row 2, line 3, column 'ds'" in message
    assert "outside the hours planner handles, 1900-01-01 to 2200-01-01" in message


def test_rate_curve_hours_outside_the_range_are_located_errors(write: WriteFile) -> None:
    path = write("rates.csv", "ds,y\n9999-12-31T23:00:00Z,5\n")
    with pytest.raises(InputFileError, match=r"row 1, line 2, column 'ds': '9999-12-31T23:00:00Z'"):
        read_rate_curve(path)


def test_event_dates_outside_the_range_and_long_events(write: WriteFile, tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="column 'start': '9999-01-01': outside the dates"):
        read_events(write("far.csv", "name,start\nlaunch,9999-01-01\n"))
    with pytest.raises(InputFileError, match="2025-01-01 to 2025-12-31 is 365 days; an event"):
        read_events(write("long.csv", "name,start,end\nsale,2025-01-01,2025-12-31\n"))
    with pytest.raises(InputFileError, match="is a folder"):
        read_events(tmp_path)


# --- horizons ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["100000d", "2600w", "366d", "8761h"])
def test_horizon_past_a_year_is_an_option_error(text: str) -> None:
    with pytest.raises(UsageError, match=r"at most 8,760 hours \(365 days\)"):
        parse_hours("--horizon", text, MAX_HORIZON_HOURS)


def test_horizon_of_a_year_is_fine_and_absurd_numbers_are_option_errors() -> None:
    assert parse_hours("--horizon", "365d", MAX_HORIZON_HOURS) == 8760
    with pytest.raises(UsageError, match="expected whole hours"):
        parse_hours("--horizon", "9" * 400 + "h", MAX_HORIZON_HOURS)  # float('inf') hours


# --- output files ----------------------------------------------------------------------------


def _forecast() -> tuple[HourlySeries, pd.DataFrame]:
    ds = pd.date_range("2025-01-06", periods=30, freq="h")
    series = HourlySeries(pd.DataFrame({"ds": ds, "y": np.arange(30.0) + 10}))
    result = naive_forecast(series, ForecastSettings(horizon_hours=6))
    return series, result.demand(0.9)


@pytest.mark.parametrize("where", ["missing folder", "proc", "folder"])
def test_demand_curve_to_an_unwritable_path_is_a_usage_error(tmp_path: Path, where: str) -> None:
    _, demand = _forecast()
    path = {
        "missing folder": tmp_path / "no" / "demand.csv",
        "proc": Path("/proc/demand.csv"),
        "folder": tmp_path,
    }[where]
    with pytest.raises(UsageError, match="--demand-out"):
        write_demand_curve(demand, path, "--demand-out")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_failed_write_leaves_the_old_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk mid-write: an error naming the option, the old file untouched, no temp."""
    _, demand = _forecast()
    path = tmp_path / "demand.csv"
    path.write_text("old\n")

    def full(self: Path, *args: object, **kwargs: object) -> int:
        raise OSError(28, os.strerror(28))

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(UsageError, match="--demand-out .*No space left on device"):
        write_demand_curve(demand, path, "--demand-out")
    monkeypatch.undo()
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["demand.csv"]


def test_chart_to_a_folder_is_a_usage_error(tmp_path: Path) -> None:
    series, demand = _forecast()
    result = naive_forecast(series, ForecastSettings(horizon_hours=6))
    with pytest.raises(UsageError, match="--plot .*is a folder"):
        write_html(result, tmp_path, demand, 0.9, "--plot")
    with pytest.raises(UsageError, match="--plot .*does not exist"):
        write_html(result, tmp_path / "no" / "chart.html", demand, 0.9, "--plot")


# --- cmdstanpy -----------------------------------------------------------------------------


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_cmdstanpy_errors_are_silent_during_a_fit_and_the_level_comes_back() -> None:
    """cmdstanpy logs "error: code '1' Operation not permitted" when L-BFGS stops early, though
    Prophet then succeeds with Newton: nothing of it may reach the user."""
    logger = get_logger()
    before = logger.level
    seen = _Records()
    logger.addHandler(seen)
    try:
        with seeded(0):
            logger.error("Chain [1] error: code '1' Operation not permitted")
        assert seen.messages == []
        assert logger.level == before
        logger.critical("after the fit")
        assert seen.messages == ["after the fit"]
    finally:
        logger.removeHandler(seen)


def test_a_fit_that_fails_for_good_is_a_planner_error() -> None:
    before = get_logger().level
    failed = pytest.raises(
        PlannerError, match="Prophet could not fit the series .*Error during opt"
    )
    with failed, seeded(0):
        assert logging.getLogger("cmdstanpy").level == logging.CRITICAL
        raise RuntimeError("Error during optimization! Command '...' failed")
    assert get_logger().level == before
