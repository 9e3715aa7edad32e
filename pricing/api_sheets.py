"""Versioned per-token API price sheets in the store: load the snapshot, import a user's sheet,
read the prices in force.

As for instance prices (:mod:`pricing.sheets`), every load is a *version*
(``api_price_sheet_versions``) holding the prices it brought (``api_prices``), written in the
caller's one transaction. The prices in force are, for each (provider, offer), the newest
version's price; a user sheet's price beats the list price of the same offer (a negotiated
rate, a private deployment), whatever their order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from planner.common.text import closest, shown
from planner.errors import InputFileError, PlannerError, RowProblem, UsageError
from planner.store.price_models import ApiPriceRow, ApiPriceSheetVersion
from pricing.api import (
    API_USER_REQUIRED,
    IGNORED_COLUMNS,
    KNOWN_PROVIDERS,
    TEXT_LIMITS,
    TokenPrice,
    api_prices_for,
    api_snapshot_path,
    check_api_header,
    load_api_snapshot,
    parse_api_rows,
    sort_key,
)
from pricing.entries import STATUS_OK, VersionInfo
from pricing.snapshot import RawRow
from pricing.versions import VersionTable

ApiSourceKind = Literal["snapshot", "user"]
#: A user price more than this many times (or under 1/this of) the price in force for the same
#: offer is refused unless forced: a price per token or per thousand typed as per million.
MAX_PRICE_RATIO = 10.0


@dataclass(frozen=True)
class ApiPriceEntry:
    """A per-token price in force, with the version it comes from and, for a user price, the
    list price it overrides (if any)."""

    price: TokenPrice
    version_id: int
    source_kind: str
    overrides: TokenPrice | None = None

    def to_dict(self) -> dict[str, Any]:
        data = self.price.to_dict()
        data["version_id"] = self.version_id
        data["source_kind"] = self.source_kind
        data["list_input_usd_per_mtok"] = (
            self.overrides.input_usd_per_mtok if self.overrides else None
        )
        data["list_output_usd_per_mtok"] = (
            self.overrides.output_usd_per_mtok if self.overrides else None
        )
        return data


@dataclass(frozen=True)
class ApiImportResult:
    """The version a sheet became, or the earlier one with the same content (``imported``
    false: nothing was stored)."""

    version: VersionInfo
    imported: bool


def _values(price: TokenPrice, version_id: int) -> dict[str, Any]:
    return {"version_id": version_id, **price.to_dict()}


#: The versions of API price sheets, handled as the instance sheets' (:mod:`pricing.versions`).
VERSIONS = VersionTable[TokenPrice](ApiPriceSheetVersion, ApiPriceRow, _values)


def _to_price(row: ApiPriceRow) -> TokenPrice:
    return TokenPrice(
        provider=row.provider,
        offer=row.offer,
        model=row.model,
        catalog_model=row.catalog_model,
        input_usd_per_mtok=row.input_usd_per_mtok,
        output_usd_per_mtok=row.output_usd_per_mtok,
        cached_input_usd_per_mtok=row.cached_input_usd_per_mtok,
        batch_discount=row.batch_discount,
        rpm=row.rpm,
        tpm=row.tpm,
        context_tokens=row.context_tokens,
        source_url=row.source_url,
        source_date=row.source_date,
        provenance=row.provenance,
        notes=row.notes,
        currency=row.currency,
    )


def store_api_version(
    session: Session,
    prices: Sequence[TokenPrice],
    *,
    source_kind: ApiSourceKind,
    label: str,
    source_ref: str = "",
    sha256: str | None = None,
) -> VersionInfo:
    """Write ``prices`` as a new version, in the session's transaction."""
    seen: set[tuple[str, str]] = set()
    for price in prices:
        key = (price.provider, price.offer.lower())
        if key in seen:
            raise PlannerError(f"cannot store API price: {price.provider} {price.offer} twice")
        seen.add(key)
        for column, limit in TEXT_LIMITS.items():
            value = getattr(price, column) or ""
            if len(value) > limit or "\x00" in value:
                raise PlannerError(f"cannot store API price: {column} {shown(value)} too long")
    if "\x00" in label or "\x00" in source_ref:
        raise PlannerError(f"cannot store API price sheet {shown(label)}: NUL in its label")
    return VERSIONS.add(
        session,
        prices,
        source_kind=source_kind,
        label=label,
        source_ref=source_ref,
        sha256=sha256,
    )


def load_api_snapshot_version(
    session: Session, path: Path | None = None, *, force: bool = False
) -> tuple[VersionInfo, bool]:
    """Load the bundled API snapshot as a version; ``(version, True)`` if loaded now. The same
    file again is a no-op (``(that version, False)``) unless ``force``."""
    return VERSIONS.load_snapshot(
        session, path or api_snapshot_path(), load_api_snapshot, store_api_version, force=force
    )


def ensure_api_prices(session: Session) -> VersionInfo | None:
    """Load the bundled API snapshot when the store has no API list prices; the version if
    loaded now."""
    if VERSIONS.has_prices(session, ("snapshot",)):
        return None
    version, _ = load_api_snapshot_version(session)
    return version


def list_api_versions(session: Session) -> list[VersionInfo]:
    """Every API price-sheet version, oldest first."""
    return VERSIONS.all_versions(session)


def api_entries(session: Session) -> list[ApiPriceEntry]:
    """The prices in force: for each (provider, offer), the newest user price if any, else the
    newest list price; in :func:`pricing.api.sort_key` order."""
    rows = session.execute(
        select(ApiPriceRow, ApiPriceSheetVersion.source_kind)
        .join(ApiPriceSheetVersion, ApiPriceRow.version_id == ApiPriceSheetVersion.id)
        .where(ApiPriceSheetVersion.status == STATUS_OK)
        .order_by(ApiPriceRow.version_id.desc(), ApiPriceRow.id)
    ).all()
    listed: dict[tuple[str, str], tuple[TokenPrice, int]] = {}
    users: dict[tuple[str, str], tuple[TokenPrice, int]] = {}
    for row, kind in rows:
        price = _to_price(row)
        key = (price.provider, price.offer.lower())
        (users if kind == "user" else listed).setdefault(key, (price, row.version_id))
    entries = []
    for key in listed.keys() | users.keys():
        if key in users:
            price, version_id = users[key]
            listed_price = listed.get(key)
            entries.append(
                ApiPriceEntry(price, version_id, "user", listed_price[0] if listed_price else None)
            )
        else:
            price, version_id = listed[key]
            entries.append(ApiPriceEntry(price, version_id, "snapshot"))
    entries.sort(key=lambda e: sort_key(e.price))
    return entries


def select_entries(
    entries: Sequence[ApiPriceEntry], *, model: str | None = None, provider: str | None = None
) -> list[ApiPriceEntry]:
    """The entries a ``--model`` (matched as :func:`pricing.api.api_prices_for` matches a log's
    name, best match first) and ``--provider`` select. A model or provider that no price has is
    refused with the closest known ones; a known model that the provider does not sell selects
    nothing."""
    have = sorted({e.price.provider for e in entries})
    wanted = provider.strip().lower() if provider is not None else None
    if provider is not None and wanted not in have:
        raise UsageError(
            f"--provider {shown(provider)}: no per-token prices from it; providers with prices "
            f"(closest first): {closest(provider[:80], have or list(KNOWN_PROVIDERS))}"
        )
    by_price = {id(e.price): e for e in entries}
    if model is None:
        chosen = list(entries)
    else:
        if not model.strip():
            raise UsageError("--model: expected a model name, got a blank")
        matched = api_prices_for(model, [e.price for e in entries])
        if not matched:
            models = sorted({e.price.model for e in entries})
            nearest = ", ".join(closest(model[:80], models).split(", ")[:10])
            raise UsageError(
                f"--model {shown(model)}: no per-token price for it; models with prices "
                f"(closest first): {nearest}"
            )
        chosen = [by_price[id(p)] for p in matched]
    return [e for e in chosen if wanted is None or e.price.provider == wanted]


# -- user sheets -------------------------------------------------------------------------------


def _content_sha256(header: Sequence[str], rows: Sequence[RawRow]) -> str:
    digest = hashlib.sha256()
    names = [n for n in header if n not in IGNORED_COLUMNS and n != "notes"]
    digest.update("\x1f".join(names).encode())
    for raw in rows:
        digest.update(b"\x1e" + "\x1f".join(raw.values.get(n, "").strip() for n in names).encode())
    return digest.hexdigest()


def _sheet_rows(path: Path, decimal_comma: bool) -> tuple[list[str], Iterator[RawRow]]:
    """A user sheet's header and checked rows, read as :func:`pricing.sheets.read_sheet_rows`
    reads an instance sheet (CSV or the first worksheet, the same limits and cell checks), but a
    workbook's rows keep which cells hold numbers: their text (``0.125``) is never read with
    ``--decimal-comma``'s separators. (``read_sheet_rows`` normalizes only the instance sheet's
    number columns, and its rows drop that mark.)"""
    from pricing import sheets

    options = sheets.SheetOptions(decimal_comma=decimal_comma)
    if path.suffix.lower() not in (".xlsx", ".xlsm") or not path.is_file():
        return sheets.read_sheet_rows(path, options)  # CSV, or its error for the file
    names, raw_rows = sheets._xlsx_rows(path)

    def checked() -> Iterator[RawRow]:
        for raw in raw_rows:
            native = raw.native if isinstance(raw, sheets._NativeRow) else ()
            row = sheets._check_cells(path, raw, options, native)
            yield sheets._NativeRow(row.row, row.line, row.values, native)

    return names, checked()


def import_api_sheet(
    session: Session,
    path: Path,
    *,
    label: str | None = None,
    today: date | None = None,
    decimal_comma: bool = False,
    force: bool = False,
    source_ref: str | None = None,
) -> ApiImportResult:
    """Import a user's per-token price sheet (CSV or XLSX) as a new ``user`` version.

    Columns as the snapshot's (:data:`pricing.api.API_COLUMNS`); ``provider``, ``offer``,
    ``input_usd_per_mtok`` and ``output_usd_per_mtok`` are required. Blanks default: ``model``
    and ``catalog_model`` from the price in force for the same offer (for a new offer: the
    offer id, and the catalog model its name maps to), ``source_url`` "user sheet FILE",
    ``source_date`` the import date, ``currency`` USD. A bad row stops the import with its
    row and column, and nothing is stored. A price over :data:`MAX_PRICE_RATIO` times (or
    under 1/that of) the price in force for the same offer is refused unless ``force``. The
    same content again while its prices are in force stores nothing (``imported`` false).
    """
    from pricing.sheets import number_text

    today = today or datetime.now(UTC).date()
    header, row_iter = _sheet_rows(path, decimal_comma)
    header = [n for n in header if n]
    check_api_header(path, header, required=API_USER_REQUIRED)
    in_force = {(e.price.provider, e.price.offer.lower()): e for e in api_entries(session)}

    def known(provider: str, offer: str) -> TokenPrice | None:
        entry = in_force.get((provider, offer.lower()))
        return entry.price if entry is not None else None

    rows: list[RawRow] = []

    def remembered() -> Iterator[RawRow]:
        for raw in row_iter:
            rows.append(raw)
            yield raw

    prices = parse_api_rows(
        path,
        remembered(),
        defaults={
            "source_url": f"user sheet {path.name}",
            "source_date": today.isoformat(),
            "currency": "USD",
        },
        strict=False,
        known=known,
        number_text=lambda text: number_text(text, decimal_comma=decimal_comma),
    )
    if not prices:
        raise InputFileError(path, "no price rows under the header")
    sha = _content_sha256(header, rows)
    unchanged = VERSIONS.unchanged_import(
        session, sha, [(p.provider, p.offer.lower()) for p in prices], in_force
    )
    if unchanged is not None:
        return ApiImportResult(unchanged, imported=False)
    if not force:
        for raw, price in zip(rows, prices, strict=True):
            entry = in_force.get((price.provider, price.offer.lower()))
            if entry is None:
                continue
            for column in ("input_usd_per_mtok", "output_usd_per_mtok"):
                new, old = getattr(price, column), getattr(entry.price, column)
                if not old / MAX_PRICE_RATIO <= new <= old * MAX_PRICE_RATIO:
                    raise InputFileError(
                        path,
                        RowProblem(
                            raw.row,
                            column,
                            f"{new:g} is {new / old:.3g}x the price in force ({old:g} USD per "
                            f"million tokens, version {entry.version_id}): a price per token or "
                            "per thousand tokens? --force imports it anyway",
                            raw.line,
                        ),
                    )
    version = store_api_version(
        session,
        prices,
        source_kind="user",
        label=label or path.name,
        source_ref=source_ref if source_ref is not None else str(path.resolve()),
        sha256=sha,
    )
    return ApiImportResult(version, imported=True)
