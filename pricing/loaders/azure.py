"""Azure list prices for GPU VM sizes, from the public Retail Prices REST API.

``GET https://prices.azure.com/api/retail/prices?api-version=2023-01-01-preview&$filter=...``
needs no credentials. The filter asks for ``serviceName eq 'Virtual Machines'``, one
``armRegionName`` and the GPU sizes in :data:`SIZES`; pages are followed through
``NextPageLink`` (only to the same scheme, host and port as the first request). The
2023-01-01-preview API version is the one that returns the ``savingsPlan`` array.

How items become prices:

* ``type`` Consumption, no "Spot"/"Low Priority" in ``meterName``/``skuName``: on-demand.
  Windows rows (``productName`` ending in "Windows") and Cloud Services rows are dropped: the
  Linux price is the compute price.
* Consumption with "Spot": spot. "Low Priority" rows are dropped: low-priority VMs are the Batch /
  Cloud Services predecessor of spot (retired for VMs), and one spot price per size is kept.
* The ``savingsPlan`` array of a Linux on-demand item: savings-plan-1y / -3y (``plan_kind``
  compute), ``retailPrice`` per hour.
* ``type`` Reservation: ``retailPrice`` is the price of the WHOLE term although
  ``unitOfMeasure`` says "1 Hour"; divided by 8760 (1 Year) or 26280 (3 Years) hours. Azure bills
  the same total upfront or monthly, so no upfront is recorded.
* Other currencies, other units, tiered rows (``tierMinimumUnits`` > 0), DevTest rows and $0.00
  rows are skipped.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from pricing.loaders import LoaderError
from pricing.loaders.common import TERM_HOURS, Shape, dedupe, iso_date, log, utc_now
from pricing.model import PricePoint, Provider, PurchaseOption

DEFAULT_REGION = "eastus"
BASE_URL = "https://prices.azure.com/api/retail/prices"
API_VERSION = "2023-01-01-preview"
TIMEOUT_S = 30.0
MAX_PAGES = 500
_RETRY_STATUSES = {429, 500, 502, 503, 504}

#: ARM size -> hardware. Whole-GPU sizes only: the NVads A10 v5 sizes below NV36 get a fraction
#: of a GPU (1/6, 1/3, 1/2), which a GPU count cannot express. Sources: Microsoft Learn VM size
#: pages (NVads A10 v5, NC A100 v4, ND H100 v5, ND H200 v5). Azure's A10 is the full NVIDIA A10
#: (24 GB); the planner catalog's nearest entry is A10G (same memory and bandwidth, modelled
#: there with A10 peaks). NC A100 v4 carries A100 80GB PCIe; the catalog's A100-80GB is the SXM4
#: part (2039 vs 1935 GB/s).
SIZES: dict[str, Shape] = {
    "Standard_NV36ads_A10_v5": Shape("A10G", 1, 24.0, 36, 440.0),
    "Standard_NV36adms_A10_v5": Shape("A10G", 1, 24.0, 36, 880.0),
    "Standard_NV72ads_A10_v5": Shape("A10G", 2, 24.0, 72, 880.0),
    "Standard_NC24ads_A100_v4": Shape("A100-80GB", 1, 80.0, 24, 220.0),
    "Standard_NC48ads_A100_v4": Shape("A100-80GB", 2, 80.0, 48, 440.0),
    "Standard_NC96ads_A100_v4": Shape("A100-80GB", 4, 80.0, 96, 880.0),
    "Standard_ND96isr_H100_v5": Shape("H100-SXM", 8, 80.0, 96, 1900.0),
    "Standard_ND96isr_H200_v5": Shape("H200", 8, 141.0, 96, 1850.0),
}

_RESERVATION_TERMS = {"1 Year": PurchaseOption.RESERVED_1Y, "3 Years": PurchaseOption.RESERVED_3Y}
_SAVINGS_PLAN_TERMS = {
    "1 Year": PurchaseOption.SAVINGS_PLAN_1Y,
    "3 Years": PurchaseOption.SAVINGS_PLAN_3Y,
}


def price_filter(region: str, sizes: list[str]) -> str:
    """The OData ``$filter``: values are case-sensitive in this API version."""
    skus = " or ".join(f"armSkuName eq '{size}'" for size in sizes)
    return f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' and ({skus})"


def first_page_url(region: str, sizes: list[str], base_url: str = BASE_URL) -> str:
    query = urllib.parse.urlencode(
        {"api-version": API_VERSION, "$filter": price_filter(region, sizes)},
        quote_via=urllib.parse.quote,
    )
    return f"{base_url}?{query}"


def fetch(
    region: str | None = None,
    *,
    client: Callable[[str], bytes] | None = None,
    now: datetime | None = None,
    base_url: str = BASE_URL,
    sizes: list[str] | None = None,
    timeout: float = TIMEOUT_S,
    retries: int = 3,
    backoff_s: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> list[PricePoint]:
    """GPU VM prices in one Azure region (default eastus): on-demand, spot, 1y/3y reservations
    and savings plans, from the Retail Prices API.

    ``client`` may replace the HTTP GET (a callable from URL to response body); by default
    urllib fetches ``base_url``, retrying 429 and 5xx answers ``retries`` times with exponential
    backoff (or the server's Retry-After). Raises :class:`LoaderError` on an HTTP error, an
    unreachable host, a malformed page or a NextPageLink that leaves ``base_url``'s host.
    """
    region = region or DEFAULT_REGION
    fetched_at = utc_now(now)
    wanted = list(sizes) if sizes is not None else list(SIZES)
    unknown = [s for s in wanted if s not in SIZES]
    if unknown:
        raise LoaderError(Provider.AZURE, f"unknown VM sizes {unknown}; known: {', '.join(SIZES)}")

    def get(url: str) -> bytes:
        return _http_get(url, timeout, retries, backoff_s, sleep)

    points: list[PricePoint] = []
    skipped: dict[str, int] = {}
    for item in _items(first_page_url(region, wanted, base_url), base_url, client or get):
        points += _parse_item(item, region, set(wanted), fetched_at, skipped)
    if skipped:
        log.info("azure: skipped %s", ", ".join(f"{n} {why}" for why, n in sorted(skipped.items())))
    return dedupe(points)


# --- HTTP and paging -----------------------------------------------------------------------


def _http_get(
    url: str, timeout: float, retries: int, backoff_s: float, sleep: Callable[[float], None]
) -> bytes:
    request = urllib.request.Request(
        url, headers={"Accept": "application/json", "User-Agent": "planner-price-loader"}
    )
    where = _where(url)
    for attempt in range(retries + 1):
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body: bytes = response.read()
                return body
        except urllib.error.HTTPError as exc:
            if exc.code in _RETRY_STATUSES and attempt < retries:
                sleep(_retry_after(exc.headers.get("Retry-After"), backoff_s * 2**attempt))
                continue
            detail = _error_detail(exc)
            raise LoaderError(
                Provider.AZURE, f"HTTP {exc.code} {exc.reason} from {where}{detail}"
            ) from exc
        except (OSError, http.client.HTTPException) as exc:  # refused, DNS, timeout, cut short
            if attempt < retries:
                sleep(backoff_s * 2**attempt)
                continue
            reason = getattr(exc, "reason", exc)
            raise LoaderError(Provider.AZURE, f"cannot reach {where}: {reason}") from exc
    raise AssertionError("unreachable")  # pragma: no cover


def _retry_after(header: str | None, default: float) -> float:
    try:
        return min(max(float(header or ""), 0.0), 120.0)
    except ValueError:
        return default


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """The API's own error message (``{"Error": {"Code", "Message"}}``), shortened."""
    try:
        body = json.loads(exc.read() or b"{}")
        error = body.get("Error") or body.get("error") or {}
        message = f"{error.get('Code', '')}: {error.get('Message', '')}".strip(": ")
    except (ValueError, AttributeError, OSError):
        return ""
    return f" ({message[:300]})" if message else ""


def _where(url: str) -> str:
    """scheme://host/path of a URL, without its query (for messages)."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    port = parts.port or {"https": 443, "http": 80}.get(parts.scheme, 0)
    return parts.scheme.lower(), f"{(parts.hostname or '').lower()}:{port}"


def _items(url: str, base_url: str, get: Callable[[str], bytes]) -> Iterator[Mapping[str, Any]]:
    """Every item of every page, following NextPageLink within base_url's origin."""
    seen: set[str] = set()
    page = 0
    next_url: str | None = url
    while next_url:
        page += 1
        if page > MAX_PAGES or next_url in seen:
            raise LoaderError(
                Provider.AZURE, f"paging did not end after {page - 1} pages (at {_where(next_url)})"
            )
        seen.add(next_url)
        body = get(next_url)
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise LoaderError(
                Provider.AZURE, f"malformed JSON on page {page} from {_where(next_url)}: {exc}"
            ) from exc
        if not isinstance(data, dict) or not isinstance(data.get("Items"), list):
            raise LoaderError(
                Provider.AZURE, f"page {page} from {_where(next_url)} has no Items list"
            )
        yield from (item for item in data["Items"] if isinstance(item, dict))
        link = data.get("NextPageLink")
        if link and _origin(link) != _origin(base_url):
            raise LoaderError(
                Provider.AZURE, f"NextPageLink leaves {_where(base_url)}: {_where(link)}"
            )
        next_url = link or None


# --- items -> prices -----------------------------------------------------------------------


def _parse_item(
    item: Mapping[str, Any],
    region: str,
    sizes: set[str],
    fetched_at: datetime,
    skipped: dict[str, int],
) -> list[PricePoint]:
    def skip(why: str) -> list[PricePoint]:
        skipped[why] = skipped.get(why, 0) + 1
        return []

    size = item.get("armSkuName", "")
    if size not in sizes or item.get("armRegionName") != region:
        return skip("rows of other sizes or regions")
    if item.get("serviceName", "Virtual Machines") != "Virtual Machines":
        return skip("rows of other services")
    if item.get("currencyCode", "USD") != "USD":
        return skip(f"rows in {item.get('currencyCode')}")
    if item.get("unitOfMeasure", "1 Hour") != "1 Hour":
        return skip("rows in other units")
    if (_number(item.get("tierMinimumUnits")) or 0.0) > 0:
        return skip("tiered rows")
    product = str(item.get("productName", ""))
    meter = f"{item.get('meterName', '')} {item.get('skuName', '')}"
    if product.endswith("Windows") or "Cloud Services" in product:
        return skip("Windows or Cloud Services rows")
    if "Low Priority" in meter:
        return skip("low-priority rows")
    shape = SIZES[size]
    price = _number(item.get("retailPrice", item.get("unitPrice")))
    effective = iso_date(item.get("effectiveStartDate"), fetched_at)
    source = f"azure retail prices {API_VERSION} {item.get('skuId') or size} {product}".rstrip()
    kind = item.get("type")

    def point(option: PurchaseOption, usd: float | None, plan_kind: str = "") -> list[PricePoint]:
        if usd is None or usd <= 0:
            return skip("$0.00 or unpriced rows")
        return [
            shape.price(
                Provider.AZURE,
                region,
                size,
                option,
                usd,
                source=source,
                effective=effective,
                fetched_at=fetched_at,
                plan_kind=plan_kind,
            )
        ]

    if kind == "Consumption":
        if "Spot" in meter:
            return point(PurchaseOption.SPOT, price)
        points = point(PurchaseOption.ON_DEMAND, price)
        for plan in item.get("savingsPlan") or []:
            option = _SAVINGS_PLAN_TERMS.get(plan.get("term", ""))
            if option is None:
                skip("savings plans of other terms")
                continue
            hourly = _number(plan.get("retailPrice", plan.get("unitPrice")))
            points += point(option, hourly, plan_kind="compute")
        return points
    if kind == "Reservation":
        option = _RESERVATION_TERMS.get(item.get("reservationTerm", ""))
        if option is None:
            return skip("reservations of other terms")
        # retailPrice is the whole term's price, whatever unitOfMeasure says
        return point(option, None if price is None else price / TERM_HOURS[option.term_years])
    return skip(f"{kind or 'untyped'} rows")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None
