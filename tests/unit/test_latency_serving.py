from __future__ import annotations

import itertools

import numpy as np
import pytest

from planner.errors import PlannerError
from planner.latency.catalog import load_catalog
from planner.latency.model import Deployment, LatencyModel
from planner.latency.profile import Profile
from planner.latency.serving import (
    RequestLatency,
    SaturatedError,
    at_batch,
    max_batch,
    max_throughput,
    steady_state,
)

PROFILE = Profile("test")  # the defaults: 0.6 compute, 0.75 memory, 2 ms overheads
IN, OUT = 467, 256  # the TensorRT-LLM Triton load test's shape


def latency_model(
    model: str = "llama-3.1-8b", gpu: str = "H100-SXM", precision: str = "bf16", tp: int = 1
) -> LatencyModel:
    c = load_catalog()
    deployment = Deployment(
        gpu=c.gpus.get(gpu), model=c.models.get(model), precision=c.precisions.get(precision), tp=tp
    )
    return LatencyModel(deployment, PROFILE)


def scalar(value: object) -> float:
    return float(np.asarray(value).reshape(-1)[0])


# --- one request at a batch size -----------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 8, 64])
def test_at_batch_end_to_end_is_first_token_plus_the_rest(batch: int) -> None:
    r = at_batch(latency_model(), IN, OUT, batch)
    assert r.ttft_ms > 0 and r.tpot_ms > 0
    assert r.e2e_ms == pytest.approx(r.ttft_ms + (OUT - 1) * r.tpot_ms, rel=1e-12)
    assert r.batch == batch


def test_at_batch_1_is_a_prefill_then_decode_steps_by_hand() -> None:
    m = latency_model()
    r = at_batch(m, IN, OUT, 1)
    # TTFT: the prompt's prefill + the per-request overhead (2 ms)
    assert r.ttft_ms == pytest.approx(scalar(m.prefill_time(IN)) * 1e3 + 2.0, rel=1e-9)
    # TPOT: one decode step at the mean context, input + output / 2
    assert r.tpot_ms == pytest.approx(scalar(m.decode_time(1, IN + OUT / 2)) * 1e3, rel=1e-9)


def test_single_token_output_is_just_the_first_token() -> None:
    r = at_batch(latency_model(), 128, 1)
    assert r.e2e_ms == r.ttft_ms


def test_time_per_output_token_grows_with_batch() -> None:
    m = latency_model()
    tpots = [at_batch(m, IN, OUT, b).tpot_ms for b in (1, 2, 8, 32, 128, 256)]
    assert all(a < b for a, b in itertools.pairwise(tpots))
    ttfts = [at_batch(m, IN, OUT, b).ttft_ms for b in (1, 8, 64)]
    assert all(a < b for a, b in itertools.pairwise(ttfts))


def test_request_latency_to_dict() -> None:
    r = RequestLatency(1.0, 2.0, 3.0, 4.0)
    assert r.to_dict() == {"ttft_ms": 1.0, "tpot_ms": 2.0, "e2e_ms": 3.0, "batch": 4.0}


# --- capacity and throughput ---------------------------------------------------------------


def test_max_batch_is_the_kv_capacity_over_the_sequence_length() -> None:
    m = latency_model()
    capacity = m.deployment.kv_capacity_tokens  # ~409k tokens on an H100 (see model tests)
    # 4096 + 4096 tokens a sequence: the KV cache, not max_seqs, is the limit
    assert max_batch(m, 4096, 4096) == capacity // 8192
    assert max_batch(m, 4096, 4096) < 256
    assert max_batch(m, 4096, 4096) * 8192 <= capacity
    # short sequences: the max-sequences cap
    assert max_batch(m, 128, 128) == 256
    assert max_batch(m, 128, 128, max_seqs=10) == 10
    assert max_batch(m, 128, 128, max_seqs=1000) == 1000


def test_a_sequence_longer_than_the_kv_cache_is_refused() -> None:
    # llama-2-70b in bf16 on 2 x H100: ~2,486 tokens of KV cache per GPU pair, less than one
    # 2048 + 1024 token sequence (within the model's 4096 context)
    m = latency_model("llama-2-70b", tp=2)
    assert m.deployment.kv_capacity_tokens < 3072
    with pytest.raises((PlannerError, SaturatedError)):
        max_batch(m, 2048, 1024)


def test_max_throughput_grows_from_batch_1_to_the_largest_batch() -> None:
    m = latency_model()
    largest = max_batch(m, IN, OUT)
    caps = [1, 2, 4, 16, 64, largest]
    results = [max_throughput(m, IN, OUT, max_seqs=cap) for cap in caps]
    assert [r["batch"] for r in results] == caps
    rates = [r["output_tokens_per_s"] for r in results]
    assert all(a < b for a, b in itertools.pairwise(rates))
    assert max_throughput(m, IN, OUT) == results[-1]
    top = results[-1]
    assert top["requests_per_s"] == pytest.approx(top["output_tokens_per_s"] / OUT, rel=1e-12)


def test_max_throughput_by_hand_at_batch_1() -> None:
    m = latency_model()
    r = max_throughput(m, IN, OUT, max_seqs=1)
    # one sequence: its prefill, then OUT decode steps at the mean context
    cycle = OUT * scalar(m.decode_time(1, IN + OUT / 2)) + scalar(m.prefill_time(IN))
    assert r["output_tokens_per_s"] == pytest.approx(OUT / cycle, rel=1e-9)


# --- steady state: open loop (requests per second) -----------------------------------------


def test_batch_load_is_at_batch() -> None:
    m = latency_model()
    assert steady_state(m, IN, OUT, "batch", 8) == at_batch(m, IN, OUT, 8)


@pytest.mark.parametrize(("inp", "out"), [(IN, OUT), (128, 128), (2048, 128)])
def test_tiny_rate_time_per_output_token_is_the_batch_1_figure(inp: int, out: int) -> None:
    m = latency_model()
    idle = at_batch(m, inp, out, 1)
    light = steady_state(m, inp, out, "qps", 0.01)
    assert light.batch == 1
    assert light.tpot_ms == pytest.approx(idle.tpot_ms, rel=0.05)


@pytest.mark.parametrize(("inp", "out"), [(IN, OUT), (128, 128)])
def test_tiny_rate_first_token_is_the_batch_1_figure(inp: int, out: int) -> None:
    m = latency_model()
    idle = at_batch(m, inp, out, 1)
    light = steady_state(m, inp, out, "qps", 0.01)
    assert light.ttft_ms == pytest.approx(idle.ttft_ms, rel=0.05)
    assert light.e2e_ms == pytest.approx(idle.e2e_ms, rel=0.05)


def test_tiny_rate_long_prompt_is_within_5_percent_of_batch_1() -> None:
    # With a long prompt the prefill dominates TTFT, so half a decode step stays under 5%.
    m = latency_model()
    idle = at_batch(m, 8192, 128, 1)
    light = steady_state(m, 8192, 128, "qps", 0.01)
    assert light.ttft_ms == pytest.approx(idle.ttft_ms, rel=0.05)
    assert light.ttft_ms >= idle.ttft_ms


def test_more_requests_per_second_mean_slower_tokens_and_first_tokens() -> None:
    m = latency_model()
    results = [steady_state(m, IN, OUT, "qps", q) for q in (0.5, 2, 8, 16, 24)]
    for slow, fast in zip(results[1:], results, strict=False):
        assert slow.tpot_ms > fast.tpot_ms
        assert slow.ttft_ms > fast.ttft_ms
        assert slow.batch > fast.batch
    for r in results:
        assert r.e2e_ms == pytest.approx(r.ttft_ms + (OUT - 1) * r.tpot_ms, rel=1e-12)


def test_steady_state_batch_obeys_littles_law() -> None:
    m = latency_model()
    rate = 8.0
    r = steady_state(m, IN, OUT, "qps", rate)
    # sequences decoding = rate x time spent decoding (OUT - 1 steps after the first token)
    assert r.batch == pytest.approx(rate * (OUT - 1) * r.tpot_ms / 1e3, rel=1e-6)


def test_a_rate_beyond_the_kv_capacity_saturates() -> None:
    m = latency_model()
    throughput = max_throughput(m, IN, OUT)["requests_per_s"]  # ~33 requests/s
    with pytest.raises(SaturatedError, match="sequences in flight exceed the 256 that fit"):
        steady_state(m, IN, OUT, "qps", 2 * throughput)


def test_a_rate_beyond_the_prefill_capacity_saturates() -> None:
    m = latency_model()
    prefills_per_s = 1 / scalar(m.prefill_time(IN))
    with pytest.raises(SaturatedError, match="prefills alone need"):
        steady_state(m, IN, OUT, "qps", 1.01 * prefills_per_s)


# --- steady state: closed loop (concurrency) -----------------------------------------------


def test_more_clients_mean_slower_tokens() -> None:
    m = latency_model()
    results = [steady_state(m, IN, OUT, "concurrency", n) for n in (1, 4, 16, 64, 256)]
    assert [r.batch for r in results] == [1, 4, 16, 64, 256]
    tpots = [r.tpot_ms for r in results]
    assert all(a < b for a, b in itertools.pairwise(tpots))


def test_clients_beyond_the_largest_batch_queue_for_a_slot() -> None:
    m = latency_model()
    largest = max_batch(m, IN, OUT)
    full = steady_state(m, IN, OUT, "concurrency", largest)
    over = steady_state(m, IN, OUT, "concurrency", largest + 100)
    assert over.batch == full.batch == largest
    assert over.tpot_ms == pytest.approx(full.tpot_ms, rel=1e-9)  # the batch is the same
    assert over.ttft_ms > full.ttft_ms + 1000  # seconds of queueing, not milliseconds
    # The served clients cycle at rate = largest / cycle, cycle = end-to-end (TTFT + OUT - 1
    # steps); each extra client waits (extra / rate) for a slot.
    cycle_s = full.e2e_ms / 1e3
    rate = largest / cycle_s
    assert (over.ttft_ms - full.ttft_ms) / 1e3 == pytest.approx(100 / rate, rel=1e-6)
    more = steady_state(m, IN, OUT, "concurrency", largest + 200)
    assert more.ttft_ms - full.ttft_ms == pytest.approx(2 * (over.ttft_ms - full.ttft_ms), rel=1e-6)


def test_clients_within_the_largest_batch_do_not_queue() -> None:
    m = latency_model()
    r = steady_state(m, IN, OUT, "concurrency", 16)
    # TTFT stays in tens of milliseconds: a prefill, overheads and a little waiting
    assert r.ttft_ms < 2 * at_batch(m, IN, OUT, 16).ttft_ms
