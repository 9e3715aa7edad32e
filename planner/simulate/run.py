"""``simulate()``: a workload through a fleet, priced and summarised. The CLI and the
recommender call this one function."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from planner.common.text import shown
from planner.errors import UsageError
from planner.latency.catalog import load_catalog
from planner.latency.engines import (
    Engine,
    deploy,
    get_engine,
    kv_cache_bytes,
    scheduler_admission,
)
from planner.latency.explain import kv_cache_source, memory_rule_text
from planner.latency.model import Deployment, LatencyModel, memory_summary
from planner.latency.profile import DEFAULT_ENGINE, Profile
from planner.simulate.engine import (
    ADMISSION_POLICIES,
    VLLM_WATERMARK,
    EngineConfig,
    RooflineStepTimes,
    StepTimes,
)
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

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ServingSpec:
    """What each replica runs, and how its engine schedules. ``None`` settings take the
    engine's defaults (``data/catalog/engines.csv``)."""

    gpu: str
    model: str
    precision: str = "bf16"
    tp: int = 1
    kv_cache: str | None = None  # None: the engine's default (TensorRT-LLM: FP8 under FP8)
    memory_utilization: float | None = None  # None: the engine's memory fraction
    max_seqs: int | None = None
    max_batched_tokens: int | None = None
    chunked_prefill: bool = True
    policy: str = "continuous"
    static_max_batch: int = 8
    static_max_wait_s: float = 0.05
    prefix_caching: bool = True
    prefix_hit_rate: float = 0.0
    engine: str = DEFAULT_ENGINE
    admission: str | None = None  # None: the engine's (no_evict for TensorRT-LLM, see engines.csv)
    # preempt admission: share of the KV cache a prompt must leave free (None: vLLM's 0.01)
    kv_watermark: float | None = None
    # TensorRT-LLM's capacity scheduler policy, guaranteed_no_evict or max_utilization (None:
    # the engine's default); an alternative to ``admission``, only for engine trtllm
    scheduler: str | None = None
    # expert parallelism of a mixture of experts: 1, or tp (experts split whole over the TP
    # group's GPUs; see planner.latency.model.Deployment.ep)
    ep: int = 1

    def __post_init__(self) -> None:
        if self.scheduler is not None:  # refused at once, before any data is read
            self.admission_policy()

    @property
    def engine_profile(self) -> Engine:
        """The engine's sizing defaults (raises with suggestions for an unknown name)."""
        return get_engine(self.engine)

    def admission_policy(self) -> tuple[str, str]:
        """The admission policy the replicas run, and where it came from, in words."""
        if self.scheduler is not None:
            if self.admission is not None:
                raise UsageError(
                    f"--scheduler {shown(self.scheduler)} and --admission "
                    f"{shown(self.admission)} are alternatives; give one"
                )
            admission, _ = scheduler_admission(self.engine_profile, self.scheduler)
            return admission, f"--scheduler {self.scheduler.strip().lower().replace('-', '_')}"
        if self.admission is not None:
            if self.admission not in ADMISSION_POLICIES:
                raise UsageError(
                    f"--admission {shown(self.admission)}: expected "
                    f"{' or '.join(ADMISSION_POLICIES)}"
                )
            return self.admission, "--admission"
        engine = self.engine_profile
        return engine.admission, f"engine default ({engine.name})"

    def watermark(self) -> float:
        """The free share of the KV cache a ``preempt`` admission keeps (0 under no_evict)."""
        if self.admission_policy()[0] != "preempt":
            return 0.0
        if self.kv_watermark is not None:
            return self.kv_watermark
        if self.scheduler is not None:  # MAX_UTILIZATION packs to the last block
            return scheduler_admission(self.engine_profile, self.scheduler)[1]
        return VLLM_WATERMARK

    def deployment(self) -> Deployment:
        catalog = load_catalog()
        if self.kv_cache is not None:
            kv_cache_bytes(self.kv_cache)  # an unknown precision is a UsageError
        deployment = deploy(
            self.engine_profile,
            catalog.gpus.get(self.gpu),
            catalog.models.get(self.model),
            catalog.precisions.get(self.precision),
            self.tp,
            kv_cache=self.kv_cache.lower() if self.kv_cache else None,
            memory_utilization=self.memory_utilization,
            max_batched_tokens=self.max_batched_tokens,
            max_seqs=self.max_seqs,
        )
        # replace() checks the EP degree against the model and the TP degree
        return replace(deployment, ep=self.ep) if self.ep != 1 else deployment

    def kv_cache_source(self, deployment: Deployment) -> str:
        return kv_cache_source(self.engine_profile, self.kv_cache, deployment)

    def engine_config(self, deployment: Deployment) -> EngineConfig:
        if not 0 <= self.prefix_hit_rate < 1:
            raise UsageError(f"prefix hit rate {self.prefix_hit_rate}: expected a share in [0, 1)")
        if self.kv_watermark is not None and not 0 <= self.kv_watermark < 1:
            raise UsageError(
                f"--kv-watermark {self.kv_watermark:g}: expected a share of the KV cache in [0, 1)"
            )
        capacity = deployment.kv_capacity_tokens
        return EngineConfig(
            max_seqs=deployment.max_seqs,
            max_batched_tokens=deployment.max_batched_tokens,
            kv_capacity_tokens=capacity,
            chunked_prefill=self.chunked_prefill,
            policy=self.policy,
            static_max_batch=self.static_max_batch,
            static_max_wait_s=self.static_max_wait_s,
            prefix_cache_tokens=capacity if self.prefix_caching else 0,
            prefix_hit_rate=self.prefix_hit_rate,
            admission=self.admission_policy()[0],
            watermark=self.watermark(),
        )


@dataclass
class SimulationResult:
    summary: dict[str, Any]
    fleet: FleetStats
    cost: dict[str, Any] | None
    fleet_timeline: Timeline
    serving: dict[str, Any]
    requests: int
    simulated_s: float
    wall_s: float
    requests_out: str | None = None
    notes: list[str] = field(default_factory=list)
    # The workload's requests before --requests kept the first (None: not known here).
    available_requests: int | None = None
    # --max-model-len: the limit, truncate or refuse, and how many prompts it affected.
    prompt_limit: dict[str, Any] | None = None
    # how the requests arrived, in words ("closed loop: 64 clients, waves, think 0 s")
    load_model: str | None = None
    # a disaggregated run's transfer, decode wait and pools (planner.simulate.disagg); None
    # for aggregated replicas
    disaggregation: dict[str, Any] | None = None

    @property
    def timeline(self) -> pd.DataFrame:
        """The fleet's state per bucket of simulated time (a frame made on demand: a run that
        shows only its summary never imports pandas)."""
        return self.fleet_timeline.to_frame()

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
            "requests_available": self.available_requests,
            "prompt_limit": self.prompt_limit,
            "load_model": self.load_model,
            "notes": self.notes,
            **({"disaggregation": self.disaggregation} if self.disaggregation else {}),
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
    refused: Workload | None = None,
) -> SimulationResult:
    """Serve ``workload`` with ``fleet`` replicas of ``serving``; same inputs, same result.

    ``refused`` are requests the engine turns away before serving (prompts over its longest):
    counted, and written, as rejected requests of their classes, with request ids after the
    served ones."""
    if len(workload) == 0:
        raise UsageError("the workload has no requests")
    deployment = serving.deployment()
    fleet = replace(fleet, gpus_per_replica=deployment.tp)
    engine = serving.engine_config(deployment)
    step_times = times or RooflineStepTimes(LatencyModel(deployment, profile), deployment.max_seqs)
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
        if refused is not None and len(refused):
            on_chunk(_rejected_columns(refused, first_id=len(workload)))
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
        fleet_timeline=timeline,
        serving=serving_summary(serving, deployment, engine, profile, fleet.router),
        requests=len(workload) + (len(refused) if refused is not None else 0),
        simulated_s=runner.end_s,
        wall_s=wall,
        requests_out=str(requests_out) if requests_out is not None else None,
        notes=notes,
    )


def serving_summary(
    serving: ServingSpec,
    deployment: Deployment,
    engine: EngineConfig,
    profile: Profile,
    router: str,
) -> dict[str, Any]:
    """What each replica ran and how it scheduled, as every simulation's result states it."""
    return {
        "gpu": deployment.gpu.name,
        "model": deployment.model.name,
        "precision": deployment.precision.name,
        "tp": deployment.tp,
        "engine": serving.engine_profile.name,
        "kv_cache": deployment.kv_cache,
        "kv_cache_source": serving.kv_cache_source(deployment),
        "kv_capacity_tokens": engine.kv_capacity_tokens,
        "memory": memory_summary(deployment),
        "memory_rule": memory_rule_text(serving.engine_profile, deployment.memory_utilization),
        "policy": serving.policy,
        "admission": engine.admission,
        "admission_source": serving.admission_policy()[1],
        "kv_watermark": engine.watermark,
        "chunked_prefill": serving.chunked_prefill,
        "max_seqs": deployment.max_seqs,
        "max_batched_tokens": deployment.max_batched_tokens,
        "profile": profile.name,
        "router": router,
    }


def _rejected_columns(workload: Workload, first_id: int) -> dict[str, np.ndarray]:
    """A :class:`RequestChunk`'s columns for ``workload``'s requests, all rejected on arrival."""
    n = len(workload)
    nan = np.full(n, np.nan)
    return {
        "request_id": np.arange(first_id, first_id + n),
        "arrival_s": workload.arrival_s,
        "first_token_s": nan,
        "finish_s": nan,
        "replica": np.full(n, -1),
        "class_index": workload.class_index,
        "input_tokens": workload.input_tokens,
        "output_tokens": workload.output_tokens,
        "cached_tokens": np.zeros(n, dtype=np.int64),
        "preemptions": np.zeros(n, dtype=np.int32),
        "rejected": np.ones(n, dtype=np.bool_),
        "response_cache_hit": np.zeros(n, dtype=np.bool_),
    }
