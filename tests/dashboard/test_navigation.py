"""Every page renders, on an empty store and on the demo store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.common import PAGES
from tests.dashboard.conftest import no_exception


@pytest.mark.parametrize("key", list(PAGES))
def test_every_page_renders_on_an_empty_store(
    key: str, empty_home: Path, page: Callable[[str], AppTest]
) -> None:
    at = page(key)
    no_exception(at)
    assert at.title, f"page {key} has no title"


@pytest.mark.parametrize("key", list(PAGES))
def test_every_page_renders_on_the_demo_store(
    key: str, demo_home: Path, page: Callable[[str], AppTest]
) -> None:
    at = page(key)
    no_exception(at)
    assert at.title, f"page {key} has no title"
