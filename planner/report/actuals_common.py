"""What the sources of actual spend share (:mod:`planner.report.actuals_aws`, ``_azure``,
``_gcp``) and :mod:`planner.report.actuals` sets against the plan: the columns of a source's
frame, the plan's currency, the plausible-charge limit, the error naming a source, and the
helpers that check a window, convert a currency and add up a month's charges.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import date

import pandas as pd

from planner.common.secrets import redact_text
from planner.common.text import shown
from planner.errors import PlannerError, UsageError
from planner.report.model import first_of_next_month

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
