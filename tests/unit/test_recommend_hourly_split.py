"""A recommendation's fleet hour by hour, split by how its plan buys it
(``planner.recommend.plan.hourly_by_purchase``), checked by hand and against the bill
``pricing.costs.fleet_cost`` computes for the same plan; and the result's tables."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from planner.recommend.inputs import Constraints
from planner.recommend.plan import cheapest, hourly_by_purchase, purchase_plans
from planner.recommend.space import Offer
from planner.recommend.tables import commitment_level, hourly, purchase_options, sensitivity
from pricing.model import PricePoint, Provider, PurchaseOption

FLEET = [1.0, 3.0, 5.0, 2.0]
STARTS = [0.0, 3600.0, 7200.0, 10800.0]


def result(chosen: dict[str, Any], fleet: list[float] = FLEET) -> dict[str, Any]:
    return {
        "hourly": {
            "hour_start": STARTS,
            "requests": [100.0, 300.0, 500.0, 200.0],
            "replicas": fleet,
            "instances": fleet,
        },
        "plan": {"chosen": chosen, "alternatives": [], "sensitivity": []},
    }


def test_reserved_instances_first_then_on_demand_with_a_spot_share() -> None:
    split = hourly_by_purchase(
        result(
            {
                "option": "reserved-1y",
                "commitment_level": 2,
                "commitment_unit": "instances",
                "committed_instances": 2.0,
                "spot_share": 0.5,
            }
        )
    )
    assert split == {
        "hour_start": STARTS,
        "reserved-1y": [1.0, 2.0, 2.0, 2.0],
        "on-demand": [0.0, 0.5, 1.5, 0.0],
        "spot": [0.0, 0.5, 1.5, 0.0],
    }


def test_all_on_demand_has_one_series() -> None:
    chosen = {"option": "on-demand", "commitment_level": 0.0, "commitment_unit": "instances"}
    split = hourly_by_purchase(result({**chosen, "committed_instances": 0.0, "spot_share": 0.0}))
    assert split == {"hour_start": STARTS, "on-demand": FLEET}


def test_a_savings_plan_stored_without_its_covered_instances_is_not_guessed() -> None:
    chosen = {"option": "savings-plan-1y", "commitment_level": 12.0}
    assert hourly_by_purchase(result({**chosen, "commitment_unit": "usd_per_hour"})) is None
    # a reserved plan stored before: its level is its instances
    old = {"option": "reserved-3y", "commitment_level": 3, "commitment_unit": "instances"}
    split = hourly_by_purchase(result(old))
    assert split is not None and split["reserved-3y"] == [1.0, 3.0, 3.0, 2.0]


def test_no_winner_no_split() -> None:
    assert hourly_by_purchase({"hourly": {"hour_start": STARTS, "requests": []}}) is None


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


@pytest.mark.parametrize("commitment", [PurchaseOption.SAVINGS_PLAN_1Y, PurchaseOption.RESERVED_1Y])
def test_the_split_is_what_the_plan_bills(commitment: PurchaseOption) -> None:
    """Instance-hours on demand and on spot in the split, at their prices, are the plan's
    on-demand and spot bills: the split is the plan's, not a guess."""
    offer = Offer(
        "aws",
        "us-east-1",
        "p5.4xlarge",
        "H100-SXM",
        1,
        (
            price(PurchaseOption.ON_DEMAND, 10.0),
            price(commitment, 6.0),
            price(PurchaseOption.SPOT, 3.0),
        ),
    )
    fleet = np.array([2, 2, 2, 2, 4, 4, 6, 6], dtype=np.int64)
    constraints = Constraints(
        model="llama-3.1-8b", max_spot_share=0.5, spot_interruptions_per_hour=0.0
    )
    best = cheapest(purchase_plans(fleet, offer, constraints, spot=0.5))
    assert best.option == commitment.value
    chosen = best.to_dict()
    assert chosen["committed_instances"] == pytest.approx(2.0)  # $12/h at $6, or 2 reserved
    data = result(chosen, fleet.astype(float).tolist())
    data["hourly"]["hour_start"] = [3600.0 * h for h in range(len(fleet))]
    split = hourly_by_purchase(data)
    assert split is not None
    assert sum(split["on-demand"]) * 10.0 == pytest.approx(best.cost.on_demand_usd)
    assert sum(split["spot"]) * 3.0 == pytest.approx(best.cost.spot_usd)
    committed = np.array(split[commitment.value]) + split["on-demand"] + split["spot"]
    assert committed.tolist() == fleet.tolist()  # every instance-hour bought exactly once


def test_plan_tables_read_a_result() -> None:
    chosen = {
        "option": "reserved-1y",
        "commitment_level": 2,
        "commitment_unit": "instances",
        "committed_instances": 2.0,
        "break_even_utilization": 0.6,
        "spot_share": 0.0,
        "monthly_usd": 100.0,
        "cost": {"utilization": 0.9, "reserved_utilization": 0.95},
    }
    on_demand = {
        **chosen,
        "option": "on-demand",
        "commitment_level": 0.0,
        "break_even_utilization": None,
        "monthly_usd": 150.0,
        "cost": {"utilization": 1.0, "reserved_utilization": None},
    }
    data = result(chosen)
    data["plan"]["alternatives"] = [chosen, on_demand]
    data["plan"]["sensitivity"] = [
        {
            "load": "+20%",
            "peak_instances": 6,
            "monthly_usd_with_this_plan": 120.0,
            "monthly_usd_replanned": 115.0,
            "replanned_option": "reserved-1y",
            "replanned_commitment_level": 3,
        }
    ]
    options = purchase_options(data)
    assert list(options["purchase"]) == ["reserved-1y", "on-demand"]
    assert list(options["commitment"]) == ["2 instances", "-"]
    assert list(options["chosen"]) == [True, False]
    assert sensitivity(data).loc[0, "$ per month replanned"] == 115.0
    frame = hourly(data)
    assert list(frame["reserved-1y instances"]) == [1.0, 2.0, 2.0, 2.0]
    assert list(frame["on-demand instances"]) == [0.0, 1.0, 3.0, 0.0]
    assert str(frame["hour (UTC)"].iloc[1]) == "1970-01-01 01:00:00+00:00"
    sp = {"option": "savings-plan-3y", "commitment_unit": "usd_per_hour"}
    assert commitment_level({**sp, "commitment_level": 12.5, "committed_instances": 2.5}) == (
        "$12.50 an hour (about 2.5 instances)"
    )
