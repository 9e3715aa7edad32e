"""Simulations of the real traces (Azure LLM inference 2023, conversation and code; Mooncake
conversation) on Llama 3.1 8B in FP8 on H100 SXM replicas, with the bundled calibration: the
results must be plausible, and move the right way when load, replicas or caching change.

Reference figures: a decode step of the 8B model in FP8 reads ~8 GB of weights, ~2.4 ms at the
H100's 3.35 TB/s, plus ~2.7 ms of calibrated per-iteration overhead, so TPOT is ~5-6 ms at low
batch; the Azure conversation trace is ~5.5 requests/s of ~1k-token prompts, far below one
replica's capacity, so TTFT stays around a prefill (tens of ms). Mooncake sends ~3.4 requests/s
of ~12k-token prompts (~41k prompt tokens/s), more than one replica can prefill.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from numpy.typing import NDArray

from planner.ingest import IngestOptions, ingest_file
from planner.latency.model import LatencyModel
from planner.latency.profile import Profile, choose_profile, load_bundled_profiles
from planner.simulate.engine import EngineConfig, RooflineStepTimes
from planner.simulate.fleet import Fleet, FleetConfig
from planner.simulate.run import ServingSpec, SimulationResult, simulate
from planner.simulate.workload import Workload
from planner.store import Store
from planner.usecases.load import from_dataset
from tests.conftest import AZURE_CODE, AZURE_CONV, AZURE_CONV_NAME, MOONCAKE

CONV = AZURE_CONV_NAME
CODE = "AzureLLMInferenceTrace_code_2023"
MOONCAKE_NAME = "mooncake_conversation_trace"
SERVING = ServingSpec(gpu="H100-SXM", model="llama-3.1-8b", precision="fp8")


def profile() -> Profile:
    return choose_profile(load_bundled_profiles(), "H100-SXM")


def ingest(store: Store, name: str) -> None:
    if name == MOONCAKE_NAME:
        ingest_file(store, MOONCAKE, IngestOptions(start=datetime(2024, 6, 1, tzinfo=UTC)))
    else:
        ingest_file(store, AZURE_CONV if name == CONV else AZURE_CODE)


def load(store: Store, name: str, load_scale: float = 1.0) -> Workload:
    with store.session() as session:
        return from_dataset(session, name, load_scale=load_scale, seed=1)


def run(
    w: Workload, replicas: int = 1, serving: ServingSpec = SERVING, **fleet: Any
) -> dict[str, Any]:
    result: SimulationResult = simulate(
        w, serving, FleetConfig(replicas={"on-demand": replicas}, **fleet), profile()
    )
    summary: dict[str, Any] = result.summary["all"]
    # every request finished: none refused, none left waiting
    assert summary["requests"] == summary["finished"] == len(w)
    assert summary["rejected"] == 0
    return summary


def test_azure_conversation_on_one_replica(store: Store) -> None:
    ingest(store, CONV)
    w = load(store, CONV)
    s = run(w)
    assert 0.004 <= s["tpot"]["p50"] <= 0.020
    assert s["ttft"]["p99"] < 2.0
    assert s["ttft"]["p50"] < s["ttft"]["p99"] <= s["e2e"]["p99"]
    # light load: the replica keeps up, so throughput is the arrival rate
    assert s["throughput_rps"] == pytest.approx(len(w) / w.duration_s, rel=0.05)
    assert s["preemptions"] == 0
    assert s["output_tokens"] == int(w.output_tokens.sum())


def test_doubling_the_load_raises_p99_ttft(store: Store) -> None:
    ingest(store, CONV)
    base = run(load(store, CONV))
    doubled_workload = load(store, CONV, load_scale=2.0)
    doubled = run(doubled_workload)
    assert doubled["ttft"]["p99"] > base["ttft"]["p99"]
    assert doubled["tpot"]["p50"] > base["tpot"]["p50"]  # larger decode batches
    assert doubled["throughput_rps"] == pytest.approx(2 * base["throughput_rps"], rel=0.05)


@pytest.mark.parametrize("name", [CONV, CODE])
def test_more_replicas_lower_p99_e2e(store: Store, name: str) -> None:
    ingest(store, name)
    w = load(store, name)
    one, two = run(w, 1), run(w, 2)
    assert two["e2e"]["p99"] < one["e2e"]["p99"]
    assert two["ttft"]["p99"] < one["ttft"]["p99"]


def reuse_share(w: Workload) -> float:
    """Prompt share a single unbounded prefix cache would serve, straight from the trace: each
    request's leading blocks seen before, times the block size, at most its prompt - 1."""
    assert w.prefix_blocks is not None
    seen: set[int] = set()
    cached = 0
    for blocks, tokens in zip(w.prefix_blocks, w.input_tokens.tolist(), strict=True):
        hits = 0
        for block in blocks:
            if block not in seen:
                break
            hits += 1
        seen.update(blocks)
        cached += min(hits * w.prefix_block_tokens, tokens - 1)
    return cached / int(w.input_tokens.sum())


def test_mooncake_unbounded_prefix_cache_serves_the_traces_reuse(store: Store) -> None:
    ingest(store, MOONCAKE_NAME)
    w = load(store, MOONCAKE_NAME)
    assert w.prefix_blocks is not None and w.prefix_block_tokens == 512
    assert 10_000 < float(w.input_tokens.mean()) < 14_000
    ideal = reuse_share(w)
    assert ideal > 0.3  # conversation turns resend their history
    # one replica, a cache that never evicts and a KV cache that never preempts: every
    # request is admitted in arrival order and finds exactly the blocks seen before
    times = RooflineStepTimes(LatencyModel(SERVING.deployment(), profile()), 256)
    engine = EngineConfig(kv_capacity_tokens=10**12, prefix_cache_tokens=10**12)
    chunks: list[dict[str, NDArray[Any]]] = []
    Fleet(w, times, engine, FleetConfig(), on_chunk=chunks.append).run()
    cached = sum(int(c["cached_tokens"].sum()) for c in chunks)
    assert sum(int(c["preemptions"].sum()) for c in chunks) == 0
    assert cached / int(w.input_tokens.sum()) == pytest.approx(ideal, abs=1e-12)


def test_mooncake_prefix_caching_lowers_ttft(store: Store) -> None:
    # 4 replicas keep up with the trace on average. Each replica's prefix cache is as large as
    # its KV cache (~462k tokens, ~900 blocks of 512 = ~38 prompts), so with the
    # requests spread over 4 replicas it keeps only recent prefixes: a few percent of prompt
    # tokens, well below the trace's reuse (~37% with one unbounded cache).
    ingest(store, MOONCAKE_NAME)
    w = load(store, MOONCAKE_NAME)
    cached = run(w, 4)
    plain = run(w, 4, serving=ServingSpec(**{**SERVING.__dict__, "prefix_caching": False}))
    assert plain["cached_prompt_share"] == 0
    assert 0.02 < cached["cached_prompt_share"] < reuse_share(w)
    assert cached["ttft"]["mean"] < plain["ttft"]["mean"]
    # prefix-affinity routing keeps conversations on one replica: more of the reuse is served
    affinity = run(w, 4, router="prefix-affinity")
    assert affinity["cached_prompt_share"] > cached["cached_prompt_share"]
