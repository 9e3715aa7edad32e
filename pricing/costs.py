"""The purchase-option cost model: what a fleet costs over a horizon, bought one way or another.

Input: the instances needed in each hour (a numpy array, one value per hour) and the prices of
one instance type by purchase option (effective $/instance-hour, upfronts amortized). A
:class:`Plan` says how the fleet is bought:

* a committed base of ``reserved`` instances (reserved instances, GCP committed use): paid every
  hour of the horizon, used or not; they serve the first ``reserved`` instances of demand;
* a savings-plan commitment of ``savings_plan_usd_per_hour`` dollars an hour: it buys
  instance-hours at the plan's rate up to ``commitment / rate`` instances in each hour, and the
  unused part of the commitment is still paid;
* demand above the committed base runs on demand, except ``spot_share`` of it on spot; a
  ``fallback`` share of the spot instance-hours (``interruption_rate x replacement_hours``
  unless given) runs on on-demand while interrupted spot capacity is replaced.

In hour ``t`` with demand ``d_t``, reserved base ``R`` and plan capacity ``S = C / p_sp``::

    r_t    = min(d_t, R)                   s_t = min(d_t - r_t, S)
    a_t    = d_t - r_t - s_t               (above the committed base)
    spot_t = share * a_t                   od_t = a_t - spot_t
    cost   = R p_res T + C T + p_od sum(od_t) + sum(spot_t) ((1 - f) p_spot + f p_od)

A commitment pays off where it would be busy for more than its break-even utilization,
``p_commit / p_od`` of the hours: the cost is piecewise linear in ``R`` with slope
``p_res T - p_od (hours with d_t > R)``, so the best ``R`` is the largest level that the demand
reaches in more than that share of the hours (the base-load quantile). :func:`optimize_reserved`
scans every level 0..max(d) and keeps the cheapest (the smallest on a tie).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.errors import UsageError
from pricing.model import PricePoint, PurchaseOption

HOURS_PER_YEAR = 8760  # 365 x 24: how AWS and Azure amortize a term
HOURS_PER_MONTH = 730.0  # 8760 / 12, the month the clouds' calculators use

FloatArray = npt.NDArray[np.float64]

#: The demand profile behind the seed articles' comparison: instances needed in each hour of a
#: day. One instance overnight and late evening (a fixed fleet of 4 is 25% busy then), a ramp
#: through the morning, a peak of 6 over lunch, 3 in the evening. Mean 2.46 instances.
SEED_DAY: tuple[int, ...] = (1,) * 8 + (2, 2, 4, 4, 6, 6, 6, 4, 4, 3, 3, 3) + (1,) * 4


def seed_profile(days: int = 30) -> FloatArray:
    """``days`` days of :data:`SEED_DAY`, hour by hour."""
    return np.tile(np.asarray(SEED_DAY, dtype=np.float64), days)


def amortized_hourly(
    upfront_usd: float, term_years: int, recurring_usd_per_hour: float = 0.0
) -> float:
    """The effective $/hour of a commitment: its recurring rate plus the upfront spread over
    every hour of the term (8,760 h a year)."""
    if term_years < 1:
        raise UsageError(f"a commitment's term is 1 or 3 years, got {term_years}")
    return recurring_usd_per_hour + upfront_usd / (term_years * HOURS_PER_YEAR)


def break_even_utilization(commit_usd_per_hour: float, on_demand_usd_per_hour: float) -> float:
    """The share of hours a committed instance must be busy to cost no more than on demand:
    ``commit price / on-demand price`` (above 1: the commitment never pays off)."""
    if on_demand_usd_per_hour <= 0:
        raise UsageError("the on-demand price must be positive")
    return commit_usd_per_hour / on_demand_usd_per_hour


def commitment_break_evens(points: Iterable[PricePoint]) -> dict[tuple[str, ...], float]:
    """For every commitment price (reserved, savings plan, committed use) among ``points``, its
    break-even utilization against the on-demand price of the same instance in the same region,
    by price key. Commitments without an on-demand price beside them are left out."""
    points = list(points)
    on_demand = {
        (p.provider, p.region, p.instance_type): p.usd_per_hour
        for p in points
        if p.purchase_option is PurchaseOption.ON_DEMAND
    }
    return {
        p.key(): break_even_utilization(p.usd_per_hour, listed)
        for p in points
        if p.purchase_option.term_years
        and (listed := on_demand.get((p.provider, p.region, p.instance_type))) is not None
    }


@dataclass(frozen=True)
class Prices:
    """Effective $/instance-hour of one instance type by purchase option (upfronts amortized).

    ``reserved`` is any per-instance commitment billed every hour of the term (a reserved
    instance, a GCP committed-use instance); ``reserved_upfront`` is its upfront per instance
    and term (cash at the start, already inside ``reserved``). ``savings_plan`` is the
    $/instance-hour a savings plan charges for this type.
    """

    on_demand: float
    reserved: float | None = None
    reserved_upfront: float = 0.0
    reserved_term_years: int = 1
    savings_plan: float | None = None
    spot: float | None = None

    def __post_init__(self) -> None:
        for name in ("on_demand", "reserved", "savings_plan", "spot"):
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise UsageError(f"price {name} must be a positive number, got {value!r}")
        if self.reserved_upfront < 0:
            raise UsageError("an upfront payment cannot be negative")

    @classmethod
    def from_points(
        cls,
        points: Iterable[PricePoint],
        *,
        commitment: PurchaseOption | None = None,
        savings_plan: PurchaseOption | None = None,
    ) -> Prices:
        """Prices of one instance type in one region from its price points: on-demand and spot
        where present, ``commitment`` (a reserved-* or committed-* option) as the reserved
        price, ``savings_plan`` (savings-plan-1y/3y) as the plan's rate."""
        chosen: dict[PurchaseOption, PricePoint] = {}
        identities = set()
        for point in points:
            identities.add((point.provider, point.region, point.instance_type))
            best = chosen.get(point.purchase_option)
            if best is None or point.usd_per_hour < best.usd_per_hour:
                chosen[point.purchase_option] = point
        if len(identities) > 1:
            raise UsageError(
                "prices of one instance type in one region expected, got "
                + ", ".join("/".join(str(i) for i in ident) for ident in sorted(identities))
            )
        on_demand = chosen.get(PurchaseOption.ON_DEMAND)
        if on_demand is None:
            raise UsageError("no on-demand price among the points: on-demand is the baseline")
        reserved = None
        if commitment is not None:
            if not commitment.term_years or commitment.value.startswith("savings-plan"):
                raise UsageError(f"{commitment.value} is not a per-instance commitment")
            reserved = chosen.get(commitment)
            if reserved is None:
                raise UsageError(f"no {commitment.value} price among the points")
        plan = None
        if savings_plan is not None:
            plan = chosen.get(savings_plan)
            if plan is None:
                raise UsageError(f"no {savings_plan.value} price among the points")
        spot = chosen.get(PurchaseOption.SPOT)
        return cls(
            on_demand=on_demand.usd_per_hour,
            reserved=reserved.usd_per_hour if reserved else None,
            reserved_upfront=reserved.upfront_usd if reserved else 0.0,
            reserved_term_years=commitment.term_years if commitment else 1,
            savings_plan=plan.usd_per_hour if plan else None,
            spot=spot.usd_per_hour if spot else None,
        )


@dataclass(frozen=True)
class Plan:
    """How a fleet is bought; see the module's docstring."""

    reserved: int = 0
    savings_plan_usd_per_hour: float = 0.0
    spot_share: float = 0.0
    interruption_rate: float = 0.0  # spot interruptions per instance-hour
    replacement_hours: float = 0.0  # hours an interrupted instance's work runs on demand
    fallback_fraction: float | None = None  # given directly instead of rate x delay

    def __post_init__(self) -> None:
        if self.reserved < 0 or self.savings_plan_usd_per_hour < 0:
            raise UsageError("commitments cannot be negative")
        if not 0.0 <= self.spot_share <= 1.0:
            raise UsageError(f"spot share must be between 0 and 1, got {self.spot_share}")
        if self.interruption_rate < 0 or self.replacement_hours < 0:
            raise UsageError("interruption rate and replacement delay cannot be negative")
        if self.fallback_fraction is not None and not 0.0 <= self.fallback_fraction <= 1.0:
            raise UsageError(f"fallback fraction must be in [0, 1], got {self.fallback_fraction}")

    @property
    def fallback(self) -> float:
        """Share of spot instance-hours served on demand instead."""
        if self.fallback_fraction is not None:
            return self.fallback_fraction
        return min(1.0, self.interruption_rate * self.replacement_hours)


@dataclass(frozen=True)
class FleetCost:
    """The cost of one plan over the horizon, by purchase option, with its utilization."""

    hours: int
    demand_instance_hours: float
    served_instance_hours: float
    reserved_usd: float
    savings_plan_usd: float
    on_demand_usd: float
    spot_usd: float
    fallback_usd: float  # on-demand hours standing in for interrupted spot
    paid_instance_hours: float  # instance-hours billed (idle reserved hours included)
    reserved_instances: int = 0
    reserved_used_hours: float = 0.0
    savings_plan_used_usd: float = 0.0
    upfront_usd: float = 0.0  # cash paid upfront for the reserved instances (per term)
    amortized_upfront_usd: float = 0.0  # the horizon's share of it (inside reserved_usd)
    label: str = ""

    @property
    def total_usd(self) -> float:
        return (
            self.reserved_usd
            + self.savings_plan_usd
            + self.on_demand_usd
            + self.spot_usd
            + self.fallback_usd
        )

    @property
    def monthly_usd(self) -> float:
        """Total per 730-hour month."""
        return self.total_usd / self.hours * HOURS_PER_MONTH if self.hours else 0.0

    @property
    def unserved_instance_hours(self) -> float:
        return self.demand_instance_hours - self.served_instance_hours

    @property
    def utilization(self) -> float:
        """Served instance-hours over paid instance-hours."""
        return (
            self.served_instance_hours / self.paid_instance_hours
            if self.paid_instance_hours
            else 0.0
        )

    @property
    def reserved_utilization(self) -> float | None:
        booked = self.reserved_instances * self.hours
        return self.reserved_used_hours / booked if booked else None

    @property
    def savings_plan_unused_usd(self) -> float:
        return self.savings_plan_usd - self.savings_plan_used_usd

    @property
    def savings_plan_utilization(self) -> float | None:
        return self.savings_plan_used_usd / self.savings_plan_usd if self.savings_plan_usd else None

    @property
    def usd_per_served_instance_hour(self) -> float:
        return self.total_usd / self.served_instance_hours if self.served_instance_hours else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "hours": self.hours,
            "total_usd": self.total_usd,
            "monthly_usd": self.monthly_usd,
            "reserved_usd": self.reserved_usd,
            "savings_plan_usd": self.savings_plan_usd,
            "on_demand_usd": self.on_demand_usd,
            "spot_usd": self.spot_usd,
            "fallback_usd": self.fallback_usd,
            "upfront_usd": self.upfront_usd,
            "amortized_upfront_usd": self.amortized_upfront_usd,
            "demand_instance_hours": self.demand_instance_hours,
            "served_instance_hours": self.served_instance_hours,
            "unserved_instance_hours": self.unserved_instance_hours,
            "paid_instance_hours": self.paid_instance_hours,
            "utilization": self.utilization,
            "reserved_instances": self.reserved_instances,
            "reserved_utilization": self.reserved_utilization,
            "savings_plan_unused_usd": self.savings_plan_unused_usd,
            "savings_plan_utilization": self.savings_plan_utilization,
        }


def _demand(hourly_instances: npt.ArrayLike) -> FloatArray:
    demand = np.asarray(hourly_instances, dtype=np.float64)
    if demand.ndim != 1 or demand.size == 0:
        raise UsageError("demand must be a non-empty 1-D array: instances needed per hour")
    if not np.all(np.isfinite(demand)) or np.any(demand < 0):
        raise UsageError("demand must be finite and non-negative in every hour")
    return demand


def fleet_cost(
    hourly_instances: npt.ArrayLike, prices: Prices, plan: Plan = Plan(), *, label: str = ""
) -> FleetCost:
    """Cost of serving the demand (every hour fully, scaling above the committed base)."""
    d = _demand(hourly_instances)
    hours = int(d.size)
    if plan.reserved and prices.reserved is None:
        raise UsageError("the plan reserves instances but there is no reserved/committed price")
    if plan.savings_plan_usd_per_hour and prices.savings_plan is None:
        raise UsageError("the plan has a savings-plan commitment but no savings-plan rate")
    if plan.spot_share and prices.spot is None:
        raise UsageError("the plan runs a share on spot but there is no spot price")

    reserved_used = np.minimum(d, plan.reserved)
    rest = d - reserved_used
    if plan.savings_plan_usd_per_hour and prices.savings_plan:
        plan_used = np.minimum(rest, plan.savings_plan_usd_per_hour / prices.savings_plan)
    else:
        plan_used = np.zeros_like(d)
    above = rest - plan_used
    spot = above * plan.spot_share
    on_demand = above - spot
    fallback = spot * plan.fallback
    spot_billed = spot - fallback

    reserved_price = prices.reserved or 0.0
    term_hours = prices.reserved_term_years * HOURS_PER_YEAR
    upfront = plan.reserved * prices.reserved_upfront
    return FleetCost(
        hours=hours,
        demand_instance_hours=float(d.sum()),
        served_instance_hours=float(d.sum()),
        reserved_usd=plan.reserved * reserved_price * hours,
        savings_plan_usd=plan.savings_plan_usd_per_hour * hours,
        on_demand_usd=prices.on_demand * float(on_demand.sum()),
        spot_usd=(prices.spot or 0.0) * float(spot_billed.sum()),
        fallback_usd=prices.on_demand * float(fallback.sum()),
        paid_instance_hours=plan.reserved * hours
        + float(plan_used.sum() + on_demand.sum() + spot.sum()),
        reserved_instances=plan.reserved,
        reserved_used_hours=float(reserved_used.sum()),
        savings_plan_used_usd=float(plan_used.sum()) * (prices.savings_plan or 0.0),
        upfront_usd=upfront,
        amortized_upfront_usd=upfront * min(1.0, hours / term_hours),
        label=label,
    )


def fixed_fleet_cost(
    hourly_instances: npt.ArrayLike, instances: int, usd_per_hour: float, *, label: str = ""
) -> FleetCost:
    """A fixed fleet of ``instances`` bought at ``usd_per_hour`` each, every hour; demand above
    it goes unserved (``unserved_instance_hours``)."""
    d = _demand(hourly_instances)
    if instances < 0 or usd_per_hour <= 0:
        raise UsageError("a fixed fleet needs a non-negative size and a positive price")
    served = np.minimum(d, instances)
    hours = int(d.size)
    return FleetCost(
        hours=hours,
        demand_instance_hours=float(d.sum()),
        served_instance_hours=float(served.sum()),
        reserved_usd=0.0,
        savings_plan_usd=0.0,
        on_demand_usd=instances * usd_per_hour * hours,
        spot_usd=0.0,
        fallback_usd=0.0,
        paid_instance_hours=float(instances * hours),
        label=label,
    )


def utilization_where(
    hourly_instances: npt.ArrayLike, instances: int, mask: npt.ArrayLike
) -> float:
    """Utilization of a fixed fleet of ``instances`` over the hours ``mask`` selects."""
    d = _demand(hourly_instances)
    chosen = np.asarray(mask, dtype=bool)
    if chosen.shape != d.shape or not chosen.any() or instances <= 0:
        raise UsageError("the mask must select some hours of the demand, and the fleet be > 0")
    return float(np.minimum(d[chosen], instances).sum() / (instances * chosen.sum()))


@dataclass(frozen=True)
class CommitmentChoice:
    """The cheapest commitment level found by a scan, with the cost at every level."""

    level: float  # instances (reserved) or $/hour (savings plan)
    cost: FleetCost
    levels: tuple[float, ...]
    totals: tuple[float, ...]
    break_even: float  # commitment price / on-demand price
    covered_share: float  # share of hours in which demand reaches the chosen base

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "break_even_utilization": self.break_even,
            "covered_share_of_hours": self.covered_share,
            "cost": self.cost.to_dict(),
            "scan": [
                {"level": lv, "total_usd": t}
                for lv, t in zip(self.levels, self.totals, strict=True)
            ],
        }


def _cheapest(totals: Sequence[float]) -> int:
    best = min(totals)
    tolerance = 1e-9 * max(1.0, abs(best))
    return next(i for i, t in enumerate(totals) if t <= best + tolerance)


def _scan(
    levels: Sequence[float], cost_at: Callable[[float], FleetCost]
) -> tuple[int, list[FleetCost]]:
    costs = [cost_at(level) for level in levels]
    return _cheapest([c.total_usd for c in costs]), costs


def optimize_reserved(
    hourly_instances: npt.ArrayLike, prices: Prices, plan: Plan = Plan()
) -> CommitmentChoice:
    """The number of reserved (committed) instances that minimizes the total cost, scanning
    every level from 0 to the peak; the rest of ``plan`` (spot share, ...) applies above it."""
    d = _demand(hourly_instances)
    if prices.reserved is None:
        raise UsageError("no reserved/committed price to optimize")
    levels = list(range(math.ceil(float(d.max())) + 1))

    def cost_at(level: float) -> FleetCost:
        return fleet_cost(d, prices, replace(plan, reserved=int(level)))

    best, costs = _scan(levels, cost_at)
    return CommitmentChoice(
        level=levels[best],
        cost=costs[best],
        levels=tuple(float(lv) for lv in levels),
        totals=tuple(c.total_usd for c in costs),
        break_even=break_even_utilization(prices.reserved, prices.on_demand),
        covered_share=float(np.mean(d >= levels[best])) if levels[best] else 1.0,
    )


def optimize_savings_plan(
    hourly_instances: npt.ArrayLike, prices: Prices, plan: Plan = Plan()
) -> CommitmentChoice:
    """The savings-plan commitment ($/hour) that minimizes the total cost. The cost is
    piecewise linear in the commitment with corners where it buys a whole number of
    instances, so the scan is over ``k x rate`` for k = 0..peak."""
    d = _demand(hourly_instances)
    if prices.savings_plan is None:
        raise UsageError("no savings-plan rate to optimize")
    rate = prices.savings_plan
    counts = list(range(math.ceil(float(d.max())) + 1))

    def cost_at(count: float) -> FleetCost:
        return fleet_cost(d, prices, replace(plan, savings_plan_usd_per_hour=count * rate))

    best, costs = _scan(counts, cost_at)
    return CommitmentChoice(
        level=counts[best] * rate,
        cost=costs[best],
        levels=tuple(c * rate for c in counts),
        totals=tuple(c.total_usd for c in costs),
        break_even=break_even_utilization(rate, prices.on_demand),
        covered_share=float(np.mean(d >= counts[best])) if counts[best] else 1.0,
    )
