"""Credentials out of stored benchmark runs.

Before planner masked every URL it keeps (issue 30), `bench run --url http://user:PASSWORD@host`
or `--url ...?api_key=KEY` stored the URL whole: in a run's target, in its summary, result and
details (the run's metadata), and in its requests' error messages. This migration passes every
one of those texts through the masking the CLI uses now; nothing else changes. Downgrading
keeps the masked texts: a removed secret cannot be put back.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from planner.common.secrets import redact_text

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

RUNS = sa.table(
    "bench_runs",
    sa.column("id", sa.Integer()),
    sa.column("target", sa.Text()),
    sa.column("summary", sa.JSON()),
    sa.column("result", sa.JSON()),
    sa.column("details", sa.JSON()),
)
REQUESTS = sa.table(
    "bench_requests",
    sa.column("id", sa.Integer()),
    sa.column("error", sa.Text()),
)
JSON_COLUMNS = ("summary", "result", "details")


def _masked(value: Any) -> Any:
    """``value`` (a JSON document) with every string, keys included, masked."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [_masked(item) for item in value]
    if isinstance(value, dict):
        return {_masked(key): _masked(item) for key, item in value.items()}
    return value


def upgrade() -> None:
    bind = op.get_bind()
    runs = bind.execute(sa.select(RUNS.c.id, RUNS.c.target, *(RUNS.c[c] for c in JSON_COLUMNS)))
    for run in runs.mappings().all():
        changes = {
            column: masked
            for column in ("target", *JSON_COLUMNS)
            if (masked := _masked(run[column])) != run[column]
        }
        if changes:
            bind.execute(RUNS.update().where(RUNS.c.id == run["id"]).values(**changes))
    # Only an error message can quote a URL; most requests have none.
    errors = bind.execute(
        sa.select(REQUESTS.c.id, REQUESTS.c.error).where(REQUESTS.c.error.is_not(None))
    )
    for request_id, error in errors.all():
        masked = redact_text(error)
        if masked != error:
            bind.execute(REQUESTS.update().where(REQUESTS.c.id == request_id).values(error=masked))


def downgrade() -> None:
    """Nothing to undo: the masked texts stay masked."""
