"""What was really spent, per month and provider, set against the plan.

Three sources, one frame (:data:`planner.report.actuals_common.SOURCE_COLUMNS`: month,
provider, currency, actual_usd):

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
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd

from planner.common.text import shown
from planner.errors import UsageError
from planner.report.actuals_common import SOURCE_COLUMNS, currency_label
from planner.report.model import ACTUAL_COLUMNS, Report

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
