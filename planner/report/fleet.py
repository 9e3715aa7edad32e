"""The finance report of a **fleet of pools** (a stored recommendation of ``"kind": "fleet"``,
made by :mod:`planner.recommend.mix`): every pool is projected on its own, exactly as a
one-pool recommendation is (:func:`planner.report.build.build` on the pool's hourly fleet, plan
and prices), and the report adds them up.

The router sends each request to the pool of its model and input size, so the pools share no
request and no instance: the fleet's cost is the sum of its pools' costs, month by month and
scenario by scenario. The projection and the commitments carry ``model`` and ``pool`` columns
(the FOCUS writer turns them into ``x_Model`` / ``x_Pool`` and tags), and the report gains a
showback: each pool's and each model's $ per month and $ per million tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
import pandas as pd

from planner import __version__
from planner.errors import PlannerError
from planner.recommend.tables import input_range
from planner.report.build import (
    FORECAST_SOURCE,
    NOT_INCLUDED,
    ReportInputs,
    Stored,
    _constraints,
    build,
    check_options,
    forecast_id,
)
from planner.report.model import ASSUMPTION_COLUMNS, SHOWBACK_COLUMNS, Report
from pricing.costs import HOURS_PER_MONTH

# The assumption rows every pool's report repeats word for word: written once for the fleet.
SHARED_ITEMS = ("recommendation", "hours per month", "currency", "planner version", "report built")


def is_fleet(result: dict[str, Any] | None) -> bool:
    """Whether a stored recommendation's result is a fleet of pools."""
    return bool(result) and (result or {}).get("kind") == "fleet"


@dataclass(frozen=True)
class StoredFleet:
    """A stored fleet recommendation: its result, and each pool as a one-pool recommendation
    (:class:`~planner.report.build.Stored`), in the result's order."""

    id: int
    created_at: datetime
    data: dict[str, Any]
    pools: list[dict[str, Any]]  # the result's winner.pools[]
    stored: list[Stored]  # one per pool

    @property
    def winner(self) -> dict[str, Any]:
        winner: dict[str, Any] = self.data["winner"]
        return winner


@dataclass(frozen=True)
class FleetReportInputs:
    """Everything a fleet's report is built from: per pool, what a one-pool report reads."""

    fleet: StoredFleet
    pools: list[ReportInputs]  # one per pool, in the fleet's order


def stored_fleet(
    recommendation_id: int, created_at: datetime, result: dict[str, Any] | None
) -> StoredFleet:
    """The pools of stored fleet recommendation ``recommendation_id``, each as a one-pool
    recommendation; a :class:`PlannerError` when it has no fleet to report."""
    data: dict[str, Any] = result or {}
    winner = data.get("winner")
    if not winner or not winner.get("pools"):
        models = data.get("models") or []
        missing = [f"{m.get('model')}: {m.get('how')}" for m in models if not m.get("pools")]
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
    pools = list(winner["pools"])
    stored = [
        _pool_stored(recommendation_id, created, data, pool, start, total_requests)
        for pool in pools
    ]
    return StoredFleet(recommendation_id, created, data, pools, stored)


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


def build_fleet(
    inputs: FleetReportInputs,
    *,
    months: int = 12,
    first_month: date | None = None,
    current_fleet_monthly_usd: float | None = None,
    built_at: datetime | None = None,
) -> Report:
    """The finance report of a fleet of pools: each pool's report (see
    :func:`planner.report.build.build`) added up, with a showback per model and pool."""
    check_options(months, current_fleet_monthly_usd)
    built = built_at or datetime.now(UTC)
    built = built if built.tzinfo else built.replace(tzinfo=UTC)
    fleet = inputs.fleet
    parts = [
        build(pool, months=months, first_month=first_month, built_at=built) for pool in inputs.pools
    ]
    names = [str(p["pool"]) for p in fleet.pools]
    models = [str((p.get("models") or [p["row"]["model"]])[0]) for p in fleet.pools]

    projection = pd.concat(
        [_tagged(r.projection, m, n) for r, m, n in zip(parts, models, names, strict=True)],
        ignore_index=True,
    )
    commitments = pd.concat(
        [_tagged(r.commitments, m, n) for r, m, n in zip(parts, models, names, strict=True)],
        ignore_index=True,
    )
    showback = _showback(fleet, parts, models, names)
    summary = _summary(fleet, parts, showback, current_fleet_monthly_usd)
    pool_count = len(names)
    model_count = len(dict.fromkeys(models))
    title = (
        f"GPU fleet plan: {model_count} model{'s' if model_count != 1 else ''} on "
        f"{pool_count} pool{'s' if pool_count != 1 else ''}"
    )
    notes = list(dict.fromkeys(n for r in parts for n in r.notes))
    notes += [str(n) for n in fleet.data.get("notes") or []]
    return Report(
        recommendation_id=fleet.id,
        title=title,
        built_at=built.astimezone(UTC),
        planner_version=__version__,
        currency="USD",
        summary=summary,
        key_assumptions=_key_assumptions(fleet, parts, names),
        projection=projection,
        commitments=commitments,
        sensitivity=_sensitivity(parts, names),
        assumptions=_assumptions(fleet, parts, names, built),
        notes=notes,
        showback=showback,
    )


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
    fleet: StoredFleet, parts: list[Report], models: list[str], names: list[str]
) -> pd.DataFrame:
    """One row per pool (its model, instance, the input sizes it serves): its $ a month (at the
    prices in force, as its report computes), share of the fleet's cost, tokens a month and $
    per million tokens. :func:`planner.report.model.showback_by_model` adds them up by model."""
    total = sum(float(r.summary["monthly_usd"]) for r in parts)
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
    return pd.DataFrame(rows, columns=list(SHOWBACK_COLUMNS))


def _summary(
    fleet: StoredFleet,
    parts: list[Report],
    showback: pd.DataFrame,
    current: float | None,
) -> dict[str, Any]:
    """The headline figures: money added up over the pools, latency the worst pool's, targets
    the strictest, instances those of the whole fleet hour by hour."""

    def total(key: str) -> float:
        return sum(float(r.summary[key] or 0.0) for r in parts)

    def worst(key: str, pick: Any) -> float | None:
        values = [float(r.summary[key]) for r in parts if r.summary.get(key) is not None]
        return pick(values) if values else None

    monthly = total("monthly_usd")
    on_demand = total("on_demand_monthly_usd")
    savings = on_demand - monthly
    tokens = float(showback["tokens_millions_per_month"].sum())
    instances = np.sum([s.instances for s in fleet.stored], axis=0)
    winner = fleet.winner
    pools = ", ".join(
        f"{p['pool']} ({p['instance_type']}, {input_range(p.get('input_tokens_range'))} "
        "input tokens)"
        for p in fleet.pools
    )
    single = winner.get("single_pool_monthly_usd")
    first = parts[0].summary
    return {
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
        "fleet": f"a fleet of {len(fleet.pools)} pools: {pools}",
        "purchase": "; ".join(
            f"{p['pool']}: {r.summary['purchase']}" for p, r in zip(fleet.pools, parts, strict=True)
        ),
        "peak_instances": int(instances.max()) if instances.size else 0,
        "mean_instances": float(instances.mean()) if instances.size else 0.0,
        "first_month": first["first_month"],
        "months": first["months"],
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


def _sensitivity(parts: list[Report], names: list[str]) -> pd.DataFrame:
    """Each case's cost added up over the pools (every pool's plan kept, or every pool bought
    again); what the re-plan buys, pool by pool."""
    frames = []
    for report, name in zip(parts, names, strict=True):
        frame = report.sensitivity.copy()
        frame["replanned_purchase"] = name + ": " + frame["replanned_purchase"].astype(str)
        frames.append(frame)
    if not frames:
        return parts[0].sensitivity if parts else pd.DataFrame()
    every = pd.concat(frames, ignore_index=True)
    grouped = every.groupby(["kind", "case", "factor"], sort=False, dropna=False)
    summed = grouped.agg(
        kept_monthly_usd=("kept_monthly_usd", "sum"),
        replanned_monthly_usd=("replanned_monthly_usd", "sum"),
        replanned_purchase=("replanned_purchase", "; ".join),
    ).reset_index()
    return summed[list(parts[0].sensitivity.columns)]


def _key_assumptions(fleet: StoredFleet, parts: list[Report], names: list[str]) -> list[str]:
    """The fleet in words, then the first pool's load and scenario sentences (the pools share
    the demand's hours), each pool's prices and latency sentences, the cross-pool savings plan
    when there is one, and the month and scope sentences."""
    first = parts[0].key_assumptions
    if any(forecast_id(s) is not None for s in fleet.stored):
        # each model's own forecast: each pool's load and scenarios in its own words
        load = [
            f"Pool {name}: {sentence}"
            for name, report in zip(names, parts, strict=True)
            for sentence in report.key_assumptions[:2]
        ]
    else:
        # the first pool's load sentence names its pool's demand: the fleet's is the whole log's
        source = (fleet.data.get("demand") or {}).get("source") or "the log"
        whole = f"{source} (each pool its own requests)"
        load = [first[0].replace(f"{source}, pool {names[0]}", whole), first[1]]
    lines = [
        f"The fleet has {len(names)} pools serving "
        f"{', '.join(dict.fromkeys(str(m['model']) for m in fleet.winner.get('models') or []))}: "
        "the router sends each request to the pool of its model and input size, so the pools "
        "share no request; each pool is projected on its own hourly fleet and plan, and the "
        "report adds them up.",
        *load,
    ]
    for name, report in zip(names, parts, strict=True):
        lines += [f"Pool {name}: {sentence}" for sentence in report.key_assumptions[2:4]]
    lines.append(first[4])
    lines += _fleet_plan_sentences(fleet)
    lines += [
        "Each month is billed for its real hours (672 to 744); the headline monthly figures "
        f"are for an average month of {HOURS_PER_MONTH:g} hours.",
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
    fleet: StoredFleet, parts: list[Report], names: list[str], built: datetime
) -> pd.DataFrame:
    """The fleet's rows, then each pool's own rows (named for the pool), then the rows every
    pool shares, once."""
    winner = fleet.winner
    single = winner.get("single_pool_monthly_usd")
    saving = winner.get("saving_vs_single_pool_usd")
    rows: list[tuple[str, str, str]] = [
        (
            "recommendation",
            f"#{fleet.id}, a fleet of {len(names)} pools, made "
            f"{fleet.created_at:%Y-%m-%d %H:%M} UTC",
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
    for name, report in zip(names, parts, strict=True):
        for record in report.assumptions.itertuples(index=False):
            if record.item in SHARED_ITEMS:
                continue
            rows.append((f"{record.item} (pool {name})", str(record.value), str(record.source)))
    shared = parts[0].assumptions
    rows += [
        (str(r.item), str(r.value), str(r.source))
        for r in shared.itertuples(index=False)
        if r.item in SHARED_ITEMS[1:]
    ]
    return pd.DataFrame(rows, columns=list(ASSUMPTION_COLUMNS))
