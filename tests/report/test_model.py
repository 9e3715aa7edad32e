"""``build_report`` on a real demo store (``planner.demo.load_demo(quick=True)``): the figures
against ``pricing.costs`` computed here, the scenarios' order, calendar hours, commitments,
sensitivity, and the stores it refuses (no fleet, unknown id) or reports with a note (prices
moved, an upfront, a demand that is not a forecast)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy.orm import Session

from planner.demo import load_demo
from planner.errors import NotFoundError, PlannerError
from planner.recommend.engine import Recommendation
from planner.report.model import (
    ASSUMPTION_COLUMNS,
    COMMITMENT_COLUMNS,
    PROJECTION_COLUMNS,
    SENSITIVITY_COLUMNS,
    Report,
)
from planner.store import open_store
from planner.store.recommendations import load_recommendation, save_recommendation
from planner.usecases.report import ReportRequest, build_report
from pricing.costs import Plan, Prices, fleet_cost
from pricing.model import PurchaseOption
from pricing.sheets import import_sheet, latest_prices
from tests.report.conftest import without_api

BUILT = datetime(2026, 12, 1, 12, tzinfo=UTC)
SUMMARY_KEYS = {
    "monthly_usd", "on_demand_monthly_usd", "savings_vs_on_demand_usd",
    "savings_vs_on_demand_pct", "current_fleet_monthly_usd", "savings_vs_current_usd",
    "savings_vs_current_pct", "usd_per_million_tokens", "slo_attainment", "p99_ttft_ms",
    "p99_tpot_ms", "p99_e2e_ms", "target_ttft_ms", "target_tpot_ms", "target_e2e_ms", "fleet",
    "purchase", "peak_instances", "mean_instances", "first_month", "months",
    # the confidence margin (None without one): planner.report.build._confidence_summary
    "confidence", "p99_ttft_upper_ms", "p99_tpot_upper_ms", "p99_e2e_upper_ms",
    "margin_usd_per_month", "point_estimate_monthly_usd",
}  # fmt: skip
RECOMMENDATION_FIELDS = (
    "request", "demand", "winner", "plan", "ranked", "pareto", "rejected", "stats", "hourly",
    "notes",
)  # fmt: skip


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report-model") / "planner.db"
    load_demo(f"sqlite:///{path}", quick=True)
    without_api(f"sqlite:///{path}")  # the fleet's own report (test_api_report: the API's)
    return path


@contextmanager
def session_at(path: Path) -> Iterator[Session]:
    with open_store(f"sqlite:///{path}") as store, store.session() as session:
        yield session


@pytest.fixture
def own_db(demo_db: Path, tmp_path: Path) -> Path:
    """A copy of the demo store a test may change."""
    path = tmp_path / "planner.db"
    shutil.copyfile(demo_db, path)
    return path


@pytest.fixture(scope="module")
def report(demo_db: Path) -> Report:
    with session_at(demo_db) as session:
        return build_report(
            ReportRequest(1, built_at=BUILT, current_fleet_monthly_usd=3000.0),
            lambda: nullcontext(session),
        )


@pytest.fixture(scope="module")
def stored(demo_db: Path) -> dict[str, Any]:
    with session_at(demo_db) as session:
        result: dict[str, Any] = load_recommendation(session, 1).result
        return result


def tiled(values: list[float], first_hour: float, month: date) -> np.ndarray:
    """The stored hourly values repeated over ``month``: each hour of the month takes the
    value of the pattern's hour the same number of hours after its start, modulo its length."""
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    after = datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC)
    hours = (after - start) // timedelta(hours=1)
    offset = int((start.timestamp() - first_hour) // 3600)
    return np.array([values[(offset + h) % len(values)] for h in range(hours)], dtype=float)


def stored_prices(session: Session, result: dict[str, Any]) -> tuple[Prices, Plan]:
    """The winner's prices and plan, built here from the price sheet through pricing.costs."""
    w, chosen = result["winner"], result["plan"]["chosen"]
    points = latest_prices(
        session, w["provider"], region=w["region"], instance_type=w["instance_type"]
    )
    prices = Prices.from_points(points, commitment=PurchaseOption(chosen["option"]))
    return prices, Plan(reserved=int(chosen["commitment_level"]))


def cash(report: Report, scenario: str, month: date) -> float:
    rows = report.projection[
        (report.projection["scenario"] == scenario) & (report.projection["month"] == month)
    ]
    return float(rows["cash_usd"].sum())


def test_the_tables_follow_the_contract(report: Report) -> None:
    assert list(report.projection.columns) == list(PROJECTION_COLUMNS)
    assert list(report.commitments.columns) == list(COMMITMENT_COLUMNS)
    assert list(report.sensitivity.columns) == list(SENSITIVITY_COLUMNS)
    assert list(report.assumptions.columns) == list(ASSUMPTION_COLUMNS)
    assert set(report.summary) == SUMMARY_KEYS
    assert report.recommendation_id == 1 and report.currency == "USD"
    assert report.title == "GPU fleet plan: llama-3.1-8b on gcp/us-east4/g2-standard-4"
    assert report.built_at == BUILT
    # months from the first of the month after the report was built
    months = sorted(set(report.projection["month"]))
    assert months[0] == date(2027, 1, 1) and len(months) == 12
    assert report.summary["first_month"] == date(2027, 1, 1) and report.summary["months"] == 12
    assert set(report.projection["scenario"]) == {"low", "expected", "high"}


def test_expected_first_month_is_fleet_cost_of_the_tiled_fleet(
    report: Report, demo_db: Path, stored: dict[str, Any]
) -> None:
    hourly = stored["hourly"]
    with session_at(demo_db) as session:
        prices, plan = stored_prices(session, stored)
    for month in (date(2027, 1, 1), date(2027, 2, 1)):
        fleet = tiled(hourly["instances"], hourly["hour_start"][0], month)
        expected = fleet_cost(fleet, prices, plan)
        assert cash(report, "expected", month) == pytest.approx(expected.total_usd, abs=0.005)
        rows = report.projection[
            (report.projection["scenario"] == "expected") & (report.projection["month"] == month)
        ]
        assert rows["amortized_usd"].sum() == pytest.approx(expected.total_usd, abs=0.005)
        # the tokens: the month's requests times the demand's mean tokens a request
        requests = tiled(hourly["requests"], hourly["hour_start"][0], month).sum()
        demand = stored["demand"]
        tokens = requests * (demand["mean_input_tokens"] + demand["mean_output_tokens"]) / 1e6
        assert rows["tokens_millions"].sum() == pytest.approx(tokens)


def test_low_expected_high_in_order_every_month(report: Report) -> None:
    for view in ("cash", "amortized"):
        low = report.monthly_totals("low", view)
        expected = report.monthly_totals("expected", view)
        high = report.monthly_totals("high", view)
        assert (low <= expected + 1e-9).all() and (expected <= high + 1e-9).all()
        # the forecast's bands are wide: the scenarios really differ
        assert (low < expected).all() and (high > expected).all()
    tokens = report.projection.groupby(["scenario", "month"])["tokens_millions"].sum()
    assert (tokens["low"] < tokens["expected"]).all()
    assert (tokens["expected"] < tokens["high"]).all()


def test_months_have_their_real_hours(demo_db: Path) -> None:
    with session_at(demo_db) as session:
        leap = build_report(
            ReportRequest(1, months=3, first_month=date(2028, 1, 15), built_at=BUILT),
            lambda: nullcontext(session),
        )
    committed = leap.projection[
        (leap.projection["purchase_option"] == "committed-3y")
        & (leap.projection["scenario"] == "expected")
    ].set_index("month")["instance_hours"]
    assert committed.to_dict() == {
        date(2028, 1, 1): 7 * 744,
        date(2028, 2, 1): 7 * 696,
        date(2028, 3, 1): 7 * 744,
    }


def test_february_has_672_hours(report: Report) -> None:
    rows = report.projection[
        (report.projection["purchase_option"] == "committed-3y")
        & (report.projection["month"] == date(2027, 2, 1))
    ]
    assert set(rows["instance_hours"]) == {7 * 672}


def test_the_summary_is_the_recommendation(report: Report, stored: dict[str, Any]) -> None:
    s, plan, winner = report.summary, stored["plan"], stored["winner"]
    assert s["monthly_usd"] == plan["chosen"]["monthly_usd"]
    assert s["on_demand_monthly_usd"] == plan["all_on_demand_monthly_usd"]
    assert s["savings_vs_on_demand_usd"] == pytest.approx(
        s["on_demand_monthly_usd"] - s["monthly_usd"]
    )
    assert s["savings_vs_on_demand_pct"] == pytest.approx(plan["savings_vs_on_demand_pct"] / 100)
    assert s["savings_vs_current_usd"] == pytest.approx(3000.0 - s["monthly_usd"])
    assert s["savings_vs_current_pct"] == pytest.approx(1 - s["monthly_usd"] / 3000.0)
    assert s["usd_per_million_tokens"] == winner["usd_per_million_tokens"]
    attainment = winner["verification"]["attainment"]
    assert s["slo_attainment"] == min(attainment.values())
    assert s["p99_ttft_ms"] == pytest.approx(winner["p99_ttft_s"] * 1000)
    assert (s["target_ttft_ms"], s["target_tpot_ms"], s["target_e2e_ms"]) == (2000.0, 200.0, None)
    assert s["purchase"] == "committed-3y for 7 instances, the rest on demand"
    assert s["fleet"] == "gcp/us-east4/g2-standard-4, 1 x L4, llama-3.1-8b fp8, TP 1"
    assert s["peak_instances"] == 9 and s["mean_instances"] == pytest.approx(7.3036, abs=1e-4)


def test_key_assumptions_name_their_sources(report: Report) -> None:
    text = " ".join(report.key_assumptions)
    assert "forecast #1" in text and "90th percentile" in text and "week by week" in text
    assert (
        "times 0.01 (the recommendation planned for 0.01 of the forecast's requests)" in text
    )  # the demo plans for a hundredth of the forecast
    assert "lower 80% band" in text and "upper 95% band" in text
    assert "price-sheet version 1" in text and "effective 2026-07-30" in text
    assert "trtllm-default" in text and "held-out median error 13.3%" in text
    assert "No spot capacity" in text and "Not included" in text
    items = dict(zip(report.assumptions["item"], report.assumptions["value"], strict=True))
    assert items["recommendation"].startswith("#1, made ")
    assert "beats it" in items["forecast accuracy"] and "baseline" in items["forecast accuracy"]
    assert items["planner version"] == report.planner_version
    assert "committed-3y $0.3170 an instance-hour" in items["prices used"]


def test_commitment_schedule(report: Report, stored: dict[str, Any]) -> None:
    assert len(report.commitments) == 1
    row = report.commitments.iloc[0]
    assert row["purchase_option"] == "committed-3y" and row["term_years"] == 3
    assert (row["start"], row["end"]) == (date(2027, 1, 1), date(2030, 1, 1))
    assert row["instances"] == 7 and row["upfront_usd"] == 0
    assert row["hourly_commitment_usd"] == pytest.approx(7 * 0.317033)
    assert row["break_even_utilization"] == stored["plan"]["chosen"]["break_even_utilization"]
    assert 0 <= row["expected_utilization"] <= 1 and 0 <= row["coverage"] <= 1
    # the recommendation's own week: 96.2% of the committed hours busy
    assert row["expected_utilization"] == pytest.approx(
        stored["plan"]["chosen"]["cost"]["reserved_utilization"], abs=0.01
    )
    idle = (1 - row["expected_utilization"]) * row["hourly_commitment_usd"]
    assert row["unused_usd_per_month"] == pytest.approx(idle * 8760 / 12, rel=0.01)


def test_sensitivity(report: Report) -> None:
    cases = {row["case"]: row for row in report.sensitivity.to_dict("records")}
    kept = {case: row["kept_monthly_usd"] for case, row in cases.items()}
    replanned = {case: row["replanned_monthly_usd"] for case, row in cases.items()}
    monthly = report.summary["monthly_usd"]
    assert list(cases) == [
        "load -20%", "load +20%", "spot interruptions x0.5", "spot interruptions x2",
        "prices -10%", "prices +10%",
    ]  # fmt: skip
    assert kept["load +20%"] >= monthly
    assert kept["load -20%"] <= monthly
    for case in ("load -20%", "load +20%"):
        assert replanned[case] <= kept[case]
    assert cases["load +20%"]["replanned_purchase"] == "committed-3y, 9 instances"
    # no spot in the plan: interruptions change nothing
    for case in ("spot interruptions x0.5", "spot interruptions x2"):
        assert kept[case] == pytest.approx(monthly)
    # the commitment keeps its signed rate: only the on-demand hours pay the new price
    assert monthly < kept["prices +10%"] < monthly * 1.1
    assert replanned["prices +10%"] == pytest.approx(monthly * 1.1)
    assert replanned["prices -10%"] == pytest.approx(monthly * 0.9)


def test_a_recommendation_without_a_fleet_is_refused(own_db: Path) -> None:
    with session_at(own_db) as session:
        data = load_recommendation(session, 1).result
        rejection = {
            "stage": "screen", "reason": "misses-ttft", "detail": "predicted P99 TTFT 904 ms",
            "instance_type": "g2-standard-4", "model": "llama-3.1-8b", "precision": "fp8", "tp": 1,
        }  # fmt: skip
        empty = Recommendation(
            request=data["request"], demand=data["demand"], winner=None, plan=None, ranked=[],
            pareto=[], rejected=[rejection], stats={},
            hourly={k: data["hourly"][k] for k in ("hour_start", "requests")}, notes=[],
        )  # fmt: skip
        run_id = save_recommendation(session, empty).id
    with session_at(own_db) as session, pytest.raises(PlannerError) as caught:
        build_report(ReportRequest(run_id), lambda: nullcontext(session))
    message = str(caught.value)
    assert f"recommendation #{run_id} has no recommended fleet" in message
    assert "misses-ttft (1)" in message


def test_an_unknown_recommendation(demo_db: Path) -> None:
    with session_at(demo_db) as session, pytest.raises(NotFoundError) as caught:
        build_report(ReportRequest(99), lambda: nullcontext(session))
    assert str(caught.value) == (
        "no stored recommendation #99 (see `planner recommendations list`)"
    )


def test_bad_arguments(demo_db: Path) -> None:
    with session_at(demo_db) as session:
        with pytest.raises(PlannerError, match="months to project"):
            build_report(ReportRequest(1, months=0), lambda: nullcontext(session))
        with pytest.raises(PlannerError, match="positive amount"):
            build_report(
                ReportRequest(1, current_fleet_monthly_usd=-5.0), lambda: nullcontext(session)
            )


def write_sheet(path: Path, rows: list[str]) -> Path:
    header = "provider,region,instance_type,purchase_option,usd_per_hour,upfront_usd"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_an_upfront_is_paid_once_and_amortized_over_the_term(own_db: Path, tmp_path: Path) -> None:
    # the same effective rate as the list price, a third of it paid upfront for the 3 years
    upfront = round(0.317033 / 3 * 3 * 8760, 2)
    sheet = write_sheet(
        tmp_path / "negotiated.csv",
        [f"gcp,us-east4,g2-standard-4,committed-3y,0.317033,{upfront}"],
    )
    with session_at(own_db) as session:
        import_sheet(session, sheet, today=date(2026, 12, 1))
    with session_at(own_db) as session:
        report = build_report(
            ReportRequest(1, months=36, built_at=BUILT), lambda: nullcontext(session)
        )
    assert not any("prices have changed" in note for note in report.notes)
    for scenario in ("low", "expected", "high"):
        cash_total = report.monthly_totals(scenario, "cash").sum()
        amortized_total = report.monthly_totals(scenario, "amortized").sum()
        assert cash_total == pytest.approx(amortized_total, abs=0.005)
    committed = report.projection[
        (report.projection["purchase_option"] == "committed-3y")
        & (report.projection["scenario"] == "expected")
    ].reset_index()
    assert committed.loc[0, "upfront_usd"] == pytest.approx(7 * upfront)
    assert (committed.loc[1:, "upfront_usd"] == 0).all()
    first = committed.to_dict("records")[0]
    assert first["cash_usd"] > first["amortized_usd"]
    row = report.commitments.iloc[0]
    assert row["upfront_usd"] == pytest.approx(7 * upfront)
    assert row["hourly_commitment_usd"] == pytest.approx(7 * (0.317033 - upfront / 26280))
    assert "paid upfront per term" in " ".join(report.key_assumptions)


def test_prices_moved_since_the_recommendation(own_db: Path, tmp_path: Path) -> None:
    sheet = write_sheet(tmp_path / "dearer.csv", ["gcp,us-east4,g2-standard-4,on-demand,0.80,0"])
    with session_at(own_db) as session:
        import_sheet(session, sheet, today=date(2026, 12, 1))
    with session_at(own_db) as session:
        result = load_recommendation(session, 1).result
        report = build_report(ReportRequest(1, built_at=BUILT), lambda: nullcontext(session))
        prices, plan = stored_prices(session, result)
    assert prices.on_demand == 0.80
    assert any("prices have changed since recommendation #1" in n for n in report.notes)
    stored_monthly = result["plan"]["chosen"]["monthly_usd"]
    hourly = result["hourly"]
    assert report.summary["monthly_usd"] == pytest.approx(
        fleet_cost(np.asarray(hourly["instances"]), prices, plan).monthly_usd
    )
    assert report.summary["monthly_usd"] > stored_monthly
    january = tiled(hourly["instances"], hourly["hour_start"][0], date(2027, 1, 1))
    assert cash(report, "expected", date(2027, 1, 1)) == pytest.approx(
        fleet_cost(january, prices, plan).total_usd, abs=0.005
    )
    versions = report.assumptions[report.assumptions["item"] == "price sheet"]
    assert len(versions) == 2  # the snapshot and the user's sheet


def test_a_demand_that_is_not_a_forecast_has_one_scenario(own_db: Path) -> None:
    with session_at(own_db) as session:
        data = load_recommendation(session, 1).result
        demand = {**data["demand"], "source": "dataset demo-azure-conv"}
        replay = Recommendation(**{**{k: data[k] for k in RECOMMENDATION_FIELDS}, "demand": demand})
        run_id = save_recommendation(session, replay).id
        report = build_report(ReportRequest(run_id, built_at=BUILT), lambda: nullcontext(session))
    low = report.monthly_totals("low")
    assert low.equals(report.monthly_totals("expected"))
    assert low.equals(report.monthly_totals("high"))
    assert "not a forecast" in " ".join(report.key_assumptions)
    assert not report.assumptions["item"].eq("forecast accuracy").any()


def test_a_plan_all_on_demand_has_no_commitment(own_db: Path) -> None:
    with session_at(own_db) as session:
        data = load_recommendation(session, 1).result
        on_demand = next(a for a in data["plan"]["alternatives"] if a["option"] == "on-demand")
        plan = {**data["plan"], "chosen": on_demand}
        fields = {k: data[k] for k in RECOMMENDATION_FIELDS}
        run_id = save_recommendation(session, Recommendation(**{**fields, "plan": plan})).id
        report = build_report(ReportRequest(run_id, built_at=BUILT), lambda: nullcontext(session))
    assert report.commitments.empty and list(report.commitments.columns) == list(COMMITMENT_COLUMNS)
    assert set(report.projection["purchase_option"]) == {"on-demand"}
    assert report.summary["purchase"] == "all on demand"
    assert report.summary["monthly_usd"] == pytest.approx(on_demand["monthly_usd"])
    assert report.projection["upfront_usd"].sum() == 0
