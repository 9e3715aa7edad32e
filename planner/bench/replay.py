"""A stored dataset as a benchmark trace: when each request arrives and how long it is.

``planner bench run --pattern replay`` sends a log's requests to a server at the log's times
(sped up by ``speedup``), each with its own prompt and output lengths, so a server is measured
under the traffic it will actually meet. The bench use case reads a dataset's requests from the
store (:func:`planner.usecases.bench_run.read_trace`); turning them into a trace, filtered by time
window, is here, on values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from planner.bench.loadgen import MAX_REQUESTS
from planner.common.text import printable, shown
from planner.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_SPEEDUP = 1_000_000.0
MAX_INPUT_TOKENS = 10_000_000  # what RequestShape accepts
MAX_OUTPUT_TOKENS = 1_000_000
MAX_LISTED_MODELS = 5


class TraceRequest(NamedTuple):
    """One request of a trace: seconds after the first arrival (already divided by the
    speedup), and its lengths in tokens (at least 1 each: a logged 0 still asks for one)."""

    offset_s: float
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Trace:
    """The requests to replay, and where they come from."""

    dataset: str
    model: str | None
    start: datetime | None
    end: datetime | None
    speedup: float
    requests: list[TraceRequest]
    window_requests: int  # requests in the window, before the first ``max_requests`` were kept
    first_arrival: datetime  # the logged time of the first request replayed

    def describe(self) -> dict[str, Any]:
        """The trace as a run's metadata records it."""
        inputs = [r.input_tokens for r in self.requests]
        outputs = [r.output_tokens for r in self.requests]
        return {
            "dataset": self.dataset,
            "model": self.model,
            "start": None if self.start is None else self.start.isoformat(),
            "end": None if self.end is None else self.end.isoformat(),
            "speedup": self.speedup,
            "requests": len(self.requests),
            "window_requests": self.window_requests,
            "first_arrival": self.first_arrival.isoformat(),
            "span_s": self.requests[-1].offset_s,
            "mean_input_tokens": float(np.mean(inputs)),
            "mean_output_tokens": float(np.mean(outputs)),
        }


def check_speedup(speedup: float) -> float:
    if not (math.isfinite(speedup) and 0 < speedup <= MAX_SPEEDUP):
        raise UsageError(
            f"--speedup {speedup:g}: expected a positive factor the log's gaps are divided by "
            f"(1 replays it as logged), at most {MAX_SPEEDUP:,.0f}"
        )
    return speedup


def _micros(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)


def _when(moment: datetime | None, default: str) -> str:
    return default if moment is None else moment.isoformat()


def check_trace_options(
    speedup: float, max_requests: int | None, start: datetime | None, end: datetime | None
) -> None:
    """What can be checked of a replay before the store is read."""
    check_speedup(speedup)
    if max_requests is not None and not 1 <= max_requests <= MAX_REQUESTS:
        raise UsageError(f"--requests {max_requests}: expected 1 to {MAX_REQUESTS:,} requests")
    if start is not None and end is not None and end <= start:
        raise UsageError(f"--end {end.isoformat()} is not after --start {start.isoformat()}")


def unknown_model(dataset: str, model: str, models: Sequence[str | None]) -> UsageError:
    """A model the dataset has no requests of, with the dataset's models (most requests
    first)."""
    shown_models = [printable(m or "(none)", 60) for m in models]
    listed = ", ".join(shown_models[:MAX_LISTED_MODELS]) + (
        f" and {len(shown_models) - MAX_LISTED_MODELS} more"
        if len(shown_models) > MAX_LISTED_MODELS
        else ""
    )
    return UsageError(
        f"--dataset-model {shown(model)}: dataset {shown(dataset)} has no requests of "
        f"that model (its models: {listed or 'none'})"
    )


def trace_of(
    frame: pd.DataFrame,
    dataset: str,
    *,
    model: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    speedup: float = 1.0,
    max_requests: int | None = None,
) -> Trace:
    """The first ``max_requests`` requests of ``frame`` (a dataset's requests sorted by arrival,
    those of ``model`` only when it is given) arriving in ``[start, end)``, the first at offset
    0 and every gap divided by ``speedup``. An empty window is a :class:`UsageError`."""
    arrivals = frame["arrival_us"]
    inside = np.ones(len(frame), dtype=bool)
    if start is not None:
        inside &= (arrivals >= _micros(start)).to_numpy()
    if end is not None:
        inside &= (arrivals < _micros(end)).to_numpy()
    window = frame[inside]
    if window.empty:
        logged = (
            f"; its requests arrive from {_iso(int(arrivals.min()))} to {_iso(int(arrivals.max()))}"
            if len(arrivals)
            else ""
        )
        which = "" if model is None else f" of model {shown(model)}"
        raise UsageError(
            f"dataset {shown(dataset)} has no requests{which} in the window from "
            f"{_when(start, 'its start')} to {_when(end, 'its end')}{logged}; "
            "change --start/--end"
        )
    kept = window if max_requests is None else window.iloc[:max_requests]
    arrival_us = kept["arrival_us"].to_numpy(np.int64)
    offsets = (arrival_us - arrival_us[0]) / 1e6 / speedup
    inputs = np.maximum(kept["input_tokens"].to_numpy(np.int64), 1)
    outputs = np.maximum(kept["output_tokens"].to_numpy(np.int64), 1)
    for name, lengths, most in (
        ("input", inputs, MAX_INPUT_TOKENS),
        ("output", outputs, MAX_OUTPUT_TOKENS),
    ):
        over = np.flatnonzero(lengths > most)
        if over.size:
            raise UsageError(
                f"dataset {shown(dataset)}: request {int(over[0]) + 1} of the replay asks for "
                f"{int(lengths[over[0]]):,} {name} tokens, over the {most:,} a request may have"
            )
    requests = [
        TraceRequest(float(t), int(i), int(o))
        for t, i, o in zip(offsets.tolist(), inputs.tolist(), outputs.tolist(), strict=True)
    ]
    return Trace(
        dataset=dataset,
        model=model,
        start=start,
        end=end,
        speedup=speedup,
        requests=requests,
        window_requests=len(window),
        first_arrival=EPOCH + timedelta(microseconds=int(arrival_us[0])),
    )


def _iso(micros: int) -> str:
    return (EPOCH + timedelta(microseconds=micros)).isoformat()
