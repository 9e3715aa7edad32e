"""Each engine's launch command for a pool, with the engine's own option names and the values the
recommendation was verified with: ``vllm serve``, SGLang's ``python -m sglang.launch_server`` and
TensorRT-LLM's ``trtllm-serve`` (its KV-cache and scheduler settings in the YAML file
``--extra_llm_api_options`` reads).

Each is pinned to an engine version (:data:`ENGINE_VERSIONS`): the option names are those of
that version. vLLM's are checked by vLLM's own argument parser in CI (tests/deploy); SGLang's and
TensorRT-LLM's against the option lists of those versions bundled in data/engines/.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from planner.deploy.plan import DeploymentPlan, PoolPlan

SERVE_PORT = 8000  # every engine is told this port: probes and Services use it
MODEL_PATH = "${MODEL_PATH}"  # a named placeholder: where the weights are mounted
ENGINES = ("vllm", "sglang", "trtllm")


@dataclass(frozen=True)
class EngineVersion:
    version: str
    image: str  # the engine's published container image at that version
    health_path: str  # answers 200 once the model is loaded
    source: str  # where the option names of this version were read


ENGINE_VERSIONS = {
    "vllm": EngineVersion(
        "0.11.0",
        "vllm/vllm-openai:v0.11.0",
        "/health",
        "vLLM's own parser (vllm.entrypoints.openai.cli_args.make_arg_parser), checked in CI",
    ),
    "sglang": EngineVersion(
        "0.5.3",
        "lmsysorg/sglang:v0.5.3-cu126",
        "/health",
        "data/engines/sglang-server-args.txt (python/sglang/srt/server_args.py at v0.5.3)",
    ),
    "trtllm": EngineVersion(
        "1.0.0",
        "nvcr.io/nvidia/tensorrt-llm/release:1.0.0",
        "/health",
        "data/engines/trtllm-serve-options.txt (tensorrt_llm/commands/serve.py at v1.0.0)",
    ),
}

# Weights quantization as each engine names it (bf16/fp16 checkpoints load as they are).
VLLM_QUANTIZATION = {"fp8": "fp8", "int4-awq": "awq", "int4-gptq": "gptq", "int8": "fp8"}
SGLANG_QUANTIZATION = {"fp8": "fp8", "int4-awq": "awq", "int4-gptq": "gptq", "int8": "w8a8_int8"}
SGLANG_KV = {"fp8": "fp8_e4m3", "auto": "auto", "fp16": "auto", "bf16": "auto"}
VLLM_KV = {"fp8": "fp8", "auto": "auto", "fp16": "auto", "bf16": "auto"}


def vllm_args(pool: PoolPlan, model_path: str = MODEL_PATH) -> list[str]:
    args = [
        "vllm", "serve", model_path,
        "--served-model-name", pool.model,
        "--host", "0.0.0.0",
        "--port", str(SERVE_PORT),
        "--tensor-parallel-size", str(pool.tp),
        "--max-num-seqs", str(pool.max_num_seqs),
        "--max-num-batched-tokens", str(pool.max_num_batched_tokens),
        "--max-model-len", str(pool.max_model_len),
        "--kv-cache-dtype", VLLM_KV.get(pool.kv_cache_dtype, "auto"),
        "--enable-chunked-prefill" if pool.chunked_prefill else "--no-enable-chunked-prefill",
        "--enable-prefix-caching",
    ]  # fmt: skip
    if pool.gpu_memory_utilization is not None:
        args += ["--gpu-memory-utilization", f"{pool.gpu_memory_utilization:g}"]
    if pool.precision in VLLM_QUANTIZATION:
        args += ["--quantization", VLLM_QUANTIZATION[pool.precision]]
    return args


def sglang_args(pool: PoolPlan, model_path: str = MODEL_PATH) -> list[str]:
    args = [
        "python3", "-m", "sglang.launch_server",
        "--model-path", model_path,
        "--served-model-name", pool.model,
        "--host", "0.0.0.0",
        "--port", str(SERVE_PORT),
        "--tp-size", str(pool.tp),
        "--max-running-requests", str(pool.max_num_seqs),
        "--context-length", str(pool.max_model_len),
        "--kv-cache-dtype", SGLANG_KV.get(pool.kv_cache_dtype, "auto"),
        # -1 turns chunked prefill off
        "--chunked-prefill-size", str(pool.max_num_batched_tokens if pool.chunked_prefill else -1),
    ]  # fmt: skip
    if pool.gpu_memory_utilization is not None:
        args += ["--mem-fraction-static", f"{pool.gpu_memory_utilization:g}"]
    if pool.precision in SGLANG_QUANTIZATION:
        args += ["--quantization", SGLANG_QUANTIZATION[pool.precision]]
    return args


TRTLLM_OPTIONS_FILE = "/etc/planner/extra-llm-api-options.yaml"


def trtllm_args(pool: PoolPlan, model_path: str = MODEL_PATH) -> list[str]:
    args = [
        "trtllm-serve", model_path,
        "--backend", "pytorch",
        "--host", "0.0.0.0",
        "--port", str(SERVE_PORT),
        "--tp_size", str(pool.tp),
        "--max_batch_size", str(pool.max_num_seqs),
        "--max_num_tokens", str(pool.max_num_batched_tokens),
        "--max_seq_len", str(pool.max_model_len),
        "--extra_llm_api_options", TRTLLM_OPTIONS_FILE,
    ]  # fmt: skip
    if pool.gpu_memory_utilization is not None:
        args += ["--kv_cache_free_gpu_memory_fraction", f"{pool.gpu_memory_utilization:g}"]
    return args


def trtllm_options(pool: PoolPlan) -> str:
    """The LLM API options ``trtllm-serve`` takes from ``--extra_llm_api_options``: the KV-cache
    dtype and block reuse (prefix caching), chunked prefill, the served model's name."""
    kv = "fp8" if pool.kv_cache_dtype == "fp8" else "auto"
    return (
        f"enable_chunked_prefill: {'true' if pool.chunked_prefill else 'false'}\n"
        "kv_cache_config:\n"
        f"  dtype: {kv}\n"
        "  enable_block_reuse: true\n"
    )


ARGS = {"vllm": vllm_args, "sglang": sglang_args, "trtllm": trtllm_args}


def launch_args(pool: PoolPlan, engine: str, model_path: str = MODEL_PATH) -> list[str]:
    """The engine's command line for ``pool`` (``engine``: vllm, sglang or trtllm)."""
    return ARGS[engine](pool, model_path)


def comment_block(lines: list[str], mark: str = "#") -> str:
    return "".join(f"{mark} {line}\n" if line else f"{mark}\n" for line in lines)


def launch_script(plan: DeploymentPlan, pool: PoolPlan, engine: str) -> str:
    """A shell script that starts one replica of ``pool`` with ``engine``: the header names the
    recommendation, its date and assumptions; MODEL_PATH must be set (a named placeholder)."""
    pinned = ENGINE_VERSIONS[engine]
    header = [
        *plan.header(),
        f"pool {pool.name}: {pool.model} {pool.precision} on {pool.gpu} "
        f"({pool.provider} {pool.instance_type}), TP {pool.tp}, role {pool.role}",
        f"{engine} {pinned.version} (image {pinned.image}); option names from {pinned.source}",
        f"replicas: {pool.min_replicas} to {pool.max_replicas}, as the hourly schedule says",
        "MODEL_PATH: where this replica finds the weights (a local folder or a Hugging Face id)",
    ]
    body = " \\\n    ".join(
        shlex.quote(a) if a != MODEL_PATH else '"${MODEL_PATH:?set MODEL_PATH}"'
        for a in launch_args(pool, engine)
    )
    extra = ""
    if engine == "trtllm":
        extra = (
            f"mkdir -p {shlex.quote(TRTLLM_OPTIONS_FILE.rsplit('/', 1)[0])}\n"
            f"cat > {TRTLLM_OPTIONS_FILE} <<'YAML'\n{trtllm_options(pool)}YAML\n"
        )
    return (
        "#!/usr/bin/env bash\n"
        + comment_block(header)
        + "set -euo pipefail\n"
        + extra
        + f"exec {body}\n"
    )
