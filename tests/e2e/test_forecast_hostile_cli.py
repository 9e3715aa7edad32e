"""``planner forecast`` handed hostile input: a clear error before any fit (never exit 70), or a
forecast whose stderr holds planner's notes and nothing of cmdstanpy's."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.conftest import WriteFile
from tests.e2e.test_forecast_cli import forecast


def _series(hours: int = 72) -> str:
    rows = [
        f"2025-01-{6 + h // 24:02d}T{h % 24:02d}:00:00Z,{100 + 50 * math.sin(h / 24 * 6.283):.1f}"
        for h in range(hours)
    ]
    return "ds,y\n" + "\n".join(rows) + "\n"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def _fails(home: Path, args: list[str], message: str, code: int) -> None:
    result = forecast(home, *args)
    assert result.returncode == code, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("ds", "where"),
    [("9999-12-31 00:00", "row 1, line 2"), ("0001-01-01T00:00:00", "row 1, line 2")],
)
def test_hours_pandas_cannot_hold_are_located_errors(
    home: Path, write: WriteFile, ds: str, where: str
) -> None:
    path = write("far.csv", f"ds,y\n{ds},5\n2025-01-06T00:00:00Z,5\n")
    _fails(
        home,
        ["--series", str(path), "--no-backtest"],
        f"{where}, column 'ds': '{ds}' is outside the hours planner handles, "
        "1900-01-01 to 2200-01-01 (UTC)",
        1,
    )


@pytest.mark.parametrize("horizon", ["100000d", "2600w"])
def test_horizon_beyond_a_year_is_an_option_error(
    home: Path, write: WriteFile, horizon: str
) -> None:
    path = write("s.csv", _series())
    _fails(
        home,
        ["--series", str(path), "--horizon", horizon],
        f"--horizon '{horizon}': ",
        2,
    )
    result = forecast(home, "--series", str(path), "--horizon", horizon)
    assert "at most 8,760 hours (365 days)" in result.stderr


@pytest.mark.parametrize("option", ["--demand-out", "--plot"])
@pytest.mark.parametrize("where", ["missing folder", "proc", "folder"])
def test_unwritable_outputs_fail_before_the_fit(
    home: Path, write: WriteFile, tmp_path: Path, option: str, where: str
) -> None:
    series = write("s.csv", _series())
    path = {
        "missing folder": tmp_path / "no" / "out.csv",
        "proc": Path("/proc/out.csv"),
        "folder": tmp_path / "out",
    }[where]
    if where == "folder":
        path.mkdir()
    expected = {
        "missing folder": "does not exist",
        "proc": "cannot write there",
        "folder": "is a folder",
    }[where]
    _fails(home, ["--series", str(series), "--no-backtest", option, str(path)], expected, 2)
    left = {p.name for p in tmp_path.iterdir()}
    assert left == ({"out", "s.csv"} if where == "folder" else {"s.csv"})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seed", "-1"], "Invalid value for '--seed'"),
        (["--horizon", "9" * 400 + "h"], "expected whole hours such as 48h"),
        (["--quantile", "nan"], "quantile nan: expected a number between 0 and 1"),
    ],
)
def test_bad_numbers_are_option_errors(
    home: Path, write: WriteFile, args: list[str], message: str
) -> None:
    series = write("s.csv", _series())
    _fails(home, ["--series", str(series), "--no-backtest", *args], message, 2)


def test_a_long_event_is_a_located_error(home: Path, write: WriteFile) -> None:
    series = write("s.csv", _series())
    events = write("events.csv", "name,start,end\nsale,2025-01-01,2025-12-31\n")
    _fails(
        home,
        ["--series", str(series), "--no-backtest", "--events", str(events)],
        "row 1, line 2, column 'end': 2025-01-01 to 2025-12-31 is 365 days",
        1,
    )


def test_a_forecast_prints_no_cmdstanpy_lines_and_writes_whole_files(
    home: Path, write: WriteFile, tmp_path: Path
) -> None:
    """One small fit: stderr holds planner's notes only; both files are written whole."""
    series = write("s.csv", _series())
    demand, chart = tmp_path / "demand.csv", tmp_path / "chart.html"
    result = forecast(
        home,
        "--series",
        str(series),
        "--no-backtest",
        "--horizon",
        "24h",
        "--demand-out",
        str(demand),
        "--plot",
        str(chart),
        "-q",
    )
    assert result.returncode == 0, result.stderr
    for line in result.stderr.splitlines():
        assert line.startswith(("note:", "warning:", " ")), result.stderr
    assert "cmdstanpy" not in result.stderr and "ERROR" not in result.stderr
    lines = demand.read_text().splitlines()
    assert lines[0] == "ds,y" and len(lines) == 25
    assert chart.read_text().rstrip().endswith("</html>")
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {"chart.html", "demand.csv", "s.csv", "home"}  # no temporary file left
