"""The Reports page: a stored recommendation's finance report, previewed with the model's own
figures, set against actual spend from a GCP billing export, and downloadable as the files
`planner report` writes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import nullcontext
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from planner.store import open_store
from planner.usecases.report import ReportRequest, build_report
from tests.conftest import ROOT
from tests.dashboard.conftest import no_exception

GCP_EXPORT = ROOT / "tests" / "fixtures" / "actuals" / "gcp" / "billing_export.csv"


def _texts(elements: Iterable[Any]) -> str:
    return " ".join(str(e.value) for e in elements)


def test_an_empty_store_says_how_to_get_a_recommendation(
    empty_home: Path, page: Callable[[str], AppTest]
) -> None:
    at = page("reports")
    no_exception(at)
    assert "No stored recommendations in the store yet" in _texts(at.info)
    assert not at.get("download_button")


def test_the_demo_recommendation_is_previewed_with_the_models_figures(
    demo_home: Path, page: Callable[[str], AppTest]
) -> None:
    with open_store(f"sqlite:///{demo_home / 'planner.db'}") as store, store.session() as session:
        report = build_report(ReportRequest(1), lambda: nullcontext(session))
    at = page("reports")
    no_exception(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Monthly cost"] == f"${report.summary['monthly_usd']:,.0f}"
    assert metrics["Savings vs all on-demand"] == (
        f"${report.summary['savings_vs_on_demand_usd']:,.0f}"
    )
    assert report.title in _texts(at.markdown)
    assert at.get("plotly_chart"), "the report's charts"
    labels = {b.proto.label for b in at.get("download_button")}
    assert not at.error, [e.value for e in at.error]
    assert {"Excel workbook", "PDF document", "FOCUS CSV", "FOCUS metadata (JSON)"} <= labels


def test_a_current_fleet_cost_gives_the_savings_against_it(
    demo_home: Path, page: Callable[[str], AppTest]
) -> None:
    at = page("reports")
    at.number_input(key="reports-current").set_value(5000.0).run()
    no_exception(at)
    metrics = {m.label: m.value for m in at.metric}
    with open_store(f"sqlite:///{demo_home / 'planner.db'}") as store, store.session() as session:
        report = build_report(
            ReportRequest(1, current_fleet_monthly_usd=5000.0), lambda: nullcontext(session)
        )
    assert metrics["Savings vs the current fleet"] == (
        f"${report.summary['savings_vs_current_usd']:,.0f}"
    )


def test_a_gcp_billing_export_is_set_against_the_plan(
    demo_home: Path, page: Callable[[str], AppTest]
) -> None:
    at = page("reports")
    at.text_input(key="reports-first-month").input("2027-01").run()
    at.file_uploader(key="reports-gcp").upload(
        GCP_EXPORT.name, GCP_EXPORT.read_bytes(), "text/csv"
    ).run()
    at.button(key="reports-actuals").click().run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    frames = [d.value for d in at.dataframe]
    actual = next(f for f in frames if "variance_usd" in f.columns)
    assert (actual["month"] >= date(2027, 1, 1)).all()
    assert (
        actual["variance_usd"] - (actual["actual_usd"] - actual["planned_usd"])
    ).abs().max() < 1e-6


def test_a_bad_first_month_is_a_clear_message(
    demo_home: Path, page: Callable[[str], AppTest]
) -> None:
    at = page("reports")
    at.text_input(key="reports-first-month").input("January").run()
    no_exception(at)
    assert "First month 'January': expected a month as YYYY-MM" in _texts(at.error)


def test_a_fleet_report_shows_its_showback_per_model_and_pool(
    empty_home: Path, page: Callable[[str], AppTest]
) -> None:
    from tests.report.test_fleet_report import fleet_store

    fleet_store(empty_home)
    with open_store(f"sqlite:///{empty_home / 'planner.db'}") as store, store.session() as session:
        report = build_report(ReportRequest(1), lambda: nullcontext(session))
    assert report.showback is not None
    at = page("reports")
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    expanders = [e.label for e in at.expander]
    assert any(label.startswith("Showback per model") for label in expanders)
    assert any(
        label.startswith(f"Showback per pool ({len(report.showback):,} rows)")
        for label in expanders
    )
    tables = [d.value for d in at.dataframe]
    [pools] = [t for t in tables if "input_tokens" in t.columns]
    assert list(pools["pool"]) == list(report.showback["pool"])
    [models] = [t for t in tables if "pools" in t.columns and "pool" not in t.columns]
    assert models["monthly_usd"].sum() == pytest.approx(report.showback["monthly_usd"].sum())
