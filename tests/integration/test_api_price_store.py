"""Per-token API price sheets in the real store (SQLite, and PostgreSQL when configured): the
bundled snapshot round-trips exactly, a user sheet overrides list prices whatever the order of
versions, and a bad sheet stores nothing."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from sqlalchemy import func, select

from planner.errors import InputFileError, UsageError
from planner.store import Store
from planner.store.price_models import ApiPriceRow, ApiPriceSheetVersion
from pricing.api import api_prices_for, load_api_snapshot
from pricing.api_sheets import (
    api_entries,
    ensure_api_prices,
    import_api_sheet,
    list_api_versions,
    load_api_snapshot_version,
    select_entries,
)
from tests.conftest import WriteFile

HEADER = "provider,offer,input_usd_per_mtok,output_usd_per_mtok\n"
TODAY = date(2026, 12, 7)


def _counts(store: Store) -> tuple[int, int]:
    with store.session() as session:
        return (
            session.scalar(select(func.count()).select_from(ApiPriceSheetVersion)) or 0,
            session.scalar(select(func.count()).select_from(ApiPriceRow)) or 0,
        )


def test_the_snapshot_round_trips_and_loads_once(store: Store) -> None:
    with store.session() as session:
        loaded = ensure_api_prices(session)
    assert loaded is not None and loaded.source_kind == "snapshot"
    with store.session() as session:
        assert ensure_api_prices(session) is None
        again, fresh = load_api_snapshot_version(session)
        entries = api_entries(session)
    assert (again.id, fresh) == (loaded.id, False)
    snapshot = load_api_snapshot()
    assert loaded.row_count == len(snapshot) == len(entries)
    assert {e.price for e in entries} == set(snapshot)  # every field, exactly
    assert {e.version_id for e in entries} == {loaded.id}


def test_a_user_sheet_overrides_list_prices_even_under_a_newer_snapshot(
    store: Store, write: WriteFile
) -> None:
    sheet = write(
        "edp.csv", HEADER + "openai,gpt-4o-mini,0.12,0.48\nmyhost,qwen3-32b-awq,0.05,0.2\n"
    )
    with store.session() as session:
        ensure_api_prices(session)
        result = import_api_sheet(session, sheet, today=TODAY)
    assert result.imported and result.version.row_count == 2
    with store.session() as session:
        again = import_api_sheet(session, sheet, today=TODAY)
        reloaded, _ = load_api_snapshot_version(session, force=True)
    assert (again.imported, again.version.id) == (False, result.version.id)
    with store.session() as session:
        entries = api_entries(session)
        versions = list_api_versions(session)
    assert [v.source_kind for v in versions] == ["snapshot", "user", "snapshot"]
    mini = [e for e in select_entries(entries, model="gpt-4o-mini-2024-07-18")]
    openai = next(e for e in mini if e.price.provider == "openai")
    assert (openai.price.input_usd_per_mtok, openai.source_kind) == (0.12, "user")
    assert openai.overrides is not None and openai.overrides.input_usd_per_mtok == 0.15
    assert openai.price.source_url == "user sheet edp.csv"
    assert openai.price.source_date == TODAY.isoformat()
    # the rest of the list comes from the newest snapshot
    azure = next(e for e in mini if e.price.provider == "azure")
    assert azure.version_id == reloaded.id
    # a new offer of the user's own: its catalog model found from its id
    (mine,) = select_entries(entries, provider="myhost")
    assert mine.price.catalog_model == "qwen3-32b" and mine.overrides is None
    assert mine.price in api_prices_for("Qwen/Qwen3-32B", [e.price for e in entries])


@pytest.mark.parametrize(
    ("rows", "where"),
    [
        ("openai,gpt-4o-mini,0.12,0.48\nopenai,gpt-4o,,10\n", "row 2, line 3, column 'input"),
        ("openai,gpt-4o,0.0000025,0.00001\n", "row 1, line 2, column 'input_usd_per_mtok'"),
        ("openai,gpt-4o,2.5,10\nOPENAI,gpt-4o,2.5,10\n", "row 2, line 3, column 'offer'"),
    ],
)
def test_a_bad_sheet_stores_nothing(store: Store, write: WriteFile, rows: str, where: str) -> None:
    with store.session() as session:
        ensure_api_prices(session)
    before = _counts(store)
    sheet = write("bad.csv", HEADER + rows)
    with pytest.raises(InputFileError) as info, store.session() as session:
        import_api_sheet(session, sheet, today=TODAY)
    assert where in str(info.value)
    assert _counts(store) == before


def test_an_implausible_price_is_stored_only_when_forced(store: Store, write: WriteFile) -> None:
    sheet = write("per-token.csv", HEADER + "openai,gpt-4o,0.0000025,0.00001\n")
    with store.session() as session:
        ensure_api_prices(session)
        result = import_api_sheet(session, sheet, today=TODAY, force=True)
    assert result.imported
    with store.session() as session:
        (gpt4o,) = select_entries(api_entries(session), model="gpt-4o", provider="openai")
    assert gpt4o.price.input_usd_per_mtok == 0.0000025


def test_a_workbook_reads_numbers_as_numbers_and_text_with_its_decimal_comma(
    store: Store, tmp_path: Path
) -> None:
    from openpyxl import Workbook  # type: ignore[import-untyped]

    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["provider", "offer", "input_usd_per_mtok", "output_usd_per_mtok"])
    sheet.append(["openai", "gpt-4o-mini", 0.125, "0,5"])  # a number cell, a text cell
    path = tmp_path / "quote.xlsx"
    book.save(path)
    with store.session() as session:
        ensure_api_prices(session)
        import_api_sheet(session, path, today=TODAY, decimal_comma=True)
    with store.session() as session:
        (mini,) = select_entries(api_entries(session), model="gpt-4o-mini", provider="openai")
    assert (mini.price.input_usd_per_mtok, mini.price.output_usd_per_mtok) == (0.125, 0.5)


def test_a_known_model_its_provider_does_not_sell_selects_nothing(store: Store) -> None:
    with store.session() as session:
        ensure_api_prices(session)
        entries = api_entries(session)
    assert select_entries(entries, model="gpt-4o-mini", provider="groq") == []
    with pytest.raises(UsageError, match=r"--model 'gpt-9': no per-token price"):
        select_entries(entries, model="gpt-9", provider="openai")
    with pytest.raises(UsageError, match=r"--provider 'grok'.*closest first\): groq"):
        select_entries(entries, provider="grok")
