"""The Prices page's "Per-token APIs" tab on a real store: the prices in force as the library
lists them, a month's tokens billed at each, and a per-token sheet uploaded and imported as
``planner prices import --kind api`` imports it (a bad one located, nothing stored)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from planner.config import database_url
from planner.store import open_store
from pricing.api import load_api_snapshot
from pricing.api_sheets import api_entries, list_api_versions
from tests.dashboard.conftest import no_exception

Page = Callable[[str], AppTest]
HEADER = b"provider,offer,input_usd_per_mtok,output_usd_per_mtok\n"


def _api_table(at: AppTest) -> pd.DataFrame:
    frames = [d.value for d in at.dataframe if "input_usd_per_mtok" in d.value.columns]
    assert frames, "no per-token price table"
    return frames[0]


def _api_version_ids() -> list[int]:
    with open_store(database_url()) as store, store.session() as session:
        return [v.id for v in list_api_versions(session)]


def test_the_tab_lists_the_bundled_api_prices_and_bills_a_month(
    empty_home: Path, page: Page
) -> None:
    at = page("prices")
    no_exception(at)
    assert any("loaded the bundled API snapshot as API version 1" in i.value for i in at.info)
    shown = _api_table(at)
    with open_store(database_url()) as store, store.session() as session:
        expected = api_entries(session)
    assert len(shown) == len(expected) == len(load_api_snapshot())
    assert shown["offer"].tolist() == [e.price.offer for e in expected]
    assert shown["source_url"].str.startswith("https://").all()
    # the default month: 100 M input and 20 M output tokens, none cached
    mini = shown[(shown["provider"] == "openai") & (shown["offer"] == "gpt-4o-mini")].iloc[0]
    expected_usd = 100 * mini["input_usd_per_mtok"] + 20 * mini["output_usd_per_mtok"]
    assert mini["monthly_usd"] == pytest.approx(expected_usd)
    # half the input cached: billed at the cached-input price
    at.number_input(key="prices-api-cached").set_value(50.0).run()
    table = _api_table(at)
    mini = table[(table["provider"] == "openai") & (table["offer"] == "gpt-4o-mini")].iloc[0]
    cached_usd = (
        50 * mini["input_usd_per_mtok"]
        + 50 * mini["cached_input_usd_per_mtok"]
        + 20 * mini["output_usd_per_mtok"]
    )
    assert mini["monthly_usd"] == pytest.approx(cached_usd) and cached_usd < expected_usd
    at.multiselect(key="prices-api-provider").select("groq").run()
    assert set(_api_table(at)["provider"]) == {"groq"}


def test_a_per_token_sheet_is_imported_and_a_bad_one_located(empty_home: Path, page: Page) -> None:
    at = page("prices")
    before = _api_version_ids()
    bad = HEADER + b"openai,gpt-4o-mini,0.12,0.48\nopenai,gpt-4o,cheap,10\n"
    at.file_uploader(key="prices-api-upload").upload("quote.csv", bad, "text/csv").run()
    at.button(key="prices-api-import").click().run()
    no_exception(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith(
        "quote.csv: row 2, line 3, column 'input_usd_per_mtok'"
    ), errors
    assert _api_version_ids() == before

    good = HEADER + b"openai,gpt-4o-mini,0.12,0.48\n"
    at.file_uploader(key="prices-api-upload").upload("edp.csv", good, "text/csv").run()
    at.button(key="prices-api-import").click().run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    assert _api_version_ids() == [*before, before[-1] + 1]
    assert any("1 override list prices" in s.value for s in at.success)
    shown = _api_table(at)
    mini = shown[(shown["provider"] == "openai") & (shown["offer"] == "gpt-4o-mini")].iloc[0]
    assert (mini["input_usd_per_mtok"], mini["source_kind"]) == (0.12, "user")
    assert mini["list_input_usd_per_mtok"] == 0.15
