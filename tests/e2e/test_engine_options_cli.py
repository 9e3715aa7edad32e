"""Engine sizing options of ``planner simulate`` and ``planner recommend``: --engine,
--kv-cache (default: the engine's) and --gpu-memory-utilization, and what the output says
about them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.latency.engines import get_engine
from tests.conftest import AZURE_CODE, DEMO_SAMPLE
from tests.e2e.test_cli import run

BASE = ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--precision", "fp8"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("engines") / "home"
    assert run(home, "ingest", str(AZURE_CODE), "--name", "code").returncode == 0
    assert run(home, "ingest", str(DEMO_SAMPLE), "--name", "demo").returncode == 0
    return home


def _simulate(home: Path, *args: str) -> dict[str, Any]:
    result = run(home, "simulate", "--dataset", "code", *BASE, *args, "--json", "-q")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_simulate_uses_the_engine_defaults(home: Path) -> None:
    trt = _simulate(home)["serving"]
    assert trt["engine"] == "trtllm" and trt["kv_cache"] == "fp8"
    assert trt["kv_cache_source"] == "engine default (trtllm follows FP8 weights)"
    assert trt["max_seqs"] == get_engine("trtllm").max_seqs  # max_batch_size
    assert trt["memory"]["rule"] == "free" and trt["memory"]["utilization"] == 0.9
    assert trt["kv_capacity_tokens"] == trt["memory"]["kv_cache_tokens"]
    asked = _simulate(home, "--kv-cache", "fp16", "--max-seqs", "256")["serving"]
    assert (asked["kv_cache"], asked["kv_cache_source"]) == ("fp16", "--kv-cache")
    assert asked["max_seqs"] == 256
    assert asked["kv_capacity_tokens"] < 0.55 * trt["kv_capacity_tokens"]
    vllm = _simulate(home, "--engine", "vllm", "--profile", "trtllm-default")["serving"]
    assert vllm["engine"] == "vllm" and vllm["kv_cache"] == "fp16"
    assert vllm["memory"]["rule"] == "total" and vllm["max_seqs"] == get_engine("vllm").max_seqs
    low = _simulate(home, "--gpu-memory-utilization", "0.5")["serving"]
    assert low["memory"]["utilization"] == 0.5
    assert low["kv_capacity_tokens"] < 0.6 * trt["kv_capacity_tokens"]


def test_simulate_prints_memory_and_kv_cache(home: Path) -> None:
    result = run(home, "simulate", "--dataset", "code", *BASE, "-q")
    assert result.returncode == 0, result.stderr
    assert "memory per GPU:" in result.stdout and "GiB" in result.stdout
    assert "in fp8 (engine default (trtllm follows FP8 weights))" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine", "vlm"], "error: unknown engine 'vlm'; known engines: vllm"),
        (["--gpu-memory-utilization", "1.2"], "error: --gpu-memory-utilization 1.2: expected"),
        (["--gpu-memory-utilization", "inf"], "error: --gpu-memory-utilization inf: expected"),
        (["--kv-cache", "int4"], "error: --kv-cache 'int4': expected fp32, fp16 or fp8"),
    ],
)
def test_simulate_bad_engine_options(home: Path, args: list[str], message: str) -> None:
    result = run(home, "simulate", "--dataset", "code", *BASE, *args, "-q")
    assert result.returncode == 2
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_simulate_with_each_engine_uses_its_own_profile(home: Path) -> None:
    for engine in ("vllm", "sglang"):
        result = run(home, "simulate", "--dataset", "code", *BASE, "--engine", engine, "--json")
        assert result.returncode == 0, result.stderr
        assert f'"{engine}-default"' in result.stdout


def test_simulate_model_that_does_not_fit(home: Path) -> None:
    result = run(
        home,
        "simulate",
        "--dataset",
        "code",
        "--gpu",
        "L4",
        "--model",
        "llama-3.1-70b",
        "-q",
    )
    assert result.returncode == 2
    assert "does not fit 1 x L4" in result.stderr and "GiB" in result.stderr
    assert "Traceback" not in result.stderr


RECOMMEND = [
    "recommend",
    "--dataset",
    "demo",
    "--model",
    "llama-3.1-8b",
    "--slo-ttft-p99",
    "2s",
    "--slo-tpot-p99",
    "200ms",
    "--gpu",
    "H100",
    "--precision",
    "fp8",
    "--max-seqs",
    "128",
    "--chunked-prefill",
    "on",
    "--verify-top",
    "1",
    "--workers",
    "1",
    "--no-compare-gpus",
    "--no-save",
    "--tighten-steps",
    "0",
]


def test_recommend_reports_the_engine_kv_cache(home: Path) -> None:
    result = run(home, *RECOMMEND, "--json")
    assert result.returncode == 0, result.stderr
    winner = json.loads(result.stdout)["winner"]
    assert winner["engine"] == "trtllm" and winner["kv_cache"] == "fp8"
    assert winner["kv_cache_source"] == "engine default (trtllm follows FP8 weights)"
    assert winner["gpu_memory_utilization"] == 0.9
    asked = run(home, *RECOMMEND, "--kv-cache", "fp16", "--gpu-memory-utilization", "0.8")
    assert asked.returncode == 0, asked.stderr
    assert "KV cache fp16 (--kv-cache), GPU memory utilization 0.8" in asked.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine", "trt"], "error: unknown engine 'trt'"),
        (["--gpu-memory-utilization", "0"], "error: --gpu-memory-utilization 0: expected"),
        (["--kv-cache", "fp4"], "error: --kv-cache 'fp4': expected fp32, fp16 or fp8"),
    ],
)
def test_recommend_bad_engine_options(home: Path, args: list[str], message: str) -> None:
    result = run(home, *RECOMMEND, *args)
    assert result.returncode == 2
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
