"""Per-token API price sheets: api_price_sheet_versions and api_prices.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_price_sheet_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source_kind", sa.String(length=16), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("source_ref", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_price_sheet_versions")),
    )
    op.create_table(
        "api_prices",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=32), nullable=False),
        sa.Column("offer", sa.String(length=200), nullable=False),
        sa.Column("model", sa.String(length=100), nullable=False),
        sa.Column("catalog_model", sa.String(length=64), nullable=True),
        sa.Column("input_usd_per_mtok", sa.Float(), nullable=False),
        sa.Column("output_usd_per_mtok", sa.Float(), nullable=False),
        sa.Column("cached_input_usd_per_mtok", sa.Float(), nullable=True),
        sa.Column("batch_discount", sa.Float(), nullable=True),
        sa.Column("rpm", sa.BigInteger(), nullable=True),
        sa.Column("tpm", sa.BigInteger(), nullable=True),
        sa.Column("context_tokens", sa.BigInteger(), nullable=True),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("source_url", sa.Text(), nullable=False),
        sa.Column("source_date", sa.String(length=10), nullable=False),
        sa.Column("provenance", sa.Text(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["api_price_sheet_versions.id"],
            name=op.f("fk_api_prices_version_id_api_price_sheet_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_prices")),
        sa.UniqueConstraint("version_id", "provider", "offer", name="uq_api_prices_version_key"),
    )


def downgrade() -> None:
    op.drop_table("api_prices")
    op.drop_table("api_price_sheet_versions")
