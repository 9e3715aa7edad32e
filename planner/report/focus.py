"""The report's projection as a FinOps FOCUS 1.2 cost and usage CSV, for finance systems.

FOCUS (FinOps Open Cost and Usage Specification, https://focus.finops.org) version **1.2** is
pinned: the newest version the FinOps Foundation's validator (focus-validator 2.2.1, rules
1.2.0.1) checks, and a test runs that validator on a written file. Beside the data goes the
metadata (``<name>.focus-metadata.json``: FocusVersion, DataGenerator, SchemaId, CreationDate and
a ColumnDefinition per column). The file is a *projection*: the planned charges, month by month
and scenario by scenario (``x_Scenario``), not a bill; filter on one scenario before adding up.

Rows per projection row (month, scenario, provider, region, instance type, purchase option):

* on-demand: one Usage row, PricingCategory Standard;
* spot: one Usage row, PricingCategory Dynamic (ListCost at the on-demand price);
* a commitment (reserved, savings plan, committed use):
  - in the month an upfront is paid, a Purchase row, ChargeFrequency One-Time, BilledCost = the
    upfront, EffectiveCost = 0 (it pays for future usage; FOCUS 1.1, EffectiveCost);
  - the month's commitment fee, a Purchase row, ChargeFrequency Recurring, BilledCost = the fee,
    EffectiveCost = 0;
  - the committed hours as Usage rows, PricingCategory Committed, BilledCost = 0, EffectiveCost =
    the month's amortized cost (fee plus the month's share of the upfront), split between
    CommitmentDiscountStatus Used and Unused by the commitment's expected utilization.

Columns FOCUS 1.2 makes conditional on a concept are written because planner has the concept:
RegionName (from :mod:`pricing.regions`, else the id), Tags (planner's tags as a JSON object),
SkuId / SkuPriceId (planner's own ids, :func:`sku_id`: price sheets carry no provider SKU),
CommitmentDiscountQuantity / Unit, SubAccountId / Name (null: a report has no account) and
InvoiceId (null: a projection has no invoice). ``x_Model`` / ``x_Pool`` come from the
projection's optional ``model`` / ``pool`` columns (multi-pool fleets), null without them.

So per month and scenario, BilledCost adds up to the report's cash view and EffectiveCost to its
amortized view. ListCost is the on-demand price times the hours (what the same hours cost with
no discount); ContractedCost equals ListCost (planner prices at list, without negotiated
discounts); Unused rows have ListCost 0 (nothing was consumed). Money is in the report's
currency, unrounded to 10 decimal places; dates are ISO 8601 UTC month bounds.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

import pandas as pd

from planner.common.csvsafe import safe_text
from planner.common.files import atomic_output, check_output_path, writes_in_place
from planner.common.text import shown
from planner.errors import UsageError
from planner.report.model import API_OPTION, SCENARIOS, Report, first_of_next_month
from pricing.regions import region_name

FOCUS_VERSION = "1.2"
METADATA_SUFFIX = ".focus-metadata.json"
HOURS_PER_YEAR = 8760  # the term hours planner's prices use (pricing.loaders: 8760 h a year)
DECIMAL_PLACES = 10

STRING, DECIMAL, DATETIME, INTEGER, JSON = "STRING", "DECIMAL", "DATETIME", "INTEGER", "JSON"

#: FOCUS 1.2 columns written, in the specification's (alphabetical) order, with their types
FOCUS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("BilledCost", DECIMAL),
    ("BillingAccountId", STRING),
    ("BillingAccountName", STRING),
    ("BillingCurrency", STRING),
    ("BillingPeriodEnd", DATETIME),
    ("BillingPeriodStart", DATETIME),
    ("ChargeCategory", STRING),
    ("ChargeClass", STRING),
    ("ChargeDescription", STRING),
    ("ChargeFrequency", STRING),
    ("ChargePeriodEnd", DATETIME),
    ("ChargePeriodStart", DATETIME),
    ("CommitmentDiscountCategory", STRING),
    ("CommitmentDiscountId", STRING),
    ("CommitmentDiscountName", STRING),
    ("CommitmentDiscountQuantity", DECIMAL),
    ("CommitmentDiscountStatus", STRING),
    ("CommitmentDiscountType", STRING),
    ("CommitmentDiscountUnit", STRING),
    ("ConsumedQuantity", DECIMAL),
    ("ConsumedUnit", STRING),
    ("ContractedCost", DECIMAL),
    ("ContractedUnitPrice", DECIMAL),
    ("EffectiveCost", DECIMAL),
    ("InvoiceId", STRING),
    ("InvoiceIssuerName", STRING),
    ("ListCost", DECIMAL),
    ("ListUnitPrice", DECIMAL),
    ("PricingCategory", STRING),
    ("PricingQuantity", DECIMAL),
    ("PricingUnit", STRING),
    ("ProviderName", STRING),
    ("PublisherName", STRING),
    ("RegionId", STRING),
    ("RegionName", STRING),
    ("ResourceId", STRING),
    ("ResourceName", STRING),
    ("ResourceType", STRING),
    ("ServiceCategory", STRING),
    ("ServiceName", STRING),
    ("ServiceSubcategory", STRING),
    ("SkuId", STRING),
    ("SkuMeter", STRING),
    ("SkuPriceDetails", JSON),
    ("SkuPriceId", STRING),
    ("SubAccountId", STRING),
    ("SubAccountName", STRING),
    ("Tags", JSON),
)
#: planner's own columns (FOCUS: custom columns are prefixed ``x_`` and come last)
CUSTOM_COLUMNS: tuple[tuple[str, str], ...] = (
    ("x_Scenario", STRING),  # low | expected | high
    ("x_RecommendationId", INTEGER),
    ("x_PurchaseOption", STRING),  # planner's name: on-demand, spot, committed-3y ...
    ("x_TokensMillions", DECIMAL),  # tokens served by the row's hours, millions
    ("x_CostPerMillionTokens", DECIMAL),  # the month's amortized $ / million tokens (scenario)
    ("x_P99TtftMs", DECIMAL),  # the plan's P99 time to first token, ms
    ("x_Model", STRING),  # the projection row's model, when it carries one (multi-pool fleets)
    ("x_Pool", STRING),  # the projection row's pool, when it carries one
)
COLUMNS = tuple(name for name, _ in FOCUS_COLUMNS + CUSTOM_COLUMNS)
MONEY_COLUMNS = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost")

CHARGE_CATEGORIES = ("Usage", "Purchase")  # the FOCUS values this writer uses
PRICING_CATEGORIES = ("Standard", "Dynamic", "Committed")
COMMITMENT_STATUSES = ("Used", "Unused")
CHARGE_FREQUENCIES = ("One-Time", "Recurring", "Usage-Based")

#: the FOCUS 1.2 service subcategory of a GPU virtual machine: planner buys instances of the
#: providers' VM services (ServiceCategory Compute); "AI Platforms" belongs to the category "AI
#: and Machine Learning", the managed AI services (SageMaker, Vertex AI), not their VMs
SERVICE_SUBCATEGORY = "Virtual Machines"
SKU_METER = "Instance Hours"
#: planner's tag keys: FOCUS wants provider-defined tag keys behind a prefix of their own
TAG_PREFIX = "planner:"

PROVIDER_NAMES = {"aws": "AWS", "gcp": "Google Cloud", "azure": "Microsoft"}
SERVICE_NAMES = {
    "aws": "Amazon Elastic Compute Cloud",
    "gcp": "Compute Engine",
    "azure": "Virtual Machines",
}
#: a per-token API's rows (planner.report.api): FOCUS 1.2's category of managed AI services and
#: its subcategory of generative models, priced per million tokens and consumed in tokens
API_SERVICE_CATEGORY = "AI and Machine Learning"
API_SERVICE_SUBCATEGORY = "Generative AI"
API_PRICING_UNIT = "1000000 Tokens"  # FOCUS unit format: "<quantity> <units>"
TOKENS_PER_PRICE_UNIT = 1_000_000
API_PROVIDER_NAMES = {
    "openai": "OpenAI",
    "anthropic": "Anthropic",
    "google": "Google",
    "azure": "Microsoft",
    "bedrock": "AWS",
    "together": "Together AI",
    "fireworks": "Fireworks AI",
    "groq": "Groq",
    "deepinfra": "DeepInfra",
}
API_SERVICE_NAMES = {
    "openai": "OpenAI API",
    "anthropic": "Claude API",
    "google": "Gemini API",
    "azure": "Azure OpenAI",
    "bedrock": "Amazon Bedrock",
    "together": "Together AI Inference",
    "fireworks": "Fireworks AI Inference",
    "groq": "GroqCloud",
    "deepinfra": "DeepInfra Inference",
}
COMMITMENT_TYPES = {
    ("aws", "reserved"): "Reserved Instance",
    ("azure", "reserved"): "Reservation",
    ("gcp", "committed"): "Committed Use Discount",
    ("aws", "savings-plan"): "Savings Plan",
    ("azure", "savings-plan"): "Savings Plan",
}


@dataclass(frozen=True)
class _Commitment:
    """What the FOCUS rows of one commitment need from the report's commitment schedule."""

    utilization: float  # share of committed hours used (expected scenario)
    break_even: float | None
    instances: float | None
    term_years: int
    hourly_usd: float | None  # $ an hour committed (a savings plan's commitment)


def write_focus_csv(
    report: Report,
    path: Path,
    *,
    scenarios: Sequence[str] = SCENARIOS,
    option: str = "--out",
) -> Path:
    """Write the report's projection as a FOCUS 1.2 CSV to ``path`` and its metadata beside it
    (:func:`metadata_path`; not for a device or pipe such as /dev/stdout), both whole or not at
    all. Returns ``path``."""
    check_output_path(path, option)
    frame = focus_frame(report, scenarios)
    data = csv_text(frame).encode("utf-8")
    if writes_in_place(path):
        with atomic_output(path, option) as temp:
            temp.write_bytes(data)
        return path
    meta = metadata_path(path)
    check_output_path(meta, option)
    metadata = focus_metadata(report, path.name, len(frame), len(data))
    text = json.dumps(metadata, indent=2) + "\n"
    with atomic_output(path, option) as temp, atomic_output(meta, option) as meta_temp:
        temp.write_bytes(data)
        meta_temp.write_text(text, encoding="utf-8")
    return path


def metadata_path(path: Path) -> Path:
    """``plan.csv`` -> ``plan.focus-metadata.json`` (in the same folder)."""
    return path.with_name(path.stem + METADATA_SUFFIX)


# --- rows ----------------------------------------------------------------------------------


def focus_frame(report: Report, scenarios: Sequence[str] = SCENARIOS) -> pd.DataFrame:
    """The FOCUS rows of ``report`` (columns :data:`COLUMNS`; None where FOCUS wants null),
    expected scenario first, then by month."""
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown or not scenarios:
        raise UsageError(
            f"FOCUS CSV: scenario(s) {', '.join(shown(s) for s in unknown) or '(none)'}: "
            f"expected some of {', '.join(SCENARIOS)}"
        )
    projection = report.projection
    commitments = _commitments(report)
    list_rates = _list_rates(report, commitments)
    per_million = _cost_per_million_tokens(projection)
    order = sorted(scenarios, key=lambda s: (s != "expected", SCENARIOS.index(s)))
    rows: list[dict[str, Any]] = []
    for scenario in order:
        part = projection[projection["scenario"] == scenario].sort_values(
            ["month", "provider", "region", "instance_type", "purchase_option"], kind="stable"
        )
        for record in _records(part):
            rows += _rows(report, record, commitments, list_rates, per_million)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _rows(
    report: Report,
    record: dict[str, Any],
    commitments: dict[tuple[str, ...], _Commitment],
    list_rates: dict[tuple[str, ...], float],
    per_million: dict[tuple[Any, ...], float | None],
) -> list[dict[str, Any]]:
    if record["purchase_option"] == API_OPTION:
        return _api_rows(report, record, per_million.get((record["month"], record["scenario"])))
    hours = float(record["instance_hours"])
    cash = float(record["cash_usd"])
    amortized = float(record["amortized_usd"])
    upfront = float(record["upfront_usd"])
    if hours == 0 and cash == 0 and amortized == 0 and upfront == 0:
        return []  # nothing bought, nothing used: no charge
    option = str(record["purchase_option"])
    provider = str(record["provider"])
    place = (provider, str(record["region"]), str(record["instance_type"]))
    month: date = record["month"]
    scenario = str(record["scenario"])
    base = _base(report, record, per_million.get((month, scenario)))
    own_rate = amortized / hours if hours else 0.0
    list_rate = list_rates.get(place, own_rate)
    label = f"{scenario} scenario, {month:%Y-%m}: {place[2]} in {place[1]}"

    if option in ("on-demand", "spot"):
        rate = own_rate if option == "on-demand" else list_rate
        return [
            base
            | _usage(hours, rate)
            | {
                "BilledCost": cash,
                "EffectiveCost": amortized,
                "ChargeDescription": f"{label}, {option} usage",
                "PricingCategory": "Standard" if option == "on-demand" else "Dynamic",
            }
        ]

    # a fleet's pools each buy their own commitment, even on the same instance type
    pool = _pool_of(record)
    commitment = commitments.get((option, *place, pool))
    utilization = commitment.utilization if commitment else 1.0
    kind = "savings-plan" if option.startswith("savings-plan") else _kind(option)
    spend = kind == "savings-plan"  # committed dollars an hour, not instance-hours
    commit = {
        "CommitmentDiscountCategory": "Spend" if spend else "Usage",
        # CommitmentDiscountQuantity counts instance-hours, or a savings plan's dollars
        "CommitmentDiscountUnit": report.currency if spend else "Hours",
        "CommitmentDiscountId": f"planner/recommendation-{report.recommendation_id}/"
        f"{provider}/{place[1]}/{place[2]}/{option}" + (f"/{pool}" if pool else ""),
        "CommitmentDiscountName": f"{option} for {place[2]} in {place[1]}"
        + (f" (pool {pool})" if pool else ""),
        "CommitmentDiscountType": COMMITMENT_TYPES.get((provider, kind), "Commitment"),
    }
    commit_resource = {"ResourceId": commit["CommitmentDiscountId"]}
    rows: list[dict[str, Any]] = []
    if upfront:
        term = commitment.term_years if commitment else _term_years(option)
        instances = commitment.instances if commitment and commitment.instances else 1.0
        quantity = instances * term * HOURS_PER_YEAR
        hourly = commitment.hourly_usd if commitment and commitment.hourly_usd else None
        # the term's committed instance-hours, or dollars (the hourly commitment over the term)
        committed = (hourly * term * HOURS_PER_YEAR if hourly else upfront) if spend else quantity
        rows.append(
            base
            | commit
            | commit_resource
            | _priced(quantity, upfront / quantity)
            | {
                "CommitmentDiscountQuantity": committed,
                "BilledCost": upfront,
                "EffectiveCost": 0.0,
                "ChargeCategory": "Purchase",
                "ChargeFrequency": "One-Time",
                "ChargeDescription": f"{label}, {option} upfront ({term}-year term)",
                "PricingCategory": "Standard",
            }
        )
    fee = cash - upfront
    if fee and hours:
        rows.append(
            base
            | commit
            | commit_resource
            | _priced(hours, fee / hours)
            | {
                # the month's committed instance-hours, or dollars (fee and upfront share)
                "CommitmentDiscountQuantity": amortized if spend else hours,
                "BilledCost": fee,
                "EffectiveCost": 0.0,
                "ChargeCategory": "Purchase",
                "ChargeFrequency": "Recurring",
                "ChargeDescription": f"{label}, {option} monthly fee",
                "PricingCategory": "Standard",
            }
        )
    used = max(0.0, min(1.0, utilization))
    for status, share in (("Used", used), ("Unused", 1.0 - used)):
        if share <= 0 or not (hours or amortized):
            continue
        quantity = hours * share
        row = (
            base
            | commit
            | {
                "BilledCost": 0.0,
                "EffectiveCost": amortized * share,
                "ChargeDescription": f"{label}, {option} usage ({status.lower()} committed hours)",
                "PricingCategory": "Committed",
                "CommitmentDiscountStatus": status,
                "CommitmentDiscountQuantity": amortized * share if spend else quantity,
            }
        )
        if status == "Used":
            row |= _usage(quantity, list_rate)
        else:  # committed hours nobody used: no consumption, no list price
            row |= commit_resource | {
                "PricingQuantity": quantity,
                "ListCost": 0.0,
                "ContractedCost": 0.0,
                "ListUnitPrice": None,
                "ContractedUnitPrice": None,
                "x_TokensMillions": None,
            }
        rows.append(row)
    return rows


def _base(report: Report, record: dict[str, Any], per_million: float | None) -> dict[str, Any]:
    """The columns every row of one projection row shares (a Usage row by default)."""
    month: date = record["month"]
    start, end = _instant(month), _instant(first_of_next_month(month))
    provider = str(record["provider"])
    name = PROVIDER_NAMES.get(provider, provider)
    p99 = report.summary.get("p99_ttft_ms")
    region = str(record["region"])
    model, pool = _text(record.get("model")), _text(record.get("pool"))
    sku = sku_id(provider, region, str(record["instance_type"]))
    tags = {"scenario": str(record["scenario"]), "model": model, "pool": pool}
    resource = f"planner/recommendation-{report.recommendation_id}/{provider}/{region}/"
    resource += str(record["instance_type"]) + (f"/{pool}" if pool else "")
    return dict.fromkeys(COLUMNS) | {
        "BillingAccountId": f"planner-recommendation-{report.recommendation_id}",
        "BillingAccountName": report.title,
        "BillingCurrency": report.currency,
        "BillingPeriodStart": start,
        "BillingPeriodEnd": end,
        "ChargePeriodStart": start,
        "ChargePeriodEnd": end,
        "ChargeCategory": "Usage",
        "ChargeFrequency": "Usage-Based",
        "InvoiceIssuerName": name,
        "ProviderName": name,
        "PublisherName": name,
        "PricingUnit": "Hours",
        "RegionId": region,
        "RegionName": region_name(provider, region) or region,  # FOCUS: a name beside every id
        "ResourceId": resource,
        "ResourceName": f"planned {record['instance_type']} fleet in {region}"
        + (f" (pool {pool})" if pool else ""),
        "ResourceType": str(record["instance_type"]),
        "ServiceCategory": "Compute",
        "ServiceName": SERVICE_NAMES.get(provider, "Compute"),
        "ServiceSubcategory": SERVICE_SUBCATEGORY,
        "SkuId": sku,
        "SkuMeter": SKU_METER,
        "SkuPriceId": f"{sku}/{record['purchase_option']}",
        "Tags": json.dumps(
            {TAG_PREFIX + key: value for key, value in tags.items() if value is not None},
            sort_keys=True,
            separators=(",", ":"),
        ),
        "x_Scenario": str(record["scenario"]),
        "x_RecommendationId": report.recommendation_id,
        "x_PurchaseOption": str(record["purchase_option"]),
        "x_TokensMillions": float(record["tokens_millions"]),
        "x_CostPerMillionTokens": per_million,
        "x_P99TtftMs": None if p99 is None else float(p99),
        "x_Model": model,
        "x_Pool": pool,
    }


def _api_rows(
    report: Report, record: dict[str, Any], per_million: float | None
) -> list[dict[str, Any]]:
    """A per-token API pool's month: its input and its output tokens as two Usage rows (they
    have different prices), priced per million tokens, consumed in tokens."""
    provider, offer = str(record["provider"]), str(record["instance_type"])
    name = API_PROVIDER_NAMES.get(provider, provider)
    month: date = record["month"]
    scenario = str(record["scenario"])
    sku = api_sku_id(provider, offer)
    model, pool = _text(record.get("model")), _text(record.get("pool"))
    resource = f"planner/recommendation-{report.recommendation_id}/api/{provider}/{offer}"
    resource += f"/{pool}" if pool else ""  # a fleet's API pool
    tags = {"scenario": scenario, "kind": "api", "model": model, "pool": pool}
    base = _base(report, record, per_million) | {
        "InvoiceIssuerName": name,
        "ProviderName": name,
        "PublisherName": name,
        "ServiceName": API_SERVICE_NAMES.get(provider, f"{name} API"),
        "ServiceCategory": API_SERVICE_CATEGORY,
        "ServiceSubcategory": API_SERVICE_SUBCATEGORY,
        "PricingUnit": API_PRICING_UNIT,
        "PricingCategory": "Standard",
        "RegionId": None,  # a hosted API is priced the same wherever it is called from
        "RegionName": None,
        "ResourceId": resource,
        "ResourceName": f"{offer} on {name} (per-token API)",
        "ResourceType": "Per-token API",
        "SkuId": sku,
        "Tags": json.dumps(
            {TAG_PREFIX + key: value for key, value in tags.items() if value is not None},
            sort_keys=True,
            separators=(",", ":"),
        ),
        "x_P99TtftMs": None,  # the simulated P99 is the self-hosted fleet's, not the API's
    }
    rows = []
    for side in ("input", "output"):
        tokens = _number(record.get(f"{side}_tokens"), 0.0)
        price = _number(record.get(f"{side}_usd_per_mtok"), 0.0)
        if tokens <= 0:
            continue
        millions = tokens / TOKENS_PER_PRICE_UNIT
        cost = millions * price
        rows.append(
            base
            | _priced(millions, price)
            | {
                "ConsumedQuantity": tokens,
                "ConsumedUnit": "Tokens",
                "BilledCost": cost,
                "EffectiveCost": cost,
                "ChargeDescription": f"{scenario} scenario, {month:%Y-%m}: {offer} on {name}, "
                f"{side} tokens (per-token API)",
                "SkuMeter": f"{side.capitalize()} Tokens",
                "SkuPriceId": f"{sku}/{side}",
                "x_TokensMillions": millions,
            }
        )
    return rows


def api_sku_id(provider: str, offer: str) -> str:
    """planner's SkuId of a per-token API offer: ``planner-sku/api/<provider>/<offer>``; its
    SkuPriceIds add ``/input`` or ``/output`` (the two prices of the offer)."""
    return f"planner-sku/api/{provider}/{offer}"


def sku_id(provider: str, region: str, instance_type: str) -> str:
    """planner's SkuId of an instance type in a region (price sheets carry no provider SKU):
    ``planner-sku/<provider>/<region>/<instance type>``, the same whatever the purchase option
    (FOCUS: a SkuId stays the same across pricing categories). The SkuPriceId adds the option:
    ``<SkuId>/<purchase option>``, one price of that SKU."""
    return f"planner-sku/{provider}/{region}/{instance_type}"


def _text(value: object) -> str | None:
    """A projection cell as text; None for a missing, null, NaN or blank one."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    text = str(value).strip()
    return text or None


def _usage(hours: float, list_rate: float) -> dict[str, Any]:
    """Consumed instance-hours at the list (on-demand) price."""
    return _priced(hours, list_rate) | {"ConsumedQuantity": hours, "ConsumedUnit": "Hours"}


def _priced(quantity: float, unit_price: float) -> dict[str, Any]:
    cost = quantity * unit_price
    return {
        "PricingQuantity": quantity,
        "ListUnitPrice": unit_price,
        "ContractedUnitPrice": unit_price,
        "ListCost": cost,
        "ContractedCost": cost,
    }


def _kind(option: str) -> str:
    return "committed" if option.startswith("committed") else "reserved"


def _term_years(option: str) -> int:
    return 3 if option.endswith("3y") else 1


def _instant(day: date) -> str:
    return datetime.combine(day, time(0, 0), tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pool_of(record: dict[str, Any]) -> str:
    """The fleet pool a projection or commitment row belongs to ("" for a single pool)."""
    pool = record.get("pool")
    return "" if pool is None or (isinstance(pool, float) and math.isnan(pool)) else str(pool)


def _commitments(report: Report) -> dict[tuple[str, ...], _Commitment]:
    found: dict[tuple[str, ...], _Commitment] = {}
    for c in _records(report.commitments):
        key = (
            str(c["purchase_option"]),
            str(c["provider"]),
            str(c["region"]),
            str(c["instance_type"]),
            _pool_of(c),
        )
        found[key] = _Commitment(
            utilization=_number(c.get("expected_utilization"), 1.0),
            break_even=_positive(c.get("break_even_utilization")),
            instances=_positive(c.get("instances")),
            term_years=int(_number(c.get("term_years"), _term_years(key[0]))),
            hourly_usd=_positive(c.get("hourly_commitment_usd")),
        )
    return found


def _list_rates(
    report: Report, commitments: dict[tuple[str, ...], _Commitment]
) -> dict[tuple[str, ...], float]:
    """The on-demand $ per instance-hour of each (provider, region, instance type): from the
    projection's on-demand rows, else a commitment's effective rate over its break-even
    utilization (break-even = commitment price / on-demand price)."""
    rates: dict[tuple[str, ...], float] = {}
    projection = report.projection
    for record in _records(projection[projection["instance_hours"] > 0]):
        place = (str(record["provider"]), str(record["region"]), str(record["instance_type"]))
        hours = float(record["instance_hours"])
        if record["purchase_option"] == "on-demand":
            rates.setdefault(place, float(record["amortized_usd"]) / hours)
    for record in _records(projection[projection["instance_hours"] > 0]):
        place = (str(record["provider"]), str(record["region"]), str(record["instance_type"]))
        commitment = commitments.get((str(record["purchase_option"]), *place, _pool_of(record)))
        if place not in rates and commitment is not None and commitment.break_even:
            effective = float(record["amortized_usd"]) / float(record["instance_hours"])
            rates[place] = effective / commitment.break_even
    return rates


def _cost_per_million_tokens(projection: pd.DataFrame) -> dict[tuple[Any, ...], float | None]:
    sums = projection.groupby(["month", "scenario"])[["amortized_usd", "tokens_millions"]].sum()
    return {
        (month, scenario): (cost / tokens if tokens > 0 else None)
        for (month, scenario), cost, tokens in zip(
            sums.index, sums["amortized_usd"], sums["tokens_millions"], strict=True
        )
    }


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in r.items()} for r in frame.to_dict(orient="records")]


def _number(value: object, default: float) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) else default


def _positive(value: object) -> float | None:
    number = _number(value, math.nan)
    return number if number > 0 else None


# --- text ----------------------------------------------------------------------------------


def csv_text(frame: pd.DataFrame) -> str:
    """The CSV: a header of :data:`COLUMNS`, decimals as plain decimals with a decimal point
    (``744.0``, ``0.5``: no exponent, no thousands separator, 10 decimal places at most), null as
    an empty field, JSON columns (Tags, SkuPriceDetails) as compact JSON objects, text a
    spreadsheet would run as a formula quoted (:func:`planner.common.csvsafe.safe_text`)."""
    types = dict(FOCUS_COLUMNS + CUSTOM_COLUMNS)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    for row in frame.itertuples(index=False):
        writer.writerow(_cell(value, types[name]) for name, value in zip(COLUMNS, row, strict=True))
    return buffer.getvalue()


def _cell(value: object, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if kind == DECIMAL:
        text = f"{float(value):.{DECIMAL_PLACES}f}".rstrip("0")  # type: ignore[arg-type]
        # always a decimal point: readers that infer types (the FOCUS validator) see a column of
        # whole numbers ("744") as integers, and FOCUS wants decimals
        text = text + "0" if text.endswith(".") else text
        return "0.0" if text == "-0.0" else text
    if kind == JSON:
        return str(value)  # JSON text starts with "{": nothing a spreadsheet would run
    return safe_text(str(value))  # "=HYPERLINK(...)" from a price sheet: text, not a formula


# --- metadata ------------------------------------------------------------------------------


def focus_metadata(report: Report, file_name: str, rows: int, size: int) -> dict[str, Any]:
    """The FOCUS 1.2 metadata of one CSV: data generator, schema (id, FOCUS version, creation
    date, column definitions) and where the data is."""
    columns = [_definition(name, kind) for name, kind in FOCUS_COLUMNS + CUSTOM_COLUMNS]
    schema_id = hashlib.sha256(
        json.dumps([FOCUS_VERSION, columns], sort_keys=True).encode()
    ).hexdigest()[:32]
    return {
        "DataGenerator": f"planner {report.planner_version}",
        "SchemaId": schema_id,
        "FocusVersion": FOCUS_VERSION,
        "ProviderVersion": report.planner_version,
        "CreationDate": report.built_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "ColumnDefinition": columns,
        "DataLocation": [{"FilePath": file_name, "TotalBytes": size, "TotalRows": rows}],
        "x_Description": (
            f"Projected charges of planner recommendation #{report.recommendation_id} "
            f"({report.title}), by month and scenario (x_Scenario low, expected, high): filter "
            "one scenario before adding up. BilledCost adds up to the report's cash view, "
            "EffectiveCost to its amortized view."
        ),
    }


def _definition(name: str, kind: str) -> dict[str, Any]:
    definition: dict[str, Any] = {"ColumnName": name, "DataType": kind}
    if kind == DECIMAL:
        definition |= {"NumericPrecision": 28, "NumberScale": DECIMAL_PLACES}
    elif kind == STRING:
        definition |= {"StringEncoding": "UTF-8"}
    return definition
