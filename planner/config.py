"""Where planner keeps its data: ``$PLANNER_HOME`` and the store's database URL."""

from __future__ import annotations

import math
import os
from pathlib import Path

from planner.common.text import shown
from planner.errors import StoreError

HOME_ENV = "PLANNER_HOME"
DATABASE_URL_ENV = "PLANNER_DATABASE_URL"
BUSY_TIMEOUT_ENV = "PLANNER_DB_BUSY_TIMEOUT"
DEFAULT_HOME = ".planner"
# The dashboard server's maxUploadSize (`planner dashboard` sets it; the uploaders show it).
UPLOAD_LIMIT_MB = 1024
DEFAULT_BUSY_TIMEOUT_S = 30.0


def planner_home() -> Path:
    """The data folder: ``$PLANNER_HOME`` or ``./.planner``."""
    return Path(os.environ.get(HOME_ENV) or DEFAULT_HOME).expanduser()


def database_url(explicit: str | None = None) -> str:
    """The store's SQLAlchemy URL: ``--db``, else ``$PLANNER_DATABASE_URL``, else SQLite."""
    return database_url_and_source(explicit)[0]


def database_url_and_source(explicit: str | None = None) -> tuple[str, str]:
    """The store's URL and where it came from (``--db``, the environment, or the home folder),
    for messages. Surrounding whitespace (a newline from ``$(cat url.txt)``) is not part of it.
    """
    if explicit is not None:
        if not explicit.strip():
            raise StoreError("--db is empty: give a database URL, e.g. sqlite:///planner.db")
        return explicit.strip(), "--db"
    from_env = (os.environ.get(DATABASE_URL_ENV) or "").strip()
    if from_env:
        return from_env, DATABASE_URL_ENV
    return f"sqlite:///{planner_home() / 'planner.db'}", HOME_ENV


def busy_timeout_seconds() -> float:
    """How long a SQLite writer waits for another one to finish: ``$PLANNER_DB_BUSY_TIMEOUT``
    seconds, 30 by default."""
    raw = os.environ.get(BUSY_TIMEOUT_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_BUSY_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or value > 86_400:
        raise StoreError(
            f"{BUSY_TIMEOUT_ENV} must be a number of seconds from 0 to 86400, got {shown(raw)}"
        )
    return value
