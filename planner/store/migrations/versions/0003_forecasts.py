"""Stored forecasts: settings and scores, and per hour the forecast and its bands.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "forecasts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("metric", sa.String(length=32), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("history_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("history_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("horizon_hours", sa.Integer(), nullable=False),
        sa.Column("demand_quantile", sa.Float(), nullable=True),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("scores", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_forecasts_dataset_id_datasets"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_forecasts")),
    )
    op.create_index(op.f("ix_forecasts_dataset_id"), "forecasts", ["dataset_id"], unique=False)

    op.create_table(
        "forecast_points",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("forecast_id", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(length=32), nullable=False),
        sa.Column("hour_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("mean", sa.Float(), nullable=False),
        sa.Column("lower_80", sa.Float(), nullable=False),
        sa.Column("upper_80", sa.Float(), nullable=False),
        sa.Column("lower_95", sa.Float(), nullable=False),
        sa.Column("upper_95", sa.Float(), nullable=False),
        sa.Column("demand", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["forecast_id"],
            ["forecasts.id"],
            name=op.f("fk_forecast_points_forecast_id_forecasts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_forecast_points")),
    )
    op.create_index(
        "ix_forecast_points_forecast_hour",
        "forecast_points",
        ["forecast_id", "metric", "hour_start"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_forecast_points_forecast_hour", table_name="forecast_points")
    op.drop_table("forecast_points")
    op.drop_index(op.f("ix_forecasts_dataset_id"), table_name="forecasts")
    op.drop_table("forecasts")
