"""Per-token API spend in a finance report (issue 34): the API pools a stored recommendation's
``api`` block names (``api.pools``: the whole demand when the API won, ``choice: "api"``; the
overflowed share beside a self-hosted base fleet, ``choice: "overflow"``), projected month by
month like the instances.

A pool's tokens are those of an average 730-hour month of the demand; a calendar month of a
scenario carries them times that month's requests over an average month's (the scenario's hourly
requests tiled over the month's real hours, as the instances' load is), billed at the pool's
input and output prices per million tokens. Pure: the stored result in, frames out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

import numpy as np
import pandas as pd

from planner.errors import PlannerError
from planner.report.build import Stored
from planner.report.model import (
    API_OPTION,
    API_PROJECTION_COLUMNS,
    PROJECTION_COLUMNS,
    SHOWBACK_COLUMNS,
)
from planner.report.projection import HourlyLoad
from pricing.costs import HOURS_PER_MONTH

TOKENS_PER_PRICE_UNIT = 1e6  # API prices are USD per million tokens
CHOICES = ("api", "self-hosted", "overflow")


@dataclass(frozen=True)
class ApiPool:
    """One per-token API pool of the plan: the offer, its prices and their source, and the
    tokens of an average (730-hour) month of the share of the demand it serves."""

    provider: str
    offer: str
    model: str
    input_usd_per_mtok: float
    output_usd_per_mtok: float
    source_url: str
    source_date: str
    requests_per_month: float
    input_tokens_per_month: float
    output_tokens_per_month: float

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.offer}"

    def usd(self, input_tokens: float, output_tokens: float) -> float:
        """What ``input_tokens`` and ``output_tokens`` cost at this offer's prices."""
        return (
            input_tokens * self.input_usd_per_mtok + output_tokens * self.output_usd_per_mtok
        ) / TOKENS_PER_PRICE_UNIT

    @property
    def monthly_usd(self) -> float:
        """An average month's cost (730 hours at the expected load)."""
        return self.usd(self.input_tokens_per_month, self.output_tokens_per_month)

    @property
    def tokens_per_month(self) -> float:
        return self.input_tokens_per_month + self.output_tokens_per_month

    def prices_words(self) -> str:
        return (
            f"{self.offer} on {self.provider}: ${self.input_usd_per_mtok:,.4g} per million "
            f"input tokens, ${self.output_usd_per_mtok:,.4g} per million output tokens"
        )


@dataclass(frozen=True)
class ApiPlan:
    """The API part of a stored recommendation: the choice and the API pools it buys."""

    choice: str  # api | self-hosted | overflow
    pools: list[ApiPool]
    self_hosted_monthly_usd: float | None
    break_even: dict[str, Any] | None
    month_tokens: float | None  # input + output tokens of an average month of the demand

    @property
    def replaces_fleet(self) -> bool:
        """Whether the API serves the whole demand (the self-hosted fleet is not the plan)."""
        return self.choice == "api"

    @property
    def monthly_usd(self) -> float:
        return sum(p.monthly_usd for p in self.pools)

    @property
    def tokens_per_month(self) -> float:
        return sum(p.tokens_per_month for p in self.pools)

    @property
    def token_share(self) -> float:
        """The API pools' share of the demand's tokens (1 when the whole demand is unknown)."""
        if not self.month_tokens or self.month_tokens <= 0:
            return 1.0
        return min(1.0, max(0.0, self.tokens_per_month / self.month_tokens))


def _number(pool: Mapping[str, Any], key: str, where: str) -> float:
    value = pool.get(key)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise PlannerError(
            f"{where}: {key} is {value!r}; expected a number of at least 0 (run the "
            "recommendation again to report on it)"
        )
    return number


def api_plan(recommendation_id: int, data: Mapping[str, Any]) -> ApiPlan | None:
    """The API pools of a stored recommendation's result ``data``; None when it has no ``api``
    block or its ``api.pools`` is empty (self-hosting won: the report is the fleet's alone)."""
    block = data.get("api")
    if not isinstance(block, Mapping):
        return None
    # an overflow plan lists its self-hosted base fleet (kind "instance") beside the API pool:
    # the instances are the report's own rows, only the API pools are added here
    listed = [
        p
        for p in block.get("pools") or []
        if not isinstance(p, Mapping) or p.get("kind", "api") == "api"
    ]
    if not listed:
        return None
    choice = str(block.get("choice") or "")
    if choice not in CHOICES:
        raise PlannerError(
            f"recommendation #{recommendation_id}: its API choice {choice!r} is unknown; "
            f"expected one of {', '.join(CHOICES)}"
        )
    pools = []
    for index, pool in enumerate(listed):
        where = f"recommendation #{recommendation_id}, API pool {index + 1}"
        if not isinstance(pool, Mapping):
            raise PlannerError(f"{where}: expected an object with the offer and its tokens")
        pools.append(
            ApiPool(
                provider=str(pool.get("provider") or "api"),
                offer=str(pool.get("offer") or pool.get("model") or "unknown offer"),
                model=str(pool.get("model") or ""),
                input_usd_per_mtok=_number(pool, "input_usd_per_mtok", where),
                output_usd_per_mtok=_number(pool, "output_usd_per_mtok", where),
                source_url=str(pool.get("source_url") or "unstated"),
                source_date=str(pool.get("source_date") or "undated"),
                requests_per_month=_number(pool, "requests_per_month", where),
                input_tokens_per_month=_number(pool, "input_tokens_per_month", where),
                output_tokens_per_month=_number(pool, "output_tokens_per_month", where),
            )
        )
    month = block.get("month") or {}
    tokens = float(month.get("input_tokens") or 0.0) + float(month.get("output_tokens") or 0.0)
    hosted = block.get("self_hosted_monthly_usd")
    return ApiPlan(
        choice=choice,
        pools=pools,
        self_hosted_monthly_usd=float(hosted) if hosted is not None else None,
        break_even=block.get("break_even"),
        month_tokens=tokens or None,
    )


def project_api(
    loads: Mapping[str, HourlyLoad],
    pools: Sequence[ApiPool],
    months: Sequence[date],
    mean_requests_per_hour: float,
) -> pd.DataFrame:
    """One row per (month, scenario, API pool): the columns of
    :data:`~planner.report.model.PROJECTION_COLUMNS` (provider: the API's; instance_type: the
    offer; purchase_option :data:`~planner.report.model.API_OPTION`; no instance-hours, no
    upfront: cash = amortized) then :data:`~planner.report.model.API_PROJECTION_COLUMNS`. The
    month's tokens are the pool's average month times the month's requests over
    ``mean_requests_per_hour`` x 730."""
    average = mean_requests_per_hour * HOURS_PER_MONTH
    rows: list[tuple[object, ...]] = []
    for month in months:
        for scenario, load in loads.items():
            requests = float(load.in_month(month).requests.sum())
            factor = requests / average if average > 0 else 0.0
            for pool in pools:
                tokens_in = pool.input_tokens_per_month * factor
                tokens_out = pool.output_tokens_per_month * factor
                usd = pool.usd(tokens_in, tokens_out)
                rows.append(
                    (month, scenario, pool.provider, "", pool.offer, API_OPTION, 0.0, usd, usd,
                     0.0, (tokens_in + tokens_out) / TOKENS_PER_PRICE_UNIT, tokens_in,
                     tokens_out, pool.input_usd_per_mtok, pool.output_usd_per_mtok)
                )  # fmt: skip
    return pd.DataFrame(rows, columns=[*PROJECTION_COLUMNS, *API_PROJECTION_COLUMNS])


def with_api_rows(instances: pd.DataFrame, api: pd.DataFrame, token_share: float) -> pd.DataFrame:
    """The instances' projection with the API's rows after it. The instances' tokens are the
    whole demand's: the share the API pools carry is taken off them (an overflow plan's base
    fleet serves the rest), so the tokens add up to the demand's once."""
    base = instances.copy()
    base["tokens_millions"] = base["tokens_millions"] * (1.0 - token_share)
    for column in API_PROJECTION_COLUMNS:
        base[column] = math.nan
    return pd.concat([base, api], ignore_index=True) if not base.empty else api


def api_showback(
    plan: ApiPlan,
    fleet_row: tuple[object, ...] | None,
    month_requests: float,
) -> pd.DataFrame:
    """The showback of a plan with API pools (columns :data:`SHOWBACK_COLUMNS`): the
    self-hosted base fleet's row (``fleet_row``: an overflow plan's) and one row per API pool,
    its $ a month and $ per million tokens at its prices."""
    rows: list[tuple[object, ...]] = [fleet_row] if fleet_row is not None else []
    for pool in plan.pools:
        tokens = pool.tokens_per_month / TOKENS_PER_PRICE_UNIT
        monthly = pool.monthly_usd
        rows.append(
            (pool.model or pool.offer, f"API {pool.label}", pool.provider, "", pool.offer, "all",
             pool.requests_per_month / month_requests if month_requests > 0 else None,
             f"per token: {pool.prices_words()}", monthly, None, tokens,
             monthly / tokens if tokens > 0 else None)
        )  # fmt: skip
    frame = pd.DataFrame(rows, columns=list(SHOWBACK_COLUMNS))
    total = float(frame["monthly_usd"].sum())
    frame["share_of_cost"] = frame["monthly_usd"] / total if total > 0 else None
    return frame


def base_fleet(stored: Stored) -> Stored:
    """An overflow plan's recommendation with its self-hosted **base fleet** in place of the
    winner's whole fleet: the ``api.pools`` entry of kind ``instance`` (its instances all month,
    bought as ``api.overflow.purchase`` says) is what the plan buys, the winner is what
    self-hosting everything would take. ``stored`` itself when its plan lists no base fleet.

    The base fleet's all-on-demand cost is not stored: it is left at 0 for the report to price
    (:mod:`planner.report.api_report`)."""
    block = stored.data.get("api") or {}
    base = next(
        (
            p
            for p in block.get("pools") or []
            if isinstance(p, Mapping) and p.get("kind") == "instance"
        ),
        None,
    )
    if base is None or not stored.winner:
        return stored
    where = f"recommendation #{stored.id}, the overflow plan's base fleet"
    count = _number(base, "instances", where)
    replicas = float(base.get("replicas") or count)
    hours = stored.requests.size
    chosen = (block.get("overflow") or {}).get("purchase") or {
        "option": str(base.get("purchase") or "on-demand"),
        "commitment_level": 0.0,
        "monthly_usd": _number(base, "monthly_usd", where),
    }
    same = ("provider", "region", "instance_type", "gpu", "tp")
    winner = {
        **stored.winner,
        **{key: base[key] for key in same if base.get(key) is not None},
        "monthly_usd": chosen.get("monthly_usd", base.get("monthly_usd")),
        "peak_instances": count,
    }
    plan = {**stored.plan, "chosen": chosen, "sensitivity": None, "all_on_demand_monthly_usd": 0.0}
    return replace(
        stored,
        winner=winner,
        plan=plan,
        instances=np.full(hours, count),
        replicas=np.full(hours, replicas),
    )
