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

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.latency.catalog import GIB, GPU, ModelSpec, Precision, UnsupportedError
from planner.latency.profile import Profile

Array = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike
HALF_BYTES = 2.0  # activations, embeddings and the LM head stay in 16-bit
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
    kv_bytes: float = HALF_BYTES  # per KV element: 2 (FP16) or 1 (FP8)
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS

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
        if self.kv_bytes not in (1.0, 2.0):
            raise UnsupportedError("KV cache bytes per element must be 2 (fp16) or 1 (fp8)")
        if self.kv_bytes == 1.0 and "fp8_tflops" not in self.gpu.peak_tflops:
            raise UnsupportedError(
                f"an FP8 KV cache needs FP8 support, which {self.gpu.name} lacks"
            )

    # --- sizes -----------------------------------------------------------------------------

    @property
    def kv_heads_per_gpu(self) -> int:
        """KV heads each GPU holds (replicated when there are fewer KV heads than GPUs)."""
        return max(1, self.model.kv_heads // self.tp)

    @property
    def kv_bytes_per_token(self) -> float:
        """KV cache bytes one token of context takes on each GPU."""
        m = self.model
        return 2 * m.layers * self.kv_heads_per_gpu * m.head_dim * self.kv_bytes

    @property
    def weight_bytes_per_gpu(self) -> float:
        m = self.model
        linear = m.linear_params * self.precision.weight_bytes
        return (linear + m.embedding_params * HALF_BYTES) / self.tp

    @property
    def activation_reserve_bytes(self) -> float:
        """Peak activations of the largest batch, plus the framework's own memory."""
        m = self.model
        per_token = (4 * m.hidden_size + 2 * m.intermediate_size / self.tp) * HALF_BYTES
        return FRAMEWORK_RESERVE_BYTES + self.max_batched_tokens * per_token

    @property
    def usable_bytes(self) -> float:
        return self.gpu.memory_bytes * self.memory_utilization

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV cache that fit beside the weights; raises when the model does not fit."""
        free = self.usable_bytes - self.weight_bytes_per_gpu - self.activation_reserve_bytes
        tokens = int(free // self.kv_bytes_per_token) if free > 0 else 0
        if tokens < self.model.max_context and tokens < 2048:
            need = self.weight_bytes_per_gpu + self.activation_reserve_bytes
            raise DoesNotFitError(
                f"{self.model.name} in {self.precision.name} does not fit {self.tp} x "
                f"{self.gpu.name}: it needs {need / 1e9:.1f} GB per GPU for weights and "
                f"activations plus KV cache, and each GPU has {self.usable_bytes / 1e9:.1f} GB "
                f"({self.gpu.memory_gb:g} GB x {self.memory_utilization:g} utilization); "
                "use more GPUs (--tp), a smaller precision or a larger GPU"
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


class LatencyModel:
    """Iteration times of one deployment under one calibration profile (vectorized)."""

    def __init__(self, deployment: Deployment, profile: Profile) -> None:
        self.deployment = deployment
        self.profile = profile
        d, m, p, gpu = deployment, deployment.model, deployment.precision, deployment.gpu
        self.matmul_flops = (
            gpu.peak(p.compute_peak) * profile.compute_eff / p.dequant_compute_factor
        )
        half_peak = gpu.peak_tflops.get("bf16_tflops") or gpu.peak_tflops["fp16_tflops"]
        self.half_flops = half_peak * 1e12 * profile.compute_eff
        self.bandwidth = gpu.bandwidth * profile.memory_eff
        tp = d.tp
        wbytes = p.weight_bytes
        heads = m.attention_heads // tp
        # per GPU, per token
        self.proj_flops_per_token = 2 * m.layers * m.attention_params_per_layer / tp
        self.proj_bytes = m.layers * m.attention_params_per_layer * wbytes / tp
        self.expert_flops_per_token = 2 * m.layers * m.expert_params / tp
        self.expert_bytes = m.layers * m.expert_params * wbytes / tp  # one expert, all layers
        self.router_flops_per_token = 2 * m.layers * m.router_params_per_layer
        self.attn_flops_per_pair = 4 * m.layers * heads * m.head_dim  # QK^T and AV
        self.kv_bytes_per_token = d.kv_bytes_per_token
        self.lm_flops_per_token = 2 * m.hidden_size * m.vocab_size / tp
        self.lm_bytes = m.hidden_size * m.vocab_size * HALF_BYTES / tp
        self.allreduces = 2 * m.layers if tp > 1 else 0
        self.allreduce_bytes_per_token = m.hidden_size * HALF_BYTES * 2 * (tp - 1) / tp
        self.link_bandwidth = gpu.link_gbps * 1e9 * profile.comm_eff

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
            n * self.proj_flops_per_token / self.matmul_flops,
            active * self.proj_bytes / self.bandwidth,
        )
        mlp_flops = n * (
            m.experts_per_token * self.expert_flops_per_token + self.router_flops_per_token
        )
        mlp_bytes = active * self._experts_touched(n) * self.expert_bytes
        mlp = np.maximum(mlp_flops / self.matmul_flops, mlp_bytes / self.bandwidth)
        attention = np.maximum(
            pairs * self.attn_flops_per_pair / self.half_flops,
            (kv + n) * self.kv_bytes_per_token / self.bandwidth,  # read context, write new KV
        )
        lm_head = np.maximum(
            lm * self.lm_flops_per_token / self.half_flops,
            (lm > 0) * self.lm_bytes / self.bandwidth,
        )
        communication = self.allreduces * (
            active * self.profile.allreduce_us * 1e-6
            + n * self.allreduce_bytes_per_token / self.link_bandwidth
        )
        overhead = active * self.profile.iteration_overhead_ms * 1e-3
        return IterationCost(projections, mlp, attention, lm_head, communication, overhead)

    def iteration_seconds(
        self, tokens: float, attn_pairs: float, kv_read: float, logits: float
    ) -> float:
        """``cost(...).total`` for one iteration, in plain floats: the simulator's hot path,
        where NumPy's per-call overhead would dominate. Tested equal to ``cost``."""
        if tokens <= 0:
            return 0.0
        m = self.deployment.model
        bw = self.bandwidth
        projections = max(
            tokens * self.proj_flops_per_token / self.matmul_flops, self.proj_bytes / bw
        )
        if m.is_moe:
            touched = m.experts * (1 - (1 - m.experts_per_token / m.experts) ** tokens)
        else:
            touched = 1.0
        mlp_flops = tokens * (
            m.experts_per_token * self.expert_flops_per_token + self.router_flops_per_token
        )
        mlp = max(mlp_flops / self.matmul_flops, touched * self.expert_bytes / bw)
        attention = max(
            attn_pairs * self.attn_flops_per_pair / self.half_flops,
            (kv_read + tokens) * self.kv_bytes_per_token / bw,
        )
        lm_head = (
            max(logits * self.lm_flops_per_token / self.half_flops, self.lm_bytes / bw)
            if logits > 0
            else 0.0
        )
        communication = self.allreduces * (
            self.profile.allreduce_us * 1e-6
            + tokens * self.allreduce_bytes_per_token / self.link_bandwidth
        )
        total = projections + mlp + attention + lm_head + communication
        return float(total + self.profile.iteration_overhead_ms * 1e-3)

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


def describe(model: LatencyModel) -> dict[str, Any]:
    """Sizes worth showing next to a prediction."""
    d = model.deployment
    return {
        "weights_gb_per_gpu": d.weight_bytes_per_gpu / 1e9,
        "kv_bytes_per_token_per_gpu": d.kv_bytes_per_token,
        "kv_capacity_tokens": d.kv_capacity_tokens,
        "usable_gb_per_gpu": d.usable_bytes / 1e9,
    }
