"""How a kind of price sheet keeps its versions in the store, written once for the instance
sheets (:mod:`pricing.sheets`, ``price_sheet_versions``) and the per-token API sheets
(:mod:`pricing.api_sheets`, ``api_price_sheet_versions``): their tables have the same version
columns, and listing, writing, loading a bundled snapshot, the ensure-loaded check and an
import's "same content, still in force" check are the same over either.

What differs stays with each module: what a price is and how it is checked before it is stored
(and the messages that say so), the content digest of a user sheet (stored digests must keep
matching), and how an import judges an implausible price.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from pricing.entries import STATUS_OK, VersionInfo

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)
K = TypeVar("K")


class InForce(Protocol):
    """A price in force (:class:`pricing.entries.PriceEntry`, an API price entry)."""

    @property
    def version_id(self) -> int: ...


class StoreVersion(Protocol[T_contra]):
    """A module's ``store_version``: write ``items`` as a new version, after its own checks."""

    def __call__(
        self,
        session: Session,
        items: Sequence[T_contra],
        /,
        *,
        source_kind: Any,
        label: str,
        source_ref: str = ...,
        sha256: str | None = ...,
    ) -> VersionInfo: ...


def file_sha256(path: Path) -> str:
    """The file's SHA-256, read a block at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class VersionTable(Generic[T]):
    """A version table (``version``: its ORM class, with columns id, source_kind, label,
    source_ref, sha256, fetched_at, row_count, status, and error where the table keeps one) and
    the table of the prices it holds (``rows``, with a ``version_id``); ``values``: a price as
    the row to insert. The ORM classes are typed ``Any``: the two tables share columns, not a
    class."""

    version: Any
    rows: Any
    values: Callable[[T, int], dict[str, Any]]

    def info(self, row: Any) -> VersionInfo:
        """A stored version as a value, detached from the session."""
        return VersionInfo(
            id=row.id,
            source_kind=row.source_kind,
            label=row.label,
            source_ref=row.source_ref,
            sha256=row.sha256,
            fetched_at=row.fetched_at,
            row_count=row.row_count,
            status=row.status,
            error=getattr(row, "error", None),  # the API table records no failures
        )

    def add(
        self,
        session: Session,
        items: Sequence[T],
        *,
        source_kind: str,
        label: str,
        source_ref: str,
        sha256: str | None,
        fetched_at: datetime | None = None,
    ) -> VersionInfo:
        """Write ``items`` (already checked) as a new successful version, in the session's
        transaction."""
        version = self.version(
            source_kind=source_kind,
            label=label[:200],
            source_ref=source_ref,
            sha256=sha256,
            fetched_at=fetched_at or datetime.now(UTC),
            row_count=len(items),
            status=STATUS_OK,
        )
        session.add(version)
        session.flush()
        if items:
            session.execute(insert(self.rows), [self.values(p, version.id) for p in items])
        return self.info(version)

    def all_versions(self, session: Session) -> list[VersionInfo]:
        """Every version, oldest first."""
        rows = session.scalars(select(self.version).order_by(self.version.id))
        return [self.info(r) for r in rows]

    def newest_with(self, session: Session, source_kind: str, sha256: str) -> Any | None:
        """The newest successful version of ``source_kind`` with this digest, if any."""
        v = self.version
        return session.scalars(
            select(v)
            .where(v.source_kind == source_kind, v.status == STATUS_OK, v.sha256 == sha256)
            .order_by(v.id.desc())
        ).first()

    def has_prices(self, session: Session, kinds: Collection[str]) -> bool:
        """Whether a successful version of one of ``kinds`` holds any price."""
        v = self.version
        found = session.scalars(
            select(v.id)
            .where(v.source_kind.in_(kinds), v.status == STATUS_OK, v.row_count > 0)
            .limit(1)
        ).first()
        return found is not None

    def load_snapshot(
        self,
        session: Session,
        path: Path,
        load: Callable[[Path], Sequence[T]],
        store: StoreVersion[T],
        *,
        force: bool,
    ) -> tuple[VersionInfo, bool]:
        """Load a bundled snapshot file as a ``snapshot`` version; ``(version, True)`` if loaded
        now. The same file again is a no-op (``(that version, False)``) unless ``force``."""
        items = load(path)  # a bad file is refused before anything is read from the store
        sha = file_sha256(path)
        if not force:
            same = self.newest_with(session, "snapshot", sha)
            if same is not None:
                return self.info(same), False
        version = store(
            session,
            items,
            source_kind="snapshot",
            label=f"bundled snapshot {path.name}",
            source_ref=str(path),
            sha256=sha,
        )
        return version, True

    def unchanged_import(
        self, session: Session, sha256: str, keys: Iterable[K], in_force: Mapping[K, InForce]
    ) -> VersionInfo | None:
        """The earlier user version with this content when every price of the sheet (``keys``)
        is still in force from it (``in_force``: the prices in force by key); None when the
        sheet is to be stored."""
        same = self.newest_with(session, "user", sha256)
        if same is not None and all(
            (e := in_force.get(k)) is not None and e.version_id == same.id for k in keys
        ):
            return self.info(same)
        return None
