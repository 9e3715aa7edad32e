"""What the bench use cases share: where their notes go, the store's session (refused when
there is none), and storing runs under names checked free first."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol

from planner.access import Action
from planner.errors import PlannerError
from planner.usecases import SessionScope
from planner.usecases.audit import record

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from planner.bench.metrics import RequestRecord
    from planner.bench.results import BenchRun


class Notes(Protocol):
    """Where an action's notes go as they come (the CLI: stderr)."""

    def note(self, text: str, *, soft_wrap: bool = False) -> None: ...


class RunProgress(Notes, Protocol):
    """What a run shows while it measures (the CLI: a progress bar and notes on stderr)."""

    def measuring(self, total: int) -> AbstractContextManager[object]: ...

    def stage(self, prefix: str, total: int) -> None: ...

    def record(self, record: RequestRecord) -> None: ...


class Silent:
    """Shows nothing."""

    def note(self, text: str, *, soft_wrap: bool = False) -> None:
        pass

    def measuring(self, total: int) -> AbstractContextManager[object]:
        return nullcontext()

    def stage(self, prefix: str, total: int) -> None:
        pass

    def record(self, record: RequestRecord) -> None:
        pass


@contextmanager
def open_store(sessions: SessionScope) -> Iterator[Session]:
    with sessions() as session:
        if session is None:
            raise PlannerError("benchmark runs need planner's store; none was opened")
        yield session


def stored_names(name: str, stages: int) -> list[str]:
    """The names a run (``stages`` 0) or the stages of a sweep are stored under."""
    return [f"{name}-{i + 1}" for i in range(stages)] if stages else [name]


def check_free_names(sessions: SessionScope, store: bool, name: str | None, stages: int) -> None:
    """Runs to be stored (``store``) under ``name`` (``stages`` of a sweep: see
    :func:`stored_names`) must find each name free: checked before any is measured or read."""
    if not store or name is None:
        return
    from planner.store.bench_runs import check_free_name

    with open_store(sessions) as session:
        for stage_name in stored_names(name, stages):
            check_free_name(session, stage_name)


RunToStore = tuple["BenchRun", "Iterable[RequestRecord] | None", "dict[str, Any] | None"]


def store_runs(
    session: Session,
    runs: Sequence[RunToStore],
    name: str | None,
    *,
    group: str | None,
    target: str | None,
) -> list[str]:
    """Keep runs (with their requests, where measured) in the store, in the caller's
    transaction, and return the names they are stored under; ``group`` keeps a sweep's stages
    together."""
    from planner.store.bench_runs import get_run, save_run

    names: list[str | None] = (
        list(stored_names(name, len(runs) if group else 0)) if name else [None] * len(runs)
    )
    stored = []
    for (run, records, details), run_name in zip(runs, names, strict=True):
        run_id = save_run(
            session, run, records, name=run_name, group=group, target=target, details=details
        )
        stored.append(get_run(session, run_id).name)
    return stored


def stored_note(names: list[str]) -> str:
    return (
        f"stored as {', '.join(names)} (`planner bench runs show NAME`; the dashboard's "
        "Benchmarks page)"
    )


def store_noted(
    sessions: SessionScope,
    progress: Notes,
    runs: Sequence[RunToStore],
    name: str | None,
    *,
    group: str | None,
    target: str | None,
) -> list[str]:
    """Store runs, all or none (one transaction), say under which names, and return them."""
    with open_store(sessions) as session:
        names = store_runs(session, runs, name, group=group, target=target)
    record(sessions, Action.BENCH, f"bench runs {', '.join(names)}", f"against {target or 'files'}")
    progress.note(stored_note(names), soft_wrap=True)
    return names
