"""Actual AWS spend through a real boto3 Cost Explorer client answered by botocore's Stubber
(no network). Payload shapes: tests/fixtures/actuals/README.md."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pandas as pd
import pytest
from botocore.stub import Stubber  # type: ignore[import-untyped]

from planner.errors import PlannerError
from planner.report.actuals import aws_actuals, plan_vs_actual
from planner.report.actuals_aws import cost_filter
from planner.report.actuals_common import SOURCE_COLUMNS, ActualsError
from planner.report.model import ACTUAL_COLUMNS, Report

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "actuals" / "aws"
START, END = date(2027, 1, 1), date(2027, 4, 1)
NO_TAX = {"Not": {"Dimensions": {"Key": "RECORD_TYPE", "Values": ["Tax"]}}}


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def request(
    start: date = START, end: date = END, token: str | None = None, **filters: Any
) -> dict[str, Any]:
    """Spelled out here rather than taken from the module, so a changed request is noticed."""
    params: dict[str, Any] = {
        "TimePeriod": {"Start": start.isoformat(), "End": end.isoformat()},
        "Granularity": "MONTHLY",
        "Metrics": [filters.pop("metric", "UnblendedCost")],
        "Filter": filters.pop("filter", NO_TAX),
    }
    if token:
        params["NextPageToken"] = token
    return params


@pytest.fixture
def ce() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client(
        "ce",
        region_name="us-east-1",
        aws_access_key_id="AKIAFIXTUREFIXTURE00",
        aws_secret_access_key="fixture/secret/never-shown",
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def test_two_pages_make_one_month_each_with_the_empty_month_at_zero(ce: Any) -> None:
    client, stubber = ce
    stubber.add_response("get_cost_and_usage", load("get_cost_and_usage_page1.json"), request())
    token = "eyJ2IjoxLCJwIjoiMjAyNy0wMyJ9"
    stubber.add_response(
        "get_cost_and_usage", load("get_cost_and_usage_page2.json"), request(token=token)
    )
    frame = aws_actuals(START, END, client=client)
    assert list(frame.columns) == list(SOURCE_COLUMNS)
    assert list(frame["month"]) == [date(2027, 1, 1), date(2027, 2, 1), date(2027, 3, 1)]
    assert set(frame["provider"]) == {"aws"}
    assert list(frame["currency"]) == ["USD", "USD", "USD"]
    assert frame["actual_usd"].tolist() == [3461.9274562118, 0.0, 2390.0041870001]
    assert frame["actual_usd"].dtype == "float64"


def test_grouped_answer_adds_its_groups_and_a_month_without_groups_is_zero(ce: Any) -> None:
    client, stubber = ce
    stubber.add_response(
        "get_cost_and_usage",
        load("get_cost_and_usage_grouped.json"),
        request(end=date(2027, 3, 1)),
    )
    frame = aws_actuals(START, date(2027, 3, 1), client=client)
    assert frame["actual_usd"].tolist() == pytest.approx([3249.75, 0.0], abs=1e-9)


def test_a_month_missing_from_the_answer_is_zero(ce: Any) -> None:
    """Cost Explorer answers every month asked; if one is missing it cost nothing."""
    client, stubber = ce
    stubber.add_response(
        "get_cost_and_usage", load("get_cost_and_usage_eur.json") | {"ResultsByTime": []}, request()
    )
    frame = aws_actuals(START, END, client=client)
    assert frame["actual_usd"].tolist() == [0.0, 0.0, 0.0]


def test_filters_by_service_instance_type_and_tag_keep_tax_out(ce: Any) -> None:
    client, stubber = ce
    expected_filter = {
        "And": [
            NO_TAX,
            {
                "Dimensions": {
                    "Key": "SERVICE",
                    "Values": ["Amazon Elastic Compute Cloud - Compute"],
                }
            },
            {"Dimensions": {"Key": "INSTANCE_TYPE", "Values": ["g6.xlarge", "g6.2xlarge"]}},
            {"Tags": {"Key": "team", "Values": ["llm-serving"]}},
        ]
    }
    stubber.add_response(
        "get_cost_and_usage",
        load("get_cost_and_usage_page2.json"),
        request(date(2027, 3, 1), END, filter=expected_filter),
    )
    frame = aws_actuals(
        date(2027, 3, 1),
        END,
        client=client,
        services=["Amazon Elastic Compute Cloud - Compute"],
        instance_types=["g6.xlarge", "g6.2xlarge"],
        tag=("team", ["llm-serving"]),
    )
    assert frame["actual_usd"].tolist() == [2390.0041870001]
    assert cost_filter() == NO_TAX


def test_amortized_metric_is_asked_for_by_name(ce: Any) -> None:
    client, stubber = ce
    page = load("get_cost_and_usage_page2.json")
    page["ResultsByTime"][0]["Total"] = {"AmortizedCost": {"Amount": "2100.5", "Unit": "USD"}}
    stubber.add_response(
        "get_cost_and_usage", page, request(date(2027, 3, 1), END, metric="AmortizedCost")
    )
    frame = aws_actuals(date(2027, 3, 1), END, client=client, metric="AmortizedCost")
    assert frame["actual_usd"].tolist() == [2100.5]


def test_a_currency_other_than_usd_is_refused_without_a_stated_rate(ce: Any) -> None:
    client, stubber = ce
    stubber.add_response(
        "get_cost_and_usage", load("get_cost_and_usage_eur.json"), request(end=date(2027, 2, 1))
    )
    with pytest.raises(ActualsError) as caught:
        aws_actuals(START, date(2027, 2, 1), client=client)
    message = str(caught.value)
    assert message.startswith("AWS Cost Explorer: ")
    assert "'EUR'" in message and "2027-01" in message and "exchange_rates" in message


def test_a_currency_other_than_usd_is_converted_at_the_stated_rate(ce: Any) -> None:
    client, stubber = ce
    stubber.add_response(
        "get_cost_and_usage", load("get_cost_and_usage_eur.json"), request(end=date(2027, 2, 1))
    )
    frame = aws_actuals(START, date(2027, 2, 1), client=client, exchange_rates={"EUR": 1.25})
    assert frame["actual_usd"].tolist() == pytest.approx([3765.5])
    assert frame["currency"].tolist() == ["EUR"]  # the billed currency stays visible


def test_access_denied_is_a_clear_credentials_message(ce: Any) -> None:
    client, stubber = ce
    stubber.add_client_error(
        "get_cost_and_usage",
        service_error_code="AccessDeniedException",
        service_message="User: arn:aws:iam::000000000000:user/fixture is not authorized to "
        "perform: ce:GetCostAndUsage",
        http_status_code=400,
        expected_params=request(),
    )
    with pytest.raises(PlannerError) as caught:
        aws_actuals(START, END, client=client)
    message = str(caught.value)
    assert message.startswith("AWS Cost Explorer: get_cost_and_usage: the credentials")
    assert "AccessDeniedException" in message and "ce:GetCostAndUsage" in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_other_service_errors_name_the_call_and_code(ce: Any) -> None:
    client, stubber = ce
    stubber.add_client_error(
        "get_cost_and_usage",
        service_error_code="DataUnavailableException",
        service_message="Data is not available yet",
        expected_params=request(),
    )
    with pytest.raises(ActualsError, match=r"^AWS Cost Explorer: get_cost_and_usage: "
                       r"DataUnavailableException: Data is not available yet$"):  # fmt: skip
        aws_actuals(START, END, client=client)


def test_no_credentials_anywhere_is_a_clear_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """boto3's own default chain, with nothing to find (no environment, no files, no instance
    metadata): the call fails before any request leaves, with NoCredentialsError."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(ActualsError) as caught:
        aws_actuals(START, END)
    message = str(caught.value)
    assert message.startswith("AWS Cost Explorer: get_cost_and_usage: no usable AWS credentials")
    assert "standard chain" in message
    assert caught.value.__cause__ is None


def test_window_and_metric_are_checked_before_any_call() -> None:
    with pytest.raises(PlannerError, match="empty"):
        aws_actuals(END, START, client=object())
    with pytest.raises(PlannerError, match="metric 'BlendedCosts'"):
        aws_actuals(START, END, client=object(), metric="BlendedCosts")


def test_plan_vs_actual_for_a_provider_the_plan_does_not_use(ce: Any, report: Report) -> None:
    """The example plan is all GCP: AWS spend is all variance and has no % (nothing planned)."""
    client, stubber = ce
    stubber.add_response("get_cost_and_usage", load("get_cost_and_usage_page1.json"), request())
    token = "eyJ2IjoxLCJwIjoiMjAyNy0wMyJ9"
    stubber.add_response(
        "get_cost_and_usage", load("get_cost_and_usage_page2.json"), request(token=token)
    )
    table = plan_vs_actual(report, aws_actuals(START, END, client=client))
    assert list(table.columns) == list(ACTUAL_COLUMNS)
    assert (table["planned_usd"] == 0.0).all()
    assert (table["variance_usd"] == table["actual_usd"]).all()
    assert all(math.isnan(v) for v in table["variance_pct"])
    filled = report.with_actuals(table)
    assert isinstance(filled.actuals, pd.DataFrame) and len(filled.actuals) == 3


@pytest.mark.parametrize(
    ("amount", "expected"),
    [
        ("1e308", "1e+308 USD is beyond the 1,000,000,000 USD"),
        ("-1e12", "-1,000,000,000,000.00 USD is beyond"),
        ("NaN", "nan USD is not a finite amount"),
        ("Infinity", "inf USD is not a finite amount"),
    ],
)
def test_an_absurd_amount_is_refused_with_the_month(ce: Any, amount: str, expected: str) -> None:
    client, stubber = ce
    page = load("get_cost_and_usage_page2.json")
    page["ResultsByTime"][0]["Total"]["UnblendedCost"]["Amount"] = amount
    stubber.add_response("get_cost_and_usage", page, request(date(2027, 3, 1), END))
    with pytest.raises(ActualsError) as caught:
        aws_actuals(date(2027, 3, 1), END, client=client)
    message = str(caught.value)
    assert message.startswith("AWS Cost Explorer: unexpected response: UnblendedCost of 2027-03")
    assert expected in message


def test_a_real_month_that_large_passes_with_the_limit_raised(ce: Any) -> None:
    client, stubber = ce
    page = load("get_cost_and_usage_page2.json")
    page["ResultsByTime"][0]["Total"]["UnblendedCost"]["Amount"] = "1.5e9"
    stubber.add_response("get_cost_and_usage", page, request(date(2027, 3, 1), END))
    frame = aws_actuals(date(2027, 3, 1), END, client=client, max_amount_usd=2e9)
    assert frame["actual_usd"].tolist() == [1.5e9]
