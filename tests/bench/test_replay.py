"""Trace replay: a dataset ingested into a real store, read back as a trace, and sent to
planner's own server over loopback at the log's times and lengths."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from planner.bench.client import RequestShape, Target
from planner.bench.loadgen import LoadPlan, RunResult, run_load
from planner.bench.replay import Trace, TraceRequest
from planner.bench.server import BenchServer, ModelEngine, ServerThread
from planner.errors import UsageError
from planner.ingest import IngestOptions, ingest_file
from planner.store import Store
from planner.usecases.bench_run import read_trace
from tests.conftest import WriteFile

# Azure's format: absolute times; a request logged with 0 output tokens.
AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2024-06-01 00:00:10.000,100,10\n"
    "2024-06-01 00:00:10.400,20,3\n"
    "2024-06-01 00:00:10.600,300,0\n"
    "2024-06-01 00:00:11.200,7,40\n"
    "2024-06-01 00:00:12.000,50,5\n"
)
# BurstGPT's: seconds from a start, with a model per row.
BURST = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "0,ChatGPT,10,1,11,Conversation log\n"
    "1,GPT-4,20,2,22,API log\n"
    "3,ChatGPT,30,3,33,Conversation log\n"
    "4,,40,4,44,API log\n"
    "7,ChatGPT,50,5,55,Conversation log\n"
)
START = datetime(2024, 6, 1, tzinfo=UTC)


@pytest.fixture
def traces(store: Store, write: WriteFile) -> Store:
    ingest_file(store, write("azure.csv", AZURE), IngestOptions(name="azure"))
    ingest_file(store, write("burst.csv", BURST), IngestOptions(name="burst", start=START))
    return store


@pytest.fixture(scope="module")
def server() -> Iterator[BenchServer]:
    engine = ModelEngine(speed=100.0)
    with ServerThread(BenchServer(engine, model_name=engine.model_name, port=0)) as running:
        yield running


def _trace(store: Store, name: str = "azure", **filters: object) -> Trace:
    with store.session() as session:
        return read_trace(session, name, **filters)  # type: ignore[arg-type]


def _replay(server: BenchServer, trace: Trace) -> RunResult:
    plan = LoadPlan(
        "replay",
        len(trace.requests),
        30.0,
        schedule=tuple(r.offset_s for r in trace.requests),
        lengths=tuple((r.input_tokens, r.output_tokens) for r in trace.requests),
    )
    target = Target(server.url, "completions", server.model_name)
    return asyncio.run(run_load(target, RequestShape(1, 1), plan, timeout=10.0))


# --- reading a trace ---------------------------------------------------------------------------


def test_a_trace_starts_at_zero_and_keeps_the_logged_lengths(traces: Store) -> None:
    trace = _trace(traces)
    assert trace.requests == [
        TraceRequest(0.0, 100, 10),
        TraceRequest(pytest.approx(0.4), 20, 3),  # type: ignore[arg-type]
        TraceRequest(pytest.approx(0.6), 300, 1),  # type: ignore[arg-type]  # 0 asks for 1
        TraceRequest(pytest.approx(1.2), 7, 40),  # type: ignore[arg-type]
        TraceRequest(pytest.approx(2.0), 50, 5),  # type: ignore[arg-type]
    ]
    assert trace.first_arrival == datetime(2024, 6, 1, 0, 0, 10, tzinfo=UTC)
    described = trace.describe()
    assert described["dataset"] == "azure" and described["requests"] == 5
    assert described["span_s"] == pytest.approx(2.0)
    assert described["window_requests"] == 5


def test_speedup_divides_every_gap(traces: Store) -> None:
    logged = [r.offset_s for r in _trace(traces).requests]
    fast = _trace(traces, speedup=4.0)
    assert [r.offset_s for r in fast.requests] == pytest.approx([t / 4 for t in logged])
    assert [r[1:] for r in fast.requests] == [r[1:] for r in _trace(traces).requests]


def test_the_first_n_of_a_window_of_one_model(traces: Store) -> None:
    trace = _trace(
        traces,
        "burst",
        model="ChatGPT",
        start=datetime(2024, 6, 1, 0, 0, 2, tzinfo=UTC),
        max_requests=1,
    )
    # ChatGPT from 00:00:02: the rows at 3 s and 7 s; the first kept, at offset 0
    assert trace.requests == [TraceRequest(0.0, 30, 3)]
    assert trace.window_requests == 2
    assert trace.first_arrival == datetime(2024, 6, 1, 0, 0, 3, tzinfo=UTC)
    ended = _trace(traces, "burst", end=datetime(2024, 6, 1, 0, 0, 3, tzinfo=UTC))
    assert [r.input_tokens for r in ended.requests] == [10, 20]  # the end is excluded


def test_an_unknown_dataset_names_the_closest(traces: Store) -> None:
    with pytest.raises(UsageError, match="no dataset named 'azur'; known datasets: azure"):
        _trace(traces, "azur")


def test_an_empty_window_says_when_the_log_runs(traces: Store) -> None:
    with pytest.raises(UsageError, match=r"no requests in the window .* arrive from 2024-06-01"):
        _trace(traces, start=datetime(2025, 1, 1, tzinfo=UTC))


def test_an_unknown_model_lists_the_datasets_models(traces: Store) -> None:
    with pytest.raises(UsageError, match=r"--dataset-model 'gpt-5'.*ChatGPT, "):
        _trace(traces, "burst", model="gpt-5")


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"speedup": 0.0}, "--speedup 0"),
        ({"speedup": float("nan")}, "--speedup nan"),
        ({"max_requests": 0}, "--requests 0"),
        (
            {"start": datetime(2024, 6, 2, tzinfo=UTC), "end": datetime(2024, 6, 1, tzinfo=UTC)},
            "--end .* is not after --start",
        ),
    ],
)
def test_bad_filters_name_their_option(
    traces: Store, filters: dict[str, object], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        _trace(traces, "azure", **filters)


# --- replaying over loopback -------------------------------------------------------------------


def test_replay_sends_the_logged_requests_at_their_times(
    traces: Store, server: BenchServer
) -> None:
    trace = _trace(traces, speedup=2.0)  # offsets 0, 0.2, 0.3, 0.6, 1.0 s
    result = _replay(server, trace)
    assert result.stopped == "requests"
    assert all(r.ok for r in result.records)
    starts = [r.start_s for r in result.records]
    assert starts == sorted(starts)
    for record, request in zip(result.records, trace.requests, strict=True):
        assert request.offset_s - 0.005 <= record.start_s <= request.offset_s + 0.1
        # the server's usage: the log's prompt and output lengths reached it
        assert record.input_tokens == request.input_tokens
        assert record.output_tokens == request.output_tokens
        assert record.output_tokens_source == "usage"
    assert result.duration >= 1.0


def test_a_faster_replay_takes_less_time(traces: Store, server: BenchServer) -> None:
    slow = _replay(server, _trace(traces, speedup=2.0))
    fast = _replay(server, _trace(traces, speedup=8.0))
    assert fast.duration < slow.duration - 0.5  # last arrivals at 1.0 s and 0.25 s
    assert max(r.start_s for r in fast.records) < 0.25 + 0.1
