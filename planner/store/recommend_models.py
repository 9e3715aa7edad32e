"""Stored recommendations (migration 0005): what was asked, what won, and the whole result
(ranked alternatives, rejections with reasons, the commitment plan) for the dashboard and the
reports."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from planner.store.models import Base, UTCDateTime, utc_now


class RecommendationRun(Base):
    """One ``planner recommend``: its inputs, its winner (None when nothing met the targets)
    and the full result as JSON."""

    __tablename__ = "recommendations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    demand_source: Mapped[str] = mapped_column(Text)  # "dataset NAME", "forecast #3", a file
    model: Mapped[str] = mapped_column(String(200))
    winner: Mapped[str | None] = mapped_column(String(300))  # provider/region/instance ...
    monthly_usd: Mapped[float | None] = mapped_column(Float)
    purchase: Mapped[str | None] = mapped_column(String(32))  # the plan's commitment
    request: Mapped[dict[str, Any]] = mapped_column(JSON)  # targets, constraints, options
    result: Mapped[dict[str, Any]] = mapped_column(JSON)  # Recommendation.to_dict()
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
