from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import func, inspect, select

from planner.errors import StoreError
from planner.ingest import ingest_file
from planner.store import Dataset, Request, Store, open_store
from planner.store.db import create_store_engine, current_revision, head_revision, upgrade
from planner.store.models import Base
from planner.store.queries import delete_dataset
from tests.conftest import AZURE_CODE


def test_migrations_build_the_schema_the_models_describe(store: Store) -> None:
    assert current_revision(store.engine) == head_revision()
    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    tables = set(inspect(store.engine).get_table_names())
    assert {"datasets", "requests", "alembic_version"} <= tables


def test_the_version_read_without_alembic_is_alembics(store: Store) -> None:
    # planner reads the head and the store's version itself, so that opening an up-to-date store
    # need not import Alembic: both must be what Alembic says
    from alembic.script import ScriptDirectory

    from planner.store.db import MIGRATIONS_DIR, known_revisions

    scripts = ScriptDirectory(str(MIGRATIONS_DIR))
    assert head_revision() == scripts.get_current_head()
    assert known_revisions() == {script.revision for script in scripts.walk_revisions()}
    with store.engine.connect() as conn:
        assert (
            current_revision(store.engine)
            == MigrationContext.configure(conn).get_current_revision()
        )


def test_opening_an_up_to_date_store_imports_no_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'planner.db'}"
    with open_store(url):
        pass  # created and migrated here
    probe = (
        "import sys; from planner.store import open_store\n"
        f"with open_store({url!r}) as store, store.session() as session: pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('alembic', 'psycopg'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_downgrade_and_upgrade_round_trip(store_url: str) -> None:
    engine = create_store_engine(store_url)
    upgrade(engine)
    from alembic import command

    from planner.store.db import alembic_config

    command.downgrade(alembic_config(engine), "base")
    assert "requests" not in inspect(engine).get_table_names()
    upgrade(engine)
    assert current_revision(engine) == head_revision()
    engine.dispose()


def test_reopening_an_existing_store_keeps_its_data(store_url: str) -> None:
    with open_store(store_url) as first:
        ingest_file(first, AZURE_CODE)
    with open_store(store_url) as again, again.session() as session:
        assert session.scalar(select(func.count()).select_from(Request)) == 8819
        dataset = session.scalars(select(Dataset)).one()
        assert dataset.start_at == datetime(2023, 11, 16, 18, 17, 3, 979960, tzinfo=UTC)


def test_deleting_a_dataset_removes_its_requests(store: Store) -> None:
    ingest_file(store, AZURE_CODE)
    with store.session() as session:
        assert delete_dataset(session, "AzureLLMInferenceTrace_code_2023") == 8819
    with store.session() as session:
        assert session.scalar(select(func.count()).select_from(Request)) == 0


def test_times_come_back_timezone_aware(store: Store) -> None:
    ingest_file(store, AZURE_CODE)
    with store.session() as session:
        dataset = session.scalars(select(Dataset)).one()
        assert dataset.created_at.tzinfo is not None
        assert dataset.end_at is not None and dataset.end_at.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


def test_default_store_lives_in_planner_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLANNER_DATABASE_URL", raising=False)
    monkeypatch.setenv("PLANNER_HOME", str(tmp_path / "home"))
    with open_store() as store:
        assert store.url == f"sqlite:///{tmp_path / 'home' / 'planner.db'}"
    assert (tmp_path / "home" / "planner.db").exists()


def test_database_url_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("PLANNER_DATABASE_URL", url)
    with open_store() as store:
        assert store.url == url


def test_bad_urls_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not a database URL"):
        open_store("no-scheme-here")
    with pytest.raises(StoreError, match="no database driver for 'mysql\\+nosuchdriver'"):
        open_store("mysql+nosuchdriver://x/y")
    with pytest.raises(
        StoreError, match=r"cannot open the store at postgresql://u:\*\*\*@127\.0\.0\.1:1/x"
    ):
        open_store("postgresql://u:secret@127.0.0.1:1/x")


def test_upgrading_masks_credentials_stored_by_earlier_bench_runs(store_url: str) -> None:
    """Runs stored before URLs were masked kept `--url http://user:PASSWORD@host` whole; the
    upgrade to 0007 masks them in every column that held them, and keeps everything else."""
    import json

    from sqlalchemy import text

    secret = "Pl4nted-0007-secret"
    url = f"http://bench:{secret}@10.0.0.5:8000/v1?api_key={secret}"
    engine = create_store_engine(store_url)
    upgrade(engine, "0006")
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO bench_runs (id, name, created_at, source, target, load_kind, "
                "completed, failed, summary, result, details) VALUES (1, 'old', :at, "
                "'measured', :url, 'sync', 1, 1, :summary, :result, :details)"
            ),
            {
                "at": datetime(2026, 12, 1, tzinfo=UTC),
                "url": url,
                "summary": json.dumps({"completed": 1, "mean_ttft_ms": 12.5}),
                "result": json.dumps({"metadata": {"url": url, "headers": [f"Bearer {secret}"]}}),
                "details": json.dumps({"planner": {"url": url}, "note": "kept"}),
            },
        )
        connection.execute(
            text(
                "INSERT INTO bench_requests (id, run_id, request_index, status, error) VALUES "
                "(1, 1, 0, 'failed', :error), (2, 1, 1, 'completed', NULL)"
            ),
            {"error": f"cannot connect to {url}"},
        )
    upgrade(engine)
    with engine.connect() as connection:
        run = connection.execute(text("SELECT * FROM bench_runs")).mappings().one()
        errors = connection.execute(text("SELECT error FROM bench_requests ORDER BY id")).scalars()
        stored = json.dumps({k: str(v) for k, v in run.items()}) + json.dumps(list(errors))
    engine.dispose()
    assert secret not in stored
    assert run["target"] == "http://bench:***@10.0.0.5:8000/v1?api_key=***"
    assert "cannot connect to http://bench:***@10.0.0.5:8000" in stored
    assert '"mean_ttft_ms": 12.5' in str(run["summary"]) or "12.5" in str(run["summary"])
    assert "kept" in str(run["details"])
