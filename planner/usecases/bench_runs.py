"""The stored benchmark runs: ``bench runs list|show|delete`` and the dashboard's Benchmarks
page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from planner.access import Action, require
from planner.errors import UsageError
from planner.usecases import SessionScope
from planner.usecases._bench import open_store
from planner.usecases.audit import record

if TYPE_CHECKING:
    import pandas as pd

    from planner.store.bench_runs import StoredRun


@dataclass(frozen=True)
class StoredRunsRequest:
    """The stored runs to list: all, or the stages of one sweep."""

    sweep: str | None = None


def stored_runs(request: StoredRunsRequest, sessions: SessionScope) -> list[StoredRun]:
    """The stored runs, oldest first."""
    from planner.store.bench_runs import list_runs

    with open_store(sessions) as session:
        return list_runs(session, group=request.sweep)


@dataclass(frozen=True)
class RunShowRequest:
    """One stored run, by name or id; ``requests``: with its requests, one row each."""

    name: str
    requests: bool = False


@dataclass(frozen=True)
class ShownRun:
    """A stored run and, when asked for, its requests (one row each)."""

    run: StoredRun
    requests: pd.DataFrame | None


def show_run(request: RunShowRequest, sessions: SessionScope) -> ShownRun:
    from planner.store.bench_runs import get_run, run_requests

    with open_store(sessions) as session:
        run = get_run(session, request.name)
        frame = run_requests(session, run.id) if request.requests else None
    return ShownRun(run, frame)


@dataclass(frozen=True)
class RunDeleteRequest:
    """A stored run to delete, by name or id; ``confirmed``: the user said yes (``--yes``)."""

    name: str
    confirmed: bool = False


def delete_run(request: RunDeleteRequest, sessions: SessionScope) -> StoredRun:
    """Delete a stored run and its requests; without ``confirmed``, say what would go (an
    unknown name says so first)."""
    from planner.common.text import printable
    from planner.store.bench_runs import delete_run as delete_stored
    from planner.store.bench_runs import get_run

    require(Action.DELETE)
    with open_store(sessions) as session:
        if not request.confirmed:
            run = get_run(session, request.name)
            raise UsageError(
                f"deleting run {printable(run.name)} removes it and its {run.requests:,} "
                "requests for good; pass --yes to delete it"
            )
        deleted = delete_stored(session, request.name)
    record(sessions, Action.DELETE, f"bench run {deleted.name}", f"{deleted.requests:,} requests")
    return deleted
