"""The purchase-option cost model against hand-computed cases, and the seed comparison."""

from __future__ import annotations

import numpy as np
import pytest

from planner.errors import UsageError
from pricing.costs import (
    HOURS_PER_MONTH,
    SEED_DAY,
    Plan,
    Prices,
    amortized_hourly,
    break_even_utilization,
    commitment_break_evens,
    fixed_fleet_cost,
    fleet_cost,
    optimize_reserved,
    optimize_savings_plan,
    seed_profile,
    utilization_where,
)
from pricing.model import PurchaseOption
from pricing.snapshot import load_snapshot

DEMAND = [2, 2, 2, 4, 4, 2, 2, 2, 2, 2]


def test_best_reserved_level_by_hand() -> None:
    # R=0: 24 on-demand hours = 24; R=1: 6 + 14 = 20; R=2: 2*0.6*10 + (4-2)*1*2 = 16;
    # R=3: 18 + 2 = 20; R=4: 24.
    choice = optimize_reserved(DEMAND, Prices(on_demand=1.0, reserved=0.6))
    assert choice.level == 2
    assert choice.cost.total_usd == pytest.approx(16.0)
    assert choice.totals == pytest.approx((24.0, 20.0, 16.0, 20.0, 24.0))
    assert choice.break_even == pytest.approx(0.6)
    cost = choice.cost
    assert (cost.reserved_usd, cost.on_demand_usd) == pytest.approx((12.0, 4.0))
    assert cost.reserved_utilization == pytest.approx(1.0)
    assert cost.utilization == pytest.approx(1.0)


def test_reserved_idle_hours_are_paid() -> None:
    cost = fleet_cost(DEMAND, Prices(on_demand=1.0, reserved=0.6), Plan(reserved=3))
    # 3 reserved every hour: 18; above 3 only in the two 4-hours: 2
    assert cost.total_usd == pytest.approx(20.0)
    assert cost.reserved_used_hours == pytest.approx(8 * 2 + 2 * 3)
    assert cost.reserved_utilization == pytest.approx(22 / 30)
    assert cost.paid_instance_hours == pytest.approx(30 + 2)
    assert cost.utilization == pytest.approx(24 / 32)


def test_savings_plan_unused_commitment_is_still_paid() -> None:
    # $1.00/h at a $0.50 rate buys up to 2 instances an hour.
    # Hour 1 (demand 1): uses $0.50, $0.50 unused. Hour 2 (demand 3): 2 covered, 1 on demand.
    prices = Prices(on_demand=1.0, savings_plan=0.5)
    cost = fleet_cost([1, 3], prices, Plan(savings_plan_usd_per_hour=1.0))
    assert cost.savings_plan_usd == pytest.approx(2.0)
    assert cost.on_demand_usd == pytest.approx(1.0)
    assert cost.total_usd == pytest.approx(3.0)
    assert cost.savings_plan_used_usd == pytest.approx(1.5)
    assert cost.savings_plan_unused_usd == pytest.approx(0.5)
    assert cost.savings_plan_utilization == pytest.approx(0.75)


def test_savings_plan_optimizer_scans_whole_instances() -> None:
    # Rate 0.6 of on-demand 1.0: committing k instances' worth costs 0.6k*10 and saves
    # 1.0 per covered hour, exactly as reserved instances at 0.6.
    choice = optimize_savings_plan(DEMAND, Prices(on_demand=1.0, savings_plan=0.6))
    assert choice.level == pytest.approx(1.2)  # $/hour: 2 instances at $0.60
    assert choice.cost.total_usd == pytest.approx(16.0)
    assert choice.cost.savings_plan_unused_usd == pytest.approx(0.0)


def test_spot_share_with_fallback_from_interruption_rate_and_delay() -> None:
    # 4 instances an hour, half on spot at $0.30; 0.1 interruptions per hour, 2 h to replace:
    # 20% of spot hours run on demand. Per hour: 2 on demand ($2), 1.6 spot ($0.48),
    # 0.4 fallback ($0.40) = $2.88; two hours $5.76.
    prices = Prices(on_demand=1.0, spot=0.3)
    plan = Plan(spot_share=0.5, interruption_rate=0.1, replacement_hours=2.0)
    assert plan.fallback == pytest.approx(0.2)
    cost = fleet_cost([4, 4], prices, plan)
    assert cost.on_demand_usd == pytest.approx(4.0)
    assert cost.spot_usd == pytest.approx(0.96)
    assert cost.fallback_usd == pytest.approx(0.8)
    assert cost.total_usd == pytest.approx(5.76)
    given = fleet_cost([4, 4], prices, Plan(spot_share=0.5, fallback_fraction=0.2))
    assert given.total_usd == pytest.approx(5.76)
    assert Plan(interruption_rate=0.5, replacement_hours=4).fallback == 1.0  # capped


def test_spot_applies_above_the_committed_base() -> None:
    # base 2 reserved at 0.6; above it (2 in two hours) half on spot at 0.3, no interruptions
    prices = Prices(on_demand=1.0, reserved=0.6, spot=0.3)
    cost = fleet_cost(DEMAND, prices, Plan(reserved=2, spot_share=0.5))
    assert cost.total_usd == pytest.approx(12.0 + 2 * (1 * 1.0 + 1 * 0.3))
    assert optimize_reserved(DEMAND, prices, Plan(spot_share=0.5)).level == 2


def test_break_even_and_amortized_upfront() -> None:
    assert break_even_utilization(0.6, 1.0) == pytest.approx(0.6)
    assert break_even_utilization(2.314207, 3.673385) == pytest.approx(0.63, abs=0.001)
    assert amortized_hourly(8760.0, 1) == pytest.approx(1.0)
    assert amortized_hourly(26280.0, 3) == pytest.approx(1.0)
    assert amortized_hourly(4380.0, 1, recurring_usd_per_hour=0.5) == pytest.approx(1.0)
    with pytest.raises(UsageError):
        amortized_hourly(1.0, 0)


def test_break_even_of_each_commitment_in_the_snapshot() -> None:
    evens = commitment_break_evens(load_snapshot())
    assert evens[("gcp", "us-central1", "g2-standard-8", "committed-1y", "", "")] == (
        pytest.approx(0.537783 / 0.853624)
    )
    sp = ("aws", "us-east-1", "p5en.48xlarge", "savings-plan-3y", "all-upfront", "instance-family")
    assert evens[sp] == pytest.approx(23.8 / 63.296)
    # the Azure H200 reservation has no on-demand price beside it: no break-even
    assert not any(key[2] == "Standard_ND96isr_H200_v5" for key in evens)
    assert all(0 < v < 1 for v in evens.values())


def test_amortized_upfront_is_inside_the_reserved_cost() -> None:
    # 1-year all-upfront at $8,760 per instance = $1.00/h effective; 10 hours of 2 instances
    prices = Prices(on_demand=2.0, reserved=1.0, reserved_upfront=8760.0, reserved_term_years=1)
    cost = fleet_cost([2] * 10, prices, Plan(reserved=2))
    assert cost.reserved_usd == pytest.approx(20.0)
    assert cost.upfront_usd == pytest.approx(2 * 8760.0)  # cash at the start of the term
    assert cost.amortized_upfront_usd == pytest.approx(20.0)  # this horizon's share


def test_the_optimum_is_the_base_load_quantile() -> None:
    rng = np.random.default_rng(7)
    demand = rng.poisson(6.0, size=24 * 30).astype(float)
    for ratio in (0.35, 0.55, 0.72):
        prices = Prices(on_demand=1.0, reserved=ratio)
        level = int(optimize_reserved(demand, prices).level)
        # reserving level R pays while demand reaches R in more hours than the break-even share
        assert np.mean(demand >= level) >= ratio or level == 0
        assert np.mean(demand >= level + 1) <= ratio


def test_fixed_fleet_leaves_demand_above_it_unserved() -> None:
    cost = fixed_fleet_cost(DEMAND, 3, 1.0)
    assert cost.total_usd == pytest.approx(30.0)
    assert cost.unserved_instance_hours == pytest.approx(2.0)
    assert cost.utilization == pytest.approx(22 / 30)
    assert utilization_where(DEMAND, 3, np.asarray(DEMAND) == 2) == pytest.approx(2 / 3)


def test_bad_inputs_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="non-negative"):
        fleet_cost([1, -1], Prices(on_demand=1.0))
    with pytest.raises(UsageError, match="no spot price"):
        fleet_cost([1], Prices(on_demand=1.0), Plan(spot_share=0.5))
    with pytest.raises(UsageError, match="no reserved"):
        fleet_cost([1], Prices(on_demand=1.0), Plan(reserved=1))
    with pytest.raises(UsageError, match="positive"):
        Prices(on_demand=0.0)
    with pytest.raises(UsageError, match="between 0 and 1"):
        Plan(spot_share=1.5)


def test_prices_from_snapshot_points() -> None:
    points = [
        p
        for p in load_snapshot()
        if p.instance_type == "g2-standard-8" and p.region == "us-central1"
    ]
    prices = Prices.from_points(points, commitment=PurchaseOption.COMMITTED_1Y)
    assert prices.on_demand == pytest.approx(0.853624)
    assert prices.reserved == pytest.approx(0.537783)
    assert prices.spot == pytest.approx(0.479872)
    with pytest.raises(UsageError, match="no reserved-1y price"):
        Prices.from_points(points, commitment=PurchaseOption.RESERVED_1Y)
    with pytest.raises(UsageError, match="one instance type in one region"):
        Prices.from_points(
            [*points, *(p for p in load_snapshot() if p.instance_type == "g5.xlarge")]
        )


def test_seed_comparison_fixed_fleet_vs_autoscaling_on_real_g5_2xlarge_prices() -> None:
    """The seed article: "fixed 4 g5.2xlarge instances, monthly $3,072, under 30% utilization
    off-peak" vs "autoscaling, monthly $1,856, peak 6 instances", from the snapshot's price."""
    [g5] = [
        p
        for p in load_snapshot()
        if p.instance_type == "g5.2xlarge" and p.purchase_option is PurchaseOption.ON_DEMAND
    ]
    assert g5.usd_per_hour == 1.212
    demand = seed_profile(days=30)
    assert demand.max() == 6 and demand.mean() == pytest.approx(59 / 24)

    fixed = fixed_fleet_cost(demand, 4, g5.usd_per_hour)
    assert fixed.monthly_usd == pytest.approx(4 * 1.212 * HOURS_PER_MONTH)  # $3,539.04
    off_peak = demand <= 1
    assert utilization_where(demand, 4, off_peak) == pytest.approx(0.25)  # "under 30%"
    assert fixed.utilization == pytest.approx(53 / 96)

    auto = fleet_cost(demand, Prices(on_demand=g5.usd_per_hour))
    assert auto.monthly_usd == pytest.approx(59 / 24 * 1.212 * HOURS_PER_MONTH)  # $2,175.04
    assert auto.utilization == pytest.approx(1.0)
    saving = 1 - auto.monthly_usd / fixed.monthly_usd
    assert saving == pytest.approx(0.385, abs=0.001)  # the article: 1 - 1856/3072 = 39.6%
    assert len(SEED_DAY) == 24


def test_seed_comparison_mixed_strategy_on_real_gcp_l4_prices() -> None:
    """The same profile on GCP g2-standard-8 (L4), which has real committed-use and spot prices:
    the optimizer commits to the base load only where it is busy above the break-even."""
    points = [
        p
        for p in load_snapshot()
        if p.instance_type == "g2-standard-8" and p.region == "us-central1"
    ]
    demand = seed_profile(days=30)
    one_year = Prices.from_points(points, commitment=PurchaseOption.COMMITTED_1Y)
    three_year = Prices.from_points(points, commitment=PurchaseOption.COMMITTED_3Y)
    # break-even 0.63 (1y): demand reaches 2 in only 50% of hours -> commit 1
    # break-even 0.45 (3y): demand reaches 2 in 50% of hours > 45% -> commit 2
    assert optimize_reserved(demand, one_year).level == 1
    best = optimize_reserved(demand, three_year)
    assert best.level == 2
    auto = fleet_cost(demand, one_year)
    assert best.cost.monthly_usd < auto.monthly_usd
    # a day: 2 committed for 24 h; the 12 daytime hours hold 47 instance-hours, 2 of each
    # hour committed, so 47 - 24 = 23 on demand (the 12 night hours need 1, committed)
    expected = (2 * 0.384131 * 24 + (47 - 2 * 12) * 0.853624) / 24 * HOURS_PER_MONTH
    assert best.cost.monthly_usd == pytest.approx(expected)
    spot = fleet_cost(
        demand,
        three_year,
        Plan(reserved=2, spot_share=0.5, interruption_rate=0.05, replacement_hours=2.0),
    )
    assert spot.total_usd < best.cost.total_usd
