"""Log formats: which column of a file holds which request field, and how its times are written.

A format maps planner's request fields (``arrival``, ``input_tokens``, ...) to a file's columns.
The built-in formats cover the public traces; ``generic`` is built from ``--map`` options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from planner.common.text import closest
from planner.errors import UsageError
from planner.store.models import REQUEST_COLUMNS

# Request fields are the store's request columns, with ``arrival`` for ``arrival_us``.
REQUIRED_FIELDS: tuple[str, ...] = ("arrival", "input_tokens", "output_tokens")
OPTIONAL_FIELDS: tuple[str, ...] = tuple(
    c for c in REQUEST_COLUMNS if c not in ("arrival_us", *REQUIRED_FIELDS)
)
FIELDS: tuple[str, ...] = REQUIRED_FIELDS + OPTIONAL_FIELDS


class TimeKind(StrEnum):
    DATETIME = "datetime"  # calendar date-times, text (ISO 8601 or a strptime format)
    RELATIVE = "relative"  # numbers counted from a start time given with --start
    EPOCH = "epoch"  # numbers counted from the Unix epoch


class TimeUnit(StrEnum):
    S = "s"
    MS = "ms"
    US = "us"
    NS = "ns"

    @property
    def microseconds(self) -> float:
        return {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3}[self.value]


@dataclass(frozen=True)
class TimeSpec:
    kind: TimeKind = TimeKind.DATETIME
    unit: TimeUnit = TimeUnit.S
    format: str | None = None  # strptime pattern; None means ISO 8601
    timezone: str = "UTC"  # zone of date-times written without an offset

    def expected(self) -> str:
        if self.kind is TimeKind.DATETIME:
            shape = (
                f"format {self.format!r}"
                if self.format
                else "ISO 8601, e.g. 2023-11-16 18:15:46.68"
            )
            return f"a date-time ({shape})"
        origin = "the start time" if self.kind is TimeKind.RELATIVE else "the Unix epoch"
        return f"a number of {self.unit.value} since {origin}"


@dataclass(frozen=True)
class LogFormat:
    name: str
    columns: Mapping[str, str]  # request field -> file column
    time: TimeSpec
    description: str = ""
    # Fields whose column a file of this format may lack (left NULL then).
    optional: frozenset[str] = field(default_factory=frozenset)

    @property
    def needs_start(self) -> bool:
        return self.time.kind is TimeKind.RELATIVE

    def required_columns(self) -> list[str]:
        return [col for f, col in self.columns.items() if f not in self.optional]

    def resolve(self, file_columns: Sequence[str]) -> dict[str, str]:
        """The field -> column map for a file, leaving out optional columns it lacks."""
        present = set(file_columns)
        return {f: c for f, c in self.columns.items() if c in present or f not in self.optional}


AZURE_LLM = LogFormat(
    name="azure-llm",
    columns={
        "arrival": "TIMESTAMP",
        "input_tokens": "ContextTokens",
        "output_tokens": "GeneratedTokens",
    },
    time=TimeSpec(TimeKind.DATETIME),
    description="Azure LLM inference trace (Azure/AzurePublicDataset, 2023/2024)",
)
MOONCAKE = LogFormat(
    name="mooncake",
    columns={
        "arrival": "timestamp",
        "input_tokens": "input_length",
        "output_tokens": "output_length",
        "prefix_block_ids": "hash_ids",
    },
    time=TimeSpec(TimeKind.RELATIVE, TimeUnit.MS),
    description="Mooncake trace (kvcache-ai/Mooncake): JSON Lines, ms since start, prefix blocks",
    optional=frozenset({"prefix_block_ids"}),
)
BURSTGPT = LogFormat(
    name="burstgpt",
    columns={
        "arrival": "Timestamp",
        "model": "Model",
        "input_tokens": "Request tokens",
        "output_tokens": "Response tokens",
        "priority_class": "Log Type",
    },
    time=TimeSpec(TimeKind.RELATIVE, TimeUnit.S),
    description="BurstGPT trace: s since start; its Log Type becomes the request's class",
    optional=frozenset({"model", "priority_class"}),
)
BUILTIN_FORMATS: dict[str, LogFormat] = {f.name: f for f in (AZURE_LLM, MOONCAKE, BURSTGPT)}
FORMAT_NAMES: tuple[str, ...] = (*BUILTIN_FORMATS, "generic")


def builtin_format(name: str) -> LogFormat:
    try:
        return BUILTIN_FORMATS[name]
    except KeyError:
        raise UsageError(
            f"unknown format {name!r}; known formats: {closest(name, FORMAT_NAMES)}"
        ) from None


def detect_format(file_columns: Sequence[str]) -> LogFormat | None:
    """The one built-in format whose required columns the file has, or None."""
    present = set(file_columns)
    matches = [f for f in BUILTIN_FORMATS.values() if set(f.required_columns()) <= present]
    return matches[0] if len(matches) == 1 else None


def generic_format(mapping: Mapping[str, str], time: TimeSpec) -> LogFormat:
    """A format from ``--map FIELD=COLUMN`` options."""
    unknown = [f for f in mapping if f not in FIELDS]
    if unknown:
        raise UsageError(f"--map: unknown field {unknown[0]!r}; fields are: {', '.join(FIELDS)}")
    missing = [f for f in REQUIRED_FIELDS if f not in mapping]
    if missing:
        raise UsageError(
            "--format generic needs a column for each of "
            f"{', '.join(REQUIRED_FIELDS)}; missing: "
            + ", ".join(f"--map {f}=COLUMN" for f in missing)
        )
    return LogFormat(name="generic", columns=dict(mapping), time=time, description="mapped columns")


def parse_mapping(items: Sequence[str]) -> dict[str, str]:
    """``["arrival=ts", ...]`` -> ``{"arrival": "ts", ...}``."""
    mapping: dict[str, str] = {}
    for item in items:
        field_name, sep, column = item.partition("=")
        if not sep or not field_name.strip() or not column.strip():
            raise UsageError(f"--map {item!r}: expected FIELD=COLUMN, e.g. --map arrival=timestamp")
        if field_name.strip() in mapping:
            raise UsageError(f"--map: field {field_name.strip()!r} is mapped twice")
        mapping[field_name.strip()] = column.strip()
    return mapping
