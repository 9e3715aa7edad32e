"""What was really spent, per month and provider, set against the plan.

Three sources, one frame (:data:`SOURCE_COLUMNS`: month, provider, currency, actual_usd):

* :func:`aws_actuals`: AWS Cost Explorer ``get_cost_and_usage`` through boto3
  (:mod:`planner.report.actuals_aws`);
* :func:`azure_actuals`: Azure Cost Management ``query.usage`` through
  azure-mgmt-costmanagement (:mod:`planner.report.actuals_azure`);
* :func:`gcp_actuals`: a CSV of the Cloud Billing BigQuery export
  (:mod:`planner.report.actuals_gcp`).

:func:`plan_vs_actual` sets such a frame against a report's projection (the expected scenario's
cash view, with the low and high scenarios as the range) and returns the report's ``actuals``
table (:data:`planner.report.model.ACTUAL_COLUMNS`)::

    report = report.with_actuals(plan_vs_actual(report, aws_actuals(start, end)))

Costs are pre-tax and net of credits, in the month they are billed (upfronts in the month paid),
like the plan's cash view. Credentials come only from each SDK's own default chain (boto3's
``Session()``, azure-identity's ``DefaultAzureCredential()``); planner never reads, stores, logs
or writes them. Each SDK is imported only when its source is used.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd

from planner.common.secrets import redact_text
from planner.common.text import shown
from planner.errors import PlannerError, UsageError
from planner.report.model import ACTUAL_COLUMNS, Report, first_of_next_month

#: the columns every source returns, one row per month and provider
SOURCE_COLUMNS = ("month", "provider", "currency", "actual_usd")
#: the currency plans are made in; other currencies are converted only at a rate the caller
#: states (``exchange_rates``: USD per unit of the currency), or by the GCP export's own rate
PLAN_CURRENCY = "USD"
#: the largest amount, either sign, planner takes as one charge of actual spend (a line item of
#: a GCP export, one month of AWS or Azure spend), in USD: a figure beyond it is far more likely
#: a broken export or answer than a bill; a caller with a bill that large raises it
#: (``max_amount_usd=`` of each source, ``planner report --max-actual-usd``)
MAX_AMOUNT_USD = 1e9


class ActualsError(PlannerError):
    """Actual spend could not be read: names the source (e.g. "AWS Cost Explorer") and why."""

    def __init__(self, source: str, reason: str):
        self.source = source
        self.reason = redact_text(reason)  # an SDK's words may name an endpoint with a password
        super().__init__(f"{source}: {self.reason}")


# --- the three sources ---------------------------------------------------------------------


def aws_actuals(
    start: date,
    end: date,
    *,
    client: Any | None = None,
    metric: str = "UnblendedCost",
    services: Sequence[str] = (),
    instance_types: Sequence[str] = (),
    tag: tuple[str, Sequence[str]] | None = None,
    exchange_rates: Mapping[str, float] | None = None,
    max_amount_usd: float | None = None,
) -> pd.DataFrame:
    """Monthly AWS spend from ``start`` to ``end`` (exclusive) from Cost Explorer; see
    :func:`planner.report.actuals_aws.aws_actuals`."""
    from planner.report import actuals_aws

    return actuals_aws.aws_actuals(
        start,
        end,
        client=client,
        metric=metric,
        services=services,
        instance_types=instance_types,
        tag=tag,
        exchange_rates=exchange_rates,
        max_amount_usd=max_amount_usd,
    )


def azure_actuals(
    scope: str,
    start: date,
    end: date,
    *,
    client: Any | None = None,
    cost_type: str = "ActualCost",
    services: Sequence[str] = (),
    exchange_rates: Mapping[str, float] | None = None,
    max_amount_usd: float | None = None,
) -> pd.DataFrame:
    """Monthly Azure spend of ``scope`` from ``start`` to ``end`` (exclusive) from Cost
    Management; see :func:`planner.report.actuals_azure.azure_actuals`."""
    from planner.report import actuals_azure

    return actuals_azure.azure_actuals(
        scope,
        start,
        end,
        client=client,
        cost_type=cost_type,
        services=services,
        exchange_rates=exchange_rates,
        max_amount_usd=max_amount_usd,
    )


def gcp_actuals(
    path: Path | str,
    *,
    services: Sequence[str] = (),
    exchange_rates: Mapping[str, float] | None = None,
    max_amount_usd: float | None = None,
) -> pd.DataFrame:
    """Monthly GCP spend from a CSV of the Cloud Billing BigQuery export; see
    :func:`planner.report.actuals_gcp.gcp_actuals`."""
    from planner.report import actuals_gcp

    return actuals_gcp.gcp_actuals(
        path, services=services, exchange_rates=exchange_rates, max_amount_usd=max_amount_usd
    )


# --- shared by the sources -----------------------------------------------------------------


def money(value: float) -> str:
    """An amount as a person reads it: 1,234.50, or 1e+308 when that would be too long."""
    return f"{value:,.2f}" if math.isfinite(value) and abs(value) < 1e15 else f"{value:.6g}"


def beyond_limit(amount: float, currency: str, usd: float, limit: float) -> str:
    """Why ``amount`` of ``currency`` (``usd`` in USD) is refused, or "" when it is plausible."""
    code = currency.strip().upper()
    given = f"{money(amount)} {code}" + ("" if code == PLAN_CURRENCY else f" ({money(usd)} USD)")
    if not math.isfinite(usd):
        return f"{given} is not a finite amount"
    if abs(usd) > limit:
        return (
            f"{given} is beyond the {money(limit).removesuffix('.00')} USD (either sign) "
            "planner accepts as one charge; if it is real, raise the limit "
            "(planner report --max-actual-usd)"
        )
    return ""


def months_between(start: date, end: date) -> list[date]:
    """First days of the months that ``[start, end)`` touches."""
    months: list[date] = []
    month = start.replace(day=1)
    while month < end:
        months.append(month)
        month = first_of_next_month(month)
    return months


def check_window(source: str, start: date, end: date) -> None:
    if not isinstance(start, date) or not isinstance(end, date):
        raise UsageError(f"{source}: start and end must be dates")
    if end <= start:
        raise UsageError(
            f"{source}: the window {start.isoformat()} .. {end.isoformat()} is empty "
            "(end is exclusive and must come after start)"
        )


def in_usd(
    source: str,
    amount: float,
    currency: str,
    exchange_rates: Mapping[str, float] | None,
    where: str,
) -> float:
    """``amount`` in USD: as is when ``currency`` is USD, else at the caller's stated rate
    (USD per unit); without one, an :class:`ActualsError` naming the currency and the place."""
    code = currency.strip().upper()
    if code == PLAN_CURRENCY:
        return amount
    rates = {k.strip().upper(): v for k, v in (exchange_rates or {}).items()}
    rate = rates.get(code)
    if rate is None or not math.isfinite(rate) or rate <= 0:
        raise ActualsError(
            source,
            f"{where} is in {shown(currency)}, not {PLAN_CURRENCY}: the plan is in "
            f"{PLAN_CURRENCY} and planner converts only at a rate you state "
            f"(exchange_rates={{{code!r}: <USD per {code}>}}); or read a scope billed in USD",
        )
    return amount * rate


def source_frame(
    provider: str, months: Iterable[date], totals: Mapping[date, tuple[float, set[str]]]
) -> pd.DataFrame:
    """One row per month of ``months`` (a month without charges is 0.0 USD), in
    :data:`SOURCE_COLUMNS`; with no ``months`` (a file read whole), one per month found."""
    window = set(months)
    rows = []
    for month in sorted(window or set(totals)):
        usd, currencies = totals.get(month, (0.0, set()))
        rows.append((month, provider, currency_label(currencies), usd))
    return pd.DataFrame(rows, columns=list(SOURCE_COLUMNS)).astype({"actual_usd": "float64"})


def currency_label(currencies: Iterable[str]) -> str:
    """The billed currency of a month ("USD"; "EUR" when converted; "EUR+USD" when mixed)."""
    found = sorted({c.strip().upper() for c in currencies if c.strip()})
    return "+".join(found) if found else PLAN_CURRENCY


def add_cost(
    totals: dict[date, tuple[float, set[str]]], month: date, usd: float, currency: str
) -> None:
    before, currencies = totals.get(month, (0.0, set()))
    totals[month] = (before + usd, currencies | {currency})


# --- plan vs actual ------------------------------------------------------------------------


def plan_vs_actual(report: Report, actuals: pd.DataFrame, *, view: str = "cash") -> pd.DataFrame:
    """The report's ``actuals`` table: for every month and provider of ``actuals`` that falls in
    the projection, the actual spend against the plan (expected scenario, ``view`` cash by
    default, as Cost Explorer's UnblendedCost and Cost Management's ActualCost are), the low and
    high scenarios as the forecast's range, and the variance (actual - planned) in $ and as a
    share of the plan (NaN where nothing was planned for that provider).

    Several rows of one month and provider (two Azure scopes) are added up. Months outside the
    projection are left out: there is no plan to set them against.
    """
    if view not in ("cash", "amortized"):
        raise UsageError(f"plan vs actual: view {shown(view)}: expected cash or amortized")
    missing = [c for c in SOURCE_COLUMNS if c not in actuals.columns]
    if missing:
        raise UsageError(
            f"plan vs actual: the actual spend lacks column(s) {', '.join(missing)}; expected "
            f"{', '.join(SOURCE_COLUMNS)}"
        )
    value = "cash_usd" if view == "cash" else "amortized_usd"
    projection = report.projection
    planned = {
        scenario: projection[projection["scenario"] == scenario]
        .groupby(["month", "provider"])[value]
        .sum()
        for scenario in ("low", "expected", "high")
    }
    plan_months = set(projection["month"])
    rows = []
    grouped = actuals.groupby(["month", "provider"], sort=True)
    for (month, provider), group in grouped:
        if month not in plan_months:
            continue
        actual = float(group["actual_usd"].sum())
        expected = float(planned["expected"].get((month, provider), 0.0))
        variance = actual - expected
        rows.append(
            (
                month,
                provider,
                currency_label(str(c) for c in group["currency"]),
                actual,
                expected,
                float(planned["low"].get((month, provider), 0.0)),
                float(planned["high"].get((month, provider), 0.0)),
                variance,
                variance / expected if expected else math.nan,
            )
        )
    frame = pd.DataFrame(rows, columns=list(ACTUAL_COLUMNS))
    money = [c for c in ACTUAL_COLUMNS if c.endswith("_usd") or c == "variance_pct"]
    return frame.astype(dict.fromkeys(money, "float64"))
