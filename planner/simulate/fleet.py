"""A fleet of replicas behind a router: fixed, scheduled by the hour, or autoscaled; with
purchase classes, spot interruptions, admission control and a response cache.

The fleet walks the arrivals in time order. Before each arrival it handles fleet events that
are due (replicas becoming ready, spot interruptions, autoscaler ticks, schedule changes) and
moves to the arrival time the replicas that have work due by then; then admission control, the
response cache and the router decide where the request goes. Finished requests stream out in
columnar chunks.

Cost per event is O(log replicas), not O(replicas): a heap of replica wake-ups (each replica's
next iteration end) says which replicas to advance, and a heap of replicas by (outstanding
work, index) gives the least-loaded replica; both are engine.Dispatch, compiled with the
replica loop. Prefix-affinity routing asks an index of which replicas hold each prefix block
(kept up to date by the replicas' prefix caches), so it costs the request's matched blocks
times the replicas holding them. Results are those of
advancing every replica and scanning every replica: replicas due at the same time advance in
index order (the order finished requests come out in), and ties in load or in cached blocks go
to the lowest index.
"""

from __future__ import annotations

import gc
import heapq
import math
import random
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from planner.common.text import shown
from planner.errors import UsageError
from planner.simulate.engine import Dispatch, EngineConfig, Replica, Sequence, StepTimes
from planner.simulate.workload import Workload

ROUTERS = ("round-robin", "least-requests", "least-tokens", "prefix-affinity")
CHUNK_ROWS = 100_000
#: A finished request's row (engine.Finished), field by field, as the chunks carry it
ROW = np.dtype(
    [
        ("request_id", np.int64),
        ("arrival_s", np.float64),
        ("first_token_s", np.float64),
        ("finish_s", np.float64),
        ("replica", np.int32),
        ("class_index", np.int16),
        ("input_tokens", np.int64),
        ("output_tokens", np.int64),
        ("cached_tokens", np.int64),
        ("preemptions", np.int32),
    ]
)


_gc_lock = threading.Lock()
_gc_runs = 0  # simulations running with the collector paused (threads: the dashboard)
_gc_was_enabled = False


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while simulations run, and back on (if it was)
    when the last concurrent one ends. The loop makes no reference cycles (requests, records
    and the replicas' queues form trees, freed by reference counting as they go), so the
    collector only costs: each of its passes walks every request in flight, and a fleet holds
    a thousand replicas' worth of them (at 1,000 replicas, about a third of the run;
    docs/benchmarks.md)."""
    global _gc_runs, _gc_was_enabled
    with _gc_lock:
        if _gc_runs == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_runs += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_runs -= 1
            if _gc_runs == 0 and _gc_was_enabled:
                gc.enable()


@dataclass(frozen=True)
class Autoscaler:
    """Reactive scaling on outstanding requests per replica (``target_queue``) or on busy time
    (``target_utilization``), checked every ``interval_s``."""

    min_replicas: int = 1
    max_replicas: int = 64
    target_utilization: float | None = 0.7
    target_queue: float | None = None  # outstanding requests per replica
    interval_s: float = 15.0
    cold_start_s: float = 45.0
    warm_start_s: float = 7.0
    warm_pool: int = 0  # replicas kept warm: these start in warm_start_s
    scale_in_utilization: float = 0.15
    scale_in_after_s: float = 300.0

    def __post_init__(self) -> None:
        if self.min_replicas < 0 or self.max_replicas < max(1, self.min_replicas):
            raise UsageError("autoscaler: need 0 <= min replicas <= max replicas, max >= 1")
        if (self.target_utilization is None) == (self.target_queue is None):
            raise UsageError("autoscaler: give exactly one of target utilization or target queue")


API_REPLICA = -2  # the replica column of a request a per-token API served (-1: none did)


@dataclass(frozen=True)
class Overflow:
    """A per-token API the router sends what the replicas are too busy for: an arrival goes to
    the API when every routable replica has ``queue`` or more requests outstanding (or none is
    up), unless the API's rate limit is spent (``rpm`` requests or ``tpm`` tokens in the last
    60 s), when it waits on the replicas as any other. The API answers with its own latency:
    the first token after ``ttft_s``, each further one after ``tpot_s`` (medians, each request's
    drawn with log-normal spread ``sigma``: a hosted API's latency varies with its own load)."""

    queue: int
    ttft_s: float
    tpot_s: float
    sigma: float = 0.3
    rpm: float | None = None
    tpm: float | None = None

    def __post_init__(self) -> None:
        if self.queue < 0:
            raise UsageError(f"overflow queue {self.queue}: expected 0 or more requests")
        if not (self.ttft_s > 0 and self.tpot_s > 0 and self.sigma >= 0):
            raise UsageError("overflow API latency: expected positive seconds")
        for name in ("rpm", "tpm"):
            limit = getattr(self, name)
            if limit is not None and not limit > 0:
                raise UsageError(f"overflow API {name} {limit}: expected a positive limit")


@dataclass(frozen=True)
class FleetConfig:
    replicas: dict[str, int] = field(default_factory=lambda: {"on-demand": 1})
    schedule: list[int] | None = None  # replicas per hour (on-demand), instead of a fixed count
    autoscaler: Autoscaler | None = None
    router: str = "least-requests"
    gpus_per_replica: int = 1
    spot_interruptions_per_hour: float = 0.0
    spot_replace_s: float = 120.0
    rate_limits: dict[str, tuple[float, float]] = field(default_factory=dict)  # class: (rps, burst)
    response_cache_hit_rate: float = 0.0
    prefix_affinity_slack: int = 8  # prefix-affinity gives up when this much busier than the least
    overflow: Overflow | None = None  # a per-token API taking what the replicas are too busy for
    seed: int = 0

    def __post_init__(self) -> None:
        if self.router not in ROUTERS:
            raise UsageError(f"router {shown(self.router)}: expected one of {', '.join(ROUTERS)}")
        if sum(self.replicas.values()) < 1 and not self.schedule and not self.autoscaler:
            raise UsageError("a fleet needs at least one replica")
        if not 0 <= self.response_cache_hit_rate < 1:
            raise UsageError("response cache hit rate must be in [0, 1)")
        if self.spot_interruptions_per_hour < 0:
            raise UsageError("spot interruption rate must be non-negative")


@dataclass(slots=True)  # slots: the router reads one per request, from a large fleet
class Member:
    """A replica's life in the fleet."""

    replica: Replica
    purchase: str
    launched: float
    ready: float
    down: float = math.inf
    idle_since: float = 0.0
    busy_mark: float = 0.0  # busy seconds at the last autoscaler tick

    @property
    def draining(self) -> bool:
        """Taking no new requests, retired once empty (the mark is the replica's: Dispatch
        reads it)."""
        return self.replica.draining

    @property
    def up(self) -> bool:
        return self.down == math.inf and not self.draining


class PrefixIndex:
    """Which replicas hold each block in their prefix cache, told by the replicas (see
    engine.PrefixListener) as blocks enter and leave their caches. Only replicas the router
    may pick are in it: a replica that drains or retires is forgotten for good, and one not
    yet ready has served nothing, so its cache is empty."""

    __slots__ = ("holders",)

    def __init__(self) -> None:
        self.holders: dict[int, set[int]] = {}  # block -> indexes of the replicas holding it

    def cached(self, block: int, replica: int) -> None:
        holders = self.holders.get(block)
        if holders is None:
            self.holders[block] = {replica}
        else:
            holders.add(replica)

    def evicted(self, block: int, replica: int) -> None:
        holders = self.holders[block]
        holders.discard(replica)
        if not holders:
            del self.holders[block]  # the index stays as big as the caches, not the trace

    def watch(self, replica: Replica) -> None:
        replica.prefix_listener = self

    def forget(self, replica: Replica) -> None:
        """A draining or retired replica's blocks leave the index; it tells it nothing more."""
        if replica.prefix_listener is not self:
            return  # forgotten when it started draining
        replica.prefix_listener = None
        for block in replica.prefix_cache:
            self.evicted(block, replica.index)


@dataclass
class FleetStats:
    launched: int = 0
    spot_interruptions: int = 0
    rerouted_requests: int = 0
    rejected_by_rate_limit: int = 0
    rejected_too_long: int = 0
    rejected_no_replica: int = 0  # waiting for a replica when the run ended
    response_cache_hits: int = 0
    gpu_hours: dict[str, float] = field(default_factory=dict)
    peak_replicas: int = 0
    # requests the overflow API served, their tokens, and those its rate limit sent back
    overflowed: int = 0
    overflow_input_tokens: int = 0
    overflow_output_tokens: int = 0
    overflow_rate_limited: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class TimelineSample:
    t_s: float
    replicas_up: int
    busy: int
    queued: int
    running: int
    by_purchase: dict[str, int]


class Fleet:
    #: Where only the router decides, the arrival loop runs compiled (Dispatch.serve), past
    #: the per-arrival methods below; a subclass that overrides _advance_to or _route to see
    #: every arrival (the tests' references and checks) turns it off.
    compiled_arrivals: ClassVar[bool] = True

    def __init__(
        self,
        workload: Workload,
        times: StepTimes,
        engine: EngineConfig,
        config: FleetConfig,
        on_chunk: Callable[[dict[str, np.ndarray]], None],
        on_sample: Callable[[TimelineSample], None] | None = None,
        sample_every_s: float = 10.0,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.workload = workload
        self.times = times
        self.engine = engine
        self.config = config
        self.on_chunk = on_chunk
        self.on_sample = on_sample
        self.sample_every_s = sample_every_s
        self.progress = progress
        self.rng = np.random.default_rng(config.seed)
        self.members: list[Member] = []  # every replica ever launched, by index
        self.live: list[Member] = []  # launched and not yet retired
        self.events: list[tuple[float, int, str, Any]] = []
        self._event_seq = 0
        self.pending: list[Sequence] = []  # arrived while no replica was up
        self.stats = FleetStats()
        # the router, resolved once (read per request)
        self._round_robin = config.router == "round-robin"
        self._prefix_affinity = config.router == "prefix-affinity"
        self._buckets = {
            c: [burst, 0.0] for c, (_, burst) in config.rate_limits.items()
        }  # class -> [tokens, last refill]
        self._next_sample = 0.0
        self._low_since: float | None = None
        load = {
            "least-requests": "outstanding",
            "prefix-affinity": "outstanding",
            "least-tokens": "outstanding_tokens",
        }.get(config.router, "")
        self.dispatch = Dispatch(load)
        self._least_by_requests = load == "outstanding"  # the dispatch's heap knows the least
        self._records = self.dispatch.records  # every replica's rows, then the fleet's own
        # routable replicas (up, not draining, ready), valid from _routable_at until
        # _routable_until (the next ready time); None after a replica launches, drains or retires
        self._candidates: list[Member] | None = None
        self._routable: list[Member] = []
        self._routable_at = 0.0
        self._routable_until = math.inf
        self._prefix_index = PrefixIndex() if config.router == "prefix-affinity" else None
        # the overflow API's last minute of requests (arrival, tokens) and its latency draws
        self._api_window: deque[tuple[float, int]] = deque()
        self._api_window_tokens = 0
        self._api_rng = random.Random(config.seed * 7919 + 17)

    # --- events ----------------------------------------------------------------------------

    def _schedule(self, t: float, kind: str, payload: Any = None) -> None:
        self._event_seq += 1
        heapq.heappush(self.events, (t, self._event_seq, kind, payload))

    def _launch(self, now: float, purchase: str, delay: float) -> Member:
        index = len(self.members)
        replica = Replica(
            index, self.times, self.engine, prefix_block_tokens=self.workload.prefix_block_tokens
        )
        self.dispatch.add(replica)
        if self._prefix_index is not None:
            self._prefix_index.watch(replica)
        member = Member(replica, purchase, launched=now, ready=now + delay)
        self.members.append(member)
        self.live.append(member)
        self._candidates = None
        self.stats.launched += 1
        self.stats.peak_replicas = max(self.stats.peak_replicas, len(self.live))
        self._schedule(now + delay, "ready", member)
        return member

    def _ready(self, member: Member, now: float) -> None:
        if member.down != math.inf:
            return
        member.replica.clock = now
        member.idle_since = now
        rate = self.config.spot_interruptions_per_hour
        if member.purchase == "spot" and rate > 0:
            self._schedule(now + self.rng.exponential(3600.0 / rate), "interrupt", member)
        pending, self.pending = self.pending, []
        for seq in pending:
            self._route(seq, now)

    def _interrupt(self, member: Member, now: float) -> None:
        if member.down != math.inf:
            return
        seqs = member.replica.evict()  # advanced to now with every replica (_handle_events)
        self._retire(member, now)
        self.stats.spot_interruptions += 1
        self.stats.rerouted_requests += len(seqs)
        self._launch(now, "spot", self.config.spot_replace_s)
        for seq in seqs:
            self._route(seq, now)

    def _retire(self, member: Member, now: float) -> None:
        member.down = now
        self.dispatch.set_wake(member.replica, math.inf)  # out of the wake-up heap
        self.live.remove(member)
        self._candidates = None
        if self._prefix_index is not None:
            self._prefix_index.forget(member.replica)
        hours = (now - member.launched) / 3600 * self.config.gpus_per_replica
        self.stats.gpu_hours[member.purchase] = (
            self.stats.gpu_hours.get(member.purchase, 0.0) + hours
        )

    def _scale_to(self, target: int, now: float, delay: float) -> None:
        live = [m for m in list(self.live) if not m.draining]
        for _ in range(target - len(live)):
            self._launch(now, "on-demand", delay)
        if target < len(live):
            # drain the newest first (they hold the least work)
            for member in sorted(live, key=lambda m: -m.launched)[: len(live) - target]:
                member.replica.draining = True
                self._candidates = None
                if self._prefix_index is not None:
                    self._prefix_index.forget(member.replica)
                self._retire_if_drained(member, now)

    def _retire_if_drained(self, member: Member, now: float) -> None:
        if member.draining and member.down == math.inf and member.replica.outstanding == 0:
            self._retire(member, now)

    def _tick(self, now: float) -> None:
        scaler = self.config.autoscaler
        assert scaler is not None
        up = [m for m in list(self.live) if not m.draining and m.ready <= now]
        starting = [m for m in list(self.live) if not m.draining and m.ready > now]
        if up:
            busy = sum(m.replica.busy_s - m.busy_mark for m in up)
            utilization = busy / (len(up) * scaler.interval_s)
            for m in up:
                m.busy_mark = m.replica.busy_s
            if scaler.target_queue is not None:
                load = sum(m.replica.outstanding for m in up) / len(up) / scaler.target_queue
                low = load < scaler.scale_in_utilization
            else:
                assert scaler.target_utilization is not None
                load = utilization / scaler.target_utilization
                low = utilization < scaler.scale_in_utilization
            current = len(up) + len(starting)
            if load > 1.0:
                target = min(scaler.max_replicas, max(current, math.ceil(len(up) * load)))
                warm = scaler.warm_pool
                for i in range(target - current):
                    delay = scaler.warm_start_s if i < warm else scaler.cold_start_s
                    self._launch(now, "on-demand", delay)
                self._low_since = None
            elif low:
                if self._low_since is None:
                    self._low_since = now
                elif (
                    now - self._low_since >= scaler.scale_in_after_s
                    and len(up) > scaler.min_replicas
                ):
                    self._scale_to(len(up) + len(starting) - 1, now, scaler.cold_start_s)
                    self._low_since = now
            else:
                self._low_since = None
        elif self.pending and not starting:
            self._launch(now, "on-demand", scaler.cold_start_s)
        self._schedule(now + scaler.interval_s, "tick")

    def _handle_events(self, until: float) -> None:
        while self.events and self.events[0][0] <= until:
            t, _, kind, payload = heapq.heappop(self.events)
            self._advance_to(t)
            if kind == "ready":
                self._ready(payload, t)
            elif kind == "interrupt":
                self._interrupt(payload, t)
            elif kind == "tick":
                self._tick(t)
            elif kind == "hour":
                self._scale_to(payload, t, 0.0)

    # --- the indexes: wake-ups and loads (engine.Dispatch) ---------------------------------

    def _advance_to(self, t: float) -> None:
        """Run every replica's iterations that end by ``t``: only replicas with an event due
        are touched, in index order (as a loop over every replica would finish them)."""
        self.dispatch.advance_due(t)
        self._after_advance()

    def _after_advance(self) -> None:
        """Retire the draining replicas the last advance left empty, in the order they emptied,
        and stream out the rows once a chunk is full."""
        if self.dispatch.drained:
            for replica in self.dispatch.take_drained():
                self._retire_if_drained(self.members[replica.index], replica.last_out)
        if len(self._records) >= CHUNK_ROWS:
            self._flush()

    def _next_wake(self) -> float:
        """The earliest next event of any live replica (math.inf when all are idle)."""
        return self.dispatch.next_wake()

    def _advance_before(self, limit: float) -> float:
        """Run every replica's events before ``limit`` in one compiled loop, when nothing else
        happens before it (the drain: no arrivals; no fleet event or sample before ``limit``);
        returns the last event's time (-math.inf: none)."""
        last = self.dispatch.advance_before(limit)
        self._after_advance()
        return last

    def _candidates_at(self, now: float) -> list[Member]:
        """Replicas the router may pick at ``now``, in index order; recomputed only when the
        fleet changed or a starting replica became ready."""
        candidates = self._candidates
        if candidates is not None and self._routable_at <= now < self._routable_until:
            return candidates
        candidates = []
        until = math.inf
        for member in self.live:
            if member.draining:
                continue
            if member.ready <= now:
                candidates.append(member)
            else:
                until = min(until, member.ready)
        self._candidates = self._routable = candidates
        self._routable_at, self._routable_until = now, until
        self.dispatch.set_routable([m.replica for m in candidates])
        return candidates

    def _least_loaded(self, candidates: list[Member]) -> Member:
        """The routable replica (one of ``candidates``) with the least load; the lowest index
        among equals."""
        return self.members[self.dispatch.least_loaded()]

    # --- requests --------------------------------------------------------------------------

    def _reject(self, seq: Sequence, cache_hit: bool) -> None:
        """A request no replica serves: rejected (NaN times), or answered from the response
        cache at once."""
        t = seq.arrival
        first = finish = t if cache_hit else math.nan
        self._records.append(
            (
                seq.id,
                t,
                first,
                finish,
                -1,
                seq.klass,
                seq.input_tokens,
                seq.output_tokens,
                0,
                0,
            )
        )
        if len(self._records) >= CHUNK_ROWS:
            self._flush()

    def _flush(self) -> None:
        records = self._records
        if not records:
            return
        # one pass over the rows into a table of their fields (2.5x faster than a column at a
        # time through np.asarray, which inspects every element for its type)
        table = np.fromiter(records, dtype=ROW, count=len(records))
        records.clear()  # in place: the replicas append to this list
        chunk = {name: np.ascontiguousarray(table[name]) for name in ROW.names or ()}
        # only a request that was not served has NaN times; only the response cache answers
        # a request without a replica
        rejected = np.isnan(chunk["finish_s"])
        chunk["rejected"] = rejected
        chunk["response_cache_hit"] = (chunk["replica"] == -1) & ~rejected  # API rows are -2
        self.on_chunk(chunk)

    def _admit(self, klass: int, now: float) -> bool:
        """Token bucket of the request's class: False when it must be rejected."""
        name = self.workload.classes[klass]
        limit = self.config.rate_limits.get(name)
        if limit is None:
            return True
        rate, burst = limit
        bucket = self._buckets[name]
        bucket[0] = min(burst, bucket[0] + (now - bucket[1]) * rate)
        bucket[1] = now
        if bucket[0] >= 1.0:
            bucket[0] -= 1.0
            return True
        return False

    def _route(self, seq: Sequence, now: float) -> None:
        candidates = self._candidates
        if candidates is None or not self._routable_at <= now < self._routable_until:
            candidates = self._candidates_at(now)
        if self.config.overflow is not None and self._overflowed(seq, candidates, now):
            return
        if not candidates:
            self.pending.append(seq)
            return
        if len(candidates) == 1:
            chosen = candidates[0]
        elif self._round_robin:
            chosen = candidates[self.dispatch.take_turn(len(candidates))]
        else:
            chosen = self._least_loaded(candidates)
            if self._prefix_affinity and seq.blocks:
                chosen = self._affinity(seq, candidates, chosen)
        self.dispatch.submit(chosen.replica, seq, now)
        if len(self._records) >= CHUNK_ROWS:  # a request too long, refused
            self._flush()

    def _overflowed(self, seq: Sequence, candidates: list[Member], now: float) -> bool:
        """Send ``seq`` to the overflow API if the replicas are too busy and the API's rate
        limit has room: its row, with the API's latency, is written at once."""
        api = self.config.overflow
        assert api is not None
        if candidates:
            if len(candidates) == 1:
                least = candidates[0].replica.outstanding
            elif self._least_by_requests:
                least = self.members[self.dispatch.least_loaded()].replica.outstanding
            else:
                least = min(m.replica.outstanding for m in candidates)
            if least < api.queue:
                return False
        window = self._api_window
        while window and window[0][0] <= now - 60.0:
            self._api_window_tokens -= window.popleft()[1]
        tokens = seq.input_tokens + seq.output_tokens
        if (api.rpm is not None and len(window) + 1 > api.rpm) or (
            api.tpm is not None and self._api_window_tokens + tokens > api.tpm
        ):
            self.stats.overflow_rate_limited += 1
            return False
        window.append((now, tokens))
        self._api_window_tokens += tokens
        draw = self._api_rng.lognormvariate
        first = now + api.ttft_s * draw(0.0, api.sigma)
        finish = first + max(seq.output_tokens - 1, 0) * api.tpot_s * draw(0.0, api.sigma)
        self._records.append(
            (
                seq.id,
                now,
                first,
                finish,
                API_REPLICA,
                seq.klass,
                seq.input_tokens,
                seq.output_tokens,
                0,
                0,
            )
        )
        self.stats.overflowed += 1
        self.stats.overflow_input_tokens += seq.input_tokens
        self.stats.overflow_output_tokens += seq.output_tokens
        return True

    def _affinity(self, seq: Sequence, candidates: list[Member], least: Member) -> Member:
        """The candidate whose prefix cache holds the longest run of the request's leading
        blocks (the first in ``candidates`` order among equals; ``least`` when none holds the
        first block), unless it is busier than ``least`` by more than the slack. The block
        index narrows the holders block by block: the cost is the matched blocks times the
        replicas holding them, not the number of replicas."""
        assert seq.blocks is not None and self._prefix_index is not None
        holders = self._prefix_index.holders
        blocks = seq.blocks
        first = holders.get(blocks[0])
        if first is None:
            return least
        # the index holds only the router's own candidates (in index order); any other list
        # (a subclass's) is taken as given
        routable = candidates is self._routable
        matched = first if routable else first.intersection(m.replica.index for m in candidates)
        if not matched:
            return least
        for k in range(1, len(blocks)):
            held = holders.get(blocks[k])
            if held is None:
                break
            deeper = matched & held  # iterates over the smaller set
            if not deeper:
                break
            matched = deeper
        if routable:
            best = self.members[min(matched)]
        else:
            best = next(m for m in candidates if m.replica.index in matched)
        slack = self.config.prefix_affinity_slack
        if best.replica.outstanding > least.replica.outstanding + slack:
            return least
        return best

    def _sample(self, now: float) -> None:
        if self.on_sample is None:
            return
        live = [m for m in self.live if m.ready <= now]
        by_purchase: dict[str, int] = {}
        for m in list(self.live):
            by_purchase[m.purchase] = by_purchase.get(m.purchase, 0) + 1
        self.on_sample(
            TimelineSample(
                t_s=now,
                replicas_up=len(live),
                busy=sum(not m.replica.idle for m in live),
                queued=sum(len(m.replica.waiting) for m in live) + len(self.pending),
                running=sum(m.replica.outstanding - len(m.replica.waiting) for m in live),
                by_purchase=by_purchase,
            )
        )

    # --- the run ---------------------------------------------------------------------------

    def run(self) -> FleetStats:
        with cyclic_gc_paused():
            return self._run()

    def _run(self) -> FleetStats:
        w = self.workload
        cfg = self.config
        if cfg.schedule:
            self._scale_to(cfg.schedule[0], 0.0, 0.0)
            for hour, count in enumerate(cfg.schedule[1:], start=1):
                self._schedule(hour * 3600.0, "hour", count)
        elif cfg.autoscaler:
            for _ in range(max(1, cfg.autoscaler.min_replicas)):
                self._launch(0.0, "on-demand", 0.0)
            self._schedule(cfg.autoscaler.interval_s, "tick")
        else:
            for purchase, count in cfg.replicas.items():
                for _ in range(count):
                    self._launch(0.0, purchase, 0.0)
        self._handle_events(0.0)

        for first in range(0, len(w), CHUNK_ROWS):
            # Python lists of one chunk at a time: memory stays flat in the trace's length
            self._serve(first, min(len(w), first + CHUNK_ROWS))
            if self.progress is not None:
                self.progress(min(len(w), first + CHUNK_ROWS))
        self._drain()
        self._flush()
        return self.stats

    def _serve(self, first: int, last: int) -> None:
        w = self.workload
        cfg = self.config
        arrivals = w.arrival_s[first:last].tolist()
        inputs = w.input_tokens[first:last].tolist()
        outputs = w.output_tokens[first:last].tolist()
        classes = w.class_index[first:last].tolist()
        blocks = w.prefix_blocks
        cache_hits = (
            (self.rng.random(last - first) < cfg.response_cache_hit_rate).tolist()
            if cfg.response_cache_hit_rate > 0
            else None
        )
        events = self.events
        dispatch = self.dispatch
        limited = bool(cfg.rate_limits)  # without limits every request is admitted
        # the compiled loop hands back each arrival that meets anything else, taken whole here
        compiled = (
            self.compiled_arrivals
            and not limited
            and cache_hits is None
            and not self._prefix_affinity
            and cfg.overflow is None
        )
        count = last - first
        k = 0
        while k < count:
            if compiled and self._candidates and self._routable_at <= arrivals[k]:
                stop = min(events[0][0] if events else math.inf, self._routable_until)
                done = dispatch.serve(
                    arrivals,
                    inputs,
                    outputs,
                    classes,
                    blocks,
                    first,
                    k,
                    stop,
                    self._next_sample,
                    CHUNK_ROWS,
                    self._round_robin,
                )
                if done > k:  # the last one routed: its rows and sample, as below
                    k = done
                    self._after_route(arrivals[k - 1])
                self._after_advance()  # it may have stopped after an advance
                if k == count:
                    break
            i = first + k
            t = arrivals[k]
            if events and events[0][0] <= t:
                self._handle_events(t)
            if dispatch.soonest <= t:
                self._advance_to(t)
            seq = Sequence(i, t, inputs[k], outputs[k], classes[k], blocks[i] if blocks else None)
            if limited and not self._admit(classes[k], t):
                self.stats.rejected_by_rate_limit += 1
                self._reject(seq, cache_hit=False)
            elif cache_hits is not None and cache_hits[k]:
                self.stats.response_cache_hits += 1
                self._reject(seq, cache_hit=True)
            else:
                self._route(seq, t)
            self._after_route(t)
            k += 1

    def _after_route(self, t: float) -> None:
        """After the arrival at ``t``: stream out a full chunk of rows, take a due sample."""
        if len(self._records) >= CHUNK_ROWS:
            self._flush()
        if t >= self._next_sample:
            self._sample(t)
            self._next_sample = t + self.sample_every_s

    def _drain(self) -> None:
        """Run until every request has finished; then close the books on every replica."""
        end = self.workload.duration_s
        while True:
            next_replica = self._next_wake()
            busy = next_replica < math.inf or self.pending
            if not busy:
                break
            next_event = self.events[0][0] if self.events else math.inf
            if self.pending and next_event == math.inf:
                break  # requests wait for replicas that will never come
            # the replicas' events up to the next fleet event or sample need no step each
            until = min(next_event, self._next_sample)
            if next_replica < until:
                end = max(end, self._advance_before(until))
                continue
            t = min(next_replica, next_event)
            if next_event <= next_replica:
                self._handle_events(t)
            else:
                self._advance_to(t)
            end = max(end, t)
            if t >= self._next_sample:
                self._sample(t)
                self._next_sample = t + self.sample_every_s
        for seq in self.pending:
            self._reject(seq, cache_hit=False)
        self.stats.rejected_no_replica += len(self.pending)
        self.stats.rejected_too_long = sum(m.replica.refused for m in self.members)
        self.pending = []
        for member in list(self.live):
            self._retire(member, max(end, member.launched))
        self._sample(end)
        self.end_s = end
