"""Options several commands share, defined once so their names and help read the same
everywhere (typer reuses an ``Option`` object as a parameter's default).

Also the library constants the commands' signatures show (defaults, bounds, choices): Typer
reads every signature to build ``--help``, so these are copied here rather than imported
from modules that pull in pandas, SQLAlchemy or httpx; tests/e2e/test_cli_startup.py pins each
copy equal to the library's value.
"""

from __future__ import annotations

import typer

from planner.latency.profile import DEFAULT_ENGINE

# planner.ingest.formats
INGEST_FORMAT_NAMES: tuple[str, ...] = ("azure-llm", "mooncake", "burstgpt", "generic")
INGEST_FIELDS: tuple[str, ...] = (
    "arrival",
    "input_tokens",
    "output_tokens",
    "model",
    "cached_tokens",
    "prefix_block_ids",
    "priority_class",
    "ttft_ms",
    "e2e_ms",
    "status",
)

# planner.ingest.pipeline.DEFAULT_PREFIX_BLOCK_TOKENS
INGEST_PREFIX_BLOCK_TOKENS = 512

# planner.latency.predict
LATENCY_SIM_REQUESTS = 10_000
# planner.simulate.inputs and planner.simulate.fleet
SIMULATE_MAX_REQUESTS = 10_000_000
SIMULATE_MAX_SEQS = 65_536
SIMULATE_MAX_BATCHED_TOKENS = 1 << 24
SIMULATE_ROUTERS: tuple[str, ...] = (
    "round-robin",
    "least-requests",
    "least-tokens",
    "prefix-affinity",
)
# planner.latency.engines.SCHEDULERS
TRTLLM_SCHEDULERS: tuple[str, ...] = ("guaranteed_no_evict", "max_utilization")
# planner.simulate.engine
SIMULATE_ADMISSION_POLICIES: tuple[str, ...] = ("preempt", "no_evict")
SIMULATE_VLLM_WATERMARK = 0.01
# planner.recommend.inputs and planner.recommend.limits
RECOMMEND_PRECISIONS: tuple[str, ...] = ("bf16", "fp16", "fp8", "int8", "int4-awq")
RECOMMEND_MAX_REQUESTS = 1_000_000
# pricing.sheets
PRICE_SHEET_MAX_ROWS = 100_000
PRICE_SHEET_MAX_COLUMNS = 64
PRICE_SHEET_MAX_CELL_CHARS = 1_000
PRICE_SHEET_MAX_XLSX_PART_BYTES = 64 * 1024 * 1024
PRICE_MAX_RATIO = 10.0
PRICE_MIN_USD_PER_HOUR = 0.0001
# planner.bench.client, planner.bench.loadgen and planner.bench.server
BENCH_DEFAULT_URL = "http://127.0.0.1:8000"
BENCH_PATTERNS: tuple[str, ...] = ("sync", "concurrency", "rate", "poisson", "replay")
BENCH_DEFAULT_HOST = "127.0.0.1"
BENCH_DEFAULT_PORT = 8000

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

SCHEDULER_OPTION = typer.Option(
    None,
    "--scheduler",
    help=f"TensorRT-LLM's capacity scheduler policy (--engine trtllm only): "
    f"{' or '.join(TRTLLM_SCHEDULERS)} (default: guaranteed_no_evict, TensorRT-LLM's; it "
    "reserves each request's whole output; max_utilization packs requests while the KV cache "
    "they hold fits and pauses the newest when it runs out, as MLPerf submissions run).",
)

# planner.ingest.TimeKind's and TimeUnit's values
TIME_KINDS = ("datetime", "relative", "epoch")
TIME_UNITS = ("s", "ms", "us", "ns")
