"""What the three loaders share: term lengths, dates, de-duplication."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from pricing.model import PricePoint, Provider, PurchaseOption

log = logging.getLogger("pricing.loaders")

HOURS_PER_YEAR = 8760  # 365 x 24: how AWS and Azure amortize a 1-year term
HOURS_PER_MONTH = 730  # how GCP (and AWS/Azure calculators) turn a monthly price into hours
TERM_HOURS = {1: HOURS_PER_YEAR, 3: 3 * HOURS_PER_YEAR}


@dataclass(frozen=True)
class Shape:
    """The hardware of one instance type (what the price buys)."""

    gpu_model: str  # planner catalog name (data/catalog/gpus.csv)
    gpu_count: int
    gpu_memory_gb: float  # per GPU, as in the catalog
    vcpus: int | None = None
    ram_gb: float | None = None  # as the provider states it (GiB for all three)

    def price(
        self,
        provider: Provider,
        region: str,
        instance_type: str,
        option: PurchaseOption,
        usd_per_hour: float,
        *,
        source: str,
        effective: str,
        fetched_at: datetime,
        upfront_usd: float = 0.0,
        payment: str = "",
        plan_kind: str = "",
    ) -> PricePoint:
        """A USD price of an instance of this shape."""
        return PricePoint(
            provider=provider,
            region=region,
            instance_type=instance_type,
            gpu_model=self.gpu_model,
            gpu_count=self.gpu_count,
            purchase_option=option,
            usd_per_hour=usd_per_hour,
            source=source,
            effective_date=effective,
            gpu_memory_gb=self.gpu_memory_gb,
            vcpus=self.vcpus,
            ram_gb=self.ram_gb,
            upfront_usd=upfront_usd,
            payment=payment,
            plan_kind=plan_kind,
            currency="USD",
            fetched_at=fetched_at,
        )


def utc_now(now: datetime | None) -> datetime:
    """``now`` as an aware UTC datetime (naive values are taken as UTC)."""
    if now is None:
        return datetime.now(UTC)
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def iso_date(value: object, fallback: datetime) -> str:
    """The ISO date of a provider timestamp ('2024-05-01T00:00:00Z', a datetime), else fallback."""
    if isinstance(value, datetime):
        return value.date().isoformat()
    text = str(value or "").strip()
    if len(text) >= 10:
        try:
            return datetime.fromisoformat(text[:10]).date().isoformat()
        except ValueError:
            pass
    return fallback.date().isoformat()


def dedupe(points: Iterable[PricePoint]) -> list[PricePoint]:
    """One point per :meth:`PricePoint.key`: the most recent effective date wins, then the first.

    Order is kept (first appearance of each key), so results are stable across runs.
    """
    chosen: dict[tuple[str, ...], PricePoint] = {}
    for point in points:
        key = point.key()
        kept = chosen.get(key)
        if kept is None:
            chosen[key] = point
        elif point.effective_date > kept.effective_date:
            log.debug("%s: newer price replaces %s", key, kept.source)
            chosen[key] = point
        elif point.usd_per_hour != kept.usd_per_hour:
            log.debug("%s: ignoring a second price %s (%s)", key, point.usd_per_hour, point.source)
    return list(chosen.values())
