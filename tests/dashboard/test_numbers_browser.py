"""What only a real browser shows (``-m browser``): on a 1280x800 screen the ranked
alternatives' ``$ per month`` column is on screen, and a mistyped page URL is answered as such,
not with the Overview. ``planner dashboard`` over a copy of the demo store, in headless Chromium.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.browser import (
    DashboardServer,
    dashboard,
    new_page,
    skip_without_chromium,
    visit,
    wait_rendered,
)

pytestmark = pytest.mark.browser
skip_without_chromium()

WIDTH, HEIGHT = 1280, 800
HELP = "What analysts rank by"  # the $ per month column's help: its tooltip names the column


@pytest.fixture(scope="module")
def server(
    demo_store_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DashboardServer]:
    home = tmp_path_factory.mktemp("numbers-home")
    shutil.copy(demo_store_file, home / "planner.db")
    with dashboard(home, home / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def page(browser: Browser) -> Iterator[Page]:
    with new_page(browser, WIDTH, HEIGHT) as opened:
        yield opened


def _header_span(page: Page, top: float, left: float, right: float) -> list[float]:
    """The x positions along a table's header row (``top``) where the ``$ per month`` header
    is under the pointer: its help tooltip shows there (the grid draws on a canvas, so the
    header has no element of its own to measure)."""
    hits: list[float] = []
    x = left + 4
    while x < right:
        page.mouse.move(x, top)
        page.wait_for_timeout(120)
        tip = page.get_by_text(HELP)
        if tip.count() and tip.first.is_visible():
            hits.append(x)
        elif hits:
            break  # past the column's right edge
        x += 12
    return hits


def test_the_cost_column_of_the_ranked_alternatives_is_on_a_1280_screen(
    server: DashboardServer, page: Page
) -> None:
    visit(page, server.url, "recommend")
    page.get_by_text("Ranked alternatives (simulated)").scroll_into_view_if_needed()
    ranked = page.locator('[data-testid="stDataFrame"]').filter(
        has=page.locator('th[role="columnheader"]:text-is("rank")')
    )
    ranked.scroll_into_view_if_needed()
    box = ranked.bounding_box()
    assert box is not None
    # the grid lists only the columns it draws on screen; rank and cost come first
    headers = ranked.locator('th[role="columnheader"]').all_inner_texts()
    assert headers[:2] == ["rank", "$ per month"], headers
    hits = _header_span(page, box["y"] + 18, box["x"], min(box["x"] + box["width"], WIDTH))
    assert hits, "no $ per month header found along the table's header row"
    assert hits[0] >= 0 and hits[-1] < WIDTH  # the header is within the viewport
    assert hits[-1] < box["x"] + 400  # early in the table, not after the specs


def test_a_mistyped_page_url_says_there_is_no_such_page(
    server: DashboardServer, page: Page
) -> None:
    page.goto(server.url + "/recomendations", wait_until="domcontentloaded")
    wait_rendered(page)
    main = page.locator('[data-testid="stMain"]')
    expect(main).to_contain_text("No page at /recomendations")
    expect(main.locator("h1").first).to_have_text("Page not found")
    expect(main).to_contain_text("Recommendations (/recommendations)")
    expect(main).not_to_contain_text("Current recommendation")  # not the Overview's content
