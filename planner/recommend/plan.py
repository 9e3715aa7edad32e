"""What to buy: the purchase mix that serves an hourly fleet most cheaply, and how it holds up
when the load moves.

For each commitment the constraints and the price sheet allow (reserved instances, committed
use, savings plans), the level that minimizes the horizon's cost is found by
``pricing.costs`` (the base-load quantile whose share of busy hours beats the commitment's
break-even utilization); on-demand serves the load above it, and a share of that runs on spot
where allowed. The cheapest of these, and all-on-demand, is the plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.recommend.inputs import Constraints, Demand
from planner.recommend.space import Offer
from pricing.costs import (
    HOURS_PER_MONTH,
    FleetCost,
    Plan,
    Prices,
    break_even_utilization,
    fleet_cost,
    optimize_reserved,
    optimize_savings_plan,
)
from pricing.model import PurchaseOption

COMMITMENTS = (
    PurchaseOption.RESERVED_1Y,
    PurchaseOption.RESERVED_3Y,
    PurchaseOption.COMMITTED_1Y,
    PurchaseOption.COMMITTED_3Y,
)
SENSITIVITY = {"-20%": 0.8, "+20%": 1.2}  # the loads a plan is re-sized for
SAVINGS_PLANS = (PurchaseOption.SAVINGS_PLAN_1Y, PurchaseOption.SAVINGS_PLAN_3Y)


@dataclass(frozen=True)
class PlanChoice:
    """A way to buy the fleet and what it costs over the horizon."""

    option: str  # on-demand, or the commitment used (reserved-1y, savings-plan-3y, ...)
    plan: Plan
    prices: Prices
    cost: FleetCost
    commitment_level: float  # instances, or $/hour for a savings plan
    break_even: float | None  # commitment price / on-demand price

    @property
    def monthly_usd(self) -> float:
        return self.cost.monthly_usd

    @property
    def committed_instances(self) -> float:
        """Instances the commitment covers each hour: the reserved count, or a savings plan's
        dollars an hour at its rate for this instance type."""
        if "savings-plan" in self.option:
            rate = self.prices.savings_plan
            return self.commitment_level / rate if rate else 0.0
        return float(self.plan.reserved)

    def to_dict(self) -> dict[str, Any]:
        return {
            "option": self.option,
            "commitment_level": self.commitment_level,
            "commitment_unit": "usd_per_hour" if "savings-plan" in self.option else "instances",
            "committed_instances": self.committed_instances,
            "break_even_utilization": self.break_even,
            "spot_share": self.plan.spot_share,
            "monthly_usd": self.monthly_usd,
            "cost": self.cost.to_dict(),
        }


def spot_share(demand: Demand, constraints: Constraints) -> float:
    """The share of the load above commitments that may run on spot: the allowed maximum,
    times the share of requests in classes that tolerate interruption (all of them when no
    class is named)."""
    if constraints.max_spot_share <= 0:
        return 0.0
    if not constraints.spot_classes:
        return constraints.max_spot_share
    if demand.replay is None:
        tolerant = float(all(name in constraints.spot_classes for name in demand.classes))
    else:
        w = demand.replay
        chosen = [i for i, name in enumerate(w.classes) if name in constraints.spot_classes]
        tolerant = float(np.isin(w.class_index, chosen).mean())
    return constraints.max_spot_share * tolerant


def purchase_plans(
    instances: NDArray[np.int64], offer: Offer, constraints: Constraints, spot: float
) -> list[PlanChoice]:
    """Every allowed way to buy ``instances`` (one count per hour) of ``offer``, cheapest
    level of each commitment."""
    allowed = set(constraints.purchase_options)
    demand = instances.astype(np.float64)
    use_spot = spot > 0 and offer.price(PurchaseOption.SPOT) is not None
    base = Plan(
        spot_share=spot if use_spot else 0.0,
        interruption_rate=constraints.spot_interruptions_per_hour if use_spot else 0.0,
        replacement_hours=constraints.spot_replace_hours if use_spot else 0.0,
    )
    plain = offer.prices()
    choices = [PlanChoice("on-demand", base, plain, fleet_cost(demand, plain, base), 0.0, None)]
    for option in (*COMMITMENTS, *SAVINGS_PLANS):
        if option not in allowed or offer.price(option) is None:
            continue
        if option in SAVINGS_PLANS:
            prices = offer.prices(savings_plan=option)
            found = optimize_savings_plan(demand, prices, base)
            plan = replace(base, savings_plan_usd_per_hour=found.level)
        else:
            prices = offer.prices(commitment=option)
            found = optimize_reserved(demand, prices, base)
            plan = replace(base, reserved=int(found.level))
        choices.append(
            PlanChoice(option.value, plan, prices, found.cost, found.level, found.break_even)
        )
    return choices


def list_price_cost(instances: NDArray[np.int64], offer: Offer) -> FleetCost:
    """The baseline savings are measured against: every instance-hour on demand at the list
    price, no spot, no commitment."""
    return fleet_cost(instances.astype(np.float64), offer.prices(), Plan())


def cheapest(choices: list[PlanChoice]) -> PlanChoice:
    """The cheapest plan; all-on-demand on a tie (it commits to nothing)."""
    return min(choices, key=lambda c: (round(c.cost.total_usd, 6), c.option != "on-demand"))


def commitment_plan(
    instances: NDArray[np.int64],
    offer: Offer,
    constraints: Constraints,
    spot: float,
    resize: dict[str, NDArray[np.int64]],
) -> dict[str, Any]:
    """The plan for the chosen fleet, its alternatives, savings against all on-demand, the
    break-even of each commitment, and the cost when the load moves (``resize``: label ->
    hourly instances at that load)."""
    choices = purchase_plans(instances, offer, constraints, spot)
    best = cheapest(choices)
    demand = instances.astype(np.float64)
    on_demand = list_price_cost(instances, offer)
    sensitivity = []
    for label, moved in resize.items():
        kept = fleet_cost(moved.astype(np.float64), best.prices, best.plan)
        redone = cheapest(purchase_plans(moved, offer, constraints, spot))
        sensitivity.append(
            {
                "load": label,
                "peak_instances": int(moved.max()),
                "monthly_usd_with_this_plan": kept.monthly_usd,
                "monthly_usd_replanned": redone.monthly_usd,
                "replanned_option": redone.option,
                "replanned_commitment_level": redone.commitment_level,
            }
        )
    break_evens = {}
    for option in (*COMMITMENTS, *SAVINGS_PLANS):
        point = offer.price(option)
        if point is not None:
            break_evens[option.value] = break_even_utilization(point.usd_per_hour, offer.on_demand)
    return {
        "instance": offer.label,
        "chosen": best.to_dict(),
        "alternatives": [c.to_dict() for c in sorted(choices, key=lambda c: c.cost.total_usd)],
        "all_on_demand_monthly_usd": on_demand.monthly_usd,
        "savings_vs_on_demand_monthly_usd": on_demand.monthly_usd - best.monthly_usd,
        "savings_vs_on_demand_pct": (
            (1 - best.monthly_usd / on_demand.monthly_usd) * 100 if on_demand.monthly_usd else 0.0
        ),
        "break_even_utilization": break_evens,
        "hourly_instances": {
            "min": int(demand.min()),
            "mean": float(demand.mean()),
            "max": int(demand.max()),
            "p50": float(np.quantile(demand, 0.5)),
        },
        "sensitivity": sensitivity,
        "hours_per_month": HOURS_PER_MONTH,
    }


def hourly_by_purchase(result: Mapping[str, Any]) -> dict[str, list[float]] | None:
    """A recommendation's fleet (its ``to_dict()``, or a stored one) hour by hour, split the
    way the chosen plan bills it (``pricing.costs.fleet_cost``): the committed instances first,
    the rest on demand, of which the plan's spot share runs on spot. Keys: ``hour_start``
    (epoch seconds), then the purchase options with instances in some hour. None without a
    winner, or for a savings plan stored before its covered instances were recorded."""
    hourly = result.get("hourly") or {}
    chosen = (result.get("plan") or {}).get("chosen")
    if chosen is None or "instances" not in hourly:
        return None
    covered = chosen.get("committed_instances")
    if covered is None:
        if chosen.get("commitment_unit") != "instances":
            return None
        covered = chosen.get("commitment_level") or 0.0
    fleet = np.asarray(hourly["instances"], dtype=np.float64)
    committed = np.minimum(fleet, float(covered))
    above = fleet - committed
    spot = above * float(chosen.get("spot_share") or 0.0)
    split: dict[str, list[float]] = {"hour_start": [float(t) for t in hourly["hour_start"]]}
    if chosen["option"] != "on-demand" and committed.any():
        split[chosen["option"]] = committed.tolist()
    split["on-demand"] = (above - spot).tolist()
    if spot.any():
        split["spot"] = spot.tolist()
    return split
