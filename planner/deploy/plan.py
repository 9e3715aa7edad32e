"""A stored recommendation as what a cluster runs: one :class:`PoolPlan` per pool (the single
pool of a plain recommendation, each pool of a fleet, the prefill and decode pools of a
disaggregated one) with the engine settings and the replica schedule the search verified.

Numbers in, numbers out: the recommendation's result dictionary (``Recommendation.to_dict()``)
comes in, frozen dataclasses go out; the engine flags and manifests are written from these by
:mod:`planner.deploy.engines` and :mod:`planner.deploy.kubernetes`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from planner.errors import PlannerError

# Kubernetes object names: DNS-1035 labels, at most 63 characters (Services need the 1035 form).
NAME_MAX = 63
# Precisions the engines load as a quantization method (bf16/fp16 load the checkpoint as is).
QUANTIZED = ("fp8", "int8", "int4-awq", "int4-gptq", "fp4", "nvfp4", "mxfp4")


def k8s_name(*parts: str) -> str:
    """``parts`` joined as a DNS-1035 label: lower case, digits and '-', starting with a letter."""
    text = re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")
    if not text or not text[0].isalpha():
        text = "p-" + text
    return text[:NAME_MAX].rstrip("-")


@dataclass(frozen=True)
class PoolPlan:
    """One pool as deployed: where it runs, how its engine is set, how many replicas when."""

    name: str  # a DNS-1035 label, unique in the deployment
    role: str  # "serve", or "prefill" / "decode" for a disaggregated pool
    model: str  # the catalog's name
    engine: str  # the engine the latency model was calibrated for: vllm, sglang or trtllm
    provider: str
    region: str
    instance_type: str
    gpu: str
    gpus_per_instance: int
    tp: int
    replicas_per_instance: int
    precision: str
    kv_cache_dtype: str  # "fp8", "fp16", "bf16" or "auto" (the engine's default)
    max_num_seqs: int
    max_num_batched_tokens: int  # the engine's default on this GPU, as the latency model ran it
    max_model_len: int  # the longest request (prompt + output) the engine accepts
    chunked_prefill: bool
    gpu_memory_utilization: float | None
    min_replicas: int
    max_replicas: int
    hourly_replicas: tuple[int, ...]  # the verified schedule, hour by hour (UTC)
    hour_start_s: tuple[float, ...]  # each hour's start, Unix seconds
    spot_share: float  # of the pool's instance-hours
    purchase: str

    @property
    def quantized(self) -> bool:
        return self.precision in QUANTIZED


@dataclass(frozen=True)
class DeploymentPlan:
    recommendation_id: int
    created_at: str  # ISO date and time, UTC
    demand: str  # what it was planned for (source, load scale)
    targets: str  # the P99 targets it met
    pools: tuple[PoolPlan, ...]
    assumptions: tuple[str, ...]

    def header(self) -> list[str]:
        """The lines every written file starts with (as comments)."""
        return [
            f"planner recommendation #{self.recommendation_id}, planned {self.created_at} UTC",
            f"for {self.demand}; targets {self.targets}",
            *(f"assumption: {a}" for a in self.assumptions),
        ]


def _int(value: Any, default: int = 0) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return math.ceil(number) if math.isfinite(number) else default


def _schedule(pool: Mapping[str, Any], result: Mapping[str, Any], single: bool) -> list[int]:
    """Replicas each hour: the pool's own schedule, the recommendation's for a single pool, else
    its peak every hour (a disaggregated role is sized at its peak)."""
    own = pool.get("hourly_replicas")
    if own:
        return [_int(v) for v in own]
    hourly = result.get("hourly") or {}
    if single and hourly.get("replicas"):
        return [_int(v) for v in hourly["replicas"]]
    peak = _int(pool.get("replicas_peak") or pool.get("peak_replicas"), 1)
    hours = len(hourly.get("hour_start") or []) or 1
    return [peak] * hours


def _kv(pool: Mapping[str, Any]) -> str:
    kv = str(pool.get("kv_cache") or "auto").lower()
    return kv if kv in ("fp8", "fp16", "bf16", "int8") else "auto"


def _pool(
    pool: Mapping[str, Any], result: Mapping[str, Any], single: bool, spot: float, taken: set[str]
) -> PoolPlan:
    role = str(pool.get("role") or "serve")
    model = str((pool.get("models") or [pool.get("model")])[0] or "model")
    schedule = _schedule(pool, result, single)
    name = k8s_name(model, str(pool.get("gpu") or ""), "" if role == "serve" else role)
    while name in taken:  # two pools of one model on one GPU type (request sizes apart)
        name = k8s_name(name, str(len(taken)))
    taken.add(name)
    hourly = result.get("hourly") or {}
    return PoolPlan(
        name=name,
        role=role,
        model=model,
        engine=str(pool.get("engine") or "vllm"),
        provider=str(pool.get("provider") or ""),
        region=str(pool.get("region") or ""),
        instance_type=str(pool.get("instance_type") or ""),
        gpu=str(pool.get("gpu") or ""),
        gpus_per_instance=_int(pool.get("gpus_per_instance"), 1),
        tp=_int(pool.get("tp"), 1),
        replicas_per_instance=_int(pool.get("replicas_per_instance"), 1),
        precision=str(pool.get("precision") or "bf16"),
        kv_cache_dtype=_kv(pool),
        max_num_seqs=_int(pool.get("max_seqs"), 256),
        max_num_batched_tokens=_batched_tokens(str(pool.get("engine") or "vllm"), pool),
        max_model_len=_model_len(model, result),
        chunked_prefill=bool(pool.get("chunked_prefill", True)),
        gpu_memory_utilization=pool.get("gpu_memory_utilization")
        or (result.get("winner") or {}).get("gpu_memory_utilization")
        or _memory_fraction(str(pool.get("engine") or "vllm")),
        min_replicas=max(1, min(schedule)) if schedule else 1,
        max_replicas=max(1, max(schedule)) if schedule else 1,
        hourly_replicas=tuple(schedule),
        hour_start_s=tuple(float(v) for v in hourly.get("hour_start") or []),
        spot_share=spot,
        purchase=str(pool.get("purchase") or "on-demand"),
    )


def _batched_tokens(engine: str, pool: Mapping[str, Any]) -> int:
    """The engine's batched-token budget on the pool's GPU (planner.latency.engines), the one
    the latency model assumed; 8,192 for a GPU or engine the catalog lacks."""
    from planner.latency.catalog import load_catalog
    from planner.latency.engines import get_engine

    try:
        spec = get_engine(engine)
    except PlannerError:
        return MODEL_LEN_FLOOR
    try:
        return spec.batch_defaults(load_catalog().gpus.get(str(pool.get("gpu") or "")))[0]
    except PlannerError:  # a GPU the catalog lacks
        return spec.max_batched_tokens


MODEL_LEN_FLOOR = 8192


def _memory_fraction(engine: str) -> float | None:
    """The share of GPU memory the latency model gave the engine (the catalog's rule), for a
    result that did not record it: the engine's own default may differ."""
    from planner.latency.engines import get_engine

    try:
        return get_engine(engine).memory_fraction
    except PlannerError:
        return None


def _model_len(model: str, result: Mapping[str, Any]) -> int:
    """Room for the log's P99 request twice over (prompt + output), as a power of two of at
    least 8,192 tokens, within the model's context: longer requests are refused by the engine,
    and a shorter limit leaves the KV cache to the batch."""
    from planner.latency.catalog import load_catalog

    demand = result.get("demand") or {}
    longest = _int(demand.get("p99_input_tokens")) + _int(demand.get("p99_output_tokens"))
    wanted = max(MODEL_LEN_FLOOR, 1 << max(0, 2 * longest - 1).bit_length())
    try:
        return min(wanted, load_catalog().models.get(model).max_context)
    except PlannerError:  # a model the catalog lacks: the demand's need alone
        return wanted


def _targets(result: Mapping[str, Any]) -> str:
    winner = result.get("winner") or {}
    parts = [
        f"P99 {label} {winner[key] * 1e3:,.0f} ms simulated"
        for label, key in (("TTFT", "p99_ttft_s"), ("TPOT", "p99_tpot_s"))
        if isinstance(winner.get(key), (int, float))
    ]
    return ", ".join(parts) or "as searched"


def deployment_plan(
    recommendation_id: int, created_at: str, result: Mapping[str, Any]
) -> DeploymentPlan:
    """The pools of stored recommendation ``recommendation_id`` (its ``result``) as deployed."""
    winner = result.get("winner")
    if not winner:
        raise PlannerError(
            f"recommendation #{recommendation_id} has no fleet to deploy (no configuration met "
            "its targets, or it buys every request from a per-token API)"
        )
    pools: Sequence[Mapping[str, Any]] = [
        p for p in winner.get("pools") or [winner] if p.get("kind", "instance") == "instance"
    ]
    spot = float(((result.get("plan") or {}).get("chosen") or {}).get("spot_share") or 0.0)
    taken: set[str] = set()
    single = len(pools) == 1
    planned = tuple(_pool(p, result, single, spot, taken) for p in pools)
    demand = str((result.get("demand") or {}).get("source") or "the searched demand")
    assumptions = [
        "the engine versions named in each file; the latency model was calibrated for "
        + ", ".join(sorted({p.engine for p in planned})),
        "replicas follow the verified hourly schedule (UTC); cold starts are not in it",
    ]
    if spot:
        assumptions.append(f"{spot:.0%} of instance-hours on spot capacity, as planned")
    return DeploymentPlan(
        recommendation_id=recommendation_id,
        created_at=created_at,
        demand=demand,
        targets=_targets(result),
        pools=planned,
        assumptions=tuple(assumptions),
    )
