"""The Prices page on real stores: the prices in force as the library lists them, filters,
versions and their diff, and an override sheet uploaded and imported like ``planner prices
import`` (a bad one refused with its row and column, nothing stored)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

from planner.config import database_url
from planner.store import open_store
from pricing.sheets import latest_entries, list_versions
from pricing.tables import price_rows
from tests.dashboard.conftest import no_exception

Page = Callable[[str], AppTest]
SHEET_HEADER = b"provider,region,instance_type,purchase_option,usd_per_hour\n"
GOOD = SHEET_HEADER + b"aws,us-east-1,p5.48xlarge,on-demand,44.032\n"
BAD = GOOD + b"aws,us-east-1,g5.2xlarge,on-demand,cheap\n"  # row 2, line 3


def _library_rows(**filters: str) -> pd.DataFrame:
    """The rows the page should show, straight from the library."""
    with open_store(database_url()) as store, store.session() as session:
        return pd.DataFrame(price_rows(latest_entries(session, **filters)))


def _version_ids() -> list[int]:
    with open_store(database_url()) as store, store.session() as session:
        return [v.id for v in list_versions(session)]


def _table(at: AppTest, column: str) -> pd.DataFrame:
    """The first table on the page with ``column``."""
    frames = [d.value for d in at.dataframe if column in d.value.columns]
    assert frames, f"no table with a {column!r} column"
    return frames[0]


def _prices(at: AppTest) -> pd.DataFrame:
    return _table(at, "usd_per_gpu_hour")


def test_an_empty_store_gets_the_bundled_snapshot_as_the_cli_does(
    empty_home: Path, page: Page
) -> None:
    at = page("prices")
    no_exception(at)
    assert at.title[0].value == "Prices"
    assert any("loaded the bundled snapshot as version 1" in i.value for i in at.info)
    expected = _library_rows()
    assert len(expected) > 100
    shown = _prices(at)
    assert shown["instance"].tolist() == expected["instance"].tolist()
    assert shown["usd_per_gpu_hour"].tolist() == expected["usd_per_gpu_hour"].tolist()
    assert at.metric[0].value == f"{len(expected):,}"
    chart = at.get("plotly_chart")[0].proto.spec
    assert "$ per GPU-hour" in chart
    assert at.multiselect(key="prices-gpu").options  # every GPU with a price
    # A second visit loads nothing again.
    at.run()
    no_exception(at)
    assert not any("loaded the bundled snapshot" in i.value for i in at.info)
    assert _version_ids() == [1]


def test_filters_narrow_the_table_to_what_the_library_lists(demo_home: Path, page: Page) -> None:
    at = page("prices")
    no_exception(at)
    everything = _prices(at)
    at.multiselect(key="prices-gpu").select("L4").run()
    at.multiselect(key="prices-provider").select("gcp").run()
    no_exception(at)
    shown = _prices(at)
    expected = _library_rows(provider="gcp", gpu="L4")
    expected = expected[expected["gpu"] == "L4"]  # the library's "L4" would take a family too
    assert 0 < len(shown) < len(everything)
    assert set(shown["provider"]) == {"gcp"} and set(shown["gpu"]) == {"L4"}
    assert sorted(zip(shown["instance"], shown["region"], shown["option"], strict=True)) == sorted(
        zip(expected["instance"], expected["region"], expected["option"], strict=True)
    )
    assert shown["usd_per_hour"].sum() == expected["usd_per_hour"].sum()
    # An option filter on top narrows further; colouring by option keeps the chart.
    at.multiselect(key="prices-option").select("spot").run()
    assert set(_prices(at)["purchase_option"]) == {"spot"}
    at.radio(key="prices-colour").set_value("purchase option").run()
    no_exception(at)
    assert at.get("plotly_chart")


def test_a_bad_override_sheet_is_located_and_stores_nothing(demo_home: Path, page: Page) -> None:
    at = page("prices")
    before = _version_ids()
    versions_before = _table(at, "kind")
    at.file_uploader(key="prices-upload").upload("quote.csv", BAD, "text/csv").run()
    at.button(key="prices-import").click().run()
    no_exception(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    assert errors[0].startswith("quote.csv: row 2, line 3, column 'usd_per_hour'"), errors
    assert _version_ids() == before
    pd.testing.assert_frame_equal(_table(at, "kind"), versions_before)


def test_a_good_override_sheet_adds_a_version_and_a_diff(demo_home: Path, page: Page) -> None:
    at = page("prices")
    before = _version_ids()
    assert any("A diff needs two price-sheet versions" in i.value for i in at.info)
    at.file_uploader(key="prices-upload").upload("negotiated.csv", GOOD, "text/csv").run()
    at.text_input(key="prices-upload-label").input("EDP 2027").run()
    at.button(key="prices-import").click().run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    after = _version_ids()
    assert after == [*before, before[-1] + 1]
    assert any(f"as version {after[-1]} (EDP 2027)" in s.value for s in at.success)
    versions = _table(at, "kind")
    assert versions["kind"].tolist()[-1] == "user" and versions["label"].tolist()[-1] == "EDP 2027"
    # the user's price is in force, beside the list price it overrides
    p5 = _prices(at)
    p5 = p5[(p5["instance"] == "p5.48xlarge") & (p5["purchase_option"] == "on-demand")]
    assert p5["usd_per_hour"].tolist() == [44.032] and p5["source_kind"].tolist() == ["user"]
    assert p5["list_usd_per_hour"].notna().all()
    # the diff of the newest two versions: the one price the sheet changed
    assert at.selectbox(key="prices-diff-new").value == after[-1]
    assert at.selectbox(key="prices-diff-scope").value == "keys"
    assert any("1 changed, 0 added, 0 removed" in m.value for m in at.markdown)
    changed = _table(at, "change_pct")
    assert changed["instance"].tolist() == ["p5.48xlarge"]
    assert changed["change_pct"].iloc[0] < 0
    # the same scope over every price of both lists what the snapshot has beyond the sheet
    at.selectbox(key="prices-diff-scope").select("all").run()
    no_exception(at)
    assert any(" removed" in m.value and "(over all)" in m.value for m in at.markdown)
