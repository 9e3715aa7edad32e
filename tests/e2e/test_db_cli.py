"""``planner db`` and ``--db`` as a user meets them: real processes, real files, hostile stores."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PLANNER = shutil.which("planner", path=str(Path(sys.executable).parent)) or "planner"
SECRET = "s3cr3tpw"


def run(
    home: Path, *args: str, db: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PLANNER_DATABASE_URL", "PLANNER_DEBUG", "PLANNER_DB_BUSY_TIMEOUT")
    }
    environ |= {"PLANNER_HOME": str(home), "COLUMNS": "200", **(env or {})}
    command = [PLANNER, *(["--db", db] if db is not None else []), *args]
    return subprocess.run(
        command, capture_output=True, text=True, env=environ, timeout=300, check=False
    )


def assert_clear_error(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert result.stderr.startswith("error: "), result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def small_log(path: Path, rows: int = 30) -> Path:
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    lines += [f"2023-11-16 18:00:{i:02d}.000,{100 + i},{10 + i}" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_db_upgrade_and_status_print_json_with_the_url(home: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    first = run(home, "db", "upgrade", "--json", db=url)
    assert first.returncode == 0, first.stderr
    upgraded = json.loads(first.stdout)
    assert upgraded["url"] == url and upgraded["from"] is None and upgraded["upgraded"] is True
    again = json.loads(run(home, "db", "upgrade", "--json", db=url).stdout)
    assert again["from"] == again["revision"] == upgraded["revision"]
    assert again["upgraded"] is False
    status = json.loads(run(home, "db", "status", "--json", db=url).stdout)
    assert status == {
        "url": url,
        "source": "--db",
        "revision": upgraded["revision"],
        "latest": upgraded["revision"],
        "up_to_date": True,
        "newer": False,
    }
    plain = run(home, "db", "upgrade", db=url)
    assert plain.stdout.strip() == f"store {url}: schema already at {upgraded['revision']}"
    default = json.loads(run(home, "db", "status", "--json").stdout)
    assert default["source"] == "PLANNER_HOME"
    assert default["url"] == f"sqlite:///{home / 'planner.db'}"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://planner:{SECRET}@127.0.0.1:1/db",
        f"postgresql://127.0.0.1:1/db?user=planner&password={SECRET}",
        f"postgresql://planner@127.0.0.1:1/db?sslpassword={SECRET}",
        f"postgresql://planner:p@{SECRET}@127.0.0.1:1/db",
        f"postgresql://planner:{SECRET}@127.0.0.1:x/db",
        f"nosuchdb://planner:{SECRET}@127.0.0.1:1/db",
    ],
)
def test_no_password_in_any_message(home: Path, url: str) -> None:
    for result in (
        run(home, "db", "status", db=url),
        run(home, "datasets", "list", env={"PLANNER_DATABASE_URL": url}),
    ):
        assert_clear_error(result, "***")
        assert SECRET not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda p: p.write_text("not,a,database\n"), "is not a planner store: the file is not a"),
        (lambda p: p.mkdir(), "is a folder, not a database file"),
        (lambda p: os.mkfifo(p), "is not a regular file"),
    ],
    ids=["text", "folder", "pipe"],
)
def test_stores_that_are_not_stores(
    home: Path, tmp_path: Path, make: object, expected: str
) -> None:
    path = tmp_path / "store.db"
    make(path)  # type: ignore[operator]
    for command in (["db", "status"], ["db", "upgrade"], ["datasets", "list"]):
        assert_clear_error(run(home, *command, db=f"sqlite:///{path}"), expected)


@pytest.mark.parametrize(
    ("db", "expected"),
    [
        ("sqlite://", "is an in-memory database"),
        ("sqlite:////proc/x.db", "cannot open the store at sqlite:////proc/x.db"),
        ("mysql://u@127.0.0.1:1/x", "no database driver for 'mysql' is installed"),
        ("oracle2://u@h/x", "unknown kind of database 'oracle2'"),
        ("planner.db", "for a SQLite file write sqlite:///planner.db"),
        ("", "--db is empty"),
    ],
)
def test_urls_planner_cannot_use(home: Path, db: str, expected: str) -> None:
    assert_clear_error(run(home, "datasets", "list", db=db), expected)


def test_home_that_is_a_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder")
    assert_clear_error(run(home, "datasets", "list"), "cannot create the folder", "PLANNER_HOME")


def test_a_store_from_a_newer_planner(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    assert run(home, "db", "upgrade", db=url).returncode == 0
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    status = run(home, "db", "status", "--json", db=url)
    assert status.returncode == 0
    assert json.loads(status.stdout)["newer"] is True
    assert "newer than this planner" in run(home, "db", "status", db=url).stdout
    for command in (["db", "upgrade"], ["datasets", "list"]):
        assert_clear_error(
            run(home, *command, db=url), "was written by a newer planner", "upgrade planner"
        )


def test_a_store_missing_a_table(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    assert run(home, "db", "upgrade", db=url).returncode == 0
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE price_points")
    for command in (["db", "status"], ["db", "upgrade"], ["datasets", "list"]):
        assert_clear_error(
            run(home, *command, db=url),
            "is damaged: table price_points is missing; restore a backup",
        )


HOLD_LOCK = """
import sqlite3, sys, time
holder = sqlite3.connect(sys.argv[1], isolation_level=None)
holder.execute("BEGIN IMMEDIATE")
holder.execute("UPDATE alembic_version SET version_num = version_num")
print("locked", flush=True)
time.sleep(120)
"""


@pytest.fixture
def locked_store(home: Path, tmp_path: Path) -> Iterator[str]:
    """A store with one dataset, whose write lock another process holds."""
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    ingested = run(home, "ingest", str(small_log(tmp_path / "log.csv")), "--name", "x", db=url)
    assert ingested.returncode == 0, ingested.stderr
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield url
    finally:
        holder.kill()
        holder.wait()


def test_a_busy_store(home: Path, tmp_path: Path, locked_store: str) -> None:
    quick = {"PLANNER_DB_BUSY_TIMEOUT": "0.5"}
    listed = run(home, "datasets", "list", "--json", db=locked_store, env=quick)
    assert listed.returncode == 0, listed.stderr  # readers go on
    assert [d["name"] for d in json.loads(listed.stdout)] == ["x"]
    for command in (
        ["datasets", "delete", "x"],
        ["ingest", str(small_log(tmp_path / "other.csv", 40)), "--name", "y"],
    ):
        result = run(home, *command, db=locked_store, env=quick)
        assert_clear_error(
            result,
            f"the store {locked_store} is busy: another planner process is writing to it; "
            "try again",
        )
        assert "DELETE" not in result.stderr and "INSERT" not in result.stderr
    after = json.loads(run(home, "datasets", "list", "--json", db=locked_store).stdout)
    assert [d["name"] for d in after] == ["x"]


def test_bad_busy_timeout(home: Path) -> None:
    result = run(home, "datasets", "list", env={"PLANNER_DB_BUSY_TIMEOUT": "-3"})
    assert_clear_error(result, "PLANNER_DB_BUSY_TIMEOUT must be a number of seconds")
