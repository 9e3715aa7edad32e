"""The finance report of a **fleet of pools** (a stored recommendation of ``"kind": "fleet"``,
made by :mod:`planner.recommend.mix`): every pool is projected on its own, exactly as a
one-pool recommendation is (:func:`planner.report.build.build` on the pool's hourly fleet, plan
and prices), and the report adds them up.

The router sends each request to the pool of its model and input size, so the pools share no
request and no instance: the fleet's cost is the sum of its pools' costs, month by month and
scenario by scenario. The projection and the commitments carry ``model`` and ``pool`` columns
(the FOCUS writer turns them into ``x_Model`` / ``x_Pool`` and tags), and the report gains a
showback: each pool's and each model's $ per month and $ per million tokens.

A model the recommendation buys **by the token** (``winner.api_pools``, kind ``"api"``: no GPU
pool of its own) is reported as its own rows too, exactly as a one-model plan served by an API
is (:func:`planner.report.api_report.build_with_api`, choice ``"api"``): its tokens of an
average month, each calendar month and scenario times the model's requests in it over an
average month's, input and output tokens at the offer's prices. The model's hourly requests are
the fleet's less its GPU pools' (split between API models by their share of the requests when
several are bought by the token; the fleet's requests times the model's share for a result whose
pools kept no hourly requests), and its low and high scenarios follow its own forecast's bands
when it was planned on one. The fleet's totals are its GPU pools' and its API pools' costs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
import pandas as pd

from planner import __version__
from planner.errors import PlannerError
from planner.recommend.tables import input_range
from planner.report.api import TOKENS_PER_PRICE_UNIT, ApiPlan, ApiPool, api_plan
from planner.report.api_report import (
    API_NOT_INCLUDED,
    _alternative_sentence,
    build_with_api,
)
from planner.report.build import (
    FORECAST_SOURCE,
    NOT_INCLUDED,
    Calibration,
    DemandForecast,
    ReportInputs,
    Stored,
    _constraints,
    build,
    check_options,
    forecast_id,
)
from planner.report.model import (
    API_PROJECTION_COLUMNS,
    ASSUMPTION_COLUMNS,
    COMMITMENT_COLUMNS,
    PROJECTION_COLUMNS,
    SHOWBACK_COLUMNS,
    Report,
    first_of_next_month,
)
from pricing.costs import HOURS_PER_MONTH

# The assumption rows every pool's report repeats word for word: written once for the fleet.
SHARED_ITEMS = ("recommendation", "hours per month", "currency", "planner version", "report built")


def is_fleet(result: dict[str, Any] | None) -> bool:
    """Whether a stored recommendation's result is a fleet of pools."""
    return bool(result) and (result or {}).get("kind") == "fleet"


@dataclass(frozen=True)
class StoredFleet:
    """A stored fleet recommendation: its result, each GPU pool as a one-pool recommendation
    (:class:`~planner.report.build.Stored`), in the result's order, and each model bought by the
    token as a one-model recommendation whose ``api`` block buys the whole of its demand."""

    id: int
    created_at: datetime
    data: dict[str, Any]
    pools: list[dict[str, Any]]  # the result's winner.pools[]
    stored: list[Stored]  # one per pool
    api_pools: list[dict[str, Any]] = field(default_factory=list)  # winner.api_pools[]
    api_stored: list[Stored] = field(default_factory=list)  # one per API pool

    @property
    def winner(self) -> dict[str, Any]:
        winner: dict[str, Any] = self.data["winner"]
        return winner


@dataclass(frozen=True)
class FleetReportInputs:
    """Everything a fleet's report is built from: per pool, what a one-pool report reads; per
    API pool, what a one-model API plan's report reads (its forecast: none has prices or a
    calibration). ``api`` left empty: the API pools' scenarios have no forecast bands."""

    fleet: StoredFleet
    pools: list[ReportInputs]  # one per pool, in the fleet's order
    api: list[ReportInputs] = field(default_factory=list)  # one per API pool, in its order


def api_inputs(stored: Stored, forecast: DemandForecast | None = None) -> ReportInputs:
    """What the report of an API pool reads: no instance prices, no calibration profile (the
    API's latency is the provider's), the forecast behind its model's demand when given."""
    return ReportInputs(
        stored=stored,
        prices=[],
        sheets={},
        forecast=forecast,
        calibration=Calibration(unknown="the model is bought from a per-token API"),
    )


def stored_fleet(
    recommendation_id: int, created_at: datetime, result: dict[str, Any] | None
) -> StoredFleet:
    """The pools of stored fleet recommendation ``recommendation_id``, each as a one-pool
    recommendation, and its API pools, each as a one-model API plan; a :class:`PlannerError`
    when it has neither to report."""
    data: dict[str, Any] = result or {}
    winner = data.get("winner")
    if not winner or not (winner.get("pools") or winner.get("api_pools")):
        models = data.get("models") or []
        missing = [
            f"{m.get('model')}: {m.get('how')}"
            for m in models
            if not m.get("pools") and m.get("choice") != "api"
        ]
        why = "; ".join(missing) or "no pool was found"
        raise PlannerError(
            f"recommendation #{recommendation_id} has no recommended fleet, so there is nothing "
            f"to report: {why}"
        )
    hourly = data.get("hourly") or {}
    if not hourly.get("hour_start"):
        raise PlannerError(
            f"recommendation #{recommendation_id} has no hourly fleet stored: run the "
            "recommendation again to report on it"
        )
    created = created_at if created_at.tzinfo else created_at.replace(tzinfo=UTC)
    start = datetime.fromtimestamp(float(hourly["hour_start"][0]), UTC)
    total_requests = np.asarray(hourly.get("requests") or [], dtype=np.float64)
    pools = list(winner.get("pools") or [])
    stored = [
        _pool_stored(recommendation_id, created, data, pool, start, total_requests)
        for pool in pools
    ]
    api_pools = list(winner.get("api_pools") or [])
    requests = _api_requests(pools, api_pools, total_requests)
    api_stored = [
        _api_stored(recommendation_id, created, data, pool, start, hours)
        for pool, hours in zip(api_pools, requests, strict=True)
    ]
    return StoredFleet(recommendation_id, created, data, pools, stored, api_pools, api_stored)


def _api_model(pool: dict[str, Any]) -> str:
    """The fleet's model an API pool serves (not the API's own name for it)."""
    return str((pool.get("models") or [pool.get("pool") or pool.get("model")])[0])


def _api_requests(
    pools: list[dict[str, Any]],
    api_pools: list[dict[str, Any]],
    total: np.ndarray[Any, np.dtype[np.float64]],
) -> list[np.ndarray[Any, np.dtype[np.float64]]]:
    """Each API pool's model's hourly requests: its own where the result stored them, else the
    fleet's hourly requests less its GPU pools' (the models bought by the token carry the
    rest), shared between the API pools by their share of the requests; the fleet's requests
    times the pool's share when a GPU pool kept no hourly requests (an older result)."""
    if not api_pools:
        return []
    if all(p.get("hourly_requests") is not None for p in api_pools):  # stored since 2026-12-07
        return [np.asarray(p["hourly_requests"], dtype=np.float64)[: total.size] for p in api_pools]
    shares = np.array([float(p.get("share_of_requests") or 0.0) for p in api_pools])
    if all(p.get("hourly_requests") is not None for p in pools):
        rest = total.copy()
        for pool in pools:
            own = np.asarray(pool["hourly_requests"], dtype=np.float64)[: rest.size]
            rest[: own.size] -= own
        rest = np.maximum(rest, 0.0)
        split = shares / shares.sum() if shares.sum() > 0 else np.full(len(shares), 1 / len(shares))
        return [rest * s for s in split]
    return [total * s for s in shares]


def _api_stored(
    recommendation_id: int,
    created: datetime,
    data: dict[str, Any],
    pool: dict[str, Any],
    start: datetime,
    requests: np.ndarray[Any, np.dtype[np.float64]],
) -> Stored:
    """An API pool as a one-model recommendation whose ``api`` block (choice ``"api"``) buys
    the whole of the model's demand from the pool's offer: the model's hourly requests, no
    instance; its API comparison (the single-pool search's: self-hosted cost and break-even)
    from the result's ``models[]``."""
    model = _api_model(pool)
    name = str(pool.get("pool") or model)
    model_demand = (data.get("demand") or {}).get("models", {}).get(model, {})
    entry: dict[str, Any] = next(
        (m for m in data.get("models") or [] if m.get("model") == model), {}
    )
    compared = entry.get("api") or {}
    request = data.get("request") or {}
    constraints = dict(request.get("constraints") or {})
    constraints["model"] = model
    source = (data.get("demand") or {}).get("source") or "the log"
    model_source = str(model_demand.get("source") or "")
    if FORECAST_SOURCE.match(model_source) is None:
        model_source = f"{source}, pool {name}"
    month_requests = float(pool.get("requests_per_month") or 0.0)
    tokens_in = float(pool.get("input_tokens_per_month") or 0.0)
    tokens_out = float(pool.get("output_tokens_per_month") or 0.0)
    # the API's tokens a request (as it bills them), else the model's demand's
    mean_in = tokens_in / month_requests if month_requests > 0 else None
    mean_out = tokens_out / month_requests if month_requests > 0 else None
    pool_data = {
        "demand": {
            "source": model_source,
            "mean_input_tokens": mean_in
            if mean_in is not None
            else model_demand.get("mean_input_tokens"),
            "mean_output_tokens": mean_out
            if mean_out is not None
            else model_demand.get("mean_output_tokens"),
        },
        "request": {
            "targets": (request.get("targets") or {}).get(model) or {},
            "constraints": constraints,
            "spot_share": 0.0,
        },
        "api": {
            "choice": "api",
            "pools": [pool],
            "self_hosted_monthly_usd": compared.get("self_hosted_monthly_usd"),
            "break_even": compared.get("break_even"),
            "month": {"input_tokens": tokens_in, "output_tokens": tokens_out},
        },
    }
    zeros = np.zeros(requests.size)
    return Stored(
        id=recommendation_id,
        created_at=created,
        data=pool_data,
        winner={},
        plan={},
        constraints=_constraints(constraints),
        start=start,
        requests=requests,
        replicas=zeros,
        instances=zeros,
    )


def _pool_stored(
    recommendation_id: int,
    created: datetime,
    data: dict[str, Any],
    pool: dict[str, Any],
    start: datetime,
    total_requests: np.ndarray[Any, np.dtype[np.float64]],
) -> Stored:
    """One pool as a one-pool recommendation: its ranked row as the winner, its plan, its
    hourly fleet. A result stored before pools kept their own hourly requests and replicas
    falls back to the fleet's requests times the pool's share, and its instances times its
    replicas per instance."""
    instances = np.asarray(pool["hourly_instances"], dtype=np.float64)
    per_instance = int(pool.get("replicas_per_instance") or 1)
    if pool.get("hourly_requests") is not None:
        requests = np.asarray(pool["hourly_requests"], dtype=np.float64)
    else:
        requests = total_requests[: instances.size] * float(pool.get("share_of_requests") or 0)
    if pool.get("hourly_replicas") is not None:
        replicas = np.asarray(pool["hourly_replicas"], dtype=np.float64)
    else:
        replicas = instances * per_instance
    model = str((pool.get("models") or [pool["row"].get("model")])[0])
    model_demand = (data.get("demand") or {}).get("models", {}).get(model, {})
    mean_in = pool.get("mean_input_tokens", model_demand.get("mean_input_tokens"))
    mean_out = pool.get("mean_output_tokens", model_demand.get("mean_output_tokens"))
    request = data.get("request") or {}
    constraints = dict(request.get("constraints") or {})
    constraints["model"] = model
    parsed = _constraints(constraints)
    # the pools were bought with the fleet's spot allowance (all classes tolerate it unless
    # named: then the pool's own chosen plan says what share ran on spot)
    chosen = (pool.get("plan") or {}).get("chosen") or {}
    spot = (
        float(parsed.max_spot_share)
        if not parsed.spot_classes
        else float(chosen.get("spot_share") or 0.0)
    )
    source = (data.get("demand") or {}).get("source") or "the log"
    # a model planned on a stored forecast (recommend --demand ID,ID): the pool's scenarios
    # follow that forecast's bands, scaled to the pool's share of its requests
    model_source = str(model_demand.get("source") or "")
    if FORECAST_SOURCE.match(model_source) is None:
        model_source = f"{source}, pool {pool['pool']}"
    pool_data = {
        "demand": {
            "source": model_source,
            "mean_input_tokens": mean_in,
            "mean_output_tokens": mean_out,
        },
        "request": {
            "targets": pool.get("targets") or (request.get("targets") or {}).get(model) or {},
            "constraints": constraints,
            "spot_share": spot,
        },
        "winner": pool["row"],
        "plan": pool["plan"],
    }
    return Stored(
        id=recommendation_id,
        created_at=created,
        data=pool_data,
        winner=pool["row"],
        plan=pool["plan"],
        constraints=parsed,
        start=start,
        requests=requests,
        replicas=replicas,
        instances=instances,
    )


@dataclass(frozen=True)
class _ApiPart:
    """An API pool's report (a one-model API plan's) and what the fleet's report says of it."""

    name: str
    model: str
    plan: ApiPlan  # its one pool, bought for the whole of the model's demand
    share_of_requests: float
    stored_usd: float | None  # the pool's monthly cost as the recommendation stored it
    report: Report

    @property
    def pool(self) -> ApiPool:
        return self.plan.pools[0]


def build_fleet(
    inputs: FleetReportInputs,
    *,
    months: int = 12,
    first_month: date | None = None,
    current_fleet_monthly_usd: float | None = None,
    built_at: datetime | None = None,
) -> Report:
    """The finance report of a fleet of pools: each pool's report (see
    :func:`planner.report.build.build`) and each API pool's (see
    :func:`planner.report.api_report.build_with_api`) added up, with a showback per model and
    pool."""
    check_options(months, current_fleet_monthly_usd)
    built = built_at or datetime.now(UTC)
    built = built if built.tzinfo else built.replace(tzinfo=UTC)
    first = (
        date(first_month.year, first_month.month, 1)
        if first_month
        else first_of_next_month(built.astimezone(UTC))
    )
    fleet = inputs.fleet
    parts = [build(pool, months=months, first_month=first, built_at=built) for pool in inputs.pools]
    names = [str(p["pool"]) for p in fleet.pools]
    models = [str((p.get("models") or [p["row"]["model"]])[0]) for p in fleet.pools]
    apis = _api_parts(inputs, months, first, built)

    frames = [_tagged(r.projection, m, n) for r, m, n in zip(parts, models, names, strict=True)]
    frames += [_tagged(a.report.projection, a.model, a.name) for a in apis]
    columns = [*PROJECTION_COLUMNS, *(API_PROJECTION_COLUMNS if apis else ()), "model", "pool"]
    projection = pd.concat(frames, ignore_index=True)[columns]
    commitments = pd.concat(
        [_tagged(r.commitments, m, n) for r, m, n in zip(parts, models, names, strict=True)]
        or [pd.DataFrame([], columns=[*COMMITMENT_COLUMNS, "model", "pool"])],
        ignore_index=True,
    )
    showback = _showback(fleet, parts, models, names, apis)
    summary = _summary(fleet, parts, showback, current_fleet_monthly_usd, apis, first, months)
    notes = list(dict.fromkeys(n for r in [*parts, *(a.report for a in apis)] for n in r.notes))
    notes += _api_cost_notes(fleet, apis)
    notes += [str(n) for n in fleet.data.get("notes") or []]
    return Report(
        recommendation_id=fleet.id,
        title=_title(models, names, apis),
        built_at=built.astimezone(UTC),
        planner_version=__version__,
        currency="USD",
        summary=summary,
        key_assumptions=_key_assumptions(fleet, parts, names, apis),
        projection=projection,
        commitments=commitments,
        sensitivity=_sensitivity(parts, names, apis),
        assumptions=_assumptions(fleet, parts, names, apis, built),
        notes=notes,
        showback=showback,
    )


def _title(models: list[str], names: list[str], apis: list[_ApiPart]) -> str:
    model_count = len(dict.fromkeys([*models, *(a.model for a in apis)]))
    served = f"{model_count} model{'s' if model_count != 1 else ''}"
    if not apis:
        return f"GPU fleet plan: {served} on {len(names)} pool{'s' if len(names) != 1 else ''}"
    bought = f"{len(apis)} per-token API{'s' if len(apis) != 1 else ''}"
    if not names:
        return f"API plan: {served} on {bought}"
    return (
        f"GPU fleet plan: {served} on {len(names)} pool{'s' if len(names) != 1 else ''} and "
        f"{bought}"
    )


def _api_parts(
    inputs: FleetReportInputs, months: int, first: date, built: datetime
) -> list[_ApiPart]:
    """Each API pool's report, as a one-model API plan's (its rows and totals the API's)."""
    fleet = inputs.fleet
    given = inputs.api or [api_inputs(s) for s in fleet.api_stored]
    if len(given) != len(fleet.api_stored):
        raise ValueError(
            f"recommendation #{fleet.id}: {len(given)} API pool inputs for "
            f"{len(fleet.api_stored)} API pools"
        )
    out = []
    for pool, part in zip(fleet.api_pools, given, strict=True):
        plan = api_plan(fleet.id, part.stored.data)
        if plan is None:  # api_stored always lists its pool
            raise PlannerError(f"recommendation #{fleet.id}: API pool {pool.get('pool')} is empty")
        stored_usd = pool.get("monthly_usd")
        out.append(
            _ApiPart(
                name=str(pool.get("pool") or _api_model(pool)),
                model=_api_model(pool),
                plan=plan,
                share_of_requests=float(pool.get("share_of_requests") or 0.0),
                stored_usd=float(stored_usd) if stored_usd is not None else None,
                report=build_with_api(part, months=months, first_month=first, built_at=built),
            )
        )
    return out


def _api_cost_notes(fleet: StoredFleet, apis: list[_ApiPart]) -> list[str]:
    """An API pool whose stored monthly cost is not its tokens at its prices (the report
    bills the tokens at the prices) says so."""
    notes = []
    for api in apis:
        billed = api.pool.monthly_usd
        if api.stored_usd is not None and abs(api.stored_usd - billed) > 1e-6 * max(1.0, billed):
            notes.append(
                f"API pool {api.name}: recommendation #{fleet.id} stored its cost as "
                f"${api.stored_usd:,.2f} a month; its tokens at its prices come to "
                f"${billed:,.2f}, which this report uses throughout"
            )
    return notes


def _tagged(frame: pd.DataFrame, model: str, pool: str) -> pd.DataFrame:
    """``frame`` with the pool's ``model`` and ``pool`` columns added last."""
    tagged = frame.copy()
    tagged["model"] = model
    tagged["pool"] = pool
    return tagged


def _tokens_millions_per_month(stored: Stored) -> float:
    """Tokens (input + output) a month of :data:`HOURS_PER_MONTH` hours of the pool's load
    carries, in millions (as the recommender counts them for $ per million tokens)."""
    hours = stored.requests.size
    if hours == 0:
        return 0.0
    per_month = float(stored.requests.sum()) / hours * HOURS_PER_MONTH
    return per_month * stored.tokens_per_request / 1e6


def _showback(
    fleet: StoredFleet,
    parts: list[Report],
    models: list[str],
    names: list[str],
    apis: list[_ApiPart],
) -> pd.DataFrame:
    """One row per pool (its model, instance, the input sizes it serves): its $ a month (at the
    prices in force, as its report computes), share of the fleet's cost, tokens a month and $
    per million tokens; then one row per API pool (its offer, billed per token: its tokens of
    an average month at its prices). :func:`planner.report.model.showback_by_model` adds them up
    by model."""
    total = sum(float(r.summary["monthly_usd"]) for r in parts)
    total += sum(float(a.report.summary["monthly_usd"]) for a in apis)
    rows = []
    for pool, stored, report, model, name in zip(
        fleet.pools, fleet.stored, parts, models, names, strict=True
    ):
        monthly = float(report.summary["monthly_usd"])
        tokens = _tokens_millions_per_month(stored)
        rows.append(
            (
                model,
                name,
                str(pool["provider"]),
                str(pool["region"]),
                str(pool["instance_type"]),
                input_range(pool.get("input_tokens_range")),
                float(pool.get("share_of_requests") or 0.0),
                str(report.summary["purchase"]),
                monthly,
                monthly / total if total else None,
                tokens,
                monthly / tokens if tokens > 0 else None,
            )
        )
    for api in apis:
        monthly = float(api.report.summary["monthly_usd"])
        tokens = api.pool.tokens_per_month / TOKENS_PER_PRICE_UNIT
        rows.append(
            (api.model, api.name, api.pool.provider, "", api.pool.offer, "all",
             api.share_of_requests, f"per token: {api.pool.prices_words()}", monthly,
             monthly / total if total else None, tokens, monthly / tokens if tokens > 0 else None)
        )  # fmt: skip
    return pd.DataFrame(rows, columns=list(SHOWBACK_COLUMNS))


def _summary(
    fleet: StoredFleet,
    parts: list[Report],
    showback: pd.DataFrame,
    current: float | None,
    apis: list[_ApiPart],
    first: date,
    months: int,
) -> dict[str, Any]:
    """The headline figures: money added up over the pools and the API pools, latency the
    worst GPU pool's (an API's is the provider's, not simulated), targets the strictest,
    instances those of the whole fleet hour by hour."""

    def total(key: str) -> float:
        return sum(float(r.summary[key] or 0.0) for r in parts)

    def worst(key: str, pick: Any) -> float | None:
        values = [float(r.summary[key]) for r in parts if r.summary.get(key) is not None]
        return pick(values) if values else None

    gpu_monthly = total("monthly_usd")
    api_monthly = sum(float(a.report.summary["monthly_usd"]) for a in apis)
    monthly = gpu_monthly + api_monthly
    # the API bills at its list prices: its on-demand cost is its cost
    on_demand = total("on_demand_monthly_usd") + api_monthly
    savings = on_demand - monthly
    tokens = float(showback["tokens_millions_per_month"].sum())
    hours = fleet.stored[0].instances.size if fleet.stored else 0
    instances = np.sum([s.instances for s in fleet.stored], axis=0) if hours else np.zeros(0)
    winner = fleet.winner
    described = [
        f"{p['pool']} ({p['instance_type']}, {input_range(p.get('input_tokens_range'))} "
        "input tokens)"
        for p in fleet.pools
    ]
    described += [f"{a.name} (per-token API {a.pool.label})" for a in apis]
    purchases = [
        f"{p['pool']}: {r.summary['purchase']}" for p, r in zip(fleet.pools, parts, strict=True)
    ]
    purchases += [f"{a.name}: billed per token" for a in apis]
    count = f"{len(fleet.pools)} pool{'s' if len(fleet.pools) != 1 else ''}"
    if apis:
        count += f" and {len(apis)} per-token API pool{'s' if len(apis) != 1 else ''}"
    single = winner.get("single_pool_monthly_usd")
    summary: dict[str, Any] = {
        "monthly_usd": monthly,
        "on_demand_monthly_usd": on_demand,
        "savings_vs_on_demand_usd": savings,
        "savings_vs_on_demand_pct": savings / on_demand if on_demand else None,
        "current_fleet_monthly_usd": current,
        "savings_vs_current_usd": current - monthly if current is not None else None,
        "savings_vs_current_pct": (current - monthly) / current if current is not None else None,
        "usd_per_million_tokens": monthly / tokens if tokens > 0 else None,
        "slo_attainment": worst("slo_attainment", min),
        "p99_ttft_ms": worst("p99_ttft_ms", max),
        "p99_tpot_ms": worst("p99_tpot_ms", max),
        "p99_e2e_ms": worst("p99_e2e_ms", max),
        "target_ttft_ms": worst("target_ttft_ms", min),
        "target_tpot_ms": worst("target_tpot_ms", min),
        "target_e2e_ms": worst("target_e2e_ms", min),
        "fleet": f"a fleet of {count}: {', '.join(described)}",
        "purchase": "; ".join(purchases),
        "peak_instances": int(instances.max()) if instances.size else 0,
        "mean_instances": float(instances.mean()) if instances.size else 0.0,
        "first_month": first,
        "months": months,
        "confidence": None,
        "p99_ttft_upper_ms": None,
        "p99_tpot_upper_ms": None,
        "p99_e2e_upper_ms": None,
        "margin_usd_per_month": None,
        "point_estimate_monthly_usd": None,
        # the fleet's own figures
        "pools": len(fleet.pools),
        "models": len(dict.fromkeys(showback["model"])),
        "single_pool_monthly_usd": single,
        "saving_vs_single_pool_usd": winner.get("saving_vs_single_pool_usd"),
    }
    if apis:  # the models bought by the token
        api_tokens = sum(a.pool.tokens_per_month for a in apis) / TOKENS_PER_PRICE_UNIT
        summary |= {
            "api_pools": len(apis),
            "api_choice": "by model: "
            + ", ".join(f"{a.model} on the API" for a in apis)
            + (", the other models self-hosted" if fleet.pools else ""),
            "api_monthly_usd": api_monthly,
            "api_share_of_tokens": min(1.0, api_tokens / tokens) if tokens > 0 else 1.0,
            "api_offers": "; ".join(f"{a.model}: {a.pool.prices_words()}" for a in apis),
            "self_hosted_part_monthly_usd": gpu_monthly,
            "self_hosted_alternative_monthly_usd": None,  # per model: in the assumptions
            "break_even_requests_per_s": None,
        }
    return summary


def _sensitivity(parts: list[Report], names: list[str], apis: list[_ApiPart]) -> pd.DataFrame:
    """Each case's cost added up over the pools (every pool's plan kept, or every pool bought
    again) and the API pools (their tokens move with the load, their cost with the prices;
    nothing else moves them); what the re-plan buys, pool by pool."""
    frames = []
    for report, name in zip(parts, names, strict=True):
        frame = report.sensitivity.copy()
        frame["replanned_purchase"] = name + ": " + frame["replanned_purchase"].astype(str)
        frames.append(frame)
    if frames:
        cases = pd.concat(frames, ignore_index=True)[["kind", "case", "factor"]]
        cases = cases.drop_duplicates(ignore_index=True)
    elif apis:
        cases = apis[0].report.sensitivity[["kind", "case", "factor"]]
    else:
        return pd.DataFrame()
    for api in apis:
        monthly = float(api.report.summary["monthly_usd"])
        factor = cases["factor"].astype(float)
        moved = np.where(cases["kind"].isin(["load", "price"]), factor, 1.0) * monthly
        frames.append(
            cases.assign(
                kept_monthly_usd=moved,
                replanned_monthly_usd=moved,
                replanned_purchase=f"{api.name}: the same API offer",
            )
        )
    every = pd.concat(frames, ignore_index=True)
    grouped = every.groupby(["kind", "case", "factor"], sort=False, dropna=False)
    summed = grouped.agg(
        kept_monthly_usd=("kept_monthly_usd", "sum"),
        replanned_monthly_usd=("replanned_monthly_usd", "sum"),
        replanned_purchase=("replanned_purchase", "; ".join),
    ).reset_index()
    columns = (parts[0] if parts else apis[0].report).sensitivity.columns
    return summed[list(columns)]


def _api_words(api: _ApiPart) -> str:
    """An API pool in words: the offer, its prices and their source, its cost, the model's
    self-hosted alternative."""
    return (
        f"Model {api.model} is bought by the token ({api.share_of_requests:.1%} of the fleet's "
        f"requests): {api.pool.prices_words()} (published {api.pool.source_date}, "
        f"{api.pool.source_url}), ${api.pool.monthly_usd:,.2f} an average month. For "
        f"comparison, {_alternative_sentence(api.plan)}."
    )


def _key_assumptions(
    fleet: StoredFleet, parts: list[Report], names: list[str], apis: list[_ApiPart]
) -> list[str]:
    """The fleet in words, then the first pool's load and scenario sentences (the pools share
    the demand's hours), each pool's prices and latency sentences, each API pool's offer and
    prices, the cross-pool savings plan when there is one, and the month and scope
    sentences."""
    reports = [*parts, *(a.report for a in apis)]
    every = [*names, *(a.name for a in apis)]
    first = reports[0].key_assumptions
    if any(forecast_id(s) is not None for s in [*fleet.stored, *fleet.api_stored]):
        # each model's own forecast: each pool's load and scenarios in its own words
        load = [
            f"Pool {name}: {sentence}"
            for name, report in zip(every, reports, strict=True)
            for sentence in report.key_assumptions[:2]
        ]
    else:
        # the first pool's load sentence names its pool's demand: the fleet's is the whole log's
        source = (fleet.data.get("demand") or {}).get("source") or "the log"
        whole = f"{source} (each pool its own requests)"
        load = [first[0].replace(f"{source}, pool {every[0]}", whole), first[1]]
    served = ", ".join(dict.fromkeys(str(m["model"]) for m in fleet.winner.get("models") or []))
    if parts:
        opening = (
            f"The fleet has {len(names)} pool{'s' if len(names) != 1 else ''} serving {served}"
            + (f" ({len(apis)} of its models bought from a per-token API instead)" if apis else "")
            + ": the router sends each request to the pool of its model and input size, so the "
            "pools share no request; each pool is projected on its own hourly fleet and plan, "
            "and the report adds them up."
        )
    else:
        opening = (
            f"The plan buys every model ({served}) from a per-token API: no GPU instance is "
            "bought; each API pool is projected on its model's requests, and the report adds "
            "them up."
        )
    lines = [opening, *load]
    for name, report in zip(names, parts, strict=True):
        lines += [f"Pool {name}: {sentence}" for sentence in report.key_assumptions[2:4]]
    lines += [_api_words(a) for a in apis]
    if parts:
        lines.append(first[4])  # the spot sentence
    lines += _fleet_plan_sentences(fleet)
    lines += [
        "Each month is billed for its real hours (672 to 744); the headline monthly figures "
        f"are for an average month of {HOURS_PER_MONTH:g} hours.",
        *([API_NOT_INCLUDED] if apis else []),
        NOT_INCLUDED,
    ]
    return lines


def _fleet_plan_sentences(fleet: StoredFleet) -> list[str]:
    """The savings plans across pools the recommendation found cheaper than the pools' own
    plans: said, not projected (the report projects each pool's own plan)."""
    out = []
    for plan in fleet.winner.get("fleet_savings_plans") or []:
        saving = float(plan.get("saving_usd") or 0.0)
        if saving <= 0.005:
            continue
        out.append(
            f"One {plan['option']} across the {plan['provider']} pools "
            f"({', '.join(plan.get('pools') or [])}) at ${float(plan['usd_per_hour']):,.2f} an "
            f"hour would cost ${float(plan['monthly_usd']):,.2f} a month, "
            f"${saving:,.2f} less than the pools' own plans apart; this report projects the "
            "pools' own plans."
        )
    return out


def _assumptions(
    fleet: StoredFleet,
    parts: list[Report],
    names: list[str],
    apis: list[_ApiPart],
    built: datetime,
) -> pd.DataFrame:
    """The fleet's rows, then each pool's own rows and each API pool's (named for the pool),
    then the rows every pool shares, once."""
    winner = fleet.winner
    count = f"{len(names)} pool{'s' if len(names) != 1 else ''}"
    if apis:
        count += f" and {len(apis)} per-token API pool{'s' if len(apis) != 1 else ''}"
    single = winner.get("single_pool_monthly_usd")
    saving = winner.get("saving_vs_single_pool_usd")
    rows: list[tuple[str, str, str]] = [
        (
            "recommendation",
            f"#{fleet.id}, a fleet of {count}, made {fleet.created_at:%Y-%m-%d %H:%M} UTC",
            "planner store (`planner recommendations list`)",
        ),
    ]
    if single is not None:
        rows.append(
            (
                "one pool per model",
                f"${float(single):,.2f} a month when recommended; the pools save "
                f"${float(saving or 0):,.2f} a month",
                f"recommendation #{fleet.id}",
            )
        )
    rows += [
        ("fleet savings plan", sentence, f"recommendation #{fleet.id}")
        for sentence in _fleet_plan_sentences(fleet)
    ]
    named = [*zip(names, parts, strict=True), *((a.name, a.report) for a in apis)]
    for name, report in named:
        for record in report.assumptions.itertuples(index=False):
            if record.item in SHARED_ITEMS:
                continue
            rows.append((f"{record.item} (pool {name})", str(record.value), str(record.source)))
    shared = named[0][1].assumptions
    rows += [
        (str(r.item), str(r.value), str(r.source))
        for r in shared.itertuples(index=False)
        if r.item in SHARED_ITEMS[1:]
    ]
    return pd.DataFrame(rows, columns=list(ASSUMPTION_COLUMNS))
