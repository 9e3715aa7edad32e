"""``planner recommend --confidence`` and ``planner simulate``'s intervals as a user runs them;
the held-out errors come from tests/fixtures/accuracy_sample.json through $PLANNER_ACCURACY."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import DEMO_SAMPLE, ROOT
from tests.e2e.test_cli import run

FIXTURE = ROOT / "tests" / "fixtures" / "accuracy_sample.json"
TARGETS = ["--model", "llama-3.1-8b", "--slo-ttft-p99", "2s", "--slo-tpot-p99", "200ms"]
SMALL = [
    "--gpu",
    "H100",
    "--engine",
    "vllm",
    "--max-seqs",
    "128",
    "--chunked-prefill",
    "on",
    "--verify-top",
    "2",
    "--workers",
    "1",
    "--no-compare-gpus",
    "--no-growth-check",
    "--no-save",
]
SIMULATE = ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--precision", "fp8"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("confidence") / "home"
    assert run(home, "ingest", str(DEMO_SAMPLE), "--name", "demo").returncode == 0
    return home


@pytest.fixture(autouse=True)
def accuracy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_ACCURACY", str(FIXTURE))


def test_recommend_json_states_the_margin(home: Path) -> None:
    result = run(home, "recommend", "--dataset", "demo", *TARGETS, *SMALL, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    conf, winner = data["confidence"], data["winner"]
    assert conf["level"] == 0.9 and conf["accuracy_file"] == str(FIXTURE)
    assert data["request"]["options"]["confidence"] == 0.9
    ttft = conf["targets"]["ttft"]
    # vllm/H100/ttft/p99 errors -0.2 .. 0.3 by 0.05: q(0.1) = -0.15
    assert ttft["error_group"]["group"] == "vllm/H100/ttft/p99"
    assert ttft["error_group"]["how"] == "exact"
    assert ttft["model_factor"] == pytest.approx(1 / 0.85)
    tpot = conf["targets"]["tpot"]
    assert tpot["error_group"]["group"] == "vllm/*/tpot/p99"  # any GPU class
    for metric, target in (("ttft", 2.0), ("tpot", 0.2)):
        row = conf["targets"][metric]
        assert row["target_s"] == target
        assert row["point_p99_s"] == winner[f"p99_{metric}_s"]
        assert row["point_p99_s"] * row["model_factor"] <= row["upper_s"] <= target
    assert conf["targets"]["e2e"]["target_s"] is None
    base = conf["point_estimate_fleet"]
    assert conf["margin_usd_per_month"] == pytest.approx(
        winner["monthly_usd"] - base["monthly_usd"]
    )
    assert conf["margin_usd_per_month"] >= 0 and base["found"]


def test_confidence_zero_is_the_point_estimate(home: Path) -> None:
    result = run(
        home, "recommend", "--dataset", "demo", *TARGETS, *SMALL, "--confidence", "0", "--json"
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    conf = data["confidence"]
    assert conf["level"] is None and conf["margin_usd_per_month"] == 0.0
    assert conf["accuracy_file"] == "none"  # not read without a margin
    assert data["winner"]["p99_upper_s"] is None
    assert conf["point_estimate_fleet"]["monthly_usd"] == data["winner"]["monthly_usd"]


def test_recommend_table_shows_bounds_and_cost(home: Path) -> None:
    result = run(home, "recommend", "--dataset", "demo", *TARGETS, *SMALL, "--confidence", "95%")
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "at 95% confidence (target 2,000 ms; model error x" in out
    assert "from vllm/H100/ttft/p99, exact)" in out
    assert "the 95% margin costs $" in out and "on the point estimates costs $" in out


@pytest.mark.parametrize("value", ["1", "1.5", "-0.2", "high", "nan"])
def test_bad_confidence_is_one_clear_line(home: Path, value: str) -> None:
    for command in (["recommend", "--dataset", "demo", *TARGETS], ["simulate", *SIMULATE]):
        result = run(home, *command, "--confidence", value)
        assert result.returncode == 2, result.stderr
        assert f"--confidence {value}: expected a confidence level" in result.stderr
        assert "Traceback" not in result.stderr


def test_malformed_accuracy_file_is_named(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "accuracy.json"
    bad.write_text('{"groups": [{"engine": "vllm"}]}', encoding="utf-8")
    monkeypatch.setenv("PLANNER_ACCURACY", str(bad))
    result = run(home, "recommend", "--dataset", "demo", *TARGETS, *SMALL)
    assert result.returncode == 2, result.stderr
    assert f"accuracy file {bad}: groups[0]" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_states_the_default() -> None:
    for command in ("recommend", "simulate"):
        result = run(Path("/nonexistent"), command, "--help")
        text = " ".join(result.stdout.replace("│", " ").split())
        assert "--confidence" in text and "default 0.9" in text, text


def test_simulate_percentiles_have_intervals(home: Path) -> None:
    result = run(home, "simulate", "--dataset", "demo", *SIMULATE, "--engine", "vllm", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)["summary"]
    assert summary["error_bars"]["confidence"] == 0.9
    assert summary["error_bars"]["gpu_class"] == "H100"
    for metric in ("ttft", "tpot", "e2e"):
        stats = summary["all"][metric]
        for q in ("p50", "p90", "p95", "p99"):
            interval = stats["interval"][q]
            assert interval["low"] < stats[q] < interval["high"]
            assert interval["confidence"] == 0.9
    assert summary["all"]["ttft"]["interval"]["p99"]["group"] == "vllm/H100/ttft/p99"
    # a P90 has no group of its own: the P95's (any engine and class: none) or the default
    assert summary["all"]["ttft"]["interval"]["p90"]["group"] == "default"
    assert "interval" in summary["classes"]["default"]["ttft"]
    # without a confidence: no intervals
    plain = run(home, "simulate", "--dataset", "demo", *SIMULATE, "--confidence", "none", "--json")
    summary = json.loads(plain.stdout)["summary"]
    assert "interval" not in summary["all"]["ttft"] and "error_bars" not in summary


def test_simulate_table_shows_intervals(home: Path) -> None:
    result = run(home, "simulate", "--dataset", "demo", *SIMULATE, "--engine", "vllm")
    assert result.returncode == 0, result.stderr
    # COLUMNS=200: inline, "812.0 (704.1-951.3)" with an en dash
    cells = re.findall(r"([\d,.]+) \(([\d,.]+)\u2013([\d,.]+)\)", result.stdout)
    assert len(cells) == 12  # P50, P90, P95, P99 of TTFT, TPOT and E2E
    for point, low, high in cells:
        assert (
            float(low.replace(",", ""))
            < float(point.replace(",", ""))
            < float(high.replace(",", ""))
        )
    assert "intervals at 90% confidence" in " ".join(result.stdout.split())


def test_the_stored_recommendation_keeps_the_margin(home: Path) -> None:
    stored = [a for a in SMALL if a != "--no-save"]
    result = run(home, "recommend", "--dataset", "demo", *TARGETS, *stored, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    shown = run(home, "recommendations", "show", str(data["id"]), "--json")
    assert json.loads(shown.stdout)["result"]["confidence"] == data["confidence"]
    text = " ".join(run(home, "recommendations", "show", str(data["id"])).stdout.split())
    assert "at 90% confidence" in text and "the 90% margin costs $" in text
