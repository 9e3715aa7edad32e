"""What the Prices page runs on the real store: an uploaded sheet imported as ``planner prices
import`` imports a file, the diff of two versions as ``planner prices diff`` makes it, and the
rows its tables show."""

from __future__ import annotations

import pytest

import planner.store.price_models  # noqa: F401  (registers the price tables)
from planner.common.uploads import upload_file_name
from planner.errors import InputFileError, PlannerError, UsageError
from planner.store import Store
from planner.usecases.prices import PriceImportRequest, SheetUpload, import_prices
from pricing.sheets import (
    ImportResult,
    default_diff_pair,
    diff,
    diff_scope,
    diff_versions,
    ensure_list_prices,
    import_sheet,
    latest_entries,
    list_versions,
)
from pricing.tables import diff_rows, price_rows, version_rows
from tests.conftest import WriteFile

GOOD = (
    b"provider,region,instance_type,purchase_option,usd_per_hour\n"
    b"aws,us-east-1,p5.48xlarge,on-demand,44.032\n"
)
# Row 2 (line 3) has a price that is not a number.
BAD = (
    b"provider,region,instance_type,purchase_option,usd_per_hour\n"
    b"aws,us-east-1,p5.48xlarge,on-demand,44.032\n"
    b"aws,us-east-1,g5.2xlarge,on-demand,cheap\n"
)


def _upload(store: Store, name: str, data: bytes) -> ImportResult:
    """The Prices page's upload: the import use case on a sheet that arrives as bytes."""
    request = PriceImportRequest(SheetUpload(name, data), label_option="label")
    return import_prices(request, store.session).result


@pytest.fixture
def priced(store: Store) -> Store:
    with store.session() as session:
        ensure_list_prices(session)
    return store


def test_an_uploaded_sheet_imports_as_a_user_version(priced: Store) -> None:
    result = _upload(priced, "C:\\quotes\\negotiated.csv", GOOD)
    assert result.imported
    assert (result.version.source_kind, result.version.label) == ("user", "negotiated.csv")
    assert result.version.source_ref == "upload negotiated.csv"  # not where it was read from
    with priced.session() as session:
        p5 = [e for e in latest_entries(session) if e.point.instance_type == "p5.48xlarge"]
    again = _upload(priced, "negotiated.csv", GOOD)
    on_demand = next(e for e in p5 if e.point.purchase_option.value == "on-demand")
    assert (on_demand.point.usd_per_hour, on_demand.source_kind) == (44.032, "user")
    assert on_demand.overrides is not None  # the list price it overrides
    assert not again.imported and again.version.id == result.version.id


def test_a_bad_upload_is_located_by_its_own_name_and_stores_nothing(
    priced: Store, write: WriteFile
) -> None:
    with priced.session() as session:
        before = list_versions(session)
    with pytest.raises(InputFileError) as raised:
        _upload(priced, "quote.csv", BAD)
    message = str(raised.value)
    assert message.startswith("quote.csv: row 2, line 3, column 'usd_per_hour'"), message
    assert "planner-sheet-" not in message  # the temporary folder is not the user's business
    with priced.session() as session:
        assert list_versions(session) == before
    # exactly the error `planner prices import` gives for the same file on disk
    path = write("quote.csv", BAD)
    with pytest.raises(InputFileError) as from_disk, priced.session() as session:
        import_sheet(session, path)
    assert from_disk.value.problem == raised.value.problem


@pytest.mark.parametrize(
    ("data", "name", "expected"),
    [
        (GOOD, "prices.xls", "expected a .csv or .xlsx file"),
        (b"\xff\xfe\x00not text", "quote.csv", "not UTF-8 text"),
        (b"provider,region\naws,us-east-1\n", "quote.csv", "usd_per_hour"),
        (b"PK\x03\x04 not really a zip", "quote.xlsx", "quote.xlsx:"),
    ],
)
def test_hostile_uploads_are_refused_cleanly(
    priced: Store, data: bytes, name: str, expected: str
) -> None:
    with priced.session() as session:
        count = len(list_versions(session))
    with pytest.raises(PlannerError, match=expected):
        _upload(priced, name, data)
    with priced.session() as session:
        assert len(list_versions(session)) == count


def test_upload_names_lose_their_folders_and_unsafe_names_are_refused() -> None:
    assert upload_file_name("../../etc/passwd.csv") == "passwd.csv"
    assert upload_file_name("C:\\Users\\me\\q4 quote.xlsx") == "q4 quote.xlsx"
    for unsafe in ("a\x00b|c.csv", ".."):
        with pytest.raises(UsageError, match="expected a plain file name"):
            upload_file_name(unsafe)


def test_diff_versions_is_the_cli_diff(priced: Store) -> None:
    with priced.session() as session, pytest.raises(PlannerError, match="needs two"):
        diff_versions(session)
    version = _upload(priced, "negotiated.csv", GOOD).version
    with priced.session() as session:
        old, new, scope = default_diff_pair(session)
        assert (new, scope) == (version.id, "keys")
        default = diff_versions(session)
        assert (default.old.id, default.new.id, default.scope) == (old, new, "keys")
        assert len(default.changed) == 1 and default.unchanged == 0
        explicit = diff_versions(session, old, new)  # two versions given: every price of both
        assert explicit.scope == "all"
        assert len(explicit.removed) == len(diff(session, old, new, scope="all").removed) > 0
        assert diff_versions(session, old, new, scope="covered").scope == "covered"
        rows = diff_rows(default)
    (change,) = rows["changed"]
    assert change["instance"] == "p5.48xlarge"
    assert change["new_usd_per_hour"] == 44.032
    assert change["change_pct"] == pytest.approx(default.changed[0].pct_change)
    assert rows["added"] == rows["removed"] == []


@pytest.mark.parametrize(
    ("old", "new", "scope", "message"),
    [
        (1, None, None, "give two versions"),
        (None, 2, None, "give two versions"),
        (1, 2, "everything", "--scope 'everything': expected all, covered or keys"),
    ],
)
def test_bad_diff_requests_are_refused_before_any_work(
    old: int | None, new: int | None, scope: str | None, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        diff_scope(old, new, scope)


def test_price_rows_carry_gpu_hours_break_evens_and_sources(priced: Store) -> None:
    with priced.session() as session:
        entries = latest_entries(session)
        rows = price_rows(entries)
        versions = version_rows(list_versions(session))
    assert len(rows) == len(entries) > 0
    for row, entry in zip(rows, entries, strict=True):
        assert row["usd_per_gpu_hour"] == pytest.approx(row["usd_per_hour"] / row["gpus"])
        assert (row["provider"], row["instance"]) == (
            entry.point.provider.value,
            entry.point.instance_type,
        )
    commitments = [r for r in rows if r["purchase_option"].startswith(("reserved", "committed"))]
    assert commitments and any(r["break_even_utilization"] is not None for r in commitments)
    assert all(
        0 < r["break_even_utilization"] < 1
        for r in commitments
        if r["break_even_utilization"] is not None
    )
    assert all(r["break_even_utilization"] is None for r in rows if r["purchase_option"] == "spot")
    assert [v["kind"] for v in versions] == ["snapshot"]
    assert versions[0]["prices"] == len(rows)
