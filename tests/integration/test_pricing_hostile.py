"""Hostile user price sheets against the real store (SQLite, and PostgreSQL when configured):
wrong values are refused before anything is written, the same way on both backends."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from sqlalchemy import func, select

import planner.store.price_models  # noqa: F401  (registers the price tables)
from planner.errors import InputFileError, NotFoundError, PlannerError, UsageError
from planner.store import Store
from planner.store.price_models import PricePointRow, PriceSheetVersion
from pricing.model import PricePoint, Provider, PurchaseOption
from pricing.sheets import (
    check_filters,
    diff,
    ensure_list_prices,
    import_sheet,
    latest_entries,
    list_versions,
    store_version,
)
from tests.conftest import WriteFile

HEADER = "provider,region,instance_type,purchase_option,usd_per_hour\n"
G5 = "aws,us-east-1,g5.2xlarge,on-demand"  # list price 1.212 $/h
TODAY = date(2026, 12, 1)


def _counts(store: Store) -> tuple[int, int]:
    with store.session() as session:
        return (
            session.scalar(select(func.count()).select_from(PriceSheetVersion)) or 0,
            session.scalar(select(func.count()).select_from(PricePointRow)) or 0,
        )


@pytest.fixture
def listed(store: Store) -> Store:
    with store.session() as session:
        ensure_list_prices(session)
    return store


def _g5_price(store: Store) -> float:
    with store.session() as session:
        (entry,) = latest_entries(session, "aws", instance_type="g5.2xlarge", option="on-demand")
    return entry.point.usd_per_hour


def test_a_comma_price_is_refused_not_stored_90x_too_high(listed: Store, write: WriteFile) -> None:
    sheet = write("eu.csv", HEADER + f'{G5},"1,09"\n')
    before = _counts(listed)
    with pytest.raises(InputFileError) as info, listed.session() as session:
        import_sheet(session, sheet, today=TODAY)
    assert "row 1, line 2, column 'usd_per_hour'" in str(info.value)
    assert "got '1,09'" in str(info.value) and "--decimal-comma" in str(info.value)
    assert _counts(listed) == before
    with listed.session() as session:
        result = import_sheet(session, sheet, today=TODAY, decimal_comma=True)
    assert result.imported and _g5_price(listed) == pytest.approx(1.09)


@pytest.mark.parametrize(
    ("price", "message"),
    [
        ("121.2", "100x the price in force (1.2120 $/h, version 1 snapshot)"),
        ("0.1", "0.0825x the price in force"),
        ("0.00001", "below 0.0001 $/h"),
    ],
)
def test_implausible_prices_need_force(
    listed: Store, write: WriteFile, price: str, message: str
) -> None:
    sheet = write("typo.csv", HEADER + f"{G5},{price}\n")
    before = _counts(listed)
    with pytest.raises(InputFileError) as info, listed.session() as session:
        import_sheet(session, sheet, today=TODAY)
    assert "row 1, line 2, column 'usd_per_hour'" in str(info.value)
    assert message in str(info.value) and "--force" in str(info.value)
    assert _counts(listed) == before
    with listed.session() as session:
        assert import_sheet(session, sheet, today=TODAY, force=True).imported
    assert _g5_price(listed) == pytest.approx(float(price))


def test_reimporting_the_same_content_is_a_no_op(
    listed: Store, write: WriteFile, tmp_path: Path
) -> None:
    text = HEADER + f"{G5},1.10\naws,us-east-1,p5.48xlarge,on-demand,44.032\n"
    sheet = write("edp.csv", text)
    with listed.session() as session:
        first = import_sheet(session, sheet, today=TODAY)
    assert first.imported
    before = _counts(listed)
    with listed.session() as session:
        again = import_sheet(session, sheet, today=date(2026, 12, 2))
    assert (again.imported, again.version.id) == (False, first.version.id)
    # the same rows in another file (notes aside) are the same content
    copy = write(
        "edp-copy.csv",
        HEADER.strip() + ",notes\n" + f"{G5},1.10,q4\n"
        "aws,us-east-1,p5.48xlarge,on-demand,44.032,\n",
    )
    with listed.session() as session:
        assert not import_sheet(session, copy, today=TODAY).imported
    assert _counts(listed) == before
    # once another sheet overrides it, importing it again restores it: a new version
    write("other.csv", HEADER + f"{G5},1.20\n")
    with listed.session() as session:
        assert import_sheet(session, tmp_path / "other.csv", today=TODAY).imported
        restored = import_sheet(session, sheet, today=TODAY)
    assert restored.imported and restored.version.id > first.version.id
    assert _g5_price(listed) == pytest.approx(1.10)
    with listed.session() as session:
        assert [v.source_kind for v in list_versions(session)].count("user") == 3


@pytest.mark.parametrize(
    ("line", "column", "message"),
    [
        ("aws,us-east\x00-1,g5.2xlarge,on-demand,1.1", "region", "control characters"),
        ("aws,us-east-1,g5.2xlarge\x00,on-demand,1.1", "instance_type", "control characters"),
        ("aws," + "r" * 65 + ",g5.2xlarge,on-demand,1.1", "region", "at most 64 characters"),
        (
            "other,dc1," + "i" * 101 + ",on-demand,1.1",
            "instance_type",
            "at most 100 characters",
        ),
    ],
)
def test_nul_and_overlong_text_fail_alike_on_every_backend(
    listed: Store, write: WriteFile, line: str, column: str, message: str
) -> None:
    sheet = write("bad.csv", HEADER + line + "\n")
    before = _counts(listed)
    with pytest.raises(InputFileError) as info, listed.session() as session:
        import_sheet(session, sheet, today=TODAY)
    assert f"row 1, line 2, column '{column}'" in str(info.value) and message in str(info.value)
    assert "\x00" not in str(info.value)
    assert _counts(listed) == before


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("region", "dc\x001", "NUL"),
        ("instance_type", "i" * 101, "the store holds 100"),
        ("gpu_model", "g" * 65, "the store holds 64"),
        ("source", "from \x00 here", "NUL"),
        ("gpu_count", 2**40, "expected a whole number"),
    ],
)
def test_store_version_checks_before_writing(
    listed: Store, field: str, value: object, message: str
) -> None:
    values: dict[str, object] = {
        "provider": Provider.OTHER,
        "region": "dc1",
        "instance_type": "box",
        "gpu_model": "H100-SXM",
        "gpu_count": 8,
        "purchase_option": PurchaseOption.ON_DEMAND,
        "usd_per_hour": 10.0,
        "source": "test",
        "effective_date": "2026-01-01",
        field: value,
    }
    point = PricePoint(**values)  # type: ignore[arg-type]
    before = _counts(listed)
    with pytest.raises(PlannerError, match=message), listed.session() as session:
        store_version(session, [point], source_kind="user", label="bad")
    assert _counts(listed) == before
    with pytest.raises(PlannerError, match="NUL"), listed.session() as session:
        store_version(session, [], source_kind="user", label="a\x00b")


def test_filters_unknown_values_are_usage_errors_with_suggestions(listed: Store) -> None:
    with listed.session() as session:
        with pytest.raises(UsageError, match=r"--gpu: unknown GPU 'H10'.*H100"):
            check_filters(session, gpu="H10")
        with pytest.raises(UsageError, match=r"--provider: unknown provider 'gpc'; known: gcp"):
            check_filters(session, provider="gpc")
        with pytest.raises(UsageError, match=r"--region: .*'us-east-2'.*us-east-1"):
            check_filters(session, region="us-east-2")
        with pytest.raises(UsageError, match=r"--option: .*'spto'.*spot"):
            check_filters(session, option="spto")
        # known values, even when nothing matches them, are fine
        check_filters(session, gpu="MI300X", provider="other", region="eastus", option="all")
        check_filters(session, gpu="h100", provider="AWS")
        assert latest_entries(session, "other") == []


@pytest.mark.parametrize("version", [0, -1, 2**31, 10**20])
def test_version_ids_out_of_range_are_not_found(listed: Store, version: int) -> None:
    # 10**20 was an OverflowError on SQLite (exit 70 from `planner prices diff 1 1e20`)
    with pytest.raises(NotFoundError, match="no price-sheet version"), listed.session() as s:
        diff(s, 1, version)
