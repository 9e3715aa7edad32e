"""Hand-computed checks of the roofline. Model shapes are written out from each model's
config.json (the URLs in data/catalog/models.csv) and GPU figures from data/catalog/gpus.csv,
so that a wrong catalog row fails here as well as a wrong formula."""

from __future__ import annotations

import copy
import pickle
import re

import numpy as np
import pytest

from planner.errors import UsageError
from planner.latency.catalog import GIB, UnsupportedError, load_catalog
from planner.latency.model import Deployment, DoesNotFitError, LatencyModel, describe
from planner.latency.profile import FIT_BOUNDS, Profile, load_bundled_profiles

# An ideal engine: full peak for every GEMM size and for attention, full bandwidth for weights
# and KV cache, no overheads.
IDEAL = Profile(
    "ideal",
    compute_eff=1.0,
    gemm_half_tokens=0.0,
    attn_prefill_eff=1.0,
    attn_decode_eff=1.0,
    attn_layer_us=0.0,
    memory_eff=1.0,
    iteration_overhead_ms=0.0,
    request_overhead_ms=0.0,
    allreduce_us=0.0,
    comm_eff=1.0,
)

# GPU figures (data/catalog/gpus.csv)
H100_BW = 3350e9  # bytes/s
H100_BF16 = 989.4e12  # dense FLOP/s
H100_FP8 = 1978.9e12
H100_LINK = 450e9  # bytes/s per direction
H100_MEMORY = 81559 * 2**20  # bytes: the driver's total (memory_mib 81559), 79.65 GiB

# meta-llama/Llama-3.1-8B config.json
L31_8B_LAYERS = 32
L31_8B_HIDDEN = 4096
L31_8B_HEADS = 32
L31_8B_KV_HEADS = 8
L31_8B_HEAD_DIM = 128
L31_8B_INTERMEDIATE = 14336
L31_8B_VOCAB = 128256


def deployment(
    model: str,
    gpu: str = "H100-SXM",
    precision: str = "bf16",
    tp: int = 1,
    kv_bytes: float = 2.0,
    memory_utilization: float = 0.9,
) -> Deployment:
    c = load_catalog()
    return Deployment(
        gpu=c.gpus.get(gpu),
        model=c.models.get(model),
        precision=c.precisions.get(precision),
        tp=tp,
        kv_bytes=kv_bytes,
        memory_utilization=memory_utilization,
    )


def latency_model(
    model: str, profile: Profile = IDEAL, precision: str = "bf16", tp: int = 1
) -> LatencyModel:
    return LatencyModel(deployment(model, precision=precision, tp=tp), profile)


def scalar(value: object) -> float:
    return float(np.asarray(value))


# --- projections ---------------------------------------------------------------------------

# Q and O: hidden x (heads x head_dim) each; K and V: hidden x (kv_heads x head_dim) each
L31_8B_ATTN_PARAMS = 2 * 4096 * 32 * 128 + 2 * 4096 * 8 * 128  # 41,943,040 per layer


def test_attention_params_per_layer_by_hand() -> None:
    assert L31_8B_ATTN_PARAMS == 41_943_040
    assert (
        load_catalog().models.get("llama-3.1-8b").attention_params_per_layer == L31_8B_ATTN_PARAMS
    )


@pytest.mark.parametrize("tp", [1, 2])
def test_projection_flops_and_bytes_per_token(tp: int) -> None:
    m = latency_model("llama-3.1-8b", tp=tp)
    # one multiply-add (2 FLOPs) per weight per token; every weight read once, 2 bytes in bf16;
    # each GPU holds 1/tp of the heads
    flops = 2 * L31_8B_LAYERS * L31_8B_ATTN_PARAMS / tp  # 2,684,354,560 at tp=1
    weight_bytes = L31_8B_LAYERS * L31_8B_ATTN_PARAMS * 2 / tp  # 2,684,354,560 B at tp=1
    assert m.proj_flops_per_token == pytest.approx(flops, rel=1e-9)
    assert m.proj_bytes == pytest.approx(weight_bytes, rel=1e-9)
    one_token = m.cost(1, 1, 0, 1)
    assert scalar(one_token.projections) == pytest.approx(
        max(flops / H100_BF16, weight_bytes / H100_BW), rel=1e-9
    )


def test_tp2_halves_projection_work() -> None:
    one, two = latency_model("llama-3.1-8b", tp=1), latency_model("llama-3.1-8b", tp=2)
    assert two.proj_flops_per_token == pytest.approx(one.proj_flops_per_token / 2, rel=1e-9)
    assert two.proj_bytes == pytest.approx(one.proj_bytes / 2, rel=1e-9)
    assert two.proj_flops_per_token == pytest.approx(1_342_177_280, rel=1e-9)


# --- KV cache ------------------------------------------------------------------------------


def test_kv_bytes_per_token_llama_3_1_8b() -> None:
    # K and V x layers x KV heads x head_dim x 2 bytes
    assert 2 * 32 * 8 * 128 * 2 == 131_072
    assert deployment("llama-3.1-8b").kv_bytes_per_token == pytest.approx(131_072, rel=1e-9)
    fp8_kv = deployment("llama-3.1-8b", kv_bytes=1.0)
    assert fp8_kv.kv_bytes_per_token == pytest.approx(65_536, rel=1e-9)


@pytest.mark.parametrize(
    ("model", "tp", "heads_per_gpu", "kv_bytes_per_token"),
    [
        # llama-2-70b: 80 layers, 8 KV heads, head_dim 128
        ("llama-2-70b", 1, 8, 2 * 80 * 8 * 128 * 2),
        ("llama-2-70b", 2, 4, 2 * 80 * 4 * 128 * 2),
        ("llama-2-70b", 8, 1, 2 * 80 * 1 * 128 * 2),  # 40,960
        # tinyllama: 22 layers, 4 KV heads, head_dim 64; tp=8 > 4 KV heads: each GPU keeps one
        # replicated head, max(1, 4 // 8) = 1
        ("tinyllama-1.1b", 2, 2, 2 * 22 * 2 * 64 * 2),
        ("tinyllama-1.1b", 4, 1, 2 * 22 * 1 * 64 * 2),
        ("tinyllama-1.1b", 8, 1, 2 * 22 * 1 * 64 * 2),
        # qwen2.5-7b: 28 layers, 28 heads, 4 KV heads
        ("qwen2.5-7b", 4, 1, 2 * 28 * 1 * 128 * 2),
    ],
)
def test_kv_heads_split_across_gpus_and_replicate_when_fewer_than_gpus(
    model: str, tp: int, heads_per_gpu: int, kv_bytes_per_token: int
) -> None:
    d = deployment(model, tp=tp)
    assert d.kv_heads_per_gpu == heads_per_gpu == max(1, d.model.kv_heads // tp)
    assert d.kv_bytes_per_token == pytest.approx(kv_bytes_per_token, rel=1e-9)


# --- decode: memory-bound at batch 1 ------------------------------------------------------


def test_decode_at_batch_1_is_weight_reads_over_bandwidth_term_by_term() -> None:
    m = latency_model("llama-3.1-8b")
    context = 1000
    layers, hidden, vocab = L31_8B_LAYERS, L31_8B_HIDDEN, L31_8B_VOCAB
    proj_bytes = layers * L31_8B_ATTN_PARAMS * 2
    mlp_bytes = layers * 3 * hidden * L31_8B_INTERMEDIATE * 2  # gate, up, down
    lm_head_bytes = hidden * vocab * 2
    kv_per_token = 2 * layers * L31_8B_KV_HEADS * L31_8B_HEAD_DIM * 2
    attention_bytes = (context + 1) * kv_per_token  # read the context, write the new token's KV

    # every GEMM's compute term is far below its memory term (checked, not assumed)
    assert 2 * layers * L31_8B_ATTN_PARAMS / H100_BF16 < proj_bytes / H100_BW
    assert 2 * layers * 3 * hidden * L31_8B_INTERMEDIATE / H100_BF16 < mlp_bytes / H100_BW
    assert 2 * hidden * vocab / H100_BF16 < lm_head_bytes / H100_BW
    # attention is its own kernels: its FLOPs (QK^T and AV over context + 1 keys) and its KV
    # reads add up; the FLOPs are a small share
    attn_flops = (context + 1) * 4 * layers * L31_8B_HEADS * L31_8B_HEAD_DIM
    assert attn_flops / H100_BF16 < 0.02 * attention_bytes / H100_BW
    attention = attn_flops / H100_BF16 + attention_bytes / H100_BW

    # decode_time(batch, context) is cost(batch, context + batch, context, batch)
    cost = m.cost(1, context + 1, context, 1)
    assert scalar(cost.projections) == pytest.approx(proj_bytes / H100_BW, rel=1e-9)
    assert scalar(cost.mlp) == pytest.approx(mlp_bytes / H100_BW, rel=1e-9)
    assert scalar(cost.lm_head) == pytest.approx(lm_head_bytes / H100_BW, rel=1e-9)
    assert scalar(cost.attention) == pytest.approx(attention, rel=1e-9)
    assert scalar(cost.communication) == 0
    assert scalar(cost.overhead) == 0
    total = (proj_bytes + mlp_bytes + lm_head_bytes + attention_bytes) / H100_BW
    total += attn_flops / H100_BF16
    assert scalar(m.decode_time(1, context)) == pytest.approx(total, rel=1e-9)
    # 2,684,354,560 + 11,274,289,152 + 1,050,673,152 + 1001 x 131,072 = 15,140,519,936 bytes
    # (the input embedding is not read: one row per token) at 3.35 TB/s: about 4.52 ms, plus
    # 1001 x 524,288 = 524,812,288 attention FLOPs at 989.4 TFLOP/s (0.5 us)
    assert total == pytest.approx(15_140_519_936 / 3350e9 + 524_812_288 / 989.4e12, rel=1e-12)


def test_tp2_splits_every_weight_and_kv_read_of_a_decode_step() -> None:
    m = latency_model("llama-3.1-8b", tp=2)
    context = 1000
    cost = m.cost(1, context + 1, context, 1)
    # each GPU reads half of every matrix, the LM head included, and holds 4 of the 8 KV heads
    proj_bytes = 32 * L31_8B_ATTN_PARAMS * 2 / 2
    mlp_bytes = 32 * 3 * 4096 * 14336 * 2 / 2
    lm_head_bytes = 4096 * 128256 * 2 / 2
    attention_bytes = (context + 1) * 2 * 32 * 4 * 128 * 2
    attention_flops = (context + 1) * 4 * 32 * 16 * 128  # 16 of the 32 query heads
    assert scalar(cost.projections) == pytest.approx(proj_bytes / H100_BW, rel=1e-9)
    assert scalar(cost.mlp) == pytest.approx(mlp_bytes / H100_BW, rel=1e-9)
    assert scalar(cost.lm_head) == pytest.approx(lm_head_bytes / H100_BW, rel=1e-9)
    assert scalar(cost.attention) == pytest.approx(
        attention_flops / H100_BF16 + attention_bytes / H100_BW, rel=1e-9
    )
    # 2048 prompts finishing at once: the LM head is compute-bound, half the vocabulary per GPU
    many = m.cost(2048, 2048, 0, 2048)
    lm_flops = 2048 * 2 * 4096 * 128256 / 2
    assert lm_flops / H100_BF16 > lm_head_bytes / H100_BW
    assert scalar(many.lm_head) == pytest.approx(lm_flops / H100_BF16, rel=1e-9)


def test_profile_efficiencies_and_overhead_scale_decode() -> None:
    ideal = latency_model("llama-3.1-8b")
    real = latency_model(
        "llama-3.1-8b",
        IDEAL.with_params(memory_eff=0.5, attn_decode_eff=0.5, iteration_overhead_ms=3.0),
    )
    # memory-bound: half the bandwidth for weights and for the KV cache doubles every memory
    # term, the attention FLOPs (1001 x 4 x 32 x 32 x 128 at the full 16-bit peak) stay, plus
    # 3 ms per iteration
    attn_compute = 1001 * 4 * 32 * 32 * 128 / H100_BF16
    assert scalar(real.decode_time(1, 1000)) == pytest.approx(
        2 * (scalar(ideal.decode_time(1, 1000)) - attn_compute) + attn_compute + 3e-3, rel=1e-9
    )


def test_attention_efficiencies_and_fixed_cost_scale_only_attention() -> None:
    ideal = latency_model("llama-3.1-8b")
    s = 2048
    pairs = s * (s + 1) / 2
    flops = pairs * 4 * 32 * 32 * 128
    written = s * 131_072  # the prompt's KV written to the cache
    base = ideal.cost(s, pairs, 0, 1)
    assert scalar(base.attention) == pytest.approx(flops / H100_BF16 + written / H100_BW, rel=1e-9)
    slow = latency_model(
        "llama-3.1-8b", IDEAL.with_params(attn_prefill_eff=0.25, attn_decode_eff=0.5)
    ).cost(s, pairs, 0, 1)
    # attention FLOPs at a quarter of the peak, KV traffic at half the bandwidth
    assert scalar(slow.attention) == pytest.approx(
        4 * flops / H100_BF16 + 2 * written / H100_BW, rel=1e-9
    )
    for part in ("projections", "mlp", "lm_head", "communication", "overhead"):
        assert scalar(getattr(slow, part)) == pytest.approx(scalar(getattr(base, part)), rel=1e-12)
    # a fixed 5 us per layer per iteration (32 layers), nothing for an empty iteration
    fixed = latency_model("llama-3.1-8b", IDEAL.with_params(attn_layer_us=5.0))
    assert scalar(fixed.cost(s, pairs, 0, 1).attention) == pytest.approx(
        scalar(base.attention) + 32 * 5e-6, rel=1e-9
    )
    assert scalar(fixed.cost(0, 0, 0, 0).total) == 0


# --- prefill: compute-bound at a long prompt ----------------------------------------------


def test_prefill_of_a_long_prompt_is_compute_bound() -> None:
    m = latency_model("llama-2-7b", precision="fp8")
    s = 4096
    # meta-llama/Llama-2-7b-hf: 32 layers, hidden 4096, 32 heads (and 32 KV heads) x 128,
    # intermediate 11008, vocab 32000
    attn_params = 2 * 4096 * 32 * 128 + 2 * 4096 * 32 * 128  # 67,108,864
    proj_flops_per_token = 2 * 32 * attn_params  # 4,294,967,296
    mlp_flops_per_token = 2 * 32 * 3 * 4096 * 11008
    # prefill_time(s) is cost(s, s(s+1)/2, 0, 1)
    cost = m.cost(s, s * (s + 1) / 2, 0, 1)
    assert scalar(cost.projections) == pytest.approx(s * proj_flops_per_token / H100_FP8, rel=1e-9)
    assert scalar(cost.projections) > 32 * attn_params * 1.0 / H100_BW  # compute > weight reads
    assert scalar(cost.mlp) == pytest.approx(s * mlp_flops_per_token / H100_FP8, rel=1e-9)
    # attention stays in 16-bit: 4 FLOPs per (query, key) pair per head dimension, plus the
    # prompt's K and V written to the 16-bit cache (2 x 32 layers x 32 KV heads x 128 x 2 B)
    attn_flops = s * (s + 1) / 2 * 4 * 32 * 32 * 128
    kv_written = s * 2 * 32 * 32 * 128 * 2
    assert scalar(cost.attention) == pytest.approx(
        attn_flops / 989.4e12 + kv_written / H100_BW, rel=1e-9
    )
    assert attn_flops / 989.4e12 > 5 * kv_written / H100_BW  # mostly compute here too
    assert scalar(m.prefill_time(s)) == pytest.approx(scalar(cost.total), rel=1e-9)


def test_prefill_grows_with_prompt_length() -> None:
    m = latency_model("llama-3.1-8b", Profile("default"))
    times = m.prefill_time(np.array([1, 16, 128, 1024, 4096, 16384]))
    assert np.all(np.diff(times) > 0)


def test_prefill_of_several_prompts_costs_more_than_one() -> None:
    m = latency_model("llama-3.1-8b", Profile("default"))
    assert scalar(m.prefill_time(512, 4)) > scalar(m.prefill_time(512, 1))


def test_decode_grows_with_batch_and_with_context() -> None:
    m = latency_model("llama-3.1-8b", Profile("default"))
    batches = np.array([1, 2, 8, 32, 128, 256])
    assert np.all(np.diff(m.decode_time(batches, batches * 1000)) > 0)
    contexts = np.array([0, 100, 1000, 10_000, 100_000])
    assert np.all(np.diff(m.decode_time(8, contexts)) > 0)


def test_mixed_iteration_without_context_or_decodes_is_a_prefill() -> None:
    m = latency_model("llama-3.1-8b", Profile("default"))
    for chunk in (1, 64, 512, 2048):
        assert scalar(m.mixed_time(chunk, 0, 0, 0)) == pytest.approx(
            scalar(m.prefill_time(chunk)), rel=1e-9
        )
        # a later chunk of the same prompt attends to (and reads) the cached part too
        assert scalar(m.mixed_time(chunk, 4096, 0, 0)) > scalar(m.mixed_time(chunk, 0, 0, 0))
        # and decoding sequences riding along add work
        assert scalar(m.mixed_time(chunk, 0, 16, 16_000)) > scalar(m.mixed_time(chunk, 0, 0, 0))


# Mixtral: rows per expert = tokens x top_k / experts touched, 0 / 0 in an empty iteration
@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b"])
def test_empty_iteration_costs_nothing(model: str) -> None:
    m = latency_model(model, Profile("default", gemm_half_tokens=64.0), tp=2)
    with np.errstate(all="raise"):  # no 0/0 on the way
        total = m.cost(np.array([0.0, 0.0]), 0, 0, 0).total
    np.testing.assert_array_equal(total, [0.0, 0.0])
    assert m.iteration_seconds(0, 0, 0, 0) == 0


# --- tensor parallelism --------------------------------------------------------------------


def test_tensor_parallelism_adds_two_all_reduces_per_layer() -> None:
    profile = IDEAL.with_params(allreduce_us=10.0, comm_eff=0.7)
    tokens = 256
    single = latency_model("llama-3.1-8b", profile, tp=1).cost(tokens, tokens, 0, 1)
    pair = latency_model("llama-3.1-8b", profile, tp=2).cost(tokens, tokens, 0, 1)
    assert scalar(single.communication) == 0
    # 2 all-reduces x 32 layers, each 10 us + a ring all-reduce of the hidden state:
    # 2 (tp - 1) / tp x hidden x 2 bytes per token, over 450 GB/s x 0.7
    per_token = 2 * (2 - 1) / 2 * 4096 * 2
    expected = 2 * 32 * (10e-6 + tokens * per_token / (H100_LINK * 0.7))
    assert scalar(pair.communication) == pytest.approx(expected, rel=1e-9)
    assert scalar(pair.communication) > 0


# --- mixture of experts --------------------------------------------------------------------


def test_moe_experts_touched_by_hand() -> None:
    m = latency_model("mixtral-8x7b", tp=2)
    # 8 experts, top-2: each expert is missed by one token with probability 1 - 2/8
    assert 8 * (1 - (1 - 2 / 8) ** 1) == 2
    assert scalar(m._experts_touched(np.array(1.0))) == pytest.approx(2.0, rel=1e-9)
    assert scalar(m._experts_touched(np.array(4.0))) == pytest.approx(8 * (1 - 0.75**4), rel=1e-9)
    assert scalar(m._experts_touched(np.array(200.0))) == pytest.approx(8.0, rel=1e-9)
    dense = latency_model("llama-3.1-8b")
    assert scalar(dense._experts_touched(np.array(200.0))) == 1


def test_moe_decode_at_batch_1_reads_two_experts_per_layer() -> None:
    m = latency_model("mixtral-8x7b", tp=2)
    # mistralai/Mixtral-8x7B-v0.1: 32 layers, hidden 4096, intermediate 14336 per expert
    one_expert_all_layers = 32 * 3 * 4096 * 14336 * 2 / 2  # bf16, half on each of 2 GPUs
    cost = m.cost(1, 1001, 1000, 1)
    assert scalar(cost.mlp) == pytest.approx(2 * one_expert_all_layers / H100_BW, rel=1e-9)
    # many tokens touch all 8 experts, and compute for their top 2 plus the (replicated) router
    big = m.cost(8192, 8192, 0, 0)
    mlp_flops = 8192 * (2 * 2 * 32 * 3 * 4096 * 14336 / 2 + 2 * 32 * 4096 * 8)
    assert mlp_flops / H100_BF16 > 8 * one_expert_all_layers / H100_BW
    assert scalar(big.mlp) == pytest.approx(mlp_flops / H100_BF16, rel=1e-9)


# --- memory --------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["llama-2-70b", "llama-3.1-70b"])
def test_70b_in_bf16_does_not_fit_one_h100(model: str) -> None:
    d = deployment(model)
    need_gib = (d.weight_bytes_per_gpu + d.activation_reserve_bytes) / GIB
    assert need_gib > 130  # 70B parameters x 2 bytes = 140 GB = 130.4 GiB
    with pytest.raises(DoesNotFitError) as info:
        _ = d.kv_capacity_tokens
    message = str(info.value)
    assert f"needs {need_gib:.1f} GiB per GPU" in message
    # 81,559 MiB = 79.65 GiB x 0.9 = 71.68 GiB
    assert "each GPU has 71.7 GiB (79.6 GiB x 0.9 utilization)" in message
    assert isinstance(info.value, UsageError)


def test_llama_2_70b_needs_weights_and_activations_by_hand() -> None:
    d = deployment("llama-2-70b")
    # 80 x (Q,O 2x8192x8192 + K,V 2x8192x1024 + MLP 3x8192x28672) + 2 x 32000 x 8192 embeddings
    params = 80 * (2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672) + 2 * 32000 * 8192
    assert d.weight_bytes_per_gpu == pytest.approx(params * 2, rel=1e-9)
    # 1.5 GiB framework reserve + 8192 batched tokens x (4 x hidden + 2 x intermediate) x 2 B
    # + FP32 logits of min(256 sequences, 8192 tokens) over the 32,000-token vocabulary
    reserve = 1.5 * GIB + 8192 * (4 * 8192 + 2 * 28672) * 2 + 256 * 32000 * 4
    assert d.activation_reserve_bytes == pytest.approx(reserve, rel=1e-9)
    # at tp=2 the MLP activations split, the logits (gathered on every rank) do not
    two = deployment("llama-2-70b", tp=2)
    reserve_tp2 = 1.5 * GIB + 8192 * (4 * 8192 + 2 * 28672 / 2) * 2 + 256 * 32000 * 4
    assert two.activation_reserve_bytes == pytest.approx(reserve_tp2, rel=1e-9)
    assert two.weight_bytes_per_gpu == pytest.approx(params, rel=1e-9)  # half of params x 2 B


def test_llama_2_70b_in_bf16_fits_two_h100s() -> None:
    d = deployment("llama-2-70b", tp=2)
    assert d.kv_capacity_tokens >= 2048


def test_a_deployment_needs_room_for_2048_tokens_of_kv_cache() -> None:
    # llama-2-70b on 2 x H100: 64.24 GiB of weights and 2.47 GiB of activations per GPU are
    # 83.75% of the 81,559 MiB; at 0.839 utilization about 770 tokens of KV cache (163,840 B
    # each) are left, fewer than 2048 (and its max context is 4096): refused, although some KV
    # cache would fit. At 0.85, about 6,500 tokens: it fits.
    weights = 80 * (2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672) + 2 * 32000 * 8192
    reserve = 1.5 * GIB + 8192 * (4 * 8192 + 28672) * 2 + 256 * 32000 * 4
    free = 0.839 * H100_MEMORY - weights - reserve
    assert 0 < free // (2 * 80 * 4 * 128 * 2) < 2048
    d = deployment("llama-2-70b", tp=2, memory_utilization=0.839)
    assert d.kv_cache_bytes == pytest.approx(free, rel=1e-9)
    with pytest.raises(DoesNotFitError):
        _ = d.kv_capacity_tokens
    fits = deployment("llama-2-70b", tp=2, memory_utilization=0.85).kv_capacity_tokens
    assert fits == int((0.85 * H100_MEMORY - weights - reserve) // 163_840)
    assert 6000 < fits < 7000


def test_llama_3_1_70b_in_bf16_fits_four_h100s() -> None:
    # Its 2 x 128256 x 8192 embeddings (vs 2 x 32000 x 8192 for Llama 2) and the logits of its
    # larger vocabulary cost it KV cache on 2 x H100: per GPU, half the extra embedding bytes
    # plus 256 x (128256 - 32000) x 4 B of logits, over 163,840 B per token
    llama2 = deployment("llama-2-70b", tp=2).kv_capacity_tokens
    llama31 = deployment("llama-3.1-70b", tp=2).kv_capacity_tokens
    extra = 2 * (128256 - 32000) * 8192 * 2 / 2 + 256 * (128256 - 32000) * 4
    assert llama2 - llama31 == pytest.approx(extra / 163_840, abs=1)
    assert llama31 < 25_000
    assert deployment("llama-3.1-70b", tp=4).kv_capacity_tokens > 100_000


def test_llama_3_1_8b_kv_capacity_on_h100_is_about_what_vllm_reports() -> None:
    capacity = deployment("llama-3.1-8b").kv_capacity_tokens
    assert 380_000 <= capacity <= 460_000
    # by hand: 71.68 GiB usable - 14.96 GiB weights - 2.31 GiB reserve, over 131,072 B a token
    weights = (32 * (L31_8B_ATTN_PARAMS + 3 * 4096 * 14336) + 2 * 128256 * 4096) * 2
    reserve = 1.5 * GIB + 8192 * (4 * 4096 + 2 * 14336) * 2 + 256 * 128256 * 4
    assert capacity == int((H100_MEMORY * 0.9 - weights - reserve) // 131_072)
    assert describe(latency_model("llama-3.1-8b"))["kv_cache_tokens"] == capacity


def test_llama_3_1_70b_in_fp8_fits_one_h200() -> None:
    assert deployment("llama-3.1-70b", gpu="H200", precision="fp8").kv_capacity_tokens > 100_000


def test_more_memory_utilization_means_more_kv_cache() -> None:
    low = deployment("llama-3.1-8b", memory_utilization=0.5).kv_capacity_tokens
    high = deployment("llama-3.1-8b", memory_utilization=0.95).kv_capacity_tokens
    assert high > low
    assert high - low == pytest.approx(H100_MEMORY * 0.45 / 131_072, abs=1)


def test_quantized_weights_take_less_memory() -> None:
    bf16 = deployment("llama-3.1-8b").weight_bytes_per_gpu
    awq = deployment("llama-3.1-8b", precision="int4-awq").weight_bytes_per_gpu
    linear = 32 * (L31_8B_ATTN_PARAMS + 3 * 4096 * 14336)
    embeddings = 2 * 128256 * 4096  # stay in 16-bit
    assert awq == pytest.approx(linear * (0.5 + 1 / 64) + embeddings * 2, rel=1e-9)
    assert awq < bf16


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gpu": "A100-80GB", "precision": "fp8"}, "A100-80GB has no FP8 tensor-core peak"),
        ({"gpu": "T4", "precision": "bf16"}, "T4 has no BF16 tensor-core peak"),
        (
            {"tp": 3},
            "tensor parallelism 3 does not divide the 32 attention heads of llama-3.1-8b",
        ),
        ({"tp": 16}, "tensor parallelism 16 is impossible on H100-SXM: 1 to 8 GPUs per node"),
        ({"tp": 0}, "tensor parallelism 0 is impossible on H100-SXM"),
        (
            {"gpu": "A100-80GB", "kv_bytes": 1.0},
            "an FP8 KV cache needs FP8 support, which A100-80GB lacks",
        ),
        ({"kv_bytes": 1.5}, "KV cache bytes per element must be 4 (fp32), 2 (fp16) or 1 (fp8)"),
        ({"memory_utilization": 1.2}, "memory utilization 1.2 must be between 0.1 and 1.0"),
    ],
)
def test_impossible_deployments_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UnsupportedError, match=re.escape(message)) as info:
        deployment("llama-3.1-8b", **kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, UsageError)


def test_tp_must_divide_kv_heads_or_be_divided_by_them() -> None:
    # qwen2.5-7b: 28 heads, 4 KV heads; tp=7 divides the heads but not the KV heads
    with pytest.raises(UnsupportedError, match="and the 4 KV heads of qwen2.5-7b"):
        deployment("qwen2.5-7b", tp=7)


# --- vectorization -------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "tp"), [("llama-3.1-8b", 1), ("mixtral-8x7b", 2)])
def test_decode_time_over_arrays_equals_scalar_calls(model: str, tp: int) -> None:
    m = latency_model(model, Profile("default"), tp=tp)
    rng = np.random.default_rng(7)
    batches = rng.integers(1, 257, size=1000)
    contexts = batches * rng.integers(1, 4096, size=1000)
    vector = m.decode_time(batches, contexts)
    assert vector.shape == (1000,)
    scalars = [
        scalar(m.decode_time(int(b), int(c))) for b, c in zip(batches, contexts, strict=True)
    ]
    np.testing.assert_allclose(vector, scalars, rtol=1e-12)


# --- GEMM efficiency curve -----------------------------------------------------------------


def test_gemm_compute_time_grows_like_n_plus_n_half() -> None:
    half = 512.0
    curved = latency_model("llama-3.1-8b", IDEAL.with_params(gemm_half_tokens=half))
    flat = latency_model("llama-3.1-8b")
    per_row = 2 * L31_8B_LAYERS * L31_8B_ATTN_PARAMS / H100_BF16  # seconds per row at peak
    for n in (512, 1024, 4096, 16384):  # compute-bound: (n + 512) x 2.7 us > 0.8 ms of weights
        projections = scalar(curved.cost(n, n, 0, 1).projections)
        assert projections == pytest.approx((n + half) * per_row, rel=1e-9)
        # the achieved FLOP rate is the peak x n / (n + n_half)
        achieved = n * 2 * L31_8B_LAYERS * L31_8B_ATTN_PARAMS / projections
        assert achieved == pytest.approx(H100_BF16 * n / (n + half), rel=1e-9)
    # at n = n_half the GEMMs run at half the peak: twice the ideal engine's compute time
    at_half = scalar(curved.cost(512, 512, 0, 1).projections)
    assert at_half == pytest.approx(2 * scalar(flat.cost(512, 512, 0, 1).projections), rel=1e-9)
    # equal steps in n cost equal time: linear in n, offset by n_half
    times = [scalar(curved.cost(n, n, 0, 0).mlp) for n in (2048, 4096, 6144)]
    assert times[2] - times[1] == pytest.approx(times[1] - times[0], rel=1e-9)
    assert times[0] == pytest.approx((times[1] - times[0]) * (2048 + half) / 2048, rel=1e-9)
    np.testing.assert_array_equal(curved.gemm_rows([0, 1, 100]), [0, 1 + half, 100 + half])


def test_lm_head_and_moe_experts_use_the_curve() -> None:
    half = 256.0
    profile = IDEAL.with_params(gemm_half_tokens=half)
    dense = latency_model("llama-3.1-8b", profile)
    # 4096 prompts finishing: 4096 LM-head rows over the 128,256-token vocabulary, compute-bound
    lm = scalar(dense.cost(4096, 4096, 0, 4096).lm_head)
    assert lm == pytest.approx((4096 + half) * 2 * 4096 * 128256 / H100_BF16, rel=1e-9)
    assert scalar(dense.cost(4096, 4096, 0, 0).lm_head) == 0
    # Mixtral at tp=2: 8192 tokens touch all 8 experts, each expert's GEMMs get 8192 x 2 / 8
    # rows and pay the curve on those rows; the router does not
    moe = latency_model("mixtral-8x7b", profile, tp=2)
    n = 8192
    rows = n * 2 / 8
    expert_flops = 2 * 32 * 3 * 4096 * 14336 / 2  # per row, one expert, all layers, per GPU
    router_flops = 2 * 32 * 4096 * 8
    expected = ((rows + half) * 8 * expert_flops + n * router_flops) / H100_BF16
    assert scalar(moe.cost(n, n, 0, 0).mlp) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(
    ("precision", "gpu", "scale"),
    [
        ("fp8", "H100-SXM", "fp8_gemm_scale"),
        ("int8", "H100-SXM", "int8_gemm_scale"),
        ("int4-awq", "H100-SXM", "int4_gemm_scale"),
        ("fp4", "B200", "fp4_gemm_scale"),
    ],
)
def test_precision_gemm_scale_slows_only_that_precisions_gemms(
    precision: str, gpu: str, scale: str
) -> None:
    c = load_catalog()
    d = Deployment(
        gpu=c.gpus.get(gpu),
        model=c.models.get("llama-3.1-8b"),
        precision=c.precisions.get(precision),
    )
    base = LatencyModel(d, IDEAL)
    slow = LatencyModel(d, IDEAL.with_params(**{scale: 0.5}))
    n = 65536  # compute-bound in every precision
    fast_cost, slow_cost = base.cost(n, n, 0, n), slow.cost(n, n, 0, n)
    assert scalar(slow_cost.projections) == pytest.approx(
        2 * scalar(fast_cost.projections), rel=1e-9
    )
    assert scalar(slow_cost.mlp) == pytest.approx(2 * scalar(fast_cost.mlp), rel=1e-9)
    # the LM head and attention stay 16-bit: untouched by the precision's scale
    assert scalar(slow_cost.lm_head) == pytest.approx(scalar(fast_cost.lm_head), rel=1e-12)
    assert scalar(slow_cost.attention) == pytest.approx(scalar(fast_cost.attention), rel=1e-12)
    # and the other scales do nothing to this precision
    others = {
        s: 0.5
        for s in ("fp8_gemm_scale", "int8_gemm_scale", "int4_gemm_scale", "fp4_gemm_scale")
        if s != scale
    }
    other = LatencyModel(d, IDEAL.with_params(**others)).cost(n, n, 0, n)
    assert scalar(other.total) == pytest.approx(scalar(fast_cost.total), rel=1e-12)


def test_bf16_ignores_every_precision_scale() -> None:
    scales = {
        s: 0.4 for s in ("fp8_gemm_scale", "int8_gemm_scale", "int4_gemm_scale", "fp4_gemm_scale")
    }
    base = latency_model("llama-3.1-8b")
    scaled = latency_model("llama-3.1-8b", IDEAL.with_params(**scales))
    assert scalar(scaled.prefill_time(4096)) == pytest.approx(
        scalar(base.prefill_time(4096)), rel=1e-12
    )


def test_every_new_profile_parameter_has_fit_bounds_and_bundled_profiles_lie_within() -> None:
    new = {
        "gemm_half_tokens",
        "attn_prefill_eff",
        "attn_decode_eff",
        "attn_layer_us",
        "fp8_gemm_scale",
        "int8_gemm_scale",
        "int4_gemm_scale",
        "fp4_gemm_scale",
    }
    assert new <= set(FIT_BOUNDS)
    # every numeric parameter can be fitted (the link efficiency too, under load: issue 37)
    assert set(Profile("x").params()) == set(FIT_BOUNDS)
    for name, (low, high) in FIT_BOUNDS.items():
        assert low < high, name
        assert low <= getattr(Profile("defaults"), name) <= high, name
    profiles = load_bundled_profiles()
    assert profiles, "no bundled profiles"
    for profile in profiles:
        for name, (low, high) in FIT_BOUNDS.items():
            value = getattr(profile, name)
            assert low - 1e-9 <= value <= high + 1e-9, (profile.name, name, value)


# --- the simulator's scalar path -----------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "precision", "tp"),
    [
        ("llama-3.1-8b", "bf16", 1),
        ("llama-3.1-8b", "fp8", 2),
        ("mixtral-8x7b", "bf16", 2),
        ("mixtral-8x7b", "fp8", 4),
        ("llama-2-70b", "int4-awq", 8),
    ],
)
def test_iteration_seconds_equals_cost_total_on_random_iterations(
    model: str, precision: str, tp: int
) -> None:
    profile = Profile(
        "rough",
        gemm_half_tokens=180.0,
        attn_prefill_eff=0.45,
        attn_decode_eff=0.6,
        attn_layer_us=7.0,
        fp8_gemm_scale=0.8,
        int4_gemm_scale=0.7,
        allreduce_us=12.0,
    )
    m = latency_model(model, profile, precision=precision, tp=tp)
    rng = np.random.default_rng(11)
    n = 400
    tokens = rng.integers(1, 9000, size=n).astype(np.float64)
    tokens[:20] = rng.integers(1, 4, size=20)  # a few tiny iterations (MoE: few experts)
    pairs = tokens * rng.uniform(1, 3000, size=n)
    kv = rng.integers(0, 500_000, size=n).astype(np.float64)
    logits = np.minimum(tokens, rng.integers(0, 300, size=n)).astype(np.float64)
    logits[::7] = 0  # chunks that finish no prompt and carry no decodes
    vector = m.cost(tokens, pairs, kv, logits).total
    scalars = [
        m.iteration_seconds(float(t), float(p), float(k), float(lm))
        for t, p, k, lm in zip(tokens, pairs, kv, logits, strict=True)
    ]
    np.testing.assert_allclose(scalars, vector, rtol=1e-12)
    assert m.iteration_seconds(0, 0, 0, 0) == 0


def test_the_step_formula_pickles_and_copies() -> None:
    # compiled (a native class made only through __init__) or not, a latency model travels
    m = latency_model("mixtral-8x7b", Profile("rough", gemm_half_tokens=180.0), tp=2)
    expected = m.iteration_seconds(300.0, 9e5, 2e5, 200.0)
    for step in (pickle.loads(pickle.dumps(m.step)), copy.deepcopy(m).step, copy.copy(m.step)):
        assert type(step) is type(m.step)
        assert step.constants() == m.step.constants()
        assert step.seconds(300.0, 9e5, 2e5, 200.0) == expected
