"""Load as benchmarks and gateways make it, through the use cases: a closed loop of clients in
``simulate`` (:func:`run_clients`, :func:`simulate` with ``clients``), the arrival options of a
synthetic workload, the closed loop's percentiles in ``latency --concurrency`` and the replay of
imported benchmark runs (``bench import --replay``). Real simulations, no mocks."""

from __future__ import annotations

import math
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy.orm import Session

from planner.bench.importers import import_result
from planner.errors import UsageError
from planner.latency.model import LatencyModel
from planner.latency.predict import LatencyQuery
from planner.latency.profile import choose_profile, load_bundled_profiles
from planner.simulate.closed_loop import ClosedLoop, run_closed_loop
from planner.simulate.engine import RooflineStepTimes
from planner.simulate.inputs import (
    DemandSource,
    FleetSettings,
    WhatIf,
    arrival_process,
    build_fleet,
    check_closed_loop,
)
from planner.simulate.metrics import SLO
from planner.simulate.run import ServingSpec
from planner.simulate.workload import Workload, synthetic
from planner.usecases.bench_import import BenchImportRequest, import_bench, replay_runs
from planner.usecases.predict import ClientOptions, predict_latency
from planner.usecases.simulate import (
    ClientLoad,
    PreparedRun,
    SimulateRequest,
    open_load_model,
    run_clients,
    simulate,
)
from planner.workload.rates import RateCurve
from tests.conftest import ROOT

START = datetime(2026, 1, 1, tzinfo=UTC)
SERVING = ServingSpec(gpu="H100-SXM", model="llama-3.1-8b", precision="fp8", engine="trtllm")
STAGES = ROOT / "tests" / "fixtures" / "serving" / "inference-perf"
GENAI_PERF = (
    ROOT / "tests" / "fixtures" / "serving" / "genai-perf_c100_profile_export_genai_perf.json"
)


def no_store() -> AbstractContextManager[Session | None]:
    raise AssertionError("the store was opened before the request was checked")


def _workload(inputs: list[int], outputs: list[int], classes: list[int] | None = None) -> Workload:
    n = len(inputs)
    return Workload(
        start=START,
        arrival_s=np.arange(n, dtype=np.float64),
        input_tokens=np.array(inputs, dtype=np.int64),
        output_tokens=np.array(outputs, dtype=np.int64),
        class_index=np.array(classes or [0] * n, dtype=np.int16),
        classes=("a", "b") if classes else ("default",),
    )


def _prepared(
    workload: Workload, replicas: int = 1, prices: dict[str, float] | None = None
) -> PreparedRun:
    fleet = build_fleet(FleetSettings(replicas=replicas), tp=1)
    profile = choose_profile(load_bundled_profiles(), "H100-SXM", "trtllm")
    slos = {name: SLO(ttft_s=2.0) for name in workload.classes}
    return PreparedRun(workload, SERVING, fleet, profile, slos, prices, replicas)


# --- simulate --clients ----------------------------------------------------------------------


def test_a_closed_loop_is_summarised_as_an_open_loop_is(tmp_path: Path) -> None:
    workload = _workload([500, 2000, 800], [100, 50, 300], classes=[0, 1, 0])
    out = tmp_path / "requests.parquet"
    result = run_clients(
        _prepared(workload, replicas=2, prices={"on-demand": 8.0}),
        ClientLoad(16, think_s=0.2, start="synchronized"),
        600,
        requests_out=out,
    )
    overall = result.summary["all"]
    assert result.requests == overall["requests"] == overall["finished"] == 600
    assert set(result.summary["classes"]) == {"a", "b"}
    assert result.summary["classes"]["b"]["requests"] == 200  # every third request: class b
    assert 0 < overall["ttft"]["p50"] <= overall["ttft"]["p99"] <= overall["ttft"]["max"]
    assert overall["slo_attainment"] is not None
    assert result.load_model == "closed loop: 16 clients, synchronized, think 0.2 s"
    assert result.to_dict()["load_model"] == result.load_model
    assert result.serving["router"] == "least-requests" and result.serving["engine"] == "trtllm"
    # lengths taken in order and cycled
    frame = pd.read_parquet(out)
    assert len(frame) == 600
    assert frame["input_tokens"].tolist()[:6] == [500, 2000, 800, 500, 2000, 800]
    assert (frame["first_token_s"] >= frame["arrival_s"]).all()
    # never more than 16 requests inside: each client waits for its answer
    inside = [((frame.arrival_s <= t) & (frame.finish_s > t)).sum() for t in frame.arrival_s]
    assert max(inside) <= 16
    # two replicas for the whole run, priced per GPU-hour
    hours = result.fleet.gpu_hours["on-demand"]
    assert hours == pytest.approx(2 * result.simulated_s / 3600)
    assert result.cost is not None and result.cost["total"] == pytest.approx(8.0 * hours)
    timeline = result.timeline
    assert timeline["replicas_up"].max() == 2
    assert (timeline["queued"] + timeline["running"]).max() <= 16
    assert any("cycled" in note for note in result.notes)


def test_the_summary_matches_the_closed_loop_driver() -> None:
    workload = _workload([1000], [200])
    load = ClientLoad(8)
    result = run_clients(_prepared(workload), load, 200)
    prepared = _prepared(workload)
    deployment = SERVING.deployment()
    times = RooflineStepTimes(LatencyModel(deployment, prepared.profile), deployment.max_seqs)
    direct = run_closed_loop(
        times,
        SERVING.engine_config(deployment),
        ClosedLoop(8, 200),
        workload.input_tokens,
        workload.output_tokens,
    ).summary()
    assert result.summary["all"]["ttft"]["mean"] * 1e3 == pytest.approx(direct["ttft_mean_ms"])
    assert result.summary["all"]["e2e"]["mean"] * 1e3 == pytest.approx(direct["e2e_mean_ms"])


def test_waves_of_identical_requests_queue_their_prompts() -> None:
    """GenAI-Perf's lock-step clients: a wave of N identical prompts arrives at once, so the
    last prompt of each wave waits for the others; mean TTFT grows with N."""
    workload = _workload([2000], [100])
    means = []
    for clients in (1, 8, 32, 64):
        result = run_clients(_prepared(workload), ClientLoad(clients, start="waves"), 4 * clients)
        means.append(result.summary["all"]["ttft"]["mean"])
    assert means == sorted(means) and means[-1] > 8 * means[0]


def test_staggered_starts_spread_the_first_requests() -> None:
    workload = _workload([1000], [200])
    synchronized = run_clients(_prepared(workload), ClientLoad(32), 32)
    staggered = run_clients(_prepared(workload), ClientLoad(32, start="staggered"), 32)
    assert synchronized.summary["first_arrival_s"] == 0
    first_ttft = synchronized.summary["all"]["ttft"]["mean"]
    assert staggered.summary["all"]["ttft"]["mean"] < first_ttft
    assert any("spread over" in note for note in staggered.notes)


def test_an_over_long_prompt_is_refused_and_its_client_goes_on() -> None:
    capacity = SERVING.deployment().kv_capacity_tokens
    workload = _workload([capacity + 10, 500], [10, 50])
    result = run_clients(_prepared(workload), ClientLoad(2), 10)
    overall = result.summary["all"]
    assert overall["rejected"] == 5 and overall["finished"] == 5
    assert result.fleet.rejected_too_long == 5
    assert any("longer than the whole KV cache" in note for note in result.notes)


@pytest.mark.parametrize(
    ("load", "fleet", "message"),
    [
        (ClientLoad(0), FleetSettings(), "--clients 0"),
        (ClientLoad(4, think_s=math.nan), FleetSettings(), "--think-time nan"),
        (ClientLoad(4, start="sideways"), FleetSettings(), "--client-start 'sideways'"),
        (ClientLoad(4), FleetSettings(autoscale=True), "--autoscale cannot go with it"),
        (ClientLoad(4), FleetSettings(schedule=(1, 2)), "--schedule"),
        (ClientLoad(4), FleetSettings(spot=1), "--spot"),
        (ClientLoad(4), FleetSettings(router="round-robin"), "--router"),
        (ClientLoad(4), FleetSettings(rate_limits={"x": (1.0, 1.0)}), "--rate-limit"),
        (ClientLoad(4), FleetSettings(replicas=0), "at least one replica"),
    ],
)
def test_a_closed_loop_refuses_what_it_cannot_run_before_the_store(
    load: ClientLoad, fleet: FleetSettings, message: str
) -> None:
    whatif = WhatIf(serving=SERVING, demand=DemandSource(dataset="x"), fleet=fleet)
    with pytest.raises(UsageError, match=message):
        simulate(SimulateRequest(whatif, clients=load), no_store)


def test_the_closed_loop_check_names_the_open_loop_options() -> None:
    whatif = WhatIf(serving=SERVING, demand=DemandSource(dataset="x", load_scale=2.0))
    with pytest.raises(UsageError, match="--load-scale"):
        check_closed_loop(whatif)
    plain = WhatIf(serving=SERVING, demand=DemandSource(dataset="x"))
    check_closed_loop(plain)
    with pytest.raises(UsageError, match="--arrival, --cv"):
        check_closed_loop(plain, arrival_given=True, cv_given=True)


# --- open-loop arrivals ----------------------------------------------------------------------


def test_arrival_options() -> None:
    assert arrival_process(None, None, has_rates=True) == (1.0, False)
    assert arrival_process(None, 2.5, has_rates=True) == (2.5, False)  # --cv as before
    assert arrival_process("poisson", None, has_rates=True) == (1.0, False)
    assert arrival_process("Constant", None, has_rates=True) == (1.0, True)
    assert arrival_process("bursty", None, has_rates=True) == (2.0, False)
    assert arrival_process("bursty", 4.0, has_rates=True) == (4.0, False)
    for arrival, cv, message in [
        ("gusty", None, "--arrival 'gusty': expected poisson, constant, bursty"),
        ("poisson", 2.0, "--arrival poisson has inter-arrival CV 1"),
        ("constant", 1.0, "--cv 1 does not apply"),
        ("bursty", 0.5, "bursts need an inter-arrival CV above 1"),
        ("bursty", math.inf, "--cv inf"),
    ]:
        with pytest.raises(UsageError, match=message):
            arrival_process(arrival, cv, has_rates=True)
    with pytest.raises(UsageError, match="a --dataset replay keeps the log's own"):
        arrival_process("constant", None, has_rates=False)


def test_constant_arrivals_are_evenly_spaced_at_each_hours_rate() -> None:
    curve = RateCurve(START, np.array([3600.0, 0.0, 7200.0]))
    pool = np.array([100]), np.array([10])
    workload = synthetic(curve, *pool, seed=4, constant=True)
    first, third = workload.arrival_s < 3600, workload.arrival_s >= 7200
    assert first.sum() == 3600 and third.sum() == 7200 and len(workload) == 10_800
    assert np.allclose(np.diff(workload.arrival_s[first]), 1.0)
    assert np.allclose(np.diff(workload.arrival_s[third]), 0.5)
    again = synthetic(curve, *pool, seed=4, constant=True)
    assert np.array_equal(again.arrival_s, workload.arrival_s)  # seeded phase
    poisson = synthetic(curve, *pool, seed=4)
    assert np.diff(poisson.arrival_s[poisson.arrival_s < 3600]).std() > 0.5


def test_the_open_load_model_in_words() -> None:
    assert open_load_model(DemandSource(dataset="code")) == (
        "open loop: dataset code replayed, its own arrivals"
    )
    assert "at 2x its load" in open_load_model(DemandSource(dataset="code", load_scale=2.0))
    rates = Path("rates.csv")
    assert open_load_model(DemandSource(rates=rates)) == (
        "open loop: Poisson arrivals on the rate curve rates.csv"
    )
    constant = open_load_model(DemandSource(rates=rates, constant_rate=True))
    assert "constant-rate arrivals (evenly spaced)" in constant
    assert "bursty, inter-arrival CV 3" in open_load_model(DemandSource(rates=rates, cv=3.0))


# --- latency --concurrency -------------------------------------------------------------------


def _no_profiles() -> AbstractContextManager[Session | None]:
    return nullcontext(None)  # the bundled profiles only


H100_8B = LatencyQuery(
    gpu="H100-SXM", model="llama-3.1-8b", precision="fp8", input_tokens=1000, output_tokens=200
)


def test_latency_concurrency_gets_the_closed_loops_percentiles() -> None:
    query = replace(H100_8B, concurrency=32, sim_requests=2000)
    free = predict_latency(query, _no_profiles, clients=ClientOptions("staggered")).result[
        "under_load"
    ]["percentiles"]
    waves = predict_latency(query, _no_profiles, clients=ClientOptions("waves")).result[
        "under_load"
    ]["percentiles"]
    for sim in (free, waves):
        assert sim["arrivals"] == "closed loop" and sim["clients"] == 32
        assert sim["requests"] == 2000 and sim["measured_requests"] == 2000 - 400 - 200
        for key in ("ttft", "tpot", "e2e"):
            assert 0 < sim[key]["p50"] <= sim[key]["p90"] <= sim[key]["p99"]
    assert (free["client_start"], waves["client_start"]) == ("staggered", "waves")
    # 32 prompts at once: the wave's last prompt waits for the other 31; staggered clients
    # send a steady stream
    assert waves["ttft"]["mean"] > 2 * free["ttft"]["mean"]
    default = predict_latency(query, _no_profiles).result["under_load"]["percentiles"]
    assert default["client_start"] == "synchronized" and default["think_s"] == 0
    few = predict_latency(replace(query, concurrency=64, sim_requests=100), _no_profiles)
    few_load = few.result["under_load"]
    assert few_load["percentiles"] is None
    assert "--sim-requests 100 is under 3 x 64" in few_load["percentiles_note"]


def test_latency_client_options_need_a_concurrency() -> None:
    with pytest.raises(UsageError, match="give --concurrency N"):
        predict_latency(H100_8B, no_store, clients=ClientOptions())
    query = replace(H100_8B, concurrency=4)
    with pytest.raises(UsageError, match="--client-start 'up'"):
        predict_latency(query, no_store, clients=ClientOptions("up"))
    with pytest.raises(UsageError, match="--think-time -1"):
        predict_latency(query, no_store, clients=ClientOptions(think_s=-1.0))


# --- bench import --replay -------------------------------------------------------------------


def test_replay_of_real_inference_perf_stages() -> None:
    paths = (STAGES / "stage_0_lifecycle_metrics.json", STAGES / "stage_1_lifecycle_metrics.json")
    request = BenchImportRequest(
        paths, 10**8, gpu="H100-SXM", precision="fp16", store=False, replay=True
    )
    result = import_bench(request, no_store)
    assert len(result.replays) == 2
    for replay, rate in zip(result.replays, (5, 10), strict=True):
        assert replay.skipped is None and replay.profile == "vllm-default"
        assert replay.load_model.startswith(f"open loop: constant arrivals at {rate:g} req/s")
        rows = {row.metric: row for row in replay.rows}
        assert {"ttft_mean", "ttft_p99", "tpot_mean", "e2e_mean", "output_tokens_per_s"} <= set(
            rows
        )
        for row in rows.values():
            assert row.predicted is not None and row.predicted > 0
            assert row.error == pytest.approx(row.predicted / row.measured - 1)
        # a constant-rate stage well under capacity: its throughput is its rate
        assert abs(rows["output_tokens_per_s"].error or 1) < 0.05
        data = replay.to_dict()
        assert data["median_abs_error"] == pytest.approx(replay.median_abs_error)
        assert len(data["statistics"]) == len(rows)


def test_replay_needs_catalog_names_and_says_which() -> None:
    runs = import_result(GENAI_PERF, gpu="H100-SXM", needed_for=())
    with pytest.raises(UsageError, match="--replay needs") as caught:
        replay_runs(runs)
    assert "--out-csv" not in str(caught.value)
