"""How an engine sized a deployment, in words: where its KV-cache precision came from and how it
gives its KV cache memory (``planner latency``, ``planner simulate`` and ``planner recommend``
print these beside the numbers)."""

from __future__ import annotations

from planner.latency.engines import Engine
from planner.latency.model import Deployment


def kv_cache_source(engine: Engine, asked: str | None, deployment: Deployment) -> str:
    """Where a deployment's KV-cache precision came from, for the user to read."""
    if asked is not None:
        return "--kv-cache"
    if engine.kv_cache_default == "model":
        return f"engine default ({engine.name} keeps the model's 16-bit dtype)"
    weights = deployment.precision.name.upper()
    if deployment.kv_cache == "fp8":
        return f"engine default ({engine.name} follows {weights} weights)"
    return f"engine default ({engine.name}: 16-bit KV cache under {weights} weights)"


def memory_rule_text(engine: Engine, utilization: float) -> str:
    """How ``engine`` gives its KV cache memory, in words."""
    if engine.memory_rule == "free":
        return f"{utilization:g} of the memory left after weights and activations"
    return f"{utilization:g} of device memory for weights, activations and KV cache"
