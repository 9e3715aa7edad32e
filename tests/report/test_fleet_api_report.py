"""A fleet whose models are bought by the token (issue 34): the small fleet of
``tests.report.test_fleet_report`` with its last model (or every model) served by a per-token API
instead of its pools (``ModelPlan.api_pool``, as ``planner.recommend.mix`` sets it; the real
DeepInfra price of the bundled API snapshot), stored and reported by the use case as ``planner
report`` does. The API pools are their own rows in the projection, the showback, the workbook,
the PDF and the FOCUS CSV; the totals are the GPU pools' and the API pools' costs."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from planner.recommend.api import Tokens, api_pool, api_usd
from planner.recommend.mix import FleetRecommendation, ModelPlan
from planner.report.fleet import FleetReportInputs, api_inputs, build_fleet
from planner.report.focus import focus_frame, write_focus_csv
from planner.report.model import API_OPTION, Report, showback_by_model
from planner.report.projection import month_hours
from planner.store import open_store
from planner.store.recommendations import save_recommendation
from planner.usecases.report import ReportRequest, build_report
from pricing.api import TokenPrice, api_prices_for, load_api_snapshot
from pricing.costs import HOURS_PER_MONTH
from pricing.sheets import store_version
from tests.report.test_fleet_report import (
    BUILT,
    FIRST,
    LARGE,
    PRICES,
    SMALL,
    fleet_inputs,
    small_fleet,
)
from tests.report.test_focus_conformance import KNOWN_DEFECTS, validate
from tests.report.test_focus_conformance import validator as validator  # a fixture

MONTHS = 3


def deepinfra() -> TokenPrice:
    [price, *_] = api_prices_for("llama-3.1-8b", load_api_snapshot(), provider="deepinfra")
    return price


def month_of(plan: ModelPlan, found: FleetRecommendation) -> Tokens:
    """An average 730-hour month of ``plan``'s model's demand, as the API would bill it."""
    demand = next(m.demand for m in found.request.models if m.model == plan.model)
    per_month = float(demand.curve.requests_per_hour.mean()) * HOURS_PER_MONTH
    return Tokens(
        per_month,
        per_month * float(demand.inputs.mean()),
        per_month * float(demand.outputs.mean()),
    )


def on_the_api(found: FleetRecommendation, models: set[str]) -> FleetRecommendation:
    """``found`` with ``models`` bought by the token (their pools out of the fleet)."""
    price = deepinfra()
    plans = []
    for plan in found.models:
        if plan.model in models:
            tokens = month_of(plan, found)
            pool = api_pool(price, tokens, api_usd(price, tokens))
            plan = replace(plan, pools=[], api_pool=pool)
        plans.append(plan)
    return replace(found, models=plans)


@dataclass(frozen=True)
class Built:
    result: dict[str, Any]  # the stored result (the fleet's to_dict)
    report: Report  # reported from the store by the use case


def reported(home: Path, fleet: FleetRecommendation) -> Built:
    """``fleet`` stored beside the hand-made prices, reported as ``planner report`` does."""
    url = f"sqlite:///{home / 'planner.db'}"
    with open_store(url) as store, store.session() as session:
        store_version(session, PRICES, source_kind="user", label="test prices")
        run = save_recommendation(session, fleet).id
        request = ReportRequest(run, months=MONTHS, first_month=FIRST, built_at=BUILT)
        report = build_report(request, lambda: nullcontext(session))
    return Built(fleet.to_dict(), report)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The small fleet with its large model bought by the token."""
    return reported(tmp_path_factory.mktemp("mixed"), on_the_api(small_fleet(), {LARGE}))


@pytest.fixture(scope="module")
def all_api(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The small fleet with both models bought by the token: no GPU pool at all."""
    return reported(tmp_path_factory.mktemp("all-api"), on_the_api(small_fleet(), {SMALL, LARGE}))


def api_rows(report: Report, scenario: str = "expected") -> pd.DataFrame:
    p = report.projection
    return p[(p["purchase_option"] == API_OPTION) & (p["scenario"] == scenario)]


def check_api_rows(report: Report, pool: dict[str, Any]) -> None:
    """Each month's API row: the pool's average month of tokens times the month's hours over
    730 (the 4-hour demand tiles every month whole), at the offer's prices."""
    price = deepinfra()
    rows = api_rows(report)
    rows = rows[rows["pool"] == pool["pool"]]
    assert len(rows) == MONTHS
    for row in rows.to_dict("records"):
        share = month_hours(row["month"]) / HOURS_PER_MONTH
        tokens_in = pool["input_tokens_per_month"] * share
        tokens_out = pool["output_tokens_per_month"] * share
        assert row["input_tokens"] == pytest.approx(tokens_in)
        assert row["output_tokens"] == pytest.approx(tokens_out)
        usd = (tokens_in * price.input_usd_per_mtok + tokens_out * price.output_usd_per_mtok) / 1e6
        assert row["cash_usd"] == pytest.approx(usd) == pytest.approx(row["amortized_usd"])
        assert row["instance_hours"] == 0 and row["upfront_usd"] == 0
        assert row["provider"] == "deepinfra" and row["instance_type"] == price.offer
        assert row["model"] == pool["models"][0]
        assert row["tokens_millions"] == pytest.approx((tokens_in + tokens_out) / 1e6)


def test_the_fleets_cost_is_its_pools_and_its_api(mixed: Built) -> None:
    winner = mixed.result["winner"]
    [pool] = winner["api_pools"]
    assert pool["pool"] == LARGE and winner["pools"] and LARGE not in winner["pools"][0]["models"]
    report = mixed.report
    gpu = sum(p["monthly_usd"] for p in winner["pools"])
    # the headline: the recommendation's own monthly cost, its GPU pools' and its API's
    assert report.summary["monthly_usd"] == pytest.approx(winner["monthly_usd"])
    assert report.summary["monthly_usd"] == pytest.approx(gpu + pool["monthly_usd"])
    assert report.summary["api_monthly_usd"] == pytest.approx(pool["monthly_usd"])
    assert report.summary["self_hosted_part_monthly_usd"] == pytest.approx(gpu)
    assert report.summary["api_pools"] == 1 and report.summary["pools"] == len(winner["pools"])
    assert report.summary["models"] == 2
    # the first month (744 hours, the 4-hour demand tiled whole): the same cost, for its hours
    january = report.monthly_totals("expected", "amortized")[FIRST]
    assert january == pytest.approx(winner["monthly_usd"] * month_hours(FIRST) / HOURS_PER_MONTH)
    check_api_rows(report, pool)
    # the pools' rows are the fleet's without the model bought by the token
    gpu_rows = report.projection[report.projection["purchase_option"] != API_OPTION]
    assert set(gpu_rows["model"]) == {SMALL} and set(report.projection["model"]) == {SMALL, LARGE}
    assert set(report.commitments["model"]) <= {SMALL}
    assert (
        report.title
        == f"GPU fleet plan: 2 models on {len(winner['pools'])} pool and 1 per-token API"
    )


def test_the_api_models_load_is_its_own(mixed: Built) -> None:
    """The API model's hourly requests are the fleet's less the GPU pools': its own demand."""
    from planner.report.fleet import stored_fleet

    fleet = stored_fleet(1, BUILT, mixed.result)
    [stored] = fleet.api_stored
    large = next(m.demand for m in small_fleet().request.models if m.model == LARGE)
    assert stored.requests == pytest.approx(large.curve.requests_per_hour)
    assert stored.instances.sum() == 0 and stored.winner == {}


def test_the_showback_shows_the_api_model_its_api_cost(mixed: Built) -> None:
    showback = mixed.report.showback
    assert showback is not None
    [pool] = mixed.result["winner"]["api_pools"]
    api = showback[showback["pool"] == pool["pool"]].iloc[0]
    assert api["provider"] == "deepinfra" and api["instance_type"] == deepinfra().offer
    assert api["monthly_usd"] == pytest.approx(pool["monthly_usd"])
    tokens = (pool["input_tokens_per_month"] + pool["output_tokens_per_month"]) / 1e6
    assert api["tokens_millions_per_month"] == pytest.approx(tokens)
    assert api["usd_per_million_tokens"] == pytest.approx(pool["monthly_usd"] / tokens)
    assert api["purchase"].startswith("per token: ")
    assert showback["monthly_usd"].sum() == pytest.approx(mixed.report.summary["monthly_usd"])
    assert showback["share_of_cost"].sum() == pytest.approx(1.0)
    by_model = showback_by_model(showback).set_index("model")
    assert by_model.loc[LARGE, "monthly_usd"] == pytest.approx(pool["monthly_usd"])
    gpu = sum(p["monthly_usd"] for p in mixed.result["winner"]["pools"])
    assert by_model.loc[SMALL, "monthly_usd"] == pytest.approx(gpu)


def test_the_sensitivity_moves_the_api_with_load_and_prices(mixed: Built) -> None:
    """Each case: the GPU pool's own case plus the API's cost, moved by the load and the
    prices (its tokens and its prices), not by spot interruptions."""
    from planner.report.build import build

    [pool] = mixed.result["winner"]["api_pools"]
    [gpu] = fleet_inputs(mixed.result).pools
    alone = build(gpu, months=MONTHS, first_month=FIRST, built_at=BUILT).sensitivity
    cases = mixed.report.sensitivity
    assert list(cases["case"]) == list(alone["case"])
    for case, own in zip(cases.to_dict("records"), alone.to_dict("records"), strict=True):
        moves = case["kind"] in ("load", "price")
        api = pool["monthly_usd"] * (case["factor"] if moves else 1.0)
        assert case["kept_monthly_usd"] == pytest.approx(own["kept_monthly_usd"] + api)
        assert case["replanned_monthly_usd"] == pytest.approx(own["replanned_monthly_usd"] + api)
        assert case["replanned_purchase"].endswith(f"{LARGE}: the same API offer")


def test_focus_has_the_api_usage_rows(mixed: Built) -> None:
    frame = focus_frame(mixed.report)
    api = frame[frame["x_PurchaseOption"] == API_OPTION]
    assert len(api) == 2 * len(mixed.report.projection.query("purchase_option == @API_OPTION"))
    assert set(api["ChargeCategory"]) == {"Usage"}
    assert set(api["PricingUnit"]) == {"1000000 Tokens"}
    assert set(api["ConsumedUnit"]) == {"Tokens"}
    assert set(api["ServiceCategory"]) == {"AI and Machine Learning"}
    assert set(api["x_Model"]) == {LARGE} and set(api["x_Pool"]) == {LARGE}
    assert api["ResourceId"].str.endswith(f"/{LARGE}").all()
    assert api["Tags"].str.contains(f'"planner:model":"{LARGE}"').all()
    price = deepinfra()
    for side, unit in (("input", price.input_usd_per_mtok), ("output", price.output_usd_per_mtok)):
        rows = api[api["SkuPriceId"].str.endswith(f"/{side}")]
        assert rows["BilledCost"].to_numpy() == pytest.approx(
            rows["ConsumedQuantity"].to_numpy() * unit / 1e6
        )
    for scenario in ("low", "expected", "high"):
        part = frame[frame["x_Scenario"] == scenario]
        assert part["BilledCost"].sum() == pytest.approx(
            mixed.report.monthly_totals(scenario).sum()
        )


def test_focus_of_fleets_with_apis_fails_no_more_rules(
    validator: Path, mixed: Built, all_api: Built, tmp_path: Path
) -> None:
    for name, built in (("mixed", mixed), ("all-api", all_api)):
        data = write_focus_csv(built.report, tmp_path / f"{name}.csv")
        result = validate(validator, data)
        assert result.total > 500
        assert result.failures() - KNOWN_DEFECTS == set(), (name, result.output[-6000:])


def test_the_workbook_and_the_pdf_show_the_api_pool(mixed: Built) -> None:
    from planner.report.excel import SHOWBACK, build_workbook
    from planner.report.pdf import report_html

    workbook = build_workbook(mixed.report)
    labels = [row[0].value for row in workbook[SHOWBACK].iter_rows()]
    assert f"{LARGE}: all pools" in labels and "Fleet" in labels
    detail = workbook["Projection detail"]
    cells = [row for row in detail.iter_rows() if any(c.value == API_OPTION for c in row)]
    assert len(cells) == len(mixed.report.projection.query("purchase_option == @API_OPTION"))
    assert any(c.value == LARGE for c in cells[0])
    html = report_html(mixed.report, {})
    assert "Per-token API spend" in html and deepinfra().offer in html
    assert f"${mixed.report.summary['monthly_usd']:,.2f}" in html


def test_a_fleet_all_on_apis_reports(all_api: Built) -> None:
    winner = all_api.result["winner"]
    assert winner["pools"] == [] and len(winner["api_pools"]) == 2
    report = all_api.report
    assert set(report.projection["purchase_option"]) == {API_OPTION}
    assert set(report.projection["model"]) == {SMALL, LARGE}
    assert report.commitments.empty
    assert report.summary["monthly_usd"] == pytest.approx(winner["monthly_usd"])
    assert report.summary["peak_instances"] == 0 and report.summary["pools"] == 0
    january = report.monthly_totals("expected", "cash")[FIRST]
    assert january == pytest.approx(winner["monthly_usd"] * month_hours(FIRST) / HOURS_PER_MONTH)
    for pool in winner["api_pools"]:
        check_api_rows(report, pool)
    assert report.title == "API plan: 2 models on 2 per-token APIs"
    assert report.showback is not None and len(report.showback) == 2
    assert not report.sensitivity.empty
    from planner.report.excel import build_workbook
    from planner.report.pdf import report_html

    assert "Showback" in build_workbook(report).sheetnames
    html = report_html(report, {})
    assert "Per-token API spend" in html and f"${report.summary['monthly_usd']:,.2f}" in html


def test_an_api_models_scenarios_follow_its_forecast(mixed: Built) -> None:
    """An API model planned on a stored forecast: its low and high tokens follow the
    forecast's bands, as a GPU pool's load does."""
    from planner.report.build import DemandForecast
    from planner.report.fleet import stored_fleet

    data = {**mixed.result, "demand": {**mixed.result["demand"], "models": {}}}
    data["demand"]["models"] = dict(mixed.result["demand"]["models"])
    data["demand"]["models"][LARGE] = {
        **mixed.result["demand"]["models"][LARGE],
        "source": "forecast #6 at q0.5 (test)",
    }
    fleet = stored_fleet(7, BUILT, data)
    [stored] = fleet.api_stored
    demand = stored.requests
    hours = pd.to_datetime(data["hourly"]["hour_start"], unit="s")
    frame = pd.DataFrame(
        {"ds": hours, "metric": "requests", "mean": demand, "lower_80": 0.8 * demand,
         "upper_80": 1.25 * demand, "lower_95": 0.7 * demand, "upper_95": 1.4 * demand,
         "demand": demand}
    )  # fmt: skip
    forecast = DemandForecast(6, "test", "prophet", BUILT, 0.5, None, frame)
    plain = fleet_inputs(data)
    inputs = FleetReportInputs(plain.fleet, plain.pools, [api_inputs(stored, forecast)])
    report = build_fleet(inputs, months=1, first_month=FIRST, built_at=BUILT)
    tokens = api_rows(report, "high")["tokens_millions"].sum()
    expected = api_rows(report)["tokens_millions"].sum()
    low = api_rows(report, "low")["tokens_millions"].sum()
    assert tokens == pytest.approx(1.25 * expected) and low == pytest.approx(0.8 * expected)
    assert any("forecast #6" in s for s in report.key_assumptions)
    # the GPU pool's scenarios stay the same load (its demand is no forecast)
    gpu = report.projection[report.projection["purchase_option"] != API_OPTION]
    by = gpu.groupby("scenario")["cash_usd"].sum()
    assert by["low"] == pytest.approx(by["high"])
    assert np.isfinite(report.summary["monthly_usd"])
