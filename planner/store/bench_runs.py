"""Benchmark runs in the store: a run's summary and metadata in ``bench_runs``, and its requests,
one compact row each, in ``bench_requests``.

A run is saved inside the caller's transaction (``with store.session() as session``): its row
first, then its requests in one bulk insert (SQLite's ``executemany``, PostgreSQL's ``COPY``),
so a failure anywhere, even from ``records`` half-way through, rolls the whole run back.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, delete, func, insert, select
from sqlalchemy.orm import Session

from planner.bench.metrics import RequestRecord
from planner.bench.results import BenchRun, Load
from planner.common.text import closest, printable, shown
from planner.errors import NotFoundError, UsageError
from planner.store.models import BENCH_REQUEST_COLUMNS, BenchRequest, BenchRunRecord

SOURCES = ("measured", "imported-guidellm", "imported-vllm", "engine")
SOURCE_OF_TOOL = {
    "planner bench run": "measured",
    "guidellm": "imported-guidellm",
    "vllm bench serve": "imported-vllm",
}
MAX_NAME_CHARS = 200
MAX_SUGGESTED = 5
MAX_ERROR_CHARS = 500  # a failed request's message, cut: the kind says what it was
MAX_TOKENS = 2**31 - 1  # the token columns are 32-bit integers
ITL_DTYPE = np.dtype("<f4")  # inter-token latencies in ms: float32 is 7 significant digits
# Columns of run_requests, with their pandas dtypes.
REQUEST_DTYPES: dict[str, str] = {
    "request_index": "int64",
    "start_s": "float64",
    "status": "object",
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "ttft_ms": "float64",
    "tpot_ms": "float64",
    "e2e_ms": "float64",
    "error_kind": "object",
    "error": "object",
}


@dataclass(frozen=True)
class StoredRun:
    """A stored run as plain values (no session needed to read it): its columns, its summary
    under vLLM's keys, and ``result``, from which :meth:`bench_run` rebuilds the
    :class:`BenchRun`."""

    id: int
    name: str
    created_at: datetime
    source: str
    target: str | None
    gpu: str | None
    num_gpus: int | None
    tp: int | None
    model: str | None
    precision: str | None
    engine: str | None
    load_kind: str
    load_value: float | None
    input_tokens: float | None
    output_tokens: float | None
    completed: int
    failed: int
    sweep: str | None
    summary: dict[str, Any]
    result: dict[str, Any]
    details: dict[str, Any]
    requests: int  # per-request rows stored

    def bench_run(self) -> BenchRun:
        return BenchRun.from_dict(self.result)

    @property
    def load_label(self) -> str:
        """The load as a person reads it: ``sync``, ``concurrency 8``, ``poisson 2.5/s``."""
        if self.load_value is None or self.load_kind in ("sync", "max"):
            return self.load_kind
        if self.load_kind == "concurrency":
            return f"concurrency {self.load_value:g}"
        return f"{self.load_kind} {self.load_value:g}/s"

    def to_dict(self) -> dict[str, Any]:
        """Everything but the rebuildable ``result`` body, for ``--json`` and downloads."""
        return {
            "id": self.id,
            "name": self.name,
            "created_at": self.created_at.isoformat(),
            "source": self.source,
            "target": self.target,
            "gpu": self.gpu,
            "num_gpus": self.num_gpus,
            "tp": self.tp,
            "model": self.model,
            "precision": self.precision,
            "engine": self.engine,
            "load_kind": self.load_kind,
            "load_value": self.load_value,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "completed": self.completed,
            "failed": self.failed,
            "sweep": self.sweep,
            "requests": self.requests,
            "summary": self.summary,
            "metadata": self.result.get("planner", {}),
            "details": self.details,
        }


def load_kind(load: Load) -> tuple[str, float | None]:
    """The load a run offered as (kind, value): ``sync`` (one client), ``concurrency``
    (clients), ``rate``, ``poisson``, ``gamma`` or ``replay`` (a trace's arrivals; requests per
    second), ``max`` (all at once)."""
    if load.kind == "max":
        return "max", None
    if load.kind == "concurrency":
        return ("sync", 1.0) if load.value == 1 else ("concurrency", load.value)
    arrival = (load.arrival or "constant").lower()
    kinds = {"poisson": "poisson", "gamma": "gamma", "trace": "replay"}
    return kinds.get(arrival, "rate"), load.value


def _finite(value: Any) -> Any:
    """JSON PostgreSQL accepts: NaN and infinities become None, tuples lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _check_name(name: str) -> str:
    text = name.strip()
    if not text:
        raise UsageError("--name: a run's name cannot be empty")
    if len(text) > MAX_NAME_CHARS:
        raise UsageError(
            f"--name {shown(text)}: a run's name has at most {MAX_NAME_CHARS} characters"
        )
    if not text.isprintable():
        raise UsageError(f"--name {shown(text)}: a run's name cannot hold control characters")
    if text.isdigit():
        raise UsageError(
            f"--name {shown(text)}: a name of digits only would read as a run id; add a letter"
        )
    return text


def _taken(session: Session, name: str) -> bool:
    return session.scalar(select(BenchRunRecord.id).where(BenchRunRecord.name == name)) is not None


def _free_name(session: Session, base: str) -> str:
    """``base``, or ``base-2``, ``base-3``, ... the first no run has."""
    if not _taken(session, base):
        return base
    for number in itertools.count(2):
        candidate = f"{base[: MAX_NAME_CHARS - 12]}-{number}"
        if not _taken(session, candidate):
            return candidate
    raise AssertionError("unreachable")  # pragma: no cover


def check_free_name(session: Session, name: str) -> str:
    """``name`` cleaned, when no stored run has it (checked before a run is measured, so a
    clash never costs a measurement); else a :class:`UsageError` suggesting a free one."""
    chosen = _check_name(name)
    if _taken(session, chosen):
        raise UsageError(
            f"--name {shown(chosen)}: a stored run already has that name; choose another "
            f"(e.g. {_free_name(session, chosen)}) or delete it first with "
            f"`planner bench runs delete {printable(chosen)} --yes`"
        )
    return chosen


def default_name(session: Session, run: BenchRun) -> str:
    """A free name from the run's file (``results.json`` run 2 -> ``results-2``), else
    ``run-<next id>``."""
    stem = re.sub(r"\.(json|jsonl)$", "", Path(run.info.source_file or "").name, flags=re.I)
    stem = re.sub(r"\s+", "-", "".join(c for c in stem if c.isprintable())).strip("-")
    if stem and not stem.isdigit():
        base = stem if run.info.benchmark == 0 else f"{stem}-{run.info.benchmark + 1}"
        return _free_name(session, base[:MAX_NAME_CHARS])
    last = session.scalar(select(func.max(BenchRunRecord.id))) or 0
    return _free_name(session, f"run-{last + 1}")


def _request_rows(run_id: int, records: Iterable[RequestRecord]) -> Iterator[tuple[Any, ...]]:
    """Each record as a row of :data:`BENCH_REQUEST_COLUMNS`, checked as it goes: a bad one
    raises, and the caller's transaction takes back what was written before it."""

    def ms(seconds: float | None) -> float | None:
        if seconds is None:
            return None
        value = float(seconds) * 1000.0
        return value if math.isfinite(value) else None

    def tokens(value: int, what: str, record: RequestRecord) -> int:
        if not 0 <= value <= MAX_TOKENS:
            raise UsageError(
                f"request {record.index} of the run: {what} {value!r} is not a token count "
                f"from 0 to {MAX_TOKENS:,}"
            )
        return int(value)

    for record in records:
        itls = np.asarray(record.itl_s, dtype=np.float64) * 1000.0
        error = record.error[:MAX_ERROR_CHARS] if record.error else None
        yield (
            run_id,
            int(record.index),
            float(record.start_s) if math.isfinite(record.start_s) else None,
            record.status,
            tokens(record.input_tokens, "input tokens", record),
            tokens(record.output_tokens, "output tokens", record),
            ms(record.ttft_s),
            ms(record.tpot_s),
            ms(record.e2el_s),
            itls.astype(ITL_DTYPE).tobytes() if itls.size else None,
            record.error_kind,
            error,
        )


def _bulk_insert(conn: Connection, rows: Iterable[tuple[Any, ...]]) -> int:
    """Insert request rows on the backend's fastest path (as :mod:`planner.store.bulk` does for
    request logs); returns how many."""
    counted = 0

    def counting() -> Iterator[tuple[Any, ...]]:
        nonlocal counted
        for row in rows:
            counted += 1
            yield row

    names = ", ".join(BENCH_REQUEST_COLUMNS)
    table = BenchRequest.__tablename__
    raw: Any = conn.connection.driver_connection  # sqlite3 or psycopg connection
    dialect = conn.dialect
    if dialect.name == "sqlite":
        placeholders = ", ".join("?" for _ in BENCH_REQUEST_COLUMNS)
        cursor = raw.cursor()
        try:
            cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({placeholders})", counting())
        finally:
            cursor.close()
    elif dialect.name == "postgresql" and dialect.driver == "psycopg":
        with raw.cursor() as cursor, cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
            for row in counting():
                copy.write_row(row)
    else:
        batch = [dict(zip(BENCH_REQUEST_COLUMNS, row, strict=True)) for row in counting()]
        if batch:
            conn.execute(insert(BenchRequest), batch)
    return counted


def save_run(
    session: Session,
    run: BenchRun,
    records: Iterable[RequestRecord] | None = None,
    *,
    name: str | None = None,
    group: str | None = None,
    source: str | None = None,
    target: str | None = None,
    details: Mapping[str, Any] | None = None,
) -> int:
    """Store ``run`` and its per-request ``records``; returns the run's id.

    ``name`` must be free (a taken one is a :class:`UsageError` suggesting a free one); without
    it the run is named after its file, or ``run-<id>``. ``group`` puts the stages of one sweep
    together. ``source`` is one of :data:`SOURCES` (default: from the tool that measured it),
    ``target`` the URL measured (default: the file it came from), ``details`` any further
    metadata to keep (``planner bench run``'s, for one). Runs in the caller's transaction: on
    an error nothing of the run remains once it rolls back."""
    chosen = check_free_name(session, name) if name is not None else default_name(session, run)
    if group is not None:
        group = _check_name(group)
    info = run.info
    kind = source or SOURCE_OF_TOOL.get(info.tool, "engine")
    if kind not in SOURCES:
        raise UsageError(f"source {shown(kind)}: expected one of {', '.join(SOURCES)}")
    load, value = load_kind(info.load)
    result = _finite(run.to_dict())
    row = BenchRunRecord(
        name=chosen,
        source=kind,
        target=target if target is not None else (info.source_file or None),
        gpu=info.gpu,
        num_gpus=info.gpu_count,
        tp=info.tp,
        model=info.model,
        precision=info.precision,
        engine=info.engine,
        load_kind=load,
        load_value=value,
        input_tokens=_finite(run.input_len),
        output_tokens=_finite(run.output_len),
        completed=run.completed,
        failed=run.failed,
        sweep=group,
        summary=_finite(run.summary()),
        result=result,
        details=_finite(dict(details or {})),
    )
    session.add(row)
    session.flush()  # the run's id, for its requests
    if records is not None:
        _bulk_insert(session.connection(), _request_rows(row.id, records))
    return row.id


def _stored(row: BenchRunRecord, requests: int) -> StoredRun:
    return StoredRun(
        id=row.id,
        name=row.name,
        created_at=row.created_at,
        source=row.source,
        target=row.target,
        gpu=row.gpu,
        num_gpus=row.num_gpus,
        tp=row.tp,
        model=row.model,
        precision=row.precision,
        engine=row.engine,
        load_kind=row.load_kind,
        load_value=row.load_value,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        completed=row.completed,
        failed=row.failed,
        sweep=row.sweep,
        summary=dict(row.summary or {}),
        result=dict(row.result or {}),
        details=dict(row.details or {}),
        requests=requests,
    )


def _request_counts(session: Session, run_ids: list[int] | None = None) -> dict[int, int]:
    query = select(BenchRequest.run_id, func.count()).group_by(BenchRequest.run_id)
    if run_ids is not None:
        query = query.where(BenchRequest.run_id.in_(run_ids))
    return {run_id: count for run_id, count in session.execute(query)}


def list_runs(session: Session, *, group: str | None = None) -> list[StoredRun]:
    """The stored runs, oldest first (only one sweep's with ``group``)."""
    query = select(BenchRunRecord).order_by(BenchRunRecord.created_at, BenchRunRecord.id)
    if group is not None:
        query = query.where(BenchRunRecord.sweep == group)
    rows = list(session.scalars(query))
    counts = _request_counts(session, [r.id for r in rows] if group is not None else None)
    return [_stored(row, counts.get(row.id, 0)) for row in rows]


def _find(session: Session, name_or_id: str | int) -> BenchRunRecord:
    text = str(name_or_id).strip()
    row = session.scalars(select(BenchRunRecord).where(BenchRunRecord.name == text)).first()
    if row is None and text.isdigit():
        row = session.get(BenchRunRecord, int(text))
    if row is not None:
        return row
    known = list(session.scalars(select(BenchRunRecord.name)))
    if not known:
        hint = (
            "; the store has no benchmark runs yet (`planner bench run ...` or "
            "`planner bench import FILE` stores them)"
        )
    else:
        ranked = closest(text[:MAX_NAME_CHARS], known).split(", ")
        names = ", ".join(printable(n, limit=MAX_NAME_CHARS) for n in ranked[:MAX_SUGGESTED])
        more = len(known) - MAX_SUGGESTED
        hint = f"; stored runs: {names}" + (
            f" and {more:,} more (`planner bench runs list`)" if more > 0 else ""
        )
    raise NotFoundError(f"no benchmark run named {shown(text)}{hint}")


def get_run(session: Session, name_or_id: str | int) -> StoredRun:
    """The run of that name (or id); an unknown one is an error naming the closest names."""
    row = _find(session, name_or_id)
    return _stored(row, _request_counts(session, [row.id]).get(row.id, 0))


def run_requests(session: Session, run_id: int, *, itls: bool = False) -> pd.DataFrame:
    """A run's requests in order, one row each (columns :data:`REQUEST_DTYPES`; with ``itls``
    also ``itl_ms``, each request's inter-token latencies as a list of ms)."""
    columns = list(REQUEST_DTYPES) + (["itl_ms"] if itls else [])
    query = (
        select(*(getattr(BenchRequest, c) for c in columns))
        .where(BenchRequest.run_id == run_id)
        .order_by(BenchRequest.request_index, BenchRequest.id)
    )
    frame = pd.DataFrame([tuple(row) for row in session.execute(query)], columns=columns)
    frame = frame.astype(REQUEST_DTYPES)
    for column in ("status", "error_kind", "error"):  # text: None where missing, never NaN
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    if itls:
        frame["itl_ms"] = [
            [] if blob is None else np.frombuffer(blob, dtype=ITL_DTYPE).astype(float).tolist()
            for blob in frame["itl_ms"]
        ]
    return frame


def delete_run(session: Session, name: str | int) -> StoredRun:
    """Delete a run and its requests; returns what was deleted."""
    row = _find(session, name)
    deleted = _stored(row, _request_counts(session, [row.id]).get(row.id, 0))
    session.execute(delete(BenchRequest).where(BenchRequest.run_id == row.id))
    session.delete(row)
    session.flush()
    return deleted
