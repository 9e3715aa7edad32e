"""Load patterns: how a benchmark run sends its requests, and for how long.

- ``sync``: one request at a time, each sent when the one before has finished;
- ``concurrency``: N clients, each sending its next request when its last one finished; the
  clients start staggered, evenly over the first ``ramp_s`` seconds, so the server does not
  meet N prompts in the same instant;
- ``rate``: requests sent at a constant rate, whether or not earlier ones have finished;
- ``poisson``: requests sent at exponentially distributed intervals (a Poisson process of the
  given mean rate), drawn from ``seed`` so a run can be repeated.

Every run is bounded by a number of requests and a number of seconds; when the seconds run out
(or the caller's ``stop`` event is set, as on Ctrl-C), no more requests are sent, those in
flight are cut off and recorded as ``incomplete``, and what was measured is returned. Warm-up
requests run first, to completion, and are kept apart from the results.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import httpx
import numpy as np

from planner.bench.client import RequestShape, Target, is_loopback_url, measure_request
from planner.bench.metrics import RequestRecord
from planner.errors import UsageError

Pattern = Literal["sync", "concurrency", "rate", "poisson"]
PATTERNS: tuple[Pattern, ...] = ("sync", "concurrency", "rate", "poisson")
MAX_REQUESTS = 10_000_000
MAX_CONCURRENCY = 100_000
MAX_SECONDS = 7 * 24 * 3600.0
MAX_RATE = 1_000_000.0
StopReason = Literal["requests", "seconds", "interrupted"]
RecordCallback = Callable[[RequestRecord], None]


@dataclass(frozen=True)
class LoadPlan:
    """A load pattern and its bounds, checked on creation (:class:`UsageError` naming the CLI
    option)."""

    pattern: Pattern
    max_requests: int
    max_seconds: float
    concurrency: int = 1  # the pattern "concurrency": clients
    rate: float | None = None  # "rate" and "poisson": mean requests per second
    warmup: int = 0
    seed: int = 0
    ramp_s: float = 1.0  # "concurrency": clients start evenly over this many seconds

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS:
            raise UsageError(f"--pattern {self.pattern!r}: expected one of {', '.join(PATTERNS)}")
        if not 1 <= self.max_requests <= MAX_REQUESTS:
            raise UsageError(
                f"--requests {self.max_requests}: expected 1 to {MAX_REQUESTS:,} requests"
            )
        if not (math.isfinite(self.max_seconds) and 0 < self.max_seconds <= MAX_SECONDS):
            raise UsageError(
                f"--max-seconds {self.max_seconds:g}: expected a positive number of seconds, "
                f"at most {MAX_SECONDS:,.0f} (a week)"
            )
        if not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise UsageError(
                f"--concurrency {self.concurrency}: expected 1 to {MAX_CONCURRENCY:,} clients"
            )
        if self.pattern in ("rate", "poisson"):
            if self.rate is None:
                raise UsageError(f"--pattern {self.pattern} needs --rate (requests per second)")
            if not (math.isfinite(self.rate) and 0 < self.rate <= MAX_RATE):
                raise UsageError(
                    f"--rate {self.rate:g}: expected a positive number of requests per second"
                )
        if not 0 <= self.warmup <= MAX_REQUESTS:
            raise UsageError(f"--warmup {self.warmup}: expected 0 or more requests")
        if not (math.isfinite(self.ramp_s) and 0 <= self.ramp_s <= MAX_SECONDS):
            raise UsageError(f"--ramp {self.ramp_s:g}: expected 0 or more seconds")

    @property
    def clients(self) -> int:
        """Clients of a closed loop: 1 for ``sync``, N for ``concurrency``."""
        return self.concurrency if self.pattern == "concurrency" else 1

    def arrivals(self) -> list[float]:
        """When each request of an open loop (``rate``, ``poisson``) is sent, in seconds from
        the start; the first at 0."""
        if self.rate is None:
            return []
        count = self.max_requests
        if self.pattern == "rate":
            return [i / self.rate for i in range(count)]
        gaps = np.random.default_rng(self.seed).exponential(1.0 / self.rate, count)
        return [0.0, *(float(t) for t in np.cumsum(gaps[:-1]))]

    def describe(self) -> dict[str, Any]:
        """The plan as the run's metadata records it."""
        described: dict[str, Any] = {
            "pattern": self.pattern,
            "max_requests": self.max_requests,
            "max_seconds": self.max_seconds,
            "warmup": self.warmup,
        }
        if self.pattern == "concurrency":
            described.update(concurrency=self.concurrency, ramp_s=self.ramp_s)
        if self.pattern in ("rate", "poisson"):
            described["rate"] = self.rate
        if self.pattern == "poisson":
            described["seed"] = self.seed
        return described


@dataclass
class RunResult:
    """What a run measured. ``duration`` is the measured phase's seconds (warm-up excluded),
    from its first request to its last response, or to where it was stopped."""

    records: list[RequestRecord]
    duration: float
    stopped: StopReason
    started_at: datetime
    warmup_records: list[RequestRecord] = field(default_factory=list)


class _Phase:
    """The requests of one phase (warm-up or measured) and those still in flight."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        target: Target,
        shape: RequestShape,
        *,
        count: int,
        timeout: float,
        on_record: RecordCallback | None,
    ) -> None:
        self.client = client
        self.target = target
        self.shape = shape
        self.count = count
        self.timeout = timeout
        self.on_record = on_record
        self.records: list[RequestRecord] = []
        self.issued = 0
        self.origin = time.perf_counter()
        self._in_flight: dict[asyncio.Task[RequestRecord], tuple[int, float]] = {}

    def can_issue(self) -> bool:
        return self.issued < self.count

    def launch(self) -> asyncio.Task[RequestRecord]:
        index = self.issued
        self.issued += 1
        task = asyncio.create_task(
            measure_request(
                self.client,
                self.target,
                self.shape,
                index=index,
                origin=self.origin,
                timeout=self.timeout,
            )
        )
        self._in_flight[task] = (index, time.perf_counter())
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[RequestRecord]) -> None:
        if self._in_flight.pop(task, None) is None or task.cancelled():
            return  # cut off: recorded by cut_off()
        self._keep(task.result())

    def _keep(self, record: RequestRecord) -> None:
        self.records.append(record)
        if self.on_record is not None:
            self.on_record(record)

    async def wait_in_flight(self) -> None:
        while self._in_flight:
            await asyncio.wait(list(self._in_flight))

    def cut_off(self, why: str) -> None:
        """Cancel the requests in flight, each recorded as incomplete."""
        now = time.perf_counter()
        in_flight, self._in_flight = self._in_flight, {}
        for task, (index, sent) in sorted(in_flight.items(), key=lambda item: item[1][0]):
            task.cancel()
            self._keep(
                RequestRecord(
                    index=index,
                    start_s=sent - self.origin,
                    status="incomplete",
                    input_tokens=self.shape.input_tokens,
                    output_tokens=0,
                    output_tokens_source="chunks",
                    requested_output_tokens=self.shape.output_tokens,
                    e2el_s=now - sent,
                    error_kind="cut_off",
                    error=why,
                )
            )

    # --- the two kinds of loop ---------------------------------------------------------------

    async def closed_loop(self, clients: int, ramp_s: float) -> None:
        async def client(number: int) -> None:
            await asyncio.sleep(number * ramp_s / clients)
            while self.can_issue():
                await self.launch()

        await asyncio.gather(*(client(i) for i in range(clients)))

    async def open_loop(self, arrivals: list[float]) -> None:
        for offset in arrivals[: self.count]:
            delay = self.origin + offset - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            self.launch()
        await self.wait_in_flight()


async def _bounded(
    phase: _Phase, loop: Coroutine[Any, Any, None], deadline: float, stop: asyncio.Event | None
) -> StopReason:
    """Run a phase's loop until it is done, the deadline passes or ``stop`` is set."""
    driver = asyncio.create_task(loop)
    waits: set[asyncio.Future[Any]] = {driver}
    stopper = asyncio.ensure_future(stop.wait()) if stop is not None else None
    if stopper is not None:
        waits.add(stopper)
    try:
        await asyncio.wait(
            waits,
            timeout=max(0.0, deadline - time.perf_counter()),
            return_when=asyncio.FIRST_COMPLETED,
        )
    finally:
        if stopper is not None:
            stopper.cancel()
    if driver.done():
        driver.result()  # a bug in a loop shows, rather than a silently short run
        return "requests"
    reason: StopReason = "interrupted" if stop is not None and stop.is_set() else "seconds"
    phase.cut_off(
        "the run was interrupted" if reason == "interrupted" else "the run's time limit was reached"
    )
    driver.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await driver
    return reason


async def run_load(
    target: Target,
    shape: RequestShape,
    plan: LoadPlan,
    *,
    timeout: float = 60.0,
    on_record: RecordCallback | None = None,
    stop: asyncio.Event | None = None,
) -> RunResult:
    """Run ``plan`` against ``target``: warm-up first (closed loop, as many clients as the
    pattern has, bounded by the same seconds), then the measured phase. ``timeout`` is how
    long the server may stay silent before a request fails; ``on_record`` sees every measured
    record as it is made; setting ``stop`` ends the run early, keeping what was measured."""
    if not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(f"--timeout {timeout:g}: expected a positive number of seconds")
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout),
        limits=limits,
        # environment proxies must not catch a loopback benchmark
        trust_env=not is_loopback_url(target.base_url),
    ) as client:
        warmup_records: list[RequestRecord] = []
        if plan.warmup:
            warmup = _Phase(
                client, target, shape, count=plan.warmup, timeout=timeout, on_record=None
            )
            clients = min(plan.warmup, plan.clients)
            reason = await _bounded(
                warmup,
                warmup.closed_loop(clients, 0.0),
                warmup.origin + plan.max_seconds,
                stop,
            )
            warmup_records = warmup.records
            if reason == "interrupted":
                return RunResult([], 0.0, reason, datetime.now(UTC), warmup_records)
        started_at = datetime.now(UTC)
        phase = _Phase(
            client, target, shape, count=plan.max_requests, timeout=timeout, on_record=on_record
        )
        loop = (
            phase.open_loop(plan.arrivals())
            if plan.pattern in ("rate", "poisson")
            else phase.closed_loop(plan.clients, plan.ramp_s if plan.clients > 1 else 0.0)
        )
        reason = await _bounded(phase, loop, phase.origin + plan.max_seconds, stop)
        duration = time.perf_counter() - phase.origin
    records = sorted(phase.records, key=lambda r: r.index)
    return RunResult(records, duration, reason, started_at, warmup_records)
