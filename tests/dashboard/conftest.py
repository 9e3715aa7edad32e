"""The dashboard's fixtures: an empty store, the demo store (built once, copied per test), and
pages run under Streamlit's AppTest through the real entry script and navigation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

if TYPE_CHECKING:
    from playwright.sync_api import Browser

from app.common import PAGES
from planner.config import DATABASE_URL_ENV, HOME_ENV

ROOT = Path(__file__).resolve().parents[2]
APP_MAIN = ROOT / "app" / "main.py"
PAGE_TIMEOUT_S = 120  # a page that fits a forecast or runs a search on 2 busy cores


def _use_home(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    monkeypatch.setenv(HOME_ENV, str(home))
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.fixture
def empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh, empty store (created on first use) for the pages to read."""
    home = tmp_path / "home"
    home.mkdir()
    _use_home(monkeypatch, home)
    yield home


@pytest.fixture
def demo_home(monkeypatch: pytest.MonkeyPatch, demo_store_copy: Path) -> Path:
    """A private copy of the demo store: a test may add to it freely."""
    _use_home(monkeypatch, demo_store_copy)
    return demo_store_copy


def open_page(page: str, *, timeout: float = PAGE_TIMEOUT_S) -> AppTest:
    """Run the dashboard's entry script, then switch to ``page`` (a ``PAGES`` key)."""
    at = AppTest.from_file(str(APP_MAIN), default_timeout=timeout)
    at.run()
    if page != "overview":
        at.switch_page(PAGES[page].path)
        at.run()
    return at


@pytest.fixture
def page() -> Callable[[str], AppTest]:
    return open_page


def no_exception(at: AppTest) -> None:
    """The page rendered without an exception (and so without a traceback for the user)."""
    assert not at.exception, [e.message for e in at.exception]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's headless Chromium for one test module (skipped without it, except in CI)."""
    from playwright.sync_api import sync_playwright

    from tests.dashboard.browser import launch, skip_without_chromium

    skip_without_chromium()
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()
