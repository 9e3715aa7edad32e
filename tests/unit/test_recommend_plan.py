"""The recommender's purchase plan (planner.recommend.plan) against hand-computed costs.

One instance type at $10/h on demand, $6/h reserved for a year (break-even 60% of hours) and
$3/h on spot; the fleet needs 2, 2, 2, 2, 4, 4, 6, 6 instances in its eight hours.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from planner.recommend.inputs import Constraints, Demand
from planner.recommend.plan import (
    PlanChoice,
    cheapest,
    commitment_plan,
    purchase_plans,
    spot_share,
)
from planner.recommend.space import Offer
from planner.workload.rates import RateCurve
from pricing.costs import HOURS_PER_MONTH
from pricing.model import PricePoint, Provider, PurchaseOption
from tests.workloads import uniform_workload

START = datetime(2024, 1, 1, tzinfo=UTC)
MODEL = "llama-3.1-8b"
HOURS = np.array([2, 2, 2, 2, 4, 4, 6, 6], dtype=np.int64)

# Reserving R instances costs 6 x 8 x R, and every instance-hour above R $10:
#   R=0: 0 + 28 x 10 = 280      R=1: 48 + 20 x 10 = 248     R=2: 96 + 12 x 10 = 216
#   R=3: 144 + 8 x 10 = 224     R=4: 192 + 4 x 10 = 232     R=6: 288
# Demand reaches 2 in every hour, 3 in half of them: below the 60% break-even, so R = 2.
ALL_ON_DEMAND = 280.0
BEST_RESERVED = 2
BEST_TOTAL = 216.0


def monthly(total: float, hours: int = 8) -> float:
    return total / hours * HOURS_PER_MONTH


def price(option: PurchaseOption, usd: float) -> PricePoint:
    return PricePoint(
        provider=Provider.AWS,
        region="us-east-1",
        instance_type="p5.4xlarge",
        gpu_model="H100-SXM",
        gpu_count=1,
        purchase_option=option,
        usd_per_hour=usd,
        source="test",
        effective_date="2024-01-01",
    )


OFFER = Offer(
    "aws",
    "us-east-1",
    "p5.4xlarge",
    "H100-SXM",
    1,
    (
        price(PurchaseOption.ON_DEMAND, 10.0),
        price(PurchaseOption.RESERVED_1Y, 6.0),
        price(PurchaseOption.SPOT, 3.0),
    ),
)


def by_option(choices: list[PlanChoice]) -> dict[str, PlanChoice]:
    return {c.option: c for c in choices}


def test_reserved_level_and_cost_by_hand() -> None:
    choices = by_option(purchase_plans(HOURS, OFFER, Constraints(model=MODEL), spot=0.0))
    # spot is not allowed by default; no 3-year or savings-plan price exists
    assert set(choices) == {"on-demand", "reserved-1y"}
    on_demand, reserved = choices["on-demand"], choices["reserved-1y"]
    assert on_demand.cost.total_usd == pytest.approx(ALL_ON_DEMAND)
    assert (on_demand.commitment_level, on_demand.break_even) == (0.0, None)
    assert reserved.commitment_level == BEST_RESERVED
    assert reserved.plan.reserved == BEST_RESERVED
    assert reserved.break_even == pytest.approx(0.6)
    assert reserved.cost.total_usd == pytest.approx(BEST_TOTAL)
    assert reserved.cost.reserved_usd == pytest.approx(96.0)
    assert reserved.cost.on_demand_usd == pytest.approx(120.0)
    assert reserved.cost.spot_usd == 0.0
    assert reserved.monthly_usd == pytest.approx(monthly(BEST_TOTAL))  # $19,710
    # the largest level reached in more than 60% of the hours
    shares = {level: float(np.mean(level <= HOURS)) for level in range(1, 7)}
    assert max(level for level, share in shares.items() if share > 0.6) == BEST_RESERVED

    best = cheapest(list(choices.values()))
    assert best is reserved
    described = best.to_dict()
    assert described["option"] == "reserved-1y"
    assert described["commitment_unit"] == "instances"
    assert described["monthly_usd"] == pytest.approx(19_710.0)
    assert described["cost"]["reserved_instances"] == 2


def test_commitment_plan_by_hand() -> None:
    doubled = HOURS * 2  # 4, 4, 4, 4, 8, 8, 12, 12
    plan = commitment_plan(HOURS, OFFER, Constraints(model=MODEL), spot=0.0, resize={"x2": doubled})
    assert plan["instance"] == "aws/us-east-1/p5.4xlarge"
    assert plan["chosen"]["option"] == "reserved-1y"
    assert plan["chosen"]["commitment_level"] == BEST_RESERVED
    assert plan["chosen"]["monthly_usd"] == pytest.approx(monthly(BEST_TOTAL))
    assert plan["all_on_demand_monthly_usd"] == pytest.approx(monthly(ALL_ON_DEMAND))  # 25,550
    assert plan["savings_vs_on_demand_monthly_usd"] == pytest.approx(monthly(64.0))  # 5,840
    assert plan["savings_vs_on_demand_pct"] == pytest.approx((1 - 216 / 280) * 100)  # 22.9%
    assert plan["break_even_utilization"] == {"reserved-1y": pytest.approx(0.6)}
    assert plan["hourly_instances"] == {"min": 2, "mean": 3.5, "max": 6, "p50": 3.0}
    assert [a["option"] for a in plan["alternatives"]] == ["reserved-1y", "on-demand"]
    assert plan["hours_per_month"] == HOURS_PER_MONTH
    # twice the load: the 2 reserved still serve, 40 instance-hours above them on demand
    # (96 + 400 = 496); replanned, 4 reserved (demand reaches 4 every hour, 5 in half):
    # 192 + 24 x 10 = 432
    [moved] = plan["sensitivity"]
    assert moved["load"] == "x2"
    assert moved["peak_instances"] == 12
    assert moved["monthly_usd_with_this_plan"] == pytest.approx(monthly(496.0))
    assert moved["monthly_usd_replanned"] == pytest.approx(monthly(432.0))
    assert moved["replanned_option"] == "reserved-1y"
    assert moved["replanned_commitment_level"] == 4


def test_flat_demand_at_the_break_even_stays_on_demand() -> None:
    # reserved at the on-demand price: every level costs the same; nothing is committed
    offer = Offer(
        "aws",
        "us-east-1",
        "p5.4xlarge",
        "H100-SXM",
        1,
        (price(PurchaseOption.ON_DEMAND, 10.0), price(PurchaseOption.RESERVED_1Y, 10.0)),
    )
    choices = purchase_plans(HOURS, offer, Constraints(model=MODEL), spot=0.0)
    assert [c.cost.total_usd for c in choices] == pytest.approx([280.0, 280.0])
    assert cheapest(choices).option == "on-demand"
    plan = commitment_plan(HOURS, offer, Constraints(model=MODEL), 0.0, {})
    assert plan["savings_vs_on_demand_monthly_usd"] == 0.0
    assert plan["sensitivity"] == []


def test_commitments_not_allowed_are_not_offered() -> None:
    constraints = Constraints(model=MODEL, purchase_options=(PurchaseOption.ON_DEMAND,))
    choices = purchase_plans(HOURS, OFFER, constraints, spot=0.0)
    assert [c.option for c in choices] == ["on-demand"]
    assert cheapest(choices).cost.total_usd == pytest.approx(ALL_ON_DEMAND)


def test_spot_share_applies_above_the_reserved_base() -> None:
    constraints = Constraints(
        model=MODEL,
        max_spot_share=0.5,
        spot_interruptions_per_hour=0.0,
    )
    assert PurchaseOption.SPOT in constraints.purchase_options  # added by the spot share
    # Above the base, half the instance-hours at $10 and half at $3: $6.50 each, so a reserved
    # instance ($6) pays off only where busy in more than 6/6.5 = 92% of the hours:
    #   R=0: 28 x 6.5 = 182    R=1: 48 + 20 x 6.5 = 178    R=2: 96 + 12 x 6.5 = 174
    #   R=3: 144 + 8 x 6.5 = 196
    choices = by_option(purchase_plans(HOURS, OFFER, constraints, spot=0.5))
    on_demand, reserved = choices["on-demand"], choices["reserved-1y"]
    assert on_demand.plan.spot_share == 0.5
    assert on_demand.cost.total_usd == pytest.approx(182.0)
    assert on_demand.cost.spot_usd == pytest.approx(14 * 3.0)
    assert on_demand.cost.on_demand_usd == pytest.approx(14 * 10.0)
    assert reserved.commitment_level == 2
    assert reserved.plan.spot_share == 0.5
    assert reserved.cost.total_usd == pytest.approx(174.0)
    # the 12 instance-hours above the 2 reserved: 6 on spot, 6 on demand; none below the base
    assert reserved.cost.reserved_usd == pytest.approx(96.0)
    assert reserved.cost.spot_usd == pytest.approx(6 * 3.0)
    assert reserved.cost.on_demand_usd == pytest.approx(6 * 10.0)
    assert reserved.cost.fallback_usd == 0.0
    best = cheapest(list(choices.values()))
    assert best.option == "reserved-1y"
    assert best.to_dict()["spot_share"] == 0.5
    plan = commitment_plan(HOURS, OFFER, constraints, 0.5, {})
    # savings are against the list-price baseline: all 28 instance-hours on demand, $280
    assert plan["all_on_demand_monthly_usd"] == pytest.approx(monthly(280.0))
    assert plan["savings_vs_on_demand_monthly_usd"] == pytest.approx(monthly(280.0 - 174.0))


def test_spot_interruptions_fall_back_to_on_demand() -> None:
    # 0.5 interruptions an hour, one hour to replace: half the spot hours run on demand.
    # Above R: each instance-hour 0.5 x 10 + 0.5 x (0.5 x 3 + 0.5 x 10) = 8.25
    #   R=2: 96 + 12 x 8.25 = 195;   R=3: 144 + 8 x 8.25 = 210;   R=0: 28 x 8.25 = 231
    constraints = Constraints(
        model=MODEL, max_spot_share=0.5, spot_interruptions_per_hour=0.5, spot_replace_hours=1.0
    )
    choices = by_option(purchase_plans(HOURS, OFFER, constraints, spot=0.5))
    assert choices["on-demand"].cost.total_usd == pytest.approx(231.0)
    reserved = choices["reserved-1y"]
    assert reserved.commitment_level == 2
    assert reserved.cost.total_usd == pytest.approx(195.0)
    assert reserved.cost.fallback_usd == pytest.approx(3 * 10.0)


def test_no_spot_without_a_spot_price() -> None:
    offer = Offer("aws", "us-east-1", "p5.4xlarge", "H100-SXM", 1, OFFER.points[:2])
    constraints = Constraints(model=MODEL, max_spot_share=0.5, spot_interruptions_per_hour=0.0)
    choices = by_option(purchase_plans(HOURS, offer, constraints, spot=0.5))
    assert choices["on-demand"].plan.spot_share == 0.0
    assert choices["on-demand"].cost.total_usd == pytest.approx(ALL_ON_DEMAND)
    assert choices["reserved-1y"].cost.total_usd == pytest.approx(BEST_TOTAL)


def test_savings_plan_is_scanned_in_dollars_an_hour() -> None:
    # a savings plan at $6/instance-hour behaves like the reserved instances: 2 instances'
    # worth ($12/h) is the best commitment, $216 in all
    offer = Offer(
        "aws",
        "us-east-1",
        "p5.4xlarge",
        "H100-SXM",
        1,
        (price(PurchaseOption.ON_DEMAND, 10.0), price(PurchaseOption.SAVINGS_PLAN_1Y, 6.0)),
    )
    choices = by_option(purchase_plans(HOURS, offer, Constraints(model=MODEL), spot=0.0))
    plan = choices["savings-plan-1y"]
    assert plan.commitment_level == pytest.approx(12.0)
    assert plan.plan.savings_plan_usd_per_hour == pytest.approx(12.0)
    assert plan.cost.total_usd == pytest.approx(BEST_TOTAL)
    assert plan.to_dict()["commitment_unit"] == "usd_per_hour"


# --- the spot share of a demand ------------------------------------------------------------


def two_class_demand() -> Demand:
    # 8 requests in the first hour: 6 batch, 2 chat
    arrival = np.arange(8, dtype=np.float64) * 400.0
    classes = np.array([0, 0, 1, 0, 0, 1, 0, 0], dtype=np.int16)
    workload = uniform_workload(
        arrival, 500, 100, start=START, class_index=classes, classes=("batch", "chat")
    )
    return Demand.from_workload(workload, "two classes")


def test_spot_share_counts_the_tolerant_classes_of_a_replay() -> None:
    demand = two_class_demand()
    assert demand.classes == ("batch", "chat")
    assert demand.curve.requests_per_hour.tolist() == [8.0]

    def share(**fields: object) -> float:
        constraints = Constraints(model=MODEL, **fields)  # type: ignore[arg-type]
        return spot_share(demand, constraints)

    assert share() == 0.0  # no spot allowed
    assert share(max_spot_share=0.8) == pytest.approx(0.8)  # no class named: all tolerate it
    assert share(max_spot_share=0.8, spot_classes=("batch",)) == pytest.approx(0.8 * 6 / 8)
    assert share(max_spot_share=0.8, spot_classes=("chat",)) == pytest.approx(0.8 * 2 / 8)
    assert share(max_spot_share=0.8, spot_classes=("batch", "chat")) == pytest.approx(0.8)
    assert share(max_spot_share=0.8, spot_classes=("other",)) == 0.0


def test_spot_share_of_a_rate_curve_demand() -> None:
    demand = Demand(
        RateCurve(START, np.array([100.0, 200.0])),
        np.array([500], dtype=np.int64),
        np.array([100], dtype=np.int64),
        "curve",
    )
    assert demand.classes == ("default",)
    one_class = Constraints(model=MODEL, max_spot_share=0.4, spot_classes=("default",))
    assert spot_share(demand, one_class) == pytest.approx(0.4)
    other = Constraints(model=MODEL, max_spot_share=0.4, spot_classes=("batch",))
    assert spot_share(demand, other) == 0.0
