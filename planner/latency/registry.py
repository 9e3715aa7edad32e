"""Where profiles live: fitted ones in the store, the defaults bundled in ``data/calibration``.
A stored profile of the same name or (GPU, engine) wins over a bundled one."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from planner.common.text import closest
from planner.latency.calibration import CalibrationReport
from planner.latency.profile import (
    DEFAULT_ENGINE,
    Profile,
    ProfileError,
    choose_profile,
    load_bundled_profiles,
)
from planner.store.models import CalibrationProfile


def stored_profiles(session: Session) -> list[Profile]:
    rows = session.scalars(
        select(CalibrationProfile).order_by(CalibrationProfile.created_at.desc())
    )
    return [
        Profile.from_dict({**row.params, "name": row.name, "engine": row.engine, "gpu": row.gpu})
        for row in rows
    ]


def all_profiles(session: Session | None) -> list[Profile]:
    """Stored profiles first (they win), then the bundled defaults."""
    return (stored_profiles(session) if session is not None else []) + load_bundled_profiles()


def resolve_profile(
    session: Session | None, gpu: str, engine: str = DEFAULT_ENGINE, name: str | None = None
) -> Profile:
    profiles = all_profiles(session)
    if name is None:
        return choose_profile(profiles, gpu, engine)
    for profile in profiles:
        if profile.name == name:
            return profile
    raise ProfileError(
        f"no calibration profile named {name!r}; "
        f"known profiles: {closest(name, [p.name for p in profiles])}"
    )


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


def export_profile(path: Path, report: CalibrationReport, sources: list[str]) -> None:
    """Write (or replace, by name) a profile in a bundled-profiles JSON file."""
    payload: dict[str, Any] = {"profiles": []}
    if path.exists():
        payload = json.loads(path.read_text(encoding="utf-8"))
    summary = report.summary()
    entry = {
        "profile": report.profile.to_dict(),
        "fitted_at": datetime.now(UTC).date().isoformat(),
        "sources": sources,
        "points": summary["points"],
        "excluded": summary["excluded"],
        "heldout_test": summary["heldout_test"],
        "after_all": summary["after_all"],
    }
    payload["profiles"] = [
        p for p in payload["profiles"] if p["profile"]["name"] != report.profile.name
    ]
    payload["profiles"].append(entry)
    payload["profiles"].sort(key=lambda p: (p["profile"]["engine"], p["profile"]["gpu"] or ""))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
