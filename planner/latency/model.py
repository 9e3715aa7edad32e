"""The roofline latency model: how long one GPU (or a tensor-parallel group) takes for one
engine iteration, and what fits in its memory.

Every iteration is described by four numbers, so prefill, decode and mixed (chunked-prefill)
iterations share one formula and whole arrays of iterations are priced in one NumPy pass:

- ``tokens``: tokens through the matmuls (prompt tokens of the prefill chunk + one per decoding
  sequence);
- ``attn_pairs``: (query, key) pairs attention computes: s(s+1)/2 for a fresh prompt of s
  tokens, c for a decoding sequence with c tokens of context;
- ``kv_read``: tokens of KV cache read from memory (the context of decoding sequences and of
  chunked prompts);
- ``logits``: tokens that need the LM head (one per decoding sequence and per finished prompt).

Each operator group costs ``max(FLOPs / (peak x compute_eff), bytes / (bandwidth x memory_eff))``;
the groups add up, plus the profile's per-iteration overhead and, with tensor parallelism, two
all-reduces per layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.latency.catalog import GIB, GPU, ModelSpec, Precision, UnsupportedError
from planner.latency.profile import Profile
from planner.latency.step import StepFormula

Array = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike
HALF_BYTES = 2.0  # activations, embeddings and the LM head of a 16-bit or quantized model
FULL_BYTES = 4.0  # the same in an FP32 model (CPU engines, FP32 checkpoints)
FRAMEWORK_RESERVE_BYTES = 1.5 * GIB  # CUDA context, graphs, communication buffers
DEFAULT_MEMORY_UTILIZATION = 0.9
DEFAULT_MAX_BATCHED_TOKENS = 8192
DEFAULT_MAX_SEQS = 256


class DoesNotFitError(UnsupportedError):
    """The model's weights (and a minimum of KV cache) exceed the GPUs' memory."""


@dataclass(frozen=True)
class Deployment:
    """What runs where: a model in a precision, on ``tp`` GPUs of one type."""

    gpu: GPU
    model: ModelSpec
    precision: Precision
    tp: int = 1
    kv_bytes: float = HALF_BYTES  # per KV element: 4 (FP32), 2 (FP16) or 1 (FP8)
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS
    max_seqs: int = DEFAULT_MAX_SEQS
    # How the engine sizes its KV cache (see planner.latency.engines): "total" gives it
    # utilization x device memory less weights and activations (vLLM); "free" gives it
    # utilization x what is left after weights and activations (TensorRT-LLM); "static" gives
    # weights and KV cache together utilization x device memory, activations living in the
    # rest (SGLang's mem_fraction_static).
    memory_rule: str = "total"
    runtime_reserve_bytes: float = FRAMEWORK_RESERVE_BYTES
    logits_bytes: float = 4.0  # FP32 logits of max_seqs sequences, held while sampling
    # expert parallelism: 1 shards every expert over the TP group (each GPU a 1/tp slice of
    # every expert); ep = tp splits the experts whole over the group's GPUs (vLLM's
    # --enable-expert-parallel). Memory per GPU is the same; time differs (see LatencyModel).
    ep: int = 1

    def __post_init__(self) -> None:
        self.gpu.peak(self.precision.compute_peak)  # raises when the chip lacks the units
        if self.tp < 1 or self.tp > self.gpu.max_gpus_per_node:
            raise UnsupportedError(
                f"tensor parallelism {self.tp} is impossible on {self.gpu.name}: "
                f"1 to {self.gpu.max_gpus_per_node} GPUs per node"
            )
        if self.model.attention_heads % self.tp:
            raise UnsupportedError(
                f"tensor parallelism {self.tp} does not divide the "
                f"{self.model.attention_heads} attention heads of {self.model.name}"
            )
        if self.model.kv_heads % self.tp and self.tp % self.model.kv_heads:
            raise UnsupportedError(
                f"tensor parallelism {self.tp} and the {self.model.kv_heads} KV heads of "
                f"{self.model.name} do not divide one another"
            )
        if not 0.1 <= self.memory_utilization <= 1.0:
            raise UnsupportedError(
                f"memory utilization {self.memory_utilization} must be between 0.1 and 1.0"
            )
        if self.memory_rule not in ("total", "free", "static"):
            raise UnsupportedError(
                f"memory rule must be total, free or static, got {self.memory_rule!r}"
            )
        if self.max_batched_tokens < 1 or self.max_seqs < 1:
            raise UnsupportedError("the batched-token budget and max sequences must be positive")
        if self.kv_bytes not in (1.0, 2.0, 4.0):
            raise UnsupportedError(
                "KV cache bytes per element must be 4 (fp32), 2 (fp16) or 1 (fp8)"
            )
        if self.kv_bytes == 1.0 and "fp8_tflops" not in self.gpu.peak_tflops:
            raise UnsupportedError(
                f"an FP8 KV cache needs FP8 support, which {self.gpu.name} lacks"
            )
        self._check_ep()

    def _check_ep(self) -> None:
        """Expert parallelism: 1, or the TP degree on a mixture of experts whose experts it
        divides."""
        ep, m = self.ep, self.model
        if ep == 1:
            return
        if not m.is_moe:
            raise UnsupportedError(
                f"expert parallelism {ep}: {m.name} is a dense model (no experts to split); "
                "leave --ep at 1"
            )
        if ep != self.tp:
            raise UnsupportedError(
                f"expert parallelism {ep} with tensor parallelism {self.tp}: ep must be 1 "
                f"(experts sharded over the TP group) or equal the TP degree ({self.tp}: the "
                "experts split whole over the group's GPUs, as vLLM's --enable-expert-parallel)"
            )
        if m.experts % ep:
            raise UnsupportedError(
                f"expert parallelism {ep} does not divide the {m.experts} experts of {m.name}"
            )

    # --- sizes -----------------------------------------------------------------------------

    @property
    def kv_cache(self) -> str:
        """The KV-cache precision's name."""
        return {1.0: "fp8", 4.0: "fp32"}.get(self.kv_bytes, "fp16")

    @property
    def activation_bytes(self) -> float:
        """Bytes per activation, embedding and LM-head weight: 4 in an FP32 model, else 2
        (quantized formats keep these in 16-bit)."""
        return activation_bytes(self.precision)

    @property
    def kv_heads_per_gpu(self) -> int:
        """KV heads each GPU holds (replicated when there are fewer KV heads than GPUs)."""
        return max(1, self.model.kv_heads // self.tp)

    @property
    def kv_bytes_per_token(self) -> float:
        """KV cache bytes one token of context takes on each GPU in the layers whose cache
        grows with the context: all layers, or only the global ones of a model with sliding-
        window layers (:attr:`window_kv_bytes_per_token` has the others). MLA caches one latent
        of kv_lora_rank + qk_rope_head_dim per token and layer, not split by TP: every TP rank
        holds the whole latent (as vLLM does)."""
        m = self.model
        if m.is_mla:
            return m.layers * (m.kv_lora_rank + m.qk_rope_head_dim) * self.kv_bytes
        if m.sliding_layers:
            return 2 * m.global_layers * self.kv_heads_per_gpu * m.head_dim * self.kv_bytes
        return 2 * m.layers * self.kv_heads_per_gpu * m.head_dim * self.kv_bytes

    @property
    def window_kv_bytes_per_token(self) -> float:
        """KV cache bytes one token takes on each GPU in the sliding-window (or chunked)
        layers, which hold at most ``sliding_window`` tokens of a sequence (0 without them)."""
        m = self.model
        if not m.sliding_layers:
            return 0.0
        return 2 * m.sliding_layers * self.kv_heads_per_gpu * m.head_dim * self.kv_bytes

    def kv_bytes_for(self, tokens: float, sequences: float = 1) -> float:
        """KV cache bytes of ``tokens`` tokens of context over ``sequences`` sequences, on each
        GPU: the global layers' per token, the windowed layers' at most a window per
        sequence."""
        window = min(tokens, sequences * self.model.sliding_window)
        return tokens * self.kv_bytes_per_token + window * self.window_kv_bytes_per_token

    @property
    def dense_weight_bytes(self) -> float:
        """Bytes per weight of the layers besides the routed experts: the precision's, or
        16-bit when the precision quantizes only the experts (MXFP4 on gpt-oss)."""
        if self.precision.experts_only(self.model):
            return self.activation_bytes
        return self.precision.weight_bytes

    @property
    def weight_bytes_per_gpu(self) -> float:
        """Weights on each GPU: the matmuls and embeddings split over the TP group (with
        expert parallelism each GPU holds experts / ep whole experts: the same bytes), MLA's
        down-projections whole on every rank."""
        m, p = self.model, self.precision
        if p.experts_only(m):
            routed = m.routed_expert_params
            linear = routed * p.weight_bytes + (m.linear_params - routed) * self.activation_bytes
        else:
            linear = m.linear_params * p.weight_bytes
        per_gpu = (linear + m.embedding_params * self.activation_bytes) / self.tp
        if m.is_mla and self.tp > 1:
            replicated = m.layers * m.attention_replicated_params_per_layer
            per_gpu += replicated * self.dense_weight_bytes * (1 - 1 / self.tp)
        return per_gpu

    @property
    def activation_reserve_bytes(self) -> float:
        """What an engine's memory profiling run finds besides weights: the peak activations of
        a forward pass over the whole batched-token budget, the FP32 logits of the largest
        batch while sampling, and the runtime's own memory (CUDA context, graphs, buffers)."""
        m = self.model
        # the MLP's gate/up output for every routed expert (per-expert width for MoE)
        if m.is_moe and (m.shared_experts or m.dense_mlp_layers):
            # the widest layer: routed plus shared experts, or a dense layer's MLP
            shared = m.shared_experts * (m.shared_expert_intermediate_size or m.intermediate_size)
            moe_width = 2 * (m.intermediate_size * m.experts_per_token + shared)
            dense_width = 2 * (m.dense_intermediate_size or m.intermediate_size)
            mlp = max(moe_width, dense_width if m.dense_mlp_layers else 0) / self.tp
        else:
            mlp = 2 * m.intermediate_size * m.experts_per_token / self.tp
        per_token = (4 * m.hidden_size + mlp) * self.activation_bytes
        # every rank gathers the whole vocabulary's logits to sample
        logits = min(self.max_seqs, self.max_batched_tokens) * m.vocab_size * self.logits_bytes
        return self.runtime_reserve_bytes + self.max_batched_tokens * per_token + logits

    @property
    def usable_bytes(self) -> float:
        """Bytes of each GPU the engine lets weights, activations and KV cache use."""
        return self.gpu.memory_bytes * self.memory_utilization

    @property
    def kv_cache_bytes(self) -> float:
        """Bytes of each GPU the KV cache gets (negative: the model does not fit)."""
        rest = self.weight_bytes_per_gpu + self.activation_reserve_bytes
        if self.memory_rule == "free":
            return (self.gpu.memory_bytes - rest) * self.memory_utilization
        if self.memory_rule == "static":
            return self.usable_bytes - self.weight_bytes_per_gpu
        return self.usable_bytes - rest

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV cache that fit beside the weights; raises when the model does not fit.

        With sliding-window layers: the most tokens T that any max_seqs sequences or fewer
        holding T tokens in all fit, ``T x global bytes + min(T, max_seqs x window) x window
        bytes <= free`` (a sequence's windowed layers hold at most a window of it, and the
        sum of min(c_i, window) never exceeds either bound)."""
        free = self.kv_cache_bytes
        if free <= 0:
            tokens = 0
        elif not self.window_kv_bytes_per_token:
            tokens = int(free // self.kv_bytes_per_token)
        else:
            per_token = self.kv_bytes_per_token + self.window_kv_bytes_per_token
            windows = self.max_seqs * self.model.sliding_window
            if free <= per_token * windows:
                tokens = int(free // per_token)
            else:
                tokens = int(
                    (free - windows * self.window_kv_bytes_per_token) // self.kv_bytes_per_token
                )
        if tokens < self.model.max_context and tokens < 2048:
            need = self.weight_bytes_per_gpu + self.activation_reserve_bytes
            least = min(self.model.max_context, 2048)
            raise DoesNotFitError(
                f"{self.model.name} in {self.precision.name} does not fit {self.tp} x "
                f"{self.gpu.name}: it needs {need / GIB:.1f} GiB per GPU for weights and "
                f"activations plus at least {least:,} tokens of KV "
                f"cache ({self.kv_bytes_for(least) / GIB:.1f}"
                f" GiB), and each GPU has {self.usable_bytes / GIB:.1f} GiB "
                f"({self.gpu.memory_bytes / GIB:.1f} GiB x {self.memory_utilization:g} "
                "utilization); use more GPUs (--tp), a smaller precision, a larger GPU or a "
                "higher --gpu-memory-utilization"
            )
        return tokens


@dataclass(frozen=True)
class IterationCost:
    """Seconds of one iteration, split by operator group (arrays, one value per iteration)."""

    projections: Array
    mlp: Array
    attention: Array
    lm_head: Array
    communication: Array
    overhead: Array

    @property
    def total(self) -> Array:
        return (
            self.projections
            + self.mlp
            + self.attention
            + self.lm_head
            + self.communication
            + self.overhead
        )


GEMM_SCALES = {  # which profile parameter scales a precision's GEMM efficiency
    "fp8_tflops": "fp8_gemm_scale",
    "int8_tops": "int8_gemm_scale",
    "fp4_tflops": "fp4_gemm_scale",
}


def activation_bytes(precision: Precision) -> float:
    """Bytes per activation (and embedding and LM-head weight) under ``precision``."""
    return FULL_BYTES if precision.activation == "fp32" else HALF_BYTES


def activation_peak(gpu: GPU, precision: Precision) -> float:
    """The TFLOPS the LM head and attention run at: FP32 in an FP32 model, else the chip's
    16-bit peak (BF16, or FP16 on chips without BF16 units)."""
    if precision.activation == "fp32":
        return gpu.peak("fp32_tflops") / 1e12
    return gpu.peak_tflops.get("bf16_tflops") or gpu.peak_tflops["fp16_tflops"]


def gemm_scale(profile: Profile, precision: Precision) -> float:
    """The profile's efficiency scale for this precision's GEMMs (1 for 16-bit)."""
    if precision.weight_bits == 4 and precision.compute_peak in ("fp16_tflops", "bf16_tflops"):
        return profile.int4_gemm_scale  # weight-only 4-bit: dequantizing kernels (AWQ/GPTQ)
    name = GEMM_SCALES.get(precision.compute_peak)
    return float(getattr(profile, name)) if name else 1.0


def _plain(model: ModelSpec, precision: Precision) -> bool:
    """A model of the pre-2026 kind (every layer alike, no MLA, windows, shared experts or
    dense layers beside experts) in a precision of all its weights: its constants are
    computed as they always were, to the bit."""
    return not (
        model.is_mla
        or model.sliding_layers
        or model.always_active_mlp_params
        or precision.experts_only(model)
    )


def ep_imbalance(ep: int, experts_per_token: int, tokens: int) -> float:
    """How much more routed work the busiest of ``ep`` GPUs gets than the mean, for a batch
    of ``tokens`` tokens each routed to ``experts_per_token`` experts spread uniformly: the
    token-expert assignments a GPU receives are about binomial(n k, 1/ep), and the expected
    largest of ep such counts is about mean + sd x sqrt(2 ln ep), so the factor is
    1 + sqrt(2 ln(ep) (ep - 1) / (n k)). Uniform routing is the optimistic case (real
    routers have hot experts); the batch is the deployment's largest decode batch."""
    if ep <= 1:
        return 1.0
    assignments = max(1, tokens * experts_per_token)
    return 1.0 + math.sqrt(2 * math.log(ep) * (ep - 1) / assignments)


class LatencyModel:
    """Iteration times of one deployment under one calibration profile (vectorized)."""

    def __init__(self, deployment: Deployment, profile: Profile) -> None:
        self.deployment = deployment
        self.profile = profile
        d, m, p, gpu = deployment, deployment.model, deployment.precision, deployment.gpu
        # a TP shard's narrower GEMMs and weight reads reach less of the peak
        shard_eff = 1.0 / (1.0 + profile.tp_eff_loss * math.log2(deployment.tp))
        # asymptotic GEMM FLOP/s; the token-dependent share is applied per call
        self.matmul_flops = (
            gpu.peak(p.compute_peak)
            * profile.compute_eff
            * shard_eff
            * gemm_scale(profile, p)
            / p.dequant_compute_factor
        )
        self.gemm_half_tokens = profile.gemm_half_tokens
        act_peak = activation_peak(gpu, p)
        self.lm_flops = act_peak * 1e12 * profile.compute_eff  # the LM head is not quantized
        self.attn_flops = act_peak * 1e12 * profile.attn_prefill_eff
        self.bandwidth = gpu.bandwidth * profile.memory_eff * shard_eff
        self.kv_bandwidth = gpu.bandwidth * profile.attn_decode_eff
        self.attn_fixed = m.layers * profile.attn_layer_us * 1e-6
        tp = d.tp
        wbytes = p.weight_bytes
        heads = m.attention_heads // tp
        # per GPU, per token
        if _plain(m, p):
            self.proj_flops_per_token = 2 * m.layers * m.attention_params_per_layer / tp
            self.proj_bytes = m.layers * m.attention_params_per_layer * wbytes / tp
        else:
            self.proj_flops_per_token, self.proj_bytes = self._always_active(shard_eff)
        moe_layers = m.moe_layers if m.is_moe else m.layers  # a dense MLP is one "expert"
        self.expert_flops_per_token = 2 * moe_layers * m.expert_params / tp
        self.expert_bytes = moe_layers * m.expert_params * wbytes / tp  # one expert, all layers
        self.router_flops_per_token = 2 * moe_layers * m.router_params_per_layer
        self.ep_imbalance = 1.0
        if d.ep > 1:
            # whole experts: no TP-narrowed GEMMs or weight reads (undo shard_eff, which
            # matmul_flops and bandwidth carry), and the busiest GPU's share of the routed
            # tokens sets the pace
            self.ep_imbalance = ep_imbalance(
                d.ep, m.experts_per_token, min(d.max_seqs, d.max_batched_tokens)
            )
            self.expert_flops_per_token *= shard_eff * self.ep_imbalance
            self.expert_bytes *= shard_eff
        self.attn_flops_per_pair = self._attention_flops_per_pair(heads)
        self.kv_bytes_per_token = d.kv_bytes_per_token
        self.kv_read_bytes_per_token = self.kv_bytes_per_token + self._mla_decode_extra(heads)
        # each decoding sequence reads its windowed layers' KV: at most a window of tokens
        # (priced as a whole window: exact once the context passes it)
        self.window_read_s = d.window_kv_bytes_per_token * m.sliding_window / self.kv_bandwidth
        self.lm_flops_per_token = 2 * m.hidden_size * m.vocab_size / tp
        self.lm_bytes = m.hidden_size * m.vocab_size * d.activation_bytes / tp
        self.allreduces = 2 * m.layers if tp > 1 else 0
        self.allreduce_bytes_per_token = m.hidden_size * d.activation_bytes * 2 * (tp - 1) / tp
        if d.ep > 1:
            # MoE layers dispatch and combine with all-to-alls instead of all-reducing: a
            # token's hidden state goes to its top-k experts, (ep - 1) / ep of them on other
            # GPUs, and each GPU sends for the 1/ep of the batch it holds (its dispatch share),
            # so per batch token each GPU sends hidden x bytes x k x (ep - 1) / ep^2. One op
            # count and the mean bytes per op give the same total as the two kinds
            a2a = m.hidden_size * d.activation_bytes * m.experts_per_token * (d.ep - 1) / d.ep**2
            reduces = m.layers + m.dense_mlp_layers  # attention, and the dense layers' MLPs
            ops = reduces + 2 * m.moe_layers
            self.allreduces = ops
            self.allreduce_bytes_per_token = (
                reduces * self.allreduce_bytes_per_token + 2 * m.moe_layers * a2a
            ) / ops
        # a device that is never split (a CPU row: link 0) moves nothing between devices
        self.link_bandwidth = (gpu.link_gbps * 1e9 * profile.comm_eff) if tp > 1 else np.inf
        # the one step formula (planner.latency.step), on these constants: iteration_seconds here
        # and the simulator's RooflineStepTimes.iteration both call it
        self.step = StepFormula(
            moe=m.is_moe,
            experts=m.experts,
            experts_per_token=m.experts_per_token,
            gemm_half_tokens=self.gemm_half_tokens,
            matmul_flops=self.matmul_flops,
            proj_flops_per_token=self.proj_flops_per_token,
            proj_read_s=self.proj_bytes / self.bandwidth,
            expert_flops_per_token=self.expert_flops_per_token,
            router_flops_per_token=self.router_flops_per_token,
            expert_bytes=self.expert_bytes,
            bandwidth=self.bandwidth,
            expert_read_s=1.0 * self.expert_bytes / self.bandwidth,  # one expert touched
            attn_fixed=self.attn_fixed,
            attn_flops_per_pair=self.attn_flops_per_pair,
            attn_flops=self.attn_flops,
            kv_bytes_per_token=self.kv_read_bytes_per_token,
            kv_bandwidth=self.kv_bandwidth,
            lm_flops_per_token=self.lm_flops_per_token,
            lm_flops=self.lm_flops,
            lm_read_s=self.lm_bytes / self.bandwidth,
            allreduces=self.allreduces,
            allreduce_s=profile.allreduce_us * 1e-6,
            allreduce_bytes_per_token=self.allreduce_bytes_per_token,
            link_bandwidth=self.link_bandwidth,
            overhead_s=profile.iteration_overhead_ms * 1e-3,
            sequence_s=profile.sequence_us * 1e-6 + self.window_read_s,
        )

    def _always_active(self, shard_eff: float) -> tuple[float, float]:
        """FLOPs per token and bytes per GPU of the weights every token passes through besides
        its routed experts: attention projections, dense layers' MLPs and shared experts (TP-
        sharded; MLA's down-projections whole on every rank), plus the sliding-window layers'
        attention (at most a window of keys per token, priced per token at the attention
        peak). With a precision of scope "experts" these run in 16-bit: their FLOPs are scaled
        by the precision's GEMM rate over the 16-bit one, so one matmul rate prices both."""
        d, m, p = self.deployment, self.deployment.model, self.deployment.precision
        tp = d.tp
        replicated = m.layers * m.attention_replicated_params_per_layer
        sharded = m.layers * m.attention_params_per_layer - replicated + m.always_active_mlp_params
        params = sharded / tp + replicated
        flops = 2 * params
        if p.experts_only(m):
            dense_flops = activation_peak(d.gpu, p) * 1e12 * self.profile.compute_eff * shard_eff
            flops *= self.matmul_flops / dense_flops
        window = 4 * m.sliding_layers * (m.attention_heads // tp) * m.head_dim * m.sliding_window
        flops += window * self.matmul_flops / self.attn_flops
        return flops, params * d.dense_weight_bytes

    def _attention_flops_per_pair(self, heads: int) -> float:
        """FLOPs of one (query, key) pair over the global layers on each GPU: QK^T and AV,
        2 x head dim each; MLA in its expanded (prefill) form, QK over the nope + RoPE query
        head and AV over the value head."""
        m = self.deployment.model
        if m.is_mla:
            return 2 * m.layers * heads * (m.head_dim + (m.v_head_dim or m.head_dim))
        return 4 * m.global_layers * heads * m.head_dim

    def _mla_decode_extra(self, heads: int) -> float:
        """MLA decodes in the absorbed form (queries projected into the latent: per head
        2 x (kv_lora_rank + rope) FLOPs for QK and 2 x kv_lora_rank for AV per context token),
        more than the expanded form the pair term prices: the difference per KV token read,
        in bytes that take as long at the KV bandwidth as the FLOPs at the attention peak."""
        m = self.deployment.model
        if not m.is_mla:
            return 0.0
        absorbed = 2 * (m.kv_lora_rank + m.qk_rope_head_dim) + 2 * m.kv_lora_rank
        expanded = 2 * (m.head_dim + (m.v_head_dim or m.head_dim))
        extra = m.layers * heads * (absorbed - expanded)
        return max(0.0, extra * self.kv_bandwidth / self.attn_flops)

    def gemm_rows(self, tokens: ArrayLike) -> Array:
        """Rows a GEMM of ``tokens`` rows costs at the asymptotic rate: with an efficiency of
        n / (n + n_half), FLOPs / efficiency = FLOPs per row x (n + n_half); none for n = 0."""
        n = np.asarray(tokens, dtype=np.float64)
        return np.asarray((n > 0) * (n + self.gemm_half_tokens), dtype=np.float64)

    def _experts_touched(self, tokens: Array) -> Array:
        """Expected distinct experts per layer that ``tokens`` tokens route to (top-k of E)."""
        m = self.deployment.model
        if not m.is_moe:
            return np.ones_like(tokens)
        miss = (1 - m.experts_per_token / m.experts) ** tokens
        return np.asarray(m.experts * (1 - miss), dtype=np.float64)

    def cost(
        self, tokens: ArrayLike, attn_pairs: ArrayLike, kv_read: ArrayLike, logits: ArrayLike
    ) -> IterationCost:
        n = np.asarray(tokens, dtype=np.float64)
        pairs = np.asarray(attn_pairs, dtype=np.float64)
        kv = np.asarray(kv_read, dtype=np.float64)
        lm = np.asarray(logits, dtype=np.float64)
        m = self.deployment.model
        active = (n > 0).astype(np.float64)  # an empty iteration reads no weights

        projections = np.maximum(
            self.gemm_rows(n) * self.proj_flops_per_token / self.matmul_flops,
            active * self.proj_bytes / self.bandwidth,
        )
        touched = self._experts_touched(n)
        # rows each expert's GEMM gets (none in an empty iteration)
        per_expert = n * m.experts_per_token / np.maximum(touched, 1e-12)
        mlp_flops = (
            self.gemm_rows(per_expert) * touched * self.expert_flops_per_token
            + n * self.router_flops_per_token
        )
        mlp = np.maximum(
            mlp_flops / self.matmul_flops,
            active * touched * self.expert_bytes / self.bandwidth,
        )
        # prefill attention is compute bound, decode attention bound by reading the KV cache:
        # separate kernels, so their times add
        attention = (
            active * self.attn_fixed
            + pairs * self.attn_flops_per_pair / self.attn_flops
            + (kv + n) * self.kv_read_bytes_per_token / self.kv_bandwidth
            + lm * self.window_read_s
        )
        lm_head = np.maximum(
            self.gemm_rows(lm) * self.lm_flops_per_token / self.lm_flops,
            (lm > 0) * self.lm_bytes / self.bandwidth,
        )
        communication = self.allreduces * (
            active * self.profile.allreduce_us * 1e-6
            + n * self.allreduce_bytes_per_token / self.link_bandwidth
        )
        overhead = (
            active * self.profile.iteration_overhead_ms * 1e-3
            + lm * self.profile.sequence_us * 1e-6
        )
        return IterationCost(projections, mlp, attention, lm_head, communication, overhead)

    def iteration_seconds(
        self, tokens: float, attn_pairs: float, kv_read: float, logits: float
    ) -> float:
        """``cost(...).total`` for one iteration, in plain floats (tested equal to ``cost``):
        :meth:`planner.latency.step.StepFormula.seconds`, the one step formula, which the
        simulator's ``RooflineStepTimes.iteration`` calls too (compiled with it). Python
        floats in (a NumPy integer is not one), as the simulator passes them."""
        return self.step.seconds(float(tokens), float(attn_pairs), float(kv_read), float(logits))

    # --- the three kinds of iteration --------------------------------------------------------

    def prefill_time(self, prompt_tokens: ArrayLike, prompts: ArrayLike = 1) -> Array:
        """Seconds to prefill ``prompts`` prompts of ``prompt_tokens`` tokens each, in one batch."""
        s = np.asarray(prompt_tokens, dtype=np.float64)
        b = np.asarray(prompts, dtype=np.float64)
        return self.cost(b * s, b * s * (s + 1) / 2, 0.0, b).total

    def decode_time(self, batch: ArrayLike, context_tokens: ArrayLike) -> Array:
        """Seconds of one decode step for ``batch`` sequences holding ``context_tokens`` tokens of
        context in total (the sum over the batch)."""
        b = np.asarray(batch, dtype=np.float64)
        c = np.asarray(context_tokens, dtype=np.float64)
        return self.cost(b, c + b, c, b).total

    def mixed_time(
        self,
        chunk_tokens: ArrayLike,
        chunk_context: ArrayLike,
        decode_batch: ArrayLike,
        decode_context: ArrayLike,
        finishes_prompt: ArrayLike = 1,
    ) -> Array:
        """Seconds of one chunked-prefill iteration: a ``chunk_tokens`` slice of a prompt whose
        first ``chunk_context`` tokens are already cached, plus a decode batch."""
        q = np.asarray(chunk_tokens, dtype=np.float64)
        o = np.asarray(chunk_context, dtype=np.float64)
        b = np.asarray(decode_batch, dtype=np.float64)
        c = np.asarray(decode_context, dtype=np.float64)
        pairs = q * o + q * (q + 1) / 2 + c + b
        return self.cost(
            q + b, pairs, o + c, b + np.asarray(finishes_prompt, dtype=np.float64)
        ).total


def memory_summary(deployment: Deployment) -> dict[str, Any]:
    """Each GPU's memory as the engine splits it, in GiB (2**30 bytes); the KV cache's tokens.
    Raises :class:`DoesNotFitError` when the weights leave no room."""
    d = deployment
    return {
        "device_gib": d.gpu.memory_bytes / GIB,
        "utilization": d.memory_utilization,
        "rule": d.memory_rule,
        "usable_gib": d.usable_bytes / GIB,
        "weights_gib": d.weight_bytes_per_gpu / GIB,
        "activations_gib": d.activation_reserve_bytes / GIB,
        "kv_cache_gib": max(0.0, d.kv_cache_bytes) / GIB,
        "kv_cache_tokens": d.kv_capacity_tokens,
    }


def describe(model: LatencyModel) -> dict[str, Any]:
    """Memory sizes worth showing next to a prediction (per GPU), with the KV cache's
    precision and bytes per token."""
    d = model.deployment
    return {
        **memory_summary(d),
        "kv_cache": d.kv_cache,
        "kv_bytes_per_token_per_gpu": d.kv_bytes_per_token,
    }
