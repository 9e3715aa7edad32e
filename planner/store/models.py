"""The store's tables, as typed SQLAlchemy 2.x ORM models.

Times of individual requests are integers: microseconds since the Unix epoch, UTC. That is exact,
sorts and buckets with integer arithmetic in any database, and inserts fast. Coarser times
(when a dataset was created, the span it covers) are timezone-aware ``datetime`` values.

Every schema change is an Alembic migration under ``migrations/versions``; a test checks that
these models and the migrations agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Stable constraint names, so migrations can refer to them on every database.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only auto-increments a column declared exactly INTEGER PRIMARY KEY.
BigIntegerPK = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite has no time zones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; planner stores UTC-aware times")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utc_now() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Dataset(Base):
    """One ingested request log."""

    __tablename__ = "datasets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    source_path: Mapped[str] = mapped_column(Text)
    format: Mapped[str] = mapped_column(String(40))
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    row_count: Mapped[int] = mapped_column(BigInteger, default=0)
    skipped_rows: Mapped[int] = mapped_column(BigInteger, default=0)
    start_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    end_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # How the file was read (format options, column mapping), so an ingest can be reproduced.
    options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)

    requests: Mapped[list[Request]] = relationship(
        back_populates="dataset", cascade="all, delete-orphan", passive_deletes=True
    )

    def __repr__(self) -> str:
        return f"Dataset(name={self.name!r}, rows={self.row_count})"


class Request(Base):
    """One request of a log. Optional columns stay NULL where the log does not have them."""

    __tablename__ = "requests"
    __table_args__ = (Index("ix_requests_dataset_arrival", "dataset_id", "arrival_us"),)

    id: Mapped[int] = mapped_column(BigIntegerPK, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    arrival_us: Mapped[int] = mapped_column(BigInteger)  # microseconds since the epoch, UTC
    model: Mapped[str | None] = mapped_column(String(200))
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    cached_tokens: Mapped[int | None] = mapped_column(Integer)
    # Prefix-cache block ids (e.g. Mooncake's hash_ids), space-separated integers.
    prefix_block_ids: Mapped[str | None] = mapped_column(Text)
    priority_class: Mapped[str | None] = mapped_column(String(64))
    ttft_ms: Mapped[float | None] = mapped_column(Float)  # observed time to first token
    e2e_ms: Mapped[float | None] = mapped_column(Float)  # observed end-to-end latency
    status: Mapped[str | None] = mapped_column(String(32))

    dataset: Mapped[Dataset] = relationship(back_populates="requests")


# The request columns an ingest may fill, in insert order (``id`` comes from the database).
REQUEST_COLUMNS: tuple[str, ...] = (
    "arrival_us",
    "model",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "prefix_block_ids",
    "priority_class",
    "ttft_ms",
    "e2e_ms",
    "status",
)


class CalibrationProfile(Base):
    """A fitted latency-model profile (``planner calibrate``), with the errors it was fitted to."""

    __tablename__ = "calibration_profiles"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    engine: Mapped[str] = mapped_column(String(64))
    gpu: Mapped[str | None] = mapped_column(String(64))  # None: any GPU of the engine
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    report: Mapped[dict[str, Any]] = mapped_column(JSON)  # errors before/after, per point
    sources: Mapped[list[str]] = mapped_column(JSON)  # measurement files it was fitted on
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)


class BenchRunRecord(Base):
    """One stored benchmark run (``planner bench run`` or an imported result): what was
    measured, on what, under which load, and its summary under vLLM's key names."""

    __tablename__ = "bench_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
    source: Mapped[str] = mapped_column(String(32))  # measured, imported-guidellm, ...
    target: Mapped[str | None] = mapped_column(Text)  # the URL measured, or the file imported
    gpu: Mapped[str | None] = mapped_column(String(200))  # the hardware as given, not resolved
    num_gpus: Mapped[int | None] = mapped_column(Integer)
    tp: Mapped[int | None] = mapped_column(Integer)
    model: Mapped[str | None] = mapped_column(String(200))
    precision: Mapped[str | None] = mapped_column(String(64))
    engine: Mapped[str | None] = mapped_column(String(64))
    load_kind: Mapped[str] = mapped_column(String(32))  # sync, concurrency, poisson, replay...
    load_value: Mapped[float | None] = mapped_column(Float)  # clients or requests/s
    input_tokens: Mapped[float | None] = mapped_column(Float)  # mean over completed requests
    output_tokens: Mapped[float | None] = mapped_column(Float)
    completed: Mapped[int] = mapped_column(Integer)
    failed: Mapped[int] = mapped_column(Integer)
    # The stages of one sweep share a group name, so they are shown together.
    sweep: Mapped[str | None] = mapped_column(String(200), index=True)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON)  # BenchRun.summary(): vLLM's keys
    result: Mapped[dict[str, Any]] = mapped_column(JSON)  # BenchRun.to_dict(), to rebuild it
    details: Mapped[dict[str, Any]] = mapped_column(JSON)  # what the caller adds (bench run's)

    requests: Mapped[list[BenchRequest]] = relationship(
        back_populates="run", cascade="all, delete-orphan", passive_deletes=True
    )


class BenchRequest(Base):
    """One request of a stored benchmark run. Inter-token latencies are packed as
    little-endian float32 milliseconds: a few bytes each, for runs of thousands of requests."""

    __tablename__ = "bench_requests"
    __table_args__ = (Index("ix_bench_requests_run_index", "run_id", "request_index"),)

    id: Mapped[int] = mapped_column(BigIntegerPK, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("bench_runs.id", ondelete="CASCADE"))
    request_index: Mapped[int] = mapped_column(Integer)  # order within the run
    start_s: Mapped[float | None] = mapped_column(Float)  # from the start of the measured phase
    status: Mapped[str] = mapped_column(String(16))  # ok, failed, incomplete
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    ttft_ms: Mapped[float | None] = mapped_column(Float)
    tpot_ms: Mapped[float | None] = mapped_column(Float)
    e2e_ms: Mapped[float | None] = mapped_column(Float)
    itl_ms: Mapped[bytes | None] = mapped_column(LargeBinary)
    error_kind: Mapped[str | None] = mapped_column(String(64))  # http_500, timeout, ...
    error: Mapped[str | None] = mapped_column(Text)  # what happened, for a person

    run: Mapped[BenchRunRecord] = relationship(back_populates="requests")


# The bench request columns a save fills, in insert order (``id`` comes from the database).
BENCH_REQUEST_COLUMNS: tuple[str, ...] = (
    "run_id",
    "request_index",
    "start_s",
    "status",
    "input_tokens",
    "output_tokens",
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    "itl_ms",
    "error_kind",
    "error",
)
