"""Actual Azure spend through the real CostManagementClient, its pipeline (authentication,
retries, deserialization) answered by a recorded transport: azure-core's RequestsTransport with a
requests adapter that replays recorded JSON instead of opening a socket. The credential is a
stub with get_token, the SDK's own seam. Payload shapes: tests/fixtures/actuals/README.md."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest
import requests
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError
from azure.core.pipeline.transport import RequestsTransport
from azure.mgmt.costmanagement import CostManagementClient
from requests.adapters import BaseAdapter
from urllib3.response import HTTPResponse

from planner.errors import PlannerError
from planner.report.actuals import azure_actuals, plan_vs_actual
from planner.report.actuals_common import SOURCE_COLUMNS, ActualsError
from planner.report.model import Report

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "actuals" / "azure"
SUBSCRIPTION = "00000000-0000-0000-0000-0000000000aa"
SCOPE = f"/subscriptions/{SUBSCRIPTION}"
START, END = date(2027, 1, 1), date(2027, 4, 1)
TOKEN = "fixture-token-never-shown"


def body(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


class ReplayAdapter(BaseAdapter):
    """requests' transport seam: answers each request with the next recorded (status, body) and
    keeps what was asked."""

    def __init__(self, answers: Iterable[tuple[int, bytes]]):
        super().__init__()
        self.answers = list(answers)
        self.asked: list[requests.PreparedRequest] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        self.asked.append(request)
        status, content = self.answers.pop(0)
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "Content-Length": str(len(content)),
            "x-ms-request-id": "00000000-0000-0000-0000-000000000001",
        }
        response = requests.Response()
        response.status_code = status
        response.raw = HTTPResponse(
            body=io.BytesIO(content), headers=headers, status=status, preload_content=False
        )
        response.headers.update(headers)
        response.url = request.url or ""
        response.request = request
        response.encoding = "utf-8"
        return response

    def close(self) -> None:
        pass


class RecordedTransport(RequestsTransport):  # type: ignore[misc]  # requests is untyped here
    """An azure-core HttpTransport that never leaves the process."""

    def __init__(self, *answers: tuple[int, bytes]):
        self.adapter = ReplayAdapter(answers)
        session = requests.Session()
        session.mount("https://", self.adapter)
        session.mount("http://", self.adapter)
        super().__init__(session=session, session_owner=False)


@dataclass
class StubCredential:
    """azure-core's TokenCredential protocol: get_token, or the failure a real one raises."""

    fails: bool = False
    scopes: list[tuple[str, ...]] = field(default_factory=list)

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        if self.fails:
            raise ClientAuthenticationError(
                "DefaultAzureCredential failed to retrieve a token from the included "
                "credentials.\nAttempted credentials:\n\tEnvironmentCredential: "
                "EnvironmentCredential authentication unavailable."
            )
        return AccessToken(TOKEN, 4_102_444_800)


def client(transport: RecordedTransport, credential: StubCredential | None = None) -> Any:
    return CostManagementClient(credential or StubCredential(), transport=transport, retry_total=0)


def sent(request: requests.PreparedRequest) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(cast(bytes, request.body or b"{}"))
    return data


def test_two_pages_by_next_link_and_the_month_without_a_row_is_zero() -> None:
    transport = RecordedTransport((200, body("query_page1.json")), (200, body("query_page2.json")))
    credential = StubCredential()
    frame = azure_actuals(SCOPE, START, END, client=client(transport, credential))
    assert list(frame.columns) == list(SOURCE_COLUMNS)
    assert list(frame["month"]) == [date(2027, 1, 1), date(2027, 2, 1), date(2027, 3, 1)]
    assert set(frame["provider"]) == {"azure"}
    assert frame["actual_usd"].tolist() == [2877.4031122, 0.0, 2615.9]
    first, second = transport.adapter.asked
    # the query as sent: POST to the scope, custom monthly window, end inclusive to the second
    assert first.method == "POST"
    url = urlsplit(first.url or "")
    assert url.netloc == "management.azure.com"
    assert url.path == f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.CostManagement/query"
    assert sent(first) == {
        "type": "ActualCost",
        "timeframe": "Custom",
        "timePeriod": {"from": "2027-01-01T00:00:00Z", "to": "2027-03-31T23:59:59Z"},
        "dataset": {
            "granularity": "Monthly",
            "aggregation": {"totalCost": {"name": "Cost", "function": "Sum"}},
        },
    }
    assert first.headers["Authorization"] == f"Bearer {TOKEN}"
    # the second page: the same query again with nextLink's $skiptoken
    assert parse_qs(urlsplit(second.url or "").query)["$skiptoken"] == ["AQAAAA=="]
    assert sent(second) == sent(first)
    assert credential.scopes[0] == ("https://management.azure.com/.default",)


def test_columns_are_read_by_name_in_any_order() -> None:
    transport = RecordedTransport((200, body("query_legacy_columns.json")))
    frame = azure_actuals(SCOPE, START, date(2027, 3, 1), client=client(transport))
    assert frame["actual_usd"].tolist() == [1200.25, 1100.5]


def test_no_rows_at_all_is_zero_every_month() -> None:
    transport = RecordedTransport((200, body("query_empty.json")))
    frame = azure_actuals(SCOPE, START, END, client=client(transport))
    assert frame["actual_usd"].tolist() == [0.0, 0.0, 0.0]


def test_amortized_cost_and_a_service_filter_are_sent() -> None:
    transport = RecordedTransport((200, body("query_empty.json")))
    azure_actuals(
        SCOPE,
        START,
        date(2027, 2, 1),
        client=client(transport),
        cost_type="AmortizedCost",
        services=["Virtual Machines"],
    )
    query = sent(transport.adapter.asked[0])
    assert query["type"] == "AmortizedCost"
    assert query["dataset"]["filter"] == {
        "dimensions": {"name": "ServiceName", "operator": "In", "values": ["Virtual Machines"]}
    }


def test_a_currency_other_than_usd_is_refused_without_a_stated_rate() -> None:
    transport = RecordedTransport((200, body("query_eur.json")))
    with pytest.raises(ActualsError) as caught:
        azure_actuals(SCOPE, START, date(2027, 2, 1), client=client(transport))
    message = str(caught.value)
    assert message.startswith("Azure Cost Management: the cost of 2027-01 is in 'EUR'")
    assert "exchange_rates" in message


def test_a_currency_other_than_usd_is_converted_at_the_stated_rate() -> None:
    transport = RecordedTransport((200, body("query_eur.json")))
    frame = azure_actuals(
        SCOPE, START, date(2027, 2, 1), client=client(transport), exchange_rates={"eur": 1.1}
    )
    assert frame["actual_usd"].tolist() == pytest.approx([2915.0])
    assert frame["currency"].tolist() == ["EUR"]


def test_a_credential_that_cannot_get_a_token_is_a_clear_message() -> None:
    transport = RecordedTransport()  # nothing may be sent
    with pytest.raises(PlannerError) as caught:
        azure_actuals(SCOPE, START, END, client=client(transport, StubCredential(fails=True)))
    message = str(caught.value)
    assert message.startswith("Azure Cost Management: no usable Azure credentials")
    assert "DefaultAzureCredential failed to retrieve a token" in message
    # the first line and the credentials tried, not azure-identity's whole report
    assert "Tried: EnvironmentCredential)" in message
    assert "authentication unavailable" not in message
    assert "az login" in message
    assert transport.adapter.asked == []
    assert caught.value.__cause__ is None


def test_a_refused_token_is_a_clear_message() -> None:
    refused = b'{"error": {"code": "InvalidAuthenticationToken", "message": "The access token is invalid."}}'
    transport = RecordedTransport((401, refused))
    with pytest.raises(ActualsError) as caught:
        azure_actuals(SCOPE, START, END, client=client(transport))
    message = str(caught.value)
    assert message.startswith("Azure Cost Management: no usable Azure credentials")
    assert "InvalidAuthenticationToken" in message and TOKEN not in message


def test_a_scope_the_identity_may_not_read_names_the_role() -> None:
    transport = RecordedTransport((403, body("error_forbidden.json")))
    with pytest.raises(ActualsError) as caught:
        azure_actuals(SCOPE, START, END, client=client(transport))
    message = str(caught.value)
    assert message.startswith(f"Azure Cost Management: access to scope {SCOPE} denied")
    assert "RBACAccessDenied" in message and "Cost Management Reader" in message
    assert TOKEN not in message


def test_an_answer_without_a_cost_column_is_refused() -> None:
    page = json.loads(body("query_page2.json"))
    page["properties"]["columns"][0]["name"] = "Quantity"
    transport = RecordedTransport((200, json.dumps(page).encode()))
    with pytest.raises(ActualsError, match="no column for the cost"):
        azure_actuals(SCOPE, START, END, client=client(transport))


def test_scope_and_window_are_checked_before_any_call() -> None:
    with pytest.raises(PlannerError, match="scope is empty"):
        azure_actuals(" / ", START, END, client=object())
    with pytest.raises(PlannerError, match="cost type 'Usage'"):
        azure_actuals(SCOPE, START, END, client=object(), cost_type="Usage")
    with pytest.raises(PlannerError, match="empty"):
        azure_actuals(SCOPE, END, END, client=object())


def test_plan_vs_actual_sums_two_scopes_of_one_month(report: Report) -> None:
    """Two subscriptions read one after the other: one row per month and provider."""
    frames = [
        azure_actuals(
            SCOPE,
            START,
            date(2027, 2, 1),
            client=client(RecordedTransport((200, body(name)))),
        )
        for name in ("query_page2.json", "query_legacy_columns.json")
    ]
    table = plan_vs_actual(report, pd.concat(frames, ignore_index=True))
    assert len(table) == 1
    assert table["actual_usd"].tolist() == [1200.25]  # page 2 has only March
    assert table["planned_usd"].tolist() == [0.0] and math.isnan(table["variance_pct"][0])


@pytest.mark.parametrize(
    ("cost", "expected"),
    [
        (1e308, "cost 1e+308 USD is beyond the 1,000,000,000 USD"),
        (-1e12, "cost -1,000,000,000,000.00 USD is beyond"),
        ("NaN", "cost nan USD is not a finite amount"),
        (10**400, "is not a number"),
    ],
)
def test_an_absurd_cost_is_refused_with_page_and_row(cost: object, expected: str) -> None:
    page = json.loads(body("query_page2.json"))
    page["properties"]["rows"][0][0] = cost
    transport = RecordedTransport((200, json.dumps(page).encode()))
    with pytest.raises(ActualsError) as caught:
        azure_actuals(SCOPE, START, END, client=client(transport))
    message = str(caught.value)
    assert message.startswith("Azure Cost Management: unexpected answer (page 1, row 1): ")
    assert expected in message


def test_a_real_month_that_large_passes_with_the_limit_raised() -> None:
    page = json.loads(body("query_page2.json"))
    page["properties"]["rows"][0][0] = 1.5e9
    transport = RecordedTransport((200, json.dumps(page).encode()))
    frame = azure_actuals(
        SCOPE, date(2027, 3, 1), END, client=client(transport), max_amount_usd=2e9
    )
    assert frame["actual_usd"].tolist() == [1.5e9]


def test_more_rows_than_a_monthly_answer_has_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.report import actuals_azure

    monkeypatch.setattr(actuals_azure, "MAX_ROWS", 0)
    transport = RecordedTransport((200, body("query_page2.json")))
    with pytest.raises(ActualsError, match="more than 0 rows by page 1"):
        azure_actuals(SCOPE, START, END, client=client(transport))


def test_an_answer_nested_too_deep_is_a_clear_error() -> None:
    deep = b'{"properties": {"rows": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    transport = RecordedTransport((200, deep))
    with pytest.raises(ActualsError) as caught:
        azure_actuals(SCOPE, START, END, client=client(transport))
    assert str(caught.value).startswith("Azure Cost Management: ")
