"""Opening the store: engine, SQLite settings, and bringing the schema up to date with Alembic.

Everything that can go wrong with the database a user points planner at (a file that is not a
database, a damaged one, one written by a newer planner, another process writing to it, a server
that cannot be reached) becomes a :class:`~planner.errors.StoreError` naming the store by its
URL without any password, and saying what to do.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    IntegrityError,
    NoSuchModuleError,
    SAWarning,
)
from sqlalchemy.exc import (
    TimeoutError as PoolTimeoutError,
)
from sqlalchemy.orm import Session, sessionmaker

from planner.common.secrets import SECRET_PAIR, redact_url, scrub, url_secrets
from planner.common.text import printable, shown
from planner.config import BUSY_TIMEOUT_ENV, busy_timeout_seconds, database_url
from planner.errors import StoreError

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
VERSION_TABLE = "alembic_version"


class StoreBusyError(StoreError):
    """Another process holds the store's write lock for longer than planner waits."""


class StoreConflictError(StoreError):
    """A write collided with what another writer stored first (a unique name, a foreign key)."""


def database_errors() -> tuple[type[BaseException], ...]:
    """Errors of the database layer: SQLAlchemy's wrappers, and the drivers' own errors, which
    the bulk loader's raw cursors raise unwrapped. psycopg's only once it is loaded: only a
    PostgreSQL store loads it, and importing it for a SQLite store would cost 50 ms."""
    errors: list[type[BaseException]] = [DBAPIError, PoolTimeoutError, sqlite3.Error]
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None:
        errors.append(psycopg.Error)
    return tuple(errors)


# --- URLs in messages -------------------------------------------------------------------------

# Every URL shown or kept goes through planner.common.secrets (redact_url, url_secrets, scrub).


def _parse(url: str) -> URL | None:
    try:
        return make_url(url)
    except (ArgumentError, ValueError, TypeError):
        return None


def _ambiguous(parsed: URL) -> bool:
    """An unencoded '@' in the password: SQLAlchemy cuts the password at the first '@' and
    takes the rest of it for the host or the database."""
    return parsed.password is not None and (
        "@" in (parsed.host or "") or "@" in (parsed.database or "")
    )


def _where(url: str) -> str:
    """The store's URL as messages name it."""
    return redact_url(url, limit=200)


def _scrub(text: str, url: str) -> str:
    return scrub(text, url_secrets(url))


# --- Errors -----------------------------------------------------------------------------------

_BUSY_STATES = {"40001", "40P01", "55P03", "55006"}  # serialization, deadlock, lock not available


def _reason(error: BaseException, url: str) -> str:
    """The database's own words, without SQL, on one line, without secrets."""
    diag = getattr(error, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    if primary:
        detail = getattr(diag, "message_detail", None)
        text = f"{primary} ({detail})" if detail else str(primary)
    else:
        text = str(error)
        # SQLAlchemy's wrappers append the statement and a link; drivers' first line is enough.
        text = text.split("\n[SQL:", 1)[0]
        text = re.sub(r"\s*\(Background on this \w+ at: [^)]*\)", "", text)
        text = text.split("\nLINE ", 1)[0]
    text = " ".join(text.split())
    return printable(_scrub(text, url), limit=300)


def store_error(exc: BaseException, url: str) -> StoreError:
    """A database failure as a message for the user, naming the store and what to do."""
    where = _where(url)
    error: BaseException = exc
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        error = exc.orig
    reason = _reason(error, url)
    low = reason.lower()
    state = str(getattr(error, "sqlstate", "") or "")
    if isinstance(exc, PoolTimeoutError) or state in _BUSY_STATES or "is locked" in low:
        return StoreBusyError(
            f"the store {where} is busy: another planner process is writing to it; try again "
            f"(waited {busy_timeout_seconds():g} s; {BUSY_TIMEOUT_ENV} sets how many seconds)"
        )
    if isinstance(exc, IntegrityError) or state.startswith("23") or "constraint failed" in low:
        return StoreConflictError(f"conflicting write to the store {where}: {reason}")
    if "file is not a database" in low or "not a database" in low:
        return StoreError(
            f"{where} is not a planner store: the file is not a SQLite database; "
            "point --db at a planner store, or at a new file"
        )
    if "malformed" in low or "corrupt" in low:
        return StoreError(
            f"the store {where} is damaged ({reason}); restore a backup or point --db elsewhere"
        )
    missing = re.search(r'no such table: (\S+)|relation "([^"]+)" does not exist', reason)
    if missing or state == "42P01":
        table = next((g for g in missing.groups() if g), "?") if missing else "?"
        return StoreError(
            f"the store {where} is damaged: table {table} is missing; "
            "restore a backup or point --db elsewhere"
        )
    if "no such column" in low or state == "42703":
        return StoreError(
            f"the store {where} is damaged ({reason}); restore a backup or point --db elsewhere"
        )
    if "readonly" in low or "read-only" in low or state == "25006":
        return StoreError(
            f"cannot write to the store {where}: {reason}; check the permissions of the file "
            "and of its folder (SQLite writes its journal next to the file)"
        )
    if "unable to open database file" in low:
        return StoreError(
            f"cannot open the store at {where}: {reason}; check that the path names a file in a "
            "folder planner may write to (SQLite keeps its -wal and -shm files next to it)"
        )
    if "disk is full" in low or "disk i/o error" in low or state == "53100":
        return StoreError(
            f"the store {where} could not be written: {reason}; check the disk it is on "
            "(free some space) and try again"
        )
    if state.startswith("08") or state.startswith("28") or state == "3D000" or not state:
        return StoreError(f"cannot open the store at {where}: {reason}")
    return StoreError(f"the store {where} failed: {reason}")


@contextmanager
def store_errors(url: str) -> Iterator[None]:
    """Turn a database failure into a StoreError naming the store (without its password)."""
    try:
        yield
    except database_errors() as exc:
        raise store_error(exc, url) from exc


# --- Engines ----------------------------------------------------------------------------------


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys=ON")  # ON DELETE CASCADE needs it
        cursor.execute("PRAGMA journal_mode=WAL")  # readers (the dashboard) don't block an ingest
        cursor.execute("PRAGMA synchronous=NORMAL")  # safe with WAL, and much faster to commit
    finally:
        cursor.close()


def _sqlite_autobegin_off(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # we say BEGIN ourselves (below)


def _sqlite_begin_immediate(conn: Connection) -> None:
    # Take the write lock up front: a second migrator waits for the first (busy timeout), then
    # finds the schema already up to date, instead of both creating the same tables.
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def is_memory_url(parsed: URL) -> bool:
    if parsed.get_backend_name() != "sqlite":
        return False
    database = parsed.database or ""
    return (
        database in ("", ":memory:")
        or database.startswith("file::memory:")
        or parsed.query.get("mode") == "memory"
        or "mode=memory" in database
    )


def _sqlite_file(parsed: URL, where: str) -> URL:
    """Check the SQLite file's path and create its folder; ``~`` is the home folder."""
    database = parsed.database or ""
    if database.startswith("file:"):  # a SQLite URI (?uri=true): SQLite checks it
        return parsed
    path = Path(database).expanduser()
    if str(path) != database:
        parsed = parsed.set(database=str(path))
    try:
        if path.is_dir() or database.endswith(("/", "\\")):
            raise StoreError(
                f"the store {where} is a folder, not a database file; name a file in it, e.g. "
                f"sqlite:///{printable(str(path / 'planner.db'), limit=200)}"
            )
        if path.exists() and not path.is_file():
            raise StoreError(
                f"the store {where} is not a regular file (a device, a pipe or a socket); "
                "name a database file"
            )
    except OSError as exc:  # e.g. a name too long
        raise StoreError(
            f"cannot use the path of the store {where}: {exc.strerror or exc}; set --db, "
            "PLANNER_DATABASE_URL or PLANNER_HOME to a place planner may write to"
        ) from exc
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the folder {shown(str(path.parent))} for the store {where}: "
            f"{exc.strerror or exc}; set --db, PLANNER_DATABASE_URL or PLANNER_HOME to a "
            "place planner may write to"
        ) from exc
    return parsed


def _known_backend(backend: str) -> bool:
    try:
        URL.create(backend).get_dialect()
    except (NoSuchModuleError, ImportError):
        return False
    return True


def create_store_engine(url: str, *, memory: bool = False, immediate: bool = False) -> Engine:
    """An engine for ``url``, creating the SQLite file's folder where needed.

    An in-memory SQLite database is refused unless ``memory``: nothing in it would outlive the
    command. ``immediate`` makes every SQLite transaction take the write lock when it begins.
    """
    where = _where(url)
    parsed = _parse(url)
    if parsed is None:
        hint = ""
        try:
            make_url(url)
        except ValueError:
            hint = "; its port must be a number"
        except (ArgumentError, TypeError):
            pass
        if "://" not in url and "@" not in url and not SECRET_PAIR.search(url):
            hint = f"; for a SQLite file write sqlite:///{printable(url, limit=80)}"
        raise StoreError(
            f"not a database URL: {shown(where)} (expected e.g. sqlite:///path.db or "
            f"postgresql://user@host/db){hint}"
        )
    if _ambiguous(parsed):
        raise StoreError(
            f"cannot read the database URL {where}: it has more than one '@' before the host; "
            "write an '@' in the user name or password as %40"
        )
    backend = parsed.get_backend_name()
    connect_args: dict[str, Any] = {}
    if backend == "sqlite":
        if is_memory_url(parsed) and not memory:
            raise StoreError(
                f"{where} is an in-memory database: nothing stored in it would outlive the "
                "command; name a file, e.g. sqlite:///planner.db"
            )
        if not is_memory_url(parsed):
            parsed = _sqlite_file(parsed, where)
        if "timeout" not in parsed.query:
            connect_args["timeout"] = busy_timeout_seconds()
    elif backend == "postgresql" and parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")  # psycopg 3, not psycopg2
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", SAWarning)  # e.g. query arguments it would ignore
            engine = create_engine(parsed, connect_args=connect_args)
    except SAWarning as exc:
        raise StoreError(f"cannot use the database URL {where}: {_reason(exc, url)}") from exc
    except NoSuchModuleError as exc:
        if _known_backend(backend):
            raise StoreError(
                f"no database driver for {shown(parsed.drivername)} in {where}; planner works "
                "with SQLite (built in) and PostgreSQL (postgresql://, install planner[postgres])"
            ) from exc
        raise StoreError(
            f"unknown kind of database {shown(parsed.drivername)} in {where}: planner keeps its "
            "store in SQLite (sqlite:///path.db) or PostgreSQL (postgresql://user@host/db)"
        ) from exc
    except ImportError as exc:
        raise StoreError(
            f"no database driver for {shown(parsed.drivername)} is installed ({exc}); planner "
            "works with SQLite (built in) and PostgreSQL (postgresql://, install planner[postgres])"
        ) from exc
    except (ArgumentError, TypeError, ValueError) as exc:
        raise StoreError(f"cannot use the database URL {where}: {_reason(exc, url)}") from exc
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        if immediate:
            event.listen(engine, "connect", _sqlite_autobegin_off)
            event.listen(engine, "begin", _sqlite_begin_immediate)
    return engine


# --- Schema -----------------------------------------------------------------------------------


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


# Opening a store that is up to date needs its version and the head, not Alembic (a quarter of a
# second to import): both are read here, and Alembic is imported only to migrate.
# tests/integration/test_store.py checks these against Alembic's own script directory.
_REVISION_LINE = re.compile(r'^(down_revision|revision)\s*(?::[^=]*)?=\s*(None|"([^"]+)")', re.M)


@functools.cache
def _revision_chain() -> dict[str, str | None]:
    """Each migration's revision and the one it follows, from the migration files' text."""
    chain: dict[str, str | None] = {}
    for script in sorted((MIGRATIONS_DIR / "versions").glob("[0-9]*.py")):
        found = {m.group(1): m.group(3) for m in _REVISION_LINE.finditer(script.read_text())}
        assert "revision" in found and "down_revision" in found, f"{script.name}: no revision"
        chain[str(found["revision"])] = found["down_revision"]
    return chain


def head_revision() -> str:
    chain = _revision_chain()
    heads = set(chain) - set(chain.values())
    assert len(heads) == 1, f"the migrations folder has {len(heads)} head revisions"
    return heads.pop()


def known_revisions() -> frozenset[str]:
    return frozenset(_revision_chain())


class _VersionTableError(Exception):
    """The version table holds more than one row (what Alembic calls more than one head)."""


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        if not inspect(conn).has_table(VERSION_TABLE):
            return None
        versions = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(versions) > 1:
        raise _VersionTableError
    return str(versions[0]) if versions else None


_MIGRATION_LOCK_KEY = 0x706C616E6E6572  # "planner"


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply migrations up to ``revision``; data already stored is kept.

    On SQLite the migrations run in one transaction that holds the write lock from its start,
    so a migration stopped half-way leaves nothing behind and two processes never race.
    """
    from alembic import command

    if engine.dialect.name == "postgresql":
        # One migrator at a time per database: the others wait, then find nothing to do.
        with engine.connect() as lock:
            lock.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
            try:
                command.upgrade(alembic_config(engine), revision)
            finally:
                lock.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _MIGRATION_LOCK_KEY})
                lock.commit()
        return
    if engine.dialect.name != "sqlite" or is_memory_url(engine.url):
        command.upgrade(alembic_config(engine), revision)  # (a second engine: another memory)
        return
    migrator = create_store_engine(
        engine.url.render_as_string(hide_password=False), memory=True, immediate=True
    )
    try:
        command.upgrade(alembic_config(migrator), revision)
    finally:
        migrator.dispose()


def _model_tables() -> set[str]:
    from planner.store.models import Base  # every model module is imported by planner.store

    return set(Base.metadata.tables)


@dataclass
class SchemaState:
    """What is in the database, compared with what this planner expects."""

    revision: str | None
    head: str
    tables: set[str] = field(default_factory=set)

    @property
    def newer(self) -> bool:
        return self.revision is not None and self.revision not in known_revisions()

    @property
    def missing(self) -> list[str]:
        return sorted(_model_tables() - self.tables)

    @property
    def foreign(self) -> list[str]:
        return sorted(self.tables - _model_tables() - {VERSION_TABLE})

    @property
    def up_to_date(self) -> bool:
        return self.revision == self.head


def schema_state(engine: Engine, url: str) -> SchemaState:
    """The store's schema version and tables; a version table planner cannot read is an
    error.

    Another process may be migrating the store meanwhile: the tables are read between two reads
    of the version, and read again when the version changed, so they always belong together.
    """
    revision = _revision(engine, url)
    for _ in range(10):
        with store_errors(url):
            tables = set(inspect(engine).get_table_names())
        again = _revision(engine, url)
        if again == revision:
            break
        revision = again
    return SchemaState(revision=revision, head=head_revision(), tables=tables)


def _revision(engine: Engine, url: str) -> str | None:
    with store_errors(url):
        try:
            return current_revision(engine)
        except _VersionTableError as exc:
            problem = f"its version table ({VERSION_TABLE}) holds more than one version"
            raise StoreError(
                f"the store {_where(url)} is damaged: {problem}; restore a backup or point --db "
                "elsewhere"
            ) from exc


def check_schema(state: SchemaState, url: str, *, engine: Engine | None = None) -> None:
    """Raise a StoreError when this planner cannot use the store as it is."""
    where = _where(url)
    if state.newer:
        raise StoreError(
            f"the store {where} was written by a newer planner (schema {shown(state.revision)}; "
            f"this planner knows schemas up to {state.head}); upgrade planner, or point --db "
            "elsewhere"
        )
    if state.revision is None:
        ours = sorted(_model_tables() & state.tables)
        if ours:
            raise StoreError(
                f"the store {where} is damaged: it has planner's tables ({', '.join(ours[:3])}"
                f"{', ...' if len(ours) > 3 else ''}) but no schema version; restore a backup or "
                "point --db elsewhere"
            )
        sqlite = engine is not None and engine.dialect.name == "sqlite"
        if state.foreign and sqlite:
            shown_tables = ", ".join(printable(t, limit=40) for t in state.foreign[:5])
            raise StoreError(
                f"{where} is not a planner store: it is another program's SQLite database "
                f"(tables {shown_tables}{', ...' if len(state.foreign) > 5 else ''}); point "
                "--db at a planner store, or at a new file"
            )
    if state.up_to_date and state.missing:
        raise StoreError(
            f"the store {where} is damaged: table {', '.join(state.missing)} "
            f"{'is' if len(state.missing) == 1 else 'are'} missing; restore a backup or point "
            "--db elsewhere"
        )


def bring_up_to_date(engine: Engine, url: str, *, migrate: bool = True) -> SchemaState:
    """Check the store's schema and, with ``migrate``, upgrade it; returns the state before."""
    before = schema_state(engine, url)
    check_schema(before, url, engine=engine)
    if migrate and not before.up_to_date:
        for attempt in range(3):
            try:
                with store_errors(url):
                    upgrade(engine)
                break
            except StoreError:
                # Another process may have upgraded it meanwhile (PostgreSQL: both create the
                # same table, the second one fails): fine if the schema is now the latest.
                if schema_state(engine, url).up_to_date:
                    break
                if attempt == 2:
                    raise
                time.sleep(0.2 * (attempt + 1))
        check_schema(schema_state(engine, url), url, engine=engine)
    return before


@dataclass
class Store:
    """An open store: the engine plus a session factory."""

    engine: Engine
    url: str

    def __post_init__(self) -> None:
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on any error.

        A database failure (busy, damaged, a conflicting write) is a :class:`StoreError`:
        :class:`StoreBusyError` and :class:`StoreConflictError` for those two.
        """
        with store_errors(self.url), self._sessions.begin() as session:
            yield session

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(url: str | None = None, *, migrate: bool = True, memory: bool = False) -> Store:
    """Open the store at ``url`` (or the configured default), upgrading its schema to the latest.

    Refuses a store this planner cannot use (not a database, damaged, newer schema) with a
    StoreError, and an in-memory SQLite database unless ``memory``.
    """
    resolved = database_url(url)
    engine = create_store_engine(resolved, memory=memory)
    try:
        bring_up_to_date(engine, resolved, migrate=migrate)
    except BaseException:
        engine.dispose()
        raise
    return Store(engine=engine, url=resolved)
