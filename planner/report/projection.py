"""The month-by-month arithmetic of a finance report: an hourly load pattern tiled over calendar
months, priced with the cost model of ``pricing.costs`` as the plan buys it, split by purchase
option, in a cash view (an upfront paid in the month its term starts) and an amortized view
(the upfront spread evenly over the term's months).

Everything here is pure: loads, prices and the plan come in, pandas frames with the columns of
:mod:`planner.report.model` come out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pandas as pd

from planner.errors import UsageError
from planner.report.model import COMMITMENT_COLUMNS, PROJECTION_COLUMNS
from pricing.costs import HOURS_PER_YEAR, FleetCost, FloatArray, Plan, Prices, fleet_cost
from pricing.model import PurchaseOption

HOUR_S = 3600
MONTHS_PER_YEAR = 12
ON_DEMAND = PurchaseOption.ON_DEMAND.value
SPOT = PurchaseOption.SPOT.value


def add_months(month: date, count: int) -> date:
    """The first of the month ``count`` months after ``month``'s."""
    index = month.year * 12 + month.month - 1 + count
    return date(index // 12, index % 12 + 1, 1)


def month_starts(first_month: date, months: int) -> list[date]:
    """``months`` consecutive months from ``first_month``'s, as their first days."""
    return [add_months(first_month, i) for i in range(months)]


def _utc_midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def month_hours(month: date) -> int:
    """The month's real hours in UTC: 672 in a February of 28 days, 744 in a 31-day month."""
    start = _utc_midnight(add_months(month, 0))
    end = _utc_midnight(add_months(month, 1))
    return int((end - start) / timedelta(hours=1))


def tile(values: FloatArray, start: datetime, month: date) -> FloatArray:
    """The hourly ``values`` (hour 0 beginning at ``start``) repeated back to back, read at
    every hour of ``month`` (UTC): hour ``t`` takes the value of ``(t - start) mod len``, so a
    week-long pattern keeps its weekdays and hours of the day."""
    if values.ndim != 1 or values.size == 0:
        raise UsageError("a load pattern needs at least one hour")
    first = _utc_midnight(add_months(month, 0))
    offset = round((first - start.astimezone(UTC)) / timedelta(hours=1))
    index = (offset + np.arange(month_hours(month))) % values.size
    return values[index]


@dataclass(frozen=True)
class HourlyLoad:
    """One scenario's load pattern: requests and instances each hour from ``start`` (UTC)."""

    start: datetime
    requests: FloatArray
    instances: FloatArray

    def __post_init__(self) -> None:
        if self.requests.shape != self.instances.shape or self.instances.ndim != 1:
            raise UsageError("a load pattern needs as many hours of requests as of instances")

    def in_month(self, month: date) -> HourlyLoad:
        """This pattern over ``month``'s hours."""
        return HourlyLoad(
            _utc_midnight(month),
            tile(self.requests, self.start, month),
            tile(self.instances, self.start, month),
        )


@dataclass(frozen=True)
class Purchase:
    """How the fleet is bought: ``plan`` at ``prices`` (as ``pricing.costs.fleet_cost`` bills
    it), with what a finance team signs: the commitment ``option`` of ``term_years`` and its
    ``upfront_usd`` for the whole commitment, paid when a term starts (part of the commitment's
    effective rate, which ``fleet_cost`` bills hour by hour)."""

    provider: str
    region: str
    instance_type: str
    option: str  # on-demand, or the commitment (reserved-1y, committed-3y, savings-plan-1y ...)
    plan: Plan
    prices: Prices
    term_years: int = 0  # 0: no commitment
    upfront_usd: float = 0.0

    def __post_init__(self) -> None:
        if self.committed and self.term_years < 1:
            raise UsageError(f"{self.option}: a commitment needs a term of 1 or 3 years")
        if self.upfront_usd < 0:
            raise UsageError("an upfront payment cannot be negative")

    @property
    def is_savings_plan(self) -> bool:
        return self.plan.savings_plan_usd_per_hour > 0

    @property
    def committed(self) -> bool:
        return self.plan.reserved > 0 or self.plan.savings_plan_usd_per_hour > 0

    @property
    def committed_instances(self) -> float:
        """Instances the commitment covers each hour (a savings plan: its $/h at its rate)."""
        if self.is_savings_plan:
            rate = self.prices.savings_plan
            return self.plan.savings_plan_usd_per_hour / rate if rate else 0.0
        return float(self.plan.reserved)

    @property
    def effective_hourly_usd(self) -> float:
        """What the commitment costs an hour with its upfront amortized (as billed by
        ``fleet_cost``)."""
        if self.is_savings_plan:
            return self.plan.savings_plan_usd_per_hour
        return self.plan.reserved * (self.prices.reserved or 0.0)

    @property
    def recurring_hourly_usd(self) -> float:
        """What the commitment bills each hour besides its upfront."""
        if not self.committed:
            return 0.0
        upfront_share = self.upfront_usd / (self.term_years * HOURS_PER_YEAR)
        return max(0.0, self.effective_hourly_usd - upfront_share)

    @property
    def term_months(self) -> int:
        return self.term_years * MONTHS_PER_YEAR

    def term_starts(self, month_index: int) -> bool:
        """Whether a term starts in the projection's month ``month_index`` (0: the first
        month; a commitment is renewed on the same terms when its term ends)."""
        return self.committed and month_index % self.term_months == 0

    def cost(self, instances: FloatArray) -> FleetCost:
        return fleet_cost(instances, self.prices, self.plan)


@dataclass(frozen=True)
class OptionCost:
    """One purchase option's share of a month's cost."""

    option: str
    instance_hours: float  # billed (a commitment: every hour it covers)
    served_share: float  # share of the month's demand instance-hours it serves
    cash_usd: float
    amortized_usd: float
    upfront_usd: float


def month_costs(cost: FleetCost, purchase: Purchase, month_index: int) -> list[OptionCost]:
    """``cost`` (a month of ``purchase.cost``) split by purchase option. On-demand includes
    the hours standing in for interrupted spot; the commitment bills its recurring rate every
    hour, its upfront in a term's first month (cash) or a term-month's share of it
    (amortized)."""
    demand = cost.demand_instance_hours
    hours = cost.hours

    def share(instance_hours: float) -> float:
        return instance_hours / demand if demand else 0.0

    rows: list[OptionCost] = []
    if purchase.committed:
        recurring = purchase.recurring_hourly_usd * hours
        upfront = purchase.upfront_usd if purchase.term_starts(month_index) else 0.0
        if purchase.is_savings_plan:
            rate = purchase.prices.savings_plan or 1.0
            used = cost.savings_plan_used_usd / rate
        else:
            used = cost.reserved_used_hours
        rows.append(
            OptionCost(
                purchase.option,
                purchase.committed_instances * hours,
                share(used),
                recurring + upfront,
                recurring + purchase.upfront_usd / purchase.term_months,
                upfront,
            )
        )
    on_demand_usd = cost.on_demand_usd + cost.fallback_usd
    on_demand_hours = on_demand_usd / purchase.prices.on_demand
    rows.append(
        OptionCost(ON_DEMAND, on_demand_hours, share(on_demand_hours), on_demand_usd,
                   on_demand_usd, 0.0)
    )  # fmt: skip
    if purchase.plan.spot_share > 0 and purchase.prices.spot:
        spot_hours = cost.spot_usd / purchase.prices.spot
        rows.append(
            OptionCost(SPOT, spot_hours, share(spot_hours), cost.spot_usd, cost.spot_usd, 0.0)
        )
    return rows


def project(
    loads: Mapping[str, HourlyLoad],
    purchase: Purchase,
    months: Sequence[date],
    tokens_per_request: float,
) -> pd.DataFrame:
    """One row per (month, scenario, purchase option): the columns of
    :data:`planner.report.model.PROJECTION_COLUMNS`. Tokens are the month's requests times
    ``tokens_per_request``, shared between the options by the instance-hours each serves."""
    rows: list[tuple[object, ...]] = []
    for index, month in enumerate(months):
        for scenario, load in loads.items():
            monthly = load.in_month(month)
            tokens_millions = float(monthly.requests.sum()) * tokens_per_request / 1e6
            for part in month_costs(purchase.cost(monthly.instances), purchase, index):
                rows.append(
                    (month, scenario, purchase.provider, purchase.region, purchase.instance_type,
                     part.option, part.instance_hours, part.cash_usd, part.amortized_usd,
                     part.upfront_usd, tokens_millions * part.served_share)
                )  # fmt: skip
    return pd.DataFrame(rows, columns=list(PROJECTION_COLUMNS))


def commitment_schedule(
    expected: HourlyLoad,
    purchase: Purchase,
    months: Sequence[date],
    break_even: float | None,
) -> pd.DataFrame:
    """What to buy: one row per commitment term that starts within ``months`` (a term that
    ends inside them is renewed), with its use in the ``expected`` load over the projection's
    months it covers: the columns of :data:`planner.report.model.COMMITMENT_COLUMNS`."""
    rows: list[tuple[object, ...]] = []
    if purchase.committed:
        for first in range(0, len(months), purchase.term_months):
            covered = months[first : first + purchase.term_months]
            booked = used = demand = unused_usd = 0.0
            for month in covered:
                cost = purchase.cost(expected.in_month(month).instances)
                month_booked = purchase.committed_instances * cost.hours
                if purchase.is_savings_plan:
                    month_used = cost.savings_plan_used_usd / (purchase.prices.savings_plan or 1.0)
                else:
                    month_used = cost.reserved_used_hours
                idle = 1.0 - month_used / month_booked if month_booked else 0.0
                amortized = (
                    purchase.recurring_hourly_usd * cost.hours
                    + purchase.upfront_usd / purchase.term_months
                )
                booked += month_booked
                used += month_used
                demand += cost.demand_instance_hours
                unused_usd += idle * amortized
            start = months[first]
            rows.append(
                (
                    purchase.option,
                    purchase.provider,
                    purchase.region,
                    purchase.instance_type,
                    purchase.term_years,
                    start,
                    add_months(start, purchase.term_months),
                    None if purchase.is_savings_plan else purchase.plan.reserved,
                    purchase.recurring_hourly_usd,
                    purchase.upfront_usd,
                    break_even,
                    used / booked if booked else None,
                    used / demand if demand else None,
                    unused_usd / len(covered),
                )
            )
    return pd.DataFrame(rows, columns=list(COMMITMENT_COLUMNS))


def scaled_fleet(
    replicas: FloatArray, ratio: FloatArray, min_replicas: int, replicas_per_instance: int
) -> FloatArray:
    """Instances each hour for a load ``ratio`` times the planned one: the planned replicas
    scaled in proportion and rounded up (never below ``min_replicas``), packed
    ``replicas_per_instance`` to an instance."""
    if replicas_per_instance < 1:
        raise UsageError("an instance holds at least one replica")
    need = np.maximum(np.ceil(replicas * ratio - 1e-9), min_replicas)
    return np.ceil(need / replicas_per_instance - 1e-9).astype(np.float64)


def band_ratio(planned: FloatArray, band: FloatArray, *, above: bool) -> FloatArray:
    """Each hour's band over the planned requests, kept on its side of 1 (``above``: at least
    1, else at most 1) so that low <= expected <= high; 1 in hours with no planned requests."""
    ratio = np.divide(band, planned, out=np.ones_like(planned), where=planned > 0)
    ratio = np.maximum(ratio, 1.0) if above else np.clip(ratio, 0.0, 1.0)
    return np.where(np.isfinite(ratio), ratio, 1.0)
