"""Prices: ``planner prices list|compare|import|diff|versions`` and the Prices page.

Two kinds of price sheets: GPU instance prices (per hour, the default) and per-token API
prices (``--kind api``: :mod:`pricing.api`, stored by :mod:`pricing.api_sheets`), each versioned
in the store and loaded from its bundled snapshot on first use.

Each function loads the bundled snapshot into a store with no list prices (in its own
transaction, reported to ``loaded``), then reads or writes in sessions of ``sessions`` and
computes on values (:mod:`pricing.entries`, :mod:`pricing.tables`). A :class:`PriceQuery` holds
the filters as the user gave them; a filter value that names nothing known is refused with the
closest known ones. An uploaded sheet (:class:`SheetUpload`) is imported exactly as a file on
disk, its errors naming the uploaded file, never where it was put to be read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.access import Action, require
from planner.common.text import printable
from planner.common.uploads import upload_file_name, uploaded_file
from planner.errors import UsageError
from planner.usecases import SessionScope
from planner.usecases.audit import record
from pricing.api_sheets import (
    ApiImportResult,
    ApiPriceEntry,
    api_entries,
    ensure_api_prices,
    import_api_sheet,
    list_api_versions,
    load_api_snapshot_version,
    select_entries,
)
from pricing.entries import STATUS_OK, PriceEntry, Scope, SheetDiff, VersionInfo
from pricing.sheets import (
    REFRESH_PROVIDERS,
    ImportResult,
    check_filters,
    default_diff_pair,
    diff,
    diff_scope,
    diff_versions,
    ensure_list_prices,
    import_sheet,
    latest_entries,
    list_versions,
    load_snapshot_version,
    refresh,
)
from pricing.tables import comparison_rows

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

Loaded = Callable[[VersionInfo], None]  # told of the bundled snapshot when it had to be loaded


@dataclass(frozen=True)
class PriceQuery:
    """Filters as ``planner prices list`` takes them; ``None`` selects everything."""

    provider: str | None = None
    region: str | None = None
    gpu: str | None = None
    option: str | None = None


@dataclass(frozen=True)
class PriceComparison:
    """The prices of a comparison, cheapest GPU-hour first, and a row of values for each
    (:func:`pricing.tables.comparison_rows`)."""

    entries: list[PriceEntry]
    rows: list[dict[str, Any]]


def prices_in_force(
    query: PriceQuery, sessions: SessionScope, *, loaded: Loaded | None = None
) -> list[PriceEntry]:
    """The prices in force that ``query`` selects, in :func:`pricing.sheets.latest_entries`'s
    order."""
    with _checked(query, sessions, loaded) as session:
        return _entries(session, query, query.option)


def compare_prices(
    query: PriceQuery, sessions: SessionScope, *, loaded: Loaded | None = None
) -> PriceComparison:
    """``query``'s prices compared: cheapest GPU-hour first, each against the cheapest
    on-demand one, each commitment's break-even against on-demand of the same instance."""
    with _checked(query, sessions, loaded) as session:
        entries = _entries(session, query, query.option)
        # the on-demand prices beside each commitment, whatever the option filter selects
        beside = _entries(session, query, "on-demand")
    return PriceComparison(*comparison_rows(entries, beside))


@dataclass(frozen=True)
class SheetUpload:
    """A price sheet that arrives as bytes (the dashboard's upload): the name the browser sent
    and the content."""

    file_name: str
    data: bytes


@dataclass(frozen=True)
class PriceImportRequest:
    """Your own price sheet to import as a new ``user`` version (see
    :func:`pricing.sheets.import_sheet`); ``label_option`` is what the label is called where
    the user typed it."""

    sheet: Path | SheetUpload
    label: str | None = None
    decimal_comma: bool = False
    force: bool = False
    label_option: str = "--label"


@dataclass(frozen=True)
class PriceImport:
    """The version imported (or the earlier one with the same prices, ``imported`` false) and
    its prices that override a list price."""

    result: ImportResult
    overrides: list[PriceEntry]


def _check_label(request: PriceImportRequest) -> None:
    """A sheet's label, when given, is a printable name (and an upload's name a file name)."""
    if isinstance(request.sheet, SheetUpload):
        upload_file_name(request.sheet.file_name)
    label = request.label
    if label is not None and (not label.strip() or printable(label) != label):
        raise UsageError(f"{request.label_option}: expected a name without control characters")


def _imported(request: PriceImportRequest, session: Session, importer: Callable[..., Any]) -> Any:
    """``importer`` (an instance or an API sheet's) run on the request's file or upload: an
    upload is read from a private copy, named as uploaded, never where it was put."""
    sheet = request.sheet
    options = {"decimal_comma": request.decimal_comma, "force": request.force}
    if isinstance(sheet, SheetUpload):
        name = upload_file_name(sheet.file_name)
        with uploaded_file(name, sheet.data) as path:
            return importer(
                session,
                path,
                label=request.label or name,
                source_ref=f"upload {name}",
                **options,
            )
    return importer(session, sheet, label=request.label, **options)


def import_prices(
    request: PriceImportRequest, sessions: SessionScope, *, loaded: Loaded | None = None
) -> PriceImport:
    """Import ``request.sheet``: the same checks and located errors for a file and an upload;
    nothing is stored on an error."""
    _check_label(request)
    require(Action.IMPORT_PRICES)
    _ensure(sessions, loaded)
    with _session(sessions) as session:
        result = _imported(request, session, import_sheet)
    record(sessions, Action.IMPORT_PRICES, f"price sheet v{result.version.id}", request.label or "")
    with _session(sessions) as session:
        overrides = [
            e for e in latest_entries(session) if e.version_id == result.version.id and e.overrides
        ]
    return PriceImport(result, overrides)


def price_versions(sessions: SessionScope, *, loaded: Loaded | None = None) -> list[VersionInfo]:
    """Every price-sheet version, oldest first: snapshot loads, refreshes (failed ones too)
    and imports."""
    _ensure(sessions, loaded)
    with _session(sessions) as session:
        return list_versions(session)


@dataclass(frozen=True)
class PriceDiffRequest:
    """Two versions to compare over ``scope`` (all, covered, keys), or neither: the newest and
    the one before it of the same kind (:func:`pricing.sheets.default_diff_pair`)."""

    old: int | None = None
    new: int | None = None
    scope: str | None = None


def diff_prices(
    request: PriceDiffRequest, sessions: SessionScope, *, loaded: Loaded | None = None
) -> SheetDiff:
    """What changed between two versions: added, removed and changed prices."""
    diff_scope(request.old, request.new, request.scope)  # refused before the store is touched
    _ensure(sessions, loaded)
    with _session(sessions) as session:
        return diff_versions(session, request.old, request.new, scope=request.scope)


def load_snapshot(sessions: SessionScope, *, force: bool = False) -> tuple[VersionInfo, bool]:
    """Load the bundled price snapshot as a new version (again only with ``force``); the
    version, and whether it was loaded now."""
    require(Action.IMPORT_PRICES)
    with _session(sessions) as session:
        version, loaded = load_snapshot_version(session, force=force)
    if loaded:
        record(sessions, Action.IMPORT_PRICES, f"price sheet v{version.id}", "bundled snapshot")
    return version, loaded


@dataclass(frozen=True)
class PriceRefreshRequest:
    """A provider's live prices to fetch (aws, gcp or azure), in one region or the loader's."""

    provider: str
    region: str | None = None


@dataclass(frozen=True)
class PriceRefresh:
    """The version fetched, and what changed since the provider's previous successful one
    (over the providers and regions the new one covers; ``None`` for a first refresh)."""

    version: VersionInfo
    changes: SheetDiff | None


def refresh_prices(request: PriceRefreshRequest, sessions: SessionScope) -> PriceRefresh:
    """Fetch a provider's current prices as a new version. On failure the last good prices
    stay, the failure is recorded, and a :class:`pricing.sheets.RefreshError` says so."""
    name = request.provider.strip().lower()
    if name not in REFRESH_PROVIDERS:
        raise UsageError(
            f"--provider {request.provider!r}: expected one of {', '.join(REFRESH_PROVIDERS)}"
        )
    require(Action.IMPORT_PRICES)
    version = refresh(lambda: _session(sessions), name, request.region)
    record(sessions, Action.IMPORT_PRICES, f"price sheet v{version.id}", f"refreshed from {name}")
    with _session(sessions) as session:
        previous = [
            v
            for v in list_versions(session)
            if v.source_kind == name and v.status == STATUS_OK and v.id != version.id
        ]
        changes = diff(session, previous[-1].id, version.id, scope="covered") if previous else None
    return PriceRefresh(version, changes)


def default_price_diff(sessions: SessionScope) -> tuple[int, int, Scope] | None:
    """The versions and scope :func:`diff_prices` compares by default; ``None`` while the store
    has fewer than two successful versions."""
    with _session(sessions) as session:
        good = [v for v in list_versions(session) if v.status == STATUS_OK]
        return default_diff_pair(session) if len(good) >= 2 else None


def ensure_prices(sessions: SessionScope) -> VersionInfo | None:
    """Load the bundled snapshot, in its own transaction, if the store has no list prices; the
    version loaded, else ``None`` (a cheap query when prices are there)."""
    with _session(sessions) as session:
        return ensure_list_prices(session)


def _ensure(sessions: SessionScope, loaded: Loaded | None) -> None:
    version = ensure_prices(sessions)
    if version is not None and loaded is not None:
        loaded(version)


@contextmanager
def _session(sessions: SessionScope) -> Iterator[Session]:
    with sessions() as session:
        if session is None:
            raise UsageError("prices need a store: there is none to read them from")
        yield session


def _entries(session: Session, query: PriceQuery, option: str | None) -> list[PriceEntry]:
    return latest_entries(
        session, query.provider, region=query.region, gpu=query.gpu, option=option
    )


@contextmanager
def _checked(query: PriceQuery, sessions: SessionScope, loaded: Loaded | None) -> Iterator[Session]:
    """A session to read ``query``'s prices in, once the store has list prices and the filter
    values are known."""
    _ensure(sessions, loaded)
    with _session(sessions) as session:
        check_filters(
            session,
            provider=query.provider,
            region=query.region,
            gpu=query.gpu,
            option=query.option,
        )
        yield session


# -- per-token API prices ----------------------------------------------------------------------

#: The kinds of price sheets ``--kind`` names.
PRICE_KINDS = ("instance", "api")


def price_kind(kind: str, option: str = "--kind") -> str:
    """``kind`` checked: ``instance`` (GPU instance prices) or ``api`` (per-token API prices)."""
    name = kind.strip().lower()
    if name not in PRICE_KINDS:
        raise UsageError(
            f"{option} {kind!r}: expected one of {', '.join(PRICE_KINDS)} (instance: GPU "
            "instance prices per hour; api: per-token prices of hosted models)"
        )
    return name


@dataclass(frozen=True)
class ApiPriceQuery:
    """Filters of ``planner prices list --kind api``: a model as a log or the catalog names it
    (``gpt-4o-mini-2024-07-18``, ``llama-3.1-8b``) and a provider; ``None`` selects all."""

    model: str | None = None
    provider: str | None = None


def api_prices_in_force(
    query: ApiPriceQuery, sessions: SessionScope, *, loaded: Loaded | None = None
) -> list[ApiPriceEntry]:
    """The per-token prices in force that ``query`` selects: by model then provider, or, with a
    model, best match first (:func:`pricing.api.api_prices_for`). A model or provider no price
    has is refused with the closest known ones; a known pair that matches nothing lists
    nothing."""
    _ensure_api(sessions, loaded)
    with _session(sessions) as session:
        entries = api_entries(session)
    return select_entries(entries, model=query.model, provider=query.provider)


@dataclass(frozen=True)
class ApiPriceImport:
    """The API price version imported (or the earlier one with the same content, ``imported``
    false) and its prices that override a list price."""

    result: ApiImportResult
    overrides: list[ApiPriceEntry]


def import_api_prices(
    request: PriceImportRequest, sessions: SessionScope, *, loaded: Loaded | None = None
) -> ApiPriceImport:
    """Import ``request.sheet`` as per-token API prices: the same checks and located errors for
    a file and an upload; nothing is stored on an error."""
    _check_label(request)
    require(Action.IMPORT_PRICES)
    _ensure_api(sessions, loaded)
    with _session(sessions) as session:
        result = _imported(request, session, import_api_sheet)
    record(
        sessions, Action.IMPORT_PRICES, f"API price sheet v{result.version.id}", request.label or ""
    )
    with _session(sessions) as session:
        overrides = [
            e
            for e in api_entries(session)
            if e.version_id == result.version.id and e.overrides is not None
        ]
    return ApiPriceImport(result, overrides)


def load_api_snapshot(sessions: SessionScope, *, force: bool = False) -> tuple[VersionInfo, bool]:
    """Load the bundled API price snapshot as a new version (again only with ``force``); the
    version, and whether it was loaded now."""
    require(Action.IMPORT_PRICES)
    with _session(sessions) as session:
        version, loaded = load_api_snapshot_version(session, force=force)
    if loaded:
        record(sessions, Action.IMPORT_PRICES, f"API price sheet v{version.id}", "bundled snapshot")
    return version, loaded


def api_price_versions(
    sessions: SessionScope, *, loaded: Loaded | None = None
) -> list[VersionInfo]:
    """Every API price-sheet version, oldest first."""
    _ensure_api(sessions, loaded)
    with _session(sessions) as session:
        return list_api_versions(session)


def ensure_api_prices_loaded(sessions: SessionScope) -> VersionInfo | None:
    """Load the bundled API snapshot, in its own transaction, if the store has none; the
    version loaded, else ``None``."""
    with _session(sessions) as session:
        return ensure_api_prices(session)


def _ensure_api(sessions: SessionScope, loaded: Loaded | None) -> None:
    version = ensure_api_prices_loaded(sessions)
    if version is not None and loaded is not None:
        loaded(version)
