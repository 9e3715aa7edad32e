"""``simulate()``: a workload through a fleet, priced and summarised. The CLI and the
recommender call this one function."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner.common.text import shown
from planner.errors import UsageError
from planner.latency.catalog import load_catalog
from planner.latency.model import (
    DEFAULT_MAX_BATCHED_TOKENS,
    DEFAULT_MAX_SEQS,
    Deployment,
    LatencyModel,
)
from planner.latency.profile import Profile
from planner.simulate.engine import EngineConfig, RooflineStepTimes, StepTimes
from planner.simulate.fleet import Fleet, FleetConfig, FleetStats, TimelineSample
from planner.simulate.metrics import (
    SLO,
    MetricsCollector,
    RequestChunk,
    RequestWriter,
    Timeline,
    cost,
)
from planner.simulate.workload import Workload


@dataclass(frozen=True)
class ServingSpec:
    """What each replica runs, and how its engine schedules."""

    gpu: str
    model: str
    precision: str = "bf16"
    tp: int = 1
    kv_cache: str = "fp16"
    memory_utilization: float = 0.9
    max_seqs: int = DEFAULT_MAX_SEQS
    max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS
    chunked_prefill: bool = True
    policy: str = "continuous"
    static_max_batch: int = 8
    static_max_wait_s: float = 0.05
    prefix_caching: bool = True
    prefix_hit_rate: float = 0.0

    def deployment(self) -> Deployment:
        catalog = load_catalog()
        if self.kv_cache not in ("fp16", "bf16", "fp8"):
            raise UsageError(f"KV cache {shown(self.kv_cache)}: expected fp16 or fp8")
        return Deployment(
            gpu=catalog.gpus.get(self.gpu),
            model=catalog.models.get(self.model),
            precision=catalog.precisions.get(self.precision),
            tp=self.tp,
            kv_bytes=1.0 if self.kv_cache == "fp8" else 2.0,
            memory_utilization=self.memory_utilization,
            max_batched_tokens=self.max_batched_tokens,
        )

    def engine_config(self, deployment: Deployment) -> EngineConfig:
        if not 0 <= self.prefix_hit_rate < 1:
            raise UsageError(f"prefix hit rate {self.prefix_hit_rate}: expected a share in [0, 1)")
        capacity = deployment.kv_capacity_tokens
        return EngineConfig(
            max_seqs=self.max_seqs,
            max_batched_tokens=self.max_batched_tokens,
            kv_capacity_tokens=capacity,
            chunked_prefill=self.chunked_prefill,
            policy=self.policy,
            static_max_batch=self.static_max_batch,
            static_max_wait_s=self.static_max_wait_s,
            prefix_cache_tokens=capacity if self.prefix_caching else 0,
            prefix_hit_rate=self.prefix_hit_rate,
        )


@dataclass
class SimulationResult:
    summary: dict[str, Any]
    fleet: FleetStats
    cost: dict[str, Any] | None
    timeline: pd.DataFrame
    serving: dict[str, Any]
    requests: int
    simulated_s: float
    wall_s: float
    requests_out: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "serving": self.serving,
            "requests": self.requests,
            "simulated_s": self.simulated_s,
            "wall_s": self.wall_s,
            "simulated_requests_per_wall_s": self.requests / self.wall_s if self.wall_s else None,
            "summary": self.summary,
            "fleet": self.fleet.to_dict(),
            "cost": self.cost,
            "requests_out": self.requests_out,
            "notes": self.notes,
        }


def simulate(
    workload: Workload,
    serving: ServingSpec,
    fleet: FleetConfig,
    profile: Profile,
    *,
    slos: dict[str, SLO] | None = None,
    price_per_replica_hour: dict[str, float] | None = None,
    requests_out: Path | None = None,
    progress: Callable[[int], None] | None = None,
    times: StepTimes | None = None,
) -> SimulationResult:
    """Serve ``workload`` with ``fleet`` replicas of ``serving``; same inputs, same result."""
    if len(workload) == 0:
        raise UsageError("the workload has no requests")
    deployment = serving.deployment()
    fleet = replace(fleet, gpus_per_replica=deployment.tp)
    engine = serving.engine_config(deployment)
    step_times = times or RooflineStepTimes(LatencyModel(deployment, profile), serving.max_seqs)
    collector = MetricsCollector(workload.classes, slos or {})
    timeline = Timeline()
    began = time.perf_counter()
    with ExitStack() as stack:
        writer = (
            stack.enter_context(RequestWriter(requests_out, workload.classes))
            if requests_out is not None
            else None
        )

        def on_chunk(columns: dict[str, np.ndarray]) -> None:
            chunk = RequestChunk(**columns)
            collector.add(chunk)
            if writer is not None:
                writer.write(chunk)

        def on_sample(s: TimelineSample) -> None:
            timeline.record(s.t_s, s.replicas_up, s.busy, s.queued, s.running, s.by_purchase)

        runner = Fleet(workload, step_times, engine, fleet, on_chunk, on_sample, progress=progress)
        stats = runner.run()
        timeline.advance_to(runner.end_s)
    wall = time.perf_counter() - began
    fleet_cost = None
    if price_per_replica_hour is not None:
        per_gpu = {k: v / fleet.gpus_per_replica for k, v in price_per_replica_hour.items()}
        fleet_cost = cost(stats.gpu_hours, per_gpu)
    notes = []
    if stats.rejected_no_replica:
        notes.append(
            f"{stats.rejected_no_replica} requests found no replica up (the schedule or autoscaler "
            "left none) and were refused"
        )
    if stats.rejected_by_rate_limit:
        notes.append(f"{stats.rejected_by_rate_limit} requests were refused by the rate limit")
    if stats.rejected_too_long:
        notes.append(
            f"{stats.rejected_too_long} requests are longer than the whole KV cache "
            f"({engine.kv_capacity_tokens:,} tokens) and were refused"
        )
    return SimulationResult(
        summary=collector.summary(),
        fleet=stats,
        cost=fleet_cost,
        timeline=timeline.to_frame(),
        serving={
            "gpu": deployment.gpu.name,
            "model": deployment.model.name,
            "precision": deployment.precision.name,
            "tp": deployment.tp,
            "kv_cache": serving.kv_cache,
            "kv_capacity_tokens": engine.kv_capacity_tokens,
            "policy": serving.policy,
            "chunked_prefill": serving.chunked_prefill,
            "max_seqs": serving.max_seqs,
            "max_batched_tokens": serving.max_batched_tokens,
            "profile": profile.name,
            "router": fleet.router,
        },
        requests=len(workload),
        simulated_s=runner.end_s,
        wall_s=wall,
        requests_out=str(requests_out) if requests_out is not None else None,
        notes=notes,
    )
