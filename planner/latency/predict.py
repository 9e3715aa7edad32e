"""One deployment's predicted latencies, memory, KV capacity and throughput, checked and
computed in one place, on values: :func:`size` checks a :class:`LatencyQuery` and sizes its
deployment as its engine sizes it (:func:`planner.latency.engines.deploy`), :func:`predict` times
it with a calibration profile. The use case :func:`planner.usecases.predict.predict_latency`
picks the profile from the store's and the bundled ones, adds the simulator's percentiles under
a load, and is what ``planner latency`` prints and the dashboard's Latency model page shows.

Every number a user typed is checked before any work (non-finite, non-positive and absurd
values are refused with the CLI option's name).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from planner.common.text import shown
from planner.errors import UsageError
from planner.latency.catalog import load_catalog
from planner.latency.engines import Engine, deploy, get_engine, scheduler_admission
from planner.latency.explain import kv_cache_source, memory_rule_text
from planner.latency.model import Deployment, LatencyModel, memory_summary
from planner.latency.profile import DEFAULT_ENGINE, Profile
from planner.latency.serving import (
    RequestLatency,
    SaturatedError,
    at_batch,
    max_batch,
    max_throughput,
    saturation_qps,
    static_batch,
    steady_state,
)

if TYPE_CHECKING:
    import pandas as pd

MAX_COUNT = 1_000_000_000  # more tokens, sequences or clients than any deployment sees
MAX_TP = 1024
MAX_SIM_SEQS = 65_536  # the simulator tabulates one decode step time per batch size
MIN_SIM_REQUESTS = 100
MAX_SIM_REQUESTS = 200_000  # about 20,000 requests simulate per second
DEFAULT_SIM_REQUESTS = 10_000


@dataclass(frozen=True)
class LatencyQuery:
    """What ``planner latency`` takes: a deployment, a request shape, a batch or a load.
    ``None`` settings take the engine's defaults (``data/catalog/engines.csv``)."""

    gpu: str
    model: str
    precision: str = "bf16"
    tp: int = 1
    batch: int = 1
    static: bool = False  # static batching instead of one request joining a continuous batch
    input_tokens: int = 1024
    output_tokens: int = 256
    engine: str = DEFAULT_ENGINE
    kv_cache: str | None = None
    memory_utilization: float | None = None
    max_seqs: int | None = None
    qps: float | None = None  # also: latencies under this Poisson load
    concurrency: int | None = None  # or: with this many closed-loop clients
    sim_requests: int = DEFAULT_SIM_REQUESTS  # with qps: requests simulated for percentiles
    seed: int = 0
    profile: str | None = None  # a calibration profile's name; None: the best for GPU and engine
    # TensorRT-LLM's capacity scheduler policy the simulator runs under --qps (None: the
    # engine's own admission, engines.csv)
    scheduler: str | None = None
    ep: int = 1  # expert parallelism: 1 (experts TP-sharded) or --tp (experts split whole)
    # disaggregated prefill and decode (any set): each role's TP (None: --tp), the KV link
    # (None: the GPU's NVLink when both roles fit one node), which side yields the first token
    prefill_tp: int | None = None
    decode_tp: int | None = None
    kv_link: str | None = None
    first_token: str | None = None

    @property
    def disaggregated(self) -> bool:
        return any(
            v is not None for v in (self.prefill_tp, self.decode_tp, self.kv_link, self.first_token)
        )


@dataclass(frozen=True)
class LatencyPrediction:
    """``result`` is exactly what ``planner latency --json`` prints; the rest is what it was
    computed with. ``batch_problem`` says why the batch asked for cannot run (then the
    single-request latencies in ``result`` are None); it is only set when the caller lets a
    batch that does not fit be a result rather than an error."""

    result: dict[str, Any]
    deployment: Deployment
    engine: Engine
    profile: Profile
    batch_problem: str | None = None
    # The error the profile states (:func:`planner.latency.registry.profile_accuracy`), where
    # the caller looked it up.
    accuracy: dict[str, Any] | None = None

    @property
    def latency_model(self) -> LatencyModel:
        return LatencyModel(self.deployment, self.profile)


def _digits(value: int) -> str:
    """An integer for a message: a 400-digit one is cut."""
    text = str(value)
    return text if len(text) <= 20 else f"{text[:20]}... ({len(text)} digits)"


def _count(option: str, value: int | None, what: str, most: int = MAX_COUNT) -> None:
    if value is not None and not 1 <= value <= most:
        raise UsageError(
            f"{option} {_digits(value)}: expected a whole number of {what} from 1 to {most:,}"
        )


def check_memory_utilization(value: float | None) -> None:
    """``--gpu-memory-utilization``: a share of each GPU's memory, 0.1 to 1 (vLLM's name)."""
    if value is not None and not (math.isfinite(value) and 0.1 <= value <= 1.0):
        raise UsageError(
            f"--gpu-memory-utilization {value:g}: expected a share of GPU memory from 0.1 to "
            "1.0 (e.g. 0.9; the default is the engine's, see `planner catalog engines`)"
        )


def check_kv_cache(value: str | None) -> str | None:
    """``--kv-cache``: fp32, fp16 (bf16) or fp8; None keeps the engine's default."""
    if value is None:
        return None
    name = value.strip().lower()
    if name not in ("fp32", "fp16", "bf16", "fp8"):
        raise UsageError(
            f"--kv-cache {shown(value)}: expected fp32, fp16 or fp8 (default: the engine's, "
            "see `planner catalog engines`)"
        )
    return "fp16" if name == "bf16" else name


def check_numbers(query: LatencyQuery) -> None:
    """Every count and load of ``query``, before any work (Typer takes 'nan' and 'inf' for a
    float): refused with the option's name."""
    if query.qps is not None and query.concurrency is not None:
        raise UsageError("--qps and --concurrency are alternatives; give one")
    _count("--tp", query.tp, "GPUs", MAX_TP)
    _count("--ep", query.ep, "GPUs", MAX_TP)
    _count("--prefill-tp", query.prefill_tp, "GPUs", MAX_TP)
    _count("--decode-tp", query.decode_tp, "GPUs", MAX_TP)
    if query.disaggregated and (query.qps is not None or query.concurrency is not None):
        raise UsageError(
            "--qps and --concurrency simulate aggregated replicas here; simulate a "
            "disaggregated fleet under load with `planner simulate --prefill-replicas N "
            "--decode-replicas M`"
        )
    _count("--batch", query.batch, "sequences")
    _count("--input", query.input_tokens, "tokens")
    _count("--output", query.output_tokens, "tokens")
    _count("--max-seqs", query.max_seqs, "sequences", MAX_SIM_SEQS)
    _count("--concurrency", query.concurrency, "clients")
    qps = query.qps
    if qps is not None and not (math.isfinite(qps) and qps > 0):
        raise UsageError(f"--qps {qps:g}: expected a positive, finite number of requests/s")
    sim = query.sim_requests
    if sim != 0 and not MIN_SIM_REQUESTS <= sim <= MAX_SIM_REQUESTS:
        raise UsageError(
            f"--sim-requests {_digits(sim)}: expected 0 (no simulation) or "
            f"{MIN_SIM_REQUESTS:,} to {MAX_SIM_REQUESTS:,} requests"
        )


def _check_shape(deployment: Deployment, input_tokens: int, output_tokens: int) -> None:
    """A request longer than the model's context window has no latency to predict."""
    total = input_tokens + output_tokens
    context = deployment.model.max_context
    if total > context:
        raise UsageError(
            f"--input {input_tokens} + --output {output_tokens} = {total:,} tokens exceed the "
            f"{context:,}-token context of {deployment.model.name}"
        )


def batch_problem(
    deployment: Deployment, input_tokens: int, output_tokens: int, batch: int
) -> str | None:
    """Why a batch whose KV cache does not fit cannot decode together, and how many can; None
    when it fits."""
    per_sequence = input_tokens + output_tokens
    need = batch * per_sequence
    capacity = deployment.kv_capacity_tokens
    if need <= capacity:
        return None
    return (
        f"--batch {batch}: {batch:,} sequences of {per_sequence:,} tokens need {need:,} "
        f"tokens of KV cache; this deployment holds {capacity:,}: at most "
        f"{capacity // per_sequence:,} "
        "sequences run at once (use a smaller --batch, --kv-cache fp8, more GPUs with "
        "--tp, or a larger GPU)"
    )


def round_down(value: float, digits: int = 3) -> float:
    """``value`` cut (not rounded) to ``digits`` significant digits: a capacity shown is one
    the deployment serves."""
    if value <= 0:
        return 0.0
    scale = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return math.floor(value / scale) * scale


def _saturation(
    deployment: Deployment,
    lat_model: LatencyModel,
    input_tokens: int,
    output_tokens: int,
    qps: float,
    reason: str,
) -> dict[str, Any]:
    """A load beyond the deployment's capacity, as a result: the capacity, the load offered,
    and what would serve it."""
    capacity = round_down(
        saturation_qps(lat_model, input_tokens, output_tokens, deployment.max_seqs)
    )
    replicas = math.ceil(qps / capacity) if capacity > 0 else None
    options = []
    if replicas is not None:
        options.append(
            f"{replicas:,} replicas of this deployment (ceil({qps:g} / {capacity:g}); "
            "`planner simulate --replicas`)"
        )
    gpu = deployment.gpu
    bigger = deployment.tp * 2
    if bigger <= gpu.max_gpus_per_node and deployment.model.attention_heads % bigger == 0:
        options.append(f"more GPUs per replica (--tp {bigger})")
    if deployment.precision.name not in ("fp8", "fp4") and "fp8_tflops" in gpu.peak_tflops:
        options.append("FP8 weights (--precision fp8)")
    options.append("shorter outputs (fewer decode steps per request)")
    return {
        "saturated": True,
        "capacity_qps": capacity,
        "offered_qps": qps,
        "reason": reason,
        "replicas_needed": replicas,
        "options": options,
    }


@dataclass(frozen=True)
class Sized:
    """A checked query's deployment, sized as its engine sizes it."""

    engine: Engine
    kv_asked: str | None  # the --kv-cache asked for (normalised), None: the engine's default
    deployment: Deployment


def size(query: LatencyQuery) -> Sized:
    """Check every input of ``query`` and size its deployment: a model, GPU, precision or
    engine that is not known, a TP that does not divide the heads and a request longer than
    the context are :class:`~planner.errors.UsageError` subclasses naming what is wrong."""
    check_numbers(query)
    check_memory_utilization(query.memory_utilization)
    kv_asked = check_kv_cache(query.kv_cache)
    spec = get_engine(query.engine)
    if query.scheduler is not None:
        scheduler_admission(spec, query.scheduler)  # only TensorRT-LLM's names, for trtllm
    if query.static and (query.qps is not None or query.concurrency is not None):
        raise UsageError(
            "--static describes one static batch (--batch N); under --qps or --concurrency "
            "the server batches continuously"
        )
    catalog = load_catalog()
    deployment = deploy(
        spec,
        catalog.gpus.get(query.gpu),
        catalog.models.get(query.model),
        catalog.precisions.get(query.precision),
        query.tp,
        kv_cache=kv_asked,
        memory_utilization=query.memory_utilization,
        max_seqs=query.max_seqs,
    )
    if query.ep != 1:
        deployment = replace(deployment, ep=query.ep)  # checked by Deployment
    _check_shape(deployment, query.input_tokens, query.output_tokens)
    return Sized(spec, kv_asked, deployment)


def _under_load(query: LatencyQuery, lat_model: LatencyModel, fits: int) -> dict[str, Any] | None:
    """The steady-state means under ``query``'s load (or its saturation, as a result); the
    simulated ``percentiles`` are left None for the caller, who runs the simulator."""
    qps, concurrency = query.qps, query.concurrency
    if qps is None and concurrency is None:
        return None
    deployment, seqs = lat_model.deployment, lat_model.deployment.max_seqs
    input_tokens, output_tokens = query.input_tokens, query.output_tokens
    loaded = None
    saturation = None
    queued = 0
    if qps is not None:
        try:
            loaded = steady_state(lat_model, input_tokens, output_tokens, "qps", qps, seqs)
        except SaturatedError as exc:
            saturation = _saturation(
                deployment, lat_model, input_tokens, output_tokens, qps, str(exc)
            )
    elif concurrency is not None:
        loaded = steady_state(
            lat_model, input_tokens, output_tokens, "concurrency", concurrency, seqs
        )
        queued = max(0, concurrency - fits)
    return {
        "kind": "qps" if qps is not None else "concurrency",
        "load": qps if qps is not None else concurrency,
        "saturated": saturation is not None,
        **(
            loaded.to_dict()
            if loaded is not None
            else {"ttft_ms": None, "tpot_ms": None, "e2e_ms": None, "batch": None}
        ),
        **({"queued_clients": queued} if concurrency is not None else {}),
        **(saturation or {}),
        "percentiles": None,
    }


def predict(
    query: LatencyQuery, sized: Sized, profile: Profile, *, batch_must_fit: bool = True
) -> LatencyPrediction:
    """TTFT, time per output token and end-to-end latency of ``query``'s deployment (``sized``
    by :func:`size`) timed with ``profile``, its memory, KV capacity and throughput; under
    ``qps`` or ``concurrency`` also the steady-state means, or the saturation as a result
    (``under_load``, whose ``percentiles`` the simulator fills in:
    :func:`planner.usecases.predict.predict_latency`).

    A model that does not fit is a :class:`~planner.errors.UsageError`; so is a batch whose KV
    cache does not fit, unless ``batch_must_fit`` is False: then
    :attr:`LatencyPrediction.batch_problem` says so and the rest is still computed."""
    spec, deployment = sized.engine, sized.deployment
    input_tokens, output_tokens, batch = query.input_tokens, query.output_tokens, query.batch
    lat_model = LatencyModel(deployment, profile)
    memory = memory_summary(deployment)  # raises when the model does not fit
    seqs = deployment.max_seqs
    fits = max_batch(lat_model, input_tokens, output_tokens, seqs)
    problem = batch_problem(deployment, input_tokens, output_tokens, batch)
    if problem is not None and batch_must_fit:
        raise UsageError(problem)
    single: RequestLatency | None = None
    if problem is None:
        single = (static_batch if query.static else at_batch)(
            lat_model, input_tokens, output_tokens, batch
        )
    throughput = max_throughput(lat_model, input_tokens, output_tokens, seqs)
    under_load = _under_load(query, lat_model, fits)
    saturated = under_load is not None and under_load["saturated"]
    result: dict[str, Any] = {
        "gpu": deployment.gpu.name,
        "model": deployment.model.name,
        "precision": deployment.precision.name,
        "tp": query.tp,
        "engine": spec.name,
        "kv_cache": deployment.kv_cache,
        "kv_cache_source": kv_cache_source(spec, sized.kv_asked, deployment),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "batch": batch,
        "batching": "static" if query.static else "continuous",
        "max_seqs": seqs,
        "profile": profile.name,
        "ttft_ms": single.ttft_ms if single else None,
        "tpot_ms": single.tpot_ms if single else None,
        "e2e_ms": single.e2e_ms if single else None,
        "memory": memory,
        "memory_rule": memory_rule_text(spec, deployment.memory_utilization),
        "weights_gib_per_gpu": memory["weights_gib"],
        "kv_capacity_tokens": deployment.kv_capacity_tokens,
        "max_concurrent_sequences": fits,
        "max_output_tokens_per_s": throughput["output_tokens_per_s"],
        "max_requests_per_s": throughput["requests_per_s"],
        "quality_delta_pct": deployment.precision.quality_delta_pct,
        "saturated": saturated,
        "capacity_qps": under_load["capacity_qps"] if under_load and saturated else None,
        "under_load": under_load,
    }
    if query.qps is not None and not saturated:
        result["capacity_qps"] = round_down(
            saturation_qps(lat_model, input_tokens, output_tokens, seqs)
        )
    result["seed"] = query.seed
    if query.ep != 1:
        result["ep"] = query.ep
    if query.disaggregated:
        result["disaggregated"] = disaggregated_view(query, deployment, profile)
    return LatencyPrediction(result, deployment, spec, profile, problem)


def disaggregated_view(
    query: LatencyQuery, deployment: Deployment, profile: Profile
) -> dict[str, Any]:
    """The request served disaggregated: prefilled on ``--prefill-tp`` GPUs, its KV cache over
    the link, decoded on ``--decode-tp`` GPUs in a batch of ``--batch`` (the deployment's
    other settings for both roles): :func:`planner.latency.disagg.disaggregated_request`."""
    from planner.latency.disagg import (
        DecodeRole,
        PrefillRole,
        default_link,
        disaggregated_request,
        load_link_table,
    )

    roles = {
        # expert parallelism, when on, spans each role's own TP group
        name: replace(
            deployment,
            tp=tp or deployment.tp,
            ep=(tp or deployment.tp) if deployment.ep != 1 else 1,
        )
        for name, tp in (("prefill", query.prefill_tp), ("decode", query.decode_tp))
    }
    gpu = deployment.gpu
    link = (
        load_link_table().get(query.kv_link)
        if query.kv_link is not None
        else default_link(gpu.name, roles["prefill"].tp + roles["decode"].tp, gpu.max_gpus_per_node)
    )
    side = query.first_token or ("prefill" if query.engine in ("sglang", "trtllm") else "decode")
    found = disaggregated_request(
        PrefillRole(LatencyModel(roles["prefill"], profile)),
        DecodeRole(LatencyModel(roles["decode"], profile)),
        link,
        query.input_tokens,
        query.output_tokens,
        decode_batch=query.batch,
        first_token=side,
    )
    return {
        "prefill_tp": roles["prefill"].tp,
        "decode_tp": roles["decode"].tp,
        "link": link.name,
        "link_transport": link.transport,
        "first_token": side,
        "decode_batch": query.batch,
        "kv_bytes": found.transfer.bytes,
        "prefill_ms": found.prefill_s * 1e3,
        "transfer_ms": found.transfer_s * 1e3,
        "first_step_ms": found.first_step_s * 1e3,
        "ttft_ms": found.ttft_s * 1e3,
        "tpot_ms": found.tpot_s * 1e3,
        "e2e_ms": found.e2e_s * 1e3,
        "transfer_share_of_ttft": found.transfer_share,
        "decode_kv_capacity_tokens": roles["decode"].kv_capacity_tokens,
    }


def batch_sizes(most: int, points: int = 40) -> list[int]:
    """Batch sizes from 1 to ``most``, about ``points`` of them spread evenly on a log scale
    (every size when there are fewer)."""
    if most <= points:
        return list(range(1, most + 1))
    spread = np.unique(np.round(np.geomspace(1, most, points)).astype(int))
    return [int(size) for size in spread]


def latency_by_batch(
    prediction: LatencyPrediction, batches: Sequence[int] | None = None
) -> pd.DataFrame:
    """TTFT, time per output token and end-to-end latency (ms) of the prediction's request at
    each batch size (default: 1 to the most its KV cache holds), batched as the query asked."""
    import pandas as pd  # only the dashboard draws this curve

    result = prediction.result
    sizes = (
        list(batches) if batches is not None else batch_sizes(result["max_concurrent_sequences"])
    )
    timing = static_batch if result["batching"] == "static" else at_batch
    model = prediction.latency_model
    rows = [
        timing(model, result["input_tokens"], result["output_tokens"], size).to_dict()
        for size in sizes
    ]
    return pd.DataFrame(rows, columns=["batch", "ttft_ms", "tpot_ms", "e2e_ms"])


MEMORY_PARTS = {
    "weights": "weights_gib",
    "activations": "activations_gib",
    "KV cache": "kv_cache_gib",
}


def memory_breakdown(memory: dict[str, Any]) -> dict[str, float]:
    """Each GPU's memory (a :func:`~planner.latency.model.memory_summary`) in GiB as it is
    spent: weights, activations (and the runtime), KV cache, and the rest of the device left
    free (the engine's headroom)."""
    parts = {name: float(memory[key]) for name, key in MEMORY_PARTS.items()}
    parts["free"] = max(0.0, float(memory["device_gib"]) - sum(parts.values()))
    return parts
