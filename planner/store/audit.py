"""The audit trail: who uploaded, imported, ran, exported or deleted what, and when.

One row per action that changed the store or took data out of it, written by the use case that
did it (after it succeeded), for a signed-in person or the CLI's local user alike.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, String, Text, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from planner.store.models import Base, UTCDateTime, utc_now

TARGET_MAX = 500
DETAIL_MAX = 2000


class AuditEvent(Base):
    __tablename__ = "audit_events"
    __table_args__ = (Index("ix_audit_events_at", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
    actor: Mapped[str] = mapped_column(String(320))  # an e-mail address is at most 320
    role: Mapped[str] = mapped_column(String(16))
    via: Mapped[str] = mapped_column(String(16))  # "sign-in" or "local"
    action: Mapped[str] = mapped_column(String(32))
    target: Mapped[str] = mapped_column(Text, default="")
    detail: Mapped[str] = mapped_column(Text, default="")


def record_event(
    session: Session, *, actor: str, role: str, via: str, action: str, target: str, detail: str
) -> AuditEvent:
    event = AuditEvent(
        actor=actor[:320],
        role=role,
        via=via,
        action=action,
        target=target[:TARGET_MAX],
        detail=detail[:DETAIL_MAX],
    )
    session.add(event)
    session.flush()
    return event


def list_events(
    session: Session,
    *,
    limit: int,
    actor: str | None = None,
    action: str | None = None,
    since: datetime | None = None,
) -> list[AuditEvent]:
    """The newest ``limit`` events first, optionally one actor's, one action's, or since a time."""
    query = select(AuditEvent)
    if actor is not None:
        query = query.where(AuditEvent.actor == actor)
    if action is not None:
        query = query.where(AuditEvent.action == action)
    if since is not None:
        query = query.where(AuditEvent.at >= since)
    query = query.order_by(AuditEvent.at.desc(), AuditEvent.id.desc()).limit(limit)
    return list(session.scalars(query))
