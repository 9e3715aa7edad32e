"""The one step-time formula: seconds of one engine iteration, in plain floats.

:class:`StepFormula` holds a deployment's per-iteration constants (worked out by
:class:`planner.latency.model.LatencyModel`) and prices an iteration from the four numbers that
describe it (tokens, attention pairs, KV tokens read, logits). ``LatencyModel.iteration_seconds``
and the simulator's ``RooflineStepTimes.iteration`` both call it; the vectorized
``LatencyModel.cost`` is the same formula over NumPy arrays (tested equal to 1e-12).

Plain floats and one final class, no NumPy: NumPy's per-call overhead would dominate the
simulator's hot path, and mypyc compiles this module together with the replica loop (setup.py:
a copy stamped with this file's SHA-256 becomes ``planner.latency._step_native``, which the
compiled ``planner.simulate._engine_native`` calls natively). This module switches to the
compiled copy only when the stamp matches its own source, so an edited ``step.py`` is never
shadowed by an older build (and the compiled simulator then stands down too).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any, Final, SupportsFloat, final

from planner.common.native import compiled_twin


@final
class StepFormula:
    """Seconds of one iteration of one deployment under one calibration profile.

    Every constant is made a float (from an int, a NumPy number, anything ``float`` takes): an
    int the formula meets is converted exactly as Python's mixed arithmetic converts it, so the
    result is the same float whichever build runs it."""

    def __init__(
        self,
        *,
        moe: bool,
        experts: SupportsFloat,
        experts_per_token: SupportsFloat,
        gemm_half_tokens: SupportsFloat,
        matmul_flops: SupportsFloat,
        proj_flops_per_token: SupportsFloat,
        proj_read_s: SupportsFloat,
        expert_flops_per_token: SupportsFloat,
        router_flops_per_token: SupportsFloat,
        expert_bytes: SupportsFloat,
        bandwidth: SupportsFloat,
        expert_read_s: SupportsFloat,
        attn_fixed: SupportsFloat,
        attn_flops_per_pair: SupportsFloat,
        attn_flops: SupportsFloat,
        kv_bytes_per_token: SupportsFloat,
        kv_bandwidth: SupportsFloat,
        lm_flops_per_token: SupportsFloat,
        lm_flops: SupportsFloat,
        lm_read_s: SupportsFloat,
        allreduces: SupportsFloat,
        allreduce_s: SupportsFloat,
        allreduce_bytes_per_token: SupportsFloat,
        link_bandwidth: SupportsFloat,
        overhead_s: SupportsFloat,
        sequence_s: SupportsFloat = 0.0,
    ) -> None:
        self.moe = moe
        self.experts = float(experts)
        self.experts_per_token = float(experts_per_token)
        self.gemm_half_tokens = float(gemm_half_tokens)
        self.matmul_flops = float(matmul_flops)
        self.proj_flops_per_token = float(proj_flops_per_token)
        self.proj_read_s = float(proj_read_s)
        self.expert_flops_per_token = float(expert_flops_per_token)
        self.router_flops_per_token = float(router_flops_per_token)
        self.expert_bytes = float(expert_bytes)
        self.bandwidth = float(bandwidth)
        self.expert_read_s = float(expert_read_s)
        self.attn_fixed = float(attn_fixed)
        self.attn_flops_per_pair = float(attn_flops_per_pair)
        self.attn_flops = float(attn_flops)
        self.kv_bytes_per_token = float(kv_bytes_per_token)
        self.kv_bandwidth = float(kv_bandwidth)
        self.lm_flops_per_token = float(lm_flops_per_token)
        self.lm_flops = float(lm_flops)
        self.lm_read_s = float(lm_read_s)
        self.allreduces = float(allreduces)
        self.allreduce_s = float(allreduce_s)
        self.allreduce_bytes_per_token = float(allreduce_bytes_per_token)
        self.link_bandwidth = float(link_bandwidth)
        self.overhead_s = float(overhead_s)
        self.sequence_s = float(sequence_s)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled and copied as its constants (a compiled instance is made only by __init__)."""
        return (_rebuild, (self.constants(),))

    def constants(self) -> dict[str, Any]:
        """The keyword arguments that make this formula."""
        return {name: getattr(self, name) for name in CONSTANTS}

    def seconds(self, tokens: float, attn_pairs: float, kv_read: float, logits: float) -> float:
        """``LatencyModel.cost(...).total`` of one iteration (0.0 when it has no tokens).

        Written for speed: ``max(a, b)`` as ``b if b > a else a``, constants precomputed, and a
        dense model's one touched expert (a factor of 1.0) left out; otherwise the same
        operations in the same order as ``cost``."""
        if tokens <= 0:
            return 0.0
        half = self.gemm_half_tokens
        matmul_flops = self.matmul_flops
        projections = (tokens + half) * self.proj_flops_per_token / matmul_flops
        weights_s = self.proj_read_s
        if weights_s > projections:
            projections = weights_s
        if self.moe:
            experts = self.experts
            per_token = self.experts_per_token
            touched: float = experts * (1 - (1 - per_token / experts) ** tokens)
            # rows per expert (a vanishing batch touches k experts with about one row each)
            per_expert = tokens * per_token / touched if touched > 0 else 1.0
            mlp_flops = (per_expert + half) * touched * self.expert_flops_per_token + (
                tokens * self.router_flops_per_token
            )
            mlp = mlp_flops / matmul_flops
            weights_s = touched * self.expert_bytes / self.bandwidth
        else:
            # one expert touched: x * 1.0 and x / 1.0 are x exactly
            per_expert = tokens * self.experts_per_token
            mlp_flops = (per_expert + half) * self.expert_flops_per_token + (
                tokens * self.router_flops_per_token
            )
            mlp = mlp_flops / matmul_flops
            weights_s = self.expert_read_s
        if weights_s > mlp:
            mlp = weights_s
        attention = (
            self.attn_fixed
            + attn_pairs * self.attn_flops_per_pair / self.attn_flops
            + (kv_read + tokens) * self.kv_bytes_per_token / self.kv_bandwidth
        )
        if logits > 0:
            lm_head = (logits + half) * self.lm_flops_per_token / self.lm_flops
            weights_s = self.lm_read_s
            if weights_s > lm_head:
                lm_head = weights_s
        else:
            lm_head = 0.0
        total = projections + mlp + attention + lm_head
        if self.allreduces:  # else the communication term is 0.0, and total + 0.0 is total
            total += self.allreduces * (
                self.allreduce_s + tokens * self.allreduce_bytes_per_token / self.link_bandwidth
            )
        # host work per sequence in the batch (sampling, scheduling, detokenizing, streaming)
        return total + self.overhead_s + logits * self.sequence_s


#: StepFormula's constants, in the order of its __init__
CONSTANTS: Final = (
    "moe",
    "experts",
    "experts_per_token",
    "gemm_half_tokens",
    "matmul_flops",
    "proj_flops_per_token",
    "proj_read_s",
    "expert_flops_per_token",
    "router_flops_per_token",
    "expert_bytes",
    "bandwidth",
    "expert_read_s",
    "attn_fixed",
    "attn_flops_per_pair",
    "attn_flops",
    "kv_bytes_per_token",
    "kv_bandwidth",
    "lm_flops_per_token",
    "lm_flops",
    "lm_read_s",
    "allreduces",
    "allreduce_s",
    "allreduce_bytes_per_token",
    "link_bandwidth",
    "overhead_s",
    "sequence_s",
)


def _rebuild(constants: dict[str, Any]) -> StepFormula:
    return StepFormula(**constants)


#: Which build of this module runs: "compiled" (mypyc, see setup.py) or "pure Python".
IMPLEMENTATION = "pure Python"


def _compiled_twin(source: Path) -> ModuleType | None:
    """The mypyc build of this module's ``source``, or None (see planner.common.native)."""
    return compiled_twin("planner.latency._step_native", source, "step formula")


# Only the module under its own name switches: the compiled copy runs this too, under its own.
if __name__ == "planner.latency.step" and (_twin := _compiled_twin(Path(__file__))) is not None:
    globals().update({k: v for k, v in vars(_twin).items() if not k.startswith("__")})
    IMPLEMENTATION = "compiled"
