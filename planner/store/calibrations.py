"""Fitted calibration profiles in the store (``calibration_profiles``): read as
:class:`~planner.latency.profile.Profile` values for :mod:`planner.latency.registry` to choose
from, and written by ``planner calibrate``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from planner.latency.profile import Profile
from planner.latency.registry import ERROR_KEYS, all_profiles
from planner.store.models import CalibrationProfile

if TYPE_CHECKING:
    from planner.latency.calibration import CalibrationReport


def stored_profiles(session: Session) -> list[Profile]:
    """The store's profiles, the latest fitted first."""
    rows = session.scalars(
        select(CalibrationProfile).order_by(CalibrationProfile.created_at.desc())
    )
    return [
        Profile.from_dict({**row.params, "name": row.name, "engine": row.engine, "gpu": row.gpu})
        for row in rows
    ]


def known_profiles(session: Session | None) -> list[Profile]:
    """Every profile to choose from (:func:`planner.latency.registry.all_profiles`): the stored
    ones first (they win), then the bundled defaults; only those with no store (None)."""
    return all_profiles(stored_profiles(session) if session is not None else ())


def stored_accuracy(session: Session | None, name: str) -> dict[str, Any] | None:
    """The store's record of the errors of the profile named ``name`` (origin "store", when it
    was fitted, on which files, its ``heldout_test`` and ``after_all`` errors), for
    :func:`planner.latency.registry.profile_accuracy`; None when the store has no such profile."""
    if session is None:
        return None
    row = session.scalars(select(CalibrationProfile).where(CalibrationProfile.name == name)).first()
    if row is None:
        return None
    report = row.report or {}
    return {
        "origin": "store",
        "fitted_at": row.created_at.date().isoformat() if row.created_at else None,
        "sources": list(row.sources or []),
        "points": report.get("points"),
        **{key: report.get(key) for key in ERROR_KEYS},
    }


def save_profile(session: Session, report: CalibrationReport, sources: list[str]) -> None:
    """Store a fitted profile, replacing one of the same name."""
    profile = report.profile
    existing = session.scalars(
        select(CalibrationProfile).where(CalibrationProfile.name == profile.name)
    ).first()
    if existing is not None:
        session.delete(existing)
        session.flush()
    session.add(
        CalibrationProfile(
            name=profile.name,
            engine=profile.engine,
            gpu=profile.gpu,
            params=profile.params(),
            report=report.summary(),
            sources=sources,
        )
    )
