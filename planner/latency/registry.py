"""Where profiles live: fitted ones in the store, the defaults bundled in ``data/calibration``.
A stored profile of the same name or (GPU, engine) wins over a bundled one."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from planner.common.files import check_output_path, write_text_atomic
from planner.common.text import MAX_SHOWN_CHARS, closest, shown
from planner.errors import UsageError
from planner.latency.calibration import CalibrationReport
from planner.latency.engines import Engine
from planner.latency.profile import (
    DEFAULT_ENGINE,
    Profile,
    ProfileError,
    bundled_profiles_path,
    choose_profile,
    load_bundled_profiles,
    profiles_in,
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
        f"no calibration profile named {shown(name)}; "
        f"known profiles: {closest(name[:MAX_SHOWN_CHARS], [p.name for p in profiles])}"
    )


def engine_profile(session: Session | None, gpu: str, engine: Engine, name: str | None) -> Profile:
    """The calibration profile for ``engine`` on ``gpu`` (or the one named); with none fitted
    for the engine, the error says how to time it with another's."""
    try:
        return resolve_profile(session, gpu, engine.name, name)
    except ProfileError as exc:
        if name is not None:
            raise
        raise ProfileError(
            f"{exc}; or give --profile NAME to size the deployment as {engine.name} does but "
            "time it with another engine's calibration (e.g. --profile trtllm-default)"
        ) from None


ERROR_KEYS = ("heldout_test", "after_all")  # the errors a profile states, as ErrorSummary dicts


def profile_accuracy(session: Session | None, profile: Profile) -> dict[str, Any] | None:
    """The error a profile states: its fit's error on the points held out (``heldout_test``)
    and on every point after fitting (``after_all``), each ``{"points", "mape", "median_ape",
    "worst_ape", "worst_point", "by_metric"}``, with where it was fitted (``origin``: "store"
    or "bundled"), when, and on which measurement files. Looked up as :func:`resolve_profile`
    finds profiles (a stored one wins over a bundled one of the same name); None for a profile
    with no record (the built-in defaults)."""
    if session is not None:
        row = session.scalars(
            select(CalibrationProfile).where(CalibrationProfile.name == profile.name)
        ).first()
        if row is not None:
            report = row.report or {}
            return {
                "origin": "store",
                "fitted_at": row.created_at.date().isoformat() if row.created_at else None,
                "sources": list(row.sources or []),
                "points": report.get("points"),
                **{key: report.get(key) for key in ERROR_KEYS},
            }
    path = bundled_profiles_path()
    if not path.exists():
        return None
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{path}: not a readable JSON file ({exc})") from exc
    for entry in payload.get("profiles", []) if isinstance(payload, dict) else []:
        data = entry.get("profile") if isinstance(entry, dict) else None
        if isinstance(data, dict) and data.get("name") == profile.name:
            return {
                "origin": "bundled",
                "fitted_at": entry.get("fitted_at"),
                "sources": list(entry.get("sources") or []),
                "points": entry.get("points"),
                **{key: entry.get(key) for key in ERROR_KEYS},
            }
    return None


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


EXPORT_OPTION = "--export"


def read_export(path: Path) -> dict[str, Any]:
    """The content of a profiles file ``--export`` will extend (empty when it does not exist),
    checked before any work: a file that is not a profiles file is refused, never overwritten."""
    check_output_path(path, EXPORT_OPTION)
    if not path.exists():
        return {"profiles": []}
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        profiles_in(payload, path)
    except (OSError, ValueError, ProfileError) as exc:
        raise UsageError(
            f"{EXPORT_OPTION} {path}: not a profiles file planner can extend ({exc}); "
            "give a new file or a profiles.json written by `planner calibrate --export`"
        ) from None
    return dict(payload)


def export_profile(
    path: Path,
    report: CalibrationReport,
    sources: list[str],
    payload: dict[str, Any] | None = None,
) -> None:
    """Write (or replace, by name) a profile in a bundled-profiles JSON file, atomically;
    ``payload`` is the file's content from :func:`read_export` (read now when not given)."""
    payload = read_export(path) if payload is None else payload
    summary = report.summary()
    entry = {
        "profile": report.profile.to_dict(),
        "fitted_at": datetime.now(UTC).date().isoformat(),
        "sources": sources,
        "fitted": summary["fitted"],
        "bounds": summary["bounds"],
        "at_bound": summary["at_bound"],
        "points": summary["points"],
        "excluded": summary["excluded"],
        "heldout_test": summary["heldout_test"],
        "after_all": summary["after_all"],
    }
    profiles = [p for p in payload["profiles"] if p["profile"]["name"] != report.profile.name]
    profiles.append(entry)
    profiles.sort(key=lambda p: (p["profile"]["engine"], p["profile"]["gpu"] or ""))
    text = json.dumps({**payload, "profiles": profiles}, indent=2, allow_nan=False) + "\n"
    write_text_atomic(path, text, EXPORT_OPTION)
