"""Load patterns: their plans checked, and each run against planner's own server over real
loopback sockets (a high --speed keeps every request a few milliseconds)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import pytest

from planner.bench.client import RequestShape, Target
from planner.bench.loadgen import (
    LoadPlan,
    RunResult,
    StageKind,
    SweepPlan,
    SweepResult,
    run_load,
    run_sweep,
)
from planner.bench.metrics import RequestRecord
from planner.bench.server import BenchServer, ModelEngine, ServerThread
from planner.errors import UsageError

SPEED = 100.0  # ~0.75 ms a token for llama-3.1-8b on an L4
SHAPE = RequestShape(input_tokens=32, output_tokens=16)


@pytest.fixture(scope="module")
def server() -> Iterator[BenchServer]:
    engine = ModelEngine(speed=SPEED)
    with ServerThread(BenchServer(engine, model_name=engine.model_name, port=0)) as running:
        yield running


def _target(server: BenchServer) -> Target:
    return Target(server.url, "completions", server.model_name)


def _run(server: BenchServer, plan: LoadPlan, shape: RequestShape = SHAPE) -> RunResult:
    return asyncio.run(run_load(_target(server), shape, plan, timeout=10.0))


def _sweep(server: BenchServer, sweep: SweepPlan, shape: RequestShape = SHAPE) -> SweepResult:
    return asyncio.run(run_sweep(_target(server), shape, sweep, timeout=10.0))


def _most_in_flight(records: list[RequestRecord]) -> int:
    events = sorted(
        [(r.start_s, 1) for r in records] + [(r.start_s + r.e2el_s, -1) for r in records],
        key=lambda event: (event[0], event[1]),  # an end before a start at the same instant
    )
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


# --- plans -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pattern": "burst"}, "--pattern 'burst'"),
        ({"pattern": "rate"}, "needs --rate"),
        ({"pattern": "poisson", "rate": 0.0}, "--rate 0"),
        ({"pattern": "rate", "rate": float("inf")}, "--rate inf"),
        ({"max_requests": 0}, "--requests 0"),
        ({"max_seconds": float("nan")}, "--max-seconds nan"),
        ({"max_seconds": 0.0}, "--max-seconds 0"),
        ({"concurrency": 0}, "--concurrency 0"),
        ({"warmup": -1}, "--warmup -1"),
        ({"ramp_s": -1.0}, "--ramp -1"),
    ],
)
def test_bad_plans_are_refused_with_the_option(kwargs: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {"pattern": "sync", "max_requests": 10, "max_seconds": 10.0}
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        LoadPlan(**{**settings, **kwargs})  # type: ignore[arg-type]


def test_constant_rate_arrivals_are_evenly_spaced() -> None:
    plan = LoadPlan("rate", max_requests=5, max_seconds=10, rate=4.0)
    assert plan.arrivals() == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_poisson_arrivals_are_seeded_and_average_the_rate() -> None:
    plan = LoadPlan("poisson", max_requests=4000, max_seconds=10, rate=50.0, seed=7)
    arrivals = plan.arrivals()
    assert arrivals == plan.arrivals()  # the same seed, the same run
    other = LoadPlan("poisson", max_requests=4000, max_seconds=10, rate=50.0, seed=8)
    assert other.arrivals() != arrivals
    gaps = np.diff(arrivals)
    assert arrivals[0] == 0.0
    assert (gaps >= 0).all()
    assert np.mean(gaps) == pytest.approx(1 / 50, rel=0.05)
    # exponential gaps: the standard deviation equals the mean (a constant rate has none)
    assert np.std(gaps) == pytest.approx(1 / 50, rel=0.1)


def test_plan_metadata_names_what_the_pattern_uses() -> None:
    described = LoadPlan("poisson", 10, 5.0, rate=2.0, seed=3, warmup=2).describe()
    assert described == {
        "pattern": "poisson",
        "max_requests": 10,
        "max_seconds": 5.0,
        "warmup": 2,
        "rate": 2.0,
        "seed": 3,
    }
    assert "rate" not in LoadPlan("concurrency", 10, 5.0, concurrency=3).describe()


# --- runs over loopback --------------------------------------------------------------------


def test_sync_sends_one_request_at_a_time(server: BenchServer) -> None:
    result = _run(server, LoadPlan("sync", max_requests=6, max_seconds=30))
    assert result.stopped == "requests"
    assert [r.index for r in result.records] == list(range(6))
    assert all(r.ok for r in result.records)
    for before, after in zip(result.records, result.records[1:], strict=False):
        assert after.start_s >= before.start_s + before.e2el_s
    assert _most_in_flight(result.records) == 1


def test_concurrency_keeps_n_clients_busy_started_staggered(server: BenchServer) -> None:
    plan = LoadPlan("concurrency", max_requests=12, max_seconds=30, concurrency=4, ramp_s=0.2)
    # 256 tokens take about 0.19 s: longer than the ramp, so the first four requests sent are
    # the four clients' first
    result = _run(server, plan, RequestShape(32, 256))
    assert result.stopped == "requests"
    assert len(result.records) == 12
    assert all(r.ok for r in result.records)
    # clients start 0.05 s apart
    firsts = sorted(r.start_s for r in result.records)[:4]
    assert firsts[0] < 0.05
    for client, start in enumerate(firsts[1:], start=1):
        assert start >= client * 0.05 - 0.005
    assert _most_in_flight(result.records) == 4


def test_constant_rate_sends_on_schedule(server: BenchServer) -> None:
    plan = LoadPlan("rate", max_requests=10, max_seconds=30, rate=25.0)
    result = _run(server, plan)
    assert result.stopped == "requests"
    starts = [r.start_s for r in result.records]
    for start, due in zip(starts, plan.arrivals(), strict=True):
        assert due - 0.005 <= start <= due + 0.1  # never early; late only by scheduling
    assert result.duration >= plan.arrivals()[-1]


def test_poisson_sends_at_its_seeded_arrivals(server: BenchServer) -> None:
    plan = LoadPlan("poisson", max_requests=12, max_seconds=30, rate=40.0, seed=11)
    result = _run(server, plan)
    assert result.stopped == "requests"
    assert all(r.ok for r in result.records)
    for record, due in zip(result.records, plan.arrivals(), strict=True):
        assert due - 0.005 <= record.start_s <= due + 0.1


def test_warmup_requests_run_first_and_are_left_out(server: BenchServer) -> None:
    before = server.generation_requests
    result = _run(server, LoadPlan("concurrency", 8, 30, concurrency=2, warmup=3, ramp_s=0.0))
    assert server.generation_requests - before == 11
    assert len(result.warmup_records) == 3
    assert [r.index for r in result.records] == list(range(8))
    # the measured phase starts after the warm-up: its first request at about 0 s
    assert min(r.start_s for r in result.records) < 0.05


def test_the_time_limit_ends_a_run_and_cuts_off_requests_in_flight(server: BenchServer) -> None:
    plan = LoadPlan("concurrency", 100_000, max_seconds=0.5, concurrency=2, ramp_s=0.0)
    result = _run(server, plan, RequestShape(32, 64))
    assert result.stopped == "seconds"
    assert 0.5 <= result.duration < 1.5
    cut = [r for r in result.records if r.status == "incomplete"]
    assert 1 <= len(cut) <= 2  # the two clients' requests in flight at the limit
    assert all(r.error == "cut off at the run's time limit (--max-seconds 0.5)" for r in cut)
    assert sum(r.ok for r in result.records) >= 3
    assert sorted(r.index for r in result.records) == list(range(len(result.records)))


def test_stopping_keeps_what_was_measured(server: BenchServer) -> None:
    async def run() -> RunResult:
        stop = asyncio.Event()
        seen: list[RequestRecord] = []

        def on_record(record: RequestRecord) -> None:
            seen.append(record)
            if len(seen) == 4:
                stop.set()  # as Ctrl-C does

        plan = LoadPlan("rate", 1000, 30, rate=50.0)
        return await run_load(
            _target(server), SHAPE, plan, timeout=10.0, on_record=on_record, stop=stop
        )

    result = asyncio.run(run())
    assert result.stopped == "interrupted"
    assert sum(r.ok for r in result.records) >= 4
    assert len(result.records) < 50
    assert result.duration < 5


# --- replayed arrivals and lengths ---------------------------------------------------------------


def test_replay_sends_each_request_at_its_offset_with_its_own_lengths(
    server: BenchServer,
) -> None:
    schedule = (0.0, 0.05, 0.05, 0.3)
    lengths = ((10, 3), (200, 1), (7, 40), (64, 16))
    plan = LoadPlan("replay", 4, 30, schedule=schedule, lengths=lengths)
    result = _run(server, plan)
    assert result.stopped == "requests"
    assert all(r.ok for r in result.records)
    for record, due, (prompt, output) in zip(result.records, schedule, lengths, strict=True):
        assert due - 0.005 <= record.start_s <= due + 0.1
        # the server's usage counts what was asked for each request
        assert (record.input_tokens, record.output_tokens) == (prompt, output)
        assert record.output_tokens_source == "usage"
        assert record.requested_output_tokens == output
    assert plan.describe()["last_arrival_s"] == 0.3


def test_lengths_are_per_request_in_any_pattern_and_warm_up_reuses_the_first(
    server: BenchServer,
) -> None:
    lengths = ((5, 2), (9, 4), (13, 6))
    plan = LoadPlan("sync", 3, 30, warmup=4, lengths=lengths)
    result = _run(server, plan)
    assert [(r.input_tokens, r.output_tokens) for r in result.records] == list(lengths)
    assert [r.output_tokens for r in result.warmup_records] == [2, 4, 6, 2]


def test_a_cut_off_replay_request_keeps_its_own_lengths(server: BenchServer) -> None:
    plan = LoadPlan("replay", 2, 0.3, schedule=(0.0, 0.1), lengths=((11, 5000), (12, 5000)))
    result = _run(server, plan)
    assert result.stopped == "seconds"
    assert [(r.status, r.input_tokens, r.requested_output_tokens) for r in result.records] == [
        ("incomplete", 11, 5000),
        ("incomplete", 12, 5000),
    ]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"schedule": None}, UsageError),  # a replay without a trace
        ({"schedule": (0.0,)}, ValueError),  # fewer arrivals than requests
        ({"schedule": (0.0, 2.0, 1.0)}, ValueError),  # not ascending
        ({"schedule": (-1.0, 0.0, 1.0)}, ValueError),
        ({"lengths": ((1, 1),)}, ValueError),  # fewer lengths than requests
        ({"lengths": ((1, 1), (0, 1), (1, 1))}, ValueError),
    ],
)
def test_bad_replay_plans_are_refused(kwargs: dict[str, object], error: type[Exception]) -> None:
    settings: dict[str, object] = {
        "pattern": "replay",
        "max_requests": 3,
        "max_seconds": 10.0,
        "schedule": (0.0, 1.0, 2.0),
    }
    with pytest.raises(error):
        LoadPlan(**{**settings, **kwargs})  # type: ignore[arg-type]


def test_only_a_replay_takes_a_schedule() -> None:
    with pytest.raises(ValueError, match="only to --pattern replay"):
        LoadPlan("rate", 2, 10.0, rate=1.0, schedule=(0.0, 1.0))


# --- sweeps ------------------------------------------------------------------------------------


def test_sweep_rates_are_evenly_spaced_strictly_between_floor_and_ceiling() -> None:
    sweep = SweepPlan(points=5, max_concurrency=8, max_requests=10, max_seconds=10)
    assert sweep.rates(1.0, 9.0) == pytest.approx([3.0, 5.0, 7.0])
    assert sweep.rates(4.0, 4.0) == []  # nothing strictly between
    assert sweep.rates(5.0, 3.0) == []
    assert SweepPlan(2, 8, 10, 10).rates(1.0, 9.0) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"points": 1}, "--sweep-points 1"),
        ({"points": 101}, "--sweep-points 101"),
        ({"max_concurrency": 0}, "--concurrency 0"),
        ({"kind": "burst"}, "--sweep-kind 'burst'"),
        ({"max_seconds": 0.0}, "--max-seconds 0"),
    ],
)
def test_bad_sweeps_are_refused_with_the_option(kwargs: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {
        "points": 4,
        "max_concurrency": 4,
        "max_requests": 10,
        "max_seconds": 10.0,
    }
    with pytest.raises(UsageError, match=message):
        SweepPlan(**{**settings, **kwargs})  # type: ignore[arg-type]


def test_sweep_runs_sync_then_throughput_then_rates_between(server: BenchServer) -> None:
    sweep = SweepPlan(points=5, max_concurrency=4, max_requests=12, max_seconds=30, ramp_s=0.0)
    # 64 output tokens: the server's time, not the client's, sets the pace
    result = _sweep(server, sweep, RequestShape(32, 64))
    assert result.stopped == "done" and result.note is None
    assert [s.kind for s in result.stages] == [
        "synchronous",
        "throughput",
        "rate",
        "rate",
        "rate",
    ]
    assert [s.plan.pattern for s in result.stages] == [
        "sync",
        "concurrency",
        "rate",
        "rate",
        "rate",
    ]
    assert result.stages[1].plan.clients == 4
    assert _most_in_flight(result.stages[0].result.records) == 1
    assert _most_in_flight(result.stages[1].result.records) == 4
    for stage in result.stages:
        assert stage.result.stopped == "requests"
        assert len(stage.result.records) == 12
        assert all(r.ok for r in stage.result.records)
    assert result.floor is not None and result.ceiling is not None
    assert result.floor == pytest.approx(result.stages[0].request_rate)
    assert result.ceiling > result.floor  # four clients outpace one
    rates = [s.plan.rate for s in result.stages[2:]]
    assert rates == result.rates
    assert all(r is not None for r in rates)
    bounds = [result.floor, *(r for r in rates if r is not None), result.ceiling]
    gaps = np.diff(bounds)
    assert (gaps > 0).all()  # strictly increasing
    assert gaps == pytest.approx([gaps[0]] * len(gaps))


def test_every_sweep_stage_is_bounded_by_the_seconds(server: BenchServer) -> None:
    sweep = SweepPlan(3, max_concurrency=2, max_requests=100_000, max_seconds=0.3, ramp_s=0.0)
    result = _sweep(server, sweep, RequestShape(32, 64))
    assert len(result.stages) == 3
    for stage in result.stages:
        assert stage.result.stopped == "seconds"
        assert 0.3 <= stage.result.duration < 1.2
        assert sum(r.ok for r in stage.result.records) >= 2


def test_a_poisson_sweep_sends_its_rates_as_poisson_arrivals(server: BenchServer) -> None:
    sweep = SweepPlan(3, 4, 8, 30, kind="poisson", seed=5, ramp_s=0.0)
    result = _sweep(server, sweep, RequestShape(32, 64))
    assert [s.plan.pattern for s in result.stages] == ["sync", "concurrency", "poisson"]
    assert result.stages[2].plan.seed == 5


def test_stopping_a_sweep_keeps_finished_stages_and_the_current_ones_part(
    server: BenchServer,
) -> None:
    started: list[StageKind] = []

    async def run() -> SweepResult:
        stop = asyncio.Event()
        seen: list[RequestRecord] = []

        def on_stage(index: int, kind: StageKind, plan: LoadPlan) -> None:
            started.append(kind)
            seen.clear()

        def on_record(record: RequestRecord) -> None:
            seen.append(record)
            if len(started) == 3 and len(seen) == 3:
                stop.set()  # as Ctrl-C does, in the first rate stage

        sweep = SweepPlan(points=6, max_concurrency=4, max_requests=40, max_seconds=30, ramp_s=0)
        return await run_sweep(
            _target(server),
            SHAPE,
            sweep,
            timeout=10.0,
            on_stage=on_stage,
            on_record=on_record,
            stop=stop,
        )

    result = asyncio.run(run())
    assert started == ["synchronous", "throughput", "rate"]
    assert result.stopped == "interrupted"
    assert len(result.stages) == 3  # the rates after it never ran
    assert [len(s.result.records) for s in result.stages[:2]] == [40, 40]
    assert [s.result.stopped for s in result.stages] == ["requests", "requests", "interrupted"]
    partial = result.stages[2].result.records
    assert 3 <= len(partial) < 40
    assert sum(r.ok for r in partial) >= 3
