"""``prepare_whatif`` and ``run_whatif`` on real stores (SQLite, and PostgreSQL when
configured) with the Azure conversation trace: the workload, fleet, profile and targets they
build are those the pieces build one by one, the run is ``simulate()``'s, and a run too big is
refused before the store is opened."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy.orm import Session

from planner.errors import UsageError
from planner.ingest import ingest_file
from planner.latency.engines import get_engine
from planner.latency.registry import engine_profile
from planner.simulate.inputs import DemandSource, FleetSettings, ReplicaPrices, WhatIf, build_fleet
from planner.simulate.metrics import SLO
from planner.simulate.results import read_requests, request_cdfs
from planner.simulate.run import ServingSpec, simulate
from planner.simulate.workload import synthetic
from planner.store import Store
from planner.store.calibrations import known_profiles
from planner.usecases.load import from_dataset, token_pool, workload_for
from planner.usecases.simulate import SimulateRequest, prepare_whatif, run_whatif
from planner.usecases.simulate import simulate as simulate_whatif
from planner.workload.rates import RateCurve
from tests.conftest import AZURE_CONV, AZURE_CONV_NAME

SERVING = ServingSpec(gpu="L4", model="llama-3.1-8b", kv_cache="BF16", engine="VLLM")
DEMAND = DemandSource(dataset=AZURE_CONV_NAME, load_scale=0.05)
WHATIF = WhatIf(
    serving=SERVING,
    demand=DEMAND,
    fleet=FleetSettings(replicas=1, spot=1, spot_interruptions_per_hour=0.5),
    prices=ReplicaPrices(on_demand=0.8, spot=0.35),
    slo=SLO(ttft_s=2.0, tpot_s=0.2),
    class_slos=(),
    seed=3,
)


@pytest.fixture
def conv(store: Store) -> Store:
    ingest_file(store, AZURE_CONV)
    return store


def sessions_of(store: Store) -> tuple[list[bool], Callable[[], AbstractContextManager[Session]]]:
    """A session scope over ``store`` that records each time it is opened."""
    opened: list[bool] = []

    @contextmanager
    def scope() -> Iterator[Session]:
        opened.append(True)
        with store.session() as session:
            yield session

    return opened, scope


def test_prepare_builds_what_the_pieces_build(conv: Store) -> None:
    opened, scope = sessions_of(conv)
    prepared = prepare_whatif(WHATIF, scope)
    assert opened == [True]  # one session, for the workload and the profile
    # the KV-cache precision and the engine's name normalized, as the CLI does
    assert prepared.serving == replace(SERVING, kv_cache="fp16", engine="vllm")
    assert prepared.fleet == build_fleet(WHATIF.fleet, tp=1, seed=3)
    assert prepared.fleet_size == 2
    assert prepared.prices == {"on-demand": 0.8, "spot": 0.35}
    with conv.session() as session:
        workload = from_dataset(session, AZURE_CONV_NAME, load_scale=0.05, seed=3)
        profile = engine_profile(known_profiles(session), "L4", get_engine("vllm"), None)
    assert np.array_equal(prepared.workload.arrival_s, workload.arrival_s)
    assert np.array_equal(prepared.workload.input_tokens, workload.input_tokens)
    assert prepared.profile == profile
    assert prepared.slos == dict.fromkeys(workload.classes, WHATIF.slo)


def test_a_run_is_simulate_with_the_same_inputs(conv: Store, tmp_path: Path) -> None:
    _, scope = sessions_of(conv)
    prepared = prepare_whatif(WHATIF, scope)
    out = tmp_path / "requests.parquet"
    result = run_whatif(prepared, requests_out=out, confidence=None)  # no intervals: as simulate
    direct = simulate(
        prepared.workload,
        prepared.serving,
        prepared.fleet,
        prepared.profile,
        slos=prepared.slos,
        price_per_replica_hour=prepared.prices,
    )
    assert result.summary == direct.summary
    assert result.cost == direct.cost and result.cost is not None
    assert set(result.cost["by_purchase"]) == {"on-demand", "spot"}
    requests = read_requests(out)
    assert len(requests) == result.requests == len(prepared.workload)
    cdfs = request_cdfs(requests)
    ttft = cdfs[cdfs["metric"] == "ttft"]
    assert ttft["ms"].iloc[-1] == pytest.approx(result.summary["all"]["ttft"]["max"] * 1e3)


def test_a_fleet_too_big_is_refused_before_the_store_is_opened(conv: Store) -> None:
    opened, scope = sessions_of(conv)
    huge = replace(WHATIF, fleet=FleetSettings(replicas=1_000), max_requests=10)
    with pytest.raises(UsageError, match="a fleet of up to 1,000 replicas is over the 1 that"):
        prepare_whatif(huge, scope)
    assert not opened
    too_many = replace(WHATIF, demand=replace(DEMAND, load_scale=1.0), max_requests=1_000)
    with pytest.raises(UsageError, match="19,366 requests at --load-scale 1 comes to about"):
        prepare_whatif(too_many, scope)


def test_unknown_classes_in_targets_are_refused(conv: Store) -> None:
    _, scope = sessions_of(conv)
    with pytest.raises(UsageError, match="--slo: unknown class 'batch'"):
        prepare_whatif(replace(WHATIF, class_slos=("batch:ttft=1s",)), scope)


def test_a_rate_curve_draws_a_datasets_lengths(conv: Store) -> None:
    curve = RateCurve(datetime(2025, 1, 20, tzinfo=UTC), np.array([600.0, 300.0]))
    demand = DemandSource(rates=curve, rates_label="forecast #1", tokens_from=AZURE_CONV_NAME)
    with conv.session() as session:
        workload = workload_for(session, demand, seed=5)
        inputs, outputs = token_pool(session, AZURE_CONV_NAME)
        expected = synthetic(curve, inputs, outputs, seed=5)
        assert np.array_equal(workload.arrival_s, expected.arrival_s)
        with pytest.raises(UsageError, match="--rates needs --tokens-from DATASET"):
            workload_for(session, replace(demand, tokens_from=None))
        nothing = RateCurve(curve.start, np.array([1e-9]))
        with pytest.raises(UsageError, match="the rate curve 'forecast #1' asks for 1e-09"):
            workload_for(session, replace(demand, rates=nothing))


def test_the_use_case_is_prepare_then_run(conv: Store, tmp_path: Path) -> None:
    """``simulate`` (what the CLI and the What-if page call) is prepare then run, with the
    progress told the total first."""
    opened, scope = sessions_of(conv)
    seen: list[tuple[int, int]] = []
    out = tmp_path / "requests.csv"
    done = simulate_whatif(
        SimulateRequest(WHATIF, requests_out=out),
        scope,
        progress=lambda count, total: seen.append((count, total)),
    )
    assert opened == [True]
    prepared = prepare_whatif(WHATIF, scope)
    assert done.start == prepared.workload.start
    assert done.simulation.summary == run_whatif(prepared).summary
    assert seen[0] == (0, len(prepared.workload))
    assert seen[-1] == (len(prepared.workload), len(prepared.workload))
    assert out.exists()


def test_a_requests_file_of_no_known_format_is_refused_before_the_store_is_opened(
    conv: Store, tmp_path: Path
) -> None:
    opened, scope = sessions_of(conv)
    request = SimulateRequest(WHATIF, requests_out=tmp_path / "requests.xlsx")
    with pytest.raises(UsageError, match=r"--out-requests .*unsupported output format '\.xlsx'"):
        simulate_whatif(request, scope)
    assert not opened
