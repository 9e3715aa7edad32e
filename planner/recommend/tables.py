"""A recommendation's result (``Recommendation.to_dict()``, or a stored one) as tables: what the
dashboard shows and offers as CSV, and what a report exports. Columns carry their units."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from planner.recommend.plan import hourly_by_purchase

#: What a result's ``pools[]`` carry of each pool's configuration (a single pool's winner, a
#: fleet's pools, a disaggregated winner's roles)
POOL_FIELDS = (
    "provider",
    "region",
    "instance_type",
    "gpu",
    "gpus_per_instance",
    "precision",
    "tp",
    "replicas_per_instance",
    "max_seqs",
    "chunked_prefill",
    "engine",
    "kv_cache",
    "purchase",
    "p99_ttft_s",
    "p99_tpot_s",
    "p99_e2e_s",
    "verified",
    "attempts",
    "usd_per_million_tokens",
    "usd_per_million_output_tokens",
)

Result = dict[str, Any]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def alternatives(data: Result) -> pd.DataFrame:
    """The simulated candidates, cheapest verified first (the winner is the first row)."""
    pareto = set(data.get("pareto", []))
    return pd.DataFrame(
        [
            {
                "#": r["id"],
                "Pareto": r["id"] in pareto,
                "met targets": r["verified"],
                "provider": r["provider"],
                "region": r["region"],
                "instance": r["instance_type"],
                "GPUs": f"{r['gpus_per_instance']} x {r['gpu']}",
                "model": r["model"],
                "precision": r["precision"],
                "TP": r["tp"],
                "max seqs": r["max_seqs"],
                "chunked prefill": r["chunked_prefill"],
                "purchase": r["purchase"],
                "$ per month": r["monthly_usd"],
                "all on-demand $ per month": r["on_demand_monthly_usd"],
                "$ per million tokens": r["usd_per_million_tokens"],
                "instances at peak": r["peak_instances"],
                "P99 TTFT (ms)": _ms(r["p99_ttft_s"]),
                "P99 TPOT (ms)": _ms(r["p99_tpot_s"]),
                "P99 E2E (ms)": _ms(r["p99_e2e_s"]),
                "SLO margin": r["slo_headroom"],
                "attempts": r["attempts"],
            }
            for r in data["ranked"]
        ],
        columns=[
            "#",
            "Pareto",
            "met targets",
            "provider",
            "region",
            "instance",
            "GPUs",
            "model",
            "precision",
            "TP",
            "max seqs",
            "chunked prefill",
            "purchase",
            "$ per month",
            "all on-demand $ per month",
            "$ per million tokens",
            "instances at peak",
            "P99 TTFT (ms)",
            "P99 TPOT (ms)",
            "P99 E2E (ms)",
            "SLO margin",
            "attempts",
        ],
    )


REJECTED_COLUMNS = [
    "stage",
    "reason",
    "detail",
    "provider",
    "region",
    "instance",
    "GPU",
    "model",
    "precision",
    "TP",
    "max seqs",
    "chunked prefill",
]


def rejected(data: Result) -> pd.DataFrame:
    """Every rejected configuration with the stage that ruled it out and why."""
    return pd.DataFrame(
        [
            {
                "stage": r["stage"],
                "reason": r["reason"],
                "detail": r["detail"],
                "provider": r.get("provider"),
                "region": r.get("region"),
                "instance": r.get("instance_type"),
                "GPU": r.get("gpu"),
                "model": r.get("model"),
                "precision": r.get("precision"),
                "TP": r.get("tp"),
                "max seqs": r.get("max_seqs"),
                "chunked prefill": r.get("chunked_prefill"),
            }
            for r in data["rejected"]
        ],
        columns=REJECTED_COLUMNS,
    )


def rejections_by_reason(data: Result) -> pd.DataFrame:
    """How many configurations each stage ruled out for each reason, in the order first met."""
    frame = rejected(data)
    return frame.groupby(["stage", "reason"], sort=False).size().reset_index(name="configurations")


def commitment_level(choice: dict[str, Any]) -> str:
    """A purchase choice's commitment in words: instances, or a savings plan's $ an hour."""
    if choice["option"] == "on-demand":
        return "-"
    if choice["commitment_unit"] == "usd_per_hour":
        covered = choice.get("committed_instances")
        about = f" (about {covered:,.1f} instances)" if covered is not None else ""
        return f"${choice['commitment_level']:,.2f} an hour{about}"
    level = choice["commitment_level"]
    return f"{level:,.0f} instance{'s' if level != 1 else ''}"


def purchase_options(data: Result) -> pd.DataFrame:
    """Every allowed way to buy the winner's fleet, cheapest first, with its break-even."""
    plan = data.get("plan")
    if plan is None:
        return pd.DataFrame()
    chosen = plan["chosen"]["option"]
    return pd.DataFrame(
        [
            {
                "purchase": c["option"],
                "commitment": commitment_level(c),
                "break-even utilization": c["break_even_utilization"],
                "$ per month": c["monthly_usd"],
                "utilization": c["cost"].get("utilization"),
                "committed utilization": c["cost"].get("reserved_utilization")
                if c["commitment_unit"] == "instances"
                else c["cost"].get("savings_plan_utilization"),
                "chosen": c["option"] == chosen,
            }
            for c in plan["alternatives"]
        ]
    )


def sensitivity(data: Result) -> pd.DataFrame:
    """The load 20% lower and higher: the chosen plan kept, or bought again for that load."""
    plan = data.get("plan")
    if plan is None:
        return pd.DataFrame()
    return pd.DataFrame(
        [
            {
                "load": case["load"],
                "instances at peak": case["peak_instances"],
                "$ per month with this plan": case["monthly_usd_with_this_plan"],
                "$ per month replanned": case["monthly_usd_replanned"],
                "replanned purchase": case["replanned_option"],
                "replanned commitment": case["replanned_commitment_level"],
            }
            for case in plan["sensitivity"]
        ]
    )


def hourly(data: Result) -> pd.DataFrame:
    """Per hour of the demand: requests, and the winner's replicas and instances split by how
    the plan buys them."""
    hours = data["hourly"]
    frame = pd.DataFrame(
        {
            "hour (UTC)": [datetime.fromtimestamp(t, UTC) for t in hours["hour_start"]],
            "requests": hours["requests"],
        }
    )
    for name in ("replicas", "instances"):
        if name in hours:
            frame[name] = hours[name]
    split = hourly_by_purchase(data) or {}
    for option, counts in split.items():
        if option != "hour_start":
            frame[f"{option} instances"] = counts
    return frame


# --- a fleet of pools (``"kind": "fleet"``, planner.recommend.mix) -------------------------


def is_fleet(data: Result) -> bool:
    """Whether ``data`` is a fleet of pools rather than a one-pool recommendation."""
    return data.get("kind") == "fleet"


def input_range(bounds: Any) -> str:
    """A pool's ``[low, high)`` input tokens in words: "0 to 1,023", "1,024 and up", "all"."""
    if not bounds:
        return "all"
    low, high = bounds[0], bounds[1] if len(bounds) > 1 else None
    if high is None:
        return "all" if not low else f"{int(low):,} and up"
    return f"{int(low):,} to {int(high) - 1:,}"


def fleet_pools(data: Result) -> pd.DataFrame:
    """One row per pool of a fleet: its model(s), the input sizes it serves, its instance and
    serving setup, its peak, how it is bought, its cost and simulated P99s."""
    pools = (data.get("winner") or {}).get("pools") or []
    return pd.DataFrame(
        [
            {
                "pool": p["pool"],
                "models": ", ".join(p.get("models") or []),
                "input tokens": input_range(p.get("input_tokens_range")),
                "share of requests": p.get("share_of_requests"),
                "$ per month": p.get("monthly_usd"),
                "instance": f"{p['provider']}/{p['region']}/{p['instance_type']}",
                "GPUs": f"{p['gpus_per_instance']} x {p['gpu']}",
                "precision / TP": f"{p['precision']} TP{p['tp']}",
                "peak instances": p.get("instances_peak"),
                "purchase": p.get("purchase"),
                "P99 TTFT (ms)": _ms(p.get("p99_ttft_s")),
                "P99 TPOT (ms)": _ms(p.get("p99_tpot_s")),
                "$ per million tokens": p.get("usd_per_million_tokens"),
                "met targets": p.get("verified"),
            }
            for p in pools
        ],
        columns=[
            "pool", "models", "input tokens", "share of requests", "$ per month", "instance",
            "GPUs", "precision / TP", "peak instances", "purchase", "P99 TTFT (ms)",
            "P99 TPOT (ms)", "$ per million tokens", "met targets",
        ],
    )  # fmt: skip


def fleet_models(data: Result) -> pd.DataFrame:
    """One row per model of a fleet: its pools' cost against its best single pool's, and its
    $ per million tokens (its pools' cost over their tokens)."""
    winner = data.get("winner") or {}
    pools = {p["pool"]: p for p in winner.get("pools") or []}
    rows = []
    for m in data.get("models") or winner.get("models") or []:
        own = [pools[name] for name in m.get("pools") or [] if name in pools]
        tokens = [
            float(p["monthly_usd"]) / float(p["usd_per_million_tokens"])
            for p in own
            if p.get("usd_per_million_tokens")
        ]
        monthly = m.get("monthly_usd")
        rows.append(
            {
                "model": m["model"],
                "share of requests": m.get("share_of_requests"),
                "pools": len(own),
                "$ per month": monthly,
                "one pool $ per month": m.get("single_pool_monthly_usd"),
                "saving $ per month": m.get("saving_vs_single_pool_usd"),
                "$ per million tokens": monthly / sum(tokens)
                if monthly is not None and tokens and len(tokens) == len(own)
                else None,
                "how": m.get("how"),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "model", "share of requests", "pools", "$ per month", "one pool $ per month",
            "saving $ per month", "$ per million tokens", "how",
        ],
    )  # fmt: skip


def fleet_hourly(data: Result) -> pd.DataFrame:
    """Per hour: the fleet's requests and instances, and each pool's instances."""
    hours = data["hourly"]
    frame = pd.DataFrame(
        {
            "hour (UTC)": [datetime.fromtimestamp(t, UTC) for t in hours["hour_start"]],
            "requests": hours["requests"],
            "instances": hours["instances"],
        }
    )
    for pool, counts in (hours.get("instances_by_pool") or {}).items():
        frame[f"{pool} instances"] = counts
    return frame


FLEET_TABLES: dict[str, Callable[[Result], pd.DataFrame]] = {
    "pools": fleet_pools,
    "models": fleet_models,
    "hourly": fleet_hourly,
}

TABLES: dict[str, Callable[[Result], pd.DataFrame]] = {
    "alternatives": alternatives,
    "rejections-by-reason": rejections_by_reason,
    "rejected": rejected,
    "purchase-options": purchase_options,
    "sensitivity": sensitivity,
    "hourly": hourly,
}


def result_tables(data: Result) -> dict[str, pd.DataFrame]:
    """Every table of a result, by name (the names of the CSV files a user downloads)."""
    tables = FLEET_TABLES if is_fleet(data) else TABLES
    return {name: build(data) for name, build in tables.items()}


def api_plan_monthly_usd(api: Mapping[str, Any]) -> float | None:
    """The monthly cost of the plan a recommendation's API block chose, when it chose the API
    for some traffic (the overflow plan) or all of it; None when it chose self-hosting."""
    if api.get("choice") == "overflow":
        value = (api.get("overflow") or {}).get("monthly_usd")
    elif api.get("choice") == "api":
        value = api.get("api_monthly_usd")
    else:
        return None
    return float(value) if isinstance(value, (int, float)) else None
