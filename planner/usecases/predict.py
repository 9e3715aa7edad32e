"""Predict one deployment's latency (``planner latency``, the dashboard's Latency model page):
the query is checked and its deployment sized (:func:`planner.latency.predict.size`), the
calibration profiles are read from the store, the pure model times the deployment
(:func:`planner.latency.predict.predict`), and under a Poisson load the discrete-event simulator
adds latency percentiles (:func:`planner.simulate.steady.steady_load`), under a concurrency
those of a closed loop of that many clients
(:func:`planner.simulate.closed_loop.run_closed_loop`), the replica scheduling as ``planner
simulate`` schedules it for the engine (:func:`serving_spec`)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from planner.common.text import shown
from planner.errors import UsageError
from planner.latency.predict import LatencyPrediction, LatencyQuery, predict, size
from planner.latency.registry import engine_profile, profile_accuracy
from planner.store.calibrations import known_profiles, stored_accuracy
from planner.usecases import SessionScope

if TYPE_CHECKING:
    from planner.simulate.run import ServingSpec


def serving_spec(query: LatencyQuery) -> ServingSpec:
    """What ``planner simulate`` runs for ``query``'s deployment and engine: one place builds
    the engine's scheduling (admission, watermark, batch limits, chunked prefill, prefix
    cache), so ``latency --qps`` and ``simulate`` replay a load alike."""
    from planner.simulate.run import ServingSpec

    return ServingSpec(
        gpu=query.gpu,
        model=query.model,
        precision=query.precision,
        tp=query.tp,
        kv_cache=query.kv_cache,
        memory_utilization=query.memory_utilization,
        max_seqs=query.max_seqs,
        engine=query.engine,
        scheduler=query.scheduler,
    )


@dataclass(frozen=True)
class ClientOptions:
    """How ``--concurrency``'s clients send, for the simulated percentiles: ``start``
    synchronized, staggered or waves (:mod:`planner.simulate.closed_loop`), ``think_s``
    seconds between a response and the client's next request."""

    start: str = "synchronized"
    think_s: float = 0.0

    def check(self) -> None:
        from planner.simulate.closed_loop import START_MODES

        if self.start not in START_MODES:
            raise UsageError(
                f"--client-start {shown(self.start)}: expected {', '.join(START_MODES)}"
            )
        if not (math.isfinite(self.think_s) and self.think_s >= 0):
            raise UsageError(f"--think-time {self.think_s:g}: expected a duration of 0 s or more")


def _closed_loop_percentiles(
    prediction: LatencyPrediction, query: LatencyQuery, clients: ClientOptions
) -> tuple[dict[str, Any] | None, str | None]:
    """Percentiles of ``query.concurrency`` closed-loop clients sending ``query``'s shape
    through the simulator (one replica, the engine's scheduling as ``planner simulate`` runs
    it), the first and last requests left out as a benchmark's ramp-up and drain."""
    import numpy as np

    from planner.latency.model import LatencyModel
    from planner.simulate.closed_loop import (
        MAX_CLIENTS,
        ClosedLoop,
        ClosedLoopRun,
        run_closed_loop,
    )
    from planner.simulate.engine import RooflineStepTimes
    from planner.simulate.steady import COOLDOWN_SHARE, WARMUP_SHARE

    count, total = query.concurrency or 1, query.sim_requests
    if count > MAX_CLIENTS:
        return None, f"n/a: the simulator runs at most {MAX_CLIENTS:,} clients"
    if total < 3 * count:
        return None, (
            f"n/a: --sim-requests {total:,} is under 3 x {count:,} clients (the first and "
            f"last requests are left out); give --sim-requests {3 * count:,} or more"
        )
    deployment = prediction.deployment
    serving = serving_spec(query)
    engine = serving.engine_config(deployment)
    times = RooflineStepTimes(LatencyModel(deployment, prediction.profile), deployment.max_seqs)
    inputs = np.array([query.input_tokens], dtype=np.int64)
    outputs = np.array([query.output_tokens], dtype=np.int64)
    stagger = 0.0
    if clients.start == "staggered":  # spread over one request's time alone
        alone = run_closed_loop(times, engine, ClosedLoop(1, 1), inputs, outputs)
        stagger = float(np.nan_to_num(alone.finish[0] - alone.arrival[0]))
    loop = ClosedLoop(count, total, clients.think_s, clients.start, stagger)
    began = time.perf_counter()
    run = run_closed_loop(times, engine, loop, inputs, outputs)
    wall = time.perf_counter() - began
    first = max(count, int(total * WARMUP_SHARE))
    last = total - max(count, int(total * COOLDOWN_SHARE))
    kept = ClosedLoopRun(*(getattr(run, name)[first:last] for name in run.__dataclass_fields__))
    summary = kept.summary()
    stats = {
        name: {q: summary[f"{name}_{q}_ms"] for q in ("p50", "p90", "p99", "mean")}
        for name in ("ttft", "tpot", "e2e")
        if f"{name}_mean_ms" in summary
    }
    return {
        "source": "discrete-event simulator",
        "arrivals": "closed loop",
        "clients": count,
        "client_start": clients.start,
        "think_s": clients.think_s,
        "requests": total,
        "measured_requests": summary["requests"],
        "refused": summary["refused"],
        "excluded": f"first {first:,} (ramp-up) and last {total - last:,} (drain) requests",
        "simulated_s": float(np.nanmax(run.finish)) if np.isfinite(run.finish).any() else 0.0,
        "wall_s": wall,
        **stats,
        "admission": engine.admission,
        "admission_source": serving.admission_policy()[1],
        "kv_watermark": engine.watermark,
    }, None


def _percentiles(
    prediction: LatencyPrediction,
    query: LatencyQuery,
    saturated: bool,
    clients: ClientOptions | None = None,
) -> tuple[dict[str, Any] | None, str | None]:
    """Simulated percentiles under the load, or why there are none."""
    from planner.simulate.steady import steady_load  # the simulator, only when it runs

    if query.sim_requests == 0:
        return None, "off (--sim-requests 0)"
    if query.qps is None:
        return _closed_loop_percentiles(prediction, query, clients or ClientOptions())
    if saturated:
        return None, "n/a: saturated, queues grow without bound"
    serving = serving_spec(query)
    engine = serving.engine_config(prediction.deployment)
    load = steady_load(
        prediction.deployment,
        prediction.profile,
        query.input_tokens,
        query.output_tokens,
        query.qps,
        query.sim_requests,
        seed=query.seed,
        engine=engine,
    )
    return {
        **load.to_dict(),
        "admission": engine.admission,
        "admission_source": serving.admission_policy()[1],
        "kv_watermark": engine.watermark,
    }, None


def add_intervals(percentiles: dict[str, Any], engine: str, gpu: str, confidence: float) -> None:
    """Each simulated percentile's interval at ``confidence`` (``percentiles[metric]
    ["interval"][pNN]``: low, high, upper, group), from the engine's held-out error on this GPU
    class and the order-statistic bounds of the requests measured, as ``planner simulate``
    gives them (planner.latency.uncertainty)."""
    from planner.latency.uncertainty import accuracy_for, stats_intervals

    accuracy = accuracy_for(confidence)
    requests = int(percentiles.get("measured_requests") or 0)
    for metric in ("ttft", "tpot", "e2e"):
        values = percentiles.get(metric)
        if isinstance(values, dict) and requests:
            values["interval"] = stats_intervals(
                values, metric, requests, confidence, accuracy, engine, gpu
            )
    percentiles["confidence"] = confidence


def predict_latency(
    query: LatencyQuery,
    sessions: SessionScope,
    *,
    batch_must_fit: bool = True,
    clients: ClientOptions | None = None,
    confidence: float | None = None,
) -> LatencyPrediction:
    """TTFT, time per output token and end-to-end latency of ``query``'s deployment, its
    memory, KV capacity and throughput; under ``qps`` or ``concurrency`` also the steady-state
    means (and simulated percentiles under ``qps``), or the saturation as a result; with the
    error its calibration profile states (``accuracy``).

    Errors are :class:`~planner.errors.UsageError` subclasses naming what is wrong (a model
    that does not fit, a TP that does not divide the heads, a request longer than the context).
    A batch whose KV cache does not fit is one too, unless ``batch_must_fit`` is False: then
    :attr:`LatencyPrediction.batch_problem` says so and the rest is still computed. ``sessions``
    opens the store the profiles are read from (stored ones win over the bundled defaults; None
    inside: the bundled ones only), after the inputs are checked. ``clients``: how
    ``concurrency``'s clients send in the simulated closed loop (default: synchronized, no
    think time); refused without a concurrency. ``confidence``: the simulated percentiles
    get their intervals at it (:func:`add_intervals`; None: none)."""
    if clients is not None:
        if query.concurrency is None:
            raise UsageError(
                "--client-start and --think-time describe --concurrency's clients; give "
                "--concurrency N"
            )
        clients.check()
    sized = size(query)
    with sessions() as session:
        profiles = known_profiles(session)
        profile = engine_profile(profiles, sized.deployment.gpu.name, sized.engine, query.profile)
        stored = stored_accuracy(session, profile.name)
    prediction = predict(query, sized, profile, batch_must_fit=batch_must_fit)
    prediction = replace(prediction, accuracy=profile_accuracy(profile, stored))
    loaded = prediction.result["under_load"]
    if loaded is None:
        return prediction
    percentiles, note = _percentiles(prediction, query, loaded["saturated"], clients)
    if percentiles is not None and confidence is not None:
        gpu = prediction.deployment.gpu.name
        add_intervals(percentiles, prediction.result["engine"], gpu, confidence)
    under_load = {
        **loaded,
        "percentiles": percentiles,
        **({"percentiles_note": note} if note else {}),
    }
    return replace(prediction, result={**prediction.result, "under_load": under_load})
