"""The held-out accuracy of the simulator on the bundled serving runs under load
(docs/accuracy.md): no fold saw what it predicts, the error bars' file is what the folds
predict, and the held-out medians do not regress."""

from __future__ import annotations

import json
from functools import cache

import pytest

from planner.latency.profile import load_bundled_profiles
from planner.latency.serving_data import bundled_runs
from planner.latency.uncertainty import gpu_class, load_accuracy
from planner.paths import data_dir
from planner.simulate.accuracy import (
    FITTED_ON,
    accuracy_groups,
    capacity_errors,
    fitted_runs,
    fold_errors,
    load_folds,
    summary_rows,
)
from planner.simulate.serving_fit import RunError

# (data set, metric, statistic, load) -> the held-out median absolute error it may not exceed
# (docs/accuracy.md's table when the profiles were last refitted, plus half a point)
PINNED: dict[tuple[str, str, str, str], float] = {
    ("mlperf-llama2-70b", "e2e", "mean", "all"): 0.289,
    ("mlperf-llama2-70b", "e2e", "p99", "all"): 0.315,
    ("mlperf-llama2-70b", "throughput", "mean", "all"): 0.035,
    ("mlperf-llama2-70b", "tpot", "mean", "all"): 0.262,
    ("mlperf-llama2-70b", "tpot", "p50", "all"): 0.274,
    ("mlperf-llama2-70b", "tpot", "p90", "all"): 0.304,
    ("mlperf-llama2-70b", "tpot", "p99", "all"): 0.310,
    ("mlperf-llama2-70b", "ttft", "mean", "all"): 0.789,
    ("mlperf-llama2-70b", "ttft", "p50", "all"): 0.749,
    ("mlperf-llama2-70b", "ttft", "p90", "all"): 0.763,
    ("mlperf-llama2-70b", "ttft", "p99", "all"): 0.838,
    ("nim-docs", "throughput", "mean", "all"): 0.218,
    ("nim-docs", "throughput", "mean", "high"): 0.235,
    ("nim-docs", "tpot", "mean", "all"): 0.092,
    ("nim-docs", "tpot", "mean", "high"): 0.092,
    ("nim-docs", "ttft", "mean", "all"): 0.886,
    ("nim-docs", "ttft", "mean", "high"): 0.175,
    ("nim-genaiperf", "e2e", "mean", "all"): 0.109,
    ("nim-genaiperf", "e2e", "mean", "high"): 0.119,
    ("nim-genaiperf", "e2e", "p95", "all"): 0.120,
    ("nim-genaiperf", "e2e", "p95", "high"): 0.182,
    ("nim-genaiperf", "throughput", "mean", "all"): 0.106,
    ("nim-genaiperf", "throughput", "mean", "high"): 0.121,
    ("nim-genaiperf", "tpot", "mean", "all"): 0.128,
    ("nim-genaiperf", "tpot", "mean", "high"): 0.188,
    ("nim-genaiperf", "tpot", "p95", "all"): 0.158,
    ("nim-genaiperf", "tpot", "p95", "high"): 0.430,
    ("nim-genaiperf", "ttft", "mean", "all"): 0.162,
    ("nim-genaiperf", "ttft", "mean", "high"): 0.391,
    ("nim-genaiperf", "ttft", "p95", "all"): 0.134,
    ("nim-genaiperf", "ttft", "p95", "high"): 0.221,
    ("vllm-h100", "e2e", "mean", "all"): 0.209,
    ("vllm-h100", "e2e", "p50", "all"): 0.219,
    ("vllm-h100", "e2e", "p90", "all"): 0.193,
    ("vllm-h100", "e2e", "p99", "all"): 0.198,
    ("vllm-h100", "tpot", "mean", "all"): 0.209,
    ("vllm-h100", "ttft", "mean", "all"): 0.427,
    ("vllm-h100", "ttft", "p50", "all"): 0.362,
    ("vllm-h100", "ttft", "p90", "all"): 0.404,
    ("vllm-h100", "ttft", "p99", "all"): 0.363,
}


@cache
def _errors() -> tuple[RunError, ...]:
    return tuple(fold_errors(bundled_runs(), load_folds(), load_bundled_profiles()))


def test_no_fold_saw_a_configuration_it_predicts() -> None:
    folds = load_folds()
    runs = bundled_runs()
    for engine in FITTED_ON:
        configurations = {r.configuration for r in fitted_runs(runs, engine)}
        assert configurations <= set(folds), configurations - set(folds)
        for configuration in configurations:
            fold = folds[configuration]
            assert configuration not in fold.trained_on
            assert set(fold.trained_on) < configurations  # fitted on the others only
            assert fold.profile.engine == engine


def test_the_folds_start_from_the_profile_before_any_serving_fit() -> None:
    payload = json.loads((data_dir() / "calibration" / "serving_folds.json").read_text())
    for engine, start in payload["starts"].items():
        assert start["sequence_us"] == 0.0 and start["tp_eff_loss"] == 0.0, engine


def test_the_error_bars_file_is_what_the_folds_predict() -> None:
    stored = load_accuracy(data_dir() / "calibration" / "accuracy.json")
    groups = accuracy_groups(list(_errors()), gpu_class)
    assert len(stored.groups) == len(groups)
    for group, fresh in zip(stored.groups, groups, strict=True):
        key = (group.engine, group.gpu_class, group.metric, group.stat)
        assert key == (fresh["engine"], fresh["gpu_class"], fresh["metric"], fresh["stat"])
        assert list(group.errors) == pytest.approx(fresh["errors"], abs=2e-5), key


def test_held_out_medians_do_not_regress() -> None:
    rows = {
        (r["dataset"], r["metric"], r["stat"], r["load"]): r["median_abs"]
        for r in summary_rows(list(_errors()), bundled_runs())
    }
    worse = {
        key: (rows.get(key), limit)
        for key, limit in PINNED.items()
        if not rows.get(key, float("inf")) <= limit
    }
    assert not worse, worse


def test_capacity_is_never_over_predicted_by_more_than_the_stated_worst() -> None:
    rows = capacity_errors(list(_errors()), bundled_runs())
    assert rows
    assert max(r["error"] for r in rows) <= WORST_CAPACITY_OVER + 0.005


WORST_CAPACITY_OVER = 1.067  # H100 8B FP8 TP1, 200/2000 tokens at 250 clients (docs/accuracy.md)
