"""A stored fleet of pools on the dashboard, in a real headless Chromium (``planner dashboard``
on loopback, as ``test_browser`` runs it): the Recommendations page shows the fleet's headline,
its pools table, the fleet by hour stacked by pool and the cost per model; the Overview page
shows the fleet's headline. The fleet is a real one (``planner.recommend.mix`` on a small demand,
see ``tests/report/test_fleet_report.py``), stored with its prices in a fresh store."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from playwright.sync_api import Browser, Page, expect
from streamlit.testing.v1 import AppTest

from planner.store import open_store
from planner.store.recommendations import save_recommendation
from tests.dashboard.browser import (
    DashboardServer,
    dashboard,
    exceptions_on,
    new_page,
    screenshot,
    visit,
)
from tests.dashboard.conftest import ROOT, _use_home, no_exception, open_page
from tests.report.test_fleet_report import LARGE, SMALL, fleet_store, small_fleet


@pytest.fixture(scope="module")
def artefacts() -> Path:
    folder = Path(os.environ.get("PLANNER_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def fleet() -> dict[str, Any]:
    return small_fleet().to_dict()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, artefacts: Path) -> Iterator[DashboardServer]:
    home = tmp_path_factory.mktemp("fleet-home")
    fleet_store(home)
    with dashboard(home, artefacts / "fleet-server.log") as running:
        yield running


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with new_page(browser) as opened:
        yield opened


@pytest.mark.browser
def test_the_recommendations_page_shows_a_stored_fleet(
    server: DashboardServer, page: Page, fleet: dict[str, Any], artefacts: Path
) -> None:
    visit(page, server.url, "recommend")
    assert not exceptions_on(page), exceptions_on(page)
    main = page.locator('[data-testid="stMain"]')
    expect(main).not_to_contain_text("cannot read")  # the page read the fleet's shape
    winner = fleet["winner"]
    pools = winner["pools"]
    expect(main).to_contain_text("Recommended fleet of pools")
    expect(main).to_contain_text(f"{len(pools)} pools for 2 models")
    # the headline: the fleet's $ a month, as money
    expect(main.get_by_test_id("stMetric").first).to_contain_text(f"${winner['monthly_usd']:,.0f}")
    # the tables are drawn (on canvases: their contents are checked under AppTest below)
    # pools, models, the pools' plans, and the savings plans across pools when there are any
    tables = 3 + bool(winner["fleet_savings_plans"])
    expect(main.get_by_test_id("data-grid-canvas")).to_have_count(tables)
    expect(main.get_by_test_id("data-grid-canvas").first).to_be_visible()
    # the chart: the fleet by hour, one trace stacked per pool, and the demand
    chart = main.get_by_test_id("stPlotlyChart")
    expect(chart).to_have_count(1)
    legend = chart.locator(".legend")
    for pool in pools:
        expect(legend).to_contain_text(pool["pool"])
    expect(legend).to_contain_text("demand (requests/s)")
    expect(main).to_contain_text("Cost per model")
    screenshot(page, artefacts / "recommend-fleet.png")


@pytest.mark.browser
def test_the_overview_shows_the_fleet(
    server: DashboardServer, page: Page, fleet: dict[str, Any], artefacts: Path
) -> None:
    visit(page, server.url, "overview")
    assert not exceptions_on(page), exceptions_on(page)
    main = page.locator('[data-testid="stMain"]')
    pools = len(fleet["winner"]["pools"])
    expect(main).to_contain_text(f"{pools} pools:")
    expect(main).to_contain_text(f"${fleet['winner']['monthly_usd']:,.0f}")
    screenshot(page, artefacts / "overview-fleet.png")


@pytest.fixture
def fleet_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh store holding the small fleet (and its prices), read by the pages."""
    home = tmp_path / "home"
    home.mkdir()
    fleet_store(home)
    _use_home(monkeypatch, home)
    return home


def _table(at: AppTest, column: str) -> pd.DataFrame:
    """The one table with ``column`` (AppTest does not keep a table's key)."""
    [frame] = [d.value for d in at.dataframe if column in d.value.columns]
    return frame


def test_the_fleet_tables_hold_every_pool_and_model(
    fleet_home: Path, fleet: dict[str, Any]
) -> None:
    """The tables the browser draws, read through Streamlit's AppTest: a row per pool with
    its model, input sizes, instance and cost; a row per model against one pool each."""
    at = open_page("recommend")
    no_exception(at)
    pools = fleet["winner"]["pools"]
    table = _table(at, "input tokens")
    assert list(table["pool"]) == [p["pool"] for p in pools]
    assert list(table["models"]) == [", ".join(p["models"]) for p in pools]
    assert list(table["$ per month"]) == pytest.approx([p["monthly_usd"] for p in pools])
    assert list(table["instance"]) == [
        f"{p['provider']}/{p['region']}/{p['instance_type']}" for p in pools
    ]
    assert list(table["input tokens"]) == ["all"] * len(pools)  # one size bucket per model
    models = _table(at, "one pool $ per month")
    assert list(models["model"]) == [SMALL, LARGE]
    assert models["$ per month"].sum() == pytest.approx(fleet["winner"]["monthly_usd"])
    [chart] = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    stacked = [t for t in chart["data"] if t.get("stackgroup") == "fleet"]
    assert [t["name"] for t in stacked] == [p["pool"] for p in pools]
    for trace, pool in zip(stacked, pools, strict=True):
        assert trace["y"][:-1] == pool["hourly_instances"]  # the last point closes the step


def test_a_fleet_without_a_winner_says_which_model_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet search where one model found no fleet: the pages say which, and do not fail."""
    found = small_fleet()
    last = found.models[-1]
    missing = replace(last, pools=[], single_usd=None, how="no fleet meets the targets")
    broken = replace(found, models=[*found.models[:-1], missing])
    home = tmp_path / "home"
    home.mkdir()
    with open_store(f"sqlite:///{home / 'planner.db'}") as store, store.session() as session:
        save_recommendation(session, broken)
    _use_home(monkeypatch, home)
    at = open_page("recommend")
    no_exception(at)
    errors = " ".join(str(e.value) for e in at.error)
    assert f"{last.model}: no fleet meets the targets" in errors
    assert not at.get("plotly_chart")
    overview = open_page("overview")
    no_exception(overview)
    assert "no configuration met the targets" in " ".join(str(w.value) for w in overview.warning)


def test_a_model_bought_by_the_token_shows_beside_the_pools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet whose second model a per-token API serves: its row in the API table, its cost
    in the fleet's, the GPU pools those of the first model only."""
    from planner.recommend.api import Tokens, api_pool
    from pricing.api import api_prices_for, cost_usd, load_api_snapshot

    found = small_fleet()
    last = found.models[-1]
    [price, *_] = api_prices_for("llama-3.1-8b", load_api_snapshot(), provider="deepinfra")
    usd = cost_usd(price, 1e8, 2e7)
    bought = replace(last, pools=[], api_pool=api_pool(price, Tokens(1e5, 1e8, 2e7), usd))
    fleet = replace(found, models=[*found.models[:-1], bought])
    home = tmp_path / "home"
    home.mkdir()
    with open_store(f"sqlite:///{home / 'planner.db'}") as store, store.session() as session:
        save_recommendation(session, fleet)
    _use_home(monkeypatch, home)
    at = open_page("recommend")
    no_exception(at)
    data = fleet.to_dict()["winner"]
    api = _table(at, "offer")
    assert list(api["model"]) == [last.model] and list(api["$ per month"]) == [usd]
    assert list(api["provider"]) == ["deepinfra"]
    pools = _table(at, "input tokens")
    assert list(pools["pool"]) == [p["pool"] for p in data["pools"]]
    assert last.model not in " ".join(pools["models"])
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Fleet $ per month"] == f"${data['monthly_usd']:,.0f}"
    assert data["monthly_usd"] == pytest.approx(sum(p["monthly_usd"] for p in data["pools"]) + usd)
