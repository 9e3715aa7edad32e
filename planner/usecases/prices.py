"""Prices in force: ``planner prices list|compare`` and the Prices page.

A :class:`PriceQuery` holds the filters as the user gave them. Each function loads the bundled
snapshot into a store with no list prices (in its own transaction, reported to ``loaded``),
refuses a filter value that names nothing known (with the closest known ones), reads the prices
in force and computes on them (:mod:`pricing.tables`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from planner.errors import UsageError
from planner.usecases import SessionScope
from pricing.entries import PriceEntry, VersionInfo
from pricing.sheets import check_filters, ensure_list_prices, latest_entries
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


def _entries(session: Session, query: PriceQuery, option: str | None) -> list[PriceEntry]:
    return latest_entries(
        session, query.provider, region=query.region, gpu=query.gpu, option=option
    )


@contextmanager
def _checked(query: PriceQuery, sessions: SessionScope, loaded: Loaded | None) -> Iterator[Session]:
    """A session to read ``query``'s prices in, once the store has list prices and the filter
    values are known."""
    with sessions() as session:
        if session is None:
            raise UsageError("prices need a store: there is none to read them from")
        version = ensure_list_prices(session)
    if version is not None and loaded is not None:
        loaded(version)
    with sessions() as session:
        assert session is not None
        check_filters(
            session,
            provider=query.provider,
            region=query.region,
            gpu=query.gpu,
            option=query.option,
        )
        yield session
