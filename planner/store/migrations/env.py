"""Alembic environment: runs migrations on the engine planner hands over (no alembic.ini)."""

from __future__ import annotations

from alembic import context

from planner.store.models import Base

target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine = context.config.attributes["engine"]
    with engine.begin() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",  # SQLite cannot ALTER much
            compare_type=True,
        )
        context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("planner runs migrations online only")
run_migrations_online()
