"""Recommendations searched in the background: a search runs in its own thread, reports its
stages to a thread-safe record that whoever started it polls, and is stored when it ends the
way ``planner recommend`` stores it (both call :func:`planner.usecases.recommend.recommend`).
The dashboard keeps one :class:`SearchRegistry` per server, so a search goes on while the
analyst looks at other pages.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from planner.access import Action, Actor, acting_as, current_actor, require
from planner.errors import PlannerError, UsageError
from planner.store import open_store
from planner.usecases.recommend import RecommendRequest, recommend

State = Literal["running", "done", "failed", "cancelled"]
MAX_RUNNING = 2  # searches at once on one server: each keeps every core busy
KEPT_FINISHED = 20  # finished searches remembered (their results are in the store)
LOG = logging.getLogger(__name__)


class SearchStoppedError(Exception):
    """Raised inside a search's thread when it was asked to stop."""


@dataclass(frozen=True)
class StageProgress:
    name: str
    done: int
    total: int


@dataclass(frozen=True)
class SearchStatus:
    """A snapshot of one search, safe to read in any thread."""

    job_id: int
    label: str
    owner: str  # who started it (each person sees their own searches)
    state: State
    stage: str
    stages: tuple[StageProgress, ...]
    started_at: datetime
    elapsed_s: float
    error: str | None = None
    result: dict[str, Any] | None = None  # Recommendation.to_dict(), with its "id" once stored
    stored_id: int | None = None
    not_stored: str | None = None  # why a finished result could not be stored

    @property
    def finished(self) -> bool:
        return self.state != "running"


class SearchJob:
    """One search in its own thread. Its progress callback is also where a stop request takes
    effect: it raises inside ``recommend()``, whose runner then kills its worker processes."""

    def __init__(
        self, job_id: int, spec: RecommendRequest, store_url: str, owner: Actor | None = None
    ) -> None:
        self.job_id = job_id
        self.spec = spec
        self.store_url = store_url
        # the thread acts for whoever started it (a new thread starts with no identity set)
        self.owner = owner or current_actor()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._state: State = "running"
        self._stage = "reading the demand"
        self._stages: dict[str, StageProgress] = {}
        self._started_at = datetime.now(UTC)
        self._began = time.monotonic()
        self._ended: float | None = None
        self._error: str | None = None
        self._result: dict[str, Any] | None = None
        self._stored_id: int | None = None
        self._not_stored: str | None = None
        self._thread = threading.Thread(target=self._run, name=f"recommend-{job_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the search to stop; it does at its next progress report, once the simulations
        in progress end (nothing is stored)."""
        self._stop.set()
        with self._lock:
            if self._state == "running":
                self._stage = "stopping after the simulations in progress"

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the search to end; True once it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def status(self) -> SearchStatus:
        with self._lock:
            end = self._ended if self._ended is not None else time.monotonic()
            return SearchStatus(
                job_id=self.job_id,
                label=self.spec.describe(),
                owner=self.owner.name,
                state=self._state,
                stage=self._stage,
                stages=tuple(self._stages.values()),
                started_at=self._started_at,
                elapsed_s=end - self._began,
                error=self._error,
                result=self._result,
                stored_id=self._stored_id,
                not_stored=self._not_stored,
            )

    def _progress(self, stage: str, done: int, total: int) -> None:
        if self._stop.is_set():
            raise SearchStoppedError
        with self._lock:
            self._stage = stage
            self._stages[stage] = StageProgress(stage, done, total)

    def _set_stage(self, stage: str) -> None:
        if self._stop.is_set():
            raise SearchStoppedError
        with self._lock:
            self._stage = stage

    def _finish(self, state: State, **fields: Any) -> None:
        with self._lock:
            self._state = state
            self._ended = time.monotonic()
            for name, value in fields.items():
                setattr(self, f"_{name}", value)

    def _run(self) -> None:
        try:
            with acting_as(self.owner), open_store(self.store_url) as store:
                found = recommend(
                    self.spec, store.session, progress=self._progress, stage=self._set_stage
                )
            self._finish(
                "done",
                result=found.data,
                stored_id=found.stored_id,
                not_stored=found.not_stored,
                stage="done",
            )
        except SearchStoppedError:
            self._finish("cancelled", stage="stopped", error="stopped before it ended: not stored")
        except PlannerError as exc:
            self._finish("failed", stage="failed", error=str(exc))
        except Exception as exc:  # a bug: said, and logged with its traceback for the report
            LOG.exception("recommendation search %s failed", self.job_id)
            self._finish(
                "failed",
                stage="failed",
                error=f"unexpected error ({type(exc).__name__}): {exc}. Please report it.",
            )


class SearchRegistry:
    """The searches of one server: started here, looked up by id from any page or session."""

    def __init__(self, max_running: int = MAX_RUNNING) -> None:
        self.max_running = max_running
        self._lock = threading.Lock()
        self._jobs: dict[int, SearchJob] = {}
        self._next_id = 1

    def start(self, spec: RecommendRequest, store_url: str) -> SearchJob:
        """Check ``spec`` and start its search for the acting identity; refused when its role
        may not search, or while ``max_running`` others run."""
        owner = require(Action.SEARCH)
        spec.check()
        with self._lock:
            running = [j for j in self._jobs.values() if not j.status().finished]
            if len(running) >= self.max_running:
                raise UsageError(
                    f"{len(running)} searches are running already (at most {self.max_running} "
                    "at once: each keeps every core busy); wait for one or stop it"
                )
            job = SearchJob(self._next_id, spec, store_url, owner)
            self._next_id += 1
            self._jobs[job.job_id] = job
            self._forget_old()
        job.start()
        return job

    def get(self, job_id: int) -> SearchJob | None:
        with self._lock:
            return self._jobs.get(job_id)

    def statuses(self, owner: str | None = None) -> list[SearchStatus]:
        """Every remembered search (or ``owner``'s), newest first."""
        with self._lock:
            jobs = [j for j in self._jobs.values() if owner is None or j.owner.name == owner]
        return sorted((j.status() for j in jobs), key=lambda s: -s.job_id)

    def _forget_old(self) -> None:
        finished = sorted(j.job_id for j in self._jobs.values() if j.status().finished)
        for job_id in finished[: max(0, len(finished) - KEPT_FINISHED)]:
            del self._jobs[job_id]
