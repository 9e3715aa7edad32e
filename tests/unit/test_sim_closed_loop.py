"""Closed-loop and open-loop load over the simulator's replica (planner.simulate.closed_loop)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from planner.latency.profile import Profile
from planner.simulate.closed_loop import ClosedLoop, run_closed_loop, run_open_loop
from planner.simulate.engine import EngineConfig, LinearStepTimes
from planner.simulate.fleet import FleetConfig
from planner.simulate.run import ServingSpec, simulate
from planner.simulate.workload import Workload

# 1 ms per token and 2 ms per iteration: a prompt of 100 tokens takes 102 ms alone
TIMES = LinearStepTimes(per_token_s=1e-3, per_iteration_s=2e-3)
ONE = np.array([100]), np.array([10])


def test_one_client_sends_back_to_back() -> None:
    """One client, no think time: each request starts when the last one ended, so the run's
    span is exactly the sum of the requests' times, and none waits."""
    run = run_closed_loop(TIMES, EngineConfig(), ClosedLoop(1, 5), *ONE)
    e2e = run.finish - run.arrival
    assert np.allclose(run.arrival[1:], run.finish[:-1])
    # prefill 100 tokens (102 ms), then 9 decode steps of one token (3 ms each)
    assert np.allclose(e2e, 0.102 + 9 * 0.003)
    assert np.allclose(run.first_token - run.arrival, 0.102)


def test_think_time_delays_the_next_request() -> None:
    run = run_closed_loop(TIMES, EngineConfig(), ClosedLoop(1, 4, think_s=0.5), *ONE)
    assert np.allclose(run.arrival[1:] - run.finish[:-1], 0.5)


def test_throughput_obeys_littles_law() -> None:
    """N clients with think time Z: throughput X = N / (mean E2E + Z) in steady state."""
    load = ClosedLoop(8, 800, think_s=0.05, start="staggered", stagger_s=0.2)
    run = run_closed_loop(TIMES, EngineConfig(), load, *ONE).measured(80)
    e2e = float(np.mean(run.finish - run.arrival))
    span = float(run.arrival[-1] - run.arrival[0])
    rate = (len(run.arrival) - 1) / span
    assert rate == pytest.approx(8 / (e2e + 0.05), rel=0.03)


def test_never_more_requests_inside_than_clients() -> None:
    run = run_closed_loop(TIMES, EngineConfig(), ClosedLoop(4, 200), *ONE)
    events = sorted([(t, 1) for t in run.arrival] + [(t, -1) for t in run.finish])
    inside = np.cumsum([d for _, d in events])
    assert inside.max() == 4


def test_waves_send_together_and_the_last_prompt_waits_for_the_others() -> None:
    """Lock-step waves: every client of a wave sends at the same time, after the whole previous
    wave has returned, so the k-th prompt of a wave waits for the k - 1 before it."""
    config = EngineConfig(max_batched_tokens=100)  # one prompt per iteration
    run = run_closed_loop(TIMES, config, ClosedLoop(5, 15, start="waves"), *ONE)
    waves = run.arrival.reshape(3, 5)
    assert (waves == waves[:, :1]).all()  # each wave's 5 requests arrive together
    assert (waves[1:, 0] >= run.finish.reshape(3, 5)[:-1].max(axis=1) - 1e-12).all()
    ttft = np.sort((run.first_token - run.arrival)[:5])
    assert (np.diff(ttft) > 0).all()  # one more prompt ahead of each
    assert ttft[-1] > 4 * 0.1  # the last waited for four prompts of 100 ms


def test_synchronized_clients_drift_apart_but_waves_do_not() -> None:
    config = EngineConfig(max_batched_tokens=100)
    free = run_closed_loop(TIMES, config, ClosedLoop(5, 50, start="synchronized"), *ONE)
    waves = run_closed_loop(TIMES, config, ClosedLoop(5, 50, start="waves"), *ONE)
    assert len(np.unique(waves.arrival)) == 10
    assert len(np.unique(free.arrival)) > 10
    assert np.mean(waves.first_token - waves.arrival) > np.mean(free.first_token - free.arrival)


def test_open_loop_matches_the_fleet_simulator() -> None:
    """The open-loop driver and planner.simulate's fleet run the same replica: one replica fed
    the same arrivals gives the same times."""
    rng = np.random.default_rng(3)
    arrivals = np.cumsum(rng.exponential(0.05, 300))
    inputs = rng.integers(50, 400, 300)
    outputs = rng.integers(5, 60, 300)
    workload = Workload(
        start=datetime(2026, 1, 1, tzinfo=UTC),
        arrival_s=arrivals,
        input_tokens=inputs.astype(np.int64),
        output_tokens=outputs.astype(np.int64),
        class_index=np.zeros(300, dtype=np.int16),
        classes=("default",),
    )
    serving = ServingSpec(gpu="H100-SXM", model="llama-3.1-8b", engine="vllm")
    deployment = serving.deployment()
    config = serving.engine_config(deployment)
    fleet = simulate(workload, serving, FleetConfig(), _profile(), times=TIMES)
    ours = run_open_loop(TIMES, config, arrivals, inputs, outputs)
    e2e = ours.finish - ours.arrival
    stats = fleet.summary["all"]["e2e"]
    assert stats["mean"] == pytest.approx(float(e2e.mean()), rel=1e-9)
    assert stats["max"] == pytest.approx(float(e2e.max()), rel=1e-9)


def _profile() -> Profile:
    return Profile(name="unused", engine="vllm")


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"clients": 0, "requests": 5}, "clients 0"),
        ({"clients": 2, "requests": 0}, "requests 0"),
        ({"clients": 2, "requests": 5, "think_s": float("nan")}, "think time"),
        ({"clients": 2, "requests": 5, "start": "sometimes"}, "start 'sometimes'"),
    ],
)
def test_bad_loads_are_refused(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        ClosedLoop(**kwargs)  # type: ignore[arg-type]
