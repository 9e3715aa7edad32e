"""The report's content: every figure of every format, computed once (by
:func:`planner.report.build.build`, which ``planner.usecases.report.build_report`` calls) from a
stored recommendation (its plan, hourly fleet and forecast), the price sheets and the
calibration.

The writers (``excel``, ``pdf``, ``focus``) lay a :class:`Report` out and compute nothing but
totals they can show as formulas. Money is in the report's currency (USD), unrounded: writers
round for display only, so totals agree to the cent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Any

import pandas as pd

SCENARIOS = ("low", "expected", "high")

# Columns of each table, in order (writers may rely on them).
PROJECTION_COLUMNS = (
    "month",  # datetime.date: the first day of the month
    "scenario",  # low | expected | high
    "provider",
    "region",
    "instance_type",
    "purchase_option",  # on-demand | spot | reserved-1y | committed-3y | savings-plan-1y ...
    "instance_hours",  # instance-hours used (billed, for commitments: every hour of the month)
    "cash_usd",  # what is paid in the month: usage, plus an upfront in the month it is paid
    "amortized_usd",  # usage plus the month's share of upfronts spread over the term
    "upfront_usd",  # upfront paid in the month (0 but in a commitment's first month)
    "tokens_millions",  # tokens served in the month (input + output), for $ per million tokens
)
# A per-token API pool's projection rows (planner.report.api): provider the API's, region "",
# instance_type the offer, purchase_option API_OPTION, no instance-hours; they carry these
# columns too (NaN on instance rows), tokens in tokens and prices in $ per million tokens.
API_OPTION = "per-token API"
API_PROJECTION_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "input_usd_per_mtok",
    "output_usd_per_mtok",
)
COMMITMENT_COLUMNS = (
    "purchase_option",
    "provider",
    "region",
    "instance_type",
    "term_years",
    "start",  # datetime.date
    "end",  # datetime.date (exclusive)
    "instances",  # per-instance commitments; savings plans: None
    "hourly_commitment_usd",  # $ per hour committed (instances x rate, or the plan's $/h)
    "upfront_usd",  # paid at the start
    "break_even_utilization",  # commitment rate / on-demand rate
    "expected_utilization",  # share of committed hours (or $) used in the expected scenario
    "coverage",  # share of the fleet's instance-hours the commitment covers
    "unused_usd_per_month",  # committed $ a month that buys nothing (expected scenario)
)
SENSITIVITY_COLUMNS = (
    "kind",  # load | spot_interruptions | price
    "case",  # e.g. "load -20%", "spot interruptions x2", "prices +10%"
    "factor",  # the multiplier applied
    "kept_monthly_usd",  # the plan kept as bought
    "replanned_monthly_usd",  # bought again for the new case
    "replanned_purchase",  # what the re-plan buys
)
ASSUMPTION_COLUMNS = ("item", "value", "source")
ACTUAL_COLUMNS = (
    "month",  # datetime.date, first of the month
    "provider",
    "currency",
    "actual_usd",
    "planned_usd",  # expected scenario, cash view
    "low_usd",
    "high_usd",
    "variance_usd",  # actual - planned
    "variance_pct",  # (actual - planned) / planned
)
# A fleet of pools' showback (planner.report.fleet): one row per pool.
SHOWBACK_COLUMNS = (
    "model",
    "pool",
    "provider",
    "region",
    "instance_type",
    "input_tokens",  # the input sizes the pool serves, in words ("0 to 1,023", "all")
    "share_of_requests",  # of the whole fleet's requests
    "purchase",  # how the pool is bought, in words
    "monthly_usd",  # an average month (730 h) at the prices in force, as bought
    "share_of_cost",  # of the fleet's monthly cost
    "tokens_millions_per_month",  # input + output tokens of an average month, millions
    "usd_per_million_tokens",  # monthly_usd / tokens_millions_per_month
)
SHOWBACK_BY_MODEL_COLUMNS = (
    "model",
    "pools",  # how many
    "share_of_requests",
    "monthly_usd",
    "share_of_cost",
    "tokens_millions_per_month",
    "usd_per_million_tokens",
)


@dataclass(frozen=True)
class Report:
    """Everything a finance report shows. Tables are pandas frames with the columns above."""

    recommendation_id: int
    title: str
    built_at: datetime  # UTC
    planner_version: str
    currency: str
    # Headline figures (plain numbers; None when unknown):
    # monthly_usd, on_demand_monthly_usd, savings_vs_on_demand_usd, savings_vs_on_demand_pct,
    # current_fleet_monthly_usd, savings_vs_current_usd, savings_vs_current_pct,
    # usd_per_million_tokens, slo_attainment, p99_ttft_ms, p99_tpot_ms, p99_e2e_ms,
    # target_ttft_ms, target_tpot_ms, target_e2e_ms, fleet (text), purchase (text),
    # peak_instances, mean_instances, first_month (date), months (int)
    summary: dict[str, Any]
    key_assumptions: list[str]  # plain-words sentences for the executive summary
    projection: pd.DataFrame
    commitments: pd.DataFrame
    sensitivity: pd.DataFrame
    assumptions: pd.DataFrame
    actuals: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    # a fleet of pools: $ a month and $ per million tokens per pool (SHOWBACK_COLUMNS); the
    # projection and commitments then also carry ``model`` and ``pool`` columns
    showback: pd.DataFrame | None = None

    def with_actuals(self, actuals: pd.DataFrame) -> Report:
        return replace(self, actuals=actuals)

    def monthly_totals(self, scenario: str = "expected", view: str = "cash") -> pd.Series:
        """Total $ per month of one scenario, ``view`` cash or amortized."""
        rows = self.projection[self.projection["scenario"] == scenario]
        column = "cash_usd" if view == "cash" else "amortized_usd"
        return rows.groupby("month")[column].sum()


def first_of_next_month(moment: datetime | date) -> date:
    year, month = moment.year + (moment.month == 12), moment.month % 12 + 1
    return date(year, month, 1)


def showback_by_model(showback: pd.DataFrame) -> pd.DataFrame:
    """The showback's pools added up by model (columns :data:`SHOWBACK_BY_MODEL_COLUMNS`), in
    the order the models first appear: $ per million tokens is the model's $ over its tokens."""
    grouped = showback.groupby("model", sort=False)
    frame = grouped.agg(
        pools=("pool", "count"),
        share_of_requests=("share_of_requests", "sum"),
        monthly_usd=("monthly_usd", "sum"),
        share_of_cost=("share_of_cost", "sum"),
        tokens_millions_per_month=("tokens_millions_per_month", "sum"),
    ).reset_index()
    tokens = frame["tokens_millions_per_month"]
    frame["usd_per_million_tokens"] = (frame["monthly_usd"] / tokens).where(tokens > 0)
    return frame[list(SHOWBACK_BY_MODEL_COLUMNS)]
