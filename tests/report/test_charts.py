"""The report's charts: each figure's numbers are the report's own, in the shared colours, with
units on the axes; images come from kaleido driving Debian's Chromium, and a missing or broken
browser is a clear PlannerError (never a traceback)."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from datetime import date
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest

from planner.common.colours import PROVIDER_COLOURS, PURCHASE_COLOURS, purchase_colour
from planner.errors import PlannerError
from planner.report.charts import (
    CHROMIUM_ENV,
    ChartRenderError,
    actuals_figure,
    chromium_path,
    commitment_figure,
    projection_figure,
    purchase_figure,
    render_figures,
    report_figures,
    sensitivity_figure,
)
from planner.report.model import ACTUAL_COLUMNS, Report

REQUIRE_ENV = "PLANNER_REQUIRE_BROWSER"  # set by .ci/run: no Chromium fails, never skips


def _chromium_or_skip() -> str:
    try:
        return chromium_path()
    except ChartRenderError as exc:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {exc}")
        pytest.skip(f"no Chromium on this machine to draw charts ({exc})")


def with_actuals(report: Report) -> Report:
    """The example report with three months of actual spend on two providers: one month within
    the forecast range, one above it, one below it."""
    months = [date(2027, 1, 1), date(2027, 2, 1), date(2027, 3, 1)]
    rows = []
    for month, ratio in zip(months, (1.01, 1.6, 0.5), strict=True):
        planned = float(report.monthly_totals("expected")[month])
        low = float(report.monthly_totals("low")[month])
        high = float(report.monthly_totals("high")[month])
        for provider, share in (("gcp", 0.75), ("aws", 0.25)):
            actual = planned * ratio * share
            plan = planned * share
            rows.append(
                (month, provider, "USD", actual, plan, low * share, high * share,
                 actual - plan, (actual - plan) / plan)
            )  # fmt: skip
    return report.with_actuals(pd.DataFrame(rows, columns=list(ACTUAL_COLUMNS)))


def _trace(fig: go.Figure, name: str) -> go.BaseTraceType:
    found = [t for t in fig.data if t.name == name]
    assert len(found) == 1, [t.name for t in fig.data]
    return found[0]


def test_colours_are_the_dashboards() -> None:
    from app import common

    assert common.PROVIDER_COLOURS == PROVIDER_COLOURS
    assert common.PURCHASE_COLOURS == PURCHASE_COLOURS
    assert purchase_colour("Spot") == PURCHASE_COLOURS["spot"]
    assert purchase_colour("prepaid-5y") == PROVIDER_COLOURS["other"]


def test_projection_figure_draws_every_scenario_per_month(report: Report) -> None:
    fig = projection_figure(report)
    months = [f"2027-{m:02d}" for m in range(1, 13)]
    expected_cash = _trace(fig, "expected scenario (cash)")
    assert list(expected_cash.x) == months
    assert list(expected_cash.y) == pytest.approx(list(report.monthly_totals("expected", "cash")))
    amortized = _trace(fig, "expected scenario (amortized)")
    assert list(amortized.y) == pytest.approx(list(report.monthly_totals("expected", "amortized")))
    band = _trace(fig, "low to high scenario (cash)")
    assert band.fill == "tonexty"
    assert list(band.y) == pytest.approx(list(report.monthly_totals("low", "cash")))
    high = _trace(fig, "high scenario (cash)")
    assert list(high.y) == pytest.approx(list(report.monthly_totals("high", "cash")))
    # the upfront is paid in the first month: cash above amortized there, equal later
    assert expected_cash.y[0] - amortized.y[0] == pytest.approx(1000.0 - 1000.0 / 36)
    assert fig.layout.yaxis.title.text == "$ per month"


def test_purchase_figure_stacks_options_to_the_monthly_total(report: Report) -> None:
    fig = purchase_figure(report)
    assert fig.layout.barmode == "stack"
    assert {t.name for t in fig.data} == {"committed-3y", "on-demand"}
    for trace in fig.data:
        assert trace.marker.color == PURCHASE_COLOURS[trace.name]
    stacked = [sum(values) for values in zip(*(t.y for t in fig.data), strict=True)]
    assert stacked == pytest.approx(list(report.monthly_totals("expected", "amortized")))
    assert fig.layout.yaxis.title.text == "$ per month"


def test_commitment_figure_shows_utilization_coverage_and_break_even(report: Report) -> None:
    fig = commitment_figure(report)
    assert fig is not None
    assert _trace(fig, "expected utilization").x == pytest.approx((96.2,))
    assert _trace(fig, "coverage of the fleet's instance-hours").x == pytest.approx((94.0,))
    assert _trace(fig, "break-even utilization").x == pytest.approx((63.0,))
    assert _trace(fig, "expected utilization").y == ("committed-3y gcp/us-east4 g2-standard-4 x 7",)
    no_commitments = replace(report, commitments=report.commitments.iloc[0:0])
    assert commitment_figure(no_commitments) is None


def test_sensitivity_figure_compares_kept_and_replanned(report: Report) -> None:
    fig = sensitivity_figure(report)
    assert fig is not None
    kept = _trace(fig, "plan kept as bought")
    assert list(kept.y) == list(report.sensitivity["case"])
    assert list(kept.x) == pytest.approx(list(report.sensitivity["kept_monthly_usd"]))
    replanned = _trace(fig, "plan bought again for the case")
    assert list(replanned.x) == pytest.approx(list(report.sensitivity["replanned_monthly_usd"]))
    (base_line,) = fig.layout.shapes
    assert base_line.x0 == pytest.approx(report.summary["monthly_usd"])
    assert fig.layout.xaxis.title.text == "$ per month"


def test_actuals_figure_stacks_providers_against_the_plan(report: Report) -> None:
    assert actuals_figure(report) is None
    actual = with_actuals(report)
    fig = actuals_figure(actual)
    assert fig is not None
    gcp, aws = _trace(fig, "actual: gcp"), _trace(fig, "actual: aws")
    assert gcp.marker.color == PROVIDER_COLOURS["gcp"]
    assert aws.marker.color == PROVIDER_COLOURS["aws"]
    assert actual.actuals is not None
    by_month = actual.actuals.groupby("month")[["actual_usd", "planned_usd"]].sum()
    assert [g + a for g, a in zip(gcp.y, aws.y, strict=True)] == pytest.approx(
        list(by_month["actual_usd"])
    )
    planned = _trace(fig, "planned (expected, cash), whiskers: forecast range (low to high)")
    assert list(planned.x) == ["2027-01", "2027-02", "2027-03"]
    assert list(planned.y) == pytest.approx(list(by_month["planned_usd"]))
    ranges = actual.actuals.groupby("month")[["low_usd", "high_usd"]].sum()
    assert [p + up for p, up in zip(planned.y, planned.error_y.array, strict=True)] == (
        pytest.approx(list(ranges["high_usd"]))
    )
    assert [p - down for p, down in zip(planned.y, planned.error_y.arrayminus, strict=True)] == (
        pytest.approx(list(ranges["low_usd"]))
    )


def test_report_figures_leave_out_charts_without_data(report: Report) -> None:
    assert set(report_figures(report)) == {"projection", "purchase", "commitments", "sensitivity"}
    assert set(report_figures(with_actuals(report))) == {
        "projection", "purchase", "commitments", "sensitivity", "actuals"
    }  # fmt: skip


def test_render_figures_draws_svg_and_png(report: Report) -> None:
    _chromium_or_skip()
    figures = report_figures(report)
    svgs = render_figures(figures, "svg")
    assert set(svgs) == set(figures)
    for name, svg in svgs.items():
        assert svg.startswith(b"<svg"), name
        assert b"DejaVu Sans" in svg, name  # the font the PDF embeds
    assert b"$ per month" in svgs["projection"]
    assert b"2027-12" in svgs["projection"]
    png = render_figures({"projection": figures["projection"]}, "png", scale=1)["projection"]
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_a_missing_browser_is_a_clear_error(
    report: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no-such-chromium"
    with pytest.raises(PlannerError) as caught:
        render_figures(report_figures(report), browser=missing)
    message = str(caught.value)
    assert isinstance(caught.value, ChartRenderError)
    assert f"no Chromium at {missing}" in message
    assert CHROMIUM_ENV in message and "chromium package" in message

    monkeypatch.setenv(CHROMIUM_ENV, str(missing))
    with pytest.raises(ChartRenderError, match=rf"no Chromium at {missing} \({CHROMIUM_ENV}\)"):
        render_figures(report_figures(report))


def test_a_browser_that_does_not_start_is_a_clear_error(report: Report, tmp_path: Path) -> None:
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(ChartRenderError, match=rf"Chromium at {fake} did not start"):
        render_figures({"projection": projection_figure(report)}, browser=fake)


def test_no_figures_need_no_browser() -> None:
    assert render_figures({}, browser="/no/such/browser") == {}
