"""``planner latency --qps / --concurrency``: every simulated percentile with its interval,
from the bundled held-out errors (data/calibration/accuracy.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_cli import run

H100_8B = ["latency", "--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--precision", "fp8"]
SHAPE = ["--input", "1000", "--output", "200", "--sim-requests", "3000"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.mark.parametrize("load", [["--qps", "20"], ["--concurrency", "32"]])
def test_each_simulated_percentile_has_its_interval(home: Path, load: list[str]) -> None:
    result = run(home, *H100_8B, *SHAPE, *load, "--json")
    assert result.returncode == 0, result.stderr
    sim = json.loads(result.stdout)["under_load"]["percentiles"]
    assert sim["confidence"] == 0.9
    for metric in ("ttft", "tpot", "e2e"):
        for q in ("p50", "p90", "p99"):
            band = sim[metric]["interval"][q]
            # the model's held-out bias moves the interval: it need not hold the point
            assert 0 < band["low"] < band["high"] and band["low"] < band["upper"]
            # the bundled errors of TensorRT-LLM on H100, not the default
            assert band["error_group"]["group"] != "default", band["error_group"]


def test_no_confidence_no_intervals_and_a_bad_one_is_refused(home: Path) -> None:
    result = run(home, *H100_8B, *SHAPE, "--qps", "20", "--confidence", "0", "--json")
    assert result.returncode == 0, result.stderr
    sim = json.loads(result.stdout)["under_load"]["percentiles"]
    assert "interval" not in sim["ttft"] and "confidence" not in sim
    bad = run(home, *H100_8B, "--qps", "20", "--confidence", "1.5")
    assert bad.returncode != 0 and "--confidence 1.5" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_the_table_shows_the_intervals(home: Path) -> None:
    result = run(home, *H100_8B, *SHAPE, "--qps", "20")
    assert result.returncode == 0, result.stderr
    assert "90% interval (ms)" in result.stdout
    assert "intervals: the engine's held-out error on this GPU class" in result.stdout
    assert "\u2013" in result.stdout
