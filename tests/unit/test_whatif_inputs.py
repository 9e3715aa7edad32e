"""How a what-if is checked and built (``planner.simulate.inputs``), shared by ``planner
simulate`` and the What-if page; prices per replica-hour from the price sheet; the tables and
CDFs a finished run is shown as (``planner.simulate.results``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pytest

from planner.errors import UsageError
from planner.simulate.inputs import (
    FleetSettings,
    ReplicaPrices,
    build_fleet,
    check_fleet,
    check_settings,
    curve_window,
    estimated_seconds,
    fleet_size,
    parse_schedule,
    replica_prices,
    scaled_curve,
    schedule_counts,
    sheet_instances,
)
from planner.simulate.results import (
    cdf_shares,
    cost_table,
    headline,
    latency_cdf,
    percentile_table,
    request_cdfs,
)
from planner.workload.rates import RateCurve
from pricing.model import PurchaseOption
from pricing.snapshot import load_snapshot

SETTINGS: dict[str, Any] = {
    "has_dataset": True,
    "has_rates": False,
    "policy": "continuous",
    "memory_utilization": None,
    "kv_cache": None,
    "engine": "trtllm",
    "cv": 1.0,
    "load_scale": 1.0,
    "prefix_hit_rate": 0.0,
    "response_cache_hit_rate": 0.0,
    "spot_interruptions_per_hour": 0.0,
    "target_utilization": None,
    "target_queue": None,
    "prices": ReplicaPrices(),
}


def test_a_fixed_fleet_keeps_the_purchase_options_it_has() -> None:
    fleet = build_fleet(FleetSettings(replicas=2, spot=0, reserved=1), tp=4, seed=7)
    assert fleet.replicas == {"on-demand": 2, "reserved": 1}
    assert fleet.gpus_per_replica == 4 and fleet.seed == 7
    assert fleet.schedule is None and fleet.autoscaler is None
    assert fleet_size(fleet) == 3


def test_autoscaling_holds_a_busy_share_unless_a_queue_target_is_given() -> None:
    scaled = build_fleet(FleetSettings(autoscale=True, min_replicas=2, max_replicas=9), tp=1)
    assert scaled.autoscaler is not None
    assert scaled.autoscaler.target_utilization == 0.7 and scaled.autoscaler.target_queue is None
    assert fleet_size(scaled) == 9
    queued = build_fleet(FleetSettings(autoscale=True, target_queue=4.0), tp=1)
    assert queued.autoscaler is not None
    assert queued.autoscaler.target_utilization is None and queued.autoscaler.target_queue == 4.0
    with pytest.raises(UsageError, match="min replicas <= max replicas"):
        build_fleet(FleetSettings(autoscale=True, min_replicas=5, max_replicas=2), tp=1)


def test_an_hourly_schedule_is_counts_per_hour() -> None:
    assert schedule_counts("2, 2 4,6") == [2, 2, 4, 6]
    assert parse_schedule("1,3") == [1, 3] and parse_schedule(None) is None
    fleet = build_fleet(FleetSettings(schedule=(1, 3, 2)), tp=1)
    assert fleet.schedule == [1, 3, 2] and fleet_size(fleet) == 3
    with pytest.raises(UsageError, match=r"expected replica counts per hour .* got 'a,b'"):
        schedule_counts("a,b")
    with pytest.raises(UsageError, match="non-negative replica counts"):
        schedule_counts("2,-1")


def test_a_run_too_big_for_the_machine_is_refused() -> None:
    check_fleet(10, max_requests=1_000)  # one replica per 100 requests allowed
    with pytest.raises(UsageError, match=r"a fleet of up to 11 replicas is over the 10 that"):
        check_fleet(11, max_requests=1_000)
    check_fleet(100_000, max_requests=10_000_000)  # the default allows a large fleet
    # time grows as O(log replicas): 1,024 replicas cost twice one per request
    assert estimated_seconds(20_000, 1) == pytest.approx(1.0)
    assert estimated_seconds(20_000, 1024) == pytest.approx(2.0)


def test_prices_cover_every_purchase_option_the_fleet_uses() -> None:
    fixed = build_fleet(FleetSettings(replicas=1, spot=2), tp=1)
    assert replica_prices(fixed, ReplicaPrices()) is None  # not priced
    both = replica_prices(fixed, ReplicaPrices(on_demand=2.0, spot=0.8))
    assert both == {"on-demand": 2.0, "spot": 0.8}
    with pytest.raises(UsageError) as raised:
        replica_prices(fixed, ReplicaPrices(on_demand=2.0))
    assert str(raised.value) == (
        "the fleet has spot replicas but no price for them; give --spot-price-per-hour too "
        "(or no prices at all)"
    )
    with pytest.raises(UsageError, match="give a spot price too"):
        replica_prices(fixed, ReplicaPrices(on_demand=2.0), {"spot": "a spot price"})
    # a schedule or an autoscaler runs on-demand replicas only
    scheduled = build_fleet(FleetSettings(schedule=(1, 2)), tp=1)
    assert replica_prices(scheduled, ReplicaPrices(on_demand=1.5)) == {"on-demand": 1.5}


def test_settings_are_checked_with_the_options_names() -> None:
    kv, engine = check_settings(**{**SETTINGS, "kv_cache": "BF16", "engine": "VLLM"})
    assert kv == "fp16" and engine.name == "vllm"
    cases = {
        "has_rates": (True, r"give exactly one of --dataset \(replay\) or --rates"),
        "load_scale": (float("nan"), "--load-scale nan: expected a positive number"),
        "cv": (0.0, r"--cv 0: expected a number in \(0, 100\]"),
        "prefix_hit_rate": (1.0, r"--prefix-hit-rate 1: expected a share in \[0, 1\)"),
        "target_utilization": (0.0, r"--target-utilization 0: expected a busy share in \(0, 1\]"),
        "prices": (ReplicaPrices(spot=-1.0), "--spot-price-per-hour -1: expected a price"),
        "policy": ("fifo", "--policy 'fifo': expected continuous or static"),
    }
    for name, (value, message) in cases.items():
        with pytest.raises(UsageError, match=message):
            check_settings(**{**SETTINGS, name: value})


def test_a_window_of_a_rate_curve_scaled() -> None:
    start = datetime(2025, 1, 20, tzinfo=UTC)
    curve = RateCurve(start, np.array([100.0, 200.0, 300.0, 400.0]))
    window = curve_window(curve, 1, 2)
    assert window.start == start + timedelta(hours=1)
    assert window.requests_per_hour.tolist() == [200.0, 300.0]
    assert curve_window(curve, 3, 10).requests_per_hour.tolist() == [400.0]  # to the curve's end
    assert scaled_curve(window, 0.01).requests_per_hour.tolist() == pytest.approx([2.0, 3.0])
    with pytest.raises(UsageError, match="hour 5 is outside the curve's 4 hours"):
        curve_window(curve, 4, 1)
    with pytest.raises(UsageError, match="expected at least one hour"):
        curve_window(curve, 0, 0)


def test_replica_prices_from_the_price_sheet() -> None:
    points = [p for p in load_snapshot() if p.gpu_model == "L4"]
    single = sheet_instances(points, tp=1)
    per_gpu = [i.points["on-demand"].usd_per_hour / i.gpu_count for i in single]
    assert per_gpu == sorted(per_gpu)  # the cheapest GPU-hour first
    g2 = next(i for i in single if i.instance_type == "g2-standard-8" and i.region == "us-central1")
    assert g2.points["reserved"].purchase_option is PurchaseOption.COMMITTED_1Y
    assert g2.per_replica(1) == ReplicaPrices(0.853624, 0.479872, 0.537783)
    three_year = sheet_instances(points, tp=1, term_years=3)
    g2_3y = next(i for i in three_year if i.label == g2.label)
    assert g2_3y.points["reserved"].purchase_option is PurchaseOption.COMMITTED_3Y
    # a replica of 2 GPUs takes half of a 4-GPU instance, and fits no 1-GPU one
    pairs = sheet_instances(points, tp=2)
    assert pairs and all(i.gpu_count % 2 == 0 for i in pairs)
    four = next(i for i in pairs if i.gpu_count == 4)
    assert four.replicas_per_instance(2) == 2
    assert four.per_replica(2).on_demand == pytest.approx(four.points["on-demand"].usd_per_hour / 2)
    with pytest.raises(UsageError, match="too few for a replica of 2"):
        g2.per_replica(2)


def test_a_latency_cdf_is_small_and_exact_at_its_shares() -> None:
    values = np.random.default_rng(0).lognormal(0.0, 1.0, 100_000)
    cdf = latency_cdf(np.append(values, np.nan), points=200)
    assert len(cdf) <= 201 and cdf["share"].iloc[0] == 0.0 and cdf["share"].iloc[-1] == 1.0
    assert cdf["ms"].is_monotonic_increasing
    assert cdf["ms"].iloc[0] == values.min() * 1e3 and cdf["ms"].iloc[-1] == values.max() * 1e3
    p99 = cdf.loc[np.isclose(cdf["share"], 0.99), "ms"].iloc[0]
    assert p99 == pytest.approx(np.quantile(values, 0.99) * 1e3)
    assert (cdf_shares() > 0.999).sum() > 10  # the tail, where SLOs are read, is drawn finely
    assert latency_cdf(np.array([np.nan])).empty
    requests = pd.DataFrame({"ttft_s": values, "tpot_s": values / 10, "e2e_s": values * 10})
    both = request_cdfs(requests)
    assert both["metric"].unique().tolist() == ["ttft", "tpot", "e2e"]
    with pytest.raises(UsageError, match="lack the columns e2e_s"):
        request_cdfs(requests.drop(columns="e2e_s"))


def _stats(scale: float) -> dict[str, float]:
    return {"p50": 0.1 * scale, "p90": 0.2 * scale, "p95": 0.25 * scale, "p99": 0.3 * scale,
            "max": 0.5 * scale, "mean": 0.12 * scale}  # fmt: skip


RESULT: dict[str, Any] = {
    "summary": {
        "all": {
            "ttft": _stats(1.0),
            "tpot": _stats(0.1),
            "e2e": _stats(10.0),
            "slo_attainment": 0.97,
            "requests": 1000,
            "rejected": 3,
            "throughput_rps": 0.5,
            "output_tokens_per_s": 100.0,
        }
    },
    "cost": {
        "total": 12.0,
        "by_purchase": {
            "on-demand": {"gpu_hours": 4.0, "price_per_gpu_hour": 2.0, "cost": 8.0},
            "spot": {"gpu_hours": 8.0, "price_per_gpu_hour": 0.5, "cost": 4.0},
        },
    },
    "simulated_s": 7200.0,
    "fleet": {"peak_replicas": 3},
}


def test_percentiles_cost_and_headline_in_the_units_shown() -> None:
    table = percentile_table(RESULT["summary"]).set_index("latency")
    assert table.loc["TTFT", "P99 (ms)"] == pytest.approx(300.0)
    assert table.loc["TPOT", "P50 (ms)"] == pytest.approx(10.0)
    assert table.loc["E2E", "max (ms)"] == pytest.approx(5000.0)
    costs = cost_table(RESULT["cost"], hours=2.0).set_index("purchase")
    assert costs.loc["spot", "cost ($)"] == 4.0 and costs.loc["on-demand", "$ per hour"] == 4.0
    assert cost_table(None, 2.0).empty
    numbers = headline(RESULT)
    assert numbers["TTFT P99 (ms)"] == pytest.approx(300.0)
    assert numbers["cost ($)"] == 12.0 and numbers["$ per hour"] == 6.0
    assert numbers["peak replicas"] == 3 and numbers["SLO attainment"] == 0.97
    assert headline({**RESULT, "cost": None})["$ per hour"] is None
    # without an API behind the fleet its rows are empty, so two runs' numbers line up
    assert numbers["share on the API"] is None and numbers["fleet + API cost ($)"] is None
    api = {"share": 0.25, "cost_usd": 3.0, "total_usd": 15.0}
    with_api = headline({**RESULT, "summary": {**RESULT["summary"], "api": api}})
    assert list(with_api) == list(numbers)
    assert with_api["share on the API"] == 0.25 and with_api["fleet + API cost ($)"] == 15.0
