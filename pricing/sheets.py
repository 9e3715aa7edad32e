"""Versioned price sheets in the store: load, import, refresh, read the latest, diff.

Every load is a new *version* (table ``price_sheet_versions``) holding the prices it brought
(``price_points``), written in the caller's one transaction: a version lands whole or not at
all. The bundled snapshot, each provider's live refresh and each user sheet are versions of
their own kind (``snapshot``, ``aws``, ``gcp``, ``azure``, ``user``).

The prices in force (:func:`latest_prices`) are, for each price key (provider, region, instance
type, purchase option, payment, plan kind), the newest successful version's price; a user
sheet's price for a key beats any list price of that key (negotiated discounts override list
prices where they apply). A failed refresh is recorded as a ``failed`` version with its error
and no prices, so the last good prices stay in force.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from planner.errors import InputFileError, NotFoundError, PlannerError, UsageError
from planner.store.db import Store
from planner.store.price_models import (
    SOURCE_KINDS,
    STATUS_FAILED,
    STATUS_OK,
    PricePointRow,
    PriceSheetVersion,
)
from pricing.model import PricePoint, Provider, PurchaseOption
from pricing.snapshot import (
    RawRow,
    check_header,
    gpu_aliases,
    load_snapshot,
    parse_points,
    read_csv,
    snapshot_path,
)

SourceKind = Literal["snapshot", "aws", "gcp", "azure", "user"]
REFRESH_PROVIDERS = ("aws", "gcp", "azure")
LIST_KINDS = ("snapshot", "aws", "gcp", "azure")  # list prices, as opposed to user sheets
#: The columns a user sheet must have; the others default (see :func:`import_user_sheet`).
USER_REQUIRED = ("provider", "region", "instance_type", "purchase_option", "usd_per_hour")
#: Option groups for filters: ``reserved`` is reserved-1y and reserved-3y, etc.
OPTION_GROUPS = {
    "all": tuple(PurchaseOption),
    "reserved": (PurchaseOption.RESERVED_1Y, PurchaseOption.RESERVED_3Y),
    "savings-plan": (PurchaseOption.SAVINGS_PLAN_1Y, PurchaseOption.SAVINGS_PLAN_3Y),
    "committed": (PurchaseOption.COMMITTED_1Y, PurchaseOption.COMMITTED_3Y),
    "commitments": tuple(o for o in PurchaseOption if o.term_years),
}
Scope = Literal["all", "covered", "keys"]


class RefreshError(PlannerError):
    """A live refresh failed; the failure is recorded and the last good prices stay."""

    def __init__(self, provider: str, reason: str, kept: str) -> None:
        self.provider = provider
        self.reason = reason
        super().__init__(f"{provider} price refresh failed: {reason}. {kept}")


@dataclass(frozen=True)
class VersionInfo:
    """One price-sheet version, detached from the session."""

    id: int
    source_kind: str
    label: str
    source_ref: str
    sha256: str | None
    fetched_at: datetime
    row_count: int
    status: str
    error: str | None

    @classmethod
    def of(cls, row: PriceSheetVersion) -> VersionInfo:
        return cls(
            id=row.id,
            source_kind=row.source_kind,
            label=row.label,
            source_ref=row.source_ref,
            sha256=row.sha256,
            fetched_at=row.fetched_at,
            row_count=row.row_count,
            status=row.status,
            error=row.error,
        )

    def describe(self) -> str:
        return f"version {self.id} ({self.source_kind}: {self.label}, {self.fetched_at:%Y-%m-%d})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source_kind": self.source_kind,
            "label": self.label,
            "source_ref": self.source_ref,
            "sha256": self.sha256,
            "fetched_at": self.fetched_at.isoformat(),
            "row_count": self.row_count,
            "status": self.status,
            "error": self.error,
        }


@dataclass(frozen=True)
class PriceEntry:
    """A price in force, with the version it comes from and, for a user price, the list price
    it overrides (if any)."""

    point: PricePoint
    version_id: int
    source_kind: str
    overrides: PricePoint | None = None

    def to_dict(self) -> dict[str, Any]:
        data = self.point.to_dict()
        data["usd_per_gpu_hour"] = self.point.usd_per_gpu_hour
        data["version_id"] = self.version_id
        data["source_kind"] = self.source_kind
        data["list_usd_per_hour"] = self.overrides.usd_per_hour if self.overrides else None
        return data


# -- writing versions --------------------------------------------------------------------------


def _point_values(point: PricePoint, version_id: int) -> dict[str, Any]:
    return {
        "version_id": version_id,
        "provider": point.provider.value,
        "region": point.region,
        "instance_type": point.instance_type,
        "gpu_model": point.gpu_model,
        "gpu_count": point.gpu_count,
        "gpu_memory_gb": point.gpu_memory_gb,
        "vcpus": point.vcpus,
        "ram_gb": point.ram_gb,
        "purchase_option": point.purchase_option.value,
        "usd_per_hour": point.usd_per_hour,
        "upfront_usd": point.upfront_usd,
        "payment": point.payment,
        "plan_kind": point.plan_kind,
        "currency": point.currency,
        "effective_date": point.effective_date,
        "source": point.source,
        "fetched_at": point.fetched_at,
    }


def _to_point(row: PricePointRow) -> PricePoint:
    return PricePoint(
        provider=Provider(row.provider),
        region=row.region,
        instance_type=row.instance_type,
        gpu_model=row.gpu_model,
        gpu_count=row.gpu_count,
        purchase_option=PurchaseOption(row.purchase_option),
        usd_per_hour=row.usd_per_hour,
        source=row.source,
        effective_date=row.effective_date,
        gpu_memory_gb=row.gpu_memory_gb,
        vcpus=row.vcpus,
        ram_gb=row.ram_gb,
        upfront_usd=row.upfront_usd,
        payment=row.payment,
        plan_kind=row.plan_kind,
        currency=row.currency,
        fetched_at=row.fetched_at,
    )


def point_problems(point: PricePoint) -> list[str]:
    """What is wrong with a point handed over by code (a loader), for the refresh's error."""
    problems = []
    if not isinstance(point, PricePoint):
        return [f"not a PricePoint: {type(point).__name__}"]
    where = f"{point.provider}/{point.region}/{point.instance_type}/{point.purchase_option}"
    if not (point.usd_per_hour > 0):
        problems.append(f"{where}: price {point.usd_per_hour!r} (expected > 0)")
    if point.gpu_count < 1:
        problems.append(f"{where}: gpu_count {point.gpu_count!r} (expected >= 1)")
    if point.upfront_usd < 0:
        problems.append(f"{where}: upfront {point.upfront_usd!r} (expected >= 0)")
    if point.currency != "USD":
        problems.append(f"{where}: currency {point.currency!r} (expected USD)")
    if not point.source or not point.effective_date:
        problems.append(f"{where}: no source or effective date")
    else:
        try:
            date.fromisoformat(point.effective_date)
        except ValueError:
            problems.append(f"{where}: effective date {point.effective_date!r} is not ISO")
    return problems


def store_version(
    session: Session,
    points: Sequence[PricePoint],
    *,
    source_kind: SourceKind,
    label: str,
    source_ref: str = "",
    sha256: str | None = None,
    fetched_at: datetime | None = None,
) -> VersionInfo:
    """Write ``points`` as a new successful version, in the session's transaction."""
    if source_kind not in SOURCE_KINDS:
        raise UsageError(f"unknown price source kind {source_kind!r}")
    seen: set[tuple[str, ...]] = set()
    for point in points:
        problems = point_problems(point)
        if problems:
            raise PlannerError(f"cannot store price: {problems[0]}")
        if point.key() in seen:
            raise PlannerError(f"cannot store price: {'/'.join(point.key())} given twice")
        seen.add(point.key())
    version = PriceSheetVersion(
        source_kind=source_kind,
        label=label[:200],
        source_ref=source_ref,
        sha256=sha256,
        fetched_at=fetched_at or datetime.now(UTC),
        row_count=len(points),
        status=STATUS_OK,
    )
    session.add(version)
    session.flush()
    if points:
        session.execute(insert(PricePointRow), [_point_values(p, version.id) for p in points])
    return VersionInfo.of(version)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_snapshot_version(
    session: Session, path: Path | None = None, *, force: bool = False
) -> tuple[VersionInfo, bool]:
    """Load the bundled snapshot as a version; ``(version, True)`` if loaded now.

    Loading the same file again is a no-op (``(that version, False)``) unless ``force``.
    """
    path = path or snapshot_path()
    points = load_snapshot(path)
    sha = _sha256(path)
    if not force:
        same = session.scalars(
            select(PriceSheetVersion)
            .where(
                PriceSheetVersion.source_kind == "snapshot",
                PriceSheetVersion.status == STATUS_OK,
                PriceSheetVersion.sha256 == sha,
            )
            .order_by(PriceSheetVersion.id.desc())
        ).first()
        if same is not None:
            return VersionInfo.of(same), False
    version = store_version(
        session,
        points,
        source_kind="snapshot",
        label=f"bundled snapshot {path.name}",
        source_ref=str(path),
        sha256=sha,
    )
    return version, True


def ensure_list_prices(session: Session) -> VersionInfo | None:
    """Load the bundled snapshot when the store has no list prices yet; the version if loaded."""
    has_list = session.scalars(
        select(PriceSheetVersion.id)
        .where(
            PriceSheetVersion.source_kind.in_(LIST_KINDS),
            PriceSheetVersion.status == STATUS_OK,
            PriceSheetVersion.row_count > 0,
        )
        .limit(1)
    ).first()
    if has_list is not None:
        return None
    version, _ = load_snapshot_version(session)
    return version


def read_sheet_rows(path: Path) -> tuple[list[str], list[RawRow]]:
    """Header and rows of a user sheet: CSV, or the first worksheet of an XLSX workbook."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return read_csv(path)
    if suffix not in (".xlsx", ".xlsm"):
        raise InputFileError(path, f"expected a .csv or .xlsx file, got {suffix or 'no suffix'}")
    if not path.is_file():
        raise InputFileError(path, "file not found")
    if importlib.util.find_spec("openpyxl") is None:  # pandas reads .xlsx through it
        raise PlannerError("reading .xlsx needs openpyxl: pip install openpyxl")
    import pandas as pd

    try:
        frame = pd.read_excel(
            path, sheet_name=0, dtype=str, keep_default_na=False, engine="openpyxl"
        )
    except Exception as exc:  # openpyxl raises many kinds for a damaged workbook
        raise InputFileError(path, f"not a readable .xlsx workbook: {exc}") from exc
    names = [_name(c) for c in frame.columns]
    rows = []
    for number, cells in enumerate(frame.itertuples(index=False), start=1):
        values = ["" if c is None else str(c) for c in cells]
        if not any(v.strip() for v in values):
            continue
        # line = the worksheet's own row number (the header is row 1)
        rows.append(RawRow(number, number + 1, dict(zip(names, values, strict=True))))
    return names, rows


def _name(column: object) -> str:
    return str(column).strip().lower().replace(" ", "_")


def _known_shapes(session: Session) -> Callable[[Provider, str], PricePoint | None]:
    """A lookup of instance shapes from the prices in force and the bundled snapshot."""
    shapes: dict[tuple[str, str], PricePoint] = {}
    for point in load_snapshot():
        shapes.setdefault((point.provider.value, point.instance_type), point)
    for entry in latest_entries(session):
        shapes[(entry.point.provider.value, entry.point.instance_type)] = entry.point

    def lookup(provider: Provider, instance_type: str) -> PricePoint | None:
        return shapes.get((provider.value, instance_type))

    return lookup


def import_user_sheet(
    session: Session, path: Path, *, label: str | None = None, today: date | None = None
) -> VersionInfo:
    """Import a user's price sheet (CSV or XLSX) as a new ``user`` version.

    Columns as the snapshot's (:data:`pricing.snapshot.COLUMNS`); only ``provider``, ``region``,
    ``instance_type``, ``purchase_option`` and ``usd_per_hour`` are required. Defaults: GPU
    model, GPU count, memory, vCPUs and RAM from the price list's row of the same instance
    (required for an instance the list does not have), ``upfront_usd`` 0, ``currency`` USD,
    ``effective_date`` the import date, ``source`` "user sheet FILE". A bad row stops the import
    with its row and column, and nothing is stored.
    """
    header, rows = read_sheet_rows(path)
    check_header(path, header, required=USER_REQUIRED)
    if not rows:
        raise InputFileError(path, "no price rows under the header")
    defaults = {
        "effective_date": (today or datetime.now(UTC).date()).isoformat(),
        "source": f"user sheet {path.name}",
        "currency": "USD",
    }
    points = parse_points(
        path, rows, defaults=defaults, aliases=gpu_aliases(), shapes=_known_shapes(session)
    )
    return store_version(
        session,
        points,
        source_kind="user",
        label=label or path.name,
        source_ref=str(path.resolve()),
        sha256=_sha256(path),
    )


def _refresh_label(provider: str, region: str | None) -> str:
    return f"{provider} live refresh" + (f" ({region})" if region else " (all regions)")


def record_refresh(
    session: Session, provider: str, points: Sequence[PricePoint], *, region: str | None = None
) -> VersionInfo:
    """Store a successful refresh of ``provider`` as a new version."""
    return store_version(
        session,
        points,
        source_kind=_provider_kind(provider),
        label=_refresh_label(provider, region),
        source_ref=f"pricing.loaders.{provider}.fetch(region={region!r})",
    )


def record_failed_refresh(
    session: Session, provider: str, error: BaseException | str, *, region: str | None = None
) -> VersionInfo:
    """Record a failed refresh: a ``failed`` version with the reason and no prices."""
    version = PriceSheetVersion(
        source_kind=_provider_kind(provider),
        label=_refresh_label(provider, region),
        source_ref=f"pricing.loaders.{provider}.fetch(region={region!r})",
        fetched_at=datetime.now(UTC),
        row_count=0,
        status=STATUS_FAILED,
        error=error if isinstance(error, str) else failure_reason(error),
    )
    session.add(version)
    session.flush()
    return VersionInfo.of(version)


def failure_reason(exc: BaseException) -> str:
    """One line saying why a refresh failed (a loader's own reason where it gives one)."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and reason:
        return reason
    text = " ".join(str(exc).split())
    if isinstance(exc, PlannerError) and text:
        return text  # planner's (and the loaders') own messages say what happened
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _provider_kind(provider: str) -> SourceKind:
    name = provider.lower()
    if name == "aws":
        return "aws"
    if name == "gcp":
        return "gcp"
    if name == "azure":
        return "azure"
    raise UsageError(f"no live refresh for {provider!r}: expected one of aws, gcp, azure")


Fetch = Callable[..., list[PricePoint]]


class LoaderUnavailableError(PlannerError):
    """The provider's loader module is not part of this installation."""


def load_fetch(provider: str) -> Fetch:
    """``pricing.loaders.<provider>.fetch``, imported now (loaders are optional)."""
    kind = _provider_kind(provider)
    module_name = f"pricing.loaders.{kind}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name in (module_name, "pricing.loaders"):
            raise LoaderUnavailableError(
                f"the {kind} price loader is not available in this installation "
                f"(no module {module_name})"
            ) from exc
        raise
    fetch: Fetch = module.fetch
    return fetch


def last_good_version(session: Session, provider: str | None = None) -> VersionInfo | None:
    """The newest successful version of ``provider`` (or of any list source)."""
    kinds = [provider] if provider else list(LIST_KINDS)
    row = session.scalars(
        select(PriceSheetVersion)
        .where(
            PriceSheetVersion.source_kind.in_(kinds),
            PriceSheetVersion.status == STATUS_OK,
        )
        .order_by(PriceSheetVersion.id.desc())
        .limit(1)
    ).first()
    return VersionInfo.of(row) if row is not None else None


def refresh(
    store: Store, provider: str, region: str | None = None, *, fetch: Fetch | None = None
) -> VersionInfo:
    """Fetch ``provider``'s live prices and store them as a new version.

    On any failure (the loader raises, returns nothing, or returns an invalid price) the
    failure is recorded as a ``failed`` version, the last good prices stay in force, and a
    :class:`RefreshError` names the provider and the reason. A loader that is not installed
    raises :class:`LoaderUnavailableError` (nothing recorded: nothing was tried).
    """
    kind = _provider_kind(provider)
    with store.session() as session:
        ensure_list_prices(session)
    try:
        points = list((fetch or load_fetch(kind))(region=region))
        if not points:
            raise PlannerError("the loader returned no prices")
        problems = [p for point in points for p in point_problems(point)]
        if problems:
            raise PlannerError(f"the loader returned an invalid price: {problems[0]}")
        wrong = [p for p in points if p.provider.value != kind]
        if wrong:
            raise PlannerError(f"the loader returned a {wrong[0].provider.value} price for {kind}")
        with store.session() as session:
            return record_refresh(session, kind, points, region=region)
    except LoaderUnavailableError:
        raise
    except Exception as exc:
        reason = failure_reason(exc)
        with store.session() as session:
            record_failed_refresh(session, kind, reason, region=region)
            kept = last_good_version(session, kind) or last_good_version(session)
        note = (
            f"Kept the last good prices: {kept.describe()}"
            if kept is not None
            else "No earlier prices to keep"
        )
        raise RefreshError(kind, reason, note) from exc


# -- reading -----------------------------------------------------------------------------------


def list_versions(session: Session) -> list[VersionInfo]:
    rows = session.scalars(select(PriceSheetVersion).order_by(PriceSheetVersion.id))
    return [VersionInfo.of(r) for r in rows]


def get_version(session: Session, version_id: int) -> VersionInfo:
    row = session.get(PriceSheetVersion, version_id)
    if row is None:
        known = [v.id for v in list_versions(session)]
        raise NotFoundError(
            f"no price-sheet version {version_id} (versions: "
            f"{', '.join(map(str, known)) if known else 'none yet'})"
        )
    return VersionInfo.of(row)


def version_points(session: Session, version_id: int) -> list[PricePoint]:
    get_version(session, version_id)
    rows = session.scalars(
        select(PricePointRow)
        .where(PricePointRow.version_id == version_id)
        .order_by(PricePointRow.id)
    )
    return [_to_point(r) for r in rows]


def option_filter(option: str | None) -> tuple[PurchaseOption, ...] | None:
    """The purchase options an ``--option`` value selects (a group name or one option)."""
    if option is None:
        return None
    name = option.strip().lower()
    if name in OPTION_GROUPS:
        return OPTION_GROUPS[name]
    try:
        return (PurchaseOption(name),)
    except ValueError:
        known = [*OPTION_GROUPS, *(o.value for o in PurchaseOption)]
        raise UsageError(f"unknown purchase option {option!r}; known: {', '.join(known)}") from None


def gpu_matches(query: str, gpu_model: str) -> bool:
    """Whether a GPU query selects a model: the catalog name or alias, or a family prefix
    (``H100`` selects H100-SXM and H100-PCIe; ``a100`` both A100s)."""
    q = query.strip().lower()
    m = gpu_model.lower()
    if m == q or m.startswith(q + "-"):
        return True
    return gpu_aliases().get(q) == gpu_model


def latest_entries(
    session: Session,
    provider: str | None = None,
    *,
    region: str | None = None,
    gpu: str | None = None,
    option: str | None = None,
    instance_type: str | None = None,
) -> list[PriceEntry]:
    """The prices in force with where each comes from; see the module's docstring."""
    query = (
        select(PricePointRow, PriceSheetVersion.source_kind)
        .join(PriceSheetVersion, PricePointRow.version_id == PriceSheetVersion.id)
        .where(PriceSheetVersion.status == STATUS_OK)
        .order_by(PriceSheetVersion.id.desc(), PricePointRow.id)
    )
    if provider:
        query = query.where(PricePointRow.provider == provider.lower())
    if region:
        query = query.where(PricePointRow.region == region)
    if instance_type:
        query = query.where(PricePointRow.instance_type == instance_type)
    options = option_filter(option)
    if options is not None:
        query = query.where(PricePointRow.purchase_option.in_([o.value for o in options]))
    newest_list: dict[tuple[str, ...], tuple[PricePoint, int]] = {}
    newest_user: dict[tuple[str, ...], tuple[PricePoint, int]] = {}
    for row, kind in session.execute(query):
        point = _to_point(row)
        if gpu and not gpu_matches(gpu, point.gpu_model):
            continue
        bucket = newest_user if kind == "user" else newest_list
        bucket.setdefault(point.key(), (point, row.version_id))
    entries = []
    for key, (point, version_id) in newest_user.items():
        listed = newest_list.get(key)
        entries.append(PriceEntry(point, version_id, "user", listed[0] if listed else None))
    kinds = {
        version_id: kind
        for version_id, kind in session.execute(
            select(PriceSheetVersion.id, PriceSheetVersion.source_kind)
        )
    }
    for key, (point, version_id) in newest_list.items():
        if key not in newest_user:
            entries.append(PriceEntry(point, version_id, kinds[version_id]))
    entries.sort(key=lambda e: _sort_key(e.point))
    return entries


def _natural(text: str) -> tuple[Any, ...]:
    """``g2-standard-8`` before ``g2-standard-12``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _sort_key(point: PricePoint) -> tuple[Any, ...]:
    return (
        point.provider.value,
        point.region,
        point.gpu_model,
        point.gpu_count,
        point.vcpus or 0,
        _natural(point.instance_type),
        list(PurchaseOption).index(point.purchase_option),
        point.payment,
        point.plan_kind,
    )


def latest_prices(
    session: Session,
    provider: str | None = None,
    *,
    region: str | None = None,
    gpu: str | None = None,
    option: str | None = None,
    instance_type: str | None = None,
) -> list[PricePoint]:
    """For each price key, the newest successful version's price; a user sheet's price of a
    key beats any list price of it. Filters: provider, region, GPU (name, alias or family
    prefix), purchase option (an option or a group: reserved, savings-plan, committed,
    commitments, all), instance type."""
    return [
        e.point
        for e in latest_entries(
            session,
            provider,
            region=region,
            gpu=gpu,
            option=option,
            instance_type=instance_type,
        )
    ]


# -- diff --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PriceChange:
    old: PricePoint
    new: PricePoint

    @property
    def pct_change(self) -> float:
        return (self.new.usd_per_hour / self.old.usd_per_hour - 1.0) * 100.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": list(self.new.key()),
            "gpu_model": self.new.gpu_model,
            "gpu_count": self.new.gpu_count,
            "old_usd_per_hour": self.old.usd_per_hour,
            "new_usd_per_hour": self.new.usd_per_hour,
            "pct_change": self.pct_change,
            "old_upfront_usd": self.old.upfront_usd,
            "new_upfront_usd": self.new.upfront_usd,
            "old_effective_date": self.old.effective_date,
            "new_effective_date": self.new.effective_date,
        }


@dataclass(frozen=True)
class SheetDiff:
    old: VersionInfo
    new: VersionInfo
    scope: Scope
    added: list[PricePoint] = field(default_factory=list)
    removed: list[PricePoint] = field(default_factory=list)
    changed: list[PriceChange] = field(default_factory=list)
    unchanged: int = 0

    def to_dict(self) -> dict[str, Any]:
        def brief(p: PricePoint) -> dict[str, Any]:
            return {
                "key": list(p.key()),
                "gpu_model": p.gpu_model,
                "gpu_count": p.gpu_count,
                "usd_per_hour": p.usd_per_hour,
                "upfront_usd": p.upfront_usd,
                "effective_date": p.effective_date,
            }

        return {
            "old": self.old.to_dict(),
            "new": self.new.to_dict(),
            "scope": self.scope,
            "added": [brief(p) for p in self.added],
            "removed": [brief(p) for p in self.removed],
            "changed": [c.to_dict() for c in self.changed],
            "unchanged": self.unchanged,
        }


def _usable(version: VersionInfo) -> None:
    if version.status != STATUS_OK:
        raise UsageError(
            f"{version.describe()} is a failed refresh with no prices ({version.error}); "
            "diff successful versions"
        )


def diff(
    session: Session, old_version: int, new_version: int, *, scope: Scope = "all"
) -> SheetDiff:
    """What changed from ``old_version`` to ``new_version``: added, removed and changed prices
    (usd_per_hour or upfront), with old and new price and the % change.

    ``scope="covered"`` compares only the (provider, region) pairs the new version has, so a
    refresh of one provider or region does not list every other price as removed;
    ``scope="keys"`` only the prices the new version has (what a user sheet overrides or adds).
    """
    old_info, new_info = get_version(session, old_version), get_version(session, new_version)
    _usable(old_info)
    _usable(new_info)
    old_points = version_points(session, old_version)
    new_points = version_points(session, new_version)
    if scope == "covered":
        covered = {(p.provider, p.region) for p in new_points}
        old_points = [p for p in old_points if (p.provider, p.region) in covered]
    elif scope == "keys":
        keys = {p.key() for p in new_points}
        old_points = [p for p in old_points if p.key() in keys]
    old_by_key = {p.key(): p for p in old_points}
    new_by_key = {p.key(): p for p in new_points}
    added = [p for k, p in new_by_key.items() if k not in old_by_key]
    removed = [p for k, p in old_by_key.items() if k not in new_by_key]
    changed = []
    unchanged = 0
    for key, new in new_by_key.items():
        old = old_by_key.get(key)
        if old is None:
            continue
        if _same_price(old.usd_per_hour, new.usd_per_hour) and _same_price(
            old.upfront_usd, new.upfront_usd
        ):
            unchanged += 1
        else:
            changed.append(PriceChange(old, new))
    added.sort(key=_sort_key)
    removed.sort(key=_sort_key)
    changed.sort(key=lambda c: (-abs(c.pct_change), _sort_key(c.new)))
    return SheetDiff(old_info, new_info, scope, added, removed, changed, unchanged)


def _same_price(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def default_diff_pair(session: Session) -> tuple[int, int, Scope]:
    """The versions ``planner prices diff`` compares by default: the newest successful version
    and the newest earlier successful one of the same kind (full comparison), else the one just
    before it, compared over what the newer one covers: its prices for a user sheet
    (``keys``), its providers and regions for a refresh or snapshot (``covered``)."""
    good = [v for v in list_versions(session) if v.status == STATUS_OK]
    if len(good) < 2:
        raise PlannerError(
            f"a diff needs two successful price-sheet versions; the store has {len(good)} "
            "(load prices with `planner prices refresh` or `planner prices import`)"
        )
    new = good[-1]
    for earlier in reversed(good[:-1]):
        if earlier.source_kind == new.source_kind:
            return earlier.id, new.id, "all"
    return good[-2].id, new.id, "keys" if new.source_kind == "user" else "covered"
