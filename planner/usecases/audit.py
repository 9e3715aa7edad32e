"""The audit trail as a use case: the record each changing use case writes after it succeeded
(:func:`record`; before it works, it checks its role with :func:`planner.access.require`), and
the trail read back for admins (:func:`audit_trail`, :func:`audit_csv`)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

from planner.access import Action, Actor, current_actor, require
from planner.common.csvsafe import csv_bytes
from planner.errors import UsageError
from planner.usecases import SessionScope

TRAIL_MAX = 10_000  # rows one read returns: a page or a download, never the whole history
RECORD_ATTEMPTS = 3
LOG = logging.getLogger(__name__)


def record(
    sessions: SessionScope,
    action: Action,
    target: str,
    detail: str = "",
    actor: Actor | None = None,
) -> None:
    """Write one audit row for ``action`` on ``target``, by ``actor`` (the acting identity by
    default), in its own transaction: it is written only after the action succeeded."""
    from sqlalchemy.exc import SQLAlchemyError

    from planner.store.audit import record_event

    who = actor or current_actor()
    for attempt in range(1, RECORD_ATTEMPTS + 1):
        try:
            with sessions() as session:
                if session is None:  # no store: nothing was changed in one
                    return
                record_event(
                    session,
                    actor=who.name,
                    role=who.role.label if who.role is not None else "none",
                    via=who.via,
                    action=action.key,
                    target=target,
                    detail=detail,
                )
            return
        except SQLAlchemyError as exc:  # a store busy with another writer: tried again
            if attempt == RECORD_ATTEMPTS:
                # the action is done and stays done: the missing row is logged for the admin
                LOG.error(
                    "audit row not written (%s by %s on %s): %s", action.key, who.name, target, exc
                )
                return
            time.sleep(0.2 * attempt)


@dataclass(frozen=True)
class AuditRequest:
    limit: int = 500
    actor: str | None = None
    action: str | None = None
    since: datetime | None = None


@dataclass(frozen=True)
class AuditEntry:
    at: datetime
    actor: str
    role: str
    via: str
    action: str
    target: str
    detail: str


ACTION_KEYS = tuple(action.key for action in Action)


def audit_trail(request: AuditRequest, sessions: SessionScope) -> list[AuditEntry]:
    """The newest entries first (admins only)."""
    from planner.store.audit import list_events

    require(Action.AUDIT)
    if not 1 <= request.limit <= TRAIL_MAX:
        raise UsageError(f"--limit {request.limit}: expected 1 to {TRAIL_MAX:,}")
    if request.action is not None and request.action not in ACTION_KEYS:
        raise UsageError(f"--action {request.action!r}: expected one of {', '.join(ACTION_KEYS)}")
    with sessions() as session:
        if session is None:
            raise UsageError("there is no store to read the audit trail from")
        events = list_events(
            session,
            limit=request.limit,
            actor=request.actor,
            action=request.action,
            since=request.since,
        )
        return [
            AuditEntry(e.at, e.actor, e.role, e.via, e.action, e.target, e.detail) for e in events
        ]


AUDIT_COLUMNS = ("at", "actor", "role", "via", "action", "target", "detail")


def audit_csv(entries: list[AuditEntry]) -> bytes:
    """The entries as CSV (cells that a spreadsheet would run as formulas are made inert)."""
    import pandas as pd

    frame = pd.DataFrame(
        [[getattr(e, c) for c in AUDIT_COLUMNS] for e in entries], columns=list(AUDIT_COLUMNS)
    )
    frame["at"] = frame["at"].map(lambda t: t.isoformat(timespec="seconds"))
    return csv_bytes(frame)
