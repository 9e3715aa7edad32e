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
    mixed_iteration,
    saturation_qps,
    static_batch,
    steady_state,
)

PROFILE = Profile("test")  # the built-in defaults
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
    # TTFT: the prompt's prefill + the per-request overhead
    overhead = PROFILE.request_overhead_ms
    assert r.ttft_ms == pytest.approx(scalar(m.prefill_time(IN)) * 1e3 + overhead, rel=1e-9)
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
    # llama-3.1-70b in bf16 on 2 x H100: ~21,600 tokens of KV cache per GPU pair (see the model
    # tests), less than one 16,384 + 16,384 token sequence (within the model's 131,072 context)
    m = latency_model("llama-3.1-70b", tp=2)
    assert m.deployment.kv_capacity_tokens < 32_768
    with pytest.raises(PlannerError, match="a sequence of 32,768 tokens needs more KV cache"):
        max_batch(m, 16_384, 16_384)
    with pytest.raises(PlannerError, match="needs more KV cache"):
        max_throughput(m, 16_384, 16_384)


def test_max_throughput_grows_from_batch_1_to_the_largest_batch() -> None:
    m = latency_model()
    largest = max_batch(m, IN, OUT)
    caps = [1, 2, 4, 16, 64, largest]
    results = [max_throughput(m, IN, OUT, max_seqs=cap) for cap in caps]
    # resident sequences: those decoding plus the prompts prefilled alongside them
    for r, cap in zip(results[1:], caps[1:], strict=True):
        assert r["batch"] == pytest.approx(cap, rel=1e-12)
    rates = [r["output_tokens_per_s"] for r in results]
    assert all(a < b for a, b in itertools.pairwise(rates))
    assert max_throughput(m, IN, OUT) == results[-1]
    top = results[-1]
    assert top["requests_per_s"] == pytest.approx(top["output_tokens_per_s"] / OUT, rel=1e-12)


def test_max_throughput_by_hand_at_batch_1() -> None:
    m = latency_model()
    r = max_throughput(m, IN, OUT, max_seqs=1)
    # one sequence: its prefill (which gives the first token), then OUT - 1 decode steps at
    # the mean context. The model spreads the prefill over the OUT - 1 decode iterations (a
    # mean-value iteration), which is within 1% of pricing them apart at this shape.
    cycle = (OUT - 1) * scalar(m.decode_time(1, IN + OUT / 2)) + scalar(m.prefill_time(IN))
    assert r["output_tokens_per_s"] == pytest.approx(OUT / cycle, rel=0.01)


@pytest.mark.parametrize("out", [2, 8, OUT])
def test_max_throughput_keeps_max_seqs_of_1(out: int) -> None:
    m = latency_model()
    r = max_throughput(m, IN, out, max_seqs=1)
    assert r["batch"] <= 1 + 1e-12


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
    # 8000-token prompts and an 8192-token iteration budget: one prompt an iteration at most,
    # so no more prompts a second than one prefill's time allows (the KV cache, 58 sequences
    # of 8002 tokens, is not the limit)
    m = latency_model()
    inp, out = 8000, 2
    prefills_per_s = 1 / scalar(m.prefill_time(inp))
    with pytest.raises(SaturatedError, match="need more than the 8,192-token iteration budget"):
        steady_state(m, inp, out, "qps", 1.01 * prefills_per_s)
    assert saturation_qps(m, inp, out) < prefills_per_s


# --- steady state: closed loop (concurrency) -----------------------------------------------


def test_more_clients_mean_slower_tokens() -> None:
    m = latency_model()
    clients = (1, 4, 16, 64, 256)
    results = [steady_state(m, IN, OUT, "concurrency", n) for n in clients]
    # Little's law: of n clients, the share decoding is the share of their cycle spent after
    # the first token: n x (OUT - 1) x TPOT / end-to-end (at least 1, the floor of a batch)
    for n, r in zip(clients, results, strict=True):
        decoding = n * (OUT - 1) * r.tpot_ms / r.e2e_ms
        assert r.batch == pytest.approx(max(decoding, 1.0), rel=1e-6)
        assert r.batch <= n
        assert r.batch > 0.95 * n  # a 467-token prompt is a small share of a 256-token life
    tpots = [r.tpot_ms for r in results]
    assert all(a < b for a, b in itertools.pairwise(tpots))


def test_clients_beyond_the_largest_batch_queue_for_a_slot() -> None:
    m = latency_model()
    largest = max_batch(m, IN, OUT)
    full = steady_state(m, IN, OUT, "concurrency", largest)
    over = steady_state(m, IN, OUT, "concurrency", largest + 100)
    assert over.batch == pytest.approx(full.batch, rel=1e-9)
    assert 0.95 * largest < full.batch <= largest  # the served clients, less those prefilling
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


# --- batched prefill -----------------------------------------------------------------------


@pytest.mark.parametrize("out", [128, 32])
def test_batched_prefill_beats_one_prefill_per_iteration(out: int) -> None:
    # 128-token prompts: pricing each prefill as its own iteration reads the weights once per
    # prompt; engines batch the prompts with the decodes (and each other) in one forward pass
    m = latency_model()
    inp = 128
    r = max_throughput(m, inp, out)
    b = r["batch"]
    assert b == 256  # the max-sequences cap (the KV cache holds far more)
    # the alternative: per cycle of b requests, b single-prompt prefills and out - 1 decode
    # steps of the whole batch at the mean context
    cycle = b * scalar(m.prefill_time(inp)) + (out - 1) * scalar(
        m.decode_time(b, b * (inp + out / 2))
    )
    one_at_a_time = b * out / cycle
    assert r["output_tokens_per_s"] >= 1.5 * one_at_a_time
    # and it stays below the impossible: decode steps alone, prompts for free
    decode_only = b / scalar(m.decode_time(b, b * (inp + out / 2)))
    assert r["output_tokens_per_s"] < decode_only


@pytest.mark.parametrize(("batch", "prompts"), [(1, 1), (16, 2), (64, 4), (200, 8)])
def test_a_mixed_iteration_reads_the_weights_once(batch: int, prompts: int) -> None:
    m = latency_model()
    inp, out = 128, 128
    mixed = mixed_iteration(m, batch, prompts, inp, out)
    decode = scalar(m.decode_time(batch, batch * (inp + out / 2)))
    separate = decode + prompts * scalar(m.prefill_time(inp))
    assert mixed < separate
    assert mixed > decode  # the prompts are not free
    # the saving is most of the prompts' own weight reads (15 GB at 3.35 TB/s x 0.75 each); not
    # all of them once the batched iteration turns compute-bound
    weights = m.deployment.weight_bytes_per_gpu - 128256 * 4096 * 2  # less the input embedding
    assert separate - mixed > 0.5 * prompts * weights / (3350e9 * 0.75)


def test_mixed_iteration_without_prompts_is_a_decode_step() -> None:
    m = latency_model()
    for batch in (1, 8, 200):
        assert mixed_iteration(m, batch, 0, IN, OUT) == pytest.approx(
            scalar(m.decode_time(batch, batch * (IN + OUT / 2))), rel=1e-12
        )


# --- static batching -----------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 4, 16, 64])
def test_static_batch_first_token_is_the_batched_prefill(batch: int) -> None:
    m = latency_model()
    r = static_batch(m, IN, OUT, batch)
    # every prompt of the batch prefilled in one iteration, plus the request overhead
    overhead = m.profile.request_overhead_ms
    assert r.ttft_ms == pytest.approx(scalar(m.prefill_time(IN, batch)) * 1e3 + overhead, rel=1e-12)
    assert r.tpot_ms == pytest.approx(
        scalar(m.decode_time(batch, batch * (IN + OUT / 2))) * 1e3, rel=1e-12
    )
    assert r.e2e_ms == pytest.approx(r.ttft_ms + (OUT - 1) * r.tpot_ms, rel=1e-12)
    assert r.batch == batch
    if batch > 1:  # one batched prefill is cheaper than `batch` separate ones
        assert r.ttft_ms - overhead < batch * scalar(m.prefill_time(IN)) * 1e3


def test_static_batch_tpot_and_ttft_grow_with_the_batch() -> None:
    m = latency_model()
    results = [static_batch(m, IN, OUT, b) for b in (1, 2, 8, 32, 128, 256)]
    assert all(a.tpot_ms < b.tpot_ms for a, b in itertools.pairwise(results))
    assert all(a.ttft_ms < b.ttft_ms for a, b in itertools.pairwise(results))
    with pytest.raises(PlannerError, match="batch must be at least 1"):
        static_batch(m, IN, OUT, 0)


# --- saturation and monotonicity -----------------------------------------------------------


@pytest.mark.parametrize(("inp", "out"), [(IN, OUT), (128, 128), (2048, 128), (8000, 2)])
def test_saturation_qps_is_the_edge_and_latency_is_monotone_below_it(inp: int, out: int) -> None:
    m = latency_model()
    edge = saturation_qps(m, inp, out)
    assert 0 < edge <= 1.001 * max_throughput(m, inp, out)["requests_per_s"]
    steady_state(m, inp, out, "qps", 0.995 * edge)  # just below: served
    for factor in (1.01, 1.5, 3.0, 100.0):
        with pytest.raises(SaturatedError):
            steady_state(m, inp, out, "qps", factor * edge)
    rates = np.linspace(0.02, 0.99, 40) * edge
    results = [steady_state(m, inp, out, "qps", q) for q in rates]
    for field in ("ttft_ms", "tpot_ms", "batch"):
        values = np.array([getattr(r, field) for r in results])
        assert np.all(np.isfinite(values)), field
        assert np.all(np.diff(values) >= -1e-9 * values[1:]), field
