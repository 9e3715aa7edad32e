"""``ingest_file``: a request log into the store, in one transaction, or not at all."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from planner.common.text import shown
from planner.errors import InputFileError, PlannerError, RowProblem, UsageError
from planner.ingest.formats import (
    BUILTIN_FORMATS,
    LogFormat,
    TimeSpec,
    builtin_format,
    detect_format,
    generic_format,
)
from planner.ingest.normalize import (
    ARRIVAL_MAX_US,
    ARRIVAL_MIN_US,
    ARRIVAL_RANGE,
    EPOCH,
    PROBLEM_EXAMPLES,
    TEXT_LIMITS,
    TimeForm,
    normalize_chunk,
    plausible_window,
)
from planner.ingest.readers import (
    SourceFile,
    estimate_rows,
    inspect_file,
    iter_chunks,
    read_columns,
)
from planner.store.bulk import insert_requests
from planner.store.db import Store, StoreConflictError
from planner.store.models import Dataset

OnError = Literal["fail", "skip"]
Progress = Callable[[int, int | None], None]  # (rows done, estimated total)
MAX_NAME_CHARS = 200  # the store's datasets.name column
KNOWN_SUFFIXES = (".gz", ".csv", ".tsv", ".txt", ".jsonl", ".ndjson", ".json", ".parquet", ".pq")
UPLOADED = "uploaded"  # how the stored source of an uploaded log reads: "NAME (uploaded)"
# Tokens each prefix block id of a log stands for, unless the log says otherwise
# (--prefix-block-tokens): Mooncake's hash_ids are 512-token blocks
# (planner.simulate.workload.MOONCAKE_BLOCK_TOKENS, pinned equal by a test).
DEFAULT_PREFIX_BLOCK_TOKENS = 512
MAX_PREFIX_BLOCK_TOKENS = 1 << 20


@dataclass(frozen=True)
class IngestOptions:
    name: str | None = None
    format: str | None = None  # a built-in format or "generic"; None detects from the header
    mapping: dict[str, str] = field(default_factory=dict)  # generic: field -> column
    time: TimeSpec = field(default_factory=TimeSpec)  # generic only; built-ins carry their own
    start: datetime | None = None  # for logs with times relative to their start
    model: str | None = None  # model name for rows that have none
    on_error: OnError = "fail"
    replace: bool = False
    # arrival times before 1970 or more than a year from now are refused unless this is set
    allow_any_time: bool = False
    # tokens each prefix block id stands for (Mooncake's hash_ids: 512), kept with the dataset
    prefix_block_tokens: int = DEFAULT_PREFIX_BLOCK_TOKENS


@dataclass
class IngestResult:
    status: Literal["ingested", "replaced", "already-present"]
    dataset: str
    path: str
    format: str
    rows: int
    skipped_rows: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    out_of_order_rows: int = 0
    start_at: datetime | None = None
    end_at: datetime | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # how the file was read, for the user

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("start_at", "end_at"):
            data[key] = data[key].isoformat() if data[key] else None
        data["rows_per_second"] = round(self.rows / self.seconds) if self.seconds > 0 else None
        return data


def default_dataset_name(path: Path) -> str:
    name = path.name
    while True:
        stem, dot, ext = name.rpartition(".")
        if not dot or f".{ext.lower()}" not in KNOWN_SUFFIXES:
            return name
        name = stem


def uploaded_source(file_name: str) -> str:
    """The source a dataset from an upload records (there is no path to point at)."""
    return f"{file_name} ({UPLOADED})"


def check_name(name: str, what: str = "--name") -> str:
    """A dataset name the store keeps the same on every backend: not empty, at most 200
    characters, no control characters (newlines, ANSI escapes, NUL)."""
    if not name.strip():
        raise UsageError(f"{what}: the dataset name is empty")
    if len(name) > MAX_NAME_CHARS:
        raise UsageError(
            f"{what} {shown(name)}: a dataset name has at most {MAX_NAME_CHARS} characters "
            f"(this one has {len(name):,})"
        )
    if not name.isprintable():
        raise UsageError(
            f"{what} {shown(name)}: a dataset name cannot hold control characters "
            "(newlines, tabs, escape sequences)"
        )
    return name


def check_model(model: str | None) -> str | None:
    """The --model value, checked like a model name read from a log."""
    if model is None:
        return None
    limit = TEXT_LIMITS["model"]
    if not model.strip() or "\x00" in model or len(model.strip()) > limit:
        raise UsageError(
            f"--model {shown(model)}: expected a model name of 1 to {limit} characters without NUL"
        )
    return model.strip()


def sha256_of(path: Path, block: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def choose_format(path: Path, columns: Sequence[str], options: IngestOptions) -> LogFormat:
    if options.format == "generic" or (options.format is None and options.mapping):
        return generic_format(options.mapping, options.time)
    if options.mapping:
        raise UsageError("--map applies to --format generic only")
    if options.format is not None:
        return builtin_format(options.format)
    detected = detect_format(columns)
    if detected is None:
        listed = ", ".join(shown(c, 40) for c in columns[:20])
        if len(columns) > 20:
            listed += f", ... ({len(columns)} columns)"
        hint = _delimiter_hint(columns)
        raise InputFileError(
            path,
            f"cannot tell the log format from its columns ({listed}); {hint}"
            f"pass --format ({', '.join(BUILTIN_FORMATS)}) or --format generic with "
            "--map arrival=COLUMN --map input_tokens=COLUMN --map output_tokens=COLUMN",
        )
    return detected


def _delimiter_hint(columns: Sequence[str]) -> str:
    """A note when one header 'column' looks like several run together."""
    if len(columns) == 1:
        for delimiter, label in ((":", "':'"), (" ", "space")):
            if columns[0].count(delimiter) >= 2:
                return (
                    f"the header looks {label}-delimited; planner reads CSV separated by commas, "
                    "tabs, ';' or '|': "
                )
    return ""


def _check_columns(path: Path, fields: dict[str, str], columns: Sequence[str]) -> None:
    """Every column read is in the header exactly once."""
    for column in dict.fromkeys(fields.values()):
        places = [i + 1 for i, c in enumerate(columns) if c == column]
        if len(places) > 1:
            raise InputFileError(
                path,
                f"column {shown(column)} appears {len(places)} times in the header "
                f"(columns {', '.join(map(str, places))}); planner cannot tell which to read: "
                "rename one, or map another column with --format generic --map",
            )


def _utc_micros(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    micros = (moment - EPOCH) // timedelta(microseconds=1)
    if not ARRIVAL_MIN_US <= micros < ARRIVAL_MAX_US:
        raise UsageError(f"--start {moment.isoformat()}: out of range; {ARRIVAL_RANGE}")
    return int(micros)


def _from_micros(micros: int) -> datetime:
    return pd.Timestamp(micros, unit="us", tz="UTC").to_pydatetime()


@dataclass(frozen=True)
class PreparedLog:
    """A log whose header, options and name are checked, ready to be stored (nothing of the
    store is touched yet)."""

    path: Path
    source: SourceFile
    fmt: LogFormat
    fields: dict[str, str]
    start_us: int | None
    name: str
    digest: str
    options: IngestOptions
    source_path: str  # what the dataset records as where it came from
    began: float  # time.perf_counter() when the ingest began


def prepare_log(
    path: Path | str, options: IngestOptions | None = None, *, source_path: str | None = None
) -> PreparedLog:
    """Check the log at ``path`` against ``options`` before any store is opened: its format
    and columns, --start where its times are relative, the dataset's name and the model; and
    hash it. ``source_path`` is what the dataset records (default: the resolved path)."""
    options = options or IngestOptions()
    path = Path(path)
    began = time.perf_counter()
    source = inspect_file(path)
    columns = read_columns(source)
    fmt = choose_format(path, columns, options)
    fields = fmt.resolve(columns)
    missing = [c for f, c in fields.items() if c not in columns]
    if missing:
        listed = ", ".join(shown(c, 40) for c in columns[:20])
        raise InputFileError(
            path,
            f"missing required column {shown(missing[0])} for format {fmt.name} "
            f"(it reads {', '.join(shown(c, 40) for c in fmt.columns.values())}; "
            f"the file has {listed})",
        )
    _check_columns(path, fields, columns)
    if fmt.needs_start and options.start is None:
        raise UsageError(
            f"format {fmt.name} gives times relative to the start of the log: "
            "pass --start, e.g. --start 2024-05-01T00:00:00Z"
        )
    start_us = _utc_micros(options.start) if options.start else None
    if options.name is not None:
        name = check_name(options.name)
    else:
        name = check_name(
            default_dataset_name(path), "dataset name (from the file name; choose one with --name)"
        )
    options = replace(options, model=check_model(options.model))
    digest = sha256_of(path)
    recorded = source_path if source_path is not None else str(path.resolve())
    return PreparedLog(path, source, fmt, fields, start_us, name, digest, options, recorded, began)


def store_log(
    sessions: Callable[[], AbstractContextManager[Session]],
    log: PreparedLog,
    progress: Progress | None = None,
) -> IngestResult:
    """Store a prepared log as a dataset in one session of ``sessions``: either the whole
    dataset lands, or nothing does."""
    try:
        with sessions() as session:
            result = _store(session, log, progress)
    except (IntegrityError, StoreConflictError) as exc:
        if not _names_clash(sessions, log.name, exc):
            raise
        raise StoreConflictError(
            f"dataset {shown(log.name)} was created by another process while this ingest ran; "
            "nothing of this ingest was stored; rerun with --replace to replace it, or with "
            "--name to choose another name"
        ) from exc
    if result.status != "already-present":
        result.seconds = time.perf_counter() - log.began
    return result


def ingest_file(
    store: Store,
    path: Path | str,
    options: IngestOptions | None = None,
    progress: Progress | None = None,
) -> IngestResult:
    """Ingest the log at ``path`` into ``store``. Either the whole dataset lands, or nothing
    does. (The commands and pages go through :mod:`planner.usecases.ingest`.)"""
    return store_log(store.session, prepare_log(path, options), progress)


def _names_clash(
    sessions: Callable[[], AbstractContextManager[Session]], name: str, exc: Exception
) -> bool:
    """Whether ``exc`` is the unique dataset name, taken by a concurrent ingest."""
    cause = exc.orig if isinstance(exc, IntegrityError) else exc
    text = str(cause).lower()
    if ("datasets.name" in text) or ("uq_datasets_name" in text):
        return True
    try:
        with sessions() as session:
            return (
                session.scalars(select(Dataset.id).where(Dataset.name == name)).first() is not None
            )
    except PlannerError:  # the store is unreachable now: not a clash to explain
        return False


def _store(session: Session, log: PreparedLog, progress: Progress | None) -> IngestResult:
    same_file = session.scalars(select(Dataset).where(Dataset.sha256 == log.digest)).first()
    same_name = session.scalars(select(Dataset).where(Dataset.name == log.name)).first()
    if same_file is not None and not log.options.replace:
        return IngestResult(
            "already-present",
            same_file.name,
            str(log.path),
            same_file.format,
            same_file.row_count,
            start_at=same_file.start_at,
            end_at=same_file.end_at,
            notes=_block_size_note(same_file, log.options),
        )
    if same_name is not None and not log.options.replace:
        raise UsageError(
            f"a dataset named {log.name!r} already exists (from {same_name.source_path}); "
            "pass --replace to replace it, or --name to choose another name"
        )
    if same_name is not None:
        session.delete(same_name)
        session.flush()

    dataset = Dataset(
        name=log.name,
        source_path=log.source_path,
        format=log.fmt.name,
        sha256=log.digest,
        size_bytes=log.source.size_bytes,
        row_count=0,
        skipped_rows=0,
        options=_recorded_options(log.fmt, log.fields, log.options),
    )
    session.add(dataset)
    session.flush()
    result = _load_rows(
        session, dataset, log.source, log.fmt, log.fields, log.start_us, log.options, progress
    )
    result.status = "replaced" if same_name is not None else "ingested"
    return result


def _block_size_note(stored: Dataset, options: IngestOptions) -> list[str]:
    """A stored log whose prefix blocks were taken at another size than asked now."""
    kept = (stored.options or {}).get("prefix_block_tokens", DEFAULT_PREFIX_BLOCK_TOKENS)
    if kept == options.prefix_block_tokens:
        return []
    return [
        f"dataset {stored.name!r} takes each prefix block id as {kept} tokens, not the "
        f"{options.prefix_block_tokens} asked now; add --replace to ingest it again with them"
    ]


def _recorded_options(
    fmt: LogFormat, fields: dict[str, str], options: IngestOptions
) -> dict[str, Any]:
    return {
        "columns": fields,
        "time": {k: str(v) if v is not None else None for k, v in asdict(fmt.time).items()},
        "start": options.start.isoformat() if options.start else None,
        "model": options.model,
        "on_error": options.on_error,
        "allow_any_time": options.allow_any_time,
        "prefix_block_tokens": options.prefix_block_tokens,
    }


def _load_rows(
    session: Session,
    dataset: Dataset,
    source: Any,
    fmt: LogFormat,
    fields: dict[str, str],
    start_us: int | None,
    options: IngestOptions,
    progress: Progress | None,
) -> IngestResult:
    conn = session.connection()
    estimate = estimate_rows(source)
    rows = skipped = out_of_order = 0
    examples: list[RowProblem] = []
    first_us: int | None = None
    last_us: int | None = None
    previous_us: int | None = None
    window = None if options.allow_any_time else plausible_window()
    forms = _TimeForms(source.path, fields["arrival"], fmt)
    for raw in iter_chunks(source, list(dict.fromkeys(fields.values()))):
        chunk = normalize_chunk(
            raw, fmt, fields, start_us=start_us, default_model=options.model, window=window
        )
        problems = sorted(raw.problems + chunk.problems, key=lambda p: p.line or p.row or 0)
        if problems and options.on_error == "fail":
            raise InputFileError(source.path, problems[0])
        forms.add(chunk.with_offset, chunk.without_offset)
        skipped += len(raw.problems) + chunk.bad_rows
        examples.extend(problems[: PROBLEM_EXAMPLES - len(examples)])
        if chunk.num_rows:
            arrivals = chunk.columns["arrival_us"]
            out_of_order += int(np.count_nonzero(np.diff(arrivals) < 0))
            if previous_us is not None and arrivals[0] < previous_us:
                out_of_order += 1
            previous_us = int(arrivals[-1])
            insert_requests(conn, dataset.id, chunk.columns, chunk.num_rows)
            rows += chunk.num_rows
            assert chunk.min_arrival_us is not None and chunk.max_arrival_us is not None
            first_us = (
                chunk.min_arrival_us if first_us is None else min(first_us, chunk.min_arrival_us)
            )
            last_us = (
                chunk.max_arrival_us if last_us is None else max(last_us, chunk.max_arrival_us)
            )
        if progress is not None:
            progress(rows + skipped, estimate)
    if rows == 0:
        if skipped:
            raise InputFileError(
                source.path,
                f"every row was bad ({skipped} skipped), nothing to ingest; first: "
                + "; ".join(p.describe() for p in examples[:3]),
            )
        raise InputFileError(source.path, "the file has a header but no data rows")
    assert first_us is not None and last_us is not None
    forms.check()
    dataset.row_count = rows
    dataset.skipped_rows = skipped
    dataset.start_at = _from_micros(first_us)
    dataset.end_at = _from_micros(last_us)
    return IngestResult(
        status="ingested",
        dataset=dataset.name,
        path=str(source.path),
        format=fmt.name,
        rows=rows,
        skipped_rows=skipped,
        skipped_examples=[p.describe() for p in examples],
        out_of_order_rows=out_of_order,
        start_at=dataset.start_at,
        end_at=dataset.end_at,
        notes=forms.notes(),
    )


class _TimeForms:
    """Whether a log writes its date-times with a UTC offset, without one, or both ways.

    Both ways in one file is refused when the naive ones would be read as UTC (the default): a
    log that names its offset on some rows likely means local time on the others. With a
    --timezone other than UTC, the naive ones are read in that zone and the result says so.
    """

    def __init__(self, path: Path, column: str, fmt: LogFormat):
        self.path, self.column, self.time = path, column, fmt.time
        self.generic = fmt.name == "generic"
        self.with_offset: TimeForm | None = None
        self.without_offset: TimeForm | None = None
        self.naive = 0

    def add(self, with_offset: TimeForm | None, without_offset: TimeForm | None) -> None:
        self.with_offset = self.with_offset or with_offset
        self.without_offset = self.without_offset or without_offset
        self.naive += without_offset.count if without_offset else 0
        self.check()

    def _both(self) -> str:
        assert self.with_offset is not None and self.without_offset is not None
        first, other = sorted((self.with_offset, self.without_offset), key=lambda f: f.row)
        return (
            f"row {first.row} has {first.value} "
            f"({'with' if first is self.with_offset else 'without'} a UTC offset), "
            f"row {other.row} has {other.value} "
            f"({'with' if other is self.with_offset else 'without'} one)"
        )

    def check(self) -> None:
        if self.with_offset is None or self.without_offset is None or self.time.timezone != "UTC":
            return
        later = max((self.with_offset, self.without_offset), key=lambda f: f.row)
        raise InputFileError(
            self.path,
            RowProblem(
                later.row,
                self.column,
                f"date-times written both with and without a UTC offset in one file: "
                f"{self._both()}; planner will not guess the zone of those without one: write "
                "every time with its offset (e.g. +00:00 or Z), or give the zone of those "
                "without one with --timezone (e.g. --timezone Europe/Berlin"
                + ("" if self.generic else "; it applies to --format generic with --map")
                + ")",
                later.line,
            ),
        )

    def notes(self) -> list[str]:
        if self.with_offset is None or self.without_offset is None:
            return []
        these = "date-time has" if self.naive == 1 else "date-times have"
        return [
            f"{self.naive:,} {these} no UTC offset in column {shown(self.column)}: read in "
            f"{self.time.timezone} (--timezone); the others carry their own offset "
            f"({self._both()})"
        ]


__all__ = [
    "IngestOptions",
    "IngestResult",
    "PreparedLog",
    "ingest_file",
    "prepare_log",
    "store_log",
]
