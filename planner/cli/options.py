"""Options several commands share, defined once so their names and help read the same
everywhere (typer reuses an ``Option`` object as a parameter's default)."""

from __future__ import annotations

import typer

from planner.latency.profile import DEFAULT_ENGINE

JSON_OPTION = typer.Option(False, "--json", help="Print the result as JSON.")

ENGINE_OPTION = typer.Option(
    DEFAULT_ENGINE,
    "--engine",
    help="Inference engine: its memory, KV-cache and batch defaults and its calibration "
    "(see `planner catalog engines`).",
)

KV_CACHE_OPTION = typer.Option(
    None,
    "--kv-cache",
    help="KV-cache precision: fp16 or fp8 (default: the engine's; TensorRT-LLM uses FP8 "
    "under FP8 weights).",
)

GPU_MEMORY_UTILIZATION_OPTION = typer.Option(
    None,
    "--gpu-memory-utilization",
    help="Share of GPU memory the engine may use, 0.1 to 1 (default: the engine's).",
)
