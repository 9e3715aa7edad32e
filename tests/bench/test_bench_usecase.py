"""The bench use case as both shells call it: a typed request in, values out, the store opened
only after the request is checked; and a replay's trace built from values (no store)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pytest

from planner.bench.replay import TraceRequest, trace_of
from planner.bench.server import BenchServer, ModelEngine, ServerThread
from planner.errors import UsageError
from planner.usecases.bench_run import BenchRunRequest, ReplayWindow, run_bench

pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def server() -> Iterator[BenchServer]:
    engine = ModelEngine(speed=100.0)
    with ServerThread(BenchServer(engine, model_name=engine.model_name, port=0)) as running:
        yield running


def _no_store() -> AbstractContextManager[Any]:
    raise AssertionError("the store was opened")


class _Notes:
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.records = 0

    def note(self, text: str, *, soft_wrap: bool = False) -> None:
        self.notes.append(text)

    def measuring(self, total: int) -> AbstractContextManager[object]:
        from contextlib import nullcontext

        return nullcontext()

    def stage(self, prefix: str, total: int) -> None:
        pass

    def record(self, record: object) -> None:
        self.records += 1


def test_a_run_returns_its_document_and_summary_without_a_store(server: BenchServer) -> None:
    progress = _Notes()
    request = BenchRunRequest(url=server.url, requests=3, warmup=0, store=False)
    result = run_bench(request, _no_store, progress=progress)
    assert not result.sweep and result.failure is None
    [summary] = result.summaries
    assert summary["completed"] == 3 and progress.records == 3
    assert result.document["completed"] == 3
    assert result.document["planner"]["tool"] == "planner bench run"
    assert result.document["planner"]["load"]["pattern"] == "sync"
    assert progress.notes == []  # nothing stopped it, nothing written or stored


def test_a_sweep_returns_every_stage(server: BenchServer) -> None:
    request = BenchRunRequest(
        url=server.url, pattern="sweep", sweep_points=3, requests=4, warmup=0, store=False
    )
    result = run_bench(request, _no_store)
    assert result.sweep and result.failure is None
    runs = result.document["runs"]
    assert len(runs) >= 2 and result.summaries == runs  # a synchronous and a throughput stage
    assert result.document["planner"]["stages"] == len(runs)
    assert [run["planner"]["stage"]["kind"] for run in runs[:2]] == ["synchronous", "throughput"]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (BenchRunRequest(url="ftp://x", name="taken"), "--url"),
        (BenchRunRequest(url="http://127.0.0.1:1", timeout=0.0, name="n"), "--timeout 0"),
        (
            BenchRunRequest(url="http://127.0.0.1:1", pattern="replay"),
            "--pattern replay needs --dataset",
        ),
        (
            BenchRunRequest(
                url="http://127.0.0.1:1", pattern="replay", replay=ReplayWindow("d", start="x")
            ),
            "--start",
        ),
        (
            BenchRunRequest(url="http://127.0.0.1:1", replay=ReplayWindow(speedup=2.0)),
            "--speedup goes with --pattern replay",
        ),
    ],
)
def test_a_wrong_request_is_refused_before_the_store_is_opened(
    request_: BenchRunRequest, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        run_bench(request_, _no_store)


def test_a_trace_is_built_from_values() -> None:
    start = datetime(2024, 6, 1, tzinfo=UTC)
    base = int(start.timestamp() * 1e6)
    frame = pd.DataFrame(
        {
            "arrival_us": [base, base + 2_000_000, base + 3_000_000, base + 9_000_000],
            "model": ["a", "a", "a", "a"],
            "input_tokens": [10, 0, 30, 40],
            "output_tokens": [1, 2, 3, 4],
        }
    )
    trace = trace_of(frame, "logs", end=datetime(2024, 6, 1, 0, 0, 5, tzinfo=UTC), speedup=2.0)
    assert trace.requests == [
        TraceRequest(0.0, 10, 1),
        TraceRequest(1.0, 1, 2),  # a logged 0 still asks for one token
        TraceRequest(1.5, 30, 3),
    ]
    assert trace.window_requests == 3 and trace.first_arrival == start
    with pytest.raises(UsageError, match="no requests in the window"):
        trace_of(frame, "logs", start=datetime(2025, 1, 1, tzinfo=UTC))
