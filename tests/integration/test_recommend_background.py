"""Recommendations searched in the background (``planner.usecases.recommend_background``) on a
real store: the search runs in its own thread, reports its stages, is stored when it ends; a
stop stores nothing; what cannot run is refused before it starts, and a failure is said."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import UsageError
from planner.recommend.inputs import Constraints, SearchOptions
from planner.simulate.metrics import SLO
from planner.store import open_store
from planner.store.recommendations import list_briefs, load_recommendation
from planner.usecases.recommend import DemandChoice, RecommendRequest
from planner.usecases.recommend_background import SearchRegistry
from tests.conftest import DEMO_SAMPLE

DATASET = "demo"
WAIT_S = 240.0
SMALL = RecommendRequest(
    demand=DemandChoice(dataset=DATASET, load_scale=0.1),
    slo=SLO(ttft_s=2.0, tpot_s=0.2),
    constraints=Constraints(model="llama-3.1-8b", gpus=("L4",), precisions=("fp8",)),
    options=SearchOptions(verify_top=2, tighten_steps=0, growth_check=False, compare_gpus=False),
)
# every GPU, many candidates simulated: long enough to be stopped while it runs
BIG = replace(
    SMALL,
    demand=DemandChoice(dataset=DATASET),
    constraints=Constraints(model="llama-3.1-8b"),
    options=SearchOptions(verify_top=40),
)


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("background") / "planner.db"
    result = CliRunner().invoke(
        app, ["--db", f"sqlite:///{path}", "ingest", str(DEMO_SAMPLE), "--name", DATASET, "-q"]
    )
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture
def url(sample_db: Path, tmp_path: Path) -> str:
    copy = tmp_path / "planner.db"
    shutil.copy(sample_db, copy)
    return f"sqlite:///{copy}"


def stored(url: str) -> list[int]:
    with open_store(url) as store, store.session() as session:
        return [b["id"] for b in list_briefs(session)]


def test_a_search_runs_in_its_thread_and_is_stored(url: str) -> None:
    job = SearchRegistry().start(SMALL, url)
    assert job.wait(WAIT_S)
    status = job.status()
    assert status.state == "done", status.error
    assert status.label == "llama-3.1-8b for dataset demo x 0.1"
    stages = {s.name: s for s in status.stages}
    assert stages["screen"].done == stages["screen"].total > 0
    assert len(stages) >= 2  # the screen, then at least one round of simulations
    assert all(s.done == s.total for s in stages.values())
    assert status.stored_id is not None and stored(url) == [status.stored_id]
    assert status.result is not None and status.result["id"] == status.stored_id
    with open_store(url) as store, store.session() as session:
        run = load_recommendation(session, status.stored_id)
        assert run.result["winner"] == status.result["winner"]
        assert run.result["demand"]["source"] == "dataset demo x 0.1"
    assert status.result["winner"]["gpu"] == "L4"


def test_a_stopped_search_stores_nothing(url: str) -> None:
    registry = SearchRegistry()
    job = registry.start(BIG, url)
    job.stop()
    assert job.wait(WAIT_S)
    status = job.status()
    assert status.state == "cancelled" and status.finished
    assert status.error is not None and "not stored" in status.error
    assert stored(url) == []


def test_a_search_stopped_while_simulating_kills_its_workers(url: str) -> None:
    # processes an earlier test left (a Dask cluster's resource tracker) are not this job's
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    job = SearchRegistry().start(BIG, url)
    began = time.monotonic()
    workers: list[psutil.Process] = []
    while not workers:  # the simulations' process pool has started
        assert not job.status().finished, job.status().error
        assert time.monotonic() - began < WAIT_S
        time.sleep(0.05)
        workers = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert any(s.name != "screen" for s in job.status().stages)
    job.stop()
    assert job.wait(WAIT_S)
    assert job.status().state == "cancelled"
    assert not [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
    assert stored(url) == []


def test_searches_at_once_are_limited(url: str) -> None:
    registry = SearchRegistry(max_running=1)
    first = registry.start(BIG, url)
    try:
        with pytest.raises(UsageError, match="1 searches are running already"):
            registry.start(SMALL, url)
        assert [s.job_id for s in registry.statuses()] == [first.job_id]
    finally:
        first.stop()
        assert first.wait(WAIT_S)
    second = registry.start(SMALL, url)  # the first has ended: room again
    assert second.wait(WAIT_S) and second.status().state == "done"
    assert [s.job_id for s in registry.statuses()] == [second.job_id, first.job_id]


def test_what_cannot_run_is_refused_before_it_starts(url: str) -> None:
    registry = SearchRegistry()
    with pytest.raises(UsageError, match="give at least one latency target"):
        registry.start(replace(SMALL, slo=SLO()), url)
    with pytest.raises(UsageError, match="--load-scale 0: expected a positive number"):
        registry.start(replace(SMALL, demand=DemandChoice(dataset=DATASET, load_scale=0)), url)
    assert registry.statuses() == []


def test_a_failed_search_says_why(url: str) -> None:
    job = SearchRegistry().start(replace(SMALL, demand=DemandChoice(dataset="nope")), url)
    assert job.wait(WAIT_S)
    status = job.status()
    assert status.state == "failed"
    assert status.error == "no dataset named 'nope'; known datasets: demo"
    assert stored(url) == []


def test_a_budget_nothing_fits_is_stored_without_a_winner(url: str) -> None:
    spec = replace(SMALL, constraints=replace(SMALL.constraints, budget_usd_per_month=10.0))
    job = SearchRegistry().start(spec, url)
    assert job.wait(WAIT_S)
    status = job.status()
    assert status.state == "done" and status.result is not None
    assert status.result["winner"] is None
    assert set(status.result["rejected_by_reason"]) == {"over-budget"}
    assert stored(url) == [status.stored_id]
