"""Issue 37: ``planner latency --qps`` simulates each engine with the engine's own scheduling
(admission, watermark, batch limits, chunked prefill), exactly as ``planner simulate`` does, and
TensorRT-LLM's two capacity scheduler policies (``--scheduler guaranteed_no_evict`` /
``max_utilization``) map onto the simulator's admission policies."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planner.errors import UsageError
from planner.latency.engines import SCHEDULERS, get_engine, scheduler_admission
from planner.latency.predict import LatencyQuery
from planner.latency.profile import Profile
from planner.simulate.fleet import FleetConfig
from planner.simulate.run import ServingSpec, simulate
from planner.simulate.steady import COOLDOWN_SHARE, WARMUP_SHARE
from planner.simulate.workload import Workload
from planner.usecases.predict import predict_latency, serving_spec

# The deployment: Llama-3.3-70B FP8 on 2 x H100 (TensorRT-LLM: FP8 KV cache)
QUERY = LatencyQuery(
    gpu="H100-SXM",
    model="llama-3.3-70b",
    precision="fp8",
    tp=2,
    input_tokens=1024,
    output_tokens=256,
    engine="trtllm",
    sim_requests=2000,
    seed=3,
)


def bundled_only() -> nullcontext[None]:
    return nullcontext(None)  # no store: the bundled profiles


def poisson(qps: float, n: int, inp: int, out: int, seed: int) -> Workload:
    """The workload ``latency --qps`` simulates (planner.simulate.steady.steady_load)."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / qps, n))
    return Workload(
        start=datetime(2026, 1, 1, tzinfo=UTC),
        arrival_s=arrivals - arrivals[0],
        input_tokens=np.full(n, inp, dtype=np.int64),
        output_tokens=np.full(n, out, dtype=np.int64),
        class_index=np.zeros(n, dtype=np.int16),
        classes=("default",),
    )


def middle_percentiles(path: Path, n: int, out: int) -> dict[str, dict[str, float]]:
    """The percentiles ``latency --qps`` reports, from ``simulate``'s per-request output."""
    rows = pd.read_csv(path).sort_values("request_id")
    ids = rows["request_id"]
    rows = rows[(ids >= int(n * WARMUP_SHARE)) & (ids < int(n * (1 - COOLDOWN_SHARE)))]
    first = rows["first_token_s"].to_numpy() - rows["arrival_s"].to_numpy()
    finish = rows["finish_s"].to_numpy() - rows["arrival_s"].to_numpy()
    samples = {"ttft": first * 1e3, "e2e": finish * 1e3, "tpot": (finish - first) / (out - 1) * 1e3}
    return {
        name: {q: float(np.percentile(v, int(q[1:]))) for q in ("p50", "p90", "p99")}
        for name, v in samples.items()
    }


@pytest.mark.parametrize(
    ("engine", "scheduler", "admission"),
    [
        ("trtllm", None, "no_evict"),
        ("trtllm", "max_utilization", "preempt"),
        ("vllm", None, "preempt"),
    ],
)
def test_latency_qps_and_simulate_give_the_same_percentiles(
    tmp_path: Path, engine: str, scheduler: str | None, admission: str
) -> None:
    base = replace(QUERY, engine=engine, scheduler=scheduler, qps=1.0)
    capacity = predict_latency(base, bundled_only).result["capacity_qps"]
    query = replace(base, qps=0.95 * capacity)  # near capacity, where admission matters
    prediction = predict_latency(query, bundled_only)
    percentiles = prediction.result["under_load"]["percentiles"]
    assert percentiles["admission"] == admission
    serving = ServingSpec(
        gpu=query.gpu,
        model=query.model,
        precision=query.precision,
        tp=query.tp,
        engine=engine,
        scheduler=scheduler,
    )
    assert serving == serving_spec(query)
    assert query.qps is not None
    workload = poisson(query.qps, query.sim_requests, 1024, 256, query.seed)
    out = tmp_path / "requests.csv"
    simulate(workload, serving, FleetConfig(seed=query.seed), prediction.profile, requests_out=out)
    expected = middle_percentiles(out, query.sim_requests, 256)
    for metric, values in expected.items():
        for q, value in values.items():
            assert percentiles[metric][q] == pytest.approx(value, rel=1e-9), (metric, q)


def test_trtllm_at_95_percent_of_capacity_runs_its_own_admission() -> None:
    """Before the fix every engine ran the simulator's default admission (preempt, no
    watermark): TensorRT-LLM's P90 TTFT was tens of seconds at 95% of capacity."""
    capacity = predict_latency(replace(QUERY, qps=1.0), bundled_only).result["capacity_qps"]
    loaded = predict_latency(replace(QUERY, qps=0.95 * capacity), bundled_only)
    percentiles = loaded.result["under_load"]["percentiles"]
    assert percentiles["admission"] == get_engine("trtllm").admission == "no_evict"
    assert percentiles["admission_source"] == "engine default (trtllm)"
    assert percentiles["ttft"]["p50"] < 2_000  # ms


def burst(n: int, inp: int, out: int) -> Workload:
    """``n`` requests at once: the server is full from the start, as at capacity."""
    return Workload(
        start=datetime(2026, 1, 1, tzinfo=UTC),
        arrival_s=np.zeros(n),
        input_tokens=np.full(n, inp, dtype=np.int64),
        output_tokens=np.full(n, out, dtype=np.int64),
        class_index=np.zeros(n, dtype=np.int16),
        classes=("default",),
    )


def test_max_utilization_admits_more_and_serves_more_than_guaranteed_no_evict() -> None:
    # GUARANTEED_NO_EVICT reserves each request's whole output before admitting it,
    # MAX_UTILIZATION only what the running requests hold now. Llama-3.1-70B FP8 on one H100:
    # a small KV cache (the batch is the KV cache's, not max_batch_size's) and steps that
    # mostly read the weights, so a larger batch serves more (with a large, attention-bound
    # batch the recomputed prefills of paused requests can cost more than packing gains).
    serving = {
        name: ServingSpec(
            gpu="H100-SXM", model="llama-3.1-70b", precision="fp8", engine="trtllm", scheduler=name
        )
        for name in SCHEDULERS
    }
    deployment = serving["guaranteed_no_evict"].deployment()
    inp, out = 128, 512
    fits_whole = deployment.kv_capacity_tokens // (inp + out)
    assert fits_whole < deployment.max_seqs  # the KV cache, not the max batch, is the limit
    n = 3 * fits_whole
    runs = {
        name: simulate(burst(n, inp, out), spec, FleetConfig(seed=0), Profile("test"))
        for name, spec in serving.items()
    }
    no_evict, packed = runs["guaranteed_no_evict"], runs["max_utilization"]
    assert no_evict.serving["admission"] == "no_evict" and packed.serving["admission"] == "preempt"
    assert packed.serving["kv_watermark"] == 0.0
    assert no_evict.serving["admission_source"] == "--scheduler guaranteed_no_evict"
    # admits more: more sequences running together on average, and the first tokens sooner
    running = {name: r.timeline["running"].mean() for name, r in runs.items()}
    assert running["max_utilization"] > 1.2 * running["guaranteed_no_evict"]
    assert packed.summary["all"]["ttft"]["p50"] < no_evict.summary["all"]["ttft"]["p50"]
    # and higher throughput: the same requests served sooner
    assert packed.simulated_s < 0.85 * no_evict.simulated_s
    assert packed.summary["all"]["output_tokens_per_s"] > (
        1.2 * no_evict.summary["all"]["output_tokens_per_s"]
    )
    assert no_evict.summary["all"]["preemptions"] == 0


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_scheduler_is_only_tensorrt_llms(engine: str) -> None:
    with pytest.raises(UsageError, match=r"--scheduler 'max_utilization' is TensorRT-LLM's"):
        scheduler_admission(engine, "max_utilization")
    with pytest.raises(UsageError, match="--engine trtllm"):
        ServingSpec(
            gpu="H100-SXM", model="llama-3.1-8b", engine=engine, scheduler="x"
        ).engine_config(ServingSpec(gpu="H100-SXM", model="llama-3.1-8b").deployment())
    with pytest.raises(UsageError, match="TensorRT-LLM's capacity scheduler"):
        predict_latency(replace(QUERY, engine=engine, scheduler="max_utilization"), bundled_only)


def test_scheduler_names_and_conflicts() -> None:
    assert scheduler_admission("trtllm", "MAX-UTILIZATION") == ("preempt", 0.0)
    assert scheduler_admission("tensorrt-llm", "guaranteed_no_evict") == ("no_evict", 0.0)
    with pytest.raises(UsageError, match="expected guaranteed_no_evict or max_utilization"):
        scheduler_admission("trtllm", "static_batch")
    spec = ServingSpec(
        gpu="H100-SXM", model="llama-3.1-8b", engine="trtllm", scheduler="max_utilization"
    )
    assert spec.admission_policy() == ("preempt", "--scheduler max_utilization")
    assert spec.watermark() == 0.0
    assert replace(spec, kv_watermark=0.05).watermark() == 0.05
    with pytest.raises(UsageError, match="are alternatives"):
        replace(spec, admission="preempt").admission_policy()
