"""Stores a user should never have pointed planner at: each one a clear StoreError naming the
store without its secrets and saying what to do, never a traceback or an internal error."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text

from planner.common.secrets import redact_url
from planner.errors import StoreError
from planner.ingest import ingest_file
from planner.store import Dataset, Request, open_store
from planner.store.db import (
    StoreBusyError,
    StoreConflictError,
    create_store_engine,
    head_revision,
)
from tests.conftest import ROOT

SECRET = "s3cr3tpw"

# Every way SQLAlchemy's URL takes a password, on a port nothing listens on.
SECRET_URLS = [
    f"postgresql://planner:{SECRET}@127.0.0.1:1/db",
    f"postgresql://127.0.0.1:1/db?user=planner&password={SECRET}",
    f"postgresql://planner@127.0.0.1:1/db?passwd={SECRET}",
    f"postgresql://planner@127.0.0.1:1/db?sslpassword={SECRET}&sslmode=disable",
    f"postgresql+psycopg://planner:{SECRET}@127.0.0.1:1/db?password={SECRET}",
    f"postgresql://planner:p@{SECRET}@127.0.0.1:1/db",  # '@' in the password, not %40
    f"postgresql://planner:p%40{SECRET}@127.0.0.1:1/db",  # the same, encoded
    f"postgresql://planner:a/b@{SECRET}@127.0.0.1:1/db",
    f"postgresql://planner:{SECRET}@127.0.0.1:notaport/db",  # cannot be parsed
    f"::not a url:{SECRET}@somewhere",
    f"host=127.0.0.1 port=1 password={SECRET}",  # a libpq string, not a URL
]


def small_log(path: Path, rows: int = 50) -> Path:
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    lines += [
        f"2023-11-16 {i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000,{100 + i},{10 + i}"
        for i in range(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def sqlite_store(path: Path, log_rows: int = 50) -> str:
    """A real planner store at ``path`` with one small dataset, closed again."""
    url = f"sqlite:///{path}"
    with open_store(url) as store:
        ingest_file(store, small_log(path.with_suffix(".csv"), log_rows))
    return url


# --- Secrets ----------------------------------------------------------------------------------


@pytest.mark.parametrize("url", SECRET_URLS)
def test_redacted_urls_hold_no_secret(url: str) -> None:
    redacted = redact_url(url)
    assert SECRET not in redacted
    assert "***" in redacted


def test_redaction_keeps_what_names_the_store() -> None:
    assert (
        redact_url(f"postgresql://127.0.0.1:1/db?user=u&password={SECRET}")
        == "postgresql://127.0.0.1:1/db?user=u&password=***"
    )
    assert redact_url("postgresql://u:p@ss@db.example/x") == "postgresql://***@db.example/x"
    assert redact_url("sqlite:////data/me@corp/planner.db") == "sqlite:////data/me@corp/planner.db"
    assert redact_url("sqlite:///a\nb.db") == "sqlite:///a\\nb.db"  # no line breaks in messages


@pytest.mark.parametrize("url", SECRET_URLS)
def test_store_errors_hold_no_secret(url: str) -> None:
    with pytest.raises(StoreError) as caught:
        open_store(url)
    message = str(caught.value)
    assert SECRET not in message
    assert "***" in message
    assert "SELECT" not in message and "Traceback" not in message


def test_unencoded_at_in_the_password_is_explained() -> None:
    with pytest.raises(StoreError, match="write an '@' in the user name or password as %40"):
        open_store(f"postgresql://u:p@{SECRET}@127.0.0.1:1/db")


# --- Concurrent writers -----------------------------------------------------------------------

HOLD_LOCK = """
import sqlite3, sys, time
holder = sqlite3.connect(sys.argv[1], isolation_level=None)
holder.execute("BEGIN IMMEDIATE")
holder.execute("UPDATE alembic_version SET version_num = version_num")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
holder.execute("COMMIT")
"""


@pytest.fixture
def lock_holder() -> Iterator[Callable[[Path, float], None]]:
    """Starts another process that holds the write lock of a SQLite file for some seconds."""
    started: list[subprocess.Popen[str]] = []

    def hold(path: Path, seconds: float) -> None:
        process = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(path), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        assert process.stdout is not None and process.stdout.readline().strip() == "locked"

    yield hold
    for process in started:
        process.kill()
        process.wait()


def test_a_busy_store_is_a_clear_error_after_the_busy_timeout(
    tmp_path: Path, lock_holder: Callable[[Path, float], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sqlite_store(tmp_path / "busy.db")
    lock_holder(tmp_path / "busy.db", 60)
    monkeypatch.setenv("PLANNER_DB_BUSY_TIMEOUT", "0.5")
    with open_store(url) as store:  # readers are not blocked (WAL)
        with store.session() as session:
            assert [d.name for d in session.scalars(select(Dataset))] == ["busy"]
        began = time.monotonic()
        with pytest.raises(StoreBusyError) as caught, store.session() as session:
            session.delete(session.scalars(select(Dataset)).one())
        waited = time.monotonic() - began
    message = str(caught.value)
    assert message.startswith(f"the store {url} is busy: another planner process is writing")
    assert "try again" in message and "PLANNER_DB_BUSY_TIMEOUT" in message
    assert "DELETE" not in message and "SQL" not in message
    assert 0.4 <= waited < 20


def test_a_busy_store_stops_a_bulk_load_cleanly(
    tmp_path: Path, lock_holder: Callable[[Path, float], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sqlite_store(tmp_path / "busy.db")
    lock_holder(tmp_path / "busy.db", 60)
    monkeypatch.setenv("PLANNER_DB_BUSY_TIMEOUT", "0.3")
    with open_store(url) as store:
        with pytest.raises(StoreBusyError, match="is busy"):
            ingest_file(store, small_log(tmp_path / "second.csv", 80))
        with store.session() as session:
            assert session.scalar(select(func.count()).select_from(Request)) == 50


def test_a_writer_waits_for_another_to_finish(
    tmp_path: Path, lock_holder: Callable[[Path, float], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sqlite_store(tmp_path / "shared.db")
    lock_holder(tmp_path / "shared.db", 1.0)
    monkeypatch.setenv("PLANNER_DB_BUSY_TIMEOUT", "30")
    with open_store(url) as store:
        result = ingest_file(store, small_log(tmp_path / "second.csv", 80))
    assert result.rows == 80


def test_bad_busy_timeout_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_DB_BUSY_TIMEOUT", "soon")
    with pytest.raises(StoreError, match="PLANNER_DB_BUSY_TIMEOUT must be a number of seconds"):
        open_store(f"sqlite:///{tmp_path / 'x.db'}")


def test_a_conflicting_write_is_a_store_conflict(tmp_path: Path) -> None:
    url = sqlite_store(tmp_path / "conflict.db")
    with open_store(url) as store, store.session() as session:
        first = session.scalars(select(Dataset)).one()
    with (
        pytest.raises(StoreConflictError, match="conflicting write") as caught,
        open_store(url) as store,
        store.session() as session,
    ):
        session.execute(
            text(
                "INSERT INTO datasets (name, source_path, format, sha256, size_bytes, row_count,"
                " skipped_rows, options, created_at) SELECT name, source_path, format, "
                "sha256 || 'x', size_bytes, row_count, skipped_rows, options, created_at "
                "FROM datasets"
            )
        )
    assert "INSERT" not in str(caught.value)
    assert first.name == "conflict"


def test_processes_opening_a_new_store_at_once_all_succeed(store_url: str) -> None:
    url = store_url  # nothing in it yet
    script = "import sys; from planner.store import open_store; open_store(sys.argv[1]).close()"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, url], env=env, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    errors = [p.communicate(timeout=120)[1] for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0, 0], errors
    engine = create_store_engine(url)
    with engine.connect() as conn:
        assert conn.scalar(text("SELECT version_num FROM alembic_version")) == head_revision()
    engine.dispose()


# --- Files that are not (or no longer) planner stores -------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"name,value\nthis is text,1\n", os.urandom(4096), b""],
    ids=["text", "random", "empty"],
)
def test_a_file_that_is_not_a_database(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    if not content:  # an empty file is a new, empty SQLite database: planner may use it
        with open_store(f"sqlite:///{path}") as store, store.session() as session:
            assert list(session.scalars(select(Dataset))) == []
        return
    with pytest.raises(StoreError) as caught:
        open_store(f"sqlite:///{path}")
    assert str(caught.value) == (
        f"sqlite:///{path} is not a planner store: the file is not a SQLite database; "
        "point --db at a planner store, or at a new file"
    )
    assert path.read_bytes() == content  # left as it was


def test_a_truncated_store(tmp_path: Path) -> None:
    path = tmp_path / "cut.db"
    url = sqlite_store(path, log_rows=3000)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with (
        pytest.raises(StoreError, match=r"is damaged \(database disk image is malformed\)"),
        open_store(url) as store,
        store.session() as session,
    ):
        session.scalar(select(func.sum(Request.input_tokens)))
        list(session.scalars(select(Dataset)))


def test_another_programs_sqlite_database(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE contacts (name TEXT)")
    with pytest.raises(StoreError, match="is not a planner store: it is another program's SQLite"):
        open_store(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:  # untouched: no planner tables added to it
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"contacts"}


def test_a_store_from_a_newer_planner(store_url: str) -> None:
    with open_store(store_url) as store, store.session() as session:
        session.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    with pytest.raises(StoreError) as caught:
        open_store(store_url)
    message = str(caught.value)
    assert "was written by a newer planner (schema '9999_future'" in message
    assert "upgrade planner" in message
    assert redact_url(store_url) in message


def test_a_store_missing_a_table(store_url: str) -> None:
    with open_store(store_url) as store, store.session() as session:
        session.execute(text("DROP TABLE forecast_points"))
    with pytest.raises(StoreError) as caught:
        open_store(store_url)
    message = str(caught.value)
    assert "is damaged: table forecast_points is missing" in message
    assert "restore a backup or point --db elsewhere" in message
    assert redact_url(store_url) in message


def test_a_store_missing_its_schema_version(tmp_path: Path) -> None:
    url = sqlite_store(tmp_path / "noversion.db")
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE alembic_version"))
    engine.dispose()
    with pytest.raises(StoreError, match="is damaged: it has planner's tables .* but no schema"):
        open_store(url)


def test_a_query_on_a_dropped_table_is_a_store_error(tmp_path: Path) -> None:
    url = sqlite_store(tmp_path / "dropped.db")
    with open_store(url) as store:
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE requests"))
        engine.dispose()
        with (
            pytest.raises(StoreError, match="is damaged: table requests is missing"),
            store.session() as session,
        ):
            session.scalar(select(func.count()).select_from(Request))


# --- Places that cannot hold a store -----------------------------------------------------------


def test_a_folder(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a folder, not a database file; name a file in it"):
        open_store(f"sqlite:///{tmp_path}")


def test_a_folder_that_cannot_be_made(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="cannot create the folder .* for the store"):
        open_store(f"sqlite:///{tmp_path / 'file' / 'sub' / 'planner.db'}")


def test_a_place_sqlite_cannot_write(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"cannot open the store at sqlite:////proc/x\.db"):
        open_store("sqlite:////proc/x.db")


def test_a_pipe(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.db"
    os.mkfifo(fifo)
    with pytest.raises(StoreError, match="is not a regular file"):
        open_store(f"sqlite:///{fifo}")


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_database_is_refused(url: str) -> None:
    with pytest.raises(StoreError, match="in-memory database: nothing stored in it would outlive"):
        open_store(url)
    with open_store(url, memory=True) as store, store.session() as session:  # on purpose: fine
        assert list(session.scalars(select(Dataset))) == []


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("nosuchdb://u:pw123@h/x", "unknown kind of database 'nosuchdb' in nosuchdb://u:***@h/x"),
        ("mysql://u:pw123@127.0.0.1:1/x", "no database driver for 'mysql' is installed"),
        ("mysql+nosuchdriver://x/y", "no database driver for 'mysql+nosuchdriver'"),
        ("./planner.db", "for a SQLite file write sqlite:///./planner.db"),
    ],
)
def test_urls_planner_cannot_use(url: str, expected: str) -> None:
    with pytest.raises(StoreError) as caught:
        open_store(url)
    assert expected in str(caught.value)
    assert "pw123" not in str(caught.value)


def test_home_folder_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLANNER_DATABASE_URL", raising=False)
    (tmp_path / "home").write_text("a file where the home folder should be")
    monkeypatch.setenv("PLANNER_HOME", str(tmp_path / "home"))
    with pytest.raises(StoreError, match="cannot create the folder .*home.* for the store"):
        open_store()
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("PLANNER_DATABASE_URL", f"  {url}\n")  # as `$(cat url.txt)` gives it
    with open_store() as store:
        assert store.url == url
    with pytest.raises(StoreError, match="--db is empty"):
        open_store("  ")


def test_tilde_is_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with open_store("sqlite:///~/stores/planner.db"):
        pass
    assert (tmp_path / "stores" / "planner.db").is_file()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a" * 3000 + ".db", "cannot use the path of the store"),  # a name too long
        ("a" * 300 + "/x.db", "File name too long"),
        ("newdir/", "is a folder, not a database file"),
        ("x.db?timout=5", "'timout' are not accepted by the pysqlite driver"),  # a typo
    ],
    ids=["long-name", "long-folder", "trailing-slash", "unknown-argument"],
)
def test_sqlite_paths_and_arguments_planner_cannot_use(
    tmp_path: Path, name: str, expected: str
) -> None:
    with pytest.raises(StoreError) as caught:
        open_store(f"sqlite:///{tmp_path}/{name}")
    message = str(caught.value)
    assert expected in message
    assert len(message) < 700  # the path is cut, not echoed whole
    assert "Background on this" not in message


def test_a_version_table_with_two_versions(tmp_path: Path) -> None:
    url = sqlite_store(tmp_path / "two.db")
    with sqlite3.connect(tmp_path / "two.db") as conn:
        conn.execute("INSERT INTO alembic_version VALUES ('0001')")
    with pytest.raises(StoreError, match=r"is damaged: its version table \(alembic_version\)"):
        open_store(url)


def test_a_missing_dataset_name_is_quoted_safely_and_suggestions_are_few(tmp_path: Path) -> None:
    from planner.errors import NotFoundError
    from planner.store.queries import get_dataset

    with open_store(f"sqlite:///{tmp_path / 'many.db'}") as store, store.session() as session:
        for i in range(12):
            session.add(
                Dataset(
                    name=f"trace-{i:02d}" if i else "bad\x1b[31mname",
                    source_path="x",
                    format="azure-llm",
                    sha256=f"{i:064d}",
                    size_bytes=1,
                    row_count=0,
                    skipped_rows=0,
                    options={},
                )
            )
        session.flush()
        with pytest.raises(NotFoundError) as caught:
            get_dataset(session, "\x1b[2J" + "trace-1" * 100)
    message = str(caught.value)
    assert "\x1b" not in message
    assert message.startswith("no dataset named '\\x1b[2Jtrace-1trace-1")
    assert "... (704 characters)" in message  # cut, with its length
    assert message.count("trace-") < 20 and "and 7 more (`planner datasets list`)" in message


def test_a_read_only_store_reads_but_does_not_write(tmp_path: Path) -> None:
    sqlite_store(tmp_path / "ro.db")
    url = f"sqlite:///file:{tmp_path / 'ro.db'}?mode=ro&uri=true"
    with open_store(url) as store:
        with store.session() as session:
            assert [d.name for d in session.scalars(select(Dataset))] == ["ro"]
        with (
            pytest.raises(
                StoreError, match="cannot write to the store .*readonly database"
            ) as caught,
            store.session() as session,
        ):
            session.delete(session.scalars(select(Dataset)).one())
    assert "DELETE" not in str(caught.value)
