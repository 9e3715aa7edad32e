"""Predict one deployment's latency (``planner latency``, the dashboard's Latency model page):
the query is checked and its deployment sized (:func:`planner.latency.predict.size`), the
calibration profiles are read from the store, the pure model times the deployment
(:func:`planner.latency.predict.predict`), and under a Poisson load the discrete-event simulator
adds latency percentiles (:func:`planner.simulate.steady.steady_load`), the replica scheduling
as ``planner simulate`` schedules it for the engine (:func:`serving_spec`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

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


def _percentiles(
    prediction: LatencyPrediction, query: LatencyQuery, saturated: bool
) -> tuple[dict[str, Any] | None, str | None]:
    """Simulated percentiles under the load, or why there are none."""
    from planner.simulate.steady import steady_load  # the simulator, only when it runs

    if query.qps is None:
        return None, ("n/a: the simulator replays open (Poisson) arrivals, not closed-loop clients")
    if query.sim_requests == 0:
        return None, "off (--sim-requests 0)"
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


def predict_latency(
    query: LatencyQuery, sessions: SessionScope, *, batch_must_fit: bool = True
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
    inside: the bundled ones only), after the inputs are checked."""
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
    percentiles, note = _percentiles(prediction, query, loaded["saturated"])
    under_load = {
        **loaded,
        "percentiles": percentiles,
        **({"percentiles_note": note} if note else {}),
    }
    return replace(prediction, result={**prediction.result, "under_load": under_load})
