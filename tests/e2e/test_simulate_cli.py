"""``planner simulate`` as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import AZURE_CODE
from tests.e2e.test_cli import run

BASE = ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--precision", "fp8"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("sim") / "home"
    assert run(home, "ingest", str(AZURE_CODE), "--name", "code").returncode == 0
    return home


def test_simulate_json_and_outputs(home: Path, tmp_path: Path) -> None:
    requests = tmp_path / "requests.parquet"
    timeline = tmp_path / "timeline.csv"
    summary_file = tmp_path / "summary.json"
    result = run(
        home,
        "simulate",
        "--dataset",
        "code",
        *BASE,
        "--replicas",
        "1",
        "--slo-ttft",
        "2s",
        "--slo-tpot",
        "100ms",
        "--price-per-hour",
        "4",
        "--out-requests",
        str(requests),
        "--out-timeline",
        str(timeline),
        "--out-summary",
        str(summary_file),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    overall = data["summary"]["all"]
    assert data["requests"] == overall["finished"] == 8819
    assert 0 < overall["ttft"]["p50"] <= overall["ttft"]["p99"] <= overall["ttft"]["max"]
    assert 0 <= overall["slo_attainment"] <= 1
    hours = data["fleet"]["gpu_hours"]["on-demand"]
    assert data["cost"]["total"] == pytest.approx(4 * hours)
    frame = pd.read_parquet(requests)
    assert len(frame) == 8819 and set(frame["class"]) == {"default"}
    assert (frame["first_token_s"] >= frame["arrival_s"]).all()
    assert pd.read_csv(timeline)["replicas_up"].max() == 1
    assert json.loads(summary_file.read_text())["requests"] == 8819


def test_same_seed_same_result(home: Path) -> None:
    args = [
        "simulate",
        "--dataset",
        "code",
        *BASE,
        "--spot",
        "2",
        "--replicas",
        "0",
        "--spot-interruptions-per-hour",
        "3",
        "--seed",
        "7",
        "--json",
    ]
    first, second = (json.loads(run(home, *args).stdout) for _ in range(2))
    assert first["summary"] == second["summary"] and first["fleet"] == second["fleet"]


def test_human_output(home: Path) -> None:
    result = run(
        home, "simulate", "--dataset", "code", *BASE, "--replicas", "2", "--router", "round-robin"
    )
    assert result.returncode == 0, result.stderr
    for text in (
        "time to first token",
        "P99",
        "SLO attainment",
        "GPU-hours",
        "2 replicas launched",
    ):
        assert text in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*BASE], "error: give exactly one of --dataset (replay) or --rates"),
        (["--dataset", "nope", *BASE], "error: no dataset named 'nope'"),
        (
            ["--dataset", "code", *BASE, "--slo-ttft", "soon"],
            "error: --slo-ttft 'soon': expected a duration",
        ),
        (
            ["--dataset", "code", *BASE, "--router", "random"],
            "error: router 'random': expected one of round-robin",
        ),
        (["--dataset", "code", *BASE, "--slo", "vip:ttft=1s"], "error: --slo: unknown class 'vip'"),
        (
            ["--dataset", "code", *BASE, "--load-scale", "0"],
            "error: --load-scale 0: expected a positive number",
        ),
        (
            ["--dataset", "code", *BASE, "--out-requests", "x.xlsx"],
            "unsupported output format '.xlsx'",
        ),
        (
            ["--dataset", "code", "--gpu", "H100-SXM", "--model", "llama-3.1-70b"],
            "does not fit 1 x H100-SXM",
        ),
    ],
)
def test_bad_options(home: Path, args: list[str], message: str) -> None:
    result = run(home, "simulate", *args)
    assert result.returncode == (1 if "no dataset" in message else 2), result.stderr  # 1: not found
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def simulate_json(home: Path, *args: str) -> dict[str, Any]:
    result = run(home, "simulate", "--dataset", "code", *BASE, *args, "--json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_requests_simulates_only_the_first(home: Path) -> None:
    data = simulate_json(home, "--requests", "100")
    assert data["requests"] == data["summary"]["all"]["requests"] == 100
    assert data["requests_available"] == 8819
    text = run(home, "simulate", "--dataset", "code", *BASE, "--requests", "100")
    assert "simulated 100 of 8,819 requests" in text.stdout


@pytest.mark.parametrize("value", ["0", "-3"])
def test_requests_below_one_is_a_usage_error(home: Path, value: str) -> None:
    result = run(home, "simulate", "--dataset", "code", *BASE, "--requests", value)
    assert result.returncode == 2
    assert f"--requests {value}: expected at least 1 request" in result.stderr
    assert "Traceback" not in result.stderr


def test_max_model_len_truncates_long_prompts(home: Path) -> None:
    full = simulate_json(home, "--requests", "500")
    cut = simulate_json(home, "--requests", "500", "--max-model-len", "1024")
    affected = cut["prompt_limit"]["affected"]
    assert cut["prompt_limit"] == {
        "max_model_len": 1024,
        "over_length": "truncate",
        "affected": affected,
    }
    assert 0 < affected < 500
    assert cut["summary"]["all"]["finished"] == full["summary"]["all"]["finished"] == 500
    assert cut["summary"]["all"]["input_tokens"] < full["summary"]["all"]["input_tokens"]
    assert full["prompt_limit"] is None
    assert any(f"{affected:,} of 500 requests" in note for note in cut["notes"])


def test_max_model_len_refuse_counts_them_failed(home: Path) -> None:
    cut = simulate_json(home, "--requests", "500", "--max-model-len", "1024")
    refused = simulate_json(
        home, "--requests", "500", "--max-model-len", "1024", "--over-length", "refuse"
    )
    affected = refused["prompt_limit"]["affected"]
    assert affected == cut["prompt_limit"]["affected"] > 0
    overall = refused["summary"]["all"]
    assert refused["requests"] == overall["requests"] == 500
    assert overall["rejected"] == affected
    assert overall["finished"] == 500 - affected


def test_slo_attainment_is_na_without_targets(home: Path) -> None:
    without = simulate_json(home, "--requests", "200")
    assert without["summary"]["all"]["slo_attainment"] is None
    assert without["summary"]["all"]["goodput_rps"] is None
    text = run(home, "simulate", "--dataset", "code", *BASE, "--requests", "200").stdout
    assert "SLO attainment n/a" in text
    with_target = simulate_json(home, "--requests", "200", "--slo-ttft", "2s")
    assert 0 <= with_target["summary"]["all"]["slo_attainment"] <= 1


# A small KV cache (20% of the H100's memory: about 50k tokens) under 4x the code trace's load,
# so that the KV cache, not compute, limits the batch.
KV_BOUND = [
    "--engine",
    "vllm",
    "--gpu-memory-utilization",
    "0.2",
    "--load-scale",
    "4",
    "--requests",
    "1500",
]


def test_admission_no_evict_never_preempts_and_says_so(home: Path) -> None:
    filled = simulate_json(home, *KV_BOUND, "--admission", "preempt", "--kv-watermark", "0")
    assert filled["summary"]["all"]["preemptions"] > 0  # this load does run out of KV
    assert filled["serving"]["admission"] == "preempt"
    assert filled["serving"]["admission_source"] == "--admission"
    assert filled["serving"]["kv_watermark"] == 0
    reserved = simulate_json(home, *KV_BOUND, "--admission", "no_evict")
    assert reserved["summary"]["all"]["preemptions"] == 0
    assert reserved["summary"]["all"]["finished"] == 1500
    assert reserved["serving"]["admission"] == "no_evict"
    assert reserved["serving"]["admission_source"] == "--admission"


def test_admission_defaults_to_the_engines(home: Path) -> None:
    vllm = simulate_json(home, *KV_BOUND)
    assert vllm["serving"]["admission"] == "preempt"
    assert vllm["serving"]["admission_source"] == "engine default (vllm)"
    assert vllm["serving"]["kv_watermark"] == 0.01  # vLLM's watermark
    trtllm = simulate_json(home, "--requests", "200")
    assert trtllm["serving"]["engine"] == "trtllm"
    assert trtllm["serving"]["admission"] == "no_evict"
    assert trtllm["serving"]["admission_source"] == "engine default (trtllm)"
    text = run(home, "simulate", "--dataset", "code", *BASE, "--requests", "200")
    assert "admission no_evict, from engine default (trtllm)" in text.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--admission", "evict"], "error: --admission 'evict': expected preempt or no_evict"),
        (["--kv-watermark", "1"], "error: --kv-watermark 1: expected a share of the KV cache"),
        (["--kv-watermark", "nan"], "error: --kv-watermark nan: expected a share of the KV cache"),
    ],
)
def test_bad_admission_options(home: Path, args: list[str], message: str) -> None:
    result = run(home, "simulate", "--dataset", "code", *BASE, *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
