"""AWS list prices for GPU instances, from three APIs through boto3.

* ``pricing.get_products`` (service AmazonEC2): on-demand and standard reserved-instance terms.
  Every ``PriceList`` element is a JSON *string*, decoded here. Queried once per family
  (``instanceType`` CONTAINS ``"p5."``, ...) with Linux / no pre-installed software / shared
  tenancy / used capacity; rows are checked again here, because the same instance type also
  has Windows, RHEL, Capacity Block and reservation-placeholder SKUs.
* ``savingsplans.describe_savings_plans_offering_rates``: Compute and EC2 Instance Savings Plans,
  1 and 3 years, no upfront, Linux/UNIX, shared tenancy.
* ``ec2.describe_spot_price_history``: Linux/UNIX spot prices over a lookback window; the median
  of every price seen, across all availability zones, per instance type.

Credentials come from boto3's standard chain (environment, profile, SSO, instance role). Clients
are made here unless the caller passes its own (:class:`AwsClients`), which is how the tests put a
botocore ``Stubber`` on real clients.
"""

from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import boto3  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import (  # type: ignore[import-untyped]
    BotoCoreError,
    ClientError,
)

from pricing.loaders import LoaderError
from pricing.loaders.common import TERM_HOURS, Shape, dedupe, iso_date, log, utc_now
from pricing.model import PricePoint, Provider, PurchaseOption

DEFAULT_REGION = "us-east-1"
PRICING_API_REGION = "us-east-1"  # Price List API endpoints: us-east-1, ap-south-1, eu-central-1
SAVINGS_PLANS_REGION = "us-east-1"  # Savings Plans is a global endpoint
DEFAULT_SPOT_LOOKBACK = timedelta(days=7)

#: instance family -> (planner catalog GPU, GB of memory per GPU). The GPU count, vCPUs and
#: memory of each size come from the Price List attributes (``gpu``, ``vcpu``, ``memory``).
#: Source: AWS accelerated-computing instance pages (G5: A10G; G6: L4; G6e: L40S; P4d: A100
#: 40 GB; P4de: A100 80 GB; P5: H100; P5e and P5en: H200 141 GB).
GPU_FAMILIES: dict[str, tuple[str, float]] = {
    "g5": ("A10G", 24.0),
    "g6": ("L4", 24.0),
    "g6e": ("L40S", 48.0),
    "p4d": ("A100-40GB", 40.0),
    "p4de": ("A100-80GB", 80.0),
    "p5": ("H100-SXM", 80.0),
    "p5e": ("H200", 141.0),
    "p5en": ("H200", 141.0),
}

#: what a usable Linux on-demand row looks like in the Price List
PRODUCT_FILTERS = {
    "operatingSystem": "Linux",
    "preInstalledSw": "NA",
    "tenancy": "Shared",
    "capacitystatus": "Used",
}

_RESERVED_PAYMENTS = {
    "No Upfront": "no-upfront",
    "Partial Upfront": "partial-upfront",
    "All Upfront": "all-upfront",
}
_RESERVED_TERMS = {
    "1yr": (PurchaseOption.RESERVED_1Y, 1),
    "3yr": (PurchaseOption.RESERVED_3Y, 3),
}
_PLAN_KINDS = {"Compute": "compute", "EC2Instance": "instance-family"}
_PLAN_DURATIONS = {
    365 * 24 * 3600: PurchaseOption.SAVINGS_PLAN_1Y,
    3 * 365 * 24 * 3600: PurchaseOption.SAVINGS_PLAN_3Y,
}

SOURCE_PRODUCTS = "aws pricing.get_products AmazonEC2"
SOURCE_SAVINGS_PLANS = "aws savingsplans.describe_savings_plans_offering_rates"
SOURCE_SPOT = "aws ec2.describe_spot_price_history"

T = TypeVar("T")


@dataclass(frozen=True)
class AwsClients:
    """The three boto3 clients the loader uses (any may be a Stubber-wrapped real client)."""

    pricing: Any
    savingsplans: Any
    ec2: Any

    @classmethod
    def create(cls, region: str, session: Any | None = None) -> AwsClients:
        """Clients from boto3's standard credential chain; adaptive retries on throttling."""
        session = session or boto3.session.Session()
        config = Config(retries={"mode": "adaptive", "max_attempts": 8})
        return cls(
            pricing=session.client("pricing", region_name=PRICING_API_REGION, config=config),
            savingsplans=session.client(
                "savingsplans", region_name=SAVINGS_PLANS_REGION, config=config
            ),
            ec2=session.client("ec2", region_name=region, config=config),
        )


def fetch(
    region: str | None = None,
    *,
    client: AwsClients | None = None,
    now: datetime | None = None,
    spot_lookback: timedelta = DEFAULT_SPOT_LOOKBACK,
    savings_plans: bool = True,
    spot: bool = True,
    session: Any | None = None,
) -> list[PricePoint]:
    """GPU instance prices in one AWS region (default us-east-1), every purchase option.

    On-demand and reserved come from the Price List; the instance types found there (with their
    GPU count, vCPUs and memory) are the ones priced for savings plans and spot. Raises
    :class:`LoaderError` naming the API call and AWS's error code when any call fails.
    """
    region = region or DEFAULT_REGION
    fetched_at = utc_now(now)
    if client is None:
        client = _guard("creating clients", lambda: AwsClients.create(region, session))
    shapes, points = _products(client.pricing, region, fetched_at)
    if savings_plans and shapes:
        points += _savings_plans(client.savingsplans, region, shapes, fetched_at)
    if spot and shapes:
        points += _spot(client.ec2, region, shapes, fetched_at, spot_lookback)
    return dedupe(points)


# --- errors --------------------------------------------------------------------------------


def _guard(what: str, call: Callable[[], T]) -> T:
    """Run one AWS call; botocore failures become a LoaderError naming the call and the reason."""
    try:
        return call()
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code", "error")
        message = error.get("Message", "")
        raise LoaderError(Provider.AWS, f"{what}: {code}: {message}".rstrip(": ")) from exc
    except BotoCoreError as exc:  # no credentials, no region, endpoint unreachable, ...
        raise LoaderError(Provider.AWS, f"{what}: {exc}") from exc


def _pages(what: str, pages: Iterator[T]) -> Iterator[T]:
    """Iterate a paginator's pages, each page fetch guarded."""
    while True:
        page = _guard(what, lambda: next(pages, None))
        if page is None:
            return
        yield page


# --- Price List: on-demand and reserved ----------------------------------------------------


def product_filters(region: str, family: str) -> list[dict[str, str]]:
    """The ``get_products`` filters for one instance family in one region."""
    filters = [
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
        {"Type": "CONTAINS", "Field": "instanceType", "Value": f"{family}."},
    ]
    filters += [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in PRODUCT_FILTERS.items()]
    return filters


def _products(
    pricing: Any, region: str, fetched_at: datetime
) -> tuple[dict[str, Shape], list[PricePoint]]:
    shapes: dict[str, Shape] = {}
    points: list[PricePoint] = []
    paginator = pricing.get_paginator("get_products")
    for family in GPU_FAMILIES:
        pages = paginator.paginate(
            ServiceCode="AmazonEC2",
            FormatVersion="aws_v1",
            Filters=product_filters(region, family),
        )
        for page in _pages("pricing.get_products", iter(pages)):
            for element in page.get("PriceList", []):
                item = _decode_price_list_item(element)
                parsed = _parse_product(item, region, fetched_at)
                if parsed is not None:
                    instance_type, shape, item_points = parsed
                    shapes.setdefault(instance_type, shape)
                    points += item_points
    return shapes, points


def _decode_price_list_item(element: object) -> Mapping[str, Any]:
    """A PriceList element: a JSON string in the live API (a dict is accepted as well)."""
    if isinstance(element, Mapping):
        return element
    if not isinstance(element, str | bytes):
        raise LoaderError(Provider.AWS, f"PriceList element is {type(element).__name__}")
    try:
        item = json.loads(element)
    except json.JSONDecodeError as exc:
        raise LoaderError(Provider.AWS, f"PriceList element is not valid JSON ({exc})") from exc
    if not isinstance(item, dict):
        raise LoaderError(Provider.AWS, "PriceList element is not a JSON object")
    return item


def _family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def _is_usable_product(attributes: Mapping[str, str], region: str) -> bool:
    """Linux, shared, used capacity, no pre-installed software, this region, not a capacity block.

    The request already asks for most of this; it is checked again because a Capacity Block SKU
    ($0.00, ``marketoption`` CapacityBlock, operation RunInstances:CB) shares every one of those
    attributes, and other operating systems differ only in ``operation``.
    """
    if _family(attributes.get("instanceType", "")) not in GPU_FAMILIES:
        return False
    if any(attributes.get(k, v) != v for k, v in PRODUCT_FILTERS.items()):
        return False
    if attributes.get("regionCode", region) != region:
        return False
    if attributes.get("marketoption", "OnDemand") != "OnDemand":  # CapacityBlock
        return False
    operation = attributes.get("operation", "RunInstances")
    return operation == "RunInstances"  # RunInstances:0002 Windows, :0010 RHEL, :CB blocks, ...


def _shape(attributes: Mapping[str, str]) -> Shape | None:
    gpu_model, gpu_memory = GPU_FAMILIES[_family(attributes["instanceType"])]
    gpus = _int(attributes.get("gpu"))
    if not gpus:
        log.warning("aws: %s has no GPU count; skipped", attributes["instanceType"])
        return None
    memory = attributes.get("memory", "").split()
    return Shape(
        gpu_model=gpu_model,
        gpu_count=gpus,
        gpu_memory_gb=gpu_memory,
        vcpus=_int(attributes.get("vcpu")),
        ram_gb=_float(memory[0]) if memory else None,
    )


def _parse_product(
    item: Mapping[str, Any], region: str, fetched_at: datetime
) -> tuple[str, Shape, list[PricePoint]] | None:
    product = item.get("product", {})
    attributes: Mapping[str, str] = product.get("attributes", {})
    if not _is_usable_product(attributes, region):
        return None
    shape = _shape(attributes)
    if shape is None:
        return None
    instance_type = attributes["instanceType"]
    terms = item.get("terms", {})
    points: list[PricePoint] = []
    for term in terms.get("OnDemand", {}).values():
        hourly, upfront = _term_prices(term)
        if hourly is None or hourly <= 0 or upfront:  # $0.00 rows carry no price
            continue
        points.append(
            _point(
                region,
                instance_type,
                shape,
                PurchaseOption.ON_DEMAND,
                hourly,
                source=f"{SOURCE_PRODUCTS} {term.get('sku', product.get('sku', ''))}."
                f"{term.get('offerTermCode', '')}",
                effective=iso_date(term.get("effectiveDate"), fetched_at),
                fetched_at=fetched_at,
            )
        )
    for term in terms.get("Reserved", {}).values():
        point = _reserved_point(term, region, instance_type, shape, fetched_at)
        if point is not None:
            points.append(point)
    return instance_type, shape, points


def _term_prices(term: Mapping[str, Any]) -> tuple[float | None, float]:
    """(USD per hour from the ``Hrs`` dimension, USD upfront from the ``Quantity`` dimension)."""
    hourly: float | None = None
    upfront = 0.0
    for dimension in term.get("priceDimensions", {}).values():
        usd = _float(dimension.get("pricePerUnit", {}).get("USD"))
        if usd is None:
            continue
        unit = dimension.get("unit", "")
        if unit == "Hrs":
            hourly = usd
        elif unit == "Quantity":  # "Upfront Fee"
            upfront += usd
    return hourly, upfront


def _reserved_point(
    term: Mapping[str, Any], region: str, instance_type: str, shape: Shape, fetched_at: datetime
) -> PricePoint | None:
    attributes = term.get("termAttributes", {})
    if attributes.get("OfferingClass") != "standard":  # convertible RIs are not modelled
        return None
    length = _RESERVED_TERMS.get(attributes.get("LeaseContractLength", ""))
    payment = _RESERVED_PAYMENTS.get(attributes.get("PurchaseOption", ""))
    if length is None or payment is None:
        return None
    option, years = length
    hourly, upfront = _term_prices(term)
    if hourly is None and not upfront:
        return None
    effective = (hourly or 0.0) + upfront / TERM_HOURS[years]  # upfront amortized over the term
    if effective <= 0:
        return None
    return _point(
        region,
        instance_type,
        shape,
        option,
        effective,
        source=f"{SOURCE_PRODUCTS} {term.get('sku', '')}.{term.get('offerTermCode', '')}",
        effective=iso_date(term.get("effectiveDate"), fetched_at),
        fetched_at=fetched_at,
        upfront_usd=upfront,
        payment=payment,
    )


# --- Savings Plans -------------------------------------------------------------------------


def savings_plan_request(region: str, instance_types: list[str]) -> dict[str, Any]:
    """The ``describe_savings_plans_offering_rates`` arguments (without ``nextToken``)."""
    return {
        "savingsPlanTypes": list(_PLAN_KINDS),
        "savingsPlanPaymentOptions": ["No Upfront"],
        "products": ["EC2"],
        "serviceCodes": ["AmazonEC2"],
        "operations": ["RunInstances"],
        "filters": [
            {"name": "region", "values": [region]},
            {"name": "instanceType", "values": instance_types},
            {"name": "productDescription", "values": ["Linux/UNIX"]},
            {"name": "tenancy", "values": ["shared"]},
        ],
        "maxResults": 1000,
    }


def _savings_plans(
    client: Any, region: str, shapes: Mapping[str, Shape], fetched_at: datetime
) -> list[PricePoint]:
    request = savings_plan_request(region, sorted(shapes))
    points: list[PricePoint] = []
    tokens: set[str] = set()
    token: str | None = None
    while True:  # botocore has no paginator for this operation: follow nextToken
        kwargs = dict(request, nextToken=token) if token else request
        page = _guard(
            "savingsplans.describe_savings_plans_offering_rates",
            functools.partial(client.describe_savings_plans_offering_rates, **kwargs),
        )
        for rate in page.get("searchResults", []):
            point = _savings_plan_point(rate, region, shapes, fetched_at)
            if point is not None:
                points.append(point)
        token = page.get("nextToken") or None
        if token is None or token in tokens:  # a repeated token would loop forever
            return points
        tokens.add(token)


def _savings_plan_point(
    rate: Mapping[str, Any], region: str, shapes: Mapping[str, Shape], fetched_at: datetime
) -> PricePoint | None:
    offering = rate.get("savingsPlanOffering", {})
    properties = {p.get("name"): p.get("value") for p in rate.get("properties", [])}
    instance_type = properties.get("instanceType", "")
    shape = shapes.get(instance_type)
    option = _PLAN_DURATIONS.get(int(offering.get("durationSeconds") or 0))
    kind = _PLAN_KINDS.get(offering.get("planType", ""))
    usd = _float(rate.get("rate"))
    if (
        shape is None
        or option is None
        or kind is None
        or usd is None
        or usd <= 0
        or offering.get("currency", "USD") != "USD"
        or offering.get("paymentOption", "No Upfront") != "No Upfront"
        or rate.get("unit", "Hrs") != "Hrs"
        or properties.get("region", region) != region
        or properties.get("productDescription", "Linux/UNIX") != "Linux/UNIX"
        or properties.get("tenancy", "shared").lower() != "shared"
        or "BoxUsage" not in rate.get("usageType", "BoxUsage")  # not dedicated/host/unused
        or rate.get("operation", "RunInstances") != "RunInstances"
    ):
        return None
    return _point(
        region,
        instance_type,
        shape,
        option,
        usd,
        source=f"{SOURCE_SAVINGS_PLANS} offering {offering.get('offeringId', '')}".rstrip(),
        effective=fetched_at.date().isoformat(),  # the API gives no date: the day it was read
        fetched_at=fetched_at,
        payment="no-upfront",
        plan_kind=kind,
    )


# --- Spot ----------------------------------------------------------------------------------


def _spot(
    ec2: Any,
    region: str,
    shapes: Mapping[str, Shape],
    fetched_at: datetime,
    lookback: timedelta,
) -> list[PricePoint]:
    start = fetched_at - lookback
    paginator = ec2.get_paginator("describe_spot_price_history")
    pages = paginator.paginate(
        InstanceTypes=sorted(shapes),
        ProductDescriptions=["Linux/UNIX"],
        StartTime=start,
        EndTime=fetched_at,
    )
    prices: dict[str, list[float]] = {}
    zones: dict[str, set[str]] = {}
    for page in _pages("ec2.describe_spot_price_history", iter(pages)):
        for record in page.get("SpotPriceHistory", []):
            instance_type = record.get("InstanceType", "")
            usd = _float(record.get("SpotPrice"))
            if (
                instance_type not in shapes
                or usd is None
                or usd <= 0
                or record.get("ProductDescription") != "Linux/UNIX"
            ):
                continue
            prices.setdefault(instance_type, []).append(usd)
            zones.setdefault(instance_type, set()).add(record.get("AvailabilityZone", "?"))
    days = lookback.total_seconds() / 86400
    return [
        _point(
            region,
            instance_type,
            shapes[instance_type],
            PurchaseOption.SPOT,
            statistics.median(values),
            source=f"{SOURCE_SPOT} median of {len(values)} prices in "
            f"{len(zones[instance_type])} zones over {days:g} days",
            effective=fetched_at.date().isoformat(),
            fetched_at=fetched_at,
        )
        for instance_type, values in sorted(prices.items())
    ]


# --- helpers -------------------------------------------------------------------------------


def _point(
    region: str,
    instance_type: str,
    shape: Shape,
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
    return shape.price(
        Provider.AWS,
        region,
        instance_type,
        option,
        usd_per_hour,
        source=source,
        effective=effective,
        fetched_at=fetched_at,
        upfront_usd=upfront_usd,
        payment=payment,
        plan_kind=plan_kind,
    )


def _float(value: object) -> float | None:
    try:
        return float(str(value).replace(",", ""))
    except (TypeError, ValueError):
        return None


def _int(value: object) -> int | None:
    number = _float(value)
    return int(number) if number is not None and number.is_integer() else None
