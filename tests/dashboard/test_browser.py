"""The dashboard end to end in a real headless Chromium, on loopback: ``planner dashboard``
started as a user starts it over a copy of the demo store, every page visited, a what-if run,
a bad log upload answered with its located error, a good one listed. Screenshots of every page
are kept as test artefacts (``$PLANNER_TEST_ARTIFACTS``, default ``test-artifacts/dashboard``).
"""

from __future__ import annotations

import gzip
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from app.common import PAGES
from tests.conftest import DEMO_SAMPLE
from tests.dashboard.browser import (
    DashboardServer,
    dashboard,
    exceptions_on,
    navigate,
    new_page,
    page_path,
    screenshot,
    skip_without_chromium,
    visit,
    wait_rendered,
    widget,
)

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.browser

skip_without_chromium()


@pytest.fixture(scope="module")
def artefacts() -> Path:
    folder = Path(os.environ.get("PLANNER_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def server(
    demo_store_file: Path, tmp_path_factory: pytest.TempPathFactory, artefacts: Path
) -> Iterator[DashboardServer]:
    home = tmp_path_factory.mktemp("browser-home")
    shutil.copy(demo_store_file, home / "planner.db")
    with dashboard(home, artefacts / "server.log") as running:
        yield running


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with new_page(browser) as opened:
        yield opened


@pytest.mark.parametrize("key", list(PAGES))
def test_every_page_renders_in_the_browser(
    key: str, server: DashboardServer, page: Page, artefacts: Path
) -> None:
    visit(page, server.url, key)
    assert not exceptions_on(page), exceptions_on(page)
    expect(page.locator('[data-testid="stMain"] h1').first).to_be_visible()
    # every page is in the sidebar's navigation
    nav = page.locator('[data-testid="stSidebarNav"]')
    for info in PAGES.values():
        expect(nav).to_contain_text(info.title)
    screenshot(page, artefacts / f"{key}.png")


def test_the_store_is_served_on_loopback_only(server: DashboardServer) -> None:
    assert "127.0.0.1" in server.url
    assert "Traceback" not in server.log()


def test_a_what_if_run_draws_its_latency_cdfs(
    server: DashboardServer, page: Page, artefacts: Path
) -> None:
    visit(page, server.url, "whatif", query="?dataset=demo-azure-conv")
    scale = page.locator(widget("whatif-load-scale", "input"))
    scale.fill("0.05")
    scale.press("Enter")
    wait_rendered(page)
    page.locator(widget("whatif-run", "button")).click()
    # the run's TTFT CDF is drawn by Plotly, and its percentile table is shown
    expect(page.locator(widget("whatif-cdf-ttft", ".main-svg")).first).to_be_visible(
        timeout=180_000
    )
    wait_rendered(page)
    assert not exceptions_on(page), exceptions_on(page)
    expect(page.locator('[data-testid="stMain"] [data-testid="stDataFrame"]').first).to_be_visible()
    expect(page.locator('[data-testid="stMain"]')).to_contain_text("P99")
    screenshot(page, artefacts / "whatif-run.png")


def _upload(page: Page, path: Path) -> None:
    page.locator(widget("logs-upload", 'input[type="file"]')).set_input_files(str(path))
    # the file is listed under the uploader and the Ingest button is enabled
    expect(page.locator(widget("logs-upload"))).to_contain_text(path.name)
    ingest = page.locator(widget("logs-ingest", "button"))
    expect(ingest).to_be_enabled()
    ingest.click()


def test_a_bad_log_upload_shows_its_located_error_and_stores_nothing(
    server: DashboardServer, page: Page, artefacts: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "gateway-bad.csv"
    bad.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,ten,12\n"
    )
    visit(page, server.url, "logs")
    expect(page.locator('[data-testid="stMain"]')).to_contain_text("1,024 MB")  # stated limit
    _upload(page, bad)
    alert = page.locator('[data-testid="stAlert"]').filter(has_text="gateway-bad.csv")
    expect(alert).to_contain_text("row 2", timeout=60_000)
    expect(alert).to_contain_text("ContextTokens")
    assert not exceptions_on(page)
    screenshot(page, artefacts / "logs-bad-upload.png")
    # nothing partial was stored: the dataset picker does not offer it
    page.reload()
    wait_rendered(page)
    expect(page.locator(widget("logs-dataset"))).not_to_contain_text("gateway-bad")


def test_a_good_log_upload_is_ingested_and_listed(
    server: DashboardServer, page: Page, artefacts: Path, tmp_path: Path
) -> None:
    good = tmp_path / "our-gateway.csv.gz"
    with gzip.open(DEMO_SAMPLE, "rt") as source, gzip.open(good, "wt") as target:
        for number, line in enumerate(source):
            if number > 500:
                break
            target.write(line)
    visit(page, server.url, "logs")
    _upload(page, good)
    success = page.locator('[data-testid="stAlert"]').filter(has_text="our-gateway")
    expect(success).to_contain_text("500", timeout=60_000)
    wait_rendered(page)
    page.reload()
    wait_rendered(page)
    expect(page.locator('[data-testid="stMain"]')).to_contain_text("our-gateway")
    screenshot(page, artefacts / "logs-good-upload.png")


def test_the_sidebar_takes_the_analyst_to_every_page(server: DashboardServer, page: Page) -> None:
    visit(page, server.url, "overview")
    for key in PAGES:
        navigate(page, key)  # waits for the page's own title, rendered
        assert not exceptions_on(page), (key, exceptions_on(page))
        assert page.url.rstrip("/").endswith(page_path(key).rstrip("/"))
