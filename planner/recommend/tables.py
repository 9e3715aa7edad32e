"""A recommendation's result (``Recommendation.to_dict()``, or a stored one) as tables: what the
dashboard shows and offers as CSV, and what a report exports. Columns carry their units."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from planner.recommend.plan import hourly_by_purchase

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
    return {name: build(data) for name, build in TABLES.items()}
