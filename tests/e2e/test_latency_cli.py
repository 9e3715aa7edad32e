"""``planner latency``, ``planner catalog`` and ``planner calibrate`` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

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
    assert data["profile"] == "trtllm-h100-sxm"  # the GPU's own bundled profile wins
    assert 0 < data["tpot_ms"] < data["ttft_ms"] < data["e2e_ms"]
    assert data["e2e_ms"] == pytest.approx(data["ttft_ms"] + 255 * data["tpot_ms"])
    assert 300_000 < data["kv_capacity_tokens"] < 600_000
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
        "KV-cache capacity",
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
            "error: llama-3.1-70b in bf16 does not fit 1 x H100-SXM",
        ),
        (
            ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--kv-cache", "int2"],
            "error: --kv-cache 'int2': expected fp16 or fp8",
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
    assert report["profile"]["gpu"] == "H100-SXM" and report["points"] == 20
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
        f"error: {path}: row 1, line 2, column 'unit': expected ms or s, got 'minutes'"
        in result.stderr
    )
