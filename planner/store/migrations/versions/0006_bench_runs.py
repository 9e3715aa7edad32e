"""Stored benchmark runs and their requests.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bench_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("target", sa.Text(), nullable=True),
        sa.Column("gpu", sa.String(length=200), nullable=True),
        sa.Column("num_gpus", sa.Integer(), nullable=True),
        sa.Column("tp", sa.Integer(), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("precision", sa.String(length=64), nullable=True),
        sa.Column("engine", sa.String(length=64), nullable=True),
        sa.Column("load_kind", sa.String(length=32), nullable=False),
        sa.Column("load_value", sa.Float(), nullable=True),
        sa.Column("input_tokens", sa.Float(), nullable=True),
        sa.Column("output_tokens", sa.Float(), nullable=True),
        sa.Column("completed", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("sweep", sa.String(length=200), nullable=True),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bench_runs")),
        sa.UniqueConstraint("name", name=op.f("uq_bench_runs_name")),
    )
    op.create_index(op.f("ix_bench_runs_sweep"), "bench_runs", ["sweep"], unique=False)

    op.create_table(
        "bench_requests",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("request_index", sa.Integer(), nullable=False),
        sa.Column("start_s", sa.Float(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("tpot_ms", sa.Float(), nullable=True),
        sa.Column("e2e_ms", sa.Float(), nullable=True),
        sa.Column("itl_ms", sa.LargeBinary(), nullable=True),
        sa.Column("error_kind", sa.String(length=64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["bench_runs.id"],
            name=op.f("fk_bench_requests_run_id_bench_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bench_requests")),
    )
    op.create_index(
        "ix_bench_requests_run_index",
        "bench_requests",
        ["run_id", "request_index"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_bench_requests_run_index", table_name="bench_requests")
    op.drop_table("bench_requests")
    op.drop_index(op.f("ix_bench_runs_sweep"), table_name="bench_runs")
    op.drop_table("bench_runs")
