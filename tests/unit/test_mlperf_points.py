"""The bundled MLPerf Inference Llama-2-70B Server runs, as planner reads and replays them."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np
import pytest

from planner.errors import InputFileError
from planner.latency.catalog import load_catalog
from planner.latency.mlperf_points import (
    INPUT_MAX,
    OUTPUT_MAX,
    mlperf_lengths,
    mlperf_runs,
)
from planner.paths import data_dir

CSV = data_dir() / "reference" / "mlperf_llama2_70b_server.csv"
PINNED = re.compile(
    r"^https://github\.com/mlcommons/inference_results_v\d\.\d/blob/[0-9a-f]{40}/"
    r"closed/[^/]+/results/[^/]+/llama2-70b-99/Server/performance/run_1/mlperf_log_detail\.txt$"
)


def _rows() -> list[dict[str, str]]:
    with CSV.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_row_is_read_with_catalog_names_and_pinned_sources() -> None:
    rows = _rows()
    runs = mlperf_runs()
    assert len(runs) == len(rows) == 24
    catalog = load_catalog()
    for run, row in zip(runs, rows, strict=True):
        catalog.gpus.get(run.gpu)
        catalog.models.get(run.model)
        catalog.precisions.get(run.precision)
        assert run.gpu in ("H100-SXM", "H200")  # catalog names, not the submitters' spellings
        assert (run.dataset, run.engine, run.model) == (
            "mlperf-llama2-70b",
            "trtllm",
            "llama-2-70b",
        )
        assert PINNED.match(run.source), run.source
        assert run.source == row["source_url"]
        assert run.load_kind == "rate" and run.duration_s == 600
    assert sum(r.gpu == "H100-SXM" for r in runs) == 15
    assert {(r.gpu, r.tp) for r in runs} == {("H100-SXM", 2), ("H200", 1)}
    assert [r.row for r in runs if r.excluded] == [
        r.row for r in runs if "MaxQ" in rows[r.row - 1]["system"]
    ]


def test_numbers_are_positive_finite_and_within_loadgens_limits() -> None:
    for row in _rows():
        for column, text in row.items():
            if column.endswith(("_ms", "_qps", "_per_s", "_per_sample")):
                value = float(text)
                assert math.isfinite(value) and value > 0, (row["system"], column)
        for stat in ("ttft", "tpot"):
            p50, p90, p99 = (float(row[f"{stat}_p{q}_ms"]) for q in (50, 90, 99))
            assert p50 <= p90 <= p99, (row["system"], stat)
        # the Server scenario's constraints at P99: TTFT 2 s, TPOT 200 ms; every run is VALID
        assert float(row["ttft_p99_ms"]) <= 2000 and float(row["tpot_p99_ms"]) <= 200
        assert row["result_validity"] == "VALID"
        assert int(row["gpu_count"]) == int(row["replicas"]) * int(row["tp"]) * int(row["pp"])
        assert (row["precision"], row["kv_cache"]) == ("fp8", "fp8")
        # ran what was scheduled: completed within 2% of the Poisson rate LoadGen issued
        assert float(row["completed_qps"]) == pytest.approx(float(row["scheduled_qps"]), rel=0.02)


def test_a_run_is_one_replicas_share_of_the_system() -> None:
    rows = _rows()
    nvidia_h100 = next(
        r for r in mlperf_runs() if rows[r.row - 1]["submitter"] == "NVIDIA" and r.gpu == "H100-SXM"
    )
    # DGX-H100: 8 GPUs as TP2 x 4 replicas at 75.0967 scheduled samples/s (the log's value)
    assert nvidia_h100.settings["replicas"] == 4
    assert nvidia_h100.load == pytest.approx(75.0967 / 4)
    assert nvidia_h100.measured["output_tokens_per_s"] == pytest.approx(21605.8 / 4)
    assert nvidia_h100.measured["ttft_p99"] == pytest.approx(461.28)
    assert nvidia_h100.measured["tpot_p99"] == pytest.approx(175.35)
    assert nvidia_h100.settings["max_seqs"] == 1024
    assert nvidia_h100.settings["max_batched_tokens"] == 4096
    assert nvidia_h100.settings["scheduler"] == "max_utilization"


def test_length_samples_match_the_published_statistics() -> None:
    inputs, outputs = (np.array(v) for v in mlperf_lengths())
    assert len(inputs) == len(outputs) == 3000
    assert np.percentile(outputs, 50) == pytest.approx(247, rel=0.02)
    assert np.percentile(outputs, 99) == pytest.approx(940, rel=0.03)
    # the full-set means of NVIDIA's submitted accuracy runs: 290.3 (H100) and 291.3 (H200)
    assert outputs.mean() == pytest.approx(290.8, rel=0.02)
    assert inputs.mean() == pytest.approx(222, rel=0.02)
    assert inputs.min() >= 1 and inputs.max() <= INPUT_MAX
    assert outputs.min() >= 1 and outputs.max() <= OUTPUT_MAX
    # deterministic, and in a shuffled order (not sorted by size)
    assert mlperf_lengths() == mlperf_lengths()
    assert not np.all(np.diff(outputs) >= 0)
    # every run's own mean output (from its log) agrees with the sample within 1.5%
    for run in mlperf_runs():
        assert run.output_tokens == pytest.approx(outputs.mean(), rel=0.015)
        assert run.input_lengths == tuple(inputs) and run.output_lengths == tuple(outputs)


def test_the_bundled_profile_replays_a_run() -> None:
    from planner.latency.profile import choose_profile, load_bundled_profiles
    from planner.simulate.serving_fit import replay

    run = mlperf_runs()[0]
    predicted = replay(run, choose_profile(load_bundled_profiles(), run.gpu, "trtllm"))
    for key in ("ttft_p99", "tpot_p99", "ttft_mean", "tpot_mean", "e2e_p99"):
        assert math.isfinite(predicted[key]) and predicted[key] > 0, key


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else ["round"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_bad_values_name_the_row_and_column(tmp_path: Path) -> None:
    rows = _rows()[:3]
    rows[1] = {**rows[1], "ttft_p99_ms": "n/a"}
    with pytest.raises(InputFileError, match=r"row 2, column 'ttft_p99_ms'.*positive"):
        mlperf_runs(_write(tmp_path / "bad.csv", rows))
    rows = _rows()[:1]
    rows[0] = {**rows[0], "replicas": "3"}
    with pytest.raises(InputFileError, match=r"row 1, column 'replicas'.*gpu_count"):
        mlperf_runs(_write(tmp_path / "replicas.csv", rows))
    rows = _rows()[:1]
    rows[0] = {**rows[0], "scheduled_qps": "-4"}
    with pytest.raises(InputFileError, match="scheduled_qps"):
        mlperf_runs(_write(tmp_path / "negative.csv", rows))


def test_missing_columns_empty_and_absent_files_are_refused(tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k != "tpot_p99_ms"} for r in _rows()[:1]]
    with pytest.raises(InputFileError, match="missing column.*tpot_p99_ms"):
        mlperf_runs(_write(tmp_path / "short.csv", rows))
    with pytest.raises(InputFileError, match="no data rows"):
        mlperf_runs(_write(tmp_path / "empty.csv", []))
    with pytest.raises(InputFileError, match="cannot read"):
        mlperf_runs(tmp_path / "absent.csv")
