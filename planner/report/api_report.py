"""The finance report of a stored recommendation whose plan buys per-token API traffic (its
``api.pools``, :mod:`planner.report.api`): :func:`build_with_api` is
:func:`planner.report.build.build` for every recommendation.

* ``choice: "api"``: the API serves the whole demand, so the self-hosted fleet the search
  verified is *not* the plan: the projection is the API pools' rows alone and every total is
  the API's cost (the self-hosted alternative and the break-even are stated, not projected).
* ``choice: "overflow"`` (or any other choice with API pools): the self-hosted fleet's report
  as :func:`~planner.report.build.build` makes it, plus the API pools' rows; the totals are both.
* no API pool (self-hosting won, or no ``api`` block): :func:`~planner.report.build.build`
  unchanged.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
import pandas as pd

from planner import __version__
from planner.recommend.plan import list_price_cost
from planner.report.api import (
    TOKENS_PER_PRICE_UNIT,
    ApiPlan,
    api_plan,
    api_showback,
    project_api,
    with_api_rows,
)
from planner.report.build import (
    NOT_INCLUDED,
    ReportInputs,
    Stored,
    _demand_words,
    _load_sentence,
    _offer,
    _scenarios,
    build,
    check_options,
)
from planner.report.model import (
    ASSUMPTION_COLUMNS,
    COMMITMENT_COLUMNS,
    SENSITIVITY_COLUMNS,
    Report,
    first_of_next_month,
)
from planner.report.projection import month_starts
from planner.report.sensitivity import LOAD_FACTORS, PRICE_FACTORS
from pricing.costs import HOURS_PER_MONTH

API_NOT_INCLUDED = (
    "API spend is billed at the offers' list prices per million tokens: no cached-input or "
    "batch discount, no rate-limit tiers or committed-spend agreements."
)
API_METHOD = (
    "API rows: each API pool's tokens of an average 730-hour month times the month's requests "
    "over an average month's (the scenario's hourly requests over the month's real hours), "
    "input and output tokens each at their price per million tokens; no instance-hours"
)


def build_with_api(
    inputs: ReportInputs,
    *,
    months: int = 12,
    first_month: date | None = None,
    current_fleet_monthly_usd: float | None = None,
    built_at: datetime | None = None,
) -> Report:
    """The finance report of the stored recommendation in ``inputs`` with its API pools (see
    the module's text); arguments as :func:`planner.report.build.build`'s."""
    check_options(months, current_fleet_monthly_usd)
    stored = inputs.stored
    api = api_plan(stored.id, stored.data)
    if api is None:
        return build(
            inputs,
            months=months,
            first_month=first_month,
            current_fleet_monthly_usd=current_fleet_monthly_usd,
            built_at=built_at,
        )
    built = built_at or datetime.now(UTC)
    built = built if built.tzinfo else built.replace(tzinfo=UTC)
    first = (
        date(first_month.year, first_month.month, 1)
        if first_month
        else first_of_next_month(built.astimezone(UTC))
    )
    if api.replaces_fleet:
        return _api_only(inputs, api, months, first, current_fleet_monthly_usd, built)
    base = build(
        inputs,
        months=months,
        first_month=first,
        current_fleet_monthly_usd=current_fleet_monthly_usd,
        built_at=built,
    )
    return _with_overflow(base, inputs, api, months, first, current_fleet_monthly_usd)


def _mean_requests_per_hour(stored: Stored) -> float:
    return float(stored.requests.mean()) if stored.requests.size else 0.0


def _month_tokens(stored: Stored, api: ApiPlan) -> float:
    """Input + output tokens of an average month of the whole demand."""
    if api.month_tokens:
        return api.month_tokens
    return _mean_requests_per_hour(stored) * HOURS_PER_MONTH * stored.tokens_per_request


def _money(value: float) -> str:
    return f"${value:,.2f}"


def _api_rows(
    inputs: ReportInputs, api: ApiPlan, months: int, first: date
) -> tuple[pd.DataFrame, Any]:
    stored = inputs.stored
    scenarios = _scenarios(stored, inputs.forecast)
    rows = project_api(
        scenarios.loads, api.pools, month_starts(first, months), _mean_requests_per_hour(stored)
    )
    return rows, scenarios


def _alternative_sentence(api: ApiPlan) -> str:
    """The self-hosted alternative and the break-even, in words."""
    parts = []
    if api.self_hosted_monthly_usd is not None:
        parts.append(
            f"the cheapest verified self-hosted fleet would cost "
            f"{_money(api.self_hosted_monthly_usd)} a month"
        )
    even = api.break_even or {}
    if even.get("requests_per_s") is not None:
        parts.append(
            f"the API and self-hosting cost the same at {float(even['requests_per_s']):,.3g} "
            f"requests/s ({float(even.get('tokens_per_month') or 0) / 1e6:,.4g} million tokens "
            f"a month, {_money(float(even.get('usd_per_month') or 0))} a month)"
        )
    return "; ".join(parts) if parts else "no self-hosted fleet was priced against it"


def _api_sentence(api: ApiPlan) -> str:
    offers = "; ".join(
        f"{p.prices_words()} (published {p.source_date}, {p.source_url})" for p in api.pools
    )
    share = (
        "the whole demand"
        if api.replaces_fleet
        else f"{api.token_share:.1%} of the demand's tokens (the rest on the self-hosted fleet)"
    )
    return (
        f"The plan buys {share} from a per-token API at {_money(api.monthly_usd)} an average "
        f"month: {offers}. For comparison, {_alternative_sentence(api)}."
    )


def _api_assumption_rows(stored: Stored, api: ApiPlan) -> list[tuple[str, str, str]]:
    rows = []
    for pool in api.pools:
        rows.append(
            (
                "API price",
                f"{pool.prices_words()}; published {pool.source_date}",
                pool.source_url,
            )
        )
        rows.append(
            (
                "API tokens",
                f"{pool.label}: {pool.requests_per_month:,.0f} requests, "
                f"{pool.input_tokens_per_month / 1e6:,.4g} million input and "
                f"{pool.output_tokens_per_month / 1e6:,.4g} million output tokens an average "
                f"month ({_money(pool.monthly_usd)})",
                f"recommendation #{stored.id}",
            )
        )
    rows.append(
        (
            "API choice",
            f"{api.choice}: {_alternative_sentence(api)}",
            f"recommendation #{stored.id}",
        )
    )
    return rows


def _api_summary(stored: Stored, api: ApiPlan, fleet_monthly: float) -> dict[str, Any]:
    """The summary's API figures (only in reports with API pools)."""
    return {
        "api_choice": api.choice,
        "api_monthly_usd": api.monthly_usd,
        "api_share_of_tokens": api.token_share,
        "api_offers": "; ".join(p.prices_words() for p in api.pools),
        "self_hosted_part_monthly_usd": fleet_monthly,
        "self_hosted_alternative_monthly_usd": api.self_hosted_monthly_usd,
        "break_even_requests_per_s": (api.break_even or {}).get("requests_per_s"),
    }


def _api_sensitivity(api: ApiPlan) -> pd.DataFrame:
    """An API plan's cost moves with the load and the prices in proportion (nothing to
    re-plan); spot interruptions do not touch it."""
    cases = (("load", "load", LOAD_FACTORS), ("price", "prices", PRICE_FACTORS))
    rows = [
        (kind, f"{name} {(f - 1) * 100:+.0f}%", f, api.monthly_usd * f, api.monthly_usd * f,
         "the same API offers")
        for kind, name, factors in cases
        for f in factors
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=list(SENSITIVITY_COLUMNS))


def _api_method(method: str) -> str:
    """The scenarios' method for an API plan: the bands, without the fleet's replicas."""
    bands = method.split(" Each hour's replicas", 1)[0]
    return f"{bands} Each scenario's API tokens follow its requests."


def _overflow_sensitivity(fleet: pd.DataFrame, fleet_monthly: float, api: ApiPlan) -> pd.DataFrame:
    """An overflow plan's cases: the base fleet kept as bought (it runs all month whatever the
    load; prices move it in proportion), the API's tokens and prices in proportion; the plan is
    not searched again (re-planned = kept)."""
    frame = fleet.copy()
    factor = frame["factor"].astype(float)
    base = np.where(frame["kind"] == "price", factor, 1.0) * fleet_monthly
    moved = np.where(frame["kind"].isin(["load", "price"]), factor, 1.0) * api.monthly_usd
    frame["kept_monthly_usd"] = base + moved
    frame["replanned_monthly_usd"] = frame["kept_monthly_usd"]
    frame["replanned_purchase"] = "the overflow plan kept (not searched again)"
    return frame


def _api_only(
    inputs: ReportInputs,
    api: ApiPlan,
    months: int,
    first: date,
    current: float | None,
    built: datetime,
) -> Report:
    """The report of a plan that buys the whole demand from the API: the API's rows alone."""
    stored = inputs.stored
    projection, scenarios = _api_rows(inputs, api, months, first)
    monthly = api.monthly_usd
    tokens = _month_tokens(stored, api) / TOKENS_PER_PRICE_UNIT
    offers = ", ".join(p.label for p in api.pools)
    summary: dict[str, Any] = {
        "monthly_usd": monthly,
        "on_demand_monthly_usd": monthly,  # the API bills at its list prices: nothing to save
        "savings_vs_on_demand_usd": 0.0,
        "savings_vs_on_demand_pct": 0.0,
        "current_fleet_monthly_usd": current,
        "savings_vs_current_usd": current - monthly if current is not None else None,
        "savings_vs_current_pct": (current - monthly) / current if current is not None else None,
        "usd_per_million_tokens": monthly / tokens if tokens > 0 else None,
        # the API's latency is the provider's, not simulated here
        "slo_attainment": None,
        **dict.fromkeys(("p99_ttft_ms", "p99_tpot_ms", "p99_e2e_ms")),
        **dict.fromkeys(("target_ttft_ms", "target_tpot_ms", "target_e2e_ms")),
        "fleet": f"per-token API: {offers} (no self-hosted instances)",
        "purchase": "billed per token: " + "; ".join(p.prices_words() for p in api.pools),
        "peak_instances": 0,
        "mean_instances": 0.0,
        "first_month": first,
        "months": months,
        **dict.fromkeys(
            (
                "confidence",
                "p99_ttft_upper_ms",
                "p99_tpot_upper_ms",
                "p99_e2e_upper_ms",
                "margin_usd_per_month",
                "point_estimate_monthly_usd",
            )
        ),
        **_api_summary(stored, api, 0.0),
    }
    key_assumptions = [
        _load_sentence(stored, scenarios),
        _api_method(scenarios.method),
        _api_sentence(api),
        f"Prices are assumed not to change over the {months} months.",
        "Each month is billed for its real hours' tokens (672 to 744 hours); the headline "
        f"monthly figures are for an average month of {HOURS_PER_MONTH:g} hours.",
        API_NOT_INCLUDED,
        NOT_INCLUDED,
    ]
    assumption_rows: list[tuple[str, str, str]] = [
        (
            "recommendation",
            f"#{stored.id}, made {stored.created_at:%Y-%m-%d %H:%M} UTC",
            "planner store (`planner recommendations list`)",
        ),
        ("demand", _demand_words(stored), f"recommendation #{stored.id}"),
        ("scenarios", _api_method(scenarios.method), "planner.report"),
        *_api_assumption_rows(stored, api),
        (
            "hours per month",
            f"calendar hours (UTC); headline months of {HOURS_PER_MONTH:g} h",
            "planner",
        ),
        ("currency", "USD", "price sheets"),
        ("planner version", __version__, "planner"),
        ("report built", f"{built:%Y-%m-%d %H:%M} UTC", "planner"),
    ]
    model = api.pools[0].model or str(stored.constraints.model)
    month_requests = _mean_requests_per_hour(stored) * HOURS_PER_MONTH
    return Report(
        recommendation_id=stored.id,
        title=f"API plan: {model} on {offers}",
        built_at=built.astimezone(UTC),
        planner_version=__version__,
        currency="USD",
        summary=summary,
        key_assumptions=key_assumptions,
        projection=projection,
        commitments=pd.DataFrame([], columns=list(COMMITMENT_COLUMNS)),
        sensitivity=_api_sensitivity(api),
        assumptions=pd.DataFrame(assumption_rows, columns=list(ASSUMPTION_COLUMNS)),
        notes=[*scenarios.notes, API_METHOD],
        showback=api_showback(api, None, month_requests),
    )


def _with_overflow(
    base: Report,
    inputs: ReportInputs,
    api: ApiPlan,
    months: int,
    first: date,
    current: float | None,
) -> Report:
    """The self-hosted fleet's report ``base`` with the API pools' rows, totals and sources
    added: the plan is both."""
    stored = inputs.stored
    api_rows, _ = _api_rows(inputs, api, months, first)
    projection = with_api_rows(base.projection, api_rows, api.token_share)
    s = base.summary
    fleet_monthly = float(s["monthly_usd"])
    monthly = fleet_monthly + api.monthly_usd
    # the base fleet's own all-on-demand cost (planner.report.api.base_fleet stores none)
    offer, _ = _offer(stored, inputs.prices)
    fleet_on_demand = list_price_cost(stored.instances.astype(np.int64), offer).monthly_usd
    on_demand = fleet_on_demand + api.monthly_usd
    tokens = _month_tokens(stored, api) / TOKENS_PER_PRICE_UNIT
    summary = {
        **s,
        "monthly_usd": monthly,
        "on_demand_monthly_usd": on_demand,
        "savings_vs_on_demand_usd": on_demand - monthly,
        "savings_vs_on_demand_pct": (on_demand - monthly) / on_demand if on_demand else None,
        "savings_vs_current_usd": current - monthly if current is not None else None,
        "savings_vs_current_pct": (current - monthly) / current if current is not None else None,
        "usd_per_million_tokens": monthly / tokens if tokens > 0 else None,
        "purchase": f"{s['purchase']}; the API share billed per token",
        **_api_summary(stored, api, fleet_monthly),
    }
    # the API sentence after the prices'; the scope sentences stay last
    key = list(base.key_assumptions)
    key[3:3] = [_api_sentence(api)]
    key.insert(len(key) - 1, API_NOT_INCLUDED)
    rows = [tuple(r) for r in base.assumptions.itertuples(index=False)]
    at = next((i + 1 for i, r in enumerate(rows) if r[0] == "prices used"), len(rows))
    rows[at:at] = _api_assumption_rows(stored, api)
    sensitivity = _overflow_sensitivity(base.sensitivity, fleet_monthly, api)
    w = stored.winner
    tokens_fleet = tokens * (1.0 - api.token_share)
    month_requests = _mean_requests_per_hour(stored) * HOURS_PER_MONTH
    api_requests = sum(p.requests_per_month for p in api.pools)
    fleet_row = (
        str(w.get("model") or stored.constraints.model), "self-hosted", str(w["provider"]),
        str(w["region"]), str(w["instance_type"]), "all",
        max(0.0, 1.0 - api_requests / month_requests) if month_requests > 0 else None,
        str(s["purchase"]), fleet_monthly, None, tokens_fleet,
        fleet_monthly / tokens_fleet if tokens_fleet > 0 else None,
    )  # fmt: skip
    return replace(
        base,
        title=f"{base.title}, overflow to {', '.join(p.label for p in api.pools)}",
        summary=summary,
        key_assumptions=key,
        projection=projection,
        sensitivity=sensitivity,
        assumptions=pd.DataFrame(rows, columns=list(ASSUMPTION_COLUMNS)),
        notes=[*base.notes, API_METHOD],
        showback=api_showback(api, fleet_row, month_requests),
    )
