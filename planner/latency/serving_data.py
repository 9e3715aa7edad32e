"""Every bundled serving data set under load, as :class:`ServingRun`s (the one place that lists
them: the NIM, SGLang-README and vLLM-H100 files of ``serving_points`` and MLPerf's Llama-2-70B
Server results of ``mlperf_points``)."""

from __future__ import annotations

from planner.latency.mlperf_points import mlperf_runs
from planner.latency.serving_points import ServingRun, published_runs, vllm_h100_runs


def bundled_runs() -> list[ServingRun]:
    """Every bundled run, used or excluded."""
    return [*published_runs(), *vllm_h100_runs(), *mlperf_runs()]
