"""Stored forecasts (migration 0003): the settings and backtest scores of each forecast, and per
hour its point forecast, 80%/95% bands and the demand curve at the planning quantile."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from planner.store.models import Base, BigIntegerPK, UTCDateTime, utc_now


class ForecastRun(Base):
    """One forecast: what was forecast, from what, how, and how well it backtested."""

    __tablename__ = "forecasts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The dataset it was fitted on; NULL for a series file or once the dataset is deleted
    # (the forecast stays: ``source`` still names where it came from).
    dataset_id: Mapped[int | None] = mapped_column(
        ForeignKey("datasets.id", ondelete="SET NULL"), index=True
    )
    source: Mapped[str] = mapped_column(Text)  # "dataset NAME", "file PATH", ...
    model: Mapped[str | None] = mapped_column(String(200))  # the log's model, None for all
    metric: Mapped[str] = mapped_column(String(32))  # requests, input_tokens, output_tokens
    method: Mapped[str] = mapped_column(String(32))  # prophet or seasonal-naive
    history_start: Mapped[datetime] = mapped_column(UTCDateTime)
    history_end: Mapped[datetime] = mapped_column(UTCDateTime)  # exclusive
    horizon_hours: Mapped[int] = mapped_column(Integer)
    demand_quantile: Mapped[float | None] = mapped_column(Float)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)  # ForecastSettings, growth resolved
    # backtest (plan, Prophet's and the baseline's scores), tuning table, series report, notes
    scores: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)

    points: Mapped[list[ForecastPoint]] = relationship(
        back_populates="forecast",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="ForecastPoint.hour_start",
    )


class ForecastPoint(Base):
    """One forecast hour of one metric."""

    __tablename__ = "forecast_points"
    __table_args__ = (
        Index("ix_forecast_points_forecast_hour", "forecast_id", "metric", "hour_start"),
    )

    id: Mapped[int] = mapped_column(BigIntegerPK, primary_key=True)
    forecast_id: Mapped[int] = mapped_column(ForeignKey("forecasts.id", ondelete="CASCADE"))
    metric: Mapped[str] = mapped_column(String(32))
    hour_start: Mapped[datetime] = mapped_column(UTCDateTime)
    mean: Mapped[float] = mapped_column(Float)
    lower_80: Mapped[float] = mapped_column(Float)
    upper_80: Mapped[float] = mapped_column(Float)
    lower_95: Mapped[float] = mapped_column(Float)
    upper_95: Mapped[float] = mapped_column(Float)
    demand: Mapped[float | None] = mapped_column(Float)  # at the forecast's demand_quantile

    forecast: Mapped[ForecastRun] = relationship(back_populates="points")
