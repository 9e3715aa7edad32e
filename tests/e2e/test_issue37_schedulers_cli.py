"""Issue 37 as a user meets it: ``planner latency --concurrency`` prints finite latencies for
the shape that printed TTFT ``inf``; ``latency --qps`` runs the engine's own admission; and
``--scheduler`` (TensorRT-LLM's capacity scheduler policy) on latency, simulate and
recommend, refused for another engine."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from planner.cli.options import TRTLLM_SCHEDULERS
from planner.latency.engines import SCHEDULERS
from tests.conftest import DEMO_SAMPLE
from tests.e2e.test_cli import run

DEPLOYMENT = ["--gpu", "H100-SXM", "--model", "llama-3.3-70b", "--precision", "fp8", "--tp", "2"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def _json(home: Path, *args: str) -> dict[str, Any]:
    result = run(home, *args, "--json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_the_cli_names_the_engines_schedulers() -> None:
    assert tuple(SCHEDULERS) == TRTLLM_SCHEDULERS  # the --help copy


def test_latency_concurrency_of_the_issue_is_finite(home: Path) -> None:
    args = ["--gpu", "A100-80GB", "--model", "llama-3.1-70b", "--precision", "fp16", "--tp", "4"]
    shape = ["--input", "2000", "--output", "200"]
    loaded = _json(home, "latency", *args, *shape, "--concurrency", "150")["under_load"]
    assert all(math.isfinite(loaded[k]) for k in ("ttft_ms", "tpot_ms", "e2e_ms"))
    assert loaded["ttft_ms"] < 10_000 and loaded["queued_clients"] == 0
    text = run(home, "latency", *args, *shape, "--concurrency", "150")
    assert text.returncode == 0, text.stderr
    assert "inf" not in text.stdout.lower()
    # far more clients than the KV cache holds: they wait, TTFT grows with them
    far = _json(home, "latency", *args, *shape, "--concurrency", "2000")["under_load"]
    assert far["queued_clients"] > 1500 and math.isfinite(far["ttft_ms"])
    assert far["ttft_ms"] > 10 * loaded["ttft_ms"]


def test_latency_qps_runs_the_engines_admission_and_the_scheduler_asked(home: Path) -> None:
    base = ["latency", *DEPLOYMENT, "--engine", "trtllm", "--sim-requests", "2000"]
    capacity = _json(home, *base, "--qps", "1")["capacity_qps"]
    load = ["--qps", f"{0.95 * capacity:.3f}"]
    own = _json(home, *base, *load)["under_load"]["percentiles"]
    assert own["admission"] == "no_evict" and own["admission_source"] == "engine default (trtllm)"
    packed = _json(home, *base, *load, "--scheduler", "max_utilization")["under_load"]
    assert packed["percentiles"]["admission"] == "preempt"
    assert packed["percentiles"]["kv_watermark"] == 0.0
    assert packed["percentiles"]["admission_source"] == "--scheduler max_utilization"
    named = _json(home, *base, *load, "--scheduler", "guaranteed_no_evict")["under_load"]
    assert named["percentiles"]["ttft"] == own["ttft"]  # the default, named


@pytest.mark.parametrize("command", ["latency", "simulate"])
def test_scheduler_refused_for_another_engine_or_name(home: Path, command: str) -> None:
    extra = ["--dataset", "x"] if command == "simulate" else []
    result = run(
        home, command, *DEPLOYMENT, *extra, "--engine", "vllm", "--scheduler", "max_utilization"
    )
    assert result.returncode != 0
    assert "TensorRT-LLM's capacity scheduler policy (--engine trtllm)" in result.stderr
    assert "Traceback" not in result.stderr
    bad = run(home, command, *DEPLOYMENT, *extra, "--engine", "trtllm", "--scheduler", "fifo")
    assert bad.returncode != 0 and "expected guaranteed_no_evict or max_utilization" in bad.stderr


def test_simulate_and_recommend_take_the_scheduler(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert run(home, "ingest", str(DEMO_SAMPLE), "--name", "demo").returncode == 0
    sim = ["simulate", "--dataset", "demo", "--gpu", "H100-SXM", "--model", "llama-3.1-8b"]
    serving = _json(home, *sim, "--engine", "trtllm", "--scheduler", "max_utilization", "-q")[
        "serving"
    ]
    assert (serving["admission"], serving["kv_watermark"]) == ("preempt", 0.0)
    assert serving["admission_source"] == "--scheduler max_utilization"
    both = run(home, *sim, "--scheduler", "max_utilization", "--admission", "no_evict", "-q")
    assert both.returncode != 0 and "are alternatives" in both.stderr
    rec = ["recommend", "--dataset", "demo", "--model", "llama-3.1-8b", "--slo-ttft-p99", "2s"]
    small = ["--gpu", "H100", "--max-seqs", "128", "--chunked-prefill", "on", "--verify-top", "1"]
    small += ["--workers", "1", "--no-compare-gpus", "--no-save", "-q"]
    data = _json(home, *rec, *small, "--engine", "trtllm", "--scheduler", "max_utilization")
    assert data["request"]["constraints"]["scheduler"] == "max_utilization"
    assert data["winner"]["engine"] == "trtllm"
    refused = run(home, *rec, *small, "--engine", "sglang", "--scheduler", "max_utilization")
    assert refused.returncode != 0 and "--engine trtllm" in refused.stderr
