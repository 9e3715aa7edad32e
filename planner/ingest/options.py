"""Checking what a user types for an ingest (a start time, a time zone, a strptime pattern), the
same way for ``planner ingest`` and the dashboard's upload form.

Each check names the option or field it read (``option``): the CLI passes its flag, the dashboard
its field's label, so a message points at what the user typed.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from functools import cache
from typing import TypeVar

import pandas as pd

from planner.common.text import closest, shown
from planner.errors import UsageError
from planner.ingest.formats import FORMAT_NAMES, TimeKind, TimeSpec, TimeUnit, parse_mapping
from planner.ingest.normalize import ARRIVAL_MAX, ARRIVAL_MIN, ARRIVAL_RANGE
from planner.ingest.pipeline import (
    DEFAULT_PREFIX_BLOCK_TOKENS,
    MAX_PREFIX_BLOCK_TOKENS,
    IngestOptions,
    check_name,
)

E = TypeVar("E", bound=StrEnum)


def parse_start(value: str | None, option: str = "--start") -> datetime | None:
    """An ISO 8601 value as a UTC datetime (naive values are UTC), in planner's range."""
    if value is None:
        return None
    try:
        moment = pd.Timestamp(value)
        if pd.isna(moment):
            raise ValueError("not a time")
        if moment.tzinfo is None:
            moment = moment.tz_localize("UTC")
        result = moment.to_pydatetime()
    except (ValueError, TypeError, OverflowError) as exc:
        raise UsageError(
            f"{option} {shown(value)}: expected an ISO 8601 date-time, e.g. 2024-05-01T00:00:00Z"
        ) from exc
    if not ARRIVAL_MIN <= result < ARRIVAL_MAX:
        raise UsageError(f"{option} {shown(value)}: out of range; {ARRIVAL_RANGE}")
    return result


@cache
def _known_zones() -> tuple[str, ...]:
    return tuple(sorted(zoneinfo.available_timezones()))


def check_timezone(value: str, option: str = "--timezone") -> str:
    """A zone name pandas and the tz database know (Europe/Berlin, UTC, ...)."""
    try:
        pd.Timestamp("2024-01-01").tz_localize(value)
    except Exception as exc:  # pytz, zoneinfo and dateutil each fail in their own way
        suggestions = closest(value, _known_zones()).split(", ")[:5]
        raise UsageError(
            f"{option} {shown(value)}: unknown time zone; expected a tz database name, "
            f"e.g. {', '.join(suggestions) or 'Europe/Berlin'}"
        ) from exc
    return value


def check_time_format(value: str | None, option: str = "--time-format") -> str | None:
    """A strptime pattern with known directives only."""
    if value is None:
        return None
    if not value.strip():
        raise UsageError(f"{option}: the pattern is empty; leave it out for ISO 8601")
    try:
        datetime.strptime("", value)
    except ValueError as exc:
        if "does not match format" not in str(exc):  # bad directive, stray %, ...
            raise UsageError(
                f"{option} {shown(value)}: not a strptime pattern ({exc}); e.g. '%Y-%m-%d %H:%M:%S'"
            ) from exc
    if "%" not in value:
        raise UsageError(
            f"{option} {shown(value)}: no directives (such as %Y, %m, %d, %H); "
            "e.g. '%Y-%m-%d %H:%M:%S'"
        )
    return value


# What each option is called where the user typed it: the CLI's flags by default.
CLI_NAMES: dict[str, str] = {
    "name": "--name",
    "format": "--format",
    "map": "--map",
    "time_format": "--time-format",
    "timezone": "--timezone",
    "start": "--start",
    "on_error": "--on-error",
    "time_kind": "--time-kind",
    "time_unit": "--time-unit",
    "prefix_block_tokens": "--prefix-block-tokens",
}


def check_prefix_block_tokens(value: int, option: str = "--prefix-block-tokens") -> int:
    """Tokens each prefix block id of the log stands for: a whole number from 1 to 2^20."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not (1 <= value <= MAX_PREFIX_BLOCK_TOKENS)
    ):
        raise UsageError(
            f"{option} {shown(str(value))}: expected the tokens each prefix block id stands for, "
            f"a whole number from 1 to {MAX_PREFIX_BLOCK_TOKENS:,} (Mooncake's hash_ids: "
            f"{DEFAULT_PREFIX_BLOCK_TOKENS}; a log hashed at vLLM's KV blocks: 16)"
        )
    return value


def _choice(kind: type[E], value: E | str, option: str) -> E:
    """``value`` as one of ``kind``'s members, else a :class:`UsageError` naming ``option``."""
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(member.value for member in kind)
        raise UsageError(f"{option} {shown(str(value))}: expected one of {known}") from None


def ingest_options(
    *,
    name: str | None = None,
    log_format: str | None = None,
    mapping: Sequence[str] = (),
    time_kind: TimeKind | str = TimeKind.DATETIME,
    time_unit: TimeUnit | str = TimeUnit.S,
    time_format: str | None = None,
    timezone: str = "UTC",
    start: str | None = None,
    model: str | None = None,
    on_error: str = "fail",
    replace: bool = False,
    allow_any_time: bool = False,
    prefix_block_tokens: int = DEFAULT_PREFIX_BLOCK_TOKENS,
    names: Mapping[str, str] = CLI_NAMES,
) -> IngestOptions:
    """The options of one ingest from what the user typed, each checked, a bad one named as
    ``names`` calls it (the CLI's flags by default)."""
    called = {**CLI_NAMES, **names}
    if on_error not in ("fail", "skip"):
        raise UsageError(f"{called['on_error']} {shown(on_error)}: expected fail or skip")
    if log_format is not None and log_format not in FORMAT_NAMES:
        raise UsageError(
            f"{called['format']} {shown(log_format)}: unknown format; "
            f"known formats: {closest(log_format[:100], FORMAT_NAMES)}"
        )
    if name is not None:
        check_name(name, called["name"])
    check_prefix_block_tokens(prefix_block_tokens, called["prefix_block_tokens"])
    kind = _choice(TimeKind, time_kind, called["time_kind"])
    unit = _choice(TimeUnit, time_unit, called["time_unit"])
    return IngestOptions(
        name=name,
        format=log_format,
        mapping=parse_mapping(mapping),
        time=TimeSpec(
            kind,
            unit,
            check_time_format(time_format, called["time_format"]),
            check_timezone(timezone, called["timezone"]),
        ),
        start=parse_start(start, called["start"]),
        model=model,
        on_error="skip" if on_error == "skip" else "fail",
        replace=replace,
        allow_any_time=allow_any_time,
        prefix_block_tokens=prefix_block_tokens,
    )
