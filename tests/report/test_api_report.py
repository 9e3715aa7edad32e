"""Per-token API spend in the finance reports (issue 34): a stored recommendation whose ``api``
block buys API traffic (``api.pools``) reports it as its own rows, priced token by token, in the
projection, the showback, the workbook, the PDF's HTML and the FOCUS CSV; one where self-hosting
won reports as before. The stores are copies of the demo store with the API block written by
``planner.recommend.api`` (its real pool dictionaries) on the demo's recommendation #1."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sqlalchemy.orm import Session

from planner.demo import load_demo
from planner.recommend.api import ApiChoice, Tokens, api_pool, api_usd
from planner.recommend.engine import Recommendation
from planner.report.focus import focus_frame
from planner.report.model import API_OPTION, COMMITMENT_COLUMNS, PROJECTION_COLUMNS, Report
from planner.store import open_store
from planner.store.recommendations import load_recommendation, save_recommendation
from planner.usecases.report import ReportRequest, build_report
from pricing.api import TokenPrice
from tests.report.test_focus_conformance import KNOWN_DEFECTS, validate
from tests.report.test_focus_conformance import validator as validator  # a fixture

BUILT = datetime(2026, 12, 1, 12, tzinfo=UTC)
FIRST = date(2027, 1, 1)
FIELDS = (
    "request", "demand", "winner", "plan", "ranked", "pareto", "rejected", "stats", "hourly",
    "notes",
)  # fmt: skip
PRICE = TokenPrice(
    provider="together",
    offer="meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
    model="llama-3.1-8b",
    catalog_model="llama-3.1-8b",
    input_usd_per_mtok=0.18,
    output_usd_per_mtok=0.30,
    cached_input_usd_per_mtok=None,
    batch_discount=None,
    rpm=None,
    tpm=None,
    context_tokens=None,
    currency="USD",
    source_url="https://www.together.ai/pricing",
    source_date="2026-11-20",
)
BASE_INSTANCES = 3  # the overflow plan's base fleet, all month
OVERFLOW_SHARE = 0.2  # of the demand's requests and tokens sent to the API in the overflow plan


@dataclass(frozen=True)
class Stores:
    path: Path
    result: dict[str, Any]  # recommendation #1's stored result
    tokens: Tokens  # an average month of its demand
    ids: dict[str, int]  # "api", "api-no-fleet", "overflow", "self-hosted" -> stored id


@contextmanager
def session_at(path: Path) -> Iterator[Session]:
    with open_store(f"sqlite:///{path}") as store, store.session() as session:
        yield session


def month_tokens(result: dict[str, Any]) -> Tokens:
    """An average 730-hour month of the stored demand, as ``planner.recommend.api`` counts it."""
    requests = np.asarray(result["hourly"]["requests"], dtype=float)
    per_month = requests.mean() * 730
    demand = result["demand"]
    return Tokens(
        per_month,
        per_month * demand["mean_input_tokens"],
        per_month * demand["mean_output_tokens"],
    )


def api_block(tokens: Tokens, choice: str, self_hosted: float | None) -> dict[str, Any]:
    usd = api_usd(PRICE, tokens)
    block = ApiChoice("api", [(PRICE, usd)], self_hosted, None, tokens).to_dict()
    if choice == "overflow":
        share = tokens.scaled(OVERFLOW_SHARE)
        block["pools"] = [api_pool(PRICE, share, api_usd(PRICE, share))]
    block["choice"] = choice
    return block


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    path = tmp_path_factory.mktemp("api-report") / "planner.db"
    load_demo(f"sqlite:///{path}", quick=True)
    ids = {}
    with session_at(path) as session:
        result = load_recommendation(session, 1).result
        tokens = month_tokens(result)
        fields = {k: result[k] for k in FIELDS}
        hosted = float(result["plan"]["chosen"]["monthly_usd"])
        ids["fleet"] = save_recommendation(session, Recommendation(**fields)).id  # no API
        for name, choice in (("api", "api"), ("overflow", "overflow"), ("self", "self-hosted")):
            block = api_block(tokens, choice, hosted)
            if choice == "self-hosted":
                block["pools"] = []
            ids[name] = save_recommendation(session, Recommendation(**fields, api=block)).id
        # no self-hosted fleet met the targets: the API serves the demand
        empty = {**fields, "winner": None, "plan": None, "ranked": []}
        empty["hourly"] = {k: result["hourly"][k] for k in ("hour_start", "requests")}
        block = api_block(tokens, "api", None)
        ids["api-no-fleet"] = save_recommendation(session, Recommendation(**empty, api=block)).id
        # an overflow plan listing its base fleet beside the API pool (planner.recommend.overflow)
        block = api_block(tokens, "overflow", hosted)
        w = result["winner"]
        base = {
            "kind": "instance", "provider": w["provider"], "region": w["region"],
            "instance_type": w["instance_type"], "gpu": w["gpu"], "tp": w["tp"],
            "replicas": BASE_INSTANCES, "instances": BASE_INSTANCES, "purchase": "on-demand",
            "monthly_usd": 100.0,
        }  # fmt: skip
        block["pools"] = [base, *block["pools"]]
        ids["overflow-base"] = save_recommendation(session, Recommendation(**fields, api=block)).id
    return Stores(path, result, tokens, ids)


def report_of(stores: Stores, key: str | int, **options: Any) -> Report:
    run_id = stores.ids[key] if isinstance(key, str) else key
    with session_at(stores.path) as session:
        request = ReportRequest(run_id, built_at=BUILT, first_month=FIRST, **options)
        return build_report(request, lambda: nullcontext(session))


@pytest.fixture(scope="module")
def api_report(stores: Stores) -> Report:
    return report_of(stores, "api")


@pytest.fixture(scope="module")
def overflow_report(stores: Stores) -> Report:
    return report_of(stores, "overflow")


@pytest.fixture(scope="module")
def fleet_report(stores: Stores) -> Report:
    """The demo's recommendation #1 stored again without an API block."""
    return report_of(stores, "fleet")


def month_requests(result: dict[str, Any], month: date) -> float:
    """The stored hourly requests tiled over ``month``'s real hours, added up (worked out here
    the long way, not with planner.report.projection)."""
    hourly = result["hourly"]
    values, first_hour = hourly["requests"], hourly["hour_start"][0]
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    after = datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC)
    offset = int((start.timestamp() - first_hour) // 3600)
    hours = (after - start) // timedelta(hours=1)
    return float(sum(values[(offset + h) % len(values)] for h in range(hours)))


def expected_api_rows(report: Report) -> pd.DataFrame:
    p = report.projection
    return p[(p["purchase_option"] == API_OPTION) & (p["scenario"] == "expected")]


def check_api_rows(report: Report, stores: Stores, share: float) -> None:
    """Each month's API row is the month's tokens (the average month's times the month's
    requests over an average month's) at the offer's prices."""
    rows = expected_api_rows(report)
    assert len(rows) == 12
    average = np.mean(stores.result["hourly"]["requests"]) * 730
    for row in rows.to_dict("records"):
        factor = month_requests(stores.result, row["month"]) / average
        tokens_in = stores.tokens.input_tokens * share * factor
        tokens_out = stores.tokens.output_tokens * share * factor
        assert row["input_tokens"] == pytest.approx(tokens_in)
        assert row["output_tokens"] == pytest.approx(tokens_out)
        usd = (tokens_in * 0.18 + tokens_out * 0.30) / 1e6
        assert row["cash_usd"] == pytest.approx(usd) == pytest.approx(row["amortized_usd"])
        assert row["instance_hours"] == 0 and row["upfront_usd"] == 0
        assert row["provider"] == "together" and row["instance_type"] == PRICE.offer
        assert row["tokens_millions"] == pytest.approx((tokens_in + tokens_out) / 1e6)


def test_an_api_plan_reports_the_api_alone(api_report: Report, stores: Stores) -> None:
    projection = api_report.projection
    assert set(projection["purchase_option"]) == {API_OPTION}  # no self-hosted instance rows
    assert list(projection.columns)[: len(PROJECTION_COLUMNS)] == list(PROJECTION_COLUMNS)
    check_api_rows(api_report, stores, 1.0)
    # the report's totals are the API's cost, month by month
    totals = api_report.monthly_totals("expected", "cash")
    assert totals.sum() == pytest.approx(expected_api_rows(api_report)["cash_usd"].sum())
    assert api_report.commitments.empty
    assert list(api_report.commitments.columns) == list(COMMITMENT_COLUMNS)
    # the headline month is the API's bill of an average month of the demand
    summary = api_report.summary
    assert summary["monthly_usd"] == pytest.approx(api_usd(PRICE, stores.tokens))
    assert summary["api_choice"] == "api" and summary["peak_instances"] == 0
    assert summary["self_hosted_alternative_monthly_usd"] == pytest.approx(
        stores.result["plan"]["chosen"]["monthly_usd"]
    )
    tokens = (stores.tokens.input_tokens + stores.tokens.output_tokens) / 1e6
    assert summary["usd_per_million_tokens"] == pytest.approx(summary["monthly_usd"] / tokens)
    assert api_report.title.startswith("API plan: llama-3.1-8b")


def test_an_api_plan_names_its_prices_source(api_report: Report) -> None:
    rows = api_report.assumptions
    price = rows[rows["item"] == "API price"].iloc[0]
    assert price["source"] == PRICE.source_url
    assert "2026-11-20" in price["value"] and "0.18" in price["value"]
    assert "calibration profile" not in set(rows["item"])  # no fleet, no latency model
    assert any(PRICE.source_url in s for s in api_report.key_assumptions)


def test_the_scenarios_follow_the_forecast_for_the_api_too(api_report: Report) -> None:
    low, expected, high = (api_report.monthly_totals(s) for s in ("low", "expected", "high"))
    assert (low <= expected + 1e-9).all() and (expected <= high + 1e-9).all()
    assert (high > expected).any()  # the demo's demand is a forecast with bands


def test_an_api_plan_without_a_self_hosted_fleet(stores: Stores, api_report: Report) -> None:
    report = report_of(stores, "api-no-fleet")
    assert set(report.projection["purchase_option"]) == {API_OPTION}
    pd.testing.assert_series_equal(report.monthly_totals(), api_report.monthly_totals())
    assert report.summary["self_hosted_alternative_monthly_usd"] is None


def test_an_overflow_plan_adds_the_api_to_the_fleet(
    overflow_report: Report, fleet_report: Report, stores: Stores
) -> None:
    projection = overflow_report.projection
    instances = projection[projection["purchase_option"] != API_OPTION]
    # the self-hosted base fleet's rows are the fleet report's, their tokens less the API's
    base = fleet_report.projection
    assert len(instances) == len(base)
    assert instances["cash_usd"].to_numpy() == pytest.approx(base["cash_usd"].to_numpy())
    assert instances["tokens_millions"].to_numpy() == pytest.approx(
        base["tokens_millions"].to_numpy() * (1 - OVERFLOW_SHARE)
    )
    check_api_rows(overflow_report, stores, OVERFLOW_SHARE)
    for scenario in ("low", "expected", "high"):
        api = projection[
            (projection["purchase_option"] == API_OPTION) & (projection["scenario"] == scenario)
        ]
        assert overflow_report.monthly_totals(scenario).sum() == pytest.approx(
            fleet_report.monthly_totals(scenario).sum() + api["cash_usd"].sum()
        )
    api_month = api_usd(PRICE, stores.tokens.scaled(OVERFLOW_SHARE))
    summary = overflow_report.summary
    assert summary["monthly_usd"] == pytest.approx(fleet_report.summary["monthly_usd"] + api_month)
    assert summary["api_monthly_usd"] == pytest.approx(api_month)
    assert summary["api_share_of_tokens"] == pytest.approx(OVERFLOW_SHARE)
    # the showback: the base fleet and the API pool, their costs adding up to the plan's
    showback = overflow_report.showback
    assert showback is not None and showback["pool"].iloc[0] == "self-hosted"
    assert showback["monthly_usd"].sum() == pytest.approx(summary["monthly_usd"])
    api_row = showback.iloc[1]
    assert api_row["usd_per_million_tokens"] == pytest.approx(
        api_month / (stores.tokens.scaled(OVERFLOW_SHARE).input_tokens * 1e-6
                     + stores.tokens.scaled(OVERFLOW_SHARE).output_tokens * 1e-6)
    )  # fmt: skip


def test_self_hosting_chosen_changes_nothing(stores: Stores, fleet_report: Report) -> None:
    report = report_of(stores, "self")
    pd.testing.assert_frame_equal(report.projection, fleet_report.projection)
    assert report.summary == fleet_report.summary
    assert report.showback is None
    assert list(report.projection.columns) == list(PROJECTION_COLUMNS)


def api_focus_rows(report: Report) -> pd.DataFrame:
    frame = focus_frame(report)
    return frame[frame["x_PurchaseOption"] == API_OPTION]


def test_focus_api_rows_are_token_usage(api_report: Report) -> None:
    frame = api_focus_rows(api_report)
    assert len(frame) == 2 * len(api_report.projection)  # input and output, every row
    assert set(frame["ChargeCategory"]) == {"Usage"}
    assert set(frame["PricingUnit"]) == {"1000000 Tokens"}
    assert set(frame["ConsumedUnit"]) == {"Tokens"}
    assert set(frame["ServiceCategory"]) == {"AI and Machine Learning"}
    assert set(frame["ProviderName"]) == set(frame["PublisherName"]) == {"Together AI"}
    assert frame["RegionId"].isna().all()
    projection = api_report.projection
    for side, price in (("input", 0.18), ("output", 0.30)):
        rows = frame[frame["SkuPriceId"].str.endswith(f"/{side}")]
        assert len(rows) == len(projection)
        assert set(rows["ListUnitPrice"]) == {price}
        assert set(rows["SkuId"]) == {f"planner-sku/api/together/{PRICE.offer}"}
        assert rows["ChargeDescription"].str.contains(f"{side} tokens").all()
        # quantities: consumed in tokens, priced in millions of tokens at the listed price
        assert rows["ConsumedQuantity"].sum() == pytest.approx(projection[f"{side}_tokens"].sum())
        assert rows["PricingQuantity"].to_numpy() == pytest.approx(
            rows["ConsumedQuantity"].to_numpy() / 1e6
        )
        assert rows["BilledCost"].to_numpy() == pytest.approx(
            rows["ConsumedQuantity"].to_numpy() * price / 1e6
        )
    # per scenario, the rows add up to the report's totals (cash and amortized alike)
    for scenario in ("low", "expected", "high"):
        part = frame[frame["x_Scenario"] == scenario]
        assert part["BilledCost"].sum() == pytest.approx(api_report.monthly_totals(scenario).sum())
        assert part["EffectiveCost"].sum() == pytest.approx(part["BilledCost"].sum())


def test_focus_of_an_overflow_plan_has_both(overflow_report: Report) -> None:
    frame = focus_frame(overflow_report, ["expected"])
    api = frame["x_PurchaseOption"] == API_OPTION
    assert api.any() and (~api).any()
    assert set(frame.loc[~api, "ServiceCategory"]) == {"Compute"}
    assert frame["BilledCost"].sum() == pytest.approx(
        overflow_report.monthly_totals("expected").sum()
    )


def test_the_workbook_shows_the_api_rows(overflow_report: Report) -> None:
    from planner.report.excel import build_workbook

    workbook = build_workbook(overflow_report)
    detail = workbook["Projection detail"]
    headers = [
        c.value for c in next(r for r in detail.iter_rows() if "Month" in [c.value for c in r])
    ]
    assert "Input tokens (millions)" in headers and "$ per million input tokens" in headers
    api_cells = [row for row in detail.iter_rows() if any(c.value == API_OPTION for c in row)]
    assert len(api_cells) == len(overflow_report.projection.query("purchase_option == @API_OPTION"))
    money = headers.index("Cash cost ($ in the month)")
    assert "$" in api_cells[0][money].number_format
    sources = [c.value for row in workbook["Assumptions"].iter_rows() for c in row]
    assert PRICE.source_url in sources
    assert "Showback" in workbook.sheetnames


def test_the_pdf_shows_the_api_spend(api_report: Report) -> None:
    from planner.report.pdf import report_html

    html = report_html(api_report, {})
    assert "Per-token API spend" in html
    assert PRICE.offer in html and PRICE.source_url in html
    assert "$0.18" in html


def test_an_overflow_plan_buys_its_base_fleet(stores: Stores) -> None:
    """The base fleet listed in ``api.pools`` (kind instance) is the self-hosted part: its
    instances all month at the on-demand price, not the winner's whole fleet."""
    report = report_of(stores, "overflow-base")
    projection = report.projection
    expected = projection[projection["scenario"] == "expected"]
    instances = expected[expected["purchase_option"] != API_OPTION]
    assert set(instances["purchase_option"]) == {"on-demand"}
    rate = None
    for row in instances.to_dict("records"):
        hours = month_requests_hours(row["month"])
        assert row["instance_hours"] == pytest.approx(BASE_INSTANCES * hours)
        rate = rate or row["cash_usd"] / row["instance_hours"]
        assert row["cash_usd"] == pytest.approx(rate * row["instance_hours"])
    check_api_rows(report, stores, OVERFLOW_SHARE)
    assert rate is not None
    fleet_month = BASE_INSTANCES * 730 * rate
    api_month = api_usd(PRICE, stores.tokens.scaled(OVERFLOW_SHARE))
    assert report.summary["self_hosted_part_monthly_usd"] == pytest.approx(fleet_month)
    assert report.summary["monthly_usd"] == pytest.approx(fleet_month + api_month)
    assert report.summary["on_demand_monthly_usd"] == pytest.approx(fleet_month + api_month)
    assert report.summary["peak_instances"] == BASE_INSTANCES
    assert report.monthly_totals().sum() == pytest.approx(expected["cash_usd"].sum())


def month_requests_hours(month: date) -> int:
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    after = datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC)
    return (after - start) // timedelta(hours=1)


def test_focus_with_api_rows_fails_no_more_rules(
    validator: Path, api_report: Report, overflow_report: Report, tmp_path: Path
) -> None:
    """The FinOps Foundation's validator on the API plan's and the overflow plan's FOCUS files:
    no rule fails but the known defect of its rule file (as for instances alone)."""
    from planner.report.focus import write_focus_csv

    for name, report in (("api", api_report), ("overflow", overflow_report)):
        data = write_focus_csv(report, tmp_path / f"{name}.csv")
        result = validate(validator, data)
        assert result.total > 500
        assert result.failures() - KNOWN_DEFECTS == set(), (name, result.output[-6000:])
