"""The Overview page under AppTest, on real stores: its figures are the stored recommendation's
and forecast's, formatted as the page formats them, and each group links to its page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

from app.common import PAGES
from planner.ingest import ingest_file
from planner.store import open_store
from planner.store.forecasts import list_forecasts
from planner.store.queries import list_datasets
from planner.store.recommendations import list_recommendations
from tests.conftest import AZURE_CONV
from tests.dashboard.conftest import no_exception

Page = Callable[[str], AppTest]


def _url(home: Path) -> str:
    return f"sqlite:///{home / 'planner.db'}"


def _metrics(at: AppTest) -> dict[str, Any]:
    return {m.label: m for m in at.metric}


def _links(at: AppTest) -> dict[str, str]:
    """Page links on the page: target page (its script's name) -> label."""
    return {link.proto.page: link.proto.label for link in at.get("page_link")}


def _page_name(key: str) -> str:
    return Path(PAGES[key].path).stem


def test_empty_store_says_how_to_start(empty_home: Path, page: Page) -> None:
    at = page("overview")
    no_exception(at)
    assert at.title[0].value == "Overview"
    [info] = at.info
    assert "make demo" in info.value and "Request logs" in info.value
    assert not at.metric and not at.get("plotly_chart")
    assert _page_name("logs") in _links(at)


def test_demo_recommendation_figures(demo_home: Path, page: Page) -> None:
    with open_store(_url(demo_home)) as store, store.session() as session:
        run = list_recommendations(session)[-1]
        result, request = run.result, run.request
    winner, plan = result["winner"], result["plan"]
    slo = request["targets"]["slos"]["default"]
    at = page("overview")
    no_exception(at)
    metrics = _metrics(at)
    # the demo's plan sends its peaks to the API: the fleet's own cost is labelled as such
    assert result["api"]["choice"] == "overflow"
    fleet_cost = metrics["Self-hosted fleet, monthly"]
    assert fleet_cost.value == f"${plan['chosen']['monthly_usd']:,.0f}"
    savings = metrics["Savings vs all on-demand"]
    assert savings.value == f"${plan['savings_vs_on_demand_monthly_usd']:,.0f} / month"
    assert savings.delta == f"{plan['savings_vs_on_demand_pct']:.1f}%"
    assert metrics["$ per million tokens"].value == f"${winner['usd_per_million_tokens']:,.4f}"
    ttft = metrics["P99 TTFT"]
    assert ttft.value == f"{winner['p99_ttft_s'] * 1e3:,.0f} ms"
    assert ttft.delta == f"{(winner['p99_ttft_s'] - slo['ttft_s']) * 1e3:+,.0f} ms"
    tpot = metrics["P99 TPOT"]
    assert tpot.value == f"{winner['p99_tpot_s'] * 1e3:,.0f} ms"
    assert tpot.delta == f"{(winner['p99_tpot_s'] - slo['tpot_s']) * 1e3:+,.0f} ms"
    # Coverage: reserved instance-hours used over the instance-hours served.
    cost = plan["chosen"]["cost"]
    covered = cost["reserved_utilization"] * cost["reserved_instances"] * cost["hours"]
    coverage = metrics["Commitment coverage"]
    assert coverage.value == f"{covered / cost['served_instance_hours']:.0%}"
    assert plan["chosen"]["option"] in coverage.delta
    assert _page_name("recommend") in _links(at)
    assert any(run.winner in m.value for m in at.markdown if run.winner)


def test_demo_forecast_and_datasets(demo_home: Path, page: Page) -> None:
    with open_store(_url(demo_home)) as store, store.session() as session:
        forecast = list_forecasts(session)[-1]
        backtest = forecast.scores["backtest"]
        datasets = list_datasets(session)
    at = page("overview")
    no_exception(at)
    metrics = _metrics(at)
    mape = metrics["Backtest MAPE"]
    assert mape.value == f"{backtest['prophet']['mape']:.1%}"
    gap = (backtest["prophet"]["mape"] - backtest["baseline"]["mape"]) * 100
    assert mape.delta == f"{gap:+.1f} pts"
    assert metrics["Method"].value == forecast.method
    assert metrics["Datasets"].value == f"{len(datasets):,}"
    assert metrics["Requests"].value == f"{sum(d.row_count for d in datasets):,}"
    links = _links(at)
    assert {_page_name(k) for k in ("recommend", "forecast", "logs")} <= set(links)
    assert f"Forecast #{forecast.id}" in links[_page_name("forecast")]
    # the fleet hour by hour and the forecast curve
    assert len(at.get("plotly_chart")) == 2


def test_a_store_with_only_a_dataset(empty_home: Path, page: Page) -> None:
    with open_store(_url(empty_home)) as store:
        ingest_file(store, AZURE_CONV)
    at = page("overview")
    no_exception(at)
    metrics = _metrics(at)
    assert metrics["Requests"].value == "19,366"
    assert "Monthly cost" not in metrics and "Backtest MAPE" not in metrics
    hints = " ".join(i.value for i in at.info)
    assert "No recommendations" in hints and "No forecasts" in hints
