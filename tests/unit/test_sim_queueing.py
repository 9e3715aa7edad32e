"""Queueing theory checks of the simulator: one replica that serves one request at a time is a
single-server FIFO queue, so its waits must match M/D/1 and M/M/1 and, request by request,
Lindley's recursion.

The set-up: ``max_seqs=1`` (one request in the engine at a time), an unbounded token budget (a
prompt is prefilled in one iteration), one output token (the request finishes with the prefill
that produces its first token) and :class:`LinearStepTimes` with no per-iteration cost, so a
request's service time is exactly ``input_tokens * per_token_s`` and the time it waits in the
queue is ``first_token - arrival - service``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import numpy as np
import pytest
from numpy.typing import NDArray

from planner.simulate.engine import EngineConfig, LinearStepTimes
from planner.simulate.fleet import Fleet, FleetConfig
from planner.simulate.workload import Workload

D = 1.0  # mean service time, seconds
TOKENS = 10_000  # prompt tokens of a request of mean size
PER_TOKEN_S = D / TOKENS
ONE_SLOT = EngineConfig(max_seqs=1, max_batched_tokens=10**9)
# One request at a time is the same queue under every admission policy.
ONE_SLOT_BY_POLICY = {
    "preempt": ONE_SLOT,
    "preempt-watermark": EngineConfig(max_seqs=1, max_batched_tokens=10**9, watermark=0.01),
    "no_evict": EngineConfig(max_seqs=1, max_batched_tokens=10**9, admission="no_evict"),
}
START = datetime(2024, 1, 1, tzinfo=UTC)
SEED = 2

Service = Literal["deterministic", "exponential"]


def poisson_workload(n: int, rho: float, service: Service, seed: int) -> Workload:
    """``n`` Poisson arrivals at rate ``rho / D``; prompts of ``TOKENS`` tokens, constant or
    exponential (rounded, at least 1); one output token each."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(D / rho, n))
    if service == "deterministic":
        tokens = np.full(n, TOKENS, dtype=np.int64)
    else:
        tokens = np.maximum(1, np.rint(rng.exponential(TOKENS, n))).astype(np.int64)
    return Workload(
        start=START,
        arrival_s=arrival,
        input_tokens=tokens,
        output_tokens=np.ones(n, dtype=np.int64),
        class_index=np.zeros(n, dtype=np.int16),
        classes=("default",),
    )


def serve(workload: Workload, config: EngineConfig = ONE_SLOT) -> dict[str, NDArray[np.generic]]:
    """Run the one-slot replica; the output columns, in request order."""
    chunks: list[dict[str, NDArray[np.generic]]] = []
    Fleet(
        workload,
        LinearStepTimes(per_token_s=PER_TOKEN_S),
        config,
        FleetConfig(),
        on_chunk=chunks.append,
    ).run()
    columns = {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]}
    order = np.argsort(columns["request_id"], kind="stable")
    return {name: values[order] for name, values in columns.items()}


def waits(workload: Workload, config: EngineConfig = ONE_SLOT) -> NDArray[np.float64]:
    """Each request's time in the queue: first token - arrival - its service time."""
    out = serve(workload, config)
    assert len(out["request_id"]) == len(workload)
    assert not out["rejected"].any()
    service = workload.input_tokens * PER_TOKEN_S
    wait: NDArray[np.float64] = (
        out["first_token_s"].astype(np.float64) - workload.arrival_s - service
    )
    return wait


def lindley(arrival: NDArray[np.float64], service: NDArray[np.float64]) -> NDArray[np.float64]:
    """Waits of a FIFO single-server queue: w[i+1] = max(0, w[i] + s[i] - (a[i+1] - a[i]))."""
    w = np.zeros(len(arrival))
    for i in range(len(arrival) - 1):
        w[i + 1] = max(0.0, w[i] + service[i] - (arrival[i + 1] - arrival[i]))
    return w


def theory(rho: float, service: Service) -> float:
    """Mean wait in queue: Pollaczek-Khinchine, rho * E[S^2] / (2 E[S] (1 - rho))."""
    if service == "deterministic":
        return rho * D / (2 * (1 - rho))  # M/D/1: E[S^2] = D^2
    return rho * D / (1 - rho)  # M/M/1: E[S^2] = 2 D^2


# (rho, requests): the standard error of the mean wait grows like 1 / (1 - rho)^2, so heavier
# load needs more requests for a 2% tolerance. Over seeds 0-7 every case stayed within 1.9% of
# theory; SEED 2 is within 0.7%.
LOADS = [(0.5, 500_000), (0.8, 1_000_000), (0.9, 2_000_000)]


@pytest.mark.parametrize("service", ["deterministic", "exponential"])
@pytest.mark.parametrize(("rho", "n"), LOADS, ids=[f"rho{rho}" for rho, _ in LOADS])
def test_mean_wait_matches_queueing_theory(service: Service, rho: float, n: int) -> None:
    measured = float(waits(poisson_workload(n, rho, service, SEED)).mean())
    expected = theory(rho, service)
    assert measured == pytest.approx(expected, rel=0.02), (measured, expected)


@pytest.mark.parametrize("policy", sorted(ONE_SLOT_BY_POLICY))
@pytest.mark.parametrize("service", ["deterministic", "exponential"])
def test_waits_follow_lindley_recursion_exactly(service: Service, policy: str) -> None:
    workload = poisson_workload(20_000, 0.85, service, seed=7)
    service_s = (workload.input_tokens * PER_TOKEN_S).astype(np.float64)
    simulated = waits(workload, ONE_SLOT_BY_POLICY[policy])
    expected = lindley(workload.arrival_s, service_s)
    np.testing.assert_allclose(simulated, expected, rtol=0, atol=1e-9)
    # a nontrivial queue: many requests wait, some do not
    assert 0.2 < float((expected > 0).mean()) < 0.95


@pytest.mark.parametrize("policy", sorted(ONE_SLOT_BY_POLICY))
def test_requests_are_served_in_arrival_order_one_at_a_time(policy: str) -> None:
    workload = poisson_workload(5_000, 0.9, "exponential", seed=3)
    out = serve(workload, ONE_SLOT_BY_POLICY[policy])
    first = out["first_token_s"].astype(np.float64)
    start = first - workload.input_tokens * PER_TOKEN_S
    assert np.all(np.diff(first) > 0)  # FIFO
    # service periods do not overlap: each starts when the previous one has ended
    assert np.all(start[1:] >= first[:-1] - 1e-9)
    # with one output token a request finishes with its first token
    np.testing.assert_array_equal(out["finish_s"], out["first_token_s"])


def test_busy_time_is_the_offered_load() -> None:
    # the replica's busy seconds (what the autoscaler's utilization reads) are the sum of the
    # service times, and over the run they are the load rho
    workload = poisson_workload(50_000, 0.7, "exponential", seed=11)
    chunks: list[dict[str, NDArray[np.generic]]] = []
    fleet = Fleet(
        workload,
        LinearStepTimes(per_token_s=PER_TOKEN_S),
        ONE_SLOT,
        FleetConfig(),
        on_chunk=chunks.append,
    )
    fleet.run()
    busy = fleet.members[0].replica.busy_s
    assert busy == pytest.approx(float(workload.input_tokens.sum()) * PER_TOKEN_S, rel=1e-9)
    assert busy / fleet.end_s == pytest.approx(0.7, rel=0.03)
