"""Issue 33, deliverable 4: the 2026 model zoo in the latency model. Each model's parameters
against its publisher's totals; MLA's compressed KV cache; sliding-window layers; shared
experts and dense layers; expert parallelism (memory the same, time not, dense models
refused); MXFP4 on the experts only; the KV transfer of MLA and windowed models; add-model
reading the new Hugging Face configs; ``planner catalog models`` listing them with sources."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from planner.errors import UsageError
from planner.latency.catalog import GIB, ModelSpec, load_catalog, model_from_hf_config
from planner.latency.disagg import kv_transfer_bytes
from planner.latency.model import Deployment, DoesNotFitError, LatencyModel, ep_imbalance
from planner.latency.profile import Profile
from planner.simulate.run import ServingSpec
from tests.e2e.test_cli import run

ZOO = (
    "gpt-oss-20b",
    "gpt-oss-120b",
    "llama-4-scout",
    "llama-4-maverick",
    "deepseek-v3",
    "deepseek-r1",
    "qwen3-8b",
    "qwen3-32b",
    "qwen3-235b-a22b",
    "gemma-3-27b",
    "mistral-small-3",
    "mistral-small-3.1",
)
# a profile with the step formula's every term switched on (overheads, GEMM ramp, TP loss)
PROFILE = Profile("default", tp_eff_loss=0.1, sequence_us=20.0)


def model(name: str) -> ModelSpec:
    return load_catalog().models.get(name)


def deployment(
    name: str,
    gpu: str = "H100-SXM",
    precision: str = "bf16",
    tp: int = 1,
    ep: int = 1,
    kv_bytes: float = 2.0,
) -> Deployment:
    c = load_catalog()
    return Deployment(
        gpu=c.gpus.get(gpu),
        model=c.models.get(name),
        precision=c.precisions.get(precision),
        tp=tp,
        ep=ep,
        kv_bytes=kv_bytes,
    )


# --- parameters against the published totals ------------------------------------------------

# (model, total B, active B, whether the publisher's "active" counts the input embedding)
# gpt-oss's model card counts the unembedding but not the embedding lookup (116.83B total,
# 5.13B active; 20.91B, 3.61B); DeepSeek-V3 report: 671B, 37B; Qwen3: 235B, 22B; Meta: Llama 4
# Maverick 400B / 17B, Scout 109B (with its vision encoder, left out here) / 17B.
PUBLISHED = [
    ("gpt-oss-120b", 116.83, 5.13, False),
    ("gpt-oss-20b", 20.91, 3.61, False),
    ("deepseek-v3", 671.0, 37.0, True),
    ("qwen3-235b-a22b", 235.0, 22.0, True),
    ("llama-4-maverick", 400.0, 17.0, True),
    ("llama-4-scout", 109.0, 17.0, True),
    ("gemma-3-27b", 27.0, 27.0, True),
    ("qwen3-8b", 8.2, 8.2, True),
    ("qwen3-32b", 32.8, 32.8, True),
    ("mistral-small-3", 24.0, 24.0, True),
    ("llama-3.3-70b", 70.6, 70.6, True),  # the 3.1 row's shape
]


@pytest.mark.parametrize(("name", "total", "active", "with_embedding"), PUBLISHED)
def test_parameters_match_the_published_totals(
    name: str, total: float, active: float, with_embedding: bool
) -> None:
    m = model(name)
    counted = m.active_params
    if not with_embedding:
        counted -= m.vocab_size * m.hidden_size  # the input embedding is a lookup
    assert m.total_params / 1e9 == pytest.approx(total, rel=0.03)
    assert counted / 1e9 == pytest.approx(active, rel=0.03)


def test_deepseek_layers_split_into_dense_and_moe() -> None:
    m = model("deepseek-v3")
    assert (m.dense_mlp_layers, m.moe_layers) == (3, 58)
    # 58 MoE layers of 256 routed + 1 shared expert of 3 x 7168 x 2048, 3 dense of 18432
    expert = 3 * 7168 * 2048
    assert m.routed_expert_params == 58 * 256 * expert
    assert m.always_active_mlp_params == 3 * 3 * 7168 * 18432 + 58 * expert
    maverick = model("llama-4-maverick")
    assert (maverick.dense_mlp_layers, maverick.moe_layers) == (24, 24)


def test_llama_33_names_the_same_shaped_31_row_with_its_source() -> None:
    # Llama 3.3 70B is Llama 3.1 70B's architecture; its names stay on that row, under which
    # the published measurements (data/reference) are calibrated
    c = load_catalog()
    for name in ("llama-3.3-70b", "meta-llama/Llama-3.3-70B-Instruct"):
        assert c.models.get(name).name == "llama-3.1-70b"
    assert "Llama-3.3-70B-Instruct/blob/main/config.json" in model("llama-3.3-70b").source


@pytest.mark.parametrize("name", ZOO)
def test_every_new_model_names_its_config_source(name: str) -> None:
    source = model(name).source
    assert source.startswith("https://huggingface.co/") and "config.json" in source


# --- MLA: the compressed KV cache ------------------------------------------------------------


def test_mla_kv_bytes_per_token_are_the_latent_on_every_rank() -> None:
    # 61 layers x (kv_lora_rank 512 + rope 64) x 2 bytes, whatever the TP degree
    for tp in (1, 8):
        assert deployment("deepseek-v3", "H200", "fp8", tp=tp).kv_bytes_per_token == 70_272
    # an FP8 KV cache halves it
    assert deployment("deepseek-v3", "H200", "fp8", tp=8, kv_bytes=1.0).kv_bytes_per_token == (
        61 * 576
    )
    # GQA splits its KV heads over the ranks: Llama 3.1 70B, 2 x 80 x 8 x 128 x 2 at TP 1
    assert deployment("llama-3.1-70b", tp=1).kv_bytes_per_token == 327_680
    assert deployment("llama-3.1-70b", tp=8).kv_bytes_per_token == 327_680 / 8
    # what MHA would cache for DeepSeek-V3: 2 x 61 x 128 heads x (192 + 128) / 2 x 2 bytes
    mha = 2 * 61 * 128 * 160 * 2
    assert mha / 70_272 > 70


def test_deepseek_fits_8_h200_in_fp8_not_8_h100() -> None:
    m = model("deepseek-v3")
    # 671B weights at 1 byte are 625 GiB: more than 8 x H100's usable 8 x 0.9 x 79.6 GiB
    h100 = load_catalog().gpus.get("H100-SXM")
    assert m.total_params / GIB > 8 * 0.9 * h100.memory_gib
    with pytest.raises(DoesNotFitError, match="does not fit 8 x H100"):
        _ = deployment("deepseek-v3", "H100-SXM", "fp8", tp=8).kv_capacity_tokens
    h200 = deployment("deepseek-v3", "H200", "fp8", tp=8)
    assert h200.kv_capacity_tokens > 100_000
    # the latent's 70,272 bytes per token at BF16 leave that many tokens in the KV space
    assert h200.kv_capacity_tokens == int(h200.kv_cache_bytes // 70_272)


def test_mla_weights_keep_the_down_projections_whole_on_every_rank() -> None:
    m = model("deepseek-v3")
    one, eight = (
        deployment("deepseek-v3", "H200", "fp8", tp=1),
        deployment("deepseek-v3", "H200", "fp8", tp=8),
    )
    replicated = m.layers * m.attention_replicated_params_per_layer  # 1 byte each in FP8
    assert eight.weight_bytes_per_gpu == pytest.approx(
        one.weight_bytes_per_gpu / 8 + replicated * 7 / 8, rel=1e-12
    )


def test_mla_decode_prices_the_absorbed_attention() -> None:
    lm = LatencyModel(deployment("deepseek-v3", "H200", "fp8", tp=8), PROFILE)
    # per context token: the latent's bytes plus the absorbed form's extra FLOPs (16 heads a
    # GPU, 2 x 576 + 2 x 512 against the expanded 2 x 192 + 2 x 128) at the attention peak
    extra_flops = 61 * 16 * ((2 * 576 + 2 * 512) - (2 * 192 + 2 * 128))
    assert lm.kv_read_bytes_per_token == pytest.approx(
        70_272 + extra_flops * lm.kv_bandwidth / lm.attn_flops, rel=1e-12
    )
    # and the expanded form per prefill pair
    assert lm.attn_flops_per_pair == 2 * 61 * 16 * (192 + 128)


# --- sliding windows -------------------------------------------------------------------------


def test_windowed_layers_cache_at_most_a_window_per_sequence() -> None:
    d = deployment("gemma-3-27b")
    m = d.model
    # 10 global layers grow with the context; 52 hold at most 1,024 tokens of a sequence
    assert d.kv_bytes_per_token == 2 * 10 * 16 * 128 * 2
    assert d.window_kv_bytes_per_token == 2 * 52 * 16 * 128 * 2
    assert d.kv_bytes_for(100_000, 1) == 100_000 * d.kv_bytes_per_token + 1024 * (
        d.window_kv_bytes_per_token
    )
    # the capacity is safe for max_seqs sequences of any lengths, and larger than the same
    # model's with every layer global
    tokens = d.kv_capacity_tokens
    assert d.kv_bytes_for(tokens, d.max_seqs) <= d.kv_cache_bytes
    unwindowed = replace(d, model=replace(m, sliding_layers=0, sliding_window=0))
    assert tokens >= unwindowed.kv_capacity_tokens
    # gpt-oss's 128-token window: nearly all of its KV space goes to the global layers
    oss = deployment("gpt-oss-120b", precision="mxfp4")
    windows = oss.max_seqs * 128 * oss.window_kv_bytes_per_token
    assert oss.kv_capacity_tokens == int((oss.kv_cache_bytes - windows) // oss.kv_bytes_per_token)


def test_windowed_layers_read_a_window_per_decoding_sequence() -> None:
    d = deployment("gemma-3-27b")
    windowed = LatencyModel(d, PROFILE)
    full = LatencyModel(
        replace(d, model=replace(d.model, sliding_layers=0, sliding_window=0)), PROFILE
    )
    # at a long context the windowed model reads far less per step; at one token per
    # sequence it reads a whole window for each (the bound it prices)
    long = windowed.decode_time(8, 8 * 32_000), full.decode_time(8, 8 * 32_000)
    assert float(long[0]) < 0.7 * float(long[1])
    assert windowed.window_read_s == pytest.approx(
        d.window_kv_bytes_per_token * 1024 / windowed.kv_bandwidth, rel=1e-12
    )


# --- the step formula: one formula for every new model ---------------------------------------


@pytest.mark.parametrize(
    ("name", "gpu", "precision", "tp", "ep"),
    [
        ("deepseek-v3", "H200", "fp8", 8, 1),
        ("deepseek-v3", "H200", "fp8", 8, 8),
        ("gpt-oss-120b", "H100-SXM", "mxfp4", 1, 1),
        ("gpt-oss-120b", "H100-SXM", "mxfp4", 2, 2),
        ("llama-4-maverick", "H200", "fp8", 8, 8),
        ("gemma-3-27b", "H100-SXM", "bf16", 2, 1),
        ("qwen3-235b-a22b", "H100-SXM", "fp8", 4, 4),
    ],
)
def test_iteration_seconds_is_the_vectorized_cost(
    name: str, gpu: str, precision: str, tp: int, ep: int
) -> None:
    lm = LatencyModel(deployment(name, gpu, precision, tp, ep), PROFILE)
    for tokens, pairs, kv, logits in [
        (1, 4001, 4000, 1),
        (64, 64e4, 64e4 - 64, 64),
        (4096, 8e6, 0, 1),
    ]:
        vector = float(np.asarray(lm.cost(tokens, pairs, kv, logits).total))
        assert lm.iteration_seconds(tokens, pairs, kv, logits) == pytest.approx(vector, rel=1e-12)


def test_shared_experts_and_dense_layers_are_always_active() -> None:
    d = deployment("deepseek-v3", "H200", "fp8", tp=8)
    lm = LatencyModel(d, PROFILE)
    m = d.model
    # the projections' weights: attention (down-projections whole), dense MLPs, shared experts
    sharded = m.layers * m.attention_params_per_layer - m.layers * (
        m.attention_replicated_params_per_layer
    )
    params = (sharded + m.always_active_mlp_params) / 8 + m.layers * (
        m.attention_replicated_params_per_layer
    )
    assert lm.proj_bytes == pytest.approx(params * 1.0, rel=1e-12)
    # the routed experts: 58 MoE layers only
    assert lm.expert_bytes == pytest.approx(58 * m.expert_params / 8, rel=1e-12)


# --- expert parallelism ----------------------------------------------------------------------


def test_ep_keeps_memory_and_changes_time() -> None:
    tp = deployment("qwen3-235b-a22b", "H100-SXM", "fp8", tp=8)
    ep = deployment("qwen3-235b-a22b", "H100-SXM", "fp8", tp=8, ep=8)
    assert ep.weight_bytes_per_gpu == tp.weight_bytes_per_gpu
    assert ep.kv_capacity_tokens == tp.kv_capacity_tokens
    a, b = LatencyModel(tp, PROFILE), LatencyModel(ep, PROFILE)
    # whole experts: the TP loss leaves the expert GEMMs, the busiest GPU's excess joins them
    shard_eff = 1 / (1 + 0.1 * math.log2(8))
    imbalance = ep_imbalance(8, 8, min(ep.max_seqs, ep.max_batched_tokens))
    assert b.expert_flops_per_token == pytest.approx(
        a.expert_flops_per_token * shard_eff * imbalance, rel=1e-12
    )
    # all-to-alls: dispatch and combine per MoE layer, all-reduce after attention
    assert b.allreduces == 94 + 2 * 94
    assert float(b.decode_time(64, 64 * 2000)) != pytest.approx(float(a.decode_time(64, 64 * 2000)))
    assert float(b.prefill_time(4000)) != pytest.approx(float(a.prefill_time(4000)))


def test_ep_imbalance_shrinks_with_the_batch() -> None:
    assert ep_imbalance(1, 8, 64) == 1.0
    small, large = ep_imbalance(8, 8, 8), ep_imbalance(8, 8, 8192)
    assert small > large > 1.0
    # mean + sd x sqrt(2 ln ep) of binomial(n k, 1/ep) over the mean
    assert large == pytest.approx(1 + math.sqrt(2 * math.log(8) * 7 / (8192 * 8)), rel=1e-12)


def test_ep_is_refused_where_it_cannot_run() -> None:
    with pytest.raises(UsageError, match="dense model"):
        deployment("llama-3.1-70b", tp=2, ep=2)
    with pytest.raises(UsageError, match="must be 1 .* or equal the TP degree"):
        deployment("qwen3-235b-a22b", "H100-SXM", "fp8", tp=4, ep=2)
    six = replace(model("mixtral-8x7b"), experts=6)
    with pytest.raises(UsageError, match="does not divide the 6 experts"):
        replace(deployment("mixtral-8x7b"), model=six, tp=4, ep=4)


def test_serving_spec_passes_ep_to_its_deployment() -> None:
    spec = ServingSpec(gpu="H200", model="deepseek-v3", precision="fp8", tp=8, ep=8)
    assert spec.deployment().ep == 8
    with pytest.raises(UsageError, match="dense model"):
        ServingSpec(gpu="H100-SXM", model="qwen3-8b", tp=2, ep=2).deployment()


# --- precisions ------------------------------------------------------------------------------


def test_mxfp4_quantizes_only_gpt_oss_experts() -> None:
    mx = load_catalog().precisions.get("mxfp4")
    assert mx.weight_bytes == (4 + 0.25) / 8  # E2M1 plus one E8M0 scale per 32
    d = deployment("gpt-oss-120b", precision="mxfp4")
    m = d.model
    routed = m.routed_expert_params
    expected = routed * mx.weight_bytes + (m.linear_params - routed + m.embedding_params) * 2
    assert d.weight_bytes_per_gpu == pytest.approx(expected, rel=1e-12)
    # about the 61 GiB checkpoint that runs on one 80 GB GPU; BF16 needs two
    assert 55 < d.weight_bytes_per_gpu / GIB < 65
    assert d.kv_capacity_tokens > 100_000
    with pytest.raises(DoesNotFitError):
        _ = deployment("gpt-oss-120b", precision="bf16", tp=1).kv_capacity_tokens
    # a dense model in MXFP4: every linear layer
    dense = deployment("qwen3-8b", precision="mxfp4")
    q = dense.model
    assert dense.weight_bytes_per_gpu == pytest.approx(
        q.linear_params * mx.weight_bytes + q.embedding_params * 2, rel=1e-12
    )


def test_new_models_fit_where_they_are_served() -> None:
    fits = [
        ("llama-4-scout", "H100-SXM", "int4-awq", 1),  # Meta: Scout in INT4 on one H100
        ("llama-4-maverick", "H200", "fp8", 8),
        ("qwen3-235b-a22b", "H100-SXM", "fp8", 4),
        ("gpt-oss-20b", "L4", "mxfp4", 1),  # the 16 GB-class GPU of its model card
        ("gemma-3-27b", "H100-SXM", "bf16", 1),
        ("mistral-small-3", "H100-SXM", "bf16", 1),
        ("qwen3-32b", "H100-SXM", "bf16", 1),
    ]
    for name, gpu, precision, tp in fits:
        assert deployment(name, gpu, precision, tp).kv_capacity_tokens >= 2048, name


# --- the KV transfer of disaggregated serving ------------------------------------------------


def test_mla_transfer_sends_the_whole_latent_to_every_decode_rank() -> None:
    m = model("deepseek-v3")
    moved = kv_transfer_bytes(m, 4000, "bf16", prefill_tp=8, decode_tp=4)
    assert moved.cache_bytes == 4000 * 70_272
    assert moved.bytes == 4 * moved.cache_bytes
    assert moved.receivers == 4 and moved.max_received_bytes == moved.cache_bytes


def test_windowed_transfer_sends_the_last_window_only() -> None:
    m = model("gemma-3-27b")
    moved = kv_transfer_bytes(m, 8000, "bf16")
    per_layer_token = 2 * 16 * 128 * 2
    assert moved.cache_bytes == pytest.approx(
        8000 * 10 * per_layer_token + 1024 * 52 * per_layer_token, rel=1e-12
    )


# --- add-model: the Hugging Face configs of the new architectures ----------------------------

DEEPSEEK_V3_CONFIG: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 129280,
    "max_position_embeddings": 163840,
    "tie_word_embeddings": False,
    "num_nextn_predict_layers": 1,
}
GPT_OSS_120B_CONFIG: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"],
    "model_type": "gpt_oss",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_hidden_layers": 36,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_local_experts": 128,
    "num_experts_per_tok": 4,
    "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "vocab_size": 201088,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}
MAVERICK_CONFIG: dict[str, Any] = {
    "architectures": ["Llama4ForConditionalGeneration"],
    "model_type": "llama4",
    "text_config": {
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_local_experts": 128,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 2,
        "attention_chunk_size": 8192,
        "no_rope_layers": [1, 1, 1, 0] * 12,
        "vocab_size": 202048,
        "max_position_embeddings": 1048576,
    },
    "tie_word_embeddings": False,
}
GEMMA3_27B_CONFIG: dict[str, Any] = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "text_config": {
        "hidden_size": 5376,
        "intermediate_size": 21504,
        "num_hidden_layers": 62,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "head_dim": 128,
        "sliding_window": 1024,
        "sliding_window_pattern": 6,
        "vocab_size": 262208,
        "max_position_embeddings": 131072,
    },
    "tie_word_embeddings": True,
}
SHAPE_FIELDS = (
    "layers",
    "hidden_size",
    "attention_heads",
    "kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "experts",
    "experts_per_token",
    "tied_embeddings",
    "max_context",
    "dense_layers",
    "moe_layer_step",
    "dense_intermediate_size",
    "shared_experts",
    "shared_expert_intermediate_size",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "v_head_dim",
    "sliding_window",
    "sliding_layers",
)


def _shape(m: ModelSpec) -> dict[str, Any]:
    return {f: getattr(m, f) for f in SHAPE_FIELDS}


@pytest.mark.parametrize(
    ("config", "bundled"),
    [
        (DEEPSEEK_V3_CONFIG, "deepseek-v3"),
        (GPT_OSS_120B_CONFIG, "gpt-oss-120b"),
        (MAVERICK_CONFIG, "llama-4-maverick"),
        (GEMMA3_27B_CONFIG, "gemma-3-27b"),
    ],
)
def test_a_config_reads_as_the_bundled_row(config: dict[str, Any], bundled: str) -> None:
    read = model_from_hf_config(config, "config.json", "mine", (), "test")
    assert _shape(read) == _shape(model(bundled))
    assert read.total_params == model(bundled).total_params


def test_add_model_writes_a_deepseek_config_into_the_user_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from planner.usecases.catalog import add_model

    monkeypatch.setenv("PLANNER_HOME", str(tmp_path / "home"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(DEEPSEEK_V3_CONFIG), encoding="utf-8")
    added = add_model(path, "my-deepseek")
    reread = load_catalog().models.get("my-deepseek")
    assert reread.is_mla and reread.kv_lora_rank == 512 and reread.dense_layers == 3
    assert reread.total_params == added.model.total_params == model("deepseek-v3").total_params


def test_a_config_with_middle_dense_layers_is_refused() -> None:
    config = {
        **DEEPSEEK_V3_CONFIG,
        "architectures": ["Qwen3MoeForCausalLM"],
        "mlp_only_layers": [5],
    }
    with pytest.raises(UsageError, match="mlp_only_layers"):
        model_from_hf_config(config, "config.json", "mine", (), "test")


# --- planner catalog models ------------------------------------------------------------------


def test_catalog_models_lists_the_zoo_with_sources(tmp_path: Path) -> None:
    result = run(tmp_path / "home", "catalog", "models", "--json")
    assert result.returncode == 0, result.stderr
    listed = {m["name"]: m for m in json.loads(result.stdout)}
    for name in ZOO:
        assert listed[name]["source"].startswith("https://huggingface.co/"), name
    deepseek = listed["deepseek-v3"]
    assert deepseek["attention"] == "MLA 512+64" and deepseek["ep_ready"] is True
    assert deepseek["kv_lora_rank"] == 512 and deepseek["shared_experts"] == 1
    assert listed["qwen3-8b"]["ep_ready"] is False
    assert listed["gpt-oss-120b"]["sliding_layers"] == 18


# --- the search: EP beside TP in the candidate space -----------------------------------------


def test_the_candidate_space_tries_ep_for_moe_models_only() -> None:
    from planner.recommend.inputs import Constraints
    from planner.recommend.space import enumerate_candidates
    from tests.unit.test_recommend_screen import point

    prices = [point("p5.48xlarge", "H100-SXM", 8, 98.0)]

    def space(name: str) -> set[tuple[int, int]]:
        constraints = Constraints(
            model=name, precisions=("fp8",), max_seqs=(128,), chunked_prefill=(True,)
        )
        candidates, _ = enumerate_candidates(prices, constraints)
        # every candidate's deployment runs (ServingSpec carries ep into Deployment)
        for c in candidates:
            assert c.serving(constraints).deployment().ep == c.ep
        return {(c.tp, c.ep) for c in candidates}

    moe = space("qwen3-235b-a22b")  # fits 4 or 8 H100s in FP8
    assert {(4, 1), (4, 4), (8, 1), (8, 8)} <= moe
    assert all(ep in (1, tp) for tp, ep in moe)
    assert {ep for _, ep in space("qwen3-8b")} == {1}
