"""The API's latency for the overflow plan (planner.recommend.overflow): from a benchmark's
requests (medians and log-normal spread) or from its summary alone (medians and P99s)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.errors import UsageError
from planner.recommend.overflow import measured_api_latency, summarized_api_latency


def test_medians_and_spread_from_requests() -> None:
    rng = np.random.default_rng(0)
    ttft = 400.0 * np.exp(rng.normal(0.0, 0.25, 5000))
    tpot = 15.0 * np.exp(rng.normal(0.0, 0.1, 5000))
    ttft[:10] = np.nan  # failed requests have none
    median_ttft, median_tpot, sigma = measured_api_latency(ttft, tpot, "run x")
    assert median_ttft == pytest.approx(0.4, rel=0.02)
    assert median_tpot == pytest.approx(0.015, rel=0.02)
    assert sigma == pytest.approx(0.25, rel=0.05)  # the wider of the two


def test_too_few_requests_say_how_many() -> None:
    with pytest.raises(UsageError, match=r"run x: 5 requests .* at least 20"):
        measured_api_latency(np.full(5, 300.0), np.full(30, 10.0), "run x")


def test_spread_from_a_summary_is_the_lognormal_with_its_p99() -> None:
    summary = {
        "median_ttft_ms": 200.0,
        "p99_ttft_ms": 200.0 * math.exp(2.326 * 0.4),
        "median_tpot_ms": 20.0,
        "p99_tpot_ms": 30.0,
    }
    ttft, tpot, sigma = summarized_api_latency(summary, "run y")
    assert (ttft, tpot) == (0.2, 0.02)
    assert sigma == pytest.approx(0.4, rel=1e-3)


def test_a_summary_without_medians_is_an_error_naming_the_key() -> None:
    with pytest.raises(UsageError, match="run y: .*median_tpot_ms"):
        summarized_api_latency({"median_ttft_ms": 100.0, "p99_ttft_ms": 200.0}, "run y")
