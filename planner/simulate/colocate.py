"""Co-located models: several engine processes on the same GPUs, time-sharing their compute.

Each of ``replicas`` instances runs one process per member (a model with its own engine
settings, KV capacity, step times and requests; the memory split is
:func:`planner.recommend.colocate.colocation_fit`'s). Every member's requests go to its own
processes, so each member is a fleet of its own; what couples them is the GPU they share.

Interference, as a fixed point on mean busy fractions: member ``i``'s iterations run slower by
the factor ``1 + sum over the other members j of b_j``, where ``b_j`` is the share of time a
process of ``j`` has an iteration in flight (its replicas' busy seconds over replicas x its
window, first arrival to last finish), counted over the part of ``j``'s window that overlaps
``i``'s. That is processor sharing with the others in flight independently of ``i``: while
``k`` processes have an iteration in flight each runs at ``1/k`` of the GPU, and an iteration of
``i`` meets on average ``sum b_j`` others. Starting from no interference (factor 1),
each round simulates every member with its factor (:class:`StretchedStepTimes`), measures the
busy fractions, and sets the factors again, until no factor moves by ``tolerance`` (relative)
or ``max_iterations`` rounds have run. A slower member is busier, which slows the others, so
the factors grow from round to round, and they are bounded by the number of members (every
fraction is at most 1): GPUs the members overload end near that bound, their queues showing in
the P99s. Limits (docs/simulator.md, "Co-located models"): the fractions are means over the
whole run, so bursts that coincide are under-counted; no MPS or MIG partitioning, no cache or
memory-bandwidth contention beyond the time-sharing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.errors import UsageError
from planner.simulate.engine import EngineConfig, StepTimes
from planner.simulate.fleet import Fleet, FleetConfig
from planner.simulate.metrics import SLO, MetricsCollector, RequestChunk
from planner.simulate.workload import Workload

METRICS = ("ttft", "tpot", "e2e")


class StretchedStepTimes:
    """``inner``'s step times, ``factor`` times longer on the GPU: the decode step's base and
    context terms and every iteration; the request's time outside the GPU (HTTP, tokenizing)
    is not shared and stays as it is."""

    def __init__(self, inner: StepTimes, factor: float) -> None:
        if not factor >= 1.0:
            raise ValueError(f"a stretch factor is at least 1, got {factor!r}")
        self.inner = inner
        self.factor = factor
        # read once by each replica, as the inner's are
        self.gamma = inner.gamma * factor
        self.request_overhead = inner.request_overhead

    def decode_base(self, batch: int) -> float:
        return self.inner.decode_base(batch) * self.factor

    def iteration(self, tokens: float, attn_pairs: float, kv_read: float, logits: float) -> float:
        return self.inner.iteration(tokens, attn_pairs, kv_read, logits) * self.factor


@dataclass(frozen=True)
class ColocatedMember:
    """One model of the co-located set: its engine settings (with the KV capacity its memory
    share gives), its step times alone on the GPUs, and its requests."""

    name: str
    engine: EngineConfig
    times: StepTimes
    workload: Workload
    slos: dict[str, SLO] | None = None


@dataclass(frozen=True)
class MemberOutcome:
    """One member's requests, served beside the others."""

    name: str
    p99: dict[str, float | None]  # ttft, tpot, e2e in seconds, over all its requests
    busy_fraction: float  # share of its window (first arrival to last finish) a process of it
    # has an iteration in flight, averaged over its replicas
    stretch: float  # the factor its GPU time ran slower by (1: alone)
    rejected: int
    summary: dict[str, Any]  # MetricsCollector.summary(): every class, every percentile

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "p99": self.p99,
            "busy_fraction": self.busy_fraction,
            "stretch": self.stretch,
            "rejected": self.rejected,
        }


@dataclass(frozen=True)
class ColocatedResult:
    members: tuple[MemberOutcome, ...]
    replicas: int
    iterations: int  # rounds of simulation run
    converged: bool  # False: max_iterations ran out (the GPUs are likely overloaded)
    span_s: float  # from the first arrival to the last finish of any member
    history: list[tuple[float, ...]] = field(default_factory=list)  # the factors of each round

    def member(self, name: str) -> MemberOutcome:
        return next(m for m in self.members if m.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "iterations": self.iterations,
            "converged": self.converged,
            "span_s": self.span_s,
            "members": [m.to_dict() for m in self.members],
        }


@dataclass(frozen=True)
class _Run:
    busy_s: float  # the replicas' seconds with an iteration in flight, summed
    start_s: float  # the window it served: its first arrival to its last finish
    end_s: float
    rejected: int
    summary: dict[str, Any]

    @property
    def span_s(self) -> float:
        return self.end_s - self.start_s


def simulate_colocated(
    members: Sequence[ColocatedMember],
    *,
    replicas: int,
    router: str = "least-requests",
    seed: int = 0,
    tolerance: float = 0.01,
    max_iterations: int = 6,
) -> ColocatedResult:
    """Serve each member's workload on ``replicas`` instances that run one process of every
    member, the processes time-sharing each instance's GPUs (see the module's docstring).

    One member alone is exactly the plain fleet simulation (its factor is 1)."""
    if not members:
        raise UsageError("co-location needs at least one model")
    names = [m.name for m in members]
    if len(set(names)) != len(names):
        raise UsageError(f"co-located members are named twice: {', '.join(names)}")
    if replicas < 1:
        raise UsageError(f"replicas {replicas}: expected at least 1")
    if max_iterations < 1 or not tolerance > 0:
        raise UsageError("need at least one iteration and a positive tolerance")
    for m in members:
        if len(m.workload) == 0:
            raise UsageError(f"{m.name}: the workload has no requests")
    config = FleetConfig(replicas={"on-demand": replicas}, router=router, seed=seed)
    factors = tuple(1.0 for _ in members)
    cache: dict[tuple[int, float], _Run] = {}  # deterministic: an unchanged factor is not rerun
    history = []
    converged = False
    for iteration in range(1, max_iterations + 1):
        history.append(factors)
        runs = []
        for index, (member, factor) in enumerate(zip(members, factors, strict=True)):
            if (index, factor) not in cache:
                cache[(index, factor)] = _simulate(member, factor, config)
            runs.append(cache[(index, factor)])
        busy = [run.busy_s / (replicas * run.span_s) if run.span_s > 0 else 0.0 for run in runs]
        implied = tuple(_stretch(index, runs, busy) for index in range(len(runs)))
        if all(abs(new - old) < tolerance * old for new, old in zip(implied, factors, strict=True)):
            converged = True
            break
        if iteration < max_iterations:
            factors = implied
    outcomes = tuple(
        MemberOutcome(
            name=member.name,
            p99={metric: run.summary["all"][metric]["p99"] for metric in METRICS},
            busy_fraction=fraction,
            stretch=factor,
            rejected=run.rejected,
            summary=run.summary,
        )
        for member, run, fraction, factor in zip(members, runs, busy, factors, strict=True)
    )
    return ColocatedResult(
        members=outcomes,
        replicas=replicas,
        iterations=iteration,
        converged=converged,
        span_s=max(run.end_s for run in runs) - min(run.start_s for run in runs),
        history=history,
    )


def _stretch(index: int, runs: list[_Run], busy: list[float]) -> float:
    """Member ``index``'s factor: 1 + the mean number of other processes in flight over its
    window, each other member's busy time spread evenly over its own window (only the part
    of it that overlaps this one counts)."""
    mine = runs[index]
    if mine.span_s <= 0:
        return 1.0
    others = 0.0
    for other, (run, fraction) in enumerate(zip(runs, busy, strict=True)):
        if other != index:
            overlap = max(0.0, min(mine.end_s, run.end_s) - max(mine.start_s, run.start_s))
            others += fraction * overlap / mine.span_s
    return 1.0 + others


def _simulate(member: ColocatedMember, factor: float, config: FleetConfig) -> _Run:
    """``member``'s fleet with its GPU time stretched by ``factor`` (as ``simulate`` runs it)."""
    times: StepTimes = member.times if factor == 1.0 else StretchedStepTimes(member.times, factor)
    collector = MetricsCollector(member.workload.classes, member.slos or {})

    def on_chunk(columns: dict[str, np.ndarray]) -> None:
        collector.add(RequestChunk(**columns))

    fleet = Fleet(member.workload, times, member.engine, config, on_chunk)
    stats = fleet.run()
    return _Run(
        busy_s=sum(m.replica.busy_s for m in fleet.members),
        start_s=float(member.workload.arrival_s[0]),
        end_s=fleet.end_s,
        rejected=stats.rejected_too_long + stats.rejected_no_replica,
        summary=collector.summary(),
    )
