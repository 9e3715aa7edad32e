"""Admission policies of a replica (planner.simulate.engine): ``no_evict`` (TensorRT-LLM's
GUARANTEED_NO_EVICT: a request is admitted only when its whole KV need fits) and ``preempt``
(vLLM: admit while the prompt fits, keep a watermark of free blocks, preempt the newest by
recomputation). Hand-built cases, a load sweep near capacity that must have no cliff, and the
wiring from the engine catalog to the simulation and the recommender."""

from __future__ import annotations

import dataclasses
import functools
import itertools
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from planner.cli import options
from planner.latency.engines import load_engines
from planner.recommend.inputs import Constraints
from planner.recommend.space import Candidate, Offer
from planner.simulate import engine as sim_engine
from planner.simulate.engine import (
    ADMISSION_POLICIES,
    BLOCK_TOKENS,
    VLLM_WATERMARK,
    EngineConfig,
    LinearStepTimes,
)
from planner.simulate.fleet import Fleet, FleetConfig
from planner.simulate.run import ServingSpec
from planner.simulate.workload import Workload
from tests.unit.test_sim_engine import roofline  # Llama 3.1 8B FP8 on one H100 SXM

START = datetime(2024, 1, 1, tzinfo=UTC)
LINEAR = LinearStepTimes(per_token_s=1e-4)


def workload(arrival: NDArray[np.float64], inputs: NDArray[Any], outputs: NDArray[Any]) -> Workload:
    n = len(arrival)
    return Workload(
        start=START,
        arrival_s=np.asarray(arrival, dtype=np.float64),
        input_tokens=np.asarray(inputs, dtype=np.int64),
        output_tokens=np.asarray(outputs, dtype=np.int64),
        class_index=np.zeros(n, dtype=np.int16),
        classes=("default",),
    )


def serve(w: Workload, times: Any, config: EngineConfig) -> dict[str, NDArray[Any]]:
    chunks: list[dict[str, NDArray[Any]]] = []
    Fleet(w, times, config, FleetConfig(), on_chunk=chunks.append).run()
    columns = {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]}
    order = np.argsort(columns["request_id"], kind="stable")
    return {name: values[order] for name, values in columns.items()}


# --- hand-built cases ----------------------------------------------------------------------


def burst(n: int = 12) -> Workload:
    """``n`` requests at once, each 400 prompt + 600 output tokens: 1,016 tokens of whole need
    each, so a 4,000-token cache holds 3 to the end but 9 prompts."""
    return workload(np.zeros(n), np.full(n, 400), np.full(n, 600))


def test_preempt_overfills_and_preempts_where_no_evict_waits() -> None:
    out_preempt = serve(burst(), LINEAR, EngineConfig(kv_capacity_tokens=4000))
    assert out_preempt["preemptions"].sum() > 0
    out = serve(burst(), LINEAR, EngineConfig(kv_capacity_tokens=4000, admission="no_evict"))
    assert out["preemptions"].sum() == 0
    assert not out["rejected"].any()
    # three at a time (3 x 1,016 <= 4,000 < 4 x 1,016): the fourth starts when one finishes
    first = np.sort(out["first_token_s"])
    finish = np.sort(out["finish_s"])
    assert first[2] < finish[0] <= first[3]


@pytest.mark.usefixtures("pure_engine")  # subclasses the replica
def test_no_evict_reserves_the_whole_need_at_admission() -> None:
    probe: list[tuple[int, int, int]] = []
    config = EngineConfig(kv_capacity_tokens=4000, admission="no_evict")

    class Watched(sim_engine.Replica):
        def _admit(self) -> None:
            super()._admit()
            probe.append((self.committed, len(self.prefilling), self.batch))

    replica = Watched(0, LINEAR, config)
    for i in range(5):
        replica.submit(sim_engine.Sequence(i, 0.0, 400, 600, 0), 0.0)
    while replica.next_event() < float("inf"):
        replica.advance(replica.next_event())
    need = 400 + 600 + BLOCK_TOKENS
    assert probe[0] == (need, 1, 0)  # the first submit admits one: the rest arrive after
    assert max(committed for committed, _, _ in probe) == 3 * need
    assert replica.committed == 0  # all released at the end


def test_watermark_keeps_a_share_of_the_cache_free_at_admission() -> None:
    config = EngineConfig(kv_capacity_tokens=100_000, watermark=0.05)
    assert config.watermark_tokens == int(0.05 * (100_000 // BLOCK_TOKENS)) * BLOCK_TOKENS
    replica = sim_engine.Replica(0, LINEAR, config)
    for i in range(40):  # 40 prompts of 3,000 tokens: more than the cache holds
        replica.submit(sim_engine.Sequence(i, 0.0, 3000, 50, 0), 0.0)
    replica.advance(replica.next_event())  # the first prompt's iteration; then admission
    room = 100_000 - config.watermark_tokens
    assert len(replica.prefilling) > 10
    # admitted up to the watermark, and not one prompt more
    assert replica._kv_used() <= room < replica._kv_used() + 3000 + BLOCK_TOKENS


def test_watermark_does_not_block_a_request_that_would_be_alone() -> None:
    # 98% of the cache: over what a 5% watermark leaves, but nothing else runs, so it goes in
    out = serve(
        workload(np.zeros(1), np.array([9_700]), np.array([100])),
        LINEAR,
        EngineConfig(kv_capacity_tokens=10_000, watermark=0.05),
    )
    assert not out["rejected"].any() and out["finish_s"][0] > 0


@pytest.mark.parametrize(
    ("field", "value"), [("admission", "evict"), ("watermark", -0.1), ("watermark", 1.0)]
)
def test_engine_config_refuses_unknown_settings(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        EngineConfig(**{field: value})


# --- no cliff near capacity ----------------------------------------------------------------


SWEEP_REQUESTS = 3_000
BASE_QPS = 20.0
# 0.5% steps across the knee: at 0.80 x 20 req/s the replica keeps up (no queue builds), by
# 0.96 the KV cache limits it (found with this sweep; the test checks both ends below)
LOADS = [round(0.80 + 0.005 * i, 3) for i in range(33)]
SWEEP_POLICIES = {
    "preempt": EngineConfig(
        max_seqs=256, max_batched_tokens=2048, kv_capacity_tokens=60_000, watermark=VLLM_WATERMARK
    ),
    "no_evict": EngineConfig(
        max_seqs=256, max_batched_tokens=2048, kv_capacity_tokens=60_000, admission="no_evict"
    ),
}


@functools.cache
def sweep(config: EngineConfig) -> list[tuple[float, float, int]]:
    """(load, served output tokens/s, preemptions) at each load: Poisson arrivals of prompts of
    500-1,500 tokens and geometric outputs (mean 300), the same requests at every load."""
    rng = np.random.default_rng(0)
    gaps = rng.exponential(1.0, SWEEP_REQUESTS)
    inputs = rng.integers(500, 1500, SWEEP_REQUESTS)
    outputs = np.minimum(rng.geometric(1 / 300, SWEEP_REQUESTS), 1200)
    rows = []
    for load in LOADS:
        arrival = np.cumsum(gaps / (BASE_QPS * load))
        arrival -= arrival[0]
        out = serve(workload(arrival, inputs, outputs), roofline(), config)
        window = float(arrival[-1])
        # served: output tokens of the requests finished while requests still arrive
        done = out["finish_s"] <= window
        served = float(out["output_tokens"][done].sum()) / window
        rows.append((load, served, int(out["preemptions"].sum())))
    return rows


@pytest.mark.parametrize("policy", sorted(SWEEP_POLICIES))
def test_served_throughput_has_no_cliff_near_capacity(policy: str) -> None:
    rows = sweep(SWEEP_POLICIES[policy])
    served = np.array([s for _, s, _ in rows])
    offered = np.array([load * BASE_QPS for load, _, _ in rows])
    # the sweep spans the knee: served grows with the load at first, then stops growing
    per_request = served / offered
    assert per_request[-1] < 0.97 * per_request[0]
    assert served[1] > served[0]
    # 0.5% more load never loses more than 5% of what was served
    for (load, before, _), (_, after, _) in itertools.pairwise(rows):
        assert after >= 0.95 * before, (policy, load, before, after)
    if policy == "no_evict":
        assert all(preempted == 0 for _, _, preempted in rows)


def test_the_watermark_cuts_preemptions_near_capacity() -> None:
    with_watermark = sweep(SWEEP_POLICIES["preempt"])
    without = sweep(dataclasses.replace(SWEEP_POLICIES["preempt"], watermark=0.0))
    assert sum(p for _, _, p in without) > 3 * sum(p for _, _, p in with_watermark)


# --- wiring: the engine's policy reaches the simulation and the recommender ----------------


def test_library_and_cli_name_the_same_policies() -> None:
    assert options.SIMULATE_ADMISSION_POLICIES == ADMISSION_POLICIES
    assert options.SIMULATE_VLLM_WATERMARK == VLLM_WATERMARK


@pytest.mark.parametrize("engine", [e.name for e in load_engines()])
def test_serving_takes_the_engines_admission(engine: str) -> None:
    spec = ServingSpec(gpu="H100-SXM", model="llama-3.1-8b", precision="fp8", engine=engine)
    expected = spec.engine_profile.admission
    config = spec.engine_config(spec.deployment())
    assert config.admission == expected
    assert config.watermark == (VLLM_WATERMARK if expected == "preempt" else 0.0)
    assert spec.admission_policy() == (expected, f"engine default ({engine})")


def test_admission_option_overrides_the_engine() -> None:
    spec = ServingSpec(
        gpu="H100-SXM", model="llama-3.1-8b", engine="trtllm", admission="preempt", kv_watermark=0
    )
    config = spec.engine_config(spec.deployment())
    assert (config.admission, config.watermark) == ("preempt", 0.0)
    assert spec.admission_policy() == ("preempt", "--admission")


@pytest.mark.parametrize("engine", ["trtllm", "vllm"])
def test_recommender_candidates_run_the_engines_policy(engine: str) -> None:
    offer = Offer("aws", "us-east-1", "p5.48xlarge", "H100-SXM", 8, ())
    candidate = Candidate(
        id=0,
        offer=offer,
        model="llama-3.1-8b",
        precision="fp8",
        tp=1,
        max_seqs=128,
        chunked_prefill=True,
        quality_delta_pct=0.0,
        engine=engine,
    )
    spec = candidate.serving(Constraints(model="llama-3.1-8b", engine=engine))
    config = spec.engine_config(spec.deployment())
    assert config.admission == {"trtllm": "no_evict", "vllm": "preempt"}[engine]
