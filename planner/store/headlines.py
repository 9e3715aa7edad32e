"""The headline figures of what the store holds: the latest forecast (what, how, and its
backtest score beside the seasonal-naive baseline's) and the latest recommendation (cost,
savings against all on-demand, $ per million tokens, P99 latencies against their targets, how
much of the fleet the commitment covers).

Read from the stored rows as ``planner forecast`` and ``planner recommend`` saved them; nothing
here plans anew.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from planner.recommend.tables import api_plan_monthly_usd
from planner.store.forecast_models import ForecastRun
from planner.store.recommend_models import RecommendationRun

BACKTEST_METRIC = "mape"  # the score the forecast pages and the CLI lead with


def latest_forecast(session: Session) -> ForecastRun | None:
    """The most recently stored forecast, or None."""
    query = select(ForecastRun).order_by(ForecastRun.created_at.desc(), ForecastRun.id.desc())
    return session.scalars(query.limit(1)).first()


def latest_recommendation(session: Session) -> RecommendationRun | None:
    """The most recently stored recommendation (the current one), or None."""
    query = select(RecommendationRun).order_by(
        RecommendationRun.created_at.desc(), RecommendationRun.id.desc()
    )
    return session.scalars(query.limit(1)).first()


@dataclass(frozen=True)
class ForecastHeadline:
    id: int
    created_at: datetime
    source: str
    model: str | None  # the log's model; None: all requests
    metric: str
    method: str
    horizon_hours: int
    history_start: datetime
    history_end: datetime
    demand_quantile: float | None
    # The backtest's MAPE of the forecast and of the seasonal-naive baseline (None: no backtest)
    mape: float | None
    baseline_mape: float | None
    baseline_name: str | None
    beats_baseline: bool | None


def forecast_headline(run: ForecastRun) -> ForecastHeadline:
    backtest: dict[str, Any] = (run.scores or {}).get("backtest") or {}
    ours: dict[str, Any] = backtest.get("prophet") or {}
    baseline: dict[str, Any] = backtest.get("baseline") or {}
    beats = backtest.get("beats_baseline")
    return ForecastHeadline(
        id=run.id,
        created_at=run.created_at,
        source=run.source,
        model=run.model,
        metric=run.metric,
        method=run.method,
        horizon_hours=run.horizon_hours,
        history_start=run.history_start,
        history_end=run.history_end,
        demand_quantile=run.demand_quantile,
        mape=_number(ours.get(BACKTEST_METRIC)),
        baseline_mape=_number(baseline.get(BACKTEST_METRIC)),
        baseline_name=backtest.get("baseline_name"),
        beats_baseline=bool(beats) if beats is not None else None,
    )


@dataclass(frozen=True)
class RecommendationHeadline:
    id: int
    created_at: datetime
    demand_source: str
    winner: str | None  # "provider/region/instance model precision TPn"; None: nothing met
    gpu: str | None
    purchase: str | None  # the plan's purchase option (on-demand, committed-3y, ...)
    monthly_usd: float | None
    on_demand_monthly_usd: float | None  # the same fleet, all on demand
    savings_usd: float | None  # per month, against all on demand
    savings_pct: float | None  # percent
    usd_per_million_tokens: float | None
    p99_ttft_s: float | None  # simulated, the worst class
    p99_tpot_s: float | None
    target_ttft_s: float | None  # the strictest target over the request classes
    target_tpot_s: float | None
    quantile: float  # of the latency targets (0.99)
    peak_instances: int | None
    mean_instances: float | None
    commitment_level: float | None  # instances, or $/hour for a savings plan
    commitment_unit: str | None  # "instances" or "usd_per_hour"
    # Shares of the plan's instance-hours and of its spend that the commitment covers
    # (instance-hours: known for reserved/committed instances, None for a savings plan).
    committed_hours_share: float | None
    committed_spend_share: float | None
    commitment_utilization: float | None  # how much of what is committed is used
    # Instances each hour of the plan (hour start, Unix seconds), for a chart.
    hourly_start_s: list[float]
    hourly_instances: list[float]
    pools: int = 1  # a fleet of pools (several models, or sizes on several GPU types): its pools
    # What the recommendation chose against its model's per-token API: "self-hosted", "api"
    # (all on the API) or "overflow" (a base fleet, the peaks on the API), and that plan's cost.
    api_choice: str = "self-hosted"
    api_plan_monthly_usd: float | None = None


def recommendation_headline(run: RecommendationRun) -> RecommendationHeadline:
    result: dict[str, Any] = run.result or {}
    if result.get("kind") == "fleet":
        return _fleet_headline(run, result)
    winner: dict[str, Any] = result.get("winner") or {}
    plan: dict[str, Any] = result.get("plan") or {}
    chosen: dict[str, Any] = plan.get("chosen") or {}
    cost: dict[str, Any] = chosen.get("cost") or {}
    targets = _strictest_targets(run.request or {})
    hourly: dict[str, Any] = result.get("hourly") or {}
    monthly = _number(chosen.get("monthly_usd", run.monthly_usd))
    on_demand = _number(plan.get("all_on_demand_monthly_usd", winner.get("on_demand_monthly_usd")))
    savings = _number(plan.get("savings_vs_on_demand_monthly_usd"))
    if savings is None and monthly is not None and on_demand is not None:
        savings = on_demand - monthly
    savings_pct = _number(plan.get("savings_vs_on_demand_pct"))
    if savings_pct is None and savings is not None and on_demand:
        savings_pct = savings / on_demand * 100
    peak = winner.get("peak_instances")
    api: dict[str, Any] = result.get("api") or {}
    return RecommendationHeadline(
        id=run.id,
        created_at=run.created_at,
        demand_source=run.demand_source,
        winner=run.winner,
        gpu=winner.get("gpu"),
        purchase=chosen.get("option", run.purchase),
        monthly_usd=monthly if winner else None,
        on_demand_monthly_usd=on_demand if winner else None,
        savings_usd=savings if winner else None,
        savings_pct=savings_pct if winner else None,
        usd_per_million_tokens=_number(winner.get("usd_per_million_tokens")),
        p99_ttft_s=_number(winner.get("p99_ttft_s")),
        p99_tpot_s=_number(winner.get("p99_tpot_s")),
        target_ttft_s=targets.get("ttft_s"),
        target_tpot_s=targets.get("tpot_s"),
        quantile=float((run.request or {}).get("targets", {}).get("quantile") or 0.99),
        peak_instances=int(peak) if peak is not None else None,
        mean_instances=_number(winner.get("mean_instances")),
        commitment_level=_number(chosen.get("commitment_level")),
        commitment_unit=chosen.get("commitment_unit"),
        committed_hours_share=_committed_hours_share(cost),
        committed_spend_share=_committed_spend_share(cost),
        commitment_utilization=_number(
            cost.get("reserved_utilization")
            if cost.get("reserved_instances")
            else cost.get("savings_plan_utilization")
        ),
        hourly_start_s=[float(v) for v in hourly.get("hour_start") or []],
        hourly_instances=[float(v) for v in hourly.get("instances") or []],
        api_choice=str(api.get("choice") or "self-hosted"),
        api_plan_monthly_usd=api_plan_monthly_usd(api),
    )


def _strictest_targets(request: dict[str, Any]) -> dict[str, float]:
    """The tightest target of each kind over the request classes (as the search plans)."""
    slos: dict[str, Any] = (request.get("targets") or {}).get("slos") or {}
    found: dict[str, float] = {}
    for slo in slos.values():
        for kind in ("ttft_s", "tpot_s", "e2e_s"):
            value = _number((slo or {}).get(kind))
            if value:
                found[kind] = min(found.get(kind, value), value)
    return found


def _committed_hours_share(cost: dict[str, Any]) -> float | None:
    """Reserved instance-hours used over all instance-hours served."""
    served = _number(cost.get("served_instance_hours"))
    reserved = _number(cost.get("reserved_instances")) or 0.0
    used = _number(cost.get("reserved_utilization"))
    hours = _number(cost.get("hours"))
    if not served or hours is None:
        return None
    if not reserved:
        return None if _number(cost.get("savings_plan_usd")) else 0.0
    if used is None:
        return None
    return min(1.0, used * reserved * hours / served)


def _committed_spend_share(cost: dict[str, Any]) -> float | None:
    """Spend on commitments (reserved instances, savings plans) over the plan's whole spend."""
    total = _number(cost.get("total_usd"))
    if not total:
        return None
    committed = (_number(cost.get("reserved_usd")) or 0.0) + (
        _number(cost.get("savings_plan_usd")) or 0.0
    )
    return committed / total


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def _fleet_headline(run: RecommendationRun, result: dict[str, Any]) -> RecommendationHeadline:
    """A fleet of pools' headline: money added up over the pools (each pool's own plan),
    latency the worst pool's against the strictest target, commitments over all the pools."""
    winner: dict[str, Any] = result.get("winner") or {}
    pools: list[dict[str, Any]] = winner.get("pools") or []
    plans = [p.get("plan") or {} for p in pools]
    costs = [(plan.get("chosen") or {}).get("cost") or {} for plan in plans]
    monthly = _number(winner.get("monthly_usd"))
    on_demand = _sum(_number(plan.get("all_on_demand_monthly_usd")) for plan in plans)
    savings = on_demand - monthly if monthly is not None and on_demand is not None else None
    tokens = _sum(_pool_tokens(p) for p in pools)
    options = list(dict.fromkeys(str((p.get("chosen") or {}).get("option")) for p in plans))
    targets: dict[str, float] = {}
    for per_model in ((result.get("request") or {}).get("targets") or {}).values():
        for kind, value in _strictest_targets({"targets": per_model}).items():
            targets[kind] = min(targets.get(kind, value), value)
    hourly: dict[str, Any] = result.get("hourly") or {}
    instances = [float(v) for v in hourly.get("instances") or []]
    return RecommendationHeadline(
        id=run.id,
        created_at=run.created_at,
        demand_source=run.demand_source,
        winner=run.winner,
        gpu=", ".join(dict.fromkeys(str(p.get("gpu")) for p in pools)) or None,
        purchase=", ".join(options) if pools else None,
        # a fleet whose models are all bought by the token has no pool, and still a cost
        monthly_usd=monthly if pools or winner.get("api_pools") else None,
        on_demand_monthly_usd=on_demand if pools else None,
        savings_usd=savings if pools else None,
        savings_pct=savings / on_demand * 100 if savings is not None and on_demand else None,
        usd_per_million_tokens=monthly / tokens if monthly is not None and tokens else None,
        p99_ttft_s=_worst(_number(p.get("p99_ttft_s")) for p in pools),
        p99_tpot_s=_worst(_number(p.get("p99_tpot_s")) for p in pools),
        target_ttft_s=targets.get("ttft_s"),
        target_tpot_s=targets.get("tpot_s"),
        quantile=0.99,
        peak_instances=int(winner["peak_instances"]) if pools else None,
        mean_instances=sum(instances) / len(instances) if instances else None,
        commitment_level=None,  # the pools commit apart: no one level
        commitment_unit=None,
        committed_hours_share=None,
        committed_spend_share=_pooled_spend_share(costs),
        commitment_utilization=None,
        hourly_start_s=[float(v) for v in hourly.get("hour_start") or []],
        hourly_instances=instances,
        pools=len(pools),
    )


def _pool_tokens(pool: dict[str, Any]) -> float | None:
    """Millions of tokens a month the pool serves: its cost over its $ per million tokens."""
    monthly, per_million = (
        _number(pool.get("monthly_usd")),
        _number(pool.get("usd_per_million_tokens")),
    )
    return monthly / per_million if monthly is not None and per_million else None


def _pooled_spend_share(costs: list[dict[str, Any]]) -> float | None:
    """Spend on commitments over the whole spend, over every pool's plan."""
    total = _sum(_number(c.get("total_usd")) for c in costs)
    if not total:
        return None
    committed = sum(
        (_number(c.get("reserved_usd")) or 0.0) + (_number(c.get("savings_plan_usd")) or 0.0)
        for c in costs
    )
    return committed / total


def _sum(values: Any) -> float | None:
    """The sum; None when any value is unknown (or there are none)."""
    listed = list(values)
    if not listed or any(v is None for v in listed):
        return None
    return float(sum(listed))


def _worst(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None
