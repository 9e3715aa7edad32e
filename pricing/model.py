"""The normalized price point every source (bundled snapshot, cloud APIs, user sheets) produces."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class Provider(StrEnum):
    AWS = "aws"
    GCP = "gcp"
    AZURE = "azure"
    OTHER = "other"  # a user's own sheet (on-prem, a neocloud)


class PurchaseOption(StrEnum):
    """How an instance-hour is bought. Terms are in the name; upfront is a separate field."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"  # AWS spot, GCP spot/preemptible, Azure spot/low-priority
    RESERVED_1Y = "reserved-1y"  # AWS RI, Azure reservation
    RESERVED_3Y = "reserved-3y"
    SAVINGS_PLAN_1Y = "savings-plan-1y"  # AWS compute/instance SP, Azure savings plan
    SAVINGS_PLAN_3Y = "savings-plan-3y"
    COMMITTED_1Y = "committed-1y"  # GCP committed use
    COMMITTED_3Y = "committed-3y"

    @property
    def term_years(self) -> int:
        return 3 if self.value.endswith("3y") else 1 if self.value.endswith("1y") else 0


@dataclass(frozen=True)
class PricePoint:
    """One price of one instance type, in one region, bought one way.

    ``usd_per_hour`` is the effective hourly price: any upfront payment amortized over the term
    (``upfront_usd`` keeps the upfront itself). Unknown is absent, never zero.
    """

    provider: Provider
    region: str
    instance_type: str
    gpu_model: str  # a planner catalog GPU name where known (H100-SXM, A10G, ...)
    gpu_count: int
    purchase_option: PurchaseOption
    usd_per_hour: float
    source: str  # API name or URL
    effective_date: str  # ISO date the price took effect or was published
    gpu_memory_gb: float | None = None
    vcpus: int | None = None
    ram_gb: float | None = None
    upfront_usd: float = 0.0
    payment: str = ""  # reserved: no-upfront, partial-upfront, all-upfront
    plan_kind: str = ""  # savings plans: compute or instance-family
    currency: str = "USD"
    fetched_at: datetime | None = None

    @property
    def usd_per_gpu_hour(self) -> float:
        return self.usd_per_hour / self.gpu_count

    def key(self) -> tuple[str, str, str, str, str, str]:
        """What identifies a price across versions (to diff sheets)."""
        return (
            self.provider.value,
            self.region,
            self.instance_type,
            self.purchase_option.value,
            self.payment,
            self.plan_kind,
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["provider"] = self.provider.value
        data["purchase_option"] = self.purchase_option.value
        data["fetched_at"] = self.fetched_at.isoformat() if self.fetched_at else None
        return data
