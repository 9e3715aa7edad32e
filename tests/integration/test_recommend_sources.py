"""What a recommendation reads from a real store (``planner.usecases.recommend``): the demand
of a dataset or a demand-curve CSV, the refusals that name what to change (in the CLI's words
or the dashboard's), and the prices the search sees; the use case checks its request before it
opens the store, and keeps a result it is not to save out of it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import NotFoundError, UsageError
from planner.recommend.inputs import Constraints, SearchOptions
from planner.recommend.limits import LimitNames, WindowLimit
from planner.simulate.metrics import SLO
from planner.store import Store, open_store
from planner.store.recommendations import list_briefs
from planner.usecases.load import from_dataset
from planner.usecases.recommend import (
    DemandChoice,
    RecommendRequest,
    demand_for,
    recommend,
    search_inputs,
)
from tests.conftest import DEMO_SAMPLE

DATASET = "demo"


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo sample (~19k requests, one hour) ingested once for the module."""
    path = tmp_path_factory.mktemp("sources") / "planner.db"
    result = CliRunner().invoke(
        app, ["--db", f"sqlite:///{path}", "ingest", str(DEMO_SAMPLE), "--name", DATASET, "-q"]
    )
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture
def store(sample_db: Path, tmp_path: Path) -> Iterator[Store]:
    copy = tmp_path / "planner.db"
    shutil.copy(sample_db, copy)
    with open_store(f"sqlite:///{copy}") as opened:
        yield opened


def test_a_dataset_is_replayed_at_its_scale(store: Store) -> None:
    with store.session() as session:
        demand = demand_for(session, dataset=DATASET, load_scale=0.5, seed=3)
        workload = from_dataset(session, DATASET, load_scale=0.5, seed=3)
    assert demand.source == "dataset demo x 0.5"
    assert demand.replay is not None and len(demand.replay) == len(workload)
    assert demand.curve.total_requests == len(workload)
    assert np.array_equal(demand.inputs, workload.input_tokens)


def test_a_demand_curve_draws_lengths_from_a_dataset(store: Store, tmp_path: Path) -> None:
    curve = tmp_path / "demand.csv"
    curve.write_text("ds,y\n2024-01-01T00:00:00Z,3600\n2024-01-01T01:00:00Z,7200\n")
    with store.session() as session:
        demand = demand_for(session, csv=curve, tokens_from=DATASET, load_scale=2.0)
        with pytest.raises(UsageError, match="--demand CSV needs --tokens-from DATASET"):
            demand_for(session, csv=curve)
    assert demand.curve.requests_per_hour.tolist() == [7200.0, 14400.0]
    assert demand.replay is None and demand.source.endswith(" x 2")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give exactly one demand"),
        ({"dataset": DATASET, "forecast_id": 1}, "give exactly one demand"),
        ({"dataset": DATASET, "load_scale": 0.0}, "--load-scale 0: expected a positive number"),
        ({"dataset": DATASET, "load_scale": float("nan")}, "--load-scale nan"),
        ({"dataset": " "}, "the dataset name is empty"),
        ({"dataset": DATASET, "tokens_from": DATASET}, "--tokens-from goes with a demand curve"),
    ],
)
def test_what_cannot_be_a_demand_is_refused(
    store: Store, kwargs: dict[str, object], message: str
) -> None:
    with store.session() as session, pytest.raises(UsageError, match=message):
        demand_for(session, **kwargs)  # type: ignore[arg-type]


def test_the_dashboard_names_its_own_inputs(store: Store) -> None:
    with store.session() as session, pytest.raises(UsageError, match="^the load scale -1"):
        demand_for(session, dataset=DATASET, load_scale=-1, names={"load_scale": "the load scale"})


def test_unknown_names_are_said(store: Store) -> None:
    with store.session() as session:
        with pytest.raises(NotFoundError, match="no dataset named 'dem'; known datasets: demo"):
            demand_for(session, dataset="dem")
        with pytest.raises(NotFoundError, match="forecast"):
            demand_for(session, forecast_id=99, tokens_from=DATASET)


def test_a_window_too_big_to_simulate_is_refused_naming_what_to_change(store: Store) -> None:
    cli = WindowLimit(max_requests=1_000, verify_hours=1, load_scale=1.0)
    page = LimitNames("the load scale", "the verified hours", "the request limit", "pick one")
    with store.session() as session:
        with pytest.raises(UsageError, match="more than --max-requests 1,000") as said:
            demand_for(session, dataset=DATASET, limit=cli)
        assert "Lower --load-scale or --verify-hours" in str(said.value)
        with pytest.raises(UsageError, match="more than the request limit 1,000") as said:
            demand_for(
                session,
                dataset=DATASET,
                limit=WindowLimit(1_000, 1, 1.0, page),
            )
        assert "Lower the load scale or the verified hours" in str(said.value)
        # a curve's busiest hour is checked once the demand is built
        demand = demand_for(session, dataset=DATASET, load_scale=0.1)
    with pytest.raises(UsageError, match="the demand's busiest 1 hour holds"):
        cli.check(demand)


def test_search_inputs_load_list_prices_and_check_the_names(store: Store) -> None:
    with store.session() as session:
        prices, profiles = search_inputs(session, Constraints(model="llama-3.1-8b", gpus=("L4",)))
        assert prices and profiles  # the bundled list prices, loaded on first use
        assert {"aws", "gcp", "azure"} <= {p.provider.value for p in prices}
        with pytest.raises(UsageError, match="GPU"):
            search_inputs(session, Constraints(model="llama-3.1-8b", gpus=("NO-SUCH-GPU",)))


def test_the_use_case_checks_the_request_before_it_opens_the_store() -> None:
    opened: list[int] = []

    def sessions() -> AbstractContextManager[Session | None]:
        opened.append(1)
        raise AssertionError("the store was opened")

    request = RecommendRequest(
        DemandChoice(dataset=DATASET), SLO(), Constraints(model="llama-3.1-8b"), SearchOptions()
    )
    with pytest.raises(UsageError, match="give at least one latency target"):
        recommend(request, sessions)
    with pytest.raises(UsageError, match="^the load scale 0: expected a positive number"):
        recommend(
            replace(
                request,
                slo=SLO(ttft_s=2.0),
                demand=DemandChoice(dataset=DATASET, load_scale=0),
                names=LimitNames(load_scale="the load scale"),
            ),
            sessions,
        )
    assert opened == []


def test_a_recommendation_not_to_save_is_returned_and_not_stored(store: Store) -> None:
    request = RecommendRequest(
        DemandChoice(dataset=DATASET, load_scale=0.1),
        SLO(ttft_s=2.0, tpot_s=0.2),
        Constraints(model="llama-3.1-8b", gpus=("L4",), precisions=("fp8",)),
        SearchOptions(verify_top=2, tighten_steps=0, growth_check=False, compare_gpus=False),
        save=False,
    )
    stages: list[str] = []
    found = recommend(request, store.session, stage=stages.append)
    assert found.data["winner"] is not None and found.data["winner"]["gpu"] == "L4"
    assert found.stored_id is None and found.not_stored is None and "id" not in found.data
    assert found.data["demand"]["source"] == "dataset demo x 0.1"
    assert stages == ["reading prices", "screen"]
    with store.session() as session:
        assert list_briefs(session) == []
