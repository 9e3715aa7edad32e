"""The finance report of a fleet of pools, from a real (small) fleet recommendation: two models,
each on its own pool, found by ``planner.recommend.mix.recommend_fleet`` on a tiny synthetic
demand and hand-made on-demand prices. Every pool is projected on its own and the report adds
them up; the projection rows carry their model and pool; the showback has a row per pool and
per model; the Excel workbook and the PDF show it."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from datetime import UTC, date, datetime
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from openpyxl import load_workbook  # type: ignore[import-untyped]
from pypdf import PdfReader

from planner.errors import PlannerError
from planner.recommend.inputs import Constraints, Demand, Request, SearchOptions, Targets
from planner.recommend.mix import FleetRecommendation, FleetRequest, ModelDemand, recommend_fleet
from planner.report.build import (
    Calibration,
    DemandForecast,
    PriceSheet,
    ReportInputs,
    SheetPrice,
    build,
)
from planner.report.excel import SHOWBACK, write_workbook
from planner.report.fleet import FleetReportInputs, build_fleet, stored_fleet
from planner.report.focus import focus_frame
from planner.report.model import SCENARIOS, Report, showback_by_model
from planner.report.pdf import write_pdf
from planner.report.projection import month_hours
from planner.simulate.metrics import SLO
from planner.store import open_store
from planner.store.recommendations import save_recommendation
from planner.usecases.report import ReportRequest, build_report
from planner.workload.rates import RateCurve
from pricing.costs import HOURS_PER_MONTH
from pricing.model import PricePoint, PurchaseOption
from pricing.sheets import store_version
from tests.integration.test_recommend_engine import H100, L4, START, point, profile_for
from tests.report.test_charts import _chromium_or_skip

SMALL, LARGE = "llama-3.1-8b", "llama-3.1-70b"
# on demand, a reserved H100 and savings plans for both (so pools commit, and a savings plan
# across the pools can be weighed)
PRICES: list[PricePoint] = [
    L4,
    H100,
    point("p5.4xlarge", "H100-SXM", 1, 2.6, PurchaseOption.RESERVED_1Y),
    point("g6.xlarge", "L4", 1, 0.6, PurchaseOption.SAVINGS_PLAN_1Y),
    point("p5.4xlarge", "H100-SXM", 1, 3.0, PurchaseOption.SAVINGS_PLAN_1Y),
]
FIRST = date(2027, 1, 1)
BUILT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _demand(rates: list[float], seed: int) -> Demand:
    rng = np.random.default_rng(seed)
    inputs = rng.integers(100, 1500, 300).astype(np.int64)
    outputs = rng.integers(50, 200, 300).astype(np.int64)
    return Demand(RateCurve(START, np.array(rates)), inputs, outputs, f"test {seed}")


@cache
def small_fleet() -> FleetRecommendation:
    """A fleet of two models, each on its own pool (4 hours of load; on-demand prices only):
    about a second to find."""
    targets = Targets({"default": SLO(2.0, 0.1, None)})
    template = Request(
        _demand([1800.0, 3600.0, 5400.0, 2700.0], 1),
        targets,
        Constraints(
            model=SMALL,
            gpus=("L4", "H100-SXM"),
            precisions=("fp8",),
            tp_degrees=(1,),
            max_seqs=(64,),
            chunked_prefill=(True,),
        ),
        SearchOptions(
            verify_top=2, tighten_steps=0, compare_gpus=False, growth_check=False, workers=1
        ),
    )
    models = (
        ModelDemand(SMALL, _demand([1800.0, 3600.0, 5400.0, 2700.0], 1), targets),
        ModelDemand(LARGE, _demand([600.0, 1200.0, 1800.0, 900.0], 2), targets),
    )
    request = FleetRequest(models, template, (), source="test log")
    found = recommend_fleet(request, PRICES, profile_for)
    assert all(m.pools for m in found.models), [m.how for m in found.models]
    return found


def fleet_store(home: Path) -> int:
    """A store in ``home`` (``planner.db``) holding the hand-made prices and the small fleet;
    returns the fleet's recommendation id."""
    with open_store(f"sqlite:///{home / 'planner.db'}") as store, store.session() as session:
        store_version(session, PRICES, source_kind="user", label="test prices")
        return save_recommendation(session, small_fleet()).id


def fleet_inputs(result: dict[str, Any]) -> FleetReportInputs:
    """What the use case reads from the store, made by hand: the hand-made prices as one price
    sheet, no forecast, the built-in calibration."""
    fleet = stored_fleet(7, datetime(2026, 11, 30, 9, 0, tzinfo=UTC), result)
    sheet = PriceSheet(1, "test prices", "version 1 (test prices, 2024-01-01)", "test")
    pools = [
        ReportInputs(
            stored=stored,
            prices=[SheetPrice(p, 1) for p in PRICES],
            sheets={1: sheet},
            forecast=None,
            calibration=Calibration("built-in", "trtllm"),
        )
        for stored in fleet.stored
    ]
    return FleetReportInputs(fleet, pools)


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    return small_fleet().to_dict()


@pytest.fixture(scope="module")
def inputs(result: dict[str, Any]) -> FleetReportInputs:
    return fleet_inputs(result)


@pytest.fixture(scope="module")
def report(inputs: FleetReportInputs) -> Report:
    return build_fleet(inputs, months=3, first_month=FIRST, built_at=BUILT)


def test_every_pool_is_projected_with_its_model_and_pool(
    result: dict[str, Any], report: Report
) -> None:
    committed = [p for p in result["winner"]["pools"] if p["purchase"] != "on-demand"]
    assert committed, "the example should commit at least one pool"
    assert set(report.commitments["pool"]) == {p["pool"] for p in committed}
    pools = result["winner"]["pools"]
    projection = report.projection
    assert {"model", "pool"} <= set(projection.columns)
    assert set(projection["pool"]) == {p["pool"] for p in pools}
    assert set(projection["model"]) == {SMALL, LARGE}
    for pool in pools:
        rows = projection[(projection["pool"] == pool["pool"])]
        assert set(rows["model"]) == set(pool["models"])
        assert set(rows["instance_type"]) == {pool["instance_type"]}
        # the 4-hour pattern fits a month whole (744 h), so the month costs the pool's plan
        # as recommended (an average month of 730 h) times its hours, amortized
        january = rows[(rows["month"] == FIRST) & (rows["scenario"] == "expected")]
        planned = pool["plan"]["chosen"]["monthly_usd"]
        hours = month_hours(FIRST)
        assert january["amortized_usd"].sum() == pytest.approx(planned * hours / 730, rel=1e-9)
        assert set(january["purchase_option"]) >= {pool["plan"]["chosen"]["option"]}


def test_the_fleet_is_the_sum_of_its_pools(
    result: dict[str, Any], inputs: FleetReportInputs, report: Report
) -> None:
    alone = [build(p, months=3, first_month=FIRST, built_at=BUILT) for p in inputs.pools]
    for scenario in ("low", "expected", "high"):
        for view in ("cash", "amortized"):
            fleet = report.monthly_totals(scenario, view)
            summed = pd.concat([r.monthly_totals(scenario, view) for r in alone])
            by_month = summed.groupby(level=0).sum()
            assert fleet.to_dict() == pytest.approx(by_month.to_dict(), rel=1e-12)
    # the headline: the recommendation's own monthly cost (the prices have not moved)
    assert report.summary["monthly_usd"] == pytest.approx(result["winner"]["monthly_usd"])
    assert report.summary["pools"] == len(result["winner"]["pools"])
    assert report.summary["peak_instances"] == result["winner"]["peak_instances"]
    assert report.title == f"GPU fleet plan: 2 models on {len(result['winner']['pools'])} pools"
    # the sensitivity's cases are every pool's cases added up
    for case in report.sensitivity.itertuples():
        parts = [r.sensitivity[r.sensitivity["case"] == case.case] for r in alone]
        assert case.kept_monthly_usd == pytest.approx(
            sum(float(p["kept_monthly_usd"].sum()) for p in parts)
        )


def test_showback_has_a_row_per_pool_and_per_model(result: dict[str, Any], report: Report) -> None:
    showback = report.showback
    assert showback is not None
    pools = result["winner"]["pools"]
    assert list(showback["pool"]) == [p["pool"] for p in pools]
    assert showback["monthly_usd"].sum() == pytest.approx(report.summary["monthly_usd"])
    assert showback["share_of_cost"].sum() == pytest.approx(1.0)
    for row, pool in zip(showback.itertuples(), pools, strict=True):
        requests = np.asarray(pool["hourly_requests"])
        tokens = pool["mean_input_tokens"] + pool["mean_output_tokens"]
        per_month = requests.mean() * HOURS_PER_MONTH * tokens / 1e6
        assert row.tokens_millions_per_month == pytest.approx(per_month)
        assert row.usd_per_million_tokens == pytest.approx(pool["monthly_usd"] / per_month)
    by_model = showback_by_model(showback)
    assert list(by_model["model"]) == [SMALL, LARGE]
    for line in by_model.to_dict("records"):
        mine = [p for p in pools if line["model"] in p["models"]]
        assert line["pools"] == len(mine)
        assert line["monthly_usd"] == pytest.approx(sum(p["monthly_usd"] for p in mine))
        assert line["usd_per_million_tokens"] == pytest.approx(
            line["monthly_usd"] / line["tokens_millions_per_month"]
        )


def test_focus_rows_name_their_model_and_pool(report: Report) -> None:
    frame = focus_frame(report, ["expected"])
    assert frame["x_Model"].notna().all()
    assert set(frame["x_Pool"]) == set(report.projection["pool"])
    assert frame["BilledCost"].sum() == pytest.approx(report.monthly_totals("expected").sum())
    # each pool's commitment is its own, even where two pools buy the same instance type
    committed = frame[frame["CommitmentDiscountId"].notna()]
    assert len(committed) > 0
    for commitment, rows in committed.groupby("CommitmentDiscountId"):
        assert rows["x_Pool"].nunique() == 1, commitment
        assert str(commitment).endswith("/" + rows["x_Pool"].iloc[0])


def test_the_workbook_has_the_showback_and_the_pools(report: Report, tmp_path: Path) -> None:
    path = write_workbook(report, tmp_path / "fleet.xlsx")
    workbook = load_workbook(path)
    assert workbook.sheetnames[:2] == ["Summary", SHOWBACK]
    showback = [[c.value for c in row] for row in workbook[SHOWBACK].iter_rows()]
    labels = [row[0] for row in showback]
    assert f"{SMALL}: all pools" in labels and f"{LARGE}: all pools" in labels
    assert "Fleet" in labels
    pools = [row[1] for row in showback if row[1] in set(report.projection["pool"])]
    assert len(pools) == len(set(report.projection["pool"]))
    detail = workbook["Projection detail"]
    assert [detail.cell(4, i).value for i in (1, 2)] == ["Model", "Pool"]
    assert detail.max_row - 4 == len(report.projection)
    if not report.commitments.empty:  # each commitment names its pool
        commitments = workbook["Commitments"]
        assert [commitments.cell(4, i).value for i in (1, 2)] == ["Model", "Pool"]


def test_the_pdf_has_the_showback(report: Report, tmp_path: Path) -> None:
    _chromium_or_skip()
    path = write_pdf(report, tmp_path / "fleet.pdf")
    text = " ".join(" ".join((page.extract_text() or "").split()) for page in PdfReader(path).pages)
    assert "Showback per model" in text
    for model in (SMALL, LARGE):
        assert model in text
    assert f"${report.summary['monthly_usd']:,.2f}" in text


def test_a_fleet_without_a_winner_says_which_model_has_none(result: dict[str, Any]) -> None:
    broken = {**result, "winner": None}
    broken["models"] = [{**result["models"][0], "pools": [], "how": "no fleet meets the targets"}]
    with pytest.raises(PlannerError, match=f"{SMALL}: no fleet meets the targets"):
        stored_fleet(3, BUILT, broken)


def test_the_use_case_reports_a_stored_fleet(tmp_path: Path) -> None:
    """From the store, as ``planner report`` and the Reports page build it: each pool's prices
    in force, the same figures as the report built from the values."""
    recommendation = fleet_store(tmp_path)
    with open_store(f"sqlite:///{tmp_path / 'planner.db'}") as store, store.session() as session:
        built = build_report(
            ReportRequest(recommendation, months=3, first_month=FIRST, built_at=BUILT),
            lambda: nullcontext(session),
        )
    expected = build_fleet(
        fleet_inputs(small_fleet().to_dict()), months=3, first_month=FIRST, built_at=BUILT
    )
    assert built.recommendation_id == recommendation
    assert built.summary["monthly_usd"] == pytest.approx(expected.summary["monthly_usd"])
    assert built.monthly_totals().to_dict() == pytest.approx(expected.monthly_totals().to_dict())
    assert built.showback is not None and expected.showback is not None
    assert list(built.showback["pool"]) == list(expected.showback["pool"])


def test_pools_of_forecast_models_follow_their_forecasts_bands(result: dict[str, Any]) -> None:
    """A fleet planned on one stored forecast per model (recommend --demand ID,ID): each pool's
    low and high scenarios follow its model's forecast bands, scaled to the pool's requests."""
    data = {**result, "demand": {**result["demand"], "models": {}}}
    forecasts = {}
    for number, pool in enumerate(result["winner"]["pools"], start=5):
        model = pool["models"][0]
        data["demand"]["models"][model] = {
            **result["demand"]["models"][model],
            "source": f"forecast #{number} at q0.5 (test)",
        }
        # the model's forecast: its demand as planned (the pool's requests over its share of
        # the model's), an 80% band from 0.8x to 1.25x
        share = (
            pool["requests"] / next(m for m in result["models"] if m["model"] == model)["requests"]
        )
        demand = np.asarray(pool["hourly_requests"]) / share
        hours = pd.to_datetime(result["hourly"]["hour_start"], unit="s")
        frame = pd.DataFrame(
            {"ds": hours, "metric": "requests", "mean": demand, "lower_80": 0.8 * demand,
             "upper_80": 1.25 * demand, "lower_95": 0.7 * demand, "upper_95": 1.4 * demand,
             "demand": demand}
        )  # fmt: skip
        forecasts[pool["pool"]] = DemandForecast(number, "test", "prophet", BUILT, 0.5, None, frame)
    plain = fleet_inputs(data)
    inputs = FleetReportInputs(
        plain.fleet,
        [
            replace(p, forecast=forecasts[pool["pool"]])
            for p, pool in zip(plain.pools, result["winner"]["pools"], strict=True)
        ],
    )
    report = build_fleet(inputs, months=1, first_month=FIRST, built_at=BUILT)
    low, expected, high = (report.monthly_totals(s, "amortized").sum() for s in SCENARIOS)
    assert low <= expected < high
    for pool in result["winner"]["pools"]:
        rows = report.projection[
            (report.projection["pool"] == pool["pool"]) & (report.projection["month"] == FIRST)
        ]
        tokens = rows.groupby("scenario")["tokens_millions"].sum()
        assert tokens["high"] == pytest.approx(1.25 * tokens["expected"])
        assert tokens["low"] == pytest.approx(0.8 * tokens["expected"])
    said = " ".join(report.key_assumptions)
    assert "forecast #5" in said and "forecast #6" in said


def test_a_fleet_stored_before_pools_kept_their_hours_is_reported(
    result: dict[str, Any], report: Report
) -> None:
    """Pools without their own hourly requests, replicas and mean tokens (an older result):
    the fleet's requests times the pool's share, the model's mean tokens; the cost is the same."""
    kept = ("hourly_requests", "hourly_replicas", "mean_input_tokens", "mean_output_tokens")
    pools = [{k: v for k, v in p.items() if k not in kept} for p in result["winner"]["pools"]]
    older = {**result, "winner": {**result["winner"], "pools": pools}}
    built = build_fleet(fleet_inputs(older), months=3, first_month=FIRST, built_at=BUILT)
    assert built.monthly_totals().to_dict() == pytest.approx(report.monthly_totals().to_dict())
    assert built.showback is not None
    for row, pool in zip(built.showback.to_dict("records"), pools, strict=True):
        model = result["demand"]["models"][pool["models"][0]]
        requests = np.mean(result["hourly"]["requests"]) * pool["share_of_requests"]
        tokens = model["mean_input_tokens"] + model["mean_output_tokens"]
        assert row["tokens_millions_per_month"] == pytest.approx(
            requests * HOURS_PER_MONTH * tokens / 1e6
        )
