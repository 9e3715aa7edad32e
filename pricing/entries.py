"""Prices as values: a price in force with where it comes from (:class:`PriceEntry`), a
price-sheet version (:class:`VersionInfo`), what changed between two versions
(:class:`SheetDiff`, :func:`compare_versions`), and the filters' meaning (purchase-option
groups, GPU names). No store: :mod:`pricing.sheets` reads and writes these from the database.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from planner.common.text import closest, shown
from planner.errors import UsageError
from pricing.model import PricePoint, PurchaseOption
from pricing.snapshot import gpu_aliases

SourceKind = Literal["snapshot", "aws", "gcp", "azure", "user"]
#: Option groups for filters: ``reserved`` is reserved-1y and reserved-3y, etc.
OPTION_GROUPS = {
    "all": tuple(PurchaseOption),
    "reserved": (PurchaseOption.RESERVED_1Y, PurchaseOption.RESERVED_3Y),
    "savings-plan": (PurchaseOption.SAVINGS_PLAN_1Y, PurchaseOption.SAVINGS_PLAN_3Y),
    "committed": (PurchaseOption.COMMITTED_1Y, PurchaseOption.COMMITTED_3Y),
    "commitments": tuple(o for o in PurchaseOption if o.term_years),
}
Scope = Literal["all", "covered", "keys"]

STATUS_OK = "ok"  # VersionInfo.status of a version that loaded (a failed refresh is "failed")


@dataclass(frozen=True)
class VersionInfo:
    """One price-sheet version, detached from the session."""

    id: int
    source_kind: str
    label: str
    source_ref: str
    sha256: str | None
    fetched_at: datetime
    row_count: int
    status: str
    error: str | None

    def describe(self) -> str:
        return f"version {self.id} ({self.source_kind}: {self.label}, {self.fetched_at:%Y-%m-%d})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source_kind": self.source_kind,
            "label": self.label,
            "source_ref": self.source_ref,
            "sha256": self.sha256,
            "fetched_at": self.fetched_at.isoformat(),
            "row_count": self.row_count,
            "status": self.status,
            "error": self.error,
        }


@dataclass(frozen=True)
class PriceEntry:
    """A price in force, with the version it comes from and, for a user price, the list price
    it overrides (if any)."""

    point: PricePoint
    version_id: int
    source_kind: str
    overrides: PricePoint | None = None

    def to_dict(self) -> dict[str, Any]:
        data = self.point.to_dict()
        data["usd_per_gpu_hour"] = self.point.usd_per_gpu_hour
        data["version_id"] = self.version_id
        data["source_kind"] = self.source_kind
        data["list_usd_per_hour"] = self.overrides.usd_per_hour if self.overrides else None
        return data


def option_filter(option: str | None) -> tuple[PurchaseOption, ...] | None:
    """The purchase options an ``--option`` value selects (a group name or one option)."""
    if option is None:
        return None
    name = option.strip().lower()
    if name in OPTION_GROUPS:
        return OPTION_GROUPS[name]
    try:
        return (PurchaseOption(name),)
    except ValueError:
        known = [*OPTION_GROUPS, *(o.value for o in PurchaseOption)]
        raise UsageError(
            f"--option: unknown purchase option {shown(option)}; known (closest first): "
            f"{closest(option, known)}"
        ) from None


def gpu_matches(query: str, gpu_model: str) -> bool:
    """Whether a GPU query selects a model: the catalog name or alias, or a family prefix
    (``H100`` selects H100-SXM and H100-PCIe; ``a100`` both A100s)."""
    q = query.strip().lower()
    m = gpu_model.lower()
    if m == q or m.startswith(q + "-"):
        return True
    return gpu_aliases().get(q) == gpu_model


def natural(text: str) -> tuple[Any, ...]:
    """``g2-standard-8`` before ``g2-standard-12``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def sort_key(point: PricePoint) -> tuple[Any, ...]:
    return (
        point.provider.value,
        point.region,
        point.gpu_model,
        point.gpu_count,
        point.vcpus or 0,
        natural(point.instance_type),
        list(PurchaseOption).index(point.purchase_option),
        point.payment,
        point.plan_kind,
    )


# -- diff --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PriceChange:
    old: PricePoint
    new: PricePoint

    @property
    def pct_change(self) -> float:
        return (self.new.usd_per_hour / self.old.usd_per_hour - 1.0) * 100.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": list(self.new.key()),
            "gpu_model": self.new.gpu_model,
            "gpu_count": self.new.gpu_count,
            "old_usd_per_hour": self.old.usd_per_hour,
            "new_usd_per_hour": self.new.usd_per_hour,
            "pct_change": self.pct_change,
            "old_upfront_usd": self.old.upfront_usd,
            "new_upfront_usd": self.new.upfront_usd,
            "old_effective_date": self.old.effective_date,
            "new_effective_date": self.new.effective_date,
        }


@dataclass(frozen=True)
class SheetDiff:
    old: VersionInfo
    new: VersionInfo
    scope: Scope
    added: list[PricePoint] = field(default_factory=list)
    removed: list[PricePoint] = field(default_factory=list)
    changed: list[PriceChange] = field(default_factory=list)
    unchanged: int = 0

    def to_dict(self) -> dict[str, Any]:
        def brief(p: PricePoint) -> dict[str, Any]:
            return {
                "key": list(p.key()),
                "gpu_model": p.gpu_model,
                "gpu_count": p.gpu_count,
                "usd_per_hour": p.usd_per_hour,
                "upfront_usd": p.upfront_usd,
                "effective_date": p.effective_date,
            }

        return {
            "old": self.old.to_dict(),
            "new": self.new.to_dict(),
            "scope": self.scope,
            "added": [brief(p) for p in self.added],
            "removed": [brief(p) for p in self.removed],
            "changed": [c.to_dict() for c in self.changed],
            "unchanged": self.unchanged,
        }


def compare_versions(
    old_info: VersionInfo,
    new_info: VersionInfo,
    old_points: Sequence[PricePoint],
    new_points: Sequence[PricePoint],
    *,
    scope: Scope = "all",
) -> SheetDiff:
    """What changed from the prices of ``old_info`` to those of ``new_info`` (see
    :func:`pricing.sheets.diff`, which loads them): added, removed and changed prices."""
    if scope == "covered":
        covered = {(p.provider, p.region) for p in new_points}
        old_points = [p for p in old_points if (p.provider, p.region) in covered]
    elif scope == "keys":
        keys = {p.key() for p in new_points}
        old_points = [p for p in old_points if p.key() in keys]
    old_by_key = {p.key(): p for p in old_points}
    new_by_key = {p.key(): p for p in new_points}
    added = [p for k, p in new_by_key.items() if k not in old_by_key]
    removed = [p for k, p in old_by_key.items() if k not in new_by_key]
    changed = []
    unchanged = 0
    for key, new in new_by_key.items():
        old = old_by_key.get(key)
        if old is None:
            continue
        if same_price(old.usd_per_hour, new.usd_per_hour) and same_price(
            old.upfront_usd, new.upfront_usd
        ):
            unchanged += 1
        else:
            changed.append(PriceChange(old, new))
    added.sort(key=sort_key)
    removed.sort(key=sort_key)
    changed.sort(key=lambda c: (-abs(c.pct_change), sort_key(c.new)))
    return SheetDiff(old_info, new_info, scope, added, removed, changed, unchanged)


def same_price(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
