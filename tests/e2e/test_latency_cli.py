"""``planner latency``, ``planner catalog`` and ``planner calibrate`` as a user runs them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.e2e.test_cli import run

PUBLISHED = ROOT / "data" / "reference" / "published_latency.csv"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_latency_as_json(home: Path) -> None:
    result = run(
        home,
        "latency",
        "--gpu",
        "H100-SXM",
        "--model",
        "llama-3.1-8b",
        "--precision",
        "fp8",
        "--tp",
        "1",
        "--batch",
        "32",
        "--input",
        "1024",
        "--output",
        "256",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["profile"] == "trtllm-default"  # fitted under load on both GPUs (docs/accuracy.md)
    assert 0 < data["tpot_ms"] < data["ttft_ms"] < data["e2e_ms"]
    assert data["e2e_ms"] == pytest.approx(data["ttft_ms"] + 255 * data["tpot_ms"])
    # TensorRT-LLM (the default engine) keeps an FP8 KV cache under FP8 weights: 64 KiB a token
    assert data["kv_cache"] == "fp8"
    assert data["kv_cache_source"] == "engine default (trtllm follows FP8 weights)"
    memory = data["memory"]
    assert data["kv_capacity_tokens"] == int(memory["kv_cache_gib"] * 2**30 // 65536)
    assert 900_000 < data["kv_capacity_tokens"] < 1_100_000
    assert data["batching"] == "continuous" and data["saturated"] is False
    assert data["max_output_tokens_per_s"] > 1000
    assert data["quality_delta_pct"] < 0


def test_latency_table_and_load(home: Path) -> None:
    result = run(
        home,
        "latency",
        "--gpu",
        "A100-80GB",
        "--model",
        "llama-2-7b",
        "--precision",
        "fp16",
        "--qps",
        "2",
    )
    assert result.returncode == 0, result.stderr
    for label in (
        "TTFT",
        "time per output token",
        "end-to-end",
        "KV cache",
        "KV-cache precision",
        "P99",
        "max throughput",
        "at 2 req/s",
    ):
        assert label in result.stdout
    assert "profile trtllm-default" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--gpu", "H100-SMX", "--model", "llama-3.1-8b"],
            "error: unknown GPU 'H100-SMX'; known GPUs: H100-SXM",
        ),
        (
            ["--gpu", "H100-SXM", "--model", "llama-3-8b"],
            "error: unknown model 'llama-3-8b'; known models: llama-3.1-8b",
        ),
        (
            ["--gpu", "A100-80GB", "--model", "llama-3.1-8b", "--precision", "fp8"],
            "error: A100-80GB has no FP8 tensor-core peak",
        ),
        (
            ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--tp", "3"],
            "error: tensor parallelism 3 does not divide the 32 attention heads",
        ),
        (
            ["--gpu", "L4", "--model", "llama-3.1-8b", "--tp", "16"],
            "error: tensor parallelism 16 is impossible on L4",
        ),
        (
            ["--gpu", "H100-SXM", "--model", "llama-3.1-70b"],
            "error: llama-3.1-70b in bf16 does not fit 1 x H100-SXM: it needs",
        ),
        (
            ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--kv-cache", "int2"],
            "error: --kv-cache 'int2': expected fp32, fp16 or fp8",
        ),
        (
            ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--engine", "vlm"],
            "error: unknown engine 'vlm'; known engines: vllm",
        ),
        (
            ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--gpu-memory-utilization", "1.5"],
            "error: --gpu-memory-utilization 1.5: expected a share of GPU memory from 0.1 to 1.0",
        ),
        (
            ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--gpu-memory-utilization", "0.05"],
            "error: --gpu-memory-utilization 0.05: expected a share",
        ),
        (
            ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--gpu-memory-utilization", "nan"],
            "error: --gpu-memory-utilization nan: expected a share",
        ),
        (
            ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--memory-utilization", "2"],
            "error: --gpu-memory-utilization 2: expected a share",
        ),
        (
            ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--sim-requests", "5"],
            "error: --sim-requests 5: expected 0 (no simulation) or 100",
        ),
        (
            ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--static", "--qps", "1"],
            "error: --static describes one static batch",
        ),
        (
            ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--profile", "nope"],
            "error: no calibration profile named 'nope'",
        ),
    ],
)
def test_latency_bad_input(home: Path, args: list[str], message: str) -> None:
    result = run(home, "latency", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_catalog_lists_with_sources(home: Path) -> None:
    gpus = json.loads(run(home, "catalog", "gpus", "--json").stdout)
    assert {
        "T4",
        "A10G",
        "L4",
        "L40S",
        "A100-40GB",
        "A100-80GB",
        "H100-SXM",
        "H100-PCIe",
        "H200",
        "B200",
        "MI300X",
    } <= {g["name"] for g in gpus}
    assert all(g["source"] for g in gpus)
    models = json.loads(run(home, "catalog", "models", "--json").stdout)
    mixtral = next(m for m in models if m["name"] == "mixtral-8x7b")
    assert mixtral["active_params"] < mixtral["total_params"] / 3
    precisions = run(home, "catalog", "precisions")
    assert "int4-awq" in precisions.stdout and precisions.returncode == 0


def test_calibrate_stores_a_profile_that_latency_then_uses(home: Path, tmp_path: Path) -> None:
    export = tmp_path / "profiles.json"
    fitted = run(
        home,
        "calibrate",
        str(PUBLISHED),
        "--name",
        "mine",
        "--gpu",
        "H100-SXM",
        "--export",
        str(export),
        "--json",
    )
    assert fitted.returncode == 0, fitted.stderr
    report = json.loads(fitted.stdout)
    assert report["profile"]["gpu"] == "H100-SXM" and report["points"] == 37  # TensorRT-LLM rows
    assert report["after_all"]["mape"] < report["before_all"]["mape"]
    assert [p["profile"]["name"] for p in json.loads(export.read_text())["profiles"]] == ["mine"]
    used = json.loads(
        run(home, "latency", "--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--json").stdout
    )
    assert used["profile"] == "mine"  # a stored profile for the GPU wins over the bundled one


def test_calibrate_bad_file(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text(
        PUBLISHED.read_text().splitlines()[0]
        + "\n"
        + PUBLISHED.read_text().splitlines()[1].replace(",ms,", ",minutes,")
        + "\n"
    )
    result = run(home, "calibrate", str(path), "--name", "x")
    assert result.returncode == 1
    assert (
        f"error: {path}: row 1, line 2, column 'unit': expected ms or s for ttft, got 'minutes'"
        in result.stderr
    )


H100_8B = ["--gpu", "H100-SXM", "--model", "llama-3.1-8b"]


def _json(home: Path, *args: str) -> dict[str, Any]:
    result = run(home, "latency", *args, "--json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_kv_cache_asked_and_engine_defaults(home: Path) -> None:
    fp8 = _json(home, *H100_8B, "--precision", "fp8")
    fp16 = _json(home, *H100_8B, "--precision", "fp8", "--kv-cache", "fp16")
    assert (fp16["kv_cache"], fp16["kv_cache_source"]) == ("fp16", "--kv-cache")
    # the same GiB of KV cache holds half the tokens at two bytes an element
    assert fp16["memory"]["kv_cache_gib"] == pytest.approx(fp8["memory"]["kv_cache_gib"])
    assert fp16["kv_capacity_tokens"] == pytest.approx(fp8["kv_capacity_tokens"] / 2, rel=1e-4)
    bf16 = _json(home, *H100_8B)
    assert bf16["kv_cache"] == "fp16" and bf16["kv_cache_source"].startswith("engine default")
    # vLLM keeps the model's dtype even under FP8 weights, and gives 0.9 of *total* memory
    vllm = _json(
        home, *H100_8B, "--precision", "fp8", "--engine", "vllm", "--profile", "trtllm-default"
    )
    assert vllm["engine"] == "vllm" and vllm["kv_cache"] == "fp16"
    assert vllm["kv_cache_source"] == "engine default (vllm keeps the model's 16-bit dtype)"
    m = vllm["memory"]
    assert m["rule"] == "total" and m["utilization"] == 0.9
    assert m["kv_cache_gib"] == pytest.approx(
        0.9 * m["device_gib"] - m["weights_gib"] - m["activations_gib"]
    )
    # TensorRT-LLM's rule: 0.9 of what is free after weights and activations
    t = fp8["memory"]
    assert t["rule"] == "free"
    assert t["kv_cache_gib"] == pytest.approx(
        0.9 * (t["device_gib"] - t["weights_gib"] - t["activations_gib"])
    )


def test_gpu_memory_utilization_and_its_alias(home: Path) -> None:
    half = _json(home, *H100_8B, "--gpu-memory-utilization", "0.5")
    alias = _json(home, *H100_8B, "--memory-utilization", "0.5")
    full = _json(home, *H100_8B)
    assert half["memory"] == alias["memory"]
    assert half["memory"]["utilization"] == 0.5
    assert half["kv_capacity_tokens"] < full["kv_capacity_tokens"] * 0.6
    text = run(home, "latency", *H100_8B, "--gpu-memory-utilization", "0.5").stdout
    assert "GiB per GPU" in text and "0.5 of the memory left after weights" in text
    assert "KV-cache precision" in text and "engine default" in text
    assert "--memory-utilization" not in run(home, "latency", "--help").stdout  # hidden alias


def test_a_load_beyond_capacity_is_a_result(home: Path) -> None:
    data = _json(home, *H100_8B, "--qps", "100")
    load = data["under_load"]
    assert data["saturated"] is True and load["saturated"] is True
    capacity = data["capacity_qps"]
    assert 0 < capacity < 100 and load["capacity_qps"] == capacity
    assert load["offered_qps"] == 100
    assert load["replicas_needed"] == math.ceil(100 / capacity)
    assert load["ttft_ms"] is None and load["tpot_ms"] is None and load["e2e_ms"] is None
    assert load["percentiles"] is None
    assert any("--precision fp8" in o for o in load["options"])
    # just below the capacity the same deployment serves, with latencies
    below = _json(home, *H100_8B, "--qps", f"{capacity * 0.95:g}", "--sim-requests", "0")
    assert below["saturated"] is False and below["under_load"]["ttft_ms"] > 0
    text = run(home, "latency", *H100_8B, "--qps", "100")
    assert text.returncode == 0, text.stderr
    assert "SATURATED" in text.stdout and f"{math.ceil(100 / capacity)} replicas" in text.stdout


def test_static_batching(home: Path) -> None:
    static = _json(home, *H100_8B, "--batch", "16", "--static")
    continuous = _json(home, *H100_8B, "--batch", "16")
    assert (static["batching"], continuous["batching"]) == ("static", "continuous")
    # sixteen prompts prefilled in one iteration take longer than one joining a batch
    assert static["ttft_ms"] > 4 * continuous["ttft_ms"]
    assert static["e2e_ms"] == pytest.approx(static["ttft_ms"] + 255 * static["tpot_ms"])
    text = run(home, "latency", *H100_8B, "--batch", "16", "--static").stdout
    assert "static batch of 16" in text


def test_percentiles_under_load_from_the_simulator(home: Path) -> None:
    data = _json(home, *H100_8B, "--qps", "8")
    load = data["under_load"]
    sim = load["percentiles"]
    assert sim["source"] == "discrete-event simulator" and sim["requests"] == 10_000
    assert sim["measured_requests"] == 7_000
    assert sim["wall_s"] < 2
    for key in ("ttft", "tpot", "e2e"):
        row = sim[key]
        assert 0 < row["p50"] <= row["p90"] <= row["p99"]
        # the simulated mean and the mean-value model agree within a quarter
        assert row["mean"] == pytest.approx(load[f"{key}_ms"], rel=0.25)
    assert sim["ttft"]["p99"] > 1.5 * sim["ttft"]["p50"]  # Poisson bursts queue prompts
    again = _json(home, *H100_8B, "--qps", "8")
    assert again["under_load"]["percentiles"]["e2e"] == sim["e2e"]  # seeded
    other = _json(home, *H100_8B, "--qps", "8", "--seed", "3")
    assert other["under_load"]["percentiles"]["e2e"] != sim["e2e"]
    off = _json(home, *H100_8B, "--qps", "8", "--sim-requests", "0")
    assert off["under_load"]["percentiles"] is None
    closed = _json(home, *H100_8B, "--concurrency", "8")  # a simulated closed loop's
    assert closed["under_load"]["percentiles"]["arrivals"] == "closed loop"
    assert closed["under_load"]["percentiles"]["clients"] == 8
    text = run(home, "latency", *H100_8B, "--qps", "8").stdout
    assert "P99" in text and "discrete-event simulator" in text


def test_each_engine_is_timed_by_its_own_profile(home: Path) -> None:
    for engine, profile in (("sglang", "sglang-default"), ("vllm", "vllm-default")):
        result = run(home, "latency", *H100_8B, "--engine", engine, "--json")
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["profile"] == profile and data["engine"] == engine
    mi300x = run(home, "latency", "--gpu", "MI300X", "--model", "llama-3.1-70b", "--engine", "vllm")
    assert mi300x.returncode == 0 and "vllm-mi300x" in mi300x.stdout  # ROCm vLLM's own fit


def test_catalog_gpus_units_and_engines(home: Path) -> None:
    gpus = {g["name"]: g for g in json.loads(run(home, "catalog", "gpus", "--json").stdout)}
    h100 = gpus["H100-SXM"]
    assert {"memory", "memory_unit", "memory_gib"} <= set(h100)
    assert h100["memory_unit"] in ("GiB", "GB")
    assert 70 < h100["memory_gib"] <= 80
    text = run(home, "catalog", "gpus").stdout
    assert f"{h100['memory']:g} {h100['memory_unit']}" in text
    engines = json.loads(run(home, "catalog", "engines", "--json").stdout)
    by_name = {e["name"]: e for e in engines}
    assert {"trtllm", "vllm", "sglang"} <= set(by_name)
    assert by_name["trtllm"]["memory_rule"] == "free"
    assert by_name["vllm"]["kv_cache_default"] == "model"
    assert all(e["source"] for e in engines)
    table = run(home, "catalog", "engines")
    assert table.returncode == 0 and "0.9 of free" in table.stdout and "vllm" in table.stdout
