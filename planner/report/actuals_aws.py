"""Monthly AWS spend from Cost Explorer (``ce.get_cost_and_usage`` through boto3).

One request per page: ``TimePeriod`` (start inclusive, end exclusive), ``Granularity`` MONTHLY,
``Metrics`` [``UnblendedCost``] by default, and a ``Filter`` that leaves tax out (the plan is
pre-tax) and, when asked, keeps only some services (``SERVICE``, e.g. "Amazon Elastic Compute
Cloud - Compute"), instance types (``INSTANCE_TYPE``) or the resources of one cost-allocation tag;
``NextPageToken`` is followed until AWS sends none.

Why UnblendedCost: it is what the bill charges in the month, an upfront in the month it is paid
and credits included, i.e. the plan's cash view. AmortizedCost (``metric="AmortizedCost"``)
spreads upfronts over the term, the plan's amortized view: compare it with
``plan_vs_actual(report, frame, view="amortized")``.

Credentials come from boto3's standard chain only (environment, shared config or SSO profile,
container or instance role); the client is made here unless the caller passes one (the tests put
a botocore ``Stubber`` on a real client). Cost Explorer's endpoint is us-east-1; each request is
billed by AWS ($0.01 at the time of writing).

Bounds: at most :data:`MAX_PAGES` pages; each amount (one month, or one group of a month) a
finite number of at most ``planner.report.actuals_common.MAX_AMOUNT_USD`` (1e9 USD, either
sign) unless the caller raises it (``max_amount_usd``; ``planner report --max-actual-usd``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import Any, TypeVar

import boto3  # type: ignore[import-untyped]
import pandas as pd
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import (  # type: ignore[import-untyped]
    BotoCoreError,
    ClientError,
    CredentialRetrievalError,
    NoAuthTokenError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
    SSOTokenLoadError,
    TokenRetrievalError,
    UnauthorizedSSOTokenError,
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

SOURCE = "AWS Cost Explorer"
PROVIDER = "aws"
CE_REGION = "us-east-1"  # Cost Explorer's only endpoint
METRICS = ("UnblendedCost", "AmortizedCost", "NetUnblendedCost", "NetAmortizedCost")
MAX_PAGES = 1000  # a month a page would be 83 years: more means the token never ends

#: botocore's errors for credentials that are missing or cannot be loaded
CREDENTIAL_ERRORS = (
    NoCredentialsError,
    PartialCredentialsError,
    CredentialRetrievalError,
    NoAuthTokenError,
    TokenRetrievalError,
    SSOTokenLoadError,
    UnauthorizedSSOTokenError,
    ProfileNotFound,
)
#: AWS error codes that mean the credentials were refused (unknown, expired or not allowed)
REFUSED_CODES = {
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedOperation",
    "UnrecognizedClientException",
    "InvalidClientTokenId",
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "ExpiredTokenException",
}

T = TypeVar("T")


def make_client(session: Any | None = None) -> Any:
    """A Cost Explorer client from boto3's standard credential chain, with adaptive retries
    against throttling."""
    session = session or boto3.session.Session()
    config = Config(retries={"mode": "adaptive", "max_attempts": 8})
    return session.client("ce", region_name=CE_REGION, config=config)


def cost_filter(
    services: Sequence[str] = (),
    instance_types: Sequence[str] = (),
    tag: tuple[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """The ``Filter`` expression: no tax, and the services, instance types and tag asked for."""
    parts: list[dict[str, Any]] = [
        {"Not": {"Dimensions": {"Key": "RECORD_TYPE", "Values": ["Tax"]}}}
    ]
    if services:
        parts.append({"Dimensions": {"Key": "SERVICE", "Values": list(services)}})
    if instance_types:
        parts.append({"Dimensions": {"Key": "INSTANCE_TYPE", "Values": list(instance_types)}})
    if tag is not None:
        key, values = tag
        parts.append({"Tags": {"Key": key, "Values": list(values)}})
    return parts[0] if len(parts) == 1 else {"And": parts}


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
    """AWS spend per month from ``start`` to ``end`` (exclusive): one row per month the window
    touches (0.0 for a month with no charges), in ``planner.report.actuals_common.SOURCE_COLUMNS``.

    Raises :class:`ActualsError` ("AWS Cost Explorer: ...") when there are no usable credentials,
    they are refused, a call fails, or a cost is in a currency other than USD and
    ``exchange_rates`` (USD per unit) gives no rate for it, or an amount is not a finite number
    within ``max_amount_usd`` (default ``planner.report.actuals_common.MAX_AMOUNT_USD``).
    """
    check_window(SOURCE, start, end)
    limit = MAX_AMOUNT_USD if max_amount_usd is None else max_amount_usd
    if metric not in METRICS:
        raise UsageError(f"{SOURCE}: metric {shown(metric)}: expected one of {', '.join(METRICS)}")
    if client is None:
        client = _guard("creating the client", make_client)
    request: dict[str, Any] = {
        "TimePeriod": {"Start": start.isoformat(), "End": end.isoformat()},
        "Granularity": "MONTHLY",
        "Metrics": [metric],
        "Filter": cost_filter(services, instance_types, tag),
    }
    totals: dict[date, tuple[float, set[str]]] = {}
    token: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page_request = dict(request, NextPageToken=token) if token else request

        def ask(arguments: dict[str, Any] = page_request) -> dict[str, Any]:
            answer: dict[str, Any] = client.get_cost_and_usage(**arguments)
            return answer

        page = _guard("get_cost_and_usage", ask)
        for result in page.get("ResultsByTime", []):
            _add_result(totals, result, metric, exchange_rates, limit)
        token = page.get("NextPageToken") or None
        if token is None:
            break
        if token in seen:
            raise ActualsError(SOURCE, "get_cost_and_usage returned the same NextPageToken twice")
        seen.add(token)
    else:
        raise ActualsError(SOURCE, f"get_cost_and_usage: more than {MAX_PAGES} pages")
    return source_frame(PROVIDER, months_between(start, end), totals)


def _add_result(
    totals: dict[date, tuple[float, set[str]]],
    result: Mapping[str, Any],
    metric: str,
    exchange_rates: Mapping[str, float] | None,
    limit: float,
) -> None:
    """One ``ResultsByTime`` entry: its groups' amounts when grouped, else its total; a month
    with neither (no charges) adds nothing."""
    start = result.get("TimePeriod", {}).get("Start", "")
    try:
        month = date.fromisoformat(str(start)[:10]).replace(day=1)
    except ValueError:
        raise ActualsError(
            SOURCE, f"unexpected response: TimePeriod.Start {shown(start)} is not a date"
        ) from None
    groups = result.get("Groups") or []
    amounts = [g.get("Metrics", {}).get(metric) for g in groups] or [
        result.get("Total", {}).get(metric)
    ]
    for amount in amounts:
        if not amount:
            continue
        where = f"{metric} of {month:%Y-%m}"
        try:
            value = float(amount["Amount"])
        except (KeyError, TypeError, ValueError, OverflowError):
            raise ActualsError(
                SOURCE,
                f"unexpected response: {where} has Amount {shown(_amount_of(amount))}, "
                "expected a number",
            ) from None
        unit = str(amount.get("Unit") or "USD")
        usd = in_usd(SOURCE, value, unit, exchange_rates, where) if math.isfinite(value) else value
        why = beyond_limit(value, unit, usd, limit)
        if why:
            raise ActualsError(SOURCE, f"unexpected response: {where}: {why}")
        add_cost(totals, month, usd, unit)


def _amount_of(amount: object) -> object:
    return amount.get("Amount") if isinstance(amount, Mapping) else amount


def _guard(what: str, call: Callable[[], T]) -> T:
    """Run one AWS call; botocore's failures become an :class:`ActualsError` naming the call and
    the reason (never a credential: botocore's messages name none)."""
    try:
        return call()
    except CREDENTIAL_ERRORS as exc:
        raise ActualsError(
            SOURCE,
            f"{what}: no usable AWS credentials ({exc}). planner takes them from boto3's "
            "standard chain only: environment variables, the shared config or SSO profile "
            "(AWS_PROFILE), or a container or instance role",
        ) from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "error"))
        message = str(error.get("Message", ""))
        detail = f"{code}: {message}".rstrip(": ")
        if code in REFUSED_CODES:
            raise ActualsError(
                SOURCE,
                f"{what}: the credentials were refused ({detail}). They need the "
                "ce:GetCostAndUsage permission and must be current",
            ) from None
        raise ActualsError(SOURCE, f"{what}: {detail}") from None
    except BotoCoreError as exc:  # endpoint unreachable, bad configuration, ...
        raise ActualsError(SOURCE, f"{what}: {exc}") from None
    except RecursionError:  # an answer nested deeper than Python's parser goes
        raise ActualsError(SOURCE, f"{what}: the answer is nested too deep to read") from None
