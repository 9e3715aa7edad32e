"""``planner calibrate --serving`` as a user runs it: real inference-perf stages of vLLM on an
H100, a real fit (few evaluations), the held-out error printed and written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.e2e.test_cli import run

SERVING = ROOT / "tests" / "fixtures" / "serving"
STAGES = SERVING / "inference-perf"
STAGE_0 = str(STAGES / "stage_0_lifecycle_metrics.json")
STAGE_1 = str(STAGES / "stage_1_lifecycle_metrics.json")
GENAI_PERF = str(SERVING / "genai-perf_c100_profile_export_genai_perf.json")
DEPLOYMENT = ("--gpu", "H100-SXM", "--precision", "fp16", "--max-evaluations", "2")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_serving_calibration_json_and_profiles_file(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "profiles.json"
    result = run(
        home, "calibrate", "--serving", STAGE_0, STAGE_1, *DEPLOYMENT, "--out", str(out), "--json"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["split"] == "load" and report["folds"] == 2 and report["runs"] == 2
    assert report["configurations"] == ["serving:vllm/H100-SXM/llama-2-7b/fp16/tp1"]
    assert report["start_profile"] == "vllm-default"
    metrics = {row["metric"]: row for row in report["held_out"]["by_metric"]}
    assert {"ttft_mean", "ttft_p99", "tpot_mean", "e2e_mean", "e2e_p99"} <= set(metrics)
    for row in metrics.values():
        assert row["points"] == 2
        assert 0 <= row["before_median"] <= row["before_p90"]
        assert 0 <= row["after_median"] <= row["after_p90"]
    assert report["written_to"] == str(out) and report["left_out"] == []
    # progress on stderr while fitting, the JSON alone on stdout
    assert "fold 1/2: fitting without the run at 5 req/s" in result.stderr
    assert "fitting on all 2 runs" in result.stderr
    written = json.loads(out.read_text())["profiles"]
    assert [entry["profile"]["name"] for entry in written] == ["vllm-h100-sxm-serving"]


def test_serving_calibration_table(home: Path) -> None:
    result = run(home, "calibrate", "--serving", STAGE_0, STAGE_1, *DEPLOYMENT, "--name", "mine")
    assert result.returncode == 0, result.stderr
    assert "held-out median" in result.stdout and "before median" in result.stdout
    assert "leave-one-load-out" in result.stdout
    assert "fitted on every run: profile mine:" in result.stdout


def test_serving_calibration_user_errors(home: Path) -> None:
    missing = run(home, "calibrate", "--serving", GENAI_PERF, "--max-evaluations", "2")
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert "does not record the GPU, engine and precision" in missing.stderr
    assert "pass --gpu, --engine and --precision" in missing.stderr
    # its model is a Triton ensemble's name: the catalog's name is asked for
    named = run(home, "calibrate", "--serving", GENAI_PERF, "--engine", "trtllm", *DEPLOYMENT)
    assert named.returncode != 0 and "Traceback" not in named.stderr
    assert "the model 'ensemble' is not in the catalog" in named.stderr
    assert "pass --model" in named.stderr
    alone = run(home, "calibrate", STAGE_0, "--model", "llama-2-7b", "--name", "x")
    assert alone.returncode != 0 and "--model: only with --serving" in alone.stderr
    unnamed = run(home, "calibrate", STAGE_0)
    assert unnamed.returncode != 0 and "--name: give the fitted profile's name" in unnamed.stderr


def test_csv_fit_options_are_refused_with_serving(home: Path, tmp_path: Path) -> None:
    result = run(
        home, "calibrate", "--serving", STAGE_0, STAGE_1, "--export", str(tmp_path / "p.json")
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "--export: not with --serving" in result.stderr
    assert not (tmp_path / "p.json").exists()
