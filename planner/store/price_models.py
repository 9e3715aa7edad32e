"""Versioned price sheets (migration 0004): one version per snapshot load, refresh or import;
per-token API price sheets (migration 0008) the same way, in tables of their own.

A version holds every price it brought in; a failed refresh is a version too (status
``failed``, no prices, the error kept), so the history says what was tried and the last good
prices stay in force. What a price *is* lives in ``pricing.model.PricePoint``; these rows mirror
its fields, keyed by version.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from planner.store.models import Base, BigIntegerPK, UTCDateTime, utc_now
from pricing.entries import STATUS_OK

SOURCE_KINDS = ("snapshot", "aws", "gcp", "azure", "user")
STATUS_FAILED = "failed"


class PriceSheetVersion(Base):
    """One load of prices: the bundled snapshot, a provider refresh or a user's sheet."""

    __tablename__ = "price_sheet_versions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source_kind: Mapped[str] = mapped_column(String(16))  # one of SOURCE_KINDS
    label: Mapped[str] = mapped_column(String(200))
    # Where the prices came from: a file path, or the loader call (never credentials).
    source_ref: Mapped[str] = mapped_column(Text, default="")
    sha256: Mapped[str | None] = mapped_column(String(64))  # of the file, for files
    fetched_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
    row_count: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(16), default=STATUS_OK)  # ok | failed
    error: Mapped[str | None] = mapped_column(Text)

    points: Mapped[list[PricePointRow]] = relationship(
        back_populates="version", cascade="all, delete-orphan", passive_deletes=True
    )

    def __repr__(self) -> str:
        return f"PriceSheetVersion(id={self.id}, {self.source_kind}, {self.status})"


class PricePointRow(Base):
    """One price of one version (the fields of ``pricing.model.PricePoint``)."""

    __tablename__ = "price_points"
    __table_args__ = (
        # One price per key within a version (the key of PricePoint.key()).
        UniqueConstraint(
            "version_id",
            "provider",
            "region",
            "instance_type",
            "purchase_option",
            "payment",
            "plan_kind",
            name="uq_price_points_version_key",
        ),
    )

    id: Mapped[int] = mapped_column(BigIntegerPK, primary_key=True)
    version_id: Mapped[int] = mapped_column(
        ForeignKey("price_sheet_versions.id", ondelete="CASCADE")
    )
    provider: Mapped[str] = mapped_column(String(16))
    region: Mapped[str] = mapped_column(String(64))
    instance_type: Mapped[str] = mapped_column(String(100))
    gpu_model: Mapped[str] = mapped_column(String(64))
    gpu_count: Mapped[int] = mapped_column(Integer)
    gpu_memory_gb: Mapped[float | None] = mapped_column(Float)
    vcpus: Mapped[int | None] = mapped_column(Integer)
    ram_gb: Mapped[float | None] = mapped_column(Float)
    purchase_option: Mapped[str] = mapped_column(String(32))
    usd_per_hour: Mapped[float] = mapped_column(Float)
    upfront_usd: Mapped[float] = mapped_column(Float, default=0.0)
    payment: Mapped[str] = mapped_column(String(32), default="")
    plan_kind: Mapped[str] = mapped_column(String(32), default="")
    currency: Mapped[str] = mapped_column(String(3), default="USD")
    effective_date: Mapped[str] = mapped_column(String(10))  # ISO date
    source: Mapped[str] = mapped_column(Text)
    fetched_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    version: Mapped[PriceSheetVersion] = relationship(back_populates="points")


API_SOURCE_KINDS = ("snapshot", "user")


class ApiPriceSheetVersion(Base):
    """One load of per-token API prices (migration 0008): the bundled snapshot or a user's
    sheet. Kept apart from the instance sheets: their prices, keys and history differ."""

    __tablename__ = "api_price_sheet_versions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source_kind: Mapped[str] = mapped_column(String(16))  # one of API_SOURCE_KINDS
    label: Mapped[str] = mapped_column(String(200))
    source_ref: Mapped[str] = mapped_column(Text, default="")  # a file path or "upload NAME"
    sha256: Mapped[str | None] = mapped_column(String(64))
    fetched_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
    row_count: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(16), default=STATUS_OK)

    prices: Mapped[list[ApiPriceRow]] = relationship(
        back_populates="version", cascade="all, delete-orphan", passive_deletes=True
    )

    def __repr__(self) -> str:
        return f"ApiPriceSheetVersion(id={self.id}, {self.source_kind}, {self.status})"


class ApiPriceRow(Base):
    """One per-token price of one version (the fields of ``pricing.api.TokenPrice``)."""

    __tablename__ = "api_prices"
    __table_args__ = (
        UniqueConstraint("version_id", "provider", "offer", name="uq_api_prices_version_key"),
    )

    id: Mapped[int] = mapped_column(BigIntegerPK, primary_key=True)
    version_id: Mapped[int] = mapped_column(
        ForeignKey("api_price_sheet_versions.id", ondelete="CASCADE")
    )
    provider: Mapped[str] = mapped_column(String(32))
    offer: Mapped[str] = mapped_column(String(200))
    model: Mapped[str] = mapped_column(String(100))
    catalog_model: Mapped[str | None] = mapped_column(String(64))
    input_usd_per_mtok: Mapped[float] = mapped_column(Float)
    output_usd_per_mtok: Mapped[float] = mapped_column(Float)
    cached_input_usd_per_mtok: Mapped[float | None] = mapped_column(Float)
    batch_discount: Mapped[float | None] = mapped_column(Float)
    rpm: Mapped[int | None] = mapped_column(BigInteger)
    tpm: Mapped[int | None] = mapped_column(BigInteger)
    context_tokens: Mapped[int | None] = mapped_column(BigInteger)
    currency: Mapped[str] = mapped_column(String(3), default="USD")
    source_url: Mapped[str] = mapped_column(Text)
    source_date: Mapped[str] = mapped_column(String(10))  # ISO date
    provenance: Mapped[str] = mapped_column(Text, default="")
    notes: Mapped[str] = mapped_column(Text, default="")

    version: Mapped[ApiPriceSheetVersion] = relationship(back_populates="prices")
