"""Versioned price sheets on the real store (SQLite, and PostgreSQL when configured)."""

from __future__ import annotations

import importlib
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import func, select

import planner.store.price_models  # noqa: F401  (registers the price tables)
from planner.errors import InputFileError, PlannerError
from planner.store import Store
from planner.store.price_models import PricePointRow, PriceSheetVersion
from pricing.model import PricePoint, Provider, PurchaseOption
from pricing.sheets import (
    LoaderUnavailableError,
    RefreshError,
    default_diff_pair,
    diff,
    ensure_list_prices,
    import_sheet,
    latest_entries,
    latest_prices,
    list_versions,
    load_snapshot_version,
    record_failed_refresh,
    refresh,
    store_version,
    version_points,
)
from pricing.snapshot import load_snapshot
from tests.conftest import WriteFile

KEY_G5 = ("aws", "us-east-1", "g5.2xlarge", "on-demand", "", "")


def _by_key(points: list[PricePoint]) -> dict[tuple[str, ...], PricePoint]:
    return {p.key(): p for p in points}


def _aws_refresh(
    price_g5: float, *, drop: str | None = None, add: bool = False
) -> list[PricePoint]:
    """The snapshot's AWS prices as a loader would return them, with a few edits."""
    points = [p for p in load_snapshot() if p.provider is Provider.AWS and p.instance_type != drop]
    points = [
        replace(
            p, usd_per_hour=price_g5, source="pricing.get_products", effective_date="2026-11-01"
        )
        if p.key() == KEY_G5
        else p
        for p in points
    ]
    if add:
        points.append(
            replace(points[0], purchase_option=PurchaseOption.SPOT, usd_per_hour=0.2, source="spot")
        )
    return points


def _counts(store: Store) -> tuple[int, int]:
    with store.session() as session:
        versions = session.scalar(select(func.count()).select_from(PriceSheetVersion)) or 0
        points = session.scalar(select(func.count()).select_from(PricePointRow)) or 0
    return versions, points


def test_snapshot_loads_once_as_a_version(store: Store) -> None:
    with store.session() as session:
        loaded = ensure_list_prices(session)
        assert loaded is not None and loaded.row_count == 179
        assert ensure_list_prices(session) is None
    with store.session() as session:
        again, fresh = load_snapshot_version(session)
        assert (again.id, fresh) == (loaded.id, False)
        forced, fresh = load_snapshot_version(session, force=True)
        assert fresh and forced.id > loaded.id
    with store.session() as session:
        prices = latest_prices(session)
        assert len(prices) == 179
        assert _by_key(prices)[KEY_G5].usd_per_hour == 1.212
        stored = version_points(session, loaded.id)
    assert stored == load_snapshot()  # every field round-trips


def test_newest_version_wins_per_key_and_filters(store: Store) -> None:
    with store.session() as session:
        ensure_list_prices(session)
        store_version(session, _aws_refresh(1.1), source_kind="aws", label="aws refresh")
    with store.session() as session:
        latest = _by_key(latest_prices(session))
        assert latest[KEY_G5].usd_per_hour == 1.1
        assert latest[KEY_G5].source == "pricing.get_products"
        assert len(latest) == 179  # GCP and Azure still from the snapshot
        h100 = latest_prices(session, gpu="H100", option="on-demand")
        assert {p.provider for p in h100} == {Provider.AWS, Provider.GCP, Provider.AZURE}
        assert all(p.gpu_model == "H100-SXM" for p in h100)
        committed = latest_prices(session, "gcp", region="us-east4", option="committed")
        assert committed and {p.purchase_option.value for p in committed} == {
            "committed-1y",
            "committed-3y",
        }
        assert latest_prices(session, gpu="a100-80gb", provider="aws")[0].instance_type == (
            "p4de.24xlarge"
        )


def test_user_sheet_overrides_list_prices_of_the_same_key(store: Store, write: WriteFile) -> None:
    sheet = write(
        "negotiated.csv",
        "provider,region,instance_type,purchase_option,usd_per_hour,notes\n"
        "aws,us-east-1,g5.2xlarge,on-demand,0.95,EDP discount\n"
        "other,onprem-fra,dgx-h100,reserved-3y,20.5,\n",
    )
    with store.session() as session:
        ensure_list_prices(session)
    with store.session() as session, pytest.raises(InputFileError) as info:
        import_sheet(session, sheet)
    assert "row 2, line 3, column 'gpu_model'" in str(info.value)
    assert "'dgx-h100' is not" in str(info.value)

    sheet.write_text(
        "provider,region,instance_type,gpu_model,gpu_count,purchase_option,usd_per_hour\n"
        "aws,us-east-1,g5.2xlarge,,,on-demand,0.95\n"
        "other,onprem-fra,dgx-h100,H100,8,reserved-3y,20.5\n"
    )
    with store.session() as session:
        version = import_sheet(session, sheet, today=date(2026, 11, 29)).version
    assert (version.source_kind, version.row_count, version.label) == ("user", 2, "negotiated.csv")
    with store.session() as session:
        old, new, scope = default_diff_pair(session)
        assert (new, scope) == (version.id, "keys")
        overridden = diff(session, old, new, scope=scope)
    assert [c.pct_change for c in overridden.changed] == [pytest.approx((0.95 / 1.212 - 1) * 100)]
    assert [p.instance_type for p in overridden.added] == ["dgx-h100"]
    assert overridden.removed == []
    with store.session() as session:
        store_version(session, _aws_refresh(1.3), source_kind="aws", label="newer list prices")
    with store.session() as session:
        entries = {e.point.key(): e for e in latest_entries(session)}
    g5 = entries[KEY_G5]
    assert (g5.source_kind, g5.point.usd_per_hour) == ("user", 0.95)
    assert g5.overrides is not None and g5.overrides.usd_per_hour == 1.3  # the newest list price
    # blanks filled from the price list; defaults for the rest
    assert (g5.point.gpu_model, g5.point.gpu_count, g5.point.vcpus) == ("A10G", 1, 8)
    assert (g5.point.effective_date, g5.point.source) == ("2026-11-29", "user sheet negotiated.csv")
    onprem = entries[("other", "onprem-fra", "dgx-h100", "reserved-3y", "", "")]
    assert onprem.point.gpu_model == "H100-SXM"  # alias resolved to the catalog name
    assert onprem.overrides is None


def test_xlsx_sheets_import(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "prices.xlsx"
    pd.DataFrame(
        {
            "Provider": ["gcp", "azure"],
            "Region": ["us-central1", "eastus"],
            "Instance Type": ["a3-highgpu-8g", "Standard_ND96isr_H100_v5"],
            "Purchase Option": ["committed-1y", "reserved-1y"],
            "USD per hour": [55.0, 60.0],
            "effective_date": [pd.Timestamp("2026-11-01"), pd.Timestamp("2026-11-02")],
        }
    ).rename(columns={"USD per hour": "usd_per_hour"}).to_excel(path, index=False)
    with store.session() as session:
        ensure_list_prices(session)
        version = import_sheet(session, path, label="q4 quote").version
    with store.session() as session:
        latest = _by_key(latest_prices(session, option="commitments"))
    a3 = latest["gcp", "us-central1", "a3-highgpu-8g", "committed-1y", "", ""]
    assert (a3.usd_per_hour, a3.effective_date, a3.gpu_count) == (55.0, "2026-11-01", 8)
    azure = latest["azure", "eastus", "Standard_ND96isr_H100_v5", "reserved-1y", "", ""]
    assert azure.usd_per_hour == 60.0 and version.label == "q4 quote"

    bad = tmp_path / "bad.xlsx"
    pd.DataFrame(
        {
            "provider": ["aws", "aws"],
            "region": ["us-east-1", "us-east-1"],
            "instance_type": ["g5.xlarge", "g6.xlarge"],
            "purchase_option": ["on-demand", "on-demand"],
            "usd_per_hour": ["0.9", "cheap"],
        }
    ).to_excel(bad, index=False)
    with store.session() as session, pytest.raises(InputFileError) as info:
        import_sheet(session, bad)
    assert "row 2, line 3, column 'usd_per_hour': expected a number, got 'cheap'" in str(info.value)


def test_a_bad_row_stores_nothing(store: Store, write: WriteFile) -> None:
    with store.session() as session:
        ensure_list_prices(session)
    before = _counts(store)
    sheet = write(
        "partly_bad.csv",
        "provider,region,instance_type,purchase_option,usd_per_hour\n"
        "aws,us-east-1,g5.xlarge,on-demand,0.9\n"
        "aws,us-east-1,g6.xlarge,on-demand,0.7\n"
        "aws,us-east-1,g6e.xlarge,on-demand,0\n",
    )
    with (
        pytest.raises(InputFileError, match=r"row 3, line 4, column 'usd_per_hour'"),
        store.session() as session,
    ):
        import_sheet(session, sheet)
    assert _counts(store) == before
    # a failure after the version row is written rolls the whole version back too
    points = _aws_refresh(1.0)
    with pytest.raises(PlannerError, match="given twice"), store.session() as session:
        store_version(session, points[:3], source_kind="aws", label="first")
        store_version(session, [points[0], points[0]], source_kind="aws", label="dup")
    assert _counts(store) == before


def test_diff_reports_added_removed_and_changed_with_percent(store: Store) -> None:
    with store.session() as session:
        old = store_version(session, _aws_refresh(1.212), source_kind="aws", label="july")
        new = store_version(
            session,
            _aws_refresh(1.0908, drop="p4d.24xlarge", add=True),
            source_kind="aws",
            label="nov",
        )
    with store.session() as session:
        result = diff(session, old.id, new.id)
        assert default_diff_pair(session) == (old.id, new.id, "all")
    [changed] = result.changed
    assert changed.new.key() == KEY_G5
    assert (changed.old.usd_per_hour, changed.new.usd_per_hour) == (1.212, 1.0908)
    assert changed.pct_change == pytest.approx(-10.0)
    assert [p.instance_type for p in result.removed] == ["p4d.24xlarge"]
    assert [p.purchase_option for p in result.added] == [PurchaseOption.SPOT]
    assert result.unchanged == len(_aws_refresh(1.0)) - 2
    data: dict[str, Any] = result.to_dict()
    assert data["changed"][0]["pct_change"] == pytest.approx(-10.0)


def test_default_diff_of_different_kinds_compares_what_the_newer_covers(store: Store) -> None:
    with store.session() as session:
        snapshot = ensure_list_prices(session)
        assert snapshot is not None
        refreshed = store_version(
            session, _aws_refresh(1.3), source_kind="aws", label="aws refresh"
        )
    with store.session() as session:
        old, new, scope = default_diff_pair(session)
        assert (old, new, scope) == (snapshot.id, refreshed.id, "covered")
        covered = diff(session, old, new, scope=scope)
        full = diff(session, old, new)
    assert [c.new.key() for c in covered.changed] == [KEY_G5]
    assert covered.removed == []  # GCP and Azure are not reported as removed
    assert {p.provider for p in full.removed} == {Provider.GCP, Provider.AZURE}


def _failing(*args: object, **kwargs: object) -> list[PricePoint]:
    raise ConnectionError("endpoint pricing.us-east-1.amazonaws.com unreachable")


def test_a_failed_refresh_keeps_the_last_good_version(store: Store) -> None:
    good = refresh(store.session, "aws", "us-east-1", fetch=lambda region: _aws_refresh(1.1))
    assert (good.source_kind, good.status, good.row_count) == ("aws", "ok", 38)
    with pytest.raises(RefreshError) as info:
        refresh(store.session, "aws", "us-east-1", fetch=_failing)
    message = str(info.value)
    assert message.startswith("aws price refresh failed: ConnectionError: endpoint")
    assert f"Kept the last good prices: version {good.id} (aws: aws live refresh" in message
    with store.session() as session:
        versions = list_versions(session)
        assert [v.status for v in versions][-2:] == ["ok", "failed"]
        failed = versions[-1]
        assert failed.row_count == 0 and "unreachable" in (failed.error or "")
        assert _by_key(latest_prices(session))[KEY_G5].usd_per_hour == 1.1
        direct = record_failed_refresh(session, "gcp", "quota exceeded")
        assert (direct.source_kind, direct.status, direct.error) == (
            "gcp",
            "failed",
            "quota exceeded",
        )


def test_a_refresh_that_returns_nothing_or_nonsense_fails(store: Store) -> None:
    with pytest.raises(
        RefreshError, match="gcp price refresh failed: the loader returned no prices"
    ):
        refresh(store.session, "gcp", fetch=lambda region: [])
    zero = replace(load_snapshot()[0], usd_per_hour=0.0)
    with pytest.raises(RefreshError, match=r"invalid price: aws/us-east-1/g4dn.xlarge/on-demand"):
        refresh(store.session, "aws", fetch=lambda region: [zero])
    with pytest.raises(RefreshError, match="returned a aws price for azure"):
        refresh(store.session, "azure", fetch=lambda region: _aws_refresh(1.0))
    with store.session() as session:
        statuses = [(v.source_kind, v.status) for v in list_versions(session)]
    assert statuses == [
        ("snapshot", "ok"),
        ("gcp", "failed"),
        ("aws", "failed"),
        ("azure", "failed"),
    ]


def test_a_missing_loader_is_reported_not_recorded(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing(name: str) -> object:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr(importlib, "import_module", missing)
    with pytest.raises(LoaderUnavailableError, match="the azure price loader is not available"):
        refresh(store.session, "azure")
    with store.session() as session:
        assert [v.source_kind for v in list_versions(session)] == ["snapshot"]
