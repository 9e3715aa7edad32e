"""GCP list prices for GPU machine types, assembled from the Cloud Billing Catalog.

Compute Engine does not price a machine type as one SKU: an ``a3-highgpu-8g`` is billed as 8 H100
GPU-hours + 208 A3 vCPU-hours + 1872 GiB-hours of A3 memory + its bundled 6 TiB of local SSD.
This loader lists every Compute Engine SKU (``CloudCatalogClient.list_skus`` on
``services/6F81-5844-456A``, USD), keeps the GPU, CPU, RAM and local-SSD SKUs of the families in
:data:`MACHINES`, and adds them up per machine type, region and usage type:

========================  =========================
SKU ``usageType``         purchase option
========================  =========================
OnDemand                  on-demand
Preemptible               spot (Spot and preemptible VMs share these SKUs)
Commit1Yr / Commit3Yr     committed-1y / committed-3y (resource-based commitments)
========================  =========================

A machine is priced for an option and region only when every component has a USD price there.
SKUs in another currency are skipped (and logged): the request asks for USD, and a price in IDR
must never be read as dollars. Of tiered rates the tier starting at 0 usage is taken.

Credentials: Application Default Credentials (``gcloud auth application-default login``, a
service account, or the metadata server), through the client library.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from google.api_core import exceptions as api_exceptions
from google.auth import exceptions as auth_exceptions
from google.cloud.billing_v1 import CloudCatalogClient, ListSkusRequest, Sku

from pricing.loaders import LoaderError
from pricing.loaders.common import HOURS_PER_MONTH, iso_date, log, utc_now
from pricing.model import PricePoint, Provider, PurchaseOption

DEFAULT_REGION = "us-central1"
COMPUTE_ENGINE_SERVICE = "services/6F81-5844-456A"
SOURCE = f"gcp cloudbilling list_skus {COMPUTE_ENGINE_SERVICE}"
PAGE_SIZE = 5000
TIMEOUT_S = 120.0

_OPTIONS = {
    "OnDemand": PurchaseOption.ON_DEMAND,
    "Preemptible": PurchaseOption.SPOT,
    "Commit1Yr": PurchaseOption.COMMITTED_1Y,
    "Commit3Yr": PurchaseOption.COMMITTED_3Y,
}


@dataclass(frozen=True)
class Machine:
    """A GPU machine type: what it bundles, and which SKU families bill it."""

    family: str  # SKU family of its vCPUs and memory: "A2", "A3", "G2"
    gpu: str  # GPU SKU key (see _GPU_PATTERNS)
    gpu_model: str  # planner catalog name
    gpu_count: int
    gpu_memory_gb: float
    vcpus: int
    ram_gib: float
    local_ssd_gib: float = 0.0  # bundled local SSD, billed with the machine


# Machine shapes from the GCP accelerator-optimized and G2 machine-type documentation
# (https://cloud.google.com/compute/docs/accelerator-optimized-machines and
# https://cloud.google.com/compute/docs/gpus): GPU count, vCPUs, memory (GiB), bundled local
# SSD. A3 High and A3 Mega come with 375 GiB local SSD disks, 16 per 8 GPUs (6 TiB); A2 Ultra
# with one 375 GiB disk per GPU. A2 High and G2 bundle none.
_A100_40 = ("A2", "a100-40gb", "A100-40GB", 40.0)
_A100_80 = ("A2", "a100-80gb", "A100-80GB", 80.0)
_H100 = ("A3", "h100", "H100-SXM", 80.0)
_H100_MEGA = ("A3", "h100-mega", "H100-SXM", 80.0)
_L4 = ("G2", "l4", "L4", 24.0)


def _m(
    kind: tuple[str, str, str, float], gpus: int, vcpus: int, ram: float, ssd: float = 0
) -> Machine:
    family, gpu, model, memory = kind
    return Machine(family, gpu, model, gpus, memory, vcpus, ram, ssd)


MACHINES: dict[str, Machine] = {
    "a2-highgpu-1g": _m(_A100_40, 1, 12, 85),
    "a2-highgpu-2g": _m(_A100_40, 2, 24, 170),
    "a2-highgpu-4g": _m(_A100_40, 4, 48, 340),
    "a2-highgpu-8g": _m(_A100_40, 8, 96, 680),
    "a2-ultragpu-1g": _m(_A100_80, 1, 12, 170, 375),
    "a2-ultragpu-2g": _m(_A100_80, 2, 24, 340, 750),
    "a2-ultragpu-4g": _m(_A100_80, 4, 48, 680, 1500),
    "a2-ultragpu-8g": _m(_A100_80, 8, 96, 1360, 3000),
    "a3-highgpu-1g": _m(_H100, 1, 26, 234, 750),
    "a3-highgpu-2g": _m(_H100, 2, 52, 468, 1500),
    "a3-highgpu-4g": _m(_H100, 4, 104, 936, 3000),
    "a3-highgpu-8g": _m(_H100, 8, 208, 1872, 6000),
    "a3-megagpu-8g": _m(_H100_MEGA, 8, 208, 1872, 6000),
    "g2-standard-4": _m(_L4, 1, 4, 16),
    "g2-standard-8": _m(_L4, 1, 8, 32),
    "g2-standard-12": _m(_L4, 1, 12, 48),
    "g2-standard-16": _m(_L4, 1, 16, 64),
    "g2-standard-24": _m(_L4, 2, 24, 96),
    "g2-standard-32": _m(_L4, 1, 32, 128),
    "g2-standard-48": _m(_L4, 4, 48, 192),
    "g2-standard-96": _m(_L4, 8, 96, 384),
}

# GPU SKU descriptions, after any "Commitment v1: " prefix: "Nvidia Tesla A100 GPU running in
# Americas", "Nvidia Tesla A100 80GB GPU attached to Spot Preemptible VMs running in ...",
# "Nvidia H100 80GB Mega GPU running in ...", "Nvidia L4 GPU running in ...".
_GPU_PATTERNS = [
    ("a100-80gb", re.compile(r"^Nvidia (Tesla )?A100 80GB\b")),
    ("a100-40gb", re.compile(r"^Nvidia (Tesla )?A100\b(?! 80GB)")),
    ("h100-mega", re.compile(r"^Nvidia H100 80GB (Mega|Plus)\b")),
    ("h100", re.compile(r"^Nvidia H100 80GB\b(?! (Mega|Plus))")),
    ("l4", re.compile(r"^Nvidia L4\b")),
]
# vCPU and memory SKUs: "A2 Instance Core running in Americas", "Spot Preemptible A3 Instance Ram
# running in ...", "Commitment v1: G2 Cpu in ... for 1 Year". A space must follow the family,
# so "A3Ultra"/"A3Plus"/"A3Edge" SKUs (other machine series) never match "A3".
_FAMILY_PATTERN = re.compile(r"^(A2|A3|G2) (Instance )?(Core|Cpu|Ram)\b")
# Local SSD: "SSD backed Local Storage", "SSD backed Local Storage attached to Spot Preemptible
# VMs", "Commitment v1: Local SSD In ... for 1 Year".
_SSD_PATTERN = re.compile(r"^(SSD backed Local Storage|Local SSD)\b")
_PREFIXES = ("Commitment v1: ", "Spot Preemptible ")

#: component -> usage units it may be priced in, and the factor to USD per hour
_UNITS = {
    "gpu": {"h": 1.0},
    "cpu": {"h": 1.0},
    "ram": {"GiBy.h": 1.0},
    "ssd": {"GiBy.mo": 1.0 / HOURS_PER_MONTH, "GiBy.h": 1.0},
}


@dataclass(frozen=True)
class _Rate:
    usd_per_hour: float  # per GPU, per vCPU, per GiB
    sku_id: str
    effective: str
    regions: int  # how many regions the SKU covers (a region's own SKU beats a multi-region one)


def fetch(
    region: str | None = None,
    *,
    client: CloudCatalogClient | None = None,
    now: datetime | None = None,
    machine_types: Iterable[str] | None = None,
) -> list[PricePoint]:
    """GPU machine prices in one GCP region (default us-central1): on-demand, spot, 1y/3y CUD.

    ``client`` is a ``CloudCatalogClient`` (made from Application Default Credentials when
    omitted); ``machine_types`` narrows :data:`MACHINES`. Raises :class:`LoaderError` when the
    catalog cannot be read.
    """
    region = region or DEFAULT_REGION
    fetched_at = utc_now(now)
    machines = _select(machine_types)
    if client is None:
        client = _client()
    rates, foreign = _rates(_list_skus(client), region, fetched_at)
    if foreign:
        log.warning(
            "gcp: skipped %d SKUs priced in %s, not USD", sum(foreign.values()), ", ".join(foreign)
        )
    points = []
    for instance_type, machine in machines.items():
        for option in _OPTIONS.values():
            point = _assemble(instance_type, machine, option, rates, region, fetched_at)
            if point is not None:
                points.append(point)
    if not points and foreign and not rates:
        raise LoaderError(
            Provider.GCP, f"the catalog answered in {', '.join(foreign)}, not USD; nothing priced"
        )
    return points


def _select(machine_types: Iterable[str] | None) -> dict[str, Machine]:
    if machine_types is None:
        return dict(MACHINES)
    wanted = list(machine_types)
    unknown = [m for m in wanted if m not in MACHINES]
    if unknown:
        raise LoaderError(
            Provider.GCP, f"unknown machine types {unknown}; known: {', '.join(MACHINES)}"
        )
    return {m: MACHINES[m] for m in wanted}


def _client() -> CloudCatalogClient:
    try:
        return CloudCatalogClient()
    except auth_exceptions.GoogleAuthError as exc:
        raise LoaderError(
            Provider.GCP, f"no usable Google credentials (Application Default Credentials): {exc}"
        ) from exc


def _list_skus(client: CloudCatalogClient) -> list[Sku]:
    """Every Compute Engine SKU, following ``next_page_token`` (the pager does the paging)."""
    request = ListSkusRequest(
        parent=COMPUTE_ENGINE_SERVICE, currency_code="USD", page_size=PAGE_SIZE
    )
    try:
        return list(client.list_skus(request=request, timeout=TIMEOUT_S))
    except api_exceptions.GoogleAPICallError as exc:
        raise LoaderError(Provider.GCP, f"list_skus: {exc}") from exc
    except api_exceptions.RetryError as exc:
        raise LoaderError(Provider.GCP, f"list_skus: gave up retrying: {exc}") from exc
    except auth_exceptions.GoogleAuthError as exc:
        raise LoaderError(Provider.GCP, f"list_skus: authentication failed: {exc}") from exc


# --- SKUs -> unit rates --------------------------------------------------------------------

_RateKey = tuple[PurchaseOption, str, str]  # option, component, key (gpu kind or SKU family)


def _rates(
    skus: Iterable[Sku], region: str, fetched_at: datetime
) -> tuple[dict[_RateKey, _Rate], dict[str, int]]:
    """The unit rate of every relevant SKU in ``region``; and a count of non-USD SKUs skipped."""
    rates: dict[_RateKey, _Rate] = {}
    foreign: dict[str, int] = {}
    for sku in skus:
        classified = _classify(sku)
        if classified is None or region not in sku.service_regions:
            continue
        option, component, key = classified
        price = _unit_price(sku, component, fetched_at)
        if price is None:
            continue
        if isinstance(price, str):  # a currency other than USD
            foreign[price] = foreign.get(price, 0) + 1
            continue
        rate = _Rate(price[0], sku.sku_id, price[1], len(sku.service_regions))
        kept = rates.get((option, component, key))
        if kept is None or (rate.regions, kept.effective) < (kept.regions, rate.effective):
            rates[(option, component, key)] = rate
    return rates, foreign


def _classify(sku: Sku) -> tuple[PurchaseOption, str, str] | None:
    """(option, component, key) of a GPU / vCPU / memory / local-SSD SKU we use, else None."""
    option = _OPTIONS.get(sku.category.usage_type)
    if option is None:
        return None
    description = sku.description
    for prefix in _PREFIXES:
        description = description.removeprefix(prefix)
    group = sku.category.resource_group
    if group == "GPU":
        for key, pattern in _GPU_PATTERNS:
            if pattern.match(description):
                return option, "gpu", key
        return None
    if group in ("CPU", "RAM"):
        match = _FAMILY_PATTERN.match(description)
        if match is None:
            return None
        word = match.group(3)
        component = "ram" if group == "RAM" else "cpu"
        if (component == "ram") != (word == "Ram"):  # the description contradicts the group
            return None
        return option, component, match.group(1)
    if group == "LocalSSD" and _SSD_PATTERN.match(description):
        return option, "ssd", "local-ssd"
    return None


def _unit_price(sku: Sku, component: str, fetched_at: datetime) -> tuple[float, str] | str | None:
    """(USD per hour per unit, effective date); the currency code if not USD; None if unusable."""
    infos = list(sku.pricing_info)
    if not infos:
        return None
    info = max(infos, key=lambda i: i.effective_time.timestamp() if i.effective_time else 0.0)
    expression = info.pricing_expression
    factor = _UNITS[component].get(expression.usage_unit)
    if factor is None:
        log.debug("gcp: %s priced per %s; skipped", sku.sku_id, expression.usage_unit)
        return None
    first = [t for t in expression.tiered_rates if t.start_usage_amount == 0]
    if not first:
        return None
    money = first[0].unit_price
    if money.currency_code != "USD":
        return money.currency_code or "unknown currency"
    value = money.units + money.nanos / 1e9
    if value <= 0:
        return None
    return value * factor, iso_date(info.effective_time, fetched_at)


# --- unit rates -> machine prices ----------------------------------------------------------


def _assemble(
    instance_type: str,
    machine: Machine,
    option: PurchaseOption,
    rates: Mapping[_RateKey, _Rate],
    region: str,
    fetched_at: datetime,
) -> PricePoint | None:
    parts: list[tuple[str, _Rate, float]] = [
        ("gpu", _get(rates, option, "gpu", machine.gpu), machine.gpu_count),
        ("cpu", _get(rates, option, "cpu", machine.family), machine.vcpus),
        ("ram", _get(rates, option, "ram", machine.family), machine.ram_gib),
    ]
    if machine.local_ssd_gib:
        parts.append(("local-ssd", _get(rates, option, "ssd", "local-ssd"), machine.local_ssd_gib))
    if any(rate is _MISSING for _, rate, _ in parts):
        return None
    total = sum(rate.usd_per_hour * quantity for _, rate, quantity in parts)
    skus = " + ".join(f"{name} {rate.sku_id}" for name, rate, _ in parts)
    return PricePoint(
        provider=Provider.GCP,
        region=region,
        instance_type=instance_type,
        gpu_model=machine.gpu_model,
        gpu_count=machine.gpu_count,
        purchase_option=option,
        usd_per_hour=total,
        source=f"{SOURCE}: {skus}",
        effective_date=max(rate.effective for _, rate, _ in parts),
        gpu_memory_gb=machine.gpu_memory_gb,
        vcpus=machine.vcpus,
        ram_gb=machine.ram_gib,
        currency="USD",
        fetched_at=fetched_at,
    )


_MISSING = _Rate(0.0, "", "", 0)


def _get(
    rates: Mapping[_RateKey, _Rate], option: PurchaseOption, component: str, key: str
) -> _Rate:
    return rates.get((option, component, key), _MISSING)
