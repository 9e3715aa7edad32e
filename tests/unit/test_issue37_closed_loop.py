"""Issue 37: the closed-loop (``--concurrency``) steady state converges to a finite, sensible
fixed point for every shape, including the one that printed TTFT ``inf`` (Llama-3.1-70B FP16 on
4 x A100-80GB, 2000-token prompts, 200-token outputs, 150 clients), and far past what the KV
cache holds, where the excess clients wait for a slot."""

from __future__ import annotations

import itertools
import math

import pytest

from planner.latency.catalog import load_catalog
from planner.latency.engines import deploy
from planner.latency.model import LatencyModel
from planner.latency.profile import Profile
from planner.latency.serving import max_batch, max_throughput, steady_state

PROFILE = Profile("test")  # the built-in defaults

# (model, GPU, precision, TP, input, output)
SHAPES = [
    ("llama-3.1-70b", "A100-80GB", "fp16", 4, 2000, 200),  # the issue's: TTFT was inf
    ("llama-3.1-8b", "H100-SXM", "bf16", 1, 467, 256),
    ("llama-3.1-8b", "H100-SXM", "bf16", 1, 8000, 2),  # prefill-bound: one prompt an iteration
    ("llama-3.1-70b", "H100-SXM", "fp8", 2, 128, 1024),  # decode-bound
]


def model_for(name: str, gpu: str, precision: str, tp: int) -> LatencyModel:
    c = load_catalog()
    deployment = deploy(
        "trtllm", c.gpus.get(gpu), c.models.get(name), c.precisions.get(precision), tp
    )
    return LatencyModel(deployment, PROFILE)


def test_the_issues_shape_is_finite_and_sensible() -> None:
    m = model_for("llama-3.1-70b", "A100-80GB", "fp16", 4)
    r = steady_state(m, 2000, 200, "concurrency", 150)
    assert math.isfinite(r.ttft_ms) and math.isfinite(r.tpot_ms) and math.isfinite(r.e2e_ms)
    assert max_batch(m, 2000, 200) >= 150  # every client is served: none waits for a slot
    # The cycle's throughput (clients / end-to-end) cannot beat the offline maximum, and at 150
    # clients it is close to it (the deployment is prefill-bound)
    best = max_throughput(m, 2000, 200)["requests_per_s"]
    rate = 150 / (r.e2e_ms / 1e3)
    assert 0.8 * best < rate <= best * 1.001
    # a prompt waits for a few prompts' prefills, not minutes
    alone = steady_state(m, 2000, 200, "concurrency", 1)
    assert alone.ttft_ms < r.ttft_ms < 10 * alone.ttft_ms


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}-{s[1]}-{s[4]}x{s[5]}")
def test_every_client_count_converges_to_a_closed_loop_fixed_point(
    shape: tuple[str, str, str, int, int, int],
) -> None:
    name, gpu, precision, tp, inp, out = shape
    m = model_for(name, gpu, precision, tp)
    capacity = max_batch(m, inp, out)
    best = max_throughput(m, inp, out)["requests_per_s"]
    counts = sorted({1, 2, 8, 32, 64, 150, capacity // 2 or 1, capacity, 2 * capacity})
    results = [steady_state(m, inp, out, "concurrency", n) for n in counts]
    for n, r in zip(counts, results, strict=True):
        assert all(math.isfinite(v) and v > 0 for v in (r.ttft_ms, r.tpot_ms, r.e2e_ms)), (n, r)
        assert r.e2e_ms == pytest.approx(r.ttft_ms + (out - 1) * r.tpot_ms, rel=1e-9)
        served = min(n, capacity)
        # Little's law over the served clients' cycle: the decoding batch is their share of
        # the cycle spent after the first token
        if n <= capacity:
            decoding = served * (out - 1) * r.tpot_ms / r.e2e_ms
            assert r.batch == pytest.approx(max(decoding, 1), rel=1e-5)
            assert served / (r.e2e_ms / 1e3) <= best * 1.001  # never beats the offline maximum
        assert r.batch <= served * (1 + 1e-9)
    # more clients: nothing gets faster
    for a, b in itertools.pairwise(results):
        assert b.ttft_ms >= a.ttft_ms * (1 - 1e-6)
        assert b.tpot_ms >= a.tpot_ms * (1 - 1e-6)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}-{s[1]}-{s[4]}x{s[5]}")
def test_far_past_the_kv_cache_the_excess_waits_and_ttft_grows_linearly(
    shape: tuple[str, str, str, int, int, int],
) -> None:
    name, gpu, precision, tp, inp, out = shape
    m = model_for(name, gpu, precision, tp)
    capacity = max_batch(m, inp, out)
    full = steady_state(m, inp, out, "concurrency", capacity)
    steps = [steady_state(m, inp, out, "concurrency", capacity + k * 1000) for k in (1, 2, 4)]
    for r in steps:  # the served batch and its pace do not change
        assert r.tpot_ms == pytest.approx(full.tpot_ms, rel=1e-9)
        assert r.batch == pytest.approx(full.batch, rel=1e-9)
        assert math.isfinite(r.ttft_ms)
    # each 1000 extra clients add the same wait: 1000 / the served clients' rate
    rate = capacity / (full.e2e_ms / 1e3)
    one, two, four = (r.ttft_ms - full.ttft_ms for r in steps)
    assert one / 1e3 == pytest.approx(1000 / rate, rel=1e-6)
    assert two == pytest.approx(2 * one, rel=1e-9) and four == pytest.approx(4 * one, rel=1e-9)
