"""``planner forecast`` as a user runs it, and its demand curve through ``planner simulate``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli import app
from planner.workload.rates import read_rate_curve
from tests.conftest import AZURE_CODE, ROOT, WriteFile
from tests.e2e.test_cli import run

SERVEGEN = ROOT / "data" / "samples" / "servegen_rates_10min.csv"
# Until `forecast` is registered in planner.cli, run the same app with it added, in a real
# process all the same.
REGISTERED = "forecast" in {c.name for c in app.registered_commands}
SHIM = (
    "import sys\n"
    "from planner.cli import app\n"
    "from planner.cli.context import user_errors\n"
    "from planner.cli.forecast import forecast_command\n"
    "app.command('forecast')(user_errors(forecast_command))\n"
    "sys.argv[0] = 'planner'\n"
    "app()\n"
)


def forecast(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if REGISTERED:
        return run(home, "forecast", *args)
    env = {
        k: v for k, v in os.environ.items() if k not in ("PLANNER_DATABASE_URL", "PLANNER_DEBUG")
    }
    env["PLANNER_HOME"] = str(home)
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-c", SHIM, "forecast", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("forecast") / "home"
    assert run(home, "ingest", str(AZURE_CODE), "--name", "code").returncode == 0
    return home


def test_forecast_servegen_json_demand_curve_and_plot(home: Path, tmp_path: Path) -> None:
    demand = tmp_path / "demand.csv"
    chart = tmp_path / "forecast.html"
    result = forecast(
        home,
        "--series",
        str(SERVEGEN),
        "--model",
        "m-small",
        "--horizon",
        "2d",
        "--quantile",
        "0.9",
        "--demand-out",
        str(demand),
        "--plot",
        str(chart),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["method"] == "prophet" and data["growth"] == "flat"
    assert data["history"]["missing_hours"] == 13 and data["horizon"]["hours"] == 48
    assert len(data["points"]) == len(data["demand"]) == 48
    bt = data["backtest"]
    assert bt["plan"]["horizon_hours"] == 48 and len(bt["plan"]["cutoffs"]) == 5
    assert bt["prophet"]["points"] == bt["baseline"]["points"] > 200
    assert data["band_scale"] > 1  # calibrated by the backtest
    first = data["points"][0]
    assert first["ds"] == "2025-01-20T00:00:00Z"
    assert first["lower_95"] <= first["lower_80"] <= first["upper_80"] <= first["upper_95"]
    assert data["demand"][0]["y"] == pytest.approx(first["upper_80"], rel=1e-6)
    assert isinstance(data["id"], int)
    curve = read_rate_curve(demand)
    assert curve.hours == 48 and curve.total_requests > 0
    html = chart.read_text(encoding="utf-8")
    assert "plotly" in html and "demand curve (q=0.9)" in html


def test_human_output_tune_and_the_simulator_reads_the_demand_curve(
    home: Path, tmp_path: Path, write: WriteFile
) -> None:
    # ServeGen's small model at 1/2000 of its load: ~750-4,500 requests an hour
    rows = [line.split(",") for line in SERVEGEN.read_text().splitlines()[1:]]
    hours: dict[int, float] = {}
    for model, start, _rate, count in rows:
        if model == "m-small":
            hour = int(start) // 3600
            hours[hour] = hours.get(hour, 0.0) + float(count) / 2000
    series = write(
        "small.csv",
        "ds,y\n"
        + "".join(
            f"2025-01-{6 + h // 24:02d}T{h % 24:02d}:00:00Z,{'' if v == 0 else f'{v:.1f}'}\n"
            for h, v in sorted(hours.items())
        ),
    )
    demand = tmp_path / "demand.csv"
    result = forecast(
        home,
        "--series",
        str(series),
        "--horizon",
        "1d",
        "--tune",
        "--cutoffs",
        "2",
        "--demand-out",
        str(demand),
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "tuning: 4 candidates by backtest MAPE" in out
    assert "same hour last week" in out and "Prophet" in out
    assert "forecast by day" in out and "2025-01-20 Mon" in out
    assert "stored as forecast #" in out
    assert "missing hour(s)" in result.stderr and "bands scaled by" in result.stderr

    simulated = run(
        home,
        "simulate",
        "--rates",
        str(demand),
        "--tokens-from",
        "code",
        "--gpu",
        "H100-SXM",
        "--model",
        "llama-3.1-8b",
        "--precision",
        "fp8",
        "--replicas",
        "1",
        "--json",
    )
    assert simulated.returncode == 0, simulated.stderr
    served = json.loads(simulated.stdout)
    expected = read_rate_curve(demand).total_requests
    assert abs(served["requests"] - expected) < 5 * expected**0.5


def test_short_history_is_an_error_unless_allow_baseline(home: Path, write: WriteFile) -> None:
    series = write(
        "short.csv",
        "ds,y\n" + "".join(f"2025-01-06T{h:02d}:00:00Z,{100 + h}\n" for h in range(24)),
    )
    refused = forecast(home, "--series", str(series))
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert "error: requests per hour, file short.csv: 24 hour(s) of data" in refused.stderr
    assert "--allow-baseline" in refused.stderr

    allowed = forecast(
        home, "--series", str(series), "--allow-baseline", "--horizon", "6h", "--json"
    )
    assert allowed.returncode == 0, allowed.stderr
    data = json.loads(allowed.stdout)
    assert data["method"] == "seasonal-naive" and data["backtest"] is None
    assert [p["mean"] for p in data["points"]] == [100.0, 101.0, 102.0, 103.0, 104.0, 105.0]
    assert "warning: only 24 hour(s) of history" in allowed.stderr


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        ([], "error: give exactly one of --dataset NAME or --series FILE.csv", 2),
        (["--dataset", "code", "--horizon", "soon"], "--horizon 'soon': expected whole hours", 2),
        (["--dataset", "nope"], "error: no dataset named 'nope'; known datasets: code", 1),
        (["--dataset", "code", "--quantile", "2"], "quantile 2.0: expected a number between", 2),
        (
            ["--series", "BAD", "--tune", "--no-backtest"],
            "--tune chooses settings by backtest; it cannot go with --no-backtest",
            2,
        ),
    ],
)
def test_usage_errors(
    home: Path, write: WriteFile, args: list[str], message: str, code: int
) -> None:
    args = [str(write("bad.csv", "ds,y\n")) if a == "BAD" else a for a in args]
    result = forecast(home, *args)
    assert result.returncode == code, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_series_file_names_row_line_and_column(home: Path, write: WriteFile) -> None:
    path = write("bad.csv", "ds,y\n2025-01-06T00:00:00Z,5\n2025-01-06T01:00:00Z,five\n")
    result = forecast(home, "--series", str(path))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: {path}: row 2, line 3, column 'y': 'five': expected a non-negative number, "
        "or empty/NaN for a missing hour"
    )


def test_the_dataset_is_too_short_to_forecast(home: Path) -> None:
    """The Azure code trace covers one hour: a clear error naming what is needed."""
    result = forecast(home, "--dataset", "code")
    assert result.returncode == 2
    assert "error: requests per hour, dataset code: 0 hour(s) of data" in result.stderr
