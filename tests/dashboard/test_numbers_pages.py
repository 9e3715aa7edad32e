"""Every number says what was planned: on the demo store under AppTest, each result's cost and
fleet stands beside the load it was planned for (its load scale), money reads as money in one
format, missing values as "—", and log axes label only readable ticks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from app import common
from planner.demo import LOAD_SCALE
from planner.store import open_store
from planner.store.recommendations import list_recommendations
from tests.dashboard.conftest import no_exception

Page = Callable[[str], AppTest]


def _demand(home: Path) -> dict[str, Any]:
    with open_store(f"sqlite:///{home / 'planner.db'}") as store, store.session() as session:
        demand: dict[str, Any] = list_recommendations(session)[-1].result["demand"]
    return demand


def _config(frame: Any) -> dict[str, Any]:
    """A drawn table's column settings (what the browser formats its cells with)."""
    config: dict[str, Any] = json.loads(frame.proto.columns or "{}")
    return config


def _format(config: dict[str, Any], column: str) -> tuple[str, float]:
    """A number column's format and step (the digits it shows)."""
    settings = config[column]["type_config"]
    return settings["format"], settings["step"]


def _planned(at: AppTest) -> str:
    [said] = [i.value for i in at.info if i.value.startswith("**Planned for**")]
    return said


@pytest.mark.parametrize("key", ["overview", "recommend", "reports"])
def test_a_cost_is_shown_with_the_load_it_was_planned_for(
    key: str, demo_home: Path, page: Page
) -> None:
    demand = _demand(demo_home)
    at = page(key)
    no_exception(at)
    said = _planned(at)
    # the demo planned for a share of the forecast's load: the statement names it
    assert f" x {LOAD_SCALE:g}" in demand["source"] and demand["source"] in said
    assert f"{demand['hours']} hours from 2025-01-20 00:00 UTC" in said
    peak = demand["peak_requests_per_s"]
    assert f"peak {peak * 3600:,.0f} requests/hour ({peak:,.2f} req/s)" in said


@pytest.mark.parametrize("key", ["overview", "recommend"])
def test_a_plan_with_the_api_says_its_cost_beside_the_fleets(
    key: str, demo_home: Path, page: Page
) -> None:
    """The demo's demand is cheapest as a base fleet with its peaks on the API: both pages say
    that plan's cost (the one Reports carries) beside the self-hosted fleet's."""
    with open_store(f"sqlite:///{demo_home / 'planner.db'}") as store, store.session() as session:
        result = list_recommendations(session)[-1].result
    api = result["api"]
    assert api["choice"] == "overflow"
    at = page(key)
    no_exception(at)
    [note] = [i.value for i in at.info if i.value.startswith("Recommended: **the overflow plan")]
    assert f"**${api['overflow']['monthly_usd']:,.0f}** a month" in note
    assert f"alone: ${result['winner']['monthly_usd']:,.0f})" in note


def test_reports_money_is_money_and_gaps_are_dashes(demo_home: Path, page: Page) -> None:
    at = page("reports")
    no_exception(at)
    tables = {}
    for frame in at.dataframe:
        tables[tuple(frame.value.columns)] = frame
    [totals] = [f for cols, f in tables.items() if "expected (cash)" in cols]
    config = _config(totals)
    for column in ("low (cash)", "expected (cash)", "high (amortized)"):
        assert _format(config, column) == ("dollar", 1), column  # whole dollars: $1,554
    [projection] = [f for cols, f in tables.items() if "cash_usd" in cols]
    settings = _config(projection)
    assert _format(settings, "cash_usd") == ("dollar", 1)
    # a unit price keeps the same four digits on every page ($0.0215)
    assert _format(settings, "input_usd_per_mtok") == ("dollar", 0.0001)
    # every table draws a missing value as "—", never "None"
    assert {f.proto.placeholder for f in at.dataframe} == {common.MISSING}
    headline = {m.label: m.value for m in at.metric}["Monthly cost"]
    assert headline.startswith("$") and "." not in headline  # $1,554, as on the Overview


def test_ranked_alternatives_lead_with_rank_and_cost(demo_home: Path, page: Page) -> None:
    at = page("recommend")
    no_exception(at)
    [ranked] = [f for f in at.dataframe if "rank" in f.value.columns]
    frame = ranked.value
    assert list(frame.columns[:2]) == ["rank", "$ per month"]
    assert list(frame["rank"]) == list(range(1, len(frame) + 1))
    assert (
        list(frame["$ per month"]) == sorted(frame["$ per month"]) or not frame["met targets"].all()
    )
    assert _format(_config(ranked), "$ per month") == ("dollar", 1)
    assert ranked.proto.placeholder == common.MISSING
    text = " ".join(m.value for m in at.markdown)
    assert "replica(s)" not in text and " 1 replicas" not in text and " 1 instances" not in text


def test_log_axes_label_only_readable_ticks(demo_home: Path, page: Page) -> None:
    at = page("latency")
    no_exception(at)
    [chart] = [
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "batch size" in json.loads(c.proto.spec)["layout"]["xaxis"]["title"]["text"]
    ]
    axis = chart["layout"]["xaxis"]
    assert axis["type"] == "log"
    assert axis["ticktext"] == ["1", "10", "100", "1,000"][: len(axis["ticktext"])]
    assert all(str(v)[0] == "1" for v in axis["tickvals"])  # powers of ten only


def test_number_helpers() -> None:
    assert common.money(1554.2353) == "$1,554"
    assert common.money(-12.4) == "-$12"
    assert common.money(None) == common.money(float("nan")) == "—"
    assert common.unit_price(0.0215) == "$0.0215" and common.unit_price(0.022) == "$0.0220"
    assert common.unit_price(None) == "—"
    assert common.plural(1, "replica") == "1 replica"
    assert common.plural(3, "replica") == "3 replicas"
    assert common.plural(1200, "instance") == "1,200 instances"
    assert common.file_name("/home/a/very/long/path/trace.csv.gz") == "trace.csv.gz"
    assert common.log_ticks(3, 700) == [1.0, 10.0, 100.0, 1000.0]
    assert common.log_ticks(30, 70)[:3] == [10.0, 20.0, 50.0]  # under two decades: 1-2-5
    assert [common.tick_label(v) for v in (0.1, 20, 1000, 10_000, 2e6)] == [
        "0.1",
        "20",
        "1,000",
        "10k",
        "2M",
    ]


def test_an_unknown_url_path_is_named_not_the_overview() -> None:
    base = "http://127.0.0.1:8501"
    assert common.unknown_path(f"{base}/xyz") == "/xyz"
    assert common.unknown_path(f"{base}/") is None
    assert common.unknown_path(base) is None
    assert common.unknown_path(f"{base}/request_logs") is None
    # a page left out of a visitor's navigation (the admins' audit trail) is no page for them
    shown = tuple(k for k in common.PAGES if k != "audit")
    assert common.unknown_path(f"{base}/audit", shown) == "/audit"
