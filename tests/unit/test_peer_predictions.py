"""Self-check of ``data/reference/peer_predictions_aiconfigurator.csv``: AIConfigurator's
predictions for the NIM rows of ``serving_under_load.csv`` (made by
``benchmarks/peers_aiconfigurator.py`` in AIConfigurator's own environment; read here
without it).

Every prediction must name a real measured row and match its shape, concurrency and TP, state
the AIConfigurator version, the database and the date, and carry finite positive values where
it has any; the README's table must be the summary of the CSV as it stands.
"""

from __future__ import annotations

import csv
import importlib.util
import math
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "data" / "reference"
PREDICTIONS = REFERENCE / "peer_predictions_aiconfigurator.csv"
MEASURED = REFERENCE / "serving_under_load.csv"
README = REFERENCE / "README.md"
VALUES = ("predicted_ttft_ms", "predicted_tpot_ms", "predicted_output_tokens_per_s")
STATUSES = {"ok", "over_memory", "over_kv_cache"}
SYSTEM_OF_GPU = {"A100-SXM4": "a100_sxm", "H100-SXM5": "h100_sxm", "H100 80G": "h100_sxm"}


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def predictions() -> list[dict[str, str]]:
    return _read(PREDICTIONS)


@pytest.fixture(scope="module")
def measured() -> dict[int, dict[str, str]]:
    return {int(r["row_id"]): r for r in _read(MEASURED)}


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "peers_aiconfigurator", ROOT / "benchmarks" / "peers_aiconfigurator.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rows_reference_real_measurements(
    predictions: list[dict[str, str]], measured: dict[int, dict[str, str]]
) -> None:
    seen = set()
    for p in predictions:
        rid = int(p["row_id"])
        assert rid in measured, f"row_id {rid} is not in serving_under_load.csv"
        m = measured[rid]
        assert "TensorRT-LLM" in m["engine"], f"row {rid}: not a TensorRT-LLM measurement"
        assert int(p["isl"]) == int(float(m["input_tokens"])), f"row {rid}: ISL"
        assert int(p["osl"]) == int(float(m["output_tokens"])), f"row {rid}: OSL"
        assert int(p["batch_size"]) == int(float(m["load"])), f"row {rid}: batch != concurrency"
        assert int(p["tp_size"]) == int(m["tp"]), f"row {rid}: TP"
        system = next(v for k, v in SYSTEM_OF_GPU.items() if m["gpu"].startswith(k))
        assert p["system"] == system, f"row {rid}: {m['gpu']} predicted as {p['system']}"
        assert (p["gemm_quant_mode"] == "fp8") == (m["precision"] == "fp8"), f"row {rid}"
        assert (rid, p["mode"]) not in seen, f"row {rid} predicted twice in {p['mode']} mode"
        seen.add((rid, p["mode"]))
    nim_rows = {rid for rid, m in measured.items() if "TensorRT-LLM" in m["engine"]}
    assert {rid for rid, _ in seen} == nim_rows, "every NIM row is predicted (none skipped)"
    assert {mode for _, mode in seen} == {"static", "agg"}


def test_values_finite_positive_and_status_explained(predictions: list[dict[str, str]]) -> None:
    for p in predictions:
        rid, status = p["row_id"], p["status"]
        assert status in STATUSES, f"row {rid}: status {status!r}"
        present = [p[c] for c in VALUES if p[c] != ""]
        if status == "ok":
            assert len(present) == len(VALUES), f"row {rid} ({p['mode']}): a value is missing"
        for value in present:
            x = float(value)
            assert math.isfinite(x) and x > 0, f"row {rid} ({p['mode']}): value {value!r}"
        if not present:
            assert status == "over_memory" and "OOM" in p["notes"], f"row {rid}: why no value"
        if status != "ok":
            assert "memory" in p["notes"] or "KV cache" in p["notes"], f"row {rid}: notes"
        assert p["notes"], f"row {rid}: the mapping of the row is stated in notes"


def test_version_database_and_date_are_stated(predictions: list[dict[str, str]]) -> None:
    for p in predictions:
        assert p["aiconfigurator_version"] == "0.12.0", p["row_id"]
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", p["predicted_on"]), p["row_id"]
        assert p["backend"] == "trtllm" and re.fullmatch(r"\d+\.\d+\.\d+\S*", p["backend_version"])
    readme = README.read_text(encoding="utf-8")
    section = readme[readme.index("## AIConfigurator's predictions") :]
    assert "aiconfigurator==0.12.0" in section
    assert "2026-12-06" in section
    assert "no lock-step waves" in section


def test_readme_table_is_the_summary_of_the_csv(
    script: ModuleType, predictions: list[dict[str, str]], measured: dict[int, dict[str, str]]
) -> None:
    text = script.markdown(script.summary(predictions, measured), predictions)
    readme = README.read_text(encoding="utf-8")
    assert f"{script.BEGIN}\n{text}\n{script.END}" in readme, "rerun with --write-readme"


def test_summary_errors_and_load_bands(script: ModuleType) -> None:
    def row(rid: int, load: int, tput: float) -> dict[str, str]:
        return {
            "row_id": str(rid),
            "source_id": "S",
            "gpu": "H100-SXM5-80GB",
            "model_hf": "m",
            "precision": "fp8",
            "tp": "1",
            "input_tokens": "200",
            "output_tokens": "200",
            "load": str(load),
            "ttft_mean_ms": "100",
            "tpot_mean_ms": "10",
            "output_tokens_per_s": str(tput),
        }

    measured = {1: row(1, 1, 50.0), 2: row(2, 100, 950.0), 3: row(3, 250, 1000.0)}
    assert script.load_bands(measured) == {1: "low", 2: "high", 3: "high"}
    preds = [
        {
            "row_id": str(rid),
            "mode": "static",
            "status": "ok",
            "system": "h100_sxm",
            "predicted_ttft_ms": str(ttft),
            "predicted_tpot_ms": "10",
            "predicted_output_tokens_per_s": str(tput),
        }
        for rid, ttft, tput in ((1, 150.0, 50.0), (2, 50.0, 950.0), (3, 100.0, 1000.0))
    ]
    preds.append({**preds[0], "row_id": "3", "status": "over_memory"})  # left out
    stats = {(s["metric"], s["system"], s["load"]): s for s in script.summary(preds, measured)}
    ttft = stats[("ttft_mean", "all", "all")]
    assert ttft["points"] == 3
    assert ttft["median_abs"] == pytest.approx(0.5)
    assert ttft["median_signed"] == pytest.approx(0.0)
    assert stats[("ttft_mean", "all", "high")]["p90_abs"] == pytest.approx(0.45)
    assert stats[("tpot_mean", "h100_sxm", "all")]["median_abs"] == 0.0
