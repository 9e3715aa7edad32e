"""Load as benchmarks make it, as a user runs it: ``planner simulate --clients`` (a closed loop)
and ``--arrival``, ``planner latency --concurrency`` with the simulated closed loop's
percentiles, ``planner bench import --replay``; ``--json`` and the errors of bad combinations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import AZURE_CODE, ROOT
from tests.e2e.test_cli import run

BASE = ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--precision", "fp8"]
STAGES = ROOT / "tests" / "fixtures" / "serving" / "inference-perf"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("loads") / "home"
    assert run(home, "ingest", str(AZURE_CODE), "--name", "code").returncode == 0
    return home


def _json(home: Path, *args: str) -> Any:
    result = run(home, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_simulate_clients_json_and_outputs(home: Path, tmp_path: Path) -> None:
    requests = tmp_path / "requests.csv"
    timeline = tmp_path / "timeline.csv"
    data = _json(
        home,
        "simulate",
        "--dataset",
        "code",
        *BASE,
        "--clients",
        "16",
        "--think-time",
        "500ms",
        "--client-start",
        "staggered",
        "--replicas",
        "2",
        "--requests",
        "10000",
        "--slo-ttft",
        "2s",
        "--price-per-hour",
        "4",
        "--out-requests",
        str(requests),
        "--out-timeline",
        str(timeline),
    )
    assert data["load_model"] == "closed loop: 16 clients, staggered, think 0.5 s"
    overall = data["summary"]["all"]
    assert data["requests"] == overall["finished"] == 10_000
    assert data["requests_available"] == 8819
    assert any("cycled" in note for note in data["notes"])
    assert 0 < overall["ttft"]["p50"] <= overall["ttft"]["p99"]
    assert overall["ttft"]["interval"]["p99"]["confidence"] == 0.9  # the error bars
    assert 0 <= overall["slo_attainment"] <= 1
    assert data["cost"]["total"] == pytest.approx(4 * data["fleet"]["gpu_hours"]["on-demand"])
    frame = pd.read_csv(requests)
    assert len(frame) == 10_000 and (frame["first_token_s"] >= frame["arrival_s"]).all()
    assert pd.read_csv(timeline)["replicas_up"].max() == 2
    text = run(home, "simulate", "--dataset", "code", *BASE, "--clients", "4", "--requests", "50")
    assert text.returncode == 0, text.stderr
    assert "load: closed loop: 4 clients, synchronized, think 0 s" in text.stdout
    assert "time to first token" in text.stdout and "SLO attainment" in text.stdout


def test_waves_of_identical_requests_show_the_lock_step_ttft(home: Path, tmp_path: Path) -> None:
    """GenAI-Perf's clients: N identical requests sent and returned together; the last prompt
    of each wave waits for the others, so mean TTFT grows with N."""
    trace = tmp_path / "same.csv"  # an Azure-format log of 20 identical requests
    rows = [f"2023-11-16 18:17:{second:02d}.0000000,2000,100" for second in range(20)]
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    assert run(home, "ingest", str(trace), "--name", "same").returncode == 0
    means = []
    for clients in ("1", "16", "64"):
        data = _json(
            home,
            "simulate",
            "--dataset",
            "same",
            *BASE,
            "--clients",
            clients,
            "--client-start",
            "waves",
            "--requests",
            str(4 * int(clients)),
            "--confidence",
            "0",
        )
        assert data["summary"]["all"]["finished"] == 4 * int(clients)
        means.append(data["summary"]["all"]["ttft"]["mean"])
    assert means == sorted(means) and means[-1] > 5 * means[0]


def test_simulate_arrival_options(home: Path, tmp_path: Path) -> None:
    rates = tmp_path / "rates.csv"
    rates.write_text("ds,y\n2026-01-01 00:00,1800\n")
    common = ["simulate", "--rates", str(rates), "--tokens-from", "code", *BASE]
    constant = _json(home, *common, "--arrival", "constant", "--confidence", "0")
    bursty = _json(home, *common, "--arrival", "bursty", "--cv", "4", "--confidence", "0")
    assert constant["requests"] == 1800  # one every 2 s, exactly
    assert constant["load_model"].startswith("open loop: constant-rate arrivals")
    assert "inter-arrival CV 4" in bursty["load_model"]
    # bursts queue prompts that evenly spaced arrivals never queue
    assert bursty["summary"]["all"]["ttft"]["p99"] > constant["summary"]["all"]["ttft"]["p99"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--clients", "8", "--autoscale"], "--autoscale cannot go with it"),
        (["--clients", "8", "--spot", "1"], "--spot cannot go with it"),
        (["--clients", "8", "--schedule", "1,2"], "--schedule cannot go with it"),
        (["--clients", "8", "--load-scale", "2"], "--load-scale cannot go with it"),
        (["--clients", "0"], "--clients 0: expected 1 to 100,000 clients"),
        (["--clients", "8", "--client-start", "late"], "--client-start 'late'"),
        (["--clients", "8", "--think-time", "soon"], "--think-time 'soon'"),
        (["--think-time", "1s"], "give --clients N"),
        (["--client-start", "waves"], "give --clients N"),
        (["--arrival", "constant"], "a --dataset replay keeps the log's own arrival times"),
    ],
)
def test_simulate_bad_combinations(home: Path, args: list[str], message: str) -> None:
    result = run(home, "simulate", "--dataset", "code", *BASE, *args)
    assert result.returncode != 0
    assert message in result.stderr and "Traceback" not in result.stderr


def test_latency_concurrency_percentiles(home: Path) -> None:
    args = ["latency", *BASE, "--input", "1000", "--output", "200", "--concurrency", "32"]
    data = _json(home, *args, "--client-start", "waves", "--sim-requests", "2000")
    loaded = data["under_load"]
    sim = loaded["percentiles"]
    assert sim["arrivals"] == "closed loop" and sim["client_start"] == "waves"
    assert sim["clients"] == 32 and sim["requests"] == 2000
    assert 0 < sim["ttft"]["p50"] <= sim["ttft"]["p99"]
    assert loaded["ttft_ms"] > 0  # the model's mean stays beside them
    text = run(home, *args, "--think-time", "200ms")
    assert text.returncode == 0, text.stderr
    assert "closed loop of 32 clients (synchronized, think 0.2 s)" in " ".join(text.stdout.split())
    bad = run(home, "latency", *BASE, "--qps", "2", "--client-start", "waves")
    assert bad.returncode != 0 and "give --concurrency N" in bad.stderr


def test_bench_import_replay(home: Path) -> None:
    stage = str(STAGES / "stage_0_lifecycle_metrics.json")
    deployment = ["--gpu", "H100-SXM", "--precision", "fp16", "--no-store"]
    data = _json(home, "bench", "import", stage, *deployment, "--replay")
    replay = data[0]["replay"]
    assert replay["profile"] == "vllm-default"
    assert replay["load_model"].startswith("open loop: constant arrivals at 5 req/s")
    stats = {row["metric"]: row for row in replay["statistics"]}
    assert stats["ttft_mean"]["measured"] == pytest.approx(25.04, abs=0.01)
    for row in stats.values():
        assert row["error"] == pytest.approx(row["predicted"] / row["measured"] - 1)
    text = run(home, "bench", "import", stage, *deployment, "--replay")
    assert text.returncode == 0, text.stderr
    assert "measured" in text.stdout and "predicted" in text.stdout
    assert "median absolute error" in text.stdout
    plain = _json(home, "bench", "import", stage, *deployment)
    assert "replay" not in plain[0]
    missing = run(home, "bench", "import", stage, "--no-store", "--replay")
    assert missing.returncode != 0 and "--replay" in missing.stderr
    assert "Traceback" not in missing.stderr
