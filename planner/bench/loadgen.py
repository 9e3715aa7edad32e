"""Load patterns: how a benchmark run sends its requests, and for how long.

- ``sync``: one request at a time, each sent when the one before has finished;
- ``concurrency``: N clients, each sending its next request when its last one finished; the
  clients start staggered, evenly over the first ``ramp_s`` seconds, so the server does not
  meet N prompts in the same instant;
- ``rate``: requests sent at a constant rate, whether or not earlier ones have finished;
- ``poisson``: requests sent at exponentially distributed intervals (a Poisson process of the
  given mean rate), drawn from ``seed`` so a run can be repeated;
- ``replay``: requests sent at given offsets (a trace's arrival times), each with its own
  prompt and output lengths (``lengths``).

A sweep (:class:`SweepPlan`, :func:`run_sweep`) is several runs in a row, as guidellm's sweep
profile does it: a synchronous run (its request rate is the floor), a throughput run with many
clients (its rate is the ceiling), then constant or Poisson rates evenly spaced strictly between
the two.

Every run is bounded by a number of requests and a number of seconds, a hard wall that the
warm-up counts against too; when the seconds run out (or the caller's ``stop`` event is set, as
on Ctrl-C), no more requests are sent, those in flight are cancelled (however many bytes they
are still receiving) and recorded as ``incomplete`` (``error_kind`` ``cut_off``), and what was
measured is returned. Warm-up requests run first, to completion unless the wall comes first,
and are kept apart from the results.
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

Pattern = Literal["sync", "concurrency", "rate", "poisson", "replay"]
PATTERNS: tuple[Pattern, ...] = ("sync", "concurrency", "rate", "poisson", "replay")
OPEN_LOOP: tuple[Pattern, ...] = ("rate", "poisson", "replay")
SweepKind = Literal["rate", "poisson"]
SWEEP_KINDS: tuple[SweepKind, ...] = ("rate", "poisson")
StageKind = Literal["synchronous", "throughput", "rate"]
MAX_SWEEP_POINTS = 100
MAX_REQUESTS = 10_000_000
MAX_CONCURRENCY = 100_000
MAX_SECONDS = 7 * 24 * 3600.0
MAX_RATE = 1_000_000.0
CANCEL_GRACE_S = 1.0  # seconds requests cut off at the wall get to close their connections
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
    # "replay": when each request is sent, seconds from the start (the first at 0), ascending
    schedule: tuple[float, ...] | None = None
    # (input tokens, output tokens) of request i, for any pattern; None: the run's one shape
    lengths: tuple[tuple[int, int], ...] | None = None

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
        self._check_trace()

    def _check_trace(self) -> None:
        if self.pattern == "replay":
            if not self.schedule:
                raise UsageError("--pattern replay needs a trace: --dataset NAME")
            if self.max_requests > len(self.schedule):
                raise ValueError(
                    f"a replay of {self.max_requests} requests needs as many arrivals, "
                    f"got {len(self.schedule)}"
                )
            offsets = np.asarray(self.schedule, dtype=np.float64)
            if not (
                np.isfinite(offsets).all() and offsets[0] >= 0 and (np.diff(offsets) >= 0).all()
            ):
                raise ValueError("a replay's arrivals must be finite, from 0 on, ascending")
        elif self.schedule is not None:
            raise ValueError(f"arrivals are given only to --pattern replay, not {self.pattern}")
        if self.lengths is not None:
            if len(self.lengths) < self.max_requests:
                raise ValueError(
                    f"{len(self.lengths)} request lengths for a run of {self.max_requests}"
                )
            if any(i < 1 or o < 1 for i, o in self.lengths):
                raise ValueError("request lengths must be at least 1 token")

    @property
    def clients(self) -> int:
        """Clients of a closed loop: 1 for ``sync``, N for ``concurrency``."""
        return self.concurrency if self.pattern == "concurrency" else 1

    def arrivals(self) -> list[float]:
        """When each request of an open loop (``rate``, ``poisson``, ``replay``) is sent, in
        seconds from the start; the first at 0."""
        count = self.max_requests
        if self.schedule is not None:
            return list(self.schedule[:count])
        if self.rate is None:
            return []
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
        if self.pattern == "replay":
            described["last_arrival_s"] = self.arrivals()[-1]
        return described

    def shape_for(self, index: int, shape: RequestShape) -> RequestShape:
        """The lengths of request ``index``: its own where the plan has ``lengths`` (warm-up
        requests take the first ones again), else ``shape``'s."""
        if self.lengths is None:
            return shape
        input_tokens, output_tokens = self.lengths[index % len(self.lengths)]
        return RequestShape(input_tokens, output_tokens, shape.exact_output)


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
        shape: Callable[[int], RequestShape],
        *,
        count: int,
        timeout: float,
        on_record: RecordCallback | None,
    ) -> None:
        self.client = client
        self.target = target
        self.shape = shape  # request index -> its lengths
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
                self.shape(index),
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

    def cut_off(self, why: str) -> list[asyncio.Task[RequestRecord]]:
        """Cancel the requests in flight, each recorded as incomplete; returns their tasks."""
        now = time.perf_counter()
        in_flight, self._in_flight = self._in_flight, {}
        for task, (index, sent) in sorted(in_flight.items(), key=lambda item: item[1][0]):
            task.cancel()
            shape = self.shape(index)
            self._keep(
                RequestRecord(
                    index=index,
                    start_s=sent - self.origin,
                    status="incomplete",
                    input_tokens=shape.input_tokens,
                    output_tokens=0,
                    output_tokens_source="chunks",
                    requested_output_tokens=shape.output_tokens,
                    e2el_s=now - sent,
                    error_kind="cut_off",
                    error=why,
                )
            )
        return list(in_flight)

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
    phase: _Phase,
    loop: Coroutine[Any, Any, None],
    deadline: float,
    stop: asyncio.Event | None,
    max_seconds: float,
) -> StopReason:
    """Run a phase's loop until it is done, the deadline (the run's ``max_seconds``) passes or
    ``stop`` is set."""
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
    cancelled = phase.cut_off(
        "the run was interrupted"
        if reason == "interrupted"
        else f"cut off at the run's time limit (--max-seconds {max_seconds:g})"
    )
    driver.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await driver
    if cancelled:  # let them close their connections before the run's client closes
        await asyncio.wait(cancelled, timeout=CANCEL_GRACE_S)
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
    pattern has), then the measured phase, the two within ``plan.max_seconds`` together (a
    warm-up that reaches it leaves no measured phase). ``timeout`` is the seconds one request
    may take in all; ``on_record`` sees every measured record as it is made; setting ``stop``
    ends the run early, keeping what was measured."""
    if not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(f"--timeout {timeout:g}: expected a positive number of seconds")

    def shape_of(index: int) -> RequestShape:
        return plan.shape_for(index, shape)

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout),
        limits=limits,
        # environment proxies must not catch a loopback benchmark
        trust_env=not is_loopback_url(target.base_url),
    ) as client:
        wall = time.perf_counter() + plan.max_seconds
        warmup_records: list[RequestRecord] = []
        if plan.warmup:
            warmup = _Phase(
                client, target, shape_of, count=plan.warmup, timeout=timeout, on_record=None
            )
            clients = min(plan.warmup, plan.clients)
            reason = await _bounded(
                warmup, warmup.closed_loop(clients, 0.0), wall, stop, plan.max_seconds
            )
            warmup_records = warmup.records
            if reason != "requests":  # interrupted, or the wall came during the warm-up
                return RunResult([], 0.0, reason, datetime.now(UTC), warmup_records)
        started_at = datetime.now(UTC)
        phase = _Phase(
            client, target, shape_of, count=plan.max_requests, timeout=timeout, on_record=on_record
        )
        loop = (
            phase.open_loop(plan.arrivals())
            if plan.pattern in OPEN_LOOP
            else phase.closed_loop(plan.clients, plan.ramp_s if plan.clients > 1 else 0.0)
        )
        reason = await _bounded(phase, loop, wall, stop, plan.max_seconds)
        duration = time.perf_counter() - phase.origin
    records = sorted(phase.records, key=lambda r: r.index)
    return RunResult(records, duration, reason, started_at, warmup_records)


# --- sweeps ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepPlan:
    """A sweep: ``points`` runs in all (at least the synchronous and the throughput run), each
    bounded by ``max_requests`` and ``max_seconds`` and preceded by its own ``warmup``."""

    points: int
    max_concurrency: int  # clients of the throughput run
    max_requests: int
    max_seconds: float
    kind: SweepKind = "rate"  # how the rate runs send: constant or Poisson arrivals
    warmup: int = 0
    seed: int = 0  # of the Poisson runs' arrivals
    ramp_s: float = 1.0  # the throughput run's clients start evenly over this many seconds

    def __post_init__(self) -> None:
        if not 2 <= self.points <= MAX_SWEEP_POINTS:
            raise UsageError(
                f"--sweep-points {self.points}: expected 2 to {MAX_SWEEP_POINTS} runs in all "
                "(the synchronous and the throughput run, then rates between them)"
            )
        if self.kind not in SWEEP_KINDS:
            raise UsageError(
                f"--sweep-kind {self.kind!r}: expected one of {', '.join(SWEEP_KINDS)}"
            )
        # every stage's plan is checked now, not after the first stages have run
        self.synchronous()
        self.throughput()
        self.at_rate(1.0)

    def synchronous(self) -> LoadPlan:
        return LoadPlan("sync", self.max_requests, self.max_seconds, warmup=self.warmup)

    def throughput(self) -> LoadPlan:
        return LoadPlan(
            "concurrency",
            self.max_requests,
            self.max_seconds,
            concurrency=self.max_concurrency,
            warmup=self.warmup,
            ramp_s=self.ramp_s,
        )

    def at_rate(self, rate: float) -> LoadPlan:
        return LoadPlan(
            self.kind,
            self.max_requests,
            self.max_seconds,
            rate=rate,
            warmup=self.warmup,
            seed=self.seed,
        )

    def rates(self, floor: float, ceiling: float) -> list[float]:
        """The rates of the runs after the first two: ``points - 2`` of them, evenly spaced
        strictly between ``floor`` and ``ceiling`` (guidellm: ``linspace(floor, ceiling,
        points)[1:-1]``); none when the ceiling is not above the floor."""
        if not (math.isfinite(floor) and math.isfinite(ceiling)) or ceiling <= floor:
            return []
        return [float(r) for r in np.linspace(floor, ceiling, self.points)[1:-1]]

    def describe(self) -> dict[str, Any]:
        return {
            "pattern": "sweep",
            "points": self.points,
            "kind": self.kind,
            "max_concurrency": self.max_concurrency,
            "max_requests_per_stage": self.max_requests,
            "max_seconds_per_stage": self.max_seconds,
            "warmup_per_stage": self.warmup,
            "ramp_s": self.ramp_s,
            **({"seed": self.seed} if self.kind == "poisson" else {}),
        }


@dataclass
class SweepStage:
    """One run of a sweep: what it offered and what it measured."""

    kind: StageKind
    plan: LoadPlan
    result: RunResult

    @property
    def request_rate(self) -> float:
        """Completed requests per second of the measured phase (0 when none completed)."""
        done = sum(1 for r in self.result.records if r.ok)
        return done / self.result.duration if self.result.duration > 0 else 0.0


@dataclass
class SweepResult:
    """The stages a sweep ran, in order. ``floor`` and ``ceiling`` are the synchronous and the
    throughput run's request rates (None until measured); ``note`` says why a sweep ended
    before its last stage, if it did."""

    stages: list[SweepStage]
    floor: float | None = None
    ceiling: float | None = None
    rates: list[float] = field(default_factory=list)
    stopped: Literal["done", "interrupted", "no_rates"] = "done"
    note: str | None = None


StageCallback = Callable[[int, StageKind, LoadPlan], None]


async def run_sweep(
    target: Target,
    shape: RequestShape,
    sweep: SweepPlan,
    *,
    timeout: float = 60.0,
    on_stage: StageCallback | None = None,
    on_record: RecordCallback | None = None,
    stop: asyncio.Event | None = None,
) -> SweepResult:
    """Run ``sweep`` against ``target``, stage after stage. ``on_stage`` hears of each stage as
    it starts (its index from 0, its kind, its plan); ``on_record`` sees every measured record;
    setting ``stop`` ends the stage running and the sweep, keeping the stages run and the part
    of the current one measured."""
    result = SweepResult(stages=[])

    async def stage(kind: StageKind, plan: LoadPlan) -> SweepStage:
        if on_stage is not None:
            on_stage(len(result.stages), kind, plan)
        measured = await run_load(
            target, shape, plan, timeout=timeout, on_record=on_record, stop=stop
        )
        done = SweepStage(kind, plan, measured)
        result.stages.append(done)
        if measured.stopped == "interrupted":
            result.stopped = "interrupted"
        return done

    synchronous = await stage("synchronous", sweep.synchronous())
    if synchronous.result.stopped == "interrupted":
        return result
    result.floor = synchronous.request_rate
    throughput = await stage("throughput", sweep.throughput())
    if throughput.result.stopped == "interrupted":
        return result
    result.ceiling = throughput.request_rate
    if sweep.points == 2:
        return result
    result.rates = sweep.rates(result.floor, result.ceiling)
    if not result.rates:
        result.stopped = "no_rates"
        result.note = (
            "no completed request in the synchronous run: no rate to sweep from"
            if result.floor == 0
            else f"the throughput run ({result.ceiling:.3g} req/s) was no faster than the "
            f"synchronous run ({result.floor:.3g} req/s): no rates between them to sweep"
        )
        return result
    for rate in result.rates:
        measured = await stage("rate", sweep.at_rate(rate))
        if measured.result.stopped == "interrupted":
            break
    return result
