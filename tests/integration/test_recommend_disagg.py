"""The disaggregated search (planner.recommend.disagg) beside the aggregated one: a 70B model
with long prompts under a tight TPOT target at high load gets a disaggregated fleet where that
is cheaper, and an aggregated one where it is not; either way verified by simulation, the
transfer visible, and the saving over the other architecture stated."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from planner.recommend.engine import recommend
from planner.recommend.inputs import Constraints, Demand, Request, SearchOptions, Targets
from planner.simulate.metrics import SLO
from planner.workload.rates import RateCurve
from tests.integration.test_recommend_engine import (
    check_only_verified_fleets_recommended,
    point,
    profile_for,
)

START = datetime(2024, 1, 1, tzinfo=UTC)
P5 = point("p5.48xlarge", "H100-SXM", 8, 32.0)


def _run(rps: float, isl: int, osl: int, tpot: float, mode: str = "auto") -> dict[str, Any]:
    rng = np.random.default_rng(0)
    inputs = rng.integers(int(isl * 0.8), int(isl * 1.2), 800).astype(np.int64)
    outputs = rng.integers(int(osl * 0.8), int(osl * 1.2), 800).astype(np.int64)
    demand = Demand(RateCurve(START, np.array([0.5, 1.0, 0.7]) * 3600 * rps), inputs, outputs, "t")
    request = Request(
        demand,
        Targets({"default": SLO(ttft_s=2.0, tpot_s=tpot)}),
        Constraints(model="llama-3.1-70b", precisions=("bf16", "fp8"), engine="vllm"),
        SearchOptions(
            disaggregation=mode,
            workers=1,
            verify_top=4,
            growth_check=False,
            confidence=None,
            engine="vllm",
        ),
    )
    data = recommend(request, [P5], profile_for=profile_for).to_dict()
    check_only_verified_fleets_recommended(data)
    return data


def test_long_prompts_under_a_tight_tpot_at_high_load_go_disaggregated() -> None:
    data = _run(rps=12, isl=4000, osl=500, tpot=0.025)
    arch = data["architecture"]
    winner = data["winner"]
    assert arch["winner"] == "disaggregated" == winner["architecture"]
    # cheaper than the best aggregated fleet, verified, and the saving is that difference
    assert winner["monthly_usd"] == pytest.approx(arch["disaggregated_monthly_usd"])
    assert arch["aggregated_monthly_usd"] > winner["monthly_usd"]
    assert arch["saving_usd_per_month"] == pytest.approx(
        arch["aggregated_monthly_usd"] - winner["monthly_usd"]
    )
    assert winner["p99_tpot_s"] <= 0.025 and winner["p99_ttft_s"] <= 2.0
    # a pool per role, their costs adding up to the fleet's
    roles = [pool["role"] for pool in winner["pools"]]
    assert roles == ["prefill", "decode"]
    assert sum(p["monthly_usd"] for p in winner["pools"]) == pytest.approx(winner["monthly_usd"])
    assert winner["prefill_replicas_peak"] >= 1 and winner["decode_replicas_peak"] >= 1
    # the transfer was simulated and is visible: EFA between p5 instances
    transfer = winner["verification"]["disaggregation"]
    assert winner["kv_link"] == transfer["link"]
    assert 0 < transfer["transfer_s"]["p99"] < 0.1
    assert 0 < transfer["transfer_share_of_ttft"]["p50"] < 1
    # the plan and the hourly fleet are the disaggregated fleet's
    assert data["hourly"]["instances"] == [float(x) for x in data["hourly"]["instances"]]
    assert max(data["hourly"]["instances"]) == winner["peak_instances"]
    assert data["plan"]["chosen"]["monthly_usd"] == pytest.approx(winner["monthly_usd"])


def test_short_prompts_at_low_load_stay_aggregated() -> None:
    data = _run(rps=3, isl=4000, osl=500, tpot=0.03)
    arch = data["architecture"]
    assert arch["winner"] == "aggregated"
    assert data["winner"].get("architecture") is None
    assert [p.get("role") for p in data["winner"]["pools"]] == [None]
    # not simulated: the cheapest pair screened dearer than the aggregated winner
    dis = arch["disaggregated_monthly_usd"]
    assert dis is None or dis >= arch["aggregated_monthly_usd"]
    assert "not simulated" in arch["note"] or arch["pairs_verified"]


def test_off_searches_no_pairs_and_only_searches_nothing_else() -> None:
    off = _run(rps=3, isl=4000, osl=500, tpot=0.03, mode="off")
    assert "architecture" not in off
    only = _run(rps=3, isl=4000, osl=500, tpot=0.03, mode="only")
    assert only["winner"]["architecture"] == "disaggregated"
    assert all(row.get("architecture") == "disaggregated" for row in only["ranked"])
    assert only["architecture"]["aggregated_monthly_usd"] is None
