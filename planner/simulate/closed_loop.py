"""Closed-loop load: N clients, each sending its next request when its last one has finished
(plus a think time), as GenAI-Perf, AIPerf, guidellm's concurrency mode and ``vllm bench serve
--max-concurrency`` make it.

Open-loop arrivals (Poisson, constant rate, bursts, a replayed log) are a :class:`Workload`
handed to the fleet; a closed loop cannot be, because each arrival depends on when an earlier
request finished. This driver runs the same :class:`Replica` event by event and sends each
client's next request at the time its previous one left, as the client saw it.

How the clients start matters. Benchmark clients that start together and send identical
requests stay in lock-step: every request of a wave finishes in the same iteration, so a
concurrency-C run arrives in waves of C prompts, and the last prompt of a wave waits for the
C - 1 before it (``start="synchronized"``). Clients that start spread over one request's time
(``start="staggered"``) arrive as a steady stream instead.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.simulate.engine import EngineConfig, Replica, Sequence, StepTimes

START_MODES = ("synchronized", "staggered", "waves")
MAX_CLIENTS = 100_000
MAX_REQUESTS = 5_000_000


@dataclass(frozen=True)
class ClosedLoop:
    """``clients`` clients sending ``requests`` requests in all."""

    clients: int
    requests: int
    think_s: float = 0.0  # pause between a response's end and the client's next request
    start: str = "synchronized"
    # staggered starts are spread evenly over this many seconds (None: one request's
    # unloaded service time is not known here, so the caller passes it)
    stagger_s: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.clients <= MAX_CLIENTS:
            raise ValueError(f"clients {self.clients}: expected 1 to {MAX_CLIENTS:,}")
        if not 1 <= self.requests <= MAX_REQUESTS:
            raise ValueError(f"requests {self.requests}: expected 1 to {MAX_REQUESTS:,}")
        if not (math.isfinite(self.think_s) and self.think_s >= 0):
            raise ValueError(f"think time {self.think_s}: expected seconds >= 0")
        if self.start not in START_MODES:
            raise ValueError(f"start {self.start!r}: expected {' or '.join(START_MODES)}")
        if not (math.isfinite(self.stagger_s) and self.stagger_s >= 0):
            raise ValueError(f"stagger {self.stagger_s}: expected seconds >= 0")

    def start_times(self) -> NDArray[np.float64]:
        """When each client sends its first request."""
        if self.start == "synchronized" or self.clients == 1:
            return np.zeros(self.clients)
        return np.arange(self.clients, dtype=np.float64) * (self.stagger_s / self.clients)


@dataclass(frozen=True)
class ClosedLoopRun:
    """Every request of a closed-loop run, in the order sent (times in seconds)."""

    arrival: NDArray[np.float64]
    first_token: NDArray[np.float64]
    finish: NDArray[np.float64]
    input_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    client: NDArray[np.int64]
    preemptions: NDArray[np.int64]

    def measured(self, skip: int) -> ClosedLoopRun:
        """The run without its first ``skip`` requests (the ramp-up a benchmark discards)."""
        keep = slice(min(skip, len(self.arrival) - 1), None)
        return ClosedLoopRun(*(getattr(self, name)[keep] for name in self.__dataclass_fields__))

    def summary(self) -> dict[str, Any]:
        """Means and percentiles as benchmark clients report them (ms, tokens/s, requests/s):
        TPOT per request is (E2E - TTFT) / (output tokens - 1), GenAI-Perf's inter-token
        latency; throughput is output tokens over the span from the first send to the last
        finish."""
        served = np.isfinite(self.finish)
        ttft = (self.first_token - self.arrival)[served] * 1e3
        e2e = (self.finish - self.arrival)[served] * 1e3
        outputs = self.output_tokens[served]
        many = outputs > 1
        tpot = (e2e[many] - ttft[many]) / (outputs[many] - 1)
        span = float(self.finish[served].max() - self.arrival.min()) if served.any() else 0.0
        out: dict[str, Any] = {
            "requests": int(served.sum()),
            "refused": int((~served).sum()),
            "output_tokens_per_s": float(outputs.sum() / span) if span > 0 else math.nan,
            "requests_per_s": float(served.sum() / span) if span > 0 else math.nan,
            "preempted": int((self.preemptions > 0).sum()),
        }
        for name, values in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e)):
            if not len(values):
                continue
            out[f"{name}_mean_ms"] = float(values.mean())
            for q in (50, 90, 95, 99):
                out[f"{name}_p{q}_ms"] = float(np.percentile(values, q))
        return out


def run_closed_loop(
    times: StepTimes,
    engine: EngineConfig,
    load: ClosedLoop,
    input_tokens: NDArray[np.int64],
    output_tokens: NDArray[np.int64],
    *,
    replicas: int = 1,
) -> ClosedLoopRun:
    """Serve ``load`` with ``replicas`` replicas of one engine; request k takes the lengths
    ``input_tokens[k % n]``, ``output_tokens[k % n]``. A request goes to the replica with the
    fewest requests inside (the first such), as a least-outstanding router does."""
    starts = [(float(t), c) for c, t in enumerate(load.start_times())]
    wave = load.clients if load.start == "waves" else 0
    return _drive(
        times,
        engine,
        starts,
        load.requests,
        load.think_s,
        input_tokens,
        output_tokens,
        replicas,
        wave=wave,
    )


def run_open_loop(
    times: StepTimes,
    engine: EngineConfig,
    arrivals_s: NDArray[np.float64],
    input_tokens: NDArray[np.int64],
    output_tokens: NDArray[np.int64],
    *,
    replicas: int = 1,
) -> ClosedLoopRun:
    """The same replicas and router fed fixed arrival times (a rate, Poisson or a replayed
    log): what :func:`run_closed_loop` does when no client waits for an answer."""
    arrivals = np.sort(np.asarray(arrivals_s, dtype=np.float64))
    if not len(arrivals) or not np.isfinite(arrivals).all():
        raise ValueError("arrival times: expected a non-empty array of finite seconds")
    sends = [(float(t), -1) for t in arrivals]  # client -1: nobody sends again
    return _drive(times, engine, sends, len(sends), math.nan, input_tokens, output_tokens, replicas)


def _drive(
    times: StepTimes,
    engine: EngineConfig,
    first_sends: list[tuple[float, int]],
    total: int,
    think_s: float,
    input_tokens: NDArray[np.int64],
    output_tokens: NDArray[np.int64],
    replicas: int,
    *,
    wave: int = 0,
) -> ClosedLoopRun:
    inputs = np.asarray(input_tokens, dtype=np.int64)
    outputs = np.asarray(output_tokens, dtype=np.int64)
    if not len(inputs) or len(inputs) != len(outputs):
        raise ValueError("input and output lengths: expected equal, non-empty arrays")
    if replicas < 1:
        raise ValueError(f"replicas {replicas}: expected at least 1")
    records: list[Any] = []
    fleet = [Replica(i, times, engine, records) for i in range(replicas)]
    client_of = np.zeros(total, dtype=np.int64)
    arrival = np.full(total, math.nan)
    sends = list(first_sends)
    heapq.heapify(sends)
    sent = seen = 0
    n = len(inputs)
    held: list[tuple[float, int]] = []  # waves: clients done, waiting for the rest of the wave
    while True:
        next_send = sends[0][0] if sends and sent < total else math.inf
        next_event = min(r.next_event() for r in fleet)
        if next_send == math.inf and next_event == math.inf:
            break
        if next_event < next_send:
            for replica in fleet:
                replica.advance(next_event)
            while seen < len(records):  # each request that left frees its client
                rid, _, _, out, *_ = records[seen]
                seen += 1
                client = int(client_of[rid])
                if client >= 0 and sent < total:
                    left = out if out == out else float(arrival[rid])  # refused: at once
                    if not wave:
                        heapq.heappush(sends, (left + think_s, client))
                        continue
                    held.append((left, client))
                    if len(held) == wave or len(held) + sent >= total + wave:
                        # the whole wave is back: every client sends again together
                        again = max(t for t, _ in held) + think_s
                        for _, waiting in held:
                            heapq.heappush(sends, (again, waiting))
                        held = []
            continue
        now, client = heapq.heappop(sends)
        for replica in fleet:
            replica.advance(now)
        k = sent
        sent += 1
        client_of[k] = client
        arrival[k] = now
        seq = Sequence(k, now, int(inputs[k % n]), int(outputs[k % n]), 0)
        target = min(fleet, key=lambda r: r.outstanding)
        target.submit(seq, now)
    rows = sorted(records)
    return ClosedLoopRun(
        arrival=np.array([r[1] for r in rows], dtype=np.float64),
        first_token=np.array([r[2] for r in rows], dtype=np.float64),
        finish=np.array([r[3] for r in rows], dtype=np.float64),
        input_tokens=np.array([r[6] for r in rows], dtype=np.int64),
        output_tokens=np.array([r[7] for r in rows], dtype=np.int64),
        client=client_of[[r[0] for r in rows]],
        preemptions=np.array([r[9] for r in rows], dtype=np.int64),
    )
