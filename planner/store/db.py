"""Opening the store: engine, SQLite settings, and bringing the schema up to date with Alembic."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from planner.config import database_url
from planner.errors import StoreError

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")  # ON DELETE CASCADE needs it
    cursor.execute("PRAGMA journal_mode=WAL")  # readers (the dashboard) don't block an ingest
    cursor.execute("PRAGMA synchronous=NORMAL")  # safe with WAL, and much faster to commit
    cursor.close()


def create_store_engine(url: str) -> Engine:
    """An engine for ``url``, creating the SQLite file's folder where needed."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"not a database URL: {url!r} (expected e.g. sqlite:///path.db)") from exc
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    elif parsed.get_backend_name() == "postgresql" and parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")  # psycopg 3, not psycopg2
    try:
        engine = create_engine(parsed)
    except (NoSuchModuleError, ModuleNotFoundError) as exc:
        raise StoreError(
            f"no database driver for {parsed.drivername!r}: {exc}. "
            "For PostgreSQL install planner[postgres]."
        ) from exc
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def alembic_config(engine: Engine) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def head_revision() -> str:
    head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    assert head is not None, "the migrations folder has no head revision"
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply migrations up to ``revision``; data already stored is kept."""
    command.upgrade(alembic_config(engine), revision)


@dataclass
class Store:
    """An open store: the engine plus a session factory."""

    engine: Engine
    url: str

    def __post_init__(self) -> None:
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on any error."""
        with self._sessions.begin() as session:
            yield session

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(url: str | None = None, *, migrate: bool = True) -> Store:
    """Open the store at ``url`` (or the configured default), upgrading its schema to the latest."""
    resolved = database_url(url)
    engine = create_store_engine(resolved)
    try:
        with store_errors(resolved):
            if migrate and current_revision(engine) != head_revision():
                upgrade(engine)
    except StoreError:
        engine.dispose()
        raise
    return Store(engine=engine, url=resolved)


@contextmanager
def store_errors(url: str) -> Iterator[None]:
    """Turn a failure to reach the database into a StoreError naming it (without its password)."""
    try:
        yield
    except OperationalError as exc:
        reason = " ".join(str(exc.orig if exc.orig is not None else exc).split())
        raise StoreError(f"cannot open the store at {redact_url(url)}: {reason}") from exc


def redact_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url
