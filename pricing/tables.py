"""Prices, versions and diffs as rows of plain values (one dict a row): what ``planner prices
list|versions|diff`` print, in a shape a table, a chart or a download takes as is."""

from __future__ import annotations

from typing import Any

from pricing.costs import commitment_break_evens
from pricing.entries import PriceEntry, SheetDiff, VersionInfo
from pricing.model import PricePoint


def option_label(point: PricePoint) -> str:
    """``reserved-1y (partial-upfront)``, ``savings-plan-3y (compute no-upfront)``."""
    extra = " ".join(x for x in (point.plan_kind, point.payment) if x)
    return point.purchase_option.value + (f" ({extra})" if extra else "")


def price_rows(entries: list[PriceEntry]) -> list[dict[str, Any]]:
    """One row per price in force (:func:`pricing.sheets.latest_entries`), in its order: the
    instance, the purchase option, $/hour and $/GPU-hour (effective: upfronts amortized), the
    break-even utilization of a commitment against on-demand of the same instance, and where
    the price comes from (a user sheet's row names the list price it overrides)."""
    break_evens = commitment_break_evens(e.point for e in entries)
    rows = []
    for entry in entries:
        p = entry.point
        rows.append(
            {
                "provider": p.provider.value,
                "region": p.region,
                "instance": p.instance_type,
                "gpu": p.gpu_model,
                "gpus": p.gpu_count,
                "gpu_memory_gb": p.gpu_memory_gb,
                "purchase_option": p.purchase_option.value,
                "option": option_label(p),
                "usd_per_hour": p.usd_per_hour,
                "usd_per_gpu_hour": p.usd_per_gpu_hour,
                "upfront_usd": p.upfront_usd,
                "break_even_utilization": break_evens.get(p.key()),
                "effective_date": p.effective_date,
                "version": entry.version_id,
                "source_kind": entry.source_kind,
                "list_usd_per_hour": entry.overrides.usd_per_hour if entry.overrides else None,
                "source": p.source,
            }
        )
    return rows


def version_rows(versions: list[VersionInfo]) -> list[dict[str, Any]]:
    """One row per price-sheet version (``planner prices versions``), oldest first."""
    return [
        {
            "id": v.id,
            "kind": v.source_kind,
            "label": v.label,
            "fetched_utc": v.fetched_at.strftime("%Y-%m-%d %H:%M"),
            "prices": v.row_count,
            "status": v.status,
            "error": v.error,
            "source": v.source_ref,
        }
        for v in versions
    ]


def _point_row(p: PricePoint) -> dict[str, Any]:
    return {
        "provider": p.provider.value,
        "region": p.region,
        "instance": p.instance_type,
        "gpu": p.gpu_model,
        "gpus": p.gpu_count,
        "option": option_label(p),
        "usd_per_hour": p.usd_per_hour,
        "upfront_usd": p.upfront_usd,
        "effective_date": p.effective_date,
    }


def diff_rows(result: SheetDiff) -> dict[str, list[dict[str, Any]]]:
    """A diff's ``changed``, ``added`` and ``removed`` prices as rows (``planner prices
    diff``): a change with its old and new $/hour and the % change, biggest first."""
    changed = [
        {
            "provider": c.new.provider.value,
            "region": c.new.region,
            "instance": c.new.instance_type,
            "gpu": c.new.gpu_model,
            "option": option_label(c.new),
            "old_usd_per_hour": c.old.usd_per_hour,
            "new_usd_per_hour": c.new.usd_per_hour,
            "change_pct": c.pct_change,
            "old_upfront_usd": c.old.upfront_usd,
            "new_upfront_usd": c.new.upfront_usd,
        }
        for c in result.changed
    ]
    return {
        "changed": changed,
        "added": [_point_row(p) for p in result.added],
        "removed": [_point_row(p) for p in result.removed],
    }


def comparison_rows(
    entries: list[PriceEntry], on_demand: list[PriceEntry]
) -> tuple[list[PriceEntry], list[dict[str, Any]]]:
    """``planner prices compare``: ``entries`` cheapest GPU-hour first, and a row of each (its
    ``to_dict``) with ``vs_cheapest_on_demand`` (its $/GPU-hour against the cheapest on-demand
    one among ``entries``) and ``break_even_utilization`` (a commitment's, against the on-demand
    price of the same instance among ``on_demand``: those beside it, whatever the filter)."""
    ordered = sorted(entries, key=lambda e: (e.point.usd_per_gpu_hour, e.point.usd_per_hour))
    cheapest = [
        e.point.usd_per_gpu_hour for e in ordered if e.point.purchase_option.value == "on-demand"
    ]
    baseline = min(cheapest) if cheapest else None
    break_evens = commitment_break_evens([e.point for e in ordered + on_demand])
    rows: list[dict[str, Any]] = []
    for e in ordered:
        data = e.to_dict()
        data["vs_cheapest_on_demand"] = (
            e.point.usd_per_gpu_hour / baseline - 1.0 if baseline else None
        )
        data["break_even_utilization"] = break_evens.get(e.point.key())
        rows.append(data)
    return ordered, rows
