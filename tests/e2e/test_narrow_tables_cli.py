"""Result tables at 80 columns (a real ``planner`` process, not a terminal): no cell is cut
("…"), and every number the ``--json`` output gives appears whole, formatted as printed."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from planner.bench.server import BenchServer, ModelEngine, ServerThread
from tests.conftest import AZURE_CODE, ROOT, SERVEGEN
from tests.e2e.test_cli import PLANNER

PUBLISHED = ROOT / "data" / "reference" / "published_latency.csv"


def run80(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("PLANNER_DATABASE_URL", "PLANNER_DEBUG")
    }
    env["PLANNER_HOME"] = str(home)
    env["COLUMNS"] = "80"
    return subprocess.run(
        [PLANNER, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def assert_whole(stdout: str, numbers: list[str]) -> None:
    assert "…" not in stdout, stdout
    assert all(len(line) <= 80 for line in stdout.splitlines() if "│" in line or "─" in line)
    for number in numbers:
        assert number in stdout, (number, stdout)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("narrow") / "home"
    assert run80(home, "ingest", str(AZURE_CODE), "--name", "code").returncode == 0
    return home


def seconds(v: float) -> str:
    return f"{v:,.{3 if abs(v) < 10 else 1 if abs(v) < 10_000 else 0}f}"


SIMULATE = [
    "simulate",
    "--dataset",
    "code",
    "--gpu",
    "A100-80GB",
    "--model",
    "llama-2-70b",
    "--tp",
    "2",
]


@pytest.mark.parametrize("extra", [[], ["--load-scale", "20"]])
def test_simulate_latency_table(home: Path, extra: list[str]) -> None:
    shown = run80(home, *SIMULATE, *extra)
    assert shown.returncode == 0, shown.stderr
    summary = json.loads(run80(home, *SIMULATE, *extra, "--json").stdout)["summary"]["all"]
    in_ms = "latency (ms)" in shown.stdout
    assert in_ms or "latency (s)" in shown.stdout
    numbers = [
        f"{v * 1e3:,.1f}" if in_ms else seconds(v)
        for key in ("ttft", "tpot", "e2e")
        for q, v in summary[key].items()
        if q in ("p50", "p90", "p95", "p99", "max", "mean") and v is not None
    ]
    assert_whole(shown.stdout, numbers)
    assert "end-to-end" in shown.stdout


def test_latency_tables(home: Path) -> None:
    args = ["latency", "--gpu", "A100-80GB", "--model", "llama-2-7b", "--precision", "fp16"]
    args += ["--qps", "2"]
    shown = run80(home, *args)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(run80(home, *args, "--json").stdout)
    loaded = data["under_load"]
    numbers = [
        f"{data['ttft_ms']:,.1f} ms",
        f"{data['tpot_ms']:,.2f} ms",
        f"{data['e2e_ms']:,.0f} ms",
        f"{data['kv_capacity_tokens']:,} tokens",
        f"{data['max_output_tokens_per_s']:,.0f} output tokens/s",
        f"{loaded['ttft_ms']:,.1f} ms",
        *(
            f"{loaded['percentiles'][key][q]:,.1f}"
            for key in ("ttft", "tpot", "e2e")
            for q in ("mean", "p50", "p90", "p99")
        ),
    ]
    assert_whole(shown.stdout, numbers)


def test_catalog_precisions_table(home: Path) -> None:
    shown = run80(home, "catalog", "precisions")
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(run80(home, "catalog", "precisions", "--json").stdout)
    numbers = [f"{p['weight_bytes']:.3f}" for p in rows]
    numbers += [f"{p['quality_delta_pct']:+.1f}%" for p in rows]
    assert_whole(shown.stdout, [p["name"] for p in rows] + numbers)


def test_datasets_show_table(home: Path) -> None:
    shown = run80(home, "datasets", "show", "code")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(run80(home, "datasets", "show", "code", "--json").stdout)
    numbers = [
        f"{data['rows']:,}",
        f"{data['input_tokens']['mean']:,.0f}",
        f"{data['input_tokens']['p50']:,.0f} / {data['input_tokens']['p99']:,.0f}",
        f"{data['output_tokens']['p50']:,.0f} / {data['output_tokens']['p99']:,.0f}",
    ]
    assert_whole(shown.stdout, numbers)


def test_prices_versions_table(home: Path) -> None:
    assert run80(home, "prices", "load-snapshot").returncode == 0
    shown = run80(home, "prices", "versions")
    assert shown.returncode == 0, shown.stderr
    versions = json.loads(run80(home, "prices", "versions", "--json").stdout)
    assert_whole(shown.stdout, [v["source_kind"] for v in versions])


def test_forecast_tables(home: Path) -> None:
    args = ["forecast", "--series", str(SERVEGEN), "--model", "m-small", "--horizon", "2d"]
    shown = run80(home, *args)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(run80(home, *args, "--json").stdout)
    numbers = [f"{data['backtest']['prophet']['mape']:.1%}"]
    for day in data["daily"]:
        numbers += [
            f"{day[k]:,.0f}"
            for k in ("mean", "lower_80", "upper_80", "lower_95", "upper_95", "peak_demand")
        ]
    assert_whole(shown.stdout, numbers)


def test_calibrate_table(home: Path) -> None:
    args = ["calibrate", str(PUBLISHED), "--gpu", "H100-SXM"]
    shown = run80(home, *args, "--name", "narrow")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(run80(home, *args, "--name", "narrow-json", "--json").stdout)
    assert_whole(shown.stdout, [f"{row['measured']:,.1f}" for row in report["per_point"]])


@pytest.fixture(scope="module")
def served() -> Iterator[BenchServer]:
    """planner's stand-in server (as in test_bench_cli), in this process."""
    engine = ModelEngine(speed=200.0)
    with ServerThread(BenchServer(engine, model_name=engine.model_name, port=0)) as server:
        yield server


@pytest.mark.bench
def test_bench_run_tables(home: Path, tmp_path: Path, served: BenchServer) -> None:
    out = tmp_path / "run.json"
    shown = run80(
        home, "bench", "run", "--url", served.url, "--pattern", "concurrency", "--concurrency",
        "2", "--requests", "6", "--input-tokens", "32", "--output-tokens", "8", "--out", str(out),
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    summary = json.loads(out.read_text())
    summary = summary.get("summary", summary)
    numbers = [
        f"{summary[f'{stat}_{key}_ms']:,.1f}"
        for key in ("ttft", "tpot", "itl", "e2el")
        for stat in ("mean", "median", "p90", "p99")
        if summary.get(f"{stat}_{key}_ms") is not None
    ]
    assert numbers
    assert_whole(shown.stdout, [f"{summary['duration']:,.2f} s", *numbers])


@pytest.mark.bench
def test_bench_engine_table(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "engine.json"
    shown = run80(
        home, "bench", "engine", "--batches", "1,2", "--prompts", "8,16", "--output-tokens",
        "4", "--repeats", "1", "--out", str(out),
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    points = json.loads(out.read_text())["points"]
    numbers = [f"{p['cpu'][k]:,.2f}" for p in points for k in ("ttft_ms", "tpot_ms", "e2e_ms")]
    assert_whole(shown.stdout, numbers)
