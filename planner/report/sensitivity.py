"""How the plan's monthly cost moves when the load, the spot interruption rate or the prices
move: the plan kept as bought, and the plan bought again for the new case (with the same
purchase-plan functions the recommendation used, ``planner.recommend.plan``).

Monthly figures are per average 730-hour month, as the recommendation's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from planner.recommend.inputs import Constraints
from planner.recommend.plan import PlanChoice, cheapest, purchase_plans
from planner.recommend.screen import hourly_instances, hourly_replicas
from planner.recommend.space import Offer
from planner.recommend.tables import commitment_level
from planner.report.model import SENSITIVITY_COLUMNS
from planner.report.projection import Purchase
from pricing.costs import fleet_cost

LOAD_FACTORS = (0.8, 1.2)
INTERRUPTION_FACTORS = (0.5, 2.0)
PRICE_FACTORS = (0.9, 1.1)


@dataclass(frozen=True)
class PlanningInputs:
    """What re-planning needs: the offer bought, the constraints and spot share the
    recommendation searched with, and its fleet hour by hour."""

    offer: Offer
    constraints: Constraints
    spot: float
    requests: NDArray[np.float64]  # per hour
    instances: NDArray[np.int64]  # per hour, the recommended fleet
    replica_rps: float  # requests per second one replica serves within the targets
    replicas_per_instance: int

    def replan(
        self,
        instances: NDArray[np.int64] | None = None,
        offer: Offer | None = None,
        constraints: Constraints | None = None,
    ) -> PlanChoice:
        """The cheapest way to buy a fleet (default: the recommended one) as the
        recommendation chose it."""
        return cheapest(
            purchase_plans(
                self.instances if instances is None else instances,
                offer or self.offer,
                constraints or self.constraints,
                self.spot,
            )
        )

    def fleet_at(self, load_factor: float) -> NDArray[np.int64]:
        """The fleet for ``load_factor`` times the load, sized as the recommendation sized its
        sensitivity fleets (each hour's requests over one replica's capacity)."""
        replicas = hourly_replicas(
            self.requests * load_factor, self.replica_rps, self.constraints.min_replicas
        )
        return hourly_instances(replicas, self.replicas_per_instance)


def purchase_text(option: str, level: float) -> str:
    """A re-plan's purchase in words: ``committed-3y, 9 instances``, ``on-demand``."""
    unit = "usd_per_hour" if option.startswith("savings-plan") else "instances"
    level_text = commitment_level(
        {"option": option, "commitment_unit": unit, "commitment_level": level}
    )
    return option if level_text == "-" else f"{option}, {level_text}"


def _row(kind: str, case: str, factor: float, kept: float, choice: PlanChoice) -> tuple[Any, ...]:
    return (
        kind,
        case,
        factor,
        kept,
        choice.monthly_usd,
        purchase_text(choice.option, choice.commitment_level),
    )


def _percent(factor: float) -> str:
    return f"{(factor - 1) * 100:+.0f}%"


def load_rows(
    inputs: PlanningInputs,
    purchase: Purchase,
    stored: Sequence[Mapping[str, Any]] | None,
) -> list[tuple[Any, ...]]:
    """Load 20% lower and higher: the recommendation's own figures where it stored them
    (``stored``: its plan's ``sensitivity``), else worked out the same way."""
    if stored:
        rows = []
        for case in stored:
            label = str(case["load"])
            factor = 1 + float(label.rstrip("%")) / 100
            rows.append(
                (
                    "load",
                    f"load {label}",
                    factor,
                    float(case["monthly_usd_with_this_plan"]),
                    float(case["monthly_usd_replanned"]),
                    purchase_text(
                        str(case["replanned_option"]), float(case["replanned_commitment_level"])
                    ),
                )
            )
        return rows
    rows = []
    for factor in LOAD_FACTORS:
        moved = inputs.fleet_at(factor)
        kept = fleet_cost(moved.astype(np.float64), purchase.prices, purchase.plan)
        rows.append(
            _row("load", f"load {_percent(factor)}", factor, kept.monthly_usd, inputs.replan(moved))
        )
    return rows


def interruption_rows(inputs: PlanningInputs, purchase: Purchase) -> list[tuple[Any, ...]]:
    """The spot interruption rate halved and doubled: it costs through the on-demand hours that
    stand in for interrupted spot (``Plan.interruption_rate``); a plan without spot costs the
    same."""
    rows = []
    fleet = inputs.instances.astype(np.float64)
    rate = inputs.constraints.spot_interruptions_per_hour
    for factor in INTERRUPTION_FACTORS:
        plan = purchase.plan
        if plan.spot_share > 0:
            plan = replace(plan, interruption_rate=plan.interruption_rate * factor)
        kept = fleet_cost(fleet, purchase.prices, plan)
        constraints = replace(inputs.constraints, spot_interruptions_per_hour=rate * factor)
        rows.append(
            _row(
                "spot_interruptions",
                f"spot interruptions x{factor:g}",
                factor,
                kept.monthly_usd,
                inputs.replan(constraints=constraints),
            )
        )
    return rows


def price_rows(inputs: PlanningInputs, purchase: Purchase) -> list[tuple[Any, ...]]:
    """Prices 10% lower and higher. Kept: the commitment keeps the rate it was signed at, the
    on-demand and spot hours pay the new prices; re-planned: every price (upfronts included)
    moved before buying."""
    rows = []
    fleet = inputs.instances.astype(np.float64)
    for factor in PRICE_FACTORS:
        spot = purchase.prices.spot
        prices = replace(
            purchase.prices,
            on_demand=purchase.prices.on_demand * factor,
            spot=spot * factor if spot is not None else None,
        )
        kept = fleet_cost(fleet, prices, purchase.plan)
        moved = replace(
            inputs.offer,
            points=tuple(
                replace(p, usd_per_hour=p.usd_per_hour * factor, upfront_usd=p.upfront_usd * factor)
                for p in inputs.offer.points
            ),
        )
        rows.append(
            _row(
                "price",
                f"prices {_percent(factor)}",
                factor,
                kept.monthly_usd,
                inputs.replan(offer=moved),
            )
        )
    return rows


def sensitivity_table(
    inputs: PlanningInputs,
    purchase: Purchase,
    stored_load_cases: Sequence[Mapping[str, Any]] | None,
) -> pd.DataFrame:
    """Every case: the columns of :data:`planner.report.model.SENSITIVITY_COLUMNS`."""
    rows = [
        *load_rows(inputs, purchase, stored_load_cases),
        *interruption_rows(inputs, purchase),
        *price_rows(inputs, purchase),
    ]
    return pd.DataFrame(rows, columns=list(SENSITIVITY_COLUMNS))
