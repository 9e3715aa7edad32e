"""The fleet (planner.simulate.fleet): routers, hourly schedules, the autoscaler, spot
interruptions, rate limits, the response cache, and the cost that simulate() reports."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from planner.errors import UsageError
from planner.latency.profile import choose_profile, load_bundled_profiles
from planner.simulate.engine import EngineConfig, LinearStepTimes, StepTimes
from planner.simulate.fleet import (
    ROUTERS,
    Autoscaler,
    Fleet,
    FleetConfig,
    FleetStats,
    TimelineSample,
)
from planner.simulate.run import ServingSpec, simulate
from planner.simulate.workload import Workload

START = datetime(2024, 1, 1, tzinfo=UTC)
Columns = dict[str, NDArray[Any]]


def workload(
    arrival: list[float] | NDArray[np.float64],
    inputs: list[int] | NDArray[np.int64] | int,
    outputs: list[int] | NDArray[np.int64] | int,
    classes: list[int] | NDArray[np.int64] | None = None,
    names: tuple[str, ...] = ("default",),
    blocks: list[tuple[int, ...]] | None = None,
) -> Workload:
    n = len(arrival)
    return Workload(
        start=START,
        arrival_s=np.asarray(arrival, dtype=np.float64),
        input_tokens=np.broadcast_to(np.asarray(inputs, dtype=np.int64), (n,)).copy(),
        output_tokens=np.broadcast_to(np.asarray(outputs, dtype=np.int64), (n,)).copy(),
        class_index=np.asarray(classes if classes is not None else np.zeros(n), dtype=np.int16),
        classes=names,
        prefix_blocks=blocks,
    )


class Run:
    """A fleet run: output columns in request order, its stats, the fleet and its timeline."""

    def __init__(
        self,
        w: Workload,
        times: StepTimes,
        engine: EngineConfig,
        config: FleetConfig,
    ) -> None:
        chunks: list[Columns] = []
        self.samples: list[TimelineSample] = []
        self.fleet = Fleet(
            w, times, engine, config, on_chunk=chunks.append, on_sample=self.samples.append
        )
        self.stats: FleetStats = self.fleet.run()
        columns = {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]}
        order = np.argsort(columns["request_id"], kind="stable")
        self.out: Columns = {name: values[order] for name, values in columns.items()}
        # every request comes out exactly once
        np.testing.assert_array_equal(self.out["request_id"], np.arange(len(w)))

    @property
    def ttft(self) -> NDArray[np.float64]:
        result: NDArray[np.float64] = self.out["first_token_s"] - self.out["arrival_s"]
        return result

    def served_by(self, replica: int) -> NDArray[np.bool_]:
        result: NDArray[np.bool_] = self.out["replica"] == replica
        return result


def poisson(rate: float, duration: float, seed: int) -> NDArray[np.float64]:
    rng = np.random.default_rng(seed)
    result: NDArray[np.float64] = np.sort(rng.uniform(0, duration, rng.poisson(rate * duration)))
    return result


# --- routers -------------------------------------------------------------------------------


def test_round_robin_spreads_requests_evenly() -> None:
    arrival = poisson(5, 200, seed=0)
    rng = np.random.default_rng(1)
    inputs = rng.integers(10, 3000, len(arrival))
    run = Run(
        workload(arrival, inputs, 20),
        LinearStepTimes(per_token_s=1e-5, per_iteration_s=1e-3),
        EngineConfig(),
        FleetConfig(replicas={"on-demand": 4}, router="round-robin"),
    )
    counts = np.bincount(run.out["replica"], minlength=4)
    assert len(counts) == 4 and counts.sum() == len(arrival)
    assert counts.max() - counts.min() <= 1


def heterogeneous(seed: int) -> Workload:
    # 20 rps; one request in ten is 100 times longer
    rng = np.random.default_rng(seed)
    n = 4000
    arrival = np.cumsum(rng.exponential(1 / 20, n))
    big = rng.random(n) < 0.1
    return workload(arrival, np.where(big, 20_000, 200), np.where(big, 500, 50))


@pytest.mark.parametrize("seed", [0, 1])
def test_least_requests_beats_round_robin_on_p99_ttft(seed: int) -> None:
    w = heterogeneous(seed)
    times = LinearStepTimes(per_token_s=2e-5, per_iteration_s=5e-3)
    engine = EngineConfig(max_seqs=8, max_batched_tokens=4096)
    p99 = {}
    for router in ("round-robin", "least-requests"):
        run = Run(w, times, engine, FleetConfig(replicas={"on-demand": 4}, router=router))
        p99[router] = float(np.percentile(run.ttft, 99))
    # round robin keeps sending requests to a replica stuck behind long prompts
    assert p99["least-requests"] < 0.8 * p99["round-robin"]


def test_least_tokens_routes_by_outstanding_tokens() -> None:
    # request 0 (22,000 tokens) goes to replica 0; ten small ones (110 tokens) follow at once
    w = workload([0.0] + [0.001] * 10, [20_000] + [100] * 10, [2000] + [10] * 10)
    times = LinearStepTimes(per_token_s=1e-4)
    by_tokens = Run(
        w, times, EngineConfig(), FleetConfig(replicas={"on-demand": 2}, router="least-tokens")
    )
    # all small requests together hold fewer tokens than the big one
    np.testing.assert_array_equal(by_tokens.out["replica"], [0] + [1] * 10)
    by_requests = Run(
        w, times, EngineConfig(), FleetConfig(replicas={"on-demand": 2}, router="least-requests")
    )
    # counting requests, the big one weighs as much as a small one
    np.testing.assert_array_equal(by_requests.out["replica"], [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0])


def prefix_groups(groups: int, seed: int) -> tuple[Workload, NDArray[np.int64]]:
    """Requests of ``groups`` conversations: each shares its group's 4 prefix blocks (2048
    tokens) and has one block of its own; 4 rps for 100 s."""
    rng = np.random.default_rng(seed)
    arrival = poisson(4, 100, seed)
    group = rng.integers(0, groups, len(arrival))
    blocks = [(*(1000 * int(g) + k for k in range(4)), 1_000_000 + i) for i, g in enumerate(group)]
    return workload(arrival, 5 * 512, 50, blocks=blocks), group


def test_prefix_affinity_keeps_a_shared_prefix_on_one_replica() -> None:
    w, group = prefix_groups(8, seed=0)
    times = LinearStepTimes(per_token_s=1e-5, per_iteration_s=2e-3)
    engine = EngineConfig(prefix_cache_tokens=1_000_000)
    config = FleetConfig(replicas={"on-demand": 4}, router="prefix-affinity")
    affinity = Run(w, times, engine, config)
    for g in range(8):
        replicas = set(affinity.out["replica"][group == g].tolist())
        assert len(replicas) == 1, (g, replicas)
    # the groups spread over the replicas (each group's first request went to the least busy)
    assert len(set(affinity.out["replica"].tolist())) > 1
    # after its first request, every request of a group finds the 4 shared blocks cached
    first = np.array([np.flatnonzero(group == g)[0] for g in range(8)])
    later = np.ones(len(group), dtype=bool)
    later[first] = False
    assert np.all(affinity.out["cached_tokens"][later] == 4 * 512)
    least = Run(w, times, engine, replace(config, router="least-requests"))
    assert least.out["cached_tokens"].sum() < affinity.out["cached_tokens"].sum()


def test_prefix_affinity_gives_way_when_its_replica_is_overloaded() -> None:
    # one group only, and a burst: affinity would put everything on one replica
    w = workload([0.0] * 40, 5 * 512, 200, blocks=[(1, 2, 3, 4, 100 + i) for i in range(40)])
    run = Run(
        w,
        LinearStepTimes(per_token_s=1e-5, per_iteration_s=2e-3),
        EngineConfig(prefix_cache_tokens=1_000_000),
        FleetConfig(replicas={"on-demand": 4}, router="prefix-affinity", prefix_affinity_slack=8),
    )
    counts = np.bincount(run.out["replica"], minlength=4)
    assert (counts > 0).sum() > 1
    # never more than `slack` busier than the least busy replica at routing time
    assert counts.max() - counts.min() <= 8 + 1


# --- schedules and the autoscaler ----------------------------------------------------------


def test_hourly_schedule_gpu_hours() -> None:
    arrival = np.arange(0.0, 7190.0, 10.0)
    run = Run(
        workload(arrival, 500, 20),
        LinearStepTimes(per_token_s=1e-5, per_iteration_s=1e-3),
        EngineConfig(),
        FleetConfig(schedule=[1, 3], router="round-robin"),
    )
    end = run.fleet.end_s
    assert end == pytest.approx(max(float(run.out["finish_s"].max()), float(arrival[-1])))
    # one replica the whole run, two more from the second hour
    assert run.stats.gpu_hours["on-demand"] == pytest.approx(1.0 + 3 * (end - 3600) / 3600)
    assert run.stats.peak_replicas == 3
    # (round-robin, so that every replica gets requests) the new replicas serve only
    # requests that arrive from the second hour on
    late = run.out["replica"] >= 1
    assert late.any() and float(run.out["arrival_s"][late].min()) >= 3600
    # replicas of two GPUs each: twice the GPU-hours
    doubled = Run(
        workload(arrival, 500, 20),
        LinearStepTimes(per_token_s=1e-5, per_iteration_s=1e-3),
        EngineConfig(),
        FleetConfig(schedule=[1, 3], router="round-robin", gpus_per_replica=2),
    )
    assert doubled.stats.gpu_hours["on-demand"] == pytest.approx(
        2 * run.stats.gpu_hours["on-demand"]
    )


def test_hourly_schedule_scales_in_by_draining() -> None:
    arrival = np.arange(0.0, 7190.0, 2.0)
    run = Run(
        workload(arrival, 500, 20),
        LinearStepTimes(per_token_s=1e-5, per_iteration_s=1e-3),
        EngineConfig(),
        FleetConfig(schedule=[3, 1], router="round-robin"),
    )
    members = run.fleet.members
    assert len(members) == 3
    retired = [i for i, m in enumerate(members) if m.down < run.fleet.end_s]
    assert len(retired) == 2
    for i in retired:
        m = members[i]
        served = run.served_by(i)
        # retired once drained: after the hour, and after its last request finished
        assert m.down >= 3600
        assert float(run.out["arrival_s"][served].max()) < 3600
        assert float(run.out["finish_s"][served].max()) <= m.down
    hours = sum(m.down - m.launched for m in members) / 3600
    assert run.stats.gpu_hours["on-demand"] == pytest.approx(hours)


def test_schedule_of_zero_replicas_holds_requests_until_the_next_hour() -> None:
    arrival = np.arange(0.0, 7200.0, 100.0)
    run = Run(
        workload(arrival, 100, 10),
        LinearStepTimes(per_token_s=1e-4),
        EngineConfig(),
        FleetConfig(schedule=[0, 1]),
    )
    (member,) = run.fleet.members
    assert member.launched == 3600
    early = run.out["arrival_s"] < 3600
    assert not run.out["rejected"].any()
    # the first hour's requests wait for the replica of the second hour
    assert np.all(run.out["first_token_s"][early] >= 3600)
    assert run.stats.gpu_hours["on-demand"] == pytest.approx((run.fleet.end_s - 3600) / 3600)


def test_requests_refused_for_want_of_replicas_are_counted() -> None:
    arrival = np.arange(0.0, 7200.0, 100.0)
    run = Run(
        workload(arrival, 100, 10),
        LinearStepTimes(per_token_s=1e-4),
        EngineConfig(),
        FleetConfig(schedule=[1, 0]),
    )
    rejected = int(run.out["rejected"].sum())
    assert rejected == 36  # the second hour's requests
    counted = sum(v for k, v in run.stats.to_dict().items() if k.startswith("rejected"))
    assert counted == rejected


def step_load(seed: int) -> Workload:
    """2 rps for 10 minutes, 20 rps for 15 minutes, 0.5 rps for 25 minutes; each request is
    0.11 s of work on a one-slot replica (1000-token prompt, 100 output tokens)."""
    rng = np.random.default_rng(seed)
    parts, t0 = [], 0.0
    for duration, rate in ((600, 2.0), (900, 20.0), (1500, 0.5)):
        count = rng.poisson(rate * duration)
        parts.append(np.sort(rng.uniform(t0, t0 + duration, count)))
        t0 += duration
    return workload(np.concatenate(parts), 1000, 100)


STEP_TIMES = LinearStepTimes(per_token_s=1e-4)
ONE_SLOT = EngineConfig(max_seqs=1)


def autoscaled(warm_pool: int = 0) -> Run:
    scaler = Autoscaler(min_replicas=1, max_replicas=8, warm_pool=warm_pool)
    return Run(step_load(0), STEP_TIMES, ONE_SLOT, FleetConfig(autoscaler=scaler))


def test_autoscaler_scales_up_with_cold_starts_and_back_in() -> None:
    run = autoscaled()
    scaler = Autoscaler()
    members = run.fleet.members
    assert run.stats.peak_replicas > 1 and len(members) > 1
    for i, m in enumerate(members[1:], start=1):
        # launched on an autoscaler tick once the step came, ready a cold start later
        assert m.launched >= 600 and m.launched % scaler.interval_s == 0
        assert m.ready == m.launched + scaler.cold_start_s
        served = run.served_by(i)
        assert served.any()
        # no request is served by a replica before it is ready
        assert float(run.out["first_token_s"][served].min()) >= m.ready
    # sustained low load after 1500 s: replicas are drained and retired
    end = run.fleet.end_s
    assert any(m.down < end for m in members)
    up_at_end = run.samples[-1].replicas_up
    assert up_at_end < run.stats.peak_replicas
    for i, m in enumerate(members):
        if m.down < end:
            assert m.down > 1500 + Autoscaler().scale_in_after_s
            assert float(run.out["finish_s"][run.served_by(i)].max()) <= m.down
    hours = sum(m.down - m.launched for m in members) / 3600
    assert run.stats.gpu_hours["on-demand"] == pytest.approx(hours)
    assert not run.out["rejected"].any()


def first_served_by_a_new_replica(run: Run) -> float:
    new = run.out["replica"] >= 1
    return float(run.out["first_token_s"][new].min())


def test_warm_pool_makes_scale_up_faster() -> None:
    cold, warm = autoscaled(), autoscaled(warm_pool=2)
    scaler = Autoscaler()
    # the same tick launches the first new replica; warm, it is ready 38 s sooner
    assert warm.fleet.members[1].launched == cold.fleet.members[1].launched
    assert warm.fleet.members[1].ready == warm.fleet.members[1].launched + scaler.warm_start_s
    assert first_served_by_a_new_replica(warm) < first_served_by_a_new_replica(cold) - 30
    assert np.percentile(warm.ttft, 99) < np.percentile(cold.ttft, 99)
    for i, m in enumerate(warm.fleet.members[1:], start=1):
        assert m.ready - m.launched in (scaler.warm_start_s, scaler.cold_start_s)
        served = warm.served_by(i)
        assert float(warm.out["first_token_s"][served].min()) >= m.ready


def test_autoscaler_scales_to_zero_and_back_with_a_cold_start() -> None:
    w = workload([1.0, 2.0, 3.0, 2000.0, 2001.0], 1000, 100)
    run = Run(w, STEP_TIMES, ONE_SLOT, FleetConfig(autoscaler=Autoscaler(min_replicas=0)))
    first, second = run.fleet.members
    # low from the first tick (15 s), retired 300 s later
    assert first.down == 15 + 300
    # the request at 2000 s waits for the next tick to launch a replica, then its cold start
    assert (second.launched, second.ready) == (2010, 2055)
    np.testing.assert_allclose(run.out["first_token_s"][3:], [2055.1, 2055.1 + 0.10999], atol=1e-9)
    np.testing.assert_array_equal(run.out["replica"], [0, 0, 0, 1, 1])
    hours = (first.down + run.fleet.end_s - second.launched) / 3600
    assert run.stats.gpu_hours["on-demand"] == pytest.approx(hours)


def test_autoscaler_on_queue_length_scales_up() -> None:
    scaler = Autoscaler(max_replicas=10, target_utilization=None, target_queue=4)
    run = Run(step_load(0), STEP_TIMES, EngineConfig(max_seqs=4), FleetConfig(autoscaler=scaler))
    assert run.stats.peak_replicas > 1
    for i, m in enumerate(run.fleet.members[1:], start=1):
        served = run.served_by(i)
        if served.any():
            assert float(run.out["first_token_s"][served].min()) >= m.ready


def test_fleet_settings_are_checked() -> None:
    with pytest.raises(UsageError, match="router"):
        FleetConfig(router="random")
    with pytest.raises(UsageError, match="exactly one"):
        Autoscaler(target_utilization=None)
    with pytest.raises(UsageError, match="at least one replica"):
        FleetConfig(replicas={"on-demand": 0})
    with pytest.raises(UsageError, match="response cache"):
        FleetConfig(response_cache_hit_rate=1.0)


# --- spot interruptions --------------------------------------------------------------------


def test_spot_interruptions_reroute_requests_and_finish_each_once() -> None:
    arrival = poisson(2, 7200, seed=3)
    run = Run(
        workload(arrival, 2000, 300),
        LinearStepTimes(per_token_s=1e-4, per_iteration_s=5e-3),
        EngineConfig(),
        FleetConfig(replicas={"on-demand": 1, "spot": 3}, spot_interruptions_per_hour=20, seed=5),
    )
    stats = run.stats
    # 3 spot replicas at 20 an hour for 2 hours: ~120 interruptions (fewer while replacing)
    assert 40 < stats.spot_interruptions < 200
    assert stats.rerouted_requests > 0
    # each eviction counts as a preemption of the request (the KV cache is never short here)
    assert int(run.out["preemptions"].sum()) == stats.rerouted_requests
    # every request finished, once (Run checks the ids)
    assert not run.out["rejected"].any()
    assert np.all(run.out["finish_s"] >= run.out["first_token_s"])
    assert np.all(run.out["first_token_s"] >= run.out["arrival_s"])
    # every interruption launches a replacement
    assert stats.launched == 4 + stats.spot_interruptions
    assert set(stats.gpu_hours) == {"on-demand", "spot"}
    assert stats.gpu_hours["on-demand"] == pytest.approx(run.fleet.end_s / 3600)
    # the spot capacity is down while replacements start: fewer spot hours than 3 replicas
    assert stats.gpu_hours["spot"] < 3 * run.fleet.end_s / 3600
    # a request finishes on a replica that was up at the time
    for i, m in enumerate(run.fleet.members):
        served = run.served_by(i)
        if served.any():
            assert float(run.out["first_token_s"][served].min()) >= m.ready
            assert float(run.out["finish_s"][served].max()) <= m.down


def test_same_seed_same_output_and_a_new_seed_a_new_one() -> None:
    arrival = poisson(2, 3600, seed=4)
    w = workload(arrival, 1500, 200)
    times = LinearStepTimes(per_token_s=1e-4, per_iteration_s=5e-3)
    config = FleetConfig(
        replicas={"spot": 3},
        spot_interruptions_per_hour=10,
        response_cache_hit_rate=0.2,
        seed=7,
    )
    a, b = Run(w, times, EngineConfig(), config), Run(w, times, EngineConfig(), config)
    for name in a.out:
        np.testing.assert_array_equal(a.out[name], b.out[name], err_msg=name)
    assert a.stats == b.stats
    c = Run(w, times, EngineConfig(), replace(config, seed=8))
    assert not np.array_equal(c.out["response_cache_hit"], a.out["response_cache_hit"])


# --- admission control and the response cache ----------------------------------------------


def test_rate_limit_rejects_the_excess_of_its_class_only() -> None:
    # class "batch" at 10 rps for 200 s, limited to 1 rps with bursts of 2; class
    # "interactive" at 1 rps, unlimited
    batch = np.arange(0.0, 200.0, 0.1)
    interactive = np.arange(0.05, 200.0, 1.0)
    arrival = np.concatenate([batch, interactive])
    classes = np.concatenate([np.zeros(len(batch)), np.ones(len(interactive))])
    order = np.argsort(arrival, kind="stable")
    run = Run(
        workload(
            arrival[order], 200, 10, classes[order].astype(np.int64), names=("batch", "interactive")
        ),
        LinearStepTimes(per_token_s=1e-5, per_iteration_s=1e-3),
        EngineConfig(),
        FleetConfig(rate_limits={"batch": (1.0, 2.0)}),
    )
    out = run.out
    is_batch = out["class_index"] == 0
    rejected = out["rejected"]
    # the bucket lets through its burst and then one a second: ~202 of 2000
    admitted = int((is_batch & ~rejected).sum())
    assert 199 <= admitted <= 203
    assert float(rejected[is_batch].mean()) == pytest.approx(0.9, abs=0.01)
    assert not rejected[~is_batch].any()
    assert run.stats.rejected_by_rate_limit == int(rejected.sum())
    assert np.all(np.isnan(out["first_token_s"][rejected]))
    assert np.all(out["replica"][rejected] == -1)
    # admitted requests of the limited class are spaced by at least ~1 s after the burst
    times = out["arrival_s"][is_batch & ~rejected]
    assert np.all(np.diff(times[2:]) >= 0.9)


def test_response_cache_hits_take_no_time_and_are_not_routed() -> None:
    arrival = poisson(20, 500, seed=6)
    n = len(arrival)
    run = Run(
        workload(arrival, 300, 30),
        LinearStepTimes(per_token_s=1e-5, per_iteration_s=1e-3),
        EngineConfig(),
        FleetConfig(replicas={"on-demand": 2}, response_cache_hit_rate=0.3, seed=1),
    )
    out = run.out
    hit = out["response_cache_hit"]
    assert float(hit.mean()) == pytest.approx(0.3, abs=0.02)
    assert run.stats.response_cache_hits == int(hit.sum())
    # answered at arrival, by no replica, and not rejected
    np.testing.assert_array_equal(out["first_token_s"][hit], out["arrival_s"][hit])
    np.testing.assert_array_equal(out["finish_s"][hit], out["arrival_s"][hit])
    assert np.all(out["replica"][hit] == -1)
    assert not out["rejected"].any()
    # the replicas served only the misses
    assert int((out["replica"] >= 0).sum()) == n - int(hit.sum())


# --- cost ----------------------------------------------------------------------------------


@pytest.mark.parametrize("tp", [1, 2])
def test_simulate_cost_is_gpu_hours_times_price(tp: int) -> None:
    arrival = poisson(2, 300, seed=8)
    profile = choose_profile(load_bundled_profiles(), "H100-SXM")
    serving = ServingSpec(gpu="H100-SXM", model="llama-3.1-8b", precision="fp8", tp=tp)
    prices = {"on-demand": 4.0, "spot": 1.5}  # per replica-hour
    result = simulate(
        workload(arrival, 1000, 100),
        serving,
        FleetConfig(replicas={"on-demand": 2, "spot": 1}),
        profile,
        price_per_replica_hour=prices,
    )
    assert result.cost is not None
    hours = result.simulated_s / 3600  # every replica is up from 0 to the end
    # GPU-hours count each of the tp GPUs of a replica
    assert result.fleet.gpu_hours["on-demand"] == pytest.approx(2 * tp * hours)
    assert result.fleet.gpu_hours["spot"] == pytest.approx(tp * hours)
    by_purchase = result.cost["by_purchase"]
    assert by_purchase["on-demand"]["price_per_gpu_hour"] == pytest.approx(4.0 / tp)
    assert by_purchase["on-demand"]["cost"] == pytest.approx(2 * 4.0 * hours)
    assert by_purchase["spot"]["cost"] == pytest.approx(1 * 1.5 * hours)
    assert result.cost["total"] == pytest.approx((2 * 4.0 + 1.5) * hours)
    assert result.summary["all"]["finished"] == len(arrival)
    assert math.isfinite(result.summary["all"]["ttft"]["p99"])


# --- invariants over random fleets ---------------------------------------------------------


@st.composite
def fleets(draw: st.DrawFn) -> tuple[Workload, FleetConfig]:
    n = draw(st.integers(1, 80))
    spread = draw(st.sampled_from([0.1, 10.0, 100.0]))  # mean gap, seconds
    gaps = draw(st.lists(st.floats(0.0, 2 * spread), min_size=n, max_size=n))
    inputs = draw(st.lists(st.integers(1, 8000), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 500), min_size=n, max_size=n))
    classes = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    blocks: list[tuple[int, ...]] = [(int(c), 10 + i % 3) for i, c in enumerate(classes)]
    w = workload(np.cumsum(gaps), inputs, outputs, classes, names=("a", "b"), blocks=blocks)
    mode = draw(st.sampled_from(["fixed", "schedule", "autoscaler"]))
    config = FleetConfig(
        replicas={
            "on-demand": draw(st.integers(0 if mode == "fixed" else 1, 3)),
            "spot": draw(st.integers(1 if mode == "fixed" else 0, 3)),
        },
        schedule=(
            draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
            if mode == "schedule"
            else None
        ),
        autoscaler=(
            Autoscaler(
                min_replicas=draw(st.integers(0, 2)),
                max_replicas=draw(st.integers(2, 5)),
                warm_pool=draw(st.integers(0, 1)),
                scale_in_after_s=draw(st.sampled_from([30.0, 300.0])),
            )
            if mode == "autoscaler"
            else None
        ),
        router=draw(st.sampled_from(ROUTERS)),
        gpus_per_replica=draw(st.integers(1, 2)),
        spot_interruptions_per_hour=draw(st.sampled_from([0.0, 20.0, 200.0])),
        spot_replace_s=draw(st.sampled_from([0.0, 30.0])),
        rate_limits=draw(st.sampled_from([{}, {"b": (0.5, 2.0)}])),
        response_cache_hit_rate=draw(st.sampled_from([0.0, 0.3])),
        seed=draw(st.integers(0, 3)),
    )
    return w, config


FLEET_TIMES = LinearStepTimes(per_token_s=1e-4, per_iteration_s=2e-3)
FLEET_ENGINE = EngineConfig(max_seqs=8, max_batched_tokens=2048, prefix_cache_tokens=10_000)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(fleets())
def test_fleet_invariants(case: tuple[Workload, FleetConfig]) -> None:
    w, config = case
    run = Run(w, FLEET_TIMES, FLEET_ENGINE, config)  # checks every request comes out once
    out, stats, members = run.out, run.stats, run.fleet.members
    rejected, hit = out["rejected"], out["response_cache_hit"]
    served = ~rejected & ~hit
    assert not (rejected & hit).any()
    # refused: no times, no replica
    assert np.all(np.isnan(out["first_token_s"][rejected]))
    assert np.all(out["replica"][rejected | hit] == -1)
    # answered by the response cache: at once
    np.testing.assert_array_equal(out["finish_s"][hit], out["arrival_s"][hit])
    assert stats.response_cache_hits == int(hit.sum())
    # served: causal, by a replica that was up at the time
    arrival, first, finish = (out[k][served] for k in ("arrival_s", "first_token_s", "finish_s"))
    assert np.all(arrival <= first) and np.all(first <= finish)
    for i, m in enumerate(members):
        mine = out["replica"] == i
        if mine.any():
            assert float(out["first_token_s"][mine].min()) >= m.ready
            assert float(out["finish_s"][mine].max()) <= m.down
    assert set(out["replica"][served].tolist()) <= set(range(len(members)))
    # the KV cache is never short, so every preemption is an eviction by a spot interruption
    assert int(out["preemptions"].sum()) == stats.rerouted_requests
    if config.spot_interruptions_per_hour == 0:
        assert stats.spot_interruptions == stats.rerouted_requests == 0
    # GPU-hours: each replica from launch to retirement
    hours: dict[str, float] = {}
    for m in members:
        assert m.down < math.inf and m.launched <= m.ready
        spent = (m.down - m.launched) / 3600 * config.gpus_per_replica
        hours[m.purchase] = hours.get(m.purchase, 0.0) + spent
    assert stats.gpu_hours.keys() == hours.keys()
    for purchase, value in hours.items():
        assert stats.gpu_hours[purchase] == pytest.approx(value)
    assert stats.launched == len(members)
    # same inputs, same output
    again = Run(w, FLEET_TIMES, FLEET_ENGINE, config)
    for name in out:
        np.testing.assert_array_equal(out[name], again.out[name], err_msg=name)
