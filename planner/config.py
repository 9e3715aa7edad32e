"""Where planner keeps its data: ``$PLANNER_HOME`` and the store's database URL."""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "PLANNER_HOME"
DATABASE_URL_ENV = "PLANNER_DATABASE_URL"
DEFAULT_HOME = ".planner"


def planner_home() -> Path:
    """The data folder: ``$PLANNER_HOME`` or ``./.planner``."""
    return Path(os.environ.get(HOME_ENV) or DEFAULT_HOME)


def database_url(explicit: str | None = None) -> str:
    """The store's SQLAlchemy URL: ``--db``, else ``$PLANNER_DATABASE_URL``, else SQLite."""
    if explicit:
        return explicit
    from_env = os.environ.get(DATABASE_URL_ENV)
    if from_env:
        return from_env
    return f"sqlite:///{planner_home() / 'planner.db'}"
