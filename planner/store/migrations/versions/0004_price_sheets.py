"""Versioned price sheets: price_sheet_versions and price_points.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "price_sheet_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source_kind", sa.String(length=16), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("source_ref", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_price_sheet_versions")),
    )
    op.create_table(
        "price_points",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=16), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("instance_type", sa.String(length=100), nullable=False),
        sa.Column("gpu_model", sa.String(length=64), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("gpu_memory_gb", sa.Float(), nullable=True),
        sa.Column("vcpus", sa.Integer(), nullable=True),
        sa.Column("ram_gb", sa.Float(), nullable=True),
        sa.Column("purchase_option", sa.String(length=32), nullable=False),
        sa.Column("usd_per_hour", sa.Float(), nullable=False),
        sa.Column("upfront_usd", sa.Float(), nullable=False),
        sa.Column("payment", sa.String(length=32), nullable=False),
        sa.Column("plan_kind", sa.String(length=32), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("effective_date", sa.String(length=10), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["price_sheet_versions.id"],
            name=op.f("fk_price_points_version_id_price_sheet_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_price_points")),
        sa.UniqueConstraint(
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


def downgrade() -> None:
    op.drop_table("price_points")
    op.drop_table("price_sheet_versions")
