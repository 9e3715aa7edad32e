"""Monthly Azure spend from Cost Management (``query.usage`` through azure-mgmt-costmanagement).

One query per page on a scope (a subscription ``/subscriptions/<id>``, a resource group, a
billing account ...)::

    QueryDefinition(type="ActualCost", timeframe="Custom",
                    time_period=QueryTimePeriod(from_property=<start>, to=<end - 1 s>),
                    dataset=QueryDataset(granularity="Monthly",
                                         aggregation={"totalCost": QueryAggregation(
                                             name="Cost", function="Sum")}))

The answer is a table (``columns`` and ``rows``), read by column name: the cost ("Cost",
"PreTaxCost", "totalCost"; "CostUSD" is in USD), the month ("BillingMonth", a date-time, or
"UsageDate", a number like 20270101) and "Currency". A month without charges has no row (it is
0.0 here). ``nextLink`` is followed by asking again with its ``$skiptoken``. ActualCost is what
is billed in the month (purchases in the month paid), the plan's cash view; AmortizedCost
(``cost_type="AmortizedCost"``) spreads reservation purchases over their term.

Credentials come from azure-identity's ``DefaultAzureCredential`` only (environment, workload or
managed identity, Azure CLI / PowerShell / azd login ...); the client is made here unless the
caller passes one (the tests pass one with a recorded transport and a stub credential).

Bounds: at most :data:`MAX_PAGES` pages and :data:`MAX_ROWS` rows in all (a monthly query has a
row per month and currency); each cost a finite number of at most
``planner.report.actuals_common.MAX_AMOUNT_USD`` (1e9 USD, either sign) unless the caller raises it
(``max_amount_usd``; ``planner report --max-actual-usd``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pandas as pd
from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
)
from azure.mgmt.costmanagement.models import (
    QueryAggregation,
    QueryComparisonExpression,
    QueryDataset,
    QueryDefinition,
    QueryFilter,
    QueryTimePeriod,
)

from planner.common.text import shown
from planner.errors import UsageError
from planner.report.actuals_common import (
    MAX_AMOUNT_USD,
    ActualsError,
    add_cost,
    beyond_limit,
    check_window,
    in_usd,
    months_between,
    source_frame,
)

SOURCE = "Azure Cost Management"
PROVIDER = "azure"
COST_TYPES = ("ActualCost", "AmortizedCost")
COST_COLUMNS = ("cost", "pretaxcost", "totalcost", "costusd", "pretaxcostusd")
USD_COST_COLUMNS = ("costusd", "pretaxcostusd")
MONTH_COLUMNS = ("billingmonth", "usagedate")
MAX_PAGES = 1000
MAX_ROWS = 100_000  # a month a row in each of a few currencies: more is not a monthly answer
FIRST_LINE_CHARS = 300
TRIED_CREDENTIAL = re.compile(
    r"^\s+(\w+Credential):", re.MULTILINE
)  # azure-identity's messages list every credential tried: keep the gist


def query_definition(
    start: date, end: date, cost_type: str = "ActualCost", services: Sequence[str] = ()
) -> QueryDefinition:
    """The query: monthly sums of the cost from ``start`` to ``end`` (exclusive); only some
    services (``ServiceName``, e.g. "Virtual Machines") when asked."""
    last = datetime.combine(end, time(0, 0), tzinfo=UTC) - timedelta(seconds=1)
    dataset = QueryDataset(
        granularity="Monthly",
        aggregation={"totalCost": QueryAggregation(name="Cost", function="Sum")},
    )
    if services:
        dataset.filter = QueryFilter(
            dimensions=QueryComparisonExpression(
                name="ServiceName", operator="In", values_property=list(services)
            )
        )
    return QueryDefinition(
        type=cost_type,
        timeframe="Custom",
        time_period=QueryTimePeriod(
            from_property=datetime.combine(start, time(0, 0), tzinfo=UTC), to=last
        ),
        dataset=dataset,
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
    """Azure spend of ``scope`` per month from ``start`` to ``end`` (exclusive): one row per
    month the window touches (0.0 for a month with no charges), in
    ``planner.report.actuals_common.SOURCE_COLUMNS``.

    Raises :class:`ActualsError` ("Azure Cost Management: ...") when there are no usable
    credentials, they are refused or lack access to the scope, the scope does not exist, the
    answer cannot be read, or a cost is in a currency other than USD and ``exchange_rates``
    (USD per unit) gives no rate for it, or a cost is not a finite number within
    ``max_amount_usd`` (default ``planner.report.actuals_common.MAX_AMOUNT_USD``).
    """
    check_window(SOURCE, start, end)
    limit = MAX_AMOUNT_USD if max_amount_usd is None else max_amount_usd
    if cost_type not in COST_TYPES:
        raise UsageError(
            f"{SOURCE}: cost type {shown(cost_type)}: expected one of {', '.join(COST_TYPES)}"
        )
    path = scope.strip().strip("/")
    if not path:
        raise UsageError(f"{SOURCE}: the scope is empty; expected e.g. /subscriptions/<id>")
    definition = query_definition(start, end, cost_type, services)
    if client is not None:
        totals = _query(client, path, definition, exchange_rates, limit)
    else:
        from azure.identity import DefaultAzureCredential
        from azure.mgmt.costmanagement import CostManagementClient

        with (
            _quiet_identity_log(),
            DefaultAzureCredential() as credential,
            CostManagementClient(credential) as made,
        ):
            totals = _query(made, path, definition, exchange_rates, limit)
    return source_frame(PROVIDER, months_between(start, end), totals)


def _query(
    client: Any,
    scope: str,
    definition: QueryDefinition,
    exchange_rates: Mapping[str, float] | None,
    limit: float,
) -> dict[date, tuple[float, set[str]]]:
    totals: dict[date, tuple[float, set[str]]] = {}
    rows = 0
    params: dict[str, str] = {}
    seen: set[str] = set()
    for page_number in range(1, MAX_PAGES + 1):
        result = _call(scope, lambda p=params: client.query.usage(scope, definition, params=p))
        if result is None:  # 204: nothing to report
            break
        rows += len(result.rows or [])
        if rows > MAX_ROWS:
            raise ActualsError(
                SOURCE,
                f"query.usage: more than {MAX_ROWS:,} rows by page {page_number}; a monthly "
                "query has one a month and currency",
            )
        _add_rows(totals, result, page_number, exchange_rates, limit)
        link = getattr(result, "next_link", None)
        if not link:
            break
        if link in seen:
            raise ActualsError(SOURCE, "query.usage returned the same nextLink twice")
        seen.add(link)
        params = {k: v for k, v in parse_qsl(urlsplit(link).query) if k.lower() != "api-version"}
        if not params:
            raise ActualsError(SOURCE, f"query.usage: nextLink {shown(link)} has no $skiptoken")
    else:
        raise ActualsError(SOURCE, f"query.usage: more than {MAX_PAGES} pages")
    return totals


def _add_rows(
    totals: dict[date, tuple[float, set[str]]],
    result: Any,
    page: int,
    exchange_rates: Mapping[str, float] | None,
    limit: float,
) -> None:
    columns = [str(getattr(c, "name", "") or "").lower() for c in (result.columns or [])]
    rows = result.rows or []
    if not rows:
        return
    cost_at = _column(columns, COST_COLUMNS, "the cost", page)
    month_at = _column(columns, MONTH_COLUMNS, "the month", page)
    currency_at = columns.index("currency") if "currency" in columns else None
    if currency_at is None and columns[cost_at] not in USD_COST_COLUMNS:
        raise ActualsError(
            SOURCE, f"unexpected answer (page {page}): no Currency column to tell the currency"
        )
    for number, row in enumerate(rows, start=1):
        where = f"page {page}, row {number}"
        try:
            cost = float(row[cost_at])
        except (TypeError, ValueError, IndexError, OverflowError):
            raise ActualsError(
                SOURCE, f"unexpected answer ({where}): cost {shown(row)} is not a number"
            ) from None
        month = _month(row[month_at] if month_at < len(row) else None, where)
        currency = "USD" if currency_at is None else str(row[currency_at])
        if columns[cost_at] in USD_COST_COLUMNS:
            currency = "USD"
        usd = (
            in_usd(SOURCE, cost, currency, exchange_rates, f"the cost of {month:%Y-%m}")
            if math.isfinite(cost)
            else cost
        )
        why = beyond_limit(cost, currency, usd, limit)
        if why:
            raise ActualsError(SOURCE, f"unexpected answer ({where}): cost {why}")
        add_cost(totals, month, usd, currency)


def _column(columns: list[str], names: Sequence[str], what: str, page: int) -> int:
    for name in names:
        if name in columns:
            return columns.index(name)
    raise ActualsError(
        SOURCE,
        f"unexpected answer (page {page}): no column for {what} (expected one of "
        f"{', '.join(names)}; got {', '.join(columns) or 'none'})",
    )


def _month(value: object, where: str) -> date:
    """BillingMonth "2027-01-01T00:00:00" or UsageDate 20270101 -> the month's first day."""
    text = str(value).strip()
    try:
        if text.isdigit() and len(text) == 8:
            return date(int(text[:4]), int(text[4:6]), 1)
        return date.fromisoformat(text[:10]).replace(day=1)
    except ValueError:
        raise ActualsError(
            SOURCE, f"unexpected answer ({where}): month {shown(value)} is not a date"
        ) from None


def _call(scope: str, call: Any) -> Any:
    """One query; azure-core's failures become an :class:`ActualsError` (never a token)."""
    try:
        return call()
    except ClientAuthenticationError as exc:
        tried = list(dict.fromkeys(TRIED_CREDENTIAL.findall(str(exc.message or exc))))
        raise ActualsError(
            SOURCE,
            f"no usable Azure credentials ({_gist(exc)}"
            + (f" Tried: {', '.join(tried)}" if tried else "")
            + "). planner takes them from "
            "DefaultAzureCredential only: environment variables (AZURE_CLIENT_ID ...), a "
            "workload or managed identity, or a signed-in Azure CLI (az login)",
        ) from None
    except ResourceNotFoundError as exc:
        raise ActualsError(SOURCE, f"scope /{scope} not found ({_gist(exc)})") from None
    except HttpResponseError as exc:
        if exc.status_code == 403:
            raise ActualsError(
                SOURCE,
                f"access to scope /{scope} denied ({_gist(exc)}): the identity needs the Cost "
                "Management Reader role (or Reader) on it",
            ) from None
        raise ActualsError(
            SOURCE, f"query.usage on /{scope} failed (HTTP {exc.status_code}: {_gist(exc)})"
        ) from None
    except AzureError as exc:  # network, timeouts, ...
        raise ActualsError(SOURCE, f"query.usage on /{scope} failed: {_gist(exc)}") from None
    except RecursionError:  # an answer nested deeper than Python's parser goes
        raise ActualsError(
            SOURCE, f"query.usage on /{scope}: the answer is nested too deep to read"
        ) from None


@contextlib.contextmanager
def _quiet_identity_log() -> Iterator[None]:
    """azure-identity logs every credential it tried as a warning, which Python prints raw on
    stderr when nothing configured logging; the error says it once, in one message."""
    logger = logging.getLogger("azure.identity")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _gist(exc: Exception) -> str:
    """The first line of an SDK error's message, cut short."""
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    line = str(message).strip().splitlines()[0] if str(message).strip() else type(exc).__name__
    return line[:FIRST_LINE_CHARS]
