"""Which calibration profile applies: the profiles are values (the store's fitted ones, read by
:mod:`planner.store.calibrations`, then the defaults bundled in ``data/calibration``); a stored
profile of the same name or (GPU, engine) wins over a bundled one. Also the profiles files
``planner calibrate --export`` writes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.common.files import check_output_path, write_text_atomic
from planner.common.text import MAX_SHOWN_CHARS, closest, shown
from planner.errors import UsageError
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

if TYPE_CHECKING:
    from planner.latency.calibration import CalibrationReport


def all_profiles(stored: Sequence[Profile] = ()) -> list[Profile]:
    """The profiles to choose from: ``stored`` first (they win), then the bundled defaults."""
    return list(stored) + load_bundled_profiles()


def resolve_profile(
    profiles: Sequence[Profile], gpu: str, engine: str = DEFAULT_ENGINE, name: str | None = None
) -> Profile:
    """The profile named ``name`` among ``profiles`` (an :func:`all_profiles` list), or with no
    name the one fitted for ``gpu`` and ``engine``, else the engine's GPU-independent one."""
    if name is None:
        return choose_profile(list(profiles), gpu, engine)
    for profile in profiles:
        if profile.name == name:
            return profile
    raise ProfileError(
        f"no calibration profile named {shown(name)}; "
        f"known profiles: {closest(name[:MAX_SHOWN_CHARS], [p.name for p in profiles])}"
    )


def engine_profile(
    profiles: Sequence[Profile], gpu: str, engine: Engine, name: str | None
) -> Profile:
    """The calibration profile for ``engine`` on ``gpu`` (or the one named) among ``profiles``;
    with none fitted for the engine, the error says how to time it with another's."""
    try:
        return resolve_profile(profiles, gpu, engine.name, name)
    except ProfileError as exc:
        if name is not None:
            raise
        raise ProfileError(
            f"{exc}; or give --profile NAME to size the deployment as {engine.name} does but "
            "time it with another engine's calibration (e.g. --profile trtllm-default)"
        ) from None


ERROR_KEYS = ("heldout_test", "after_all")  # the errors a profile states, as ErrorSummary dicts


def profile_accuracy(
    profile: Profile, stored: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """The error a profile states: its fit's error on the points held out (``heldout_test``)
    and on every point after fitting (``after_all``), each ``{"points", "mape", "median_ape",
    "worst_ape", "worst_point", "by_metric"}``, with where it was fitted (``origin``: "store"
    or "bundled"), when, and on which measurement files. ``stored`` is the store's record of
    the profile (:func:`planner.store.calibrations.stored_accuracy`), which wins over a bundled
    one of the same name, as :func:`resolve_profile` finds profiles; None for a profile with no
    record (the built-in defaults)."""
    if stored is not None:
        return dict(stored)
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
