"""Disaggregated serving: a prefill pool, the KV cache's transfer, and a decode pool
(issue 33, step 2). Numbers in, numbers out: no store, no CLI.

A request runs through three stages, each simulated in full before the next:

1. **Prefill pool.** Its own fleet of replicas (its own queue, KV limit, router, autoscaler or
   schedule) serves the prompt only: the request leaves the prefill replica when its prompt is
   prefilled (one output token, as a prefill instance samples it).
2. **KV transfer.** The prompt's KV cache crosses the link (:mod:`planner.latency.disagg`):
   ``latency + bytes / bandwidth`` after re-sharding between the roles' TP layouts. Transfers
   that share a link contend: each prefill replica's NICs send one transfer at a time (first
   come, first served), and each decode replica's NICs receive one at a time (a transfer takes
   the receiver that frees first); over a NIC the instance's GPUs share (``gpu_aligned`` false)
   the replicas of one instance queue on that one NIC.
3. **Decode pool.** Its own fleet: the request arrives when its KV cache has landed, holding
   the whole prompt's KV cache from admission on (a prefix hit of all but the last prompt
   token, which the decode instance recomputes, as vLLM's NIXL connector does). No prefill
   runs in the decode pool, so decodes see no prefill interference. When no decode replica has
   room, the request waits in that replica's queue (back-pressure): the decode wait and the
   decode pool's queue say so.

Which side yields the first token (``first_token``): ``decode`` (vLLM: TTFT = prefill +
transfer + the decode instance's first step, with any wait for room) or ``prefill`` (SGLang,
TensorRT-LLM: the prefill instance samples it and it travels with the KV cache, so TTFT =
prefill + transfer; the decode pool generates the rest).

What is simplified: the decode pool does not push back on the prefill pool (a prefill replica
frees the prompt's KV cache when it is sent, not when the decode side pulls it), transfers
go to the receiver NIC that frees first whichever decode replica then serves the request, and
the receivers counted are the decode pool's replicas at the start (or its schedule's or
autoscaler's most).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.common.text import shown
from planner.errors import UsageError
from planner.latency.disagg import (
    FIRST_TOKEN,
    Link,
    deployment_kv_transfer,
    kv_transfer_seconds,
    load_link_table,
)
from planner.latency.model import Deployment, LatencyModel
from planner.latency.profile import Profile
from planner.simulate.engine import EngineConfig, RooflineStepTimes
from planner.simulate.fleet import Fleet, FleetConfig, FleetStats, TimelineSample
from planner.simulate.metrics import (
    SLO,
    MetricsCollector,
    RequestChunk,
    RequestWriter,
    Timeline,
    cost,
)
from planner.simulate.run import ServingSpec, SimulationResult, serving_summary
from planner.simulate.workload import Workload

ROLES = ("prefill", "decode")
#: Which side yields the first token by engine, where the engine's connector decides it
ENGINE_FIRST_TOKEN = {"vllm": "decode", "sglang": "prefill", "trtllm": "prefill"}
_QUANTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0))


@dataclass(frozen=True)
class DisaggregatedSpec:
    """What each role runs (its GPU, TP, precision, batch limits, engine), and the link the KV
    cache crosses (a name or alias in ``data/catalog/links.csv``)."""

    prefill: ServingSpec
    decode: ServingSpec
    link: str
    first_token: str | None = None  # None: by the decode role's engine (ENGINE_FIRST_TOKEN)

    def __post_init__(self) -> None:
        if self.prefill.model.strip().lower() != self.decode.model.strip().lower():
            raise UsageError(
                f"prefill serves {shown(self.prefill.model)} and decode "
                f"{shown(self.decode.model)}: both roles serve one model"
            )
        if self.first_token is not None and self.first_token not in FIRST_TOKEN:
            raise UsageError(
                f"first token {shown(self.first_token)}: expected one of {', '.join(FIRST_TOKEN)}"
            )

    def first_token_side(self) -> str:
        if self.first_token is not None:
            return self.first_token
        return ENGINE_FIRST_TOKEN.get(self.decode.engine_profile.name, "decode")

    def resolved_link(self) -> Link:
        return load_link_table().get(self.link)


@dataclass
class _Stage:
    """One pool's run: its rows by request id, its fleet's stats and timeline."""

    rows: dict[str, NDArray[Any]]
    stats: FleetStats
    timeline: Timeline
    end_s: float
    deployment: Deployment
    engine: EngineConfig


def _run_pool(
    workload: Workload,
    deployment: Deployment,
    engine: EngineConfig,
    fleet: FleetConfig,
    profile: Profile,
    progress: Callable[[int], None] | None,
) -> _Stage:
    """One pool's fleet over ``workload``; its rows ordered by request id (= workload order)."""
    times = RooflineStepTimes(LatencyModel(deployment, profile), deployment.max_seqs)
    chunks: list[dict[str, np.ndarray]] = []
    timeline = Timeline()

    def on_sample(s: TimelineSample) -> None:
        timeline.record(s.t_s, s.replicas_up, s.busy, s.queued, s.running, s.by_purchase)

    runner = Fleet(workload, times, engine, fleet, chunks.append, on_sample, progress=progress)
    stats = runner.run()
    timeline.advance_to(runner.end_s)
    names = chunks[0].keys() if chunks else ()
    rows = {name: np.concatenate([c[name] for c in chunks]) for name in names}
    order = np.argsort(rows["request_id"], kind="stable")
    return _Stage(
        rows={k: v[order] for k, v in rows.items()},
        stats=stats,
        timeline=timeline,
        end_s=runner.end_s,
        deployment=deployment,
        engine=engine,
    )


def _receivers(fleet: FleetConfig) -> int:
    """Decode replicas counted as KV receivers: the fixed count, else the schedule's or the
    autoscaler's most."""
    if fleet.schedule:
        return max(1, max(fleet.schedule))
    if fleet.autoscaler is not None:
        return max(1, fleet.autoscaler.max_replicas)
    return max(1, sum(fleet.replicas.values()))


def _nic_groups(link: Link, tp: int) -> int:
    """Replicas that share one sending/receiving NIC: 1 over GPU-aligned NICs (each replica's
    GPUs have their own), else every replica of the instance (``link.gpus / tp``)."""
    return 1 if link.gpu_aligned else max(1, link.gpus // tp)


def transfers(
    ready_s: NDArray[np.float64],
    sender: NDArray[np.int64],
    busy_s: NDArray[np.float64],
    latency_s: float,
    receivers: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Start and landing times of each transfer (NaN where ``ready_s`` is NaN).

    Transfer i is ready at ``ready_s[i]``, sent by NIC ``sender[i]`` and occupies its sender and
    one of ``receivers`` receiving NICs for ``busy_s[i]``; it lands ``latency_s`` after that.
    In order of readiness, each starts when it is ready, its sender is free and a receiver is
    free (the one that frees first); ties go to the lower request index."""
    n = len(ready_s)
    start = np.full(n, np.nan)
    landed = np.full(n, np.nan)
    order = np.argsort(ready_s, kind="stable")  # NaN (refused) sort last
    sender_free: dict[int, float] = {}
    receiver_free = [0.0] * max(1, receivers)  # a heap of the times receivers free up
    ready_list = ready_s.tolist()
    sender_list = sender.tolist()
    busy_list = busy_s.tolist()
    for i in order.tolist():
        ready = ready_list[i]
        if ready != ready:  # NaN: never prefilled
            break
        s = sender_list[i]
        t = max(ready, sender_free.get(s, 0.0), receiver_free[0])
        end = t + busy_list[i]
        sender_free[s] = end
        heapq.heapreplace(receiver_free, end)
        start[i] = t
        landed[i] = end + latency_s
    return start, landed


def _stats(values: NDArray[np.float64]) -> dict[str, float | None]:
    finite = values[np.isfinite(values)]
    if not finite.size:
        return {"mean": None, **{name: None for name, _ in _QUANTILES}, "max": None}
    out: dict[str, float | None] = {"mean": float(finite.mean())}
    for name, q in _QUANTILES:
        out[name] = float(np.percentile(finite, q))
    out["max"] = float(finite.max())
    return out


def combined_timeline(timelines: list[Timeline]) -> Timeline:
    """One timeline of several pools' (same resolution): replicas, busy, queued and running add
    up bucket by bucket, as do the purchase classes."""
    out = Timeline(timelines[0].resolution_s)
    starts = [t._first_bucket for t in timelines if t.end_s is not None]
    if not starts:
        return out
    first = min(starts)
    out._first_bucket = first
    out._t = max(t.end_s for t in timelines if t.end_s is not None)
    for t in timelines:
        if t.end_s is None:
            continue
        offset = t._first_bucket - first
        size = offset + len(t._covered)
        while len(out._covered) < size:
            out._covered.append(0.0)
            for column in out._fixed:
                column.append(0.0)
        for i, covered in enumerate(t._covered):
            out._covered[offset + i] = max(out._covered[offset + i], covered)
        for mine, theirs in zip(out._fixed, t._fixed, strict=True):
            for i, value in enumerate(theirs):
                mine[offset + i] += value
        for name, column in t._purchase.items():
            target = out._purchase.setdefault(name, [])
            if len(target) < offset + len(column):
                target.extend([0.0] * (offset + len(column) - len(target)))
            for i, value in enumerate(column):
                target[offset + i] += value
    return out


def _merged_stats(stages: list[_Stage]) -> FleetStats:
    merged = FleetStats()
    for stage in stages:
        s = stage.stats
        merged.launched += s.launched
        merged.spot_interruptions += s.spot_interruptions
        merged.rerouted_requests += s.rerouted_requests
        merged.rejected_by_rate_limit += s.rejected_by_rate_limit
        merged.rejected_too_long += s.rejected_too_long
        merged.rejected_no_replica += s.rejected_no_replica
        merged.response_cache_hits += s.response_cache_hits
        merged.peak_replicas += s.peak_replicas
        for name, hours in s.gpu_hours.items():
            merged.gpu_hours[name] = merged.gpu_hours.get(name, 0.0) + hours
    return merged


def simulate_disaggregated(
    workload: Workload,
    spec: DisaggregatedSpec,
    prefill_fleet: FleetConfig,
    decode_fleet: FleetConfig,
    prefill_profile: Profile,
    decode_profile: Profile | None = None,
    *,
    slos: dict[str, SLO] | None = None,
    price_per_replica_hour: dict[str, dict[str, float]] | None = None,
    progress: Callable[[int], None] | None = None,
    requests_out: Path | None = None,
) -> SimulationResult:
    """Serve ``workload`` with a prefill pool and a decode pool joined by ``spec.link``.

    ``price_per_replica_hour`` is by role (``{"prefill": {...}, "decode": {...}}``), each by
    purchase class as :func:`planner.simulate.run.simulate` takes it. The result's summary is
    the requests' TTFT, TPOT and E2E as the client sees them; ``disaggregation`` adds the
    transfer (time, its share of TTFT, the wait for a free link), the decode wait (back-pressure)
    and each pool's fleet and cost."""
    if len(workload) == 0:
        raise UsageError("the workload has no requests")
    decode_profile = decode_profile or prefill_profile
    link = spec.resolved_link()
    side = spec.first_token_side()
    prefill_dep = spec.prefill.deployment()
    decode_dep = spec.decode.deployment()
    deployment_kv_transfer(prefill_dep, decode_dep, 1)  # same model and KV precision, or say so
    prefill_fleet = replace(prefill_fleet, gpus_per_replica=prefill_dep.tp)
    decode_fleet = replace(decode_fleet, gpus_per_replica=decode_dep.tp)
    n = len(workload)
    half = (lambda k: progress(k // 2)) if progress is not None else None
    began = time.perf_counter()

    # 1. prefill: the prompt, and one token
    prefill_work = replace(workload, output_tokens=np.ones(n, dtype=np.int64))
    prefill = _run_pool(
        prefill_work,
        prefill_dep,
        spec.prefill.engine_config(prefill_dep),
        prefill_fleet,
        prefill_profile,
        half,
    )
    p = prefill.rows
    prefilled = np.where(p["rejected"], np.nan, p["finish_s"])

    # 2. the KV cache over the link; bytes (so seconds past the latency) are linear in tokens
    per_token_s = (
        kv_transfer_seconds(deployment_kv_transfer(prefill_dep, decode_dep, 4096), link)
        - link.latency_s
    ) / 4096
    busy = workload.input_tokens.astype(np.float64) * per_token_s
    sender = p["replica"].astype(np.int64) // _nic_groups(link, prefill_dep.tp)
    receivers = -(-_receivers(decode_fleet) // _nic_groups(link, decode_dep.tp))
    start, landed = transfers(prefilled, sender, busy, link.latency_s, receivers)

    # 3. decode: the request holds its prompt's KV cache; no prefill runs here
    decode_outputs = workload.output_tokens - (1 if side == "prefill" else 0)
    to_decode = np.isfinite(landed) & (decode_outputs >= 1)
    ids = np.flatnonzero(to_decode)
    ids = ids[np.argsort(landed[ids], kind="stable")]
    decode_rows: dict[str, NDArray[Any]] | None = None
    stages = [prefill]
    if ids.size:
        decode_work = Workload(
            start=workload.start,
            arrival_s=landed[ids],
            input_tokens=workload.input_tokens[ids],
            output_tokens=decode_outputs[ids],
            class_index=workload.class_index[ids],
            classes=workload.classes,
        )
        engine = replace(
            spec.decode.engine_config(decode_dep), prefix_hit_rate=1.0, prefix_cache_tokens=0
        )
        later = (lambda k: progress(n // 2 + k * n // (2 * ids.size))) if progress else None
        decode = _run_pool(decode_work, decode_dep, engine, decode_fleet, decode_profile, later)
        stages.append(decode)
        decode_rows = decode.rows
    else:
        decode = None

    # the client's view, request by request
    first_token = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    replica = np.full(n, -1, dtype=np.int32)
    preemptions = p["preemptions"].astype(np.int32).copy()
    rejected = p["rejected"].copy()
    decode_first = np.full(n, np.nan)
    if decode_rows is not None:
        d_first = decode_rows["first_token_s"]
        d_finish = decode_rows["finish_s"]
        d_rejected = decode_rows["rejected"]
        decode_first[ids] = d_first
        finish[ids] = d_finish
        replica[ids] = decode_rows["replica"]
        preemptions[ids] += decode_rows["preemptions"].astype(np.int32)
        rejected[ids] |= d_rejected
    if side == "decode":
        first_token = decode_first
    else:
        first_token = landed.copy()
        done_at_prefill = np.isfinite(landed) & (decode_outputs < 1)
        finish[done_at_prefill] = landed[done_at_prefill]
    first_token[rejected] = np.nan
    finish[rejected] = np.nan
    chunk = RequestChunk(
        request_id=np.arange(n),
        arrival_s=workload.arrival_s,
        first_token_s=first_token,
        finish_s=finish,
        replica=replica,
        class_index=workload.class_index,
        input_tokens=workload.input_tokens,
        output_tokens=workload.output_tokens,
        cached_tokens=p["cached_tokens"],
        preemptions=preemptions,
        rejected=rejected,
        response_cache_hit=np.zeros(n, dtype=np.bool_),
    )
    collector = MetricsCollector(workload.classes, slos or {})
    collector.add(chunk)
    if requests_out is not None:  # the client's view of each request, written whole
        with RequestWriter(requests_out, workload.classes) as writer:
            writer.write(chunk)
    wall = time.perf_counter() - began

    ttft = first_token - workload.arrival_s
    # the transfer stage as TTFT sees it: waiting for a free link, then moving the cache
    transfer_stage = landed - prefilled
    pools: list[dict[str, Any]] = []
    total_cost: dict[str, Any] | None = None
    for role, stage, fleet in zip(ROLES, stages, (prefill_fleet, decode_fleet), strict=False):
        pool_cost = None
        if price_per_replica_hour is not None:
            prices = price_per_replica_hour[role]
            per_gpu = {k: v / fleet.gpus_per_replica for k, v in prices.items()}
            pool_cost = cost(stage.stats.gpu_hours, per_gpu)
        frame = stage.timeline.to_frame()
        pools.append(
            {
                "role": role,
                "fleet": stage.stats.to_dict(),
                "cost": pool_cost,
                "queued_peak": float(frame["queued"].max()) if len(frame) else 0.0,
                "queued_mean": float(frame["queued"].mean()) if len(frame) else 0.0,
            }
        )
    if price_per_replica_hour is not None:
        total_cost = {
            "total": math.fsum(pool["cost"]["total"] for pool in pools if pool["cost"]),
            "by_purchase": _merged_purchase([pool["cost"] for pool in pools if pool["cost"]]),
        }
    wait_for_link = start - prefilled
    decode_wait = np.full(n, np.nan)
    decode_wait[ids] = decode_first[ids] - landed[ids]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(ttft > 0, transfer_stage / ttft, np.nan)
    disaggregation = {
        "architecture": "disaggregated",
        "link": link.name,
        "link_transport": link.transport,
        "first_token": side,
        "kv_bytes_per_prompt_token": float(
            deployment_kv_transfer(prefill_dep, decode_dep, 1).bytes
        ),
        "transfer_s": _stats(landed - start),
        "transfer_wait_s": _stats(wait_for_link),
        "transfer_stage_s": _stats(transfer_stage),
        "transfer_share_of_ttft": _stats(share),
        "prefill_s": _stats(prefilled - workload.arrival_s),
        "decode_wait_s": _stats(decode_wait),
        "pools": pools,
    }
    duration_end = max(stage.end_s for stage in stages)
    notes = []
    for role, stage in zip(ROLES, stages, strict=False):
        if stage.stats.rejected_too_long:
            notes.append(
                f"{stage.stats.rejected_too_long} requests are longer than the {role} "
                f"replicas' whole KV cache ({stage.engine.kv_capacity_tokens:,} tokens) and "
                "were refused"
            )
        if stage.stats.rejected_no_replica:
            notes.append(
                f"{stage.stats.rejected_no_replica} requests found no {role} replica up and "
                "were refused"
            )
    serving = {
        "architecture": "disaggregated",
        **serving_summary(
            spec.decode, decode_dep, stages[-1].engine, decode_profile, decode_fleet.router
        ),
        "prefill": serving_summary(
            spec.prefill, prefill_dep, prefill.engine, prefill_profile, prefill_fleet.router
        ),
        "decode": serving_summary(
            spec.decode,
            decode_dep,
            decode.engine if decode is not None else spec.decode.engine_config(decode_dep),
            decode_profile,
            decode_fleet.router,
        ),
        "link": link.name,
        "first_token": side,
    }
    result = SimulationResult(
        summary=collector.summary(),
        fleet=_merged_stats(stages),
        cost=total_cost,
        fleet_timeline=combined_timeline([s.timeline for s in stages]),
        serving=serving,
        requests=n,
        simulated_s=duration_end,
        wall_s=wall,
        requests_out=str(requests_out) if requests_out is not None else None,
        notes=notes,
        disaggregation=disaggregation,
    )
    return result


def _merged_purchase(costs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per purchase class over pools: GPU-hours and cost add; the price is their ratio."""
    merged: dict[str, dict[str, float]] = {}
    for entry in costs:
        for name, part in entry["by_purchase"].items():
            m = merged.setdefault(name, {"gpu_hours": 0.0, "cost": 0.0})
            m["gpu_hours"] += part["gpu_hours"]
            m["cost"] += part["cost"]
    for m in merged.values():
        m["price_per_gpu_hour"] = m["cost"] / m["gpu_hours"] if m["gpu_hours"] else 0.0
    return merged
