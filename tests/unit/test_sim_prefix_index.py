"""Prefix-affinity routing's block index (planner.simulate.fleet.PrefixIndex): after every
arrival, replica advance and fleet event of a run it holds exactly the blocks in the prefix
caches of the replicas that are up (live, not draining; small caches, so blocks are evicted
all the time; spot interruptions, autoscaling and schedules, so replicas drain and retire),
and every affinity choice is the one a scan of every candidate's cache makes."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.simulate.engine import EngineConfig, LinearStepTimes, Replica, Sequence
from planner.simulate.fleet import Autoscaler, Fleet, FleetConfig, Member, PrefixIndex
from planner.simulate.workload import Workload

TIMES = LinearStepTimes(per_token_s=2e-5, per_iteration_s=4e-3, gamma=1e-7)


def conversations(
    n: int, rate: float, seed: int, *, systems: int, turns: int, start_s: float = 0.0
) -> Workload:
    """Poisson arrivals from ``start_s`` (some at the same instant) of conversation turns: a
    system prompt's blocks shared by many conversations, then the conversation's earlier
    turns, then the new turn's own block; so requests share leading runs of every length."""
    rng = np.random.default_rng(seed)
    arrival = start_s + np.sort(np.cumsum(rng.exponential(1 / rate, n)))
    arrival[1::7] = arrival[::7][: len(arrival[1::7])]
    blocks = []
    for i in range(n):
        system = int(rng.integers(0, systems))
        conversation = int(rng.integers(0, 3 * systems))
        turn = int(rng.integers(0, turns))
        prompt = [10_000 * system + k for k in range(int(rng.integers(1, 4)))]
        history = [1_000_000 + 100 * conversation + k for k in range(turn)]
        blocks.append((*prompt, *history, 10_000_000 + i))
    return Workload(
        start=datetime(2024, 1, 1, tzinfo=UTC),
        arrival_s=arrival,
        input_tokens=np.clip(rng.lognormal(np.log(900), 0.9, n), 1, 20_000).astype(np.int64),
        output_tokens=np.clip(rng.lognormal(np.log(120), 0.8, n), 1, 2000).astype(np.int64),
        class_index=np.zeros(n, dtype=np.int16),
        classes=("default",),
        prefix_blocks=blocks,
    )


def scanned(
    seq: Sequence, candidates: list[Member], least: Member, slack: int
) -> tuple[Member, int]:
    """The choice as the router made it before the index, by scanning every candidate's
    cache; and the most leading blocks a candidate holds."""
    assert seq.blocks is not None
    best, best_hits = least, 0
    for member in candidates:
        hits = 0
        for block in seq.blocks:
            if block not in member.replica.prefix_cache:
                break
            hits += 1
        if hits > best_hits:
            best, best_hits = member, hits
    if best.replica.outstanding > least.replica.outstanding + slack:
        return least, best_hits
    return best, best_hits


class CountingIndex(PrefixIndex):
    __slots__ = ("added", "forgotten", "removed")

    def __init__(self) -> None:
        super().__init__()
        self.added = self.removed = self.forgotten = 0

    def cached(self, block: int, replica: int) -> None:
        self.added += 1
        super().cached(block, replica)

    def evicted(self, block: int, replica: int) -> None:
        self.removed += 1
        super().evicted(block, replica)

    def forget(self, replica: Replica) -> None:
        if replica.prefix_listener is self:  # not already forgotten when it began draining
            self.forgotten += len(replica.prefix_cache)
        super().forget(replica)


class CheckedFleet(Fleet):
    """A fleet that checks its block index after every step and every affinity choice."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.index = CountingIndex()
        self._prefix_index = self.index
        self.shuffle = random.Random(0)
        self.checks = self.choices = self.multi_block_choices = 0
        self.passed_over = 0  # choices where a live replica that is no candidate held a block

    def check_index(self) -> None:
        expected: dict[int, set[int]] = {}
        for member in self.live:
            if member.up:
                for block in member.replica.prefix_cache:
                    expected.setdefault(block, set()).add(member.replica.index)
        assert self.index.holders == expected
        for member in self.members:
            watched = member.replica.prefix_listener is self.index
            assert watched == member.up, "draining and retired replicas leave the index"
        self.checks += 1

    def _handle_events(self, until: float) -> None:
        super()._handle_events(until)
        self.check_index()

    def _advance_to(self, t: float) -> None:
        super()._advance_to(t)
        self.check_index()

    def _route(self, seq: Sequence, now: float) -> None:
        super()._route(seq, now)
        self.check_index()

    def _affinity(self, seq: Sequence, candidates: list[Member], least: Member) -> Member:
        slack = self.config.prefix_affinity_slack
        chosen = super()._affinity(seq, candidates, least)
        expected, hits = scanned(seq, candidates, least, slack)
        assert chosen is expected
        # any other list of candidates (a subset, in another order) is respected as given
        others = self.shuffle.sample(candidates, self.shuffle.randint(1, len(candidates)))
        assert super()._affinity(seq, others, least) is scanned(seq, others, least, slack)[0]
        self.choices += 1
        self.multi_block_choices += hits > 1
        assert seq.blocks is not None
        self.passed_over += any(
            m not in candidates and seq.blocks[0] in m.replica.prefix_cache for m in self.live
        )
        return chosen


def run(
    w: Workload, engine: EngineConfig, config: FleetConfig
) -> tuple[CheckedFleet, list[dict[str, Any]]]:
    chunks: list[dict[str, Any]] = []
    fleet = CheckedFleet(w, TIMES, engine, config, on_chunk=chunks.append)
    fleet.run()
    return fleet, chunks


@st.composite
def fleets(draw: st.DrawFn) -> tuple[Workload, EngineConfig, FleetConfig]:
    mode = draw(st.sampled_from(["fixed", "schedule", "autoscaler"]))
    w = conversations(
        draw(st.integers(1, 300)),
        draw(st.sampled_from([2.0, 20.0, 200.0])),
        seed=draw(st.integers(0, 1000)),
        systems=draw(st.integers(1, 6)),
        turns=draw(st.integers(1, 6)),
        # traffic across the first change of a schedule: replicas drain with their caches
        start_s=3598.0 if mode == "schedule" and draw(st.booleans()) else 0.0,
    )
    engine = EngineConfig(
        max_seqs=draw(st.sampled_from([2, 16])),
        max_batched_tokens=2048,
        kv_capacity_tokens=draw(st.sampled_from([12_000, 40_000])),
        # 1 to 12 blocks of 512 tokens: evictions at almost every admission
        prefix_cache_tokens=512 * draw(st.integers(1, 12)),
    )
    config = FleetConfig(
        replicas={
            "on-demand": draw(st.integers(1 if mode == "fixed" else 0, 8)),
            "spot": draw(st.integers(0, 8)),
        },
        schedule=(
            draw(st.lists(st.integers(0, 8), min_size=1, max_size=3))
            if mode == "schedule"
            else None
        ),
        autoscaler=(
            Autoscaler(
                min_replicas=draw(st.integers(0, 2)),
                max_replicas=draw(st.integers(2, 10)),
                target_utilization=0.5,
                interval_s=1.0,
                cold_start_s=draw(st.sampled_from([0.0, 2.0])),
                scale_in_after_s=5.0,
            )
            if mode == "autoscaler"
            else None
        ),
        router="prefix-affinity",
        spot_interruptions_per_hour=draw(st.sampled_from([0.0, 500.0, 5000.0])),
        spot_replace_s=draw(st.sampled_from([0.0, 3.0])),
        prefix_affinity_slack=draw(st.sampled_from([0, 2, 8])),
        seed=draw(st.integers(0, 3)),
    )
    return w, engine, config


@settings(max_examples=120, deadline=None, derandomize=True)
@given(fleets())
def test_the_index_is_the_live_caches_and_routing_is_a_scan(
    case: tuple[Workload, EngineConfig, FleetConfig],
) -> None:
    fleet, _ = run(*case)
    assert fleet.checks > 0
    # at the end every replica has retired: nothing is left in the index
    assert fleet.index.holders == {}
    assert fleet.index.added == fleet.index.removed


def test_a_busy_fleet_evicts_retires_and_matches_deep_prefixes() -> None:
    # the property test above is only as strong as the runs it sees: this one has everything
    w = conversations(3000, 150.0, seed=3, systems=4, turns=5)
    engine = EngineConfig(
        max_seqs=16, max_batched_tokens=2048, kv_capacity_tokens=30_000, prefix_cache_tokens=4096
    )
    config = FleetConfig(
        {"on-demand": 3, "spot": 5},
        router="prefix-affinity",
        spot_interruptions_per_hour=600.0,
        spot_replace_s=2.0,
        seed=1,
    )
    fleet, chunks = run(w, engine, config)
    index = fleet.index
    assert fleet.stats.spot_interruptions > 3
    assert index.forgotten > 0  # interrupted replicas left the index with blocks cached
    assert index.removed - index.forgotten > index.added // 2  # most blocks were evicted
    assert index.added == index.removed  # every replica retired by the end
    assert fleet.choices > 2000
    assert fleet.multi_block_choices > 500
    cached = np.concatenate([c["cached_tokens"] for c in chunks])
    assert (cached >= 2 * 512).sum() > 300  # requests reused runs of several blocks


def test_draining_replicas_keep_their_blocks_but_are_passed_over() -> None:
    # six replicas busy at the end of the first hour, then two: four drain holding blocks
    w = conversations(1500, 150.0, seed=5, systems=3, turns=4, start_s=3595.0)
    engine = EngineConfig(
        max_seqs=16, max_batched_tokens=2048, kv_capacity_tokens=30_000, prefix_cache_tokens=4096
    )
    fleet, _ = run(w, engine, FleetConfig(schedule=[6, 2], router="prefix-affinity"))
    assert fleet.passed_over > 50
    assert fleet.choices == len(w)


def test_no_index_without_prefix_affinity() -> None:
    w = conversations(200, 50.0, seed=1, systems=2, turns=3)
    engine = EngineConfig(max_seqs=16, kv_capacity_tokens=30_000, prefix_cache_tokens=4096)
    chunks: list[dict[str, Any]] = []
    fleet = Fleet(w, TIMES, engine, FleetConfig({"on-demand": 3}), on_chunk=chunks.append)
    fleet.run()
    assert fleet._prefix_index is None
    assert all(m.replica.prefix_listener is None for m in fleet.members)
    assert any(m.replica.prefix_cache for m in fleet.members)  # the caches still work
