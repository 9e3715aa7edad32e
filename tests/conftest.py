"""Shared fixtures: real stores (SQLite always, PostgreSQL when configured) and the real traces.

Every file a test reads lies in this repository (``tests/fixtures``, ``data/``): a clone with
nothing beside it passes the suite.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from planner.latency.profile import Profile, profiles_in
from planner.store import Store, open_store
from tests.pure_engine import use_pure_engine

ROOT = Path(__file__).resolve().parent.parent
# The bundled profiles of 2026-12-01 (fitted offline, before issue 37 refitted them under load):
# tests that pin the engine's, the screen's or the search's behaviour on known answers keep the
# profiles those answers were measured under; they test the mechanics, not the calibration.
PROFILES_2026_12_01 = ROOT / "tests" / "fixtures" / "profiles_2026-12-01.json"


def profiles_2026_12_01() -> list[Profile]:
    import json

    return profiles_in(json.loads(PROFILES_2026_12_01.read_text()), PROFILES_2026_12_01)


TRACES = ROOT / "tests" / "fixtures" / "traces"
SAMPLES = ROOT / "data" / "samples"
AZURE_CODE = TRACES / "AzureLLMInferenceTrace_code_2023.csv.gz"
MOONCAKE = TRACES / "mooncake_conversation_trace.jsonl.gz"
DEMO_SAMPLE = SAMPLES / "azure_llm_conv_2023.csv.gz"
AZURE_CONV = DEMO_SAMPLE  # the Azure conversation trace, bundled as the demo's sample
AZURE_CONV_NAME = "azure_llm_conv_2023"  # its dataset name when ingested
SERVEGEN = SAMPLES / "servegen_rates_10min.csv"
POSTGRES_ENV = "PLANNER_TEST_POSTGRES_URL"

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Mark tests by folder, so `pytest -m unit` etc. select a layer.
    for item in items:
        for layer in ("unit", "integration", "e2e", "dashboard", "bench", "report"):
            if f"{os.sep}{layer}{os.sep}" in str(item.fspath):
                item.add_marker(getattr(pytest.mark, layer))


@pytest.fixture(autouse=True)
def _private_planner_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every test's planner data folder is its own: commands that store by default (``bench
    run``, ``bench import``) never write into the checkout's ``.planner`` or another test's."""
    monkeypatch.setenv("PLANNER_HOME", str(tmp_path / "planner-home"))
    monkeypatch.delenv("PLANNER_DATABASE_URL", raising=False)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'planner.db'}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh schema on the configured PostgreSQL server, dropped afterwards."""
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(f"{POSTGRES_ENV} is not set (.ci/run sets it)")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'planner.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with open_store(store_url) as opened:
        yield opened


@pytest.fixture
def write(tmp_path: Path) -> WriteFile:
    return WriteFile(tmp_path)


class WriteFile:
    """Writes small input files into the test's folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __call__(self, name: str, content: str | bytes) -> Path:
        path = self.folder / name
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_bytes(content)
        return path


@pytest.fixture(scope="session")
def demo_store_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's store (sample dataset, price snapshot, a forecast, a small recommendation),
    built once for the session by the same ``load_demo`` that ``make demo`` runs. Copy it
    before changing it."""
    from planner.demo import load_demo

    path = tmp_path_factory.mktemp("demo-store") / "planner.db"
    load_demo(f"sqlite:///{path}", quick=True)
    return path


@pytest.fixture
def demo_store_copy(tmp_path: Path, demo_store_file: Path) -> Path:
    """A folder holding a private copy of the demo store as ``planner.db`` (a PLANNER_HOME)."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(demo_store_file, home / "planner.db")
    return home


@pytest.fixture
def pure_engine(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The replica loop as pure Python for this test: one that subclasses or patches it."""
    return use_pure_engine(monkeypatch)
