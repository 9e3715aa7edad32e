"""The report's sensitivity cases (``planner.report.sensitivity``) on an offer made by hand:
spot interruptions cost through the on-demand stand-in hours, prices move the on-demand part of
a kept plan only, loads re-size the fleet as the recommendation did."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.recommend.inputs import Constraints
from planner.recommend.space import Offer
from planner.report.projection import Purchase
from planner.report.sensitivity import (
    PlanningInputs,
    interruption_rows,
    load_rows,
    price_rows,
    purchase_text,
    sensitivity_table,
)
from pricing.costs import fleet_cost
from pricing.model import PricePoint, Provider, PurchaseOption


def point(option: PurchaseOption, usd_per_hour: float) -> PricePoint:
    return PricePoint(
        Provider.GCP, "us-east4", "g2-standard-4", "L4", 1, option, usd_per_hour, "by hand",
        "2026-07-30",
    )  # fmt: skip


OFFER = Offer(
    "gcp", "us-east4", "g2-standard-4", "L4", 1,
    (point(PurchaseOption.ON_DEMAND, 0.70), point(PurchaseOption.SPOT, 0.31),
     point(PurchaseOption.COMMITTED_1Y, 0.44)),
)  # fmt: skip


def inputs(max_spot_share: float) -> PlanningInputs:
    constraints = Constraints(
        model="llama-3.1-8b",
        max_spot_share=max_spot_share,
        spot_interruptions_per_hour=0.5,
        spot_replace_hours=1.0,
    )
    pattern = np.array([2, 2, 2, 6, 6, 6, 4, 4], dtype=np.int64)
    return PlanningInputs(
        offer=OFFER,
        constraints=constraints,
        spot=max_spot_share,
        requests=(pattern * 3600.0 * 3.0).astype(np.float64),  # 3 a second per replica
        instances=pattern,
        replica_rps=3.0,
        replicas_per_instance=1,
    )


def bought(planning: PlanningInputs) -> Purchase:
    choice = planning.replan()
    return Purchase(
        "gcp", "us-east4", "g2-standard-4", choice.option, choice.plan, choice.prices,
        PurchaseOption(choice.option).term_years,
    )  # fmt: skip


def test_spot_interruptions_cost_through_the_on_demand_stand_ins() -> None:
    planning = inputs(max_spot_share=0.5)
    purchase = bought(planning)
    assert purchase.plan.spot_share == 0.5 and purchase.plan.interruption_rate == 0.5
    base = fleet_cost(planning.instances.astype(float), purchase.prices, purchase.plan)
    halved, doubled = interruption_rows(planning, purchase)
    assert halved[1] == "spot interruptions x0.5" and doubled[2] == 2.0
    # more interruptions: more spot hours served on demand instead
    assert halved[3] < base.monthly_usd < doubled[3]
    plan = replace(purchase.plan, interruption_rate=1.0)
    assert doubled[3] == pytest.approx(
        fleet_cost(planning.instances.astype(float), purchase.prices, plan).monthly_usd
    )


def test_without_spot_interruptions_change_nothing() -> None:
    planning = inputs(max_spot_share=0.0)
    purchase = bought(planning)
    base = fleet_cost(planning.instances.astype(float), purchase.prices, purchase.plan)
    for row in interruption_rows(planning, purchase):
        assert row[3] == pytest.approx(base.monthly_usd)
        assert row[4] == pytest.approx(base.monthly_usd)


def test_prices_move_the_on_demand_part_of_a_kept_plan() -> None:
    planning = inputs(max_spot_share=0.0)
    purchase = bought(planning)
    assert purchase.option == "committed-1y" and purchase.plan.reserved > 0
    base = fleet_cost(planning.instances.astype(float), purchase.prices, purchase.plan)
    lower, higher = price_rows(planning, purchase)
    assert higher[3] - base.monthly_usd == pytest.approx(
        0.1 * base.on_demand_usd / base.hours * 730
    )
    assert lower[3] < base.monthly_usd < higher[3]
    assert higher[4] == pytest.approx(base.monthly_usd * 1.1)  # every price moved, re-bought


def test_load_cases_resize_the_fleet_unless_stored() -> None:
    planning = inputs(max_spot_share=0.0)
    purchase = bought(planning)
    lower, higher = load_rows(planning, purchase, None)
    assert (lower[1], higher[1]) == ("load -20%", "load +20%")
    moved = planning.fleet_at(1.2)
    assert moved.tolist() == [3, 3, 3, 8, 8, 8, 5, 5]  # ceil(1.2 x each hour)
    assert higher[3] == pytest.approx(
        fleet_cost(moved.astype(float), purchase.prices, purchase.plan).monthly_usd
    )
    assert higher[4] <= higher[3] and lower[4] <= lower[3]
    stored = [
        {
            "load": "+20%",
            "monthly_usd_with_this_plan": 10.0,
            "monthly_usd_replanned": 9.0,
            "replanned_option": "savings-plan-1y",
            "replanned_commitment_level": 2.5,
        }
    ]
    assert load_rows(planning, purchase, stored) == [
        ("load", "load +20%", 1.2, 10.0, 9.0, "savings-plan-1y, $2.50 an hour")
    ]
    table = sensitivity_table(planning, purchase, stored)
    assert list(table["kind"]) == ["load", "spot_interruptions", "spot_interruptions", "price",
                                   "price"]  # fmt: skip


def test_purchase_text() -> None:
    assert purchase_text("on-demand", 0) == "on-demand"
    assert purchase_text("committed-3y", 1) == "committed-3y, 1 instance"
    assert purchase_text("reserved-1y", 9) == "reserved-1y, 9 instances"
