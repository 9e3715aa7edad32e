"""``planner recommend`` and ``planner recommendations`` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DEMO_SAMPLE, ROOT
from tests.e2e.test_cli import run

TARGETS = ["--model", "llama-3.1-8b", "--slo-ttft-p99", "2s", "--slo-tpot-p99", "200ms"]
SMALL = [
    "--gpu",
    "L4,H100",
    "--max-seqs",
    "128",
    "--chunked-prefill",
    "on",
    "--verify-top",
    "3",
    "--workers",
    "1",
    "--no-compare-gpus",
]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("rec") / "home"
    assert run(home, "ingest", str(DEMO_SAMPLE), "--name", "demo").returncode == 0
    return home


@pytest.fixture(scope="module")
def demand_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demand") / "demand.csv"
    rates = [3600, 7200, 14400, 18000, 10800, 3600]  # requests per hour: peak 5 req/s
    rows = [f"2025-01-06T{h:02d}:00:00Z,{y}" for h, y in enumerate(rates)]
    path.write_text("ds,y\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_recommend_demand_csv_json_and_stored(home: Path, demand_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    chart = tmp_path / "chart.html"
    result = run(
        home,
        "recommend",
        "--demand",
        str(demand_csv),
        "--tokens-from",
        "demo",
        *TARGETS,
        *SMALL,
        "--out",
        str(out),
        "--plot",
        str(chart),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert json.loads(out.read_text(encoding="utf-8"))["winner"] == data["winner"]
    html = chart.read_text(encoding="utf-8")
    for trace in ("demand (req", "instances", "Pareto front", data["winner"]["gpu"]):
        assert f'"name":"{trace}' in html
    winner = data["winner"]
    assert winner["verified"] and winner["verification"]["passed"]
    assert winner["gpu"] in ("L4", "H100-SXM")
    assert winner["p99_ttft_s"] <= 2.0 and winner["p99_tpot_s"] <= 0.2
    assert data["demand"]["hours"] == 6
    assert data["demand"]["peak_requests_per_s"] == pytest.approx(5.0)
    # the winner is the cheapest verified row, and its plan's cost is its cost
    assert winner["monthly_usd"] == min(r["monthly_usd"] for r in data["ranked"] if r["verified"])
    assert data["plan"]["chosen"]["monthly_usd"] == pytest.approx(winner["monthly_usd"])
    assert data["plan"]["all_on_demand_monthly_usd"] >= winner["monthly_usd"]
    assert {c["load"] for c in data["plan"]["sensitivity"]} == {"-20%", "+20%"}
    assert len(data["hourly"]["instances"]) == 6
    assert data["stats"]["screened"] >= data["stats"]["verified"] >= 1
    assert all(r["reason"] for r in data["rejected"])

    listed = run(home, "recommendations", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    stored = [r for r in json.loads(listed.stdout) if r["id"] == data["id"]]
    assert stored and stored[0]["monthly_usd"] == pytest.approx(winner["monthly_usd"])
    shown = run(home, "recommendations", "show", str(data["id"]), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["result"]["winner"]["id"] == winner["id"]
    text = run(home, "recommendations", "show", str(data["id"]), "--plot", str(chart))
    assert text.returncode == 0 and "verified yes" in text.stdout
    assert '"name":"Pareto front"' in chart.read_text(encoding="utf-8")


def test_recommend_replays_a_dataset_and_prints_a_table(home: Path) -> None:
    result = run(home, "recommend", "--dataset", "demo", *TARGETS, *SMALL, "--no-save")
    assert result.returncode == 0, result.stderr
    assert "recommended:" in result.stdout
    assert "alternatives" in result.stdout and "per million tokens" in result.stdout
    assert "stored as" not in result.stdout


def test_recommend_from_a_stored_forecast(home: Path) -> None:
    series = ROOT / "data" / "samples" / "servegen_rates_10min.csv"
    forecast = run(
        home, "forecast", "--series", str(series), "--model", "m-small", "--horizon", "1d", "--json"
    )
    assert forecast.returncode == 0, forecast.stderr
    forecast_id = json.loads(forecast.stdout)["id"]
    result = run(
        home,
        "recommend",
        "--demand",
        str(forecast_id),
        "--tokens-from",
        "demo",
        "--load-scale",
        "0.002",
        *TARGETS,
        *SMALL,
        "--json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["demand"]["source"].startswith(f"forecast #{forecast_id}")
    assert data["demand"]["hours"] == 24 and data["winner"] is not None


def test_no_fleet_meets_an_impossible_target(home: Path, demand_csv: Path) -> None:
    result = run(
        home,
        "recommend",
        "--demand",
        str(demand_csv),
        "--tokens-from",
        "demo",
        "--model",
        "llama-3.1-8b",
        "--slo-ttft-p99",
        "5ms",
        *SMALL,
        "--json",
    )
    assert result.returncode == 1
    assert "no configuration met the targets" in result.stderr
    data = json.loads(result.stdout)
    assert data["winner"] is None and data["plan"] is None
    assert data["rejected_by_reason"].get("misses-ttft", 0) > 0
    assert any("target 5 ms" in r["detail"] for r in data["rejected"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "llama-3.1-8b", "--slo-ttft-p99", "2s"], "give exactly one of --dataset"),
        (["--dataset", "demo", "--model", "llama-3.1-8b"], "at least one latency target"),
        (["--dataset", "demo", *TARGETS, "--chunked-prefill", "maybe"], "--chunked-prefill"),
        (["--dataset", "demo", *TARGETS, "--slo-ttft-p99", "fast"], "expected a duration"),
        (["--dataset", "demo", *TARGETS, "--slo", "vip:ttft=1s"], "unknown class 'vip'"),
        (["--dataset", "demo", *TARGETS, "--tp", "two"], "--tp"),
        (["--dataset", "demo", *TARGETS, "--purchase", "forever"], "unknown purchase option"),
        (["--dataset", "nope", *TARGETS], "nope"),
        (["--dataset", "demo", "--model", "gpt-9", "--slo-ttft-p99", "2s"], "gpt-9"),
        (["--dataset", "demo", *TARGETS, "--provider", "oracle"], "unknown provider 'oracle'"),
        (["--dataset", "demo", *TARGETS, "--max-spot-share", "2"], "--max-spot-share"),
    ],
)
def test_bad_options_get_one_clear_line(home: Path, args: list[str], message: str) -> None:
    result = run(home, "recommend", *args)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_demand_csv_needs_token_lengths(home: Path, demand_csv: Path) -> None:
    result = run(home, "recommend", "--demand", str(demand_csv), *TARGETS)
    assert result.returncode == 2 and "--tokens-from" in result.stderr


def test_show_unknown_recommendation(home: Path) -> None:
    result = run(home, "recommendations", "show", "999")
    assert result.returncode != 0 and "no stored recommendation #999" in result.stderr


def test_help() -> None:
    result = run(Path("/nonexistent"), "recommend", "--help")
    assert result.returncode == 0
    for option in ("--slo-ttft-p99", "--dask", "--max-quality-loss", "--json", "--budget"):
        assert option in result.stdout


def test_a_comma_list_of_models_allows_alternatives(home: Path) -> None:
    result = run(
        home,
        "recommend",
        "--dataset",
        "demo",
        "--model",
        "llama-3.1-8b,qwen2.5-7b",
        "--slo-ttft-p99",
        "2s",
        *SMALL,
        "--no-save",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["request"]["constraints"]["alternative_models"] == ["qwen2.5-7b"]
    # both models were searched: each is either ranked or rejected with a reason
    seen = {row["model"] for row in data["ranked"]} | {r["model"] for r in data["rejected"]}
    assert seen == {"llama-3.1-8b", "qwen2.5-7b"}
    assert data["winner"]["model"] in seen


def test_request_classes_have_their_own_targets_and_spot_tolerance(
    home: Path, tmp_path: Path
) -> None:
    # an hour of a log with two classes: 70% chat, 30% batch (which tolerates interruption)
    rng = np.random.default_rng(7)
    arrival = np.sort(rng.uniform(0, 3600, 5400))
    kind = np.where(rng.random(5400) < 0.3, "batch", "chat")
    lines = [
        f"{t:.3f},{int(i)},{int(o)},{k}"
        for t, i, o, k in zip(
            arrival, rng.integers(200, 2000, 5400), rng.integers(20, 400, 5400), kind, strict=True
        )
    ]
    path = tmp_path / "classes.csv"
    path.write_text("t,in,out,kind\n" + "\n".join(lines) + "\n", encoding="utf-8")
    ingest = run(
        home,
        "ingest",
        str(path),
        "--name",
        "classes",
        *("--map", "arrival=t", "--map", "input_tokens=in", "--map", "output_tokens=out"),
        *("--map", "priority_class=kind", "--time-kind", "relative", "--time-unit", "s"),
        "--start",
        "2025-01-06T00:00:00Z",
    )
    assert ingest.returncode == 0, ingest.stderr
    result = run(
        home,
        "recommend",
        "--dataset",
        "classes",
        *TARGETS,
        "--slo",
        "batch:ttft=60s,tpot=1s",
        "--spot-class",
        "batch",
        "--max-spot-share",
        "0.6",
        "--provider",
        "gcp",  # GCP's L4 instances have spot prices in the bundled sheet
        "--purchase",
        "on-demand",  # no commitment: the spot share applies to the whole fleet
        *SMALL,
        "--no-save",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    slos = data["request"]["targets"]["slos"]
    assert slos["chat"]["ttft_s"] == 2.0 and slos["batch"]["ttft_s"] == 60.0
    batch_share = float((kind == "batch").mean())
    assert data["request"]["spot_share"] == pytest.approx(0.6 * batch_share)
    verification = data["winner"]["verification"]
    assert set(verification["p99"]) == {"batch", "chat"}  # each class checked on its own
    assert verification["p99"]["chat"]["ttft"] <= 2.0
    assert data["plan"]["chosen"]["spot_share"] == pytest.approx(0.6 * batch_share)
    cost = data["plan"]["chosen"]["cost"]
    assert data["plan"]["chosen"]["option"] == "on-demand"
    assert cost["spot_usd"] > 0 and cost["on_demand_usd"] > 0
    # spot, cheaper than on-demand, runs the tolerant share: the plan saves against on-demand
    assert data["plan"]["chosen"]["monthly_usd"] < data["plan"]["all_on_demand_monthly_usd"]
