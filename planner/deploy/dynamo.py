"""A disaggregated recommendation as NVIDIA Dynamo runs it: one ``DynamoGraphDeployment``
(``nvidia.com/v1beta1``) per model with a Frontend, the prefill workers and the decode workers,
the KV cache handed from prefill to decode over NIXL by Dynamo's workers.

Pinned to Dynamo :data:`DYNAMO_VERSION`: the graph's fields are those of that version's CRD
(bundled in data/k8s/ and checked by the tests), and each worker follows that version's example
graphs (examples/backends/<engine>/deploy/disagg.yaml): a container named ``main`` running
``python3 -m dynamo.<engine>`` with ``--disaggregation-mode prefill|decode``, the engine's own
options, ``nvidia.com/gpu`` limits and the Hugging Face token from a Secret named
``hf-token-secret`` (by name only).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML ships no types

from planner.deploy import kubernetes as k8s
from planner.deploy.engines import (
    SERVE_PORT,
    comment_block,
    sglang_args,
    trtllm_options,
    vllm_args,
)
from planner.deploy.plan import DeploymentPlan, PoolPlan, k8s_name
from planner.errors import UsageError

DYNAMO_VERSION = "1.4.0"
API_VERSION = "nvidia.com/v1beta1"  # the CRD's storage version at 1.4.0 (v1alpha1 still served)
# Dynamo's runtime images per engine (the names its docs and examples use; the 1.4.0 tags were
# not looked up from here). Each carries its own engine build: the flags written are those of the
# engine versions pinned in planner.deploy.engines.
RUNTIME_IMAGES = {
    "vllm": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{DYNAMO_VERSION}",
    "sglang": f"nvcr.io/nvidia/ai-dynamo/sglang-runtime:{DYNAMO_VERSION}",
    "trtllm": f"nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:{DYNAMO_VERSION}",
}
HF_SECRET = "hf-token-secret"  # as Dynamo's examples name it; never written with a value
MODEL_PATH_ENV = "MODEL_PATH"  # the placeholder: each worker's env, expanded by Kubernetes
MODEL_PATH = f"$({MODEL_PATH_ENV})"
VLLM_KV_TRANSFER = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
SGLANG_BOOTSTRAP_PORT = 12345  # the example's --disaggregation-bootstrap-port
TRTLLM_CONFIG_DIR = "/etc/planner"
ROLES = ("prefill", "decode")


def disaggregated_pools(plan: DeploymentPlan, model: str | None = None) -> list[PoolPlan]:
    """The prefill and decode pools of ``model`` (the first disaggregated model when None);
    :class:`UsageError` unless there is at least one of each."""
    roles = [p for p in plan.pools if p.role in ROLES]
    if model is None and roles:
        model = roles[0].model
    pools = [p for p in roles if p.model == model]
    if not {p.role for p in pools} >= set(ROLES):
        has = "one pool" if len(plan.pools) == 1 else "no prefill and decode pools"
        raise UsageError(
            "--target dynamo needs a disaggregated recommendation; recommendation "
            f"#{plan.recommendation_id} has {has}: use --target k8s"
        )
    return pools


def disaggregated_models(plan: DeploymentPlan) -> list[str]:
    """Each model with both a prefill and a decode pool, in plan order."""
    models = list(dict.fromkeys(p.model for p in plan.pools if p.role in ROLES))
    return [m for m in models if {p.role for p in plan.pools if p.model == m} >= set(ROLES)]


def _trtllm_config_map(plan: DeploymentPlan, pool: PoolPlan) -> str:
    return k8s_name(plan_name(plan, pool.model), pool.name, "engine")


def trtllm_engine_config(pool: PoolPlan) -> str:
    """The file ``--extra-engine-args`` reads: the pinned LLM API options plus the sizes the
    search verified and the cache transceiver a disaggregated worker needs."""
    return (
        trtllm_options(pool)
        + f"tensor_parallel_size: {pool.tp}\n"
        + f"max_batch_size: {pool.max_num_seqs}\n"
        + f"max_num_tokens: {pool.max_num_batched_tokens}\n"
        + f"max_seq_len: {pool.max_model_len}\n"
        + "disable_overlap_scheduler: true\n" * (pool.role == "prefill")
        + "cache_transceiver_config:\n  backend: DEFAULT\n"
    )


def _drop(args: list[str], flags: Sequence[str]) -> list[str]:
    """``args`` without each of ``flags`` and its value."""
    out: list[str] = []
    skip = False
    for word in args:
        if skip:
            skip = False
        elif word in flags:
            skip = True
        else:
            out.append(word)
    return out


def worker_args(plan: DeploymentPlan, pool: PoolPlan) -> list[str]:
    """The ``dynamo.<engine>`` options of one worker: the engine's options as the pool was
    verified (without the serving host and port: Dynamo's frontend serves), then the role."""
    if pool.engine == "vllm":
        args = vllm_args(pool, MODEL_PATH)[3:]  # after "vllm serve <model>"
        return [
            "--model", MODEL_PATH,
            *_drop(args, ("--host", "--port")),
            "--disaggregation-mode", pool.role,
            "--kv-transfer-config", VLLM_KV_TRANSFER,
        ]  # fmt: skip
    if pool.engine == "sglang":
        args = sglang_args(pool, MODEL_PATH)[3:]  # after "python3 -m sglang.launch_server"
        return [
            *_drop(args, ("--port",)),
            "--skip-tokenizer-init",
            "--disaggregation-mode", pool.role,
            "--disaggregation-transfer-backend", "nixl",
            "--disaggregation-bootstrap-port", str(SGLANG_BOOTSTRAP_PORT),
        ]  # fmt: skip
    if pool.engine == "trtllm":
        return [
            "--model-path", MODEL_PATH,
            "--served-model-name", pool.model,
            "--extra-engine-args", f"{TRTLLM_CONFIG_DIR}/{pool.role}.yaml",
            "--disaggregation-mode", pool.role,
        ]  # fmt: skip
    raise UsageError(f"--target dynamo: no Dynamo worker for engine {pool.engine!r}")


def plan_name(plan: DeploymentPlan, model: str) -> str:
    return k8s_name(model, "disagg")


def _worker(plan: DeploymentPlan, pool: PoolPlan, name: str) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": RUNTIME_IMAGES[pool.engine],
        "command": ["python3", "-m", f"dynamo.{pool.engine}"],
        "args": worker_args(plan, pool),
        "env": [{"name": MODEL_PATH_ENV, "value": f"{k8s.WEIGHTS_MOUNT}/{pool.model}"}],
        "envFrom": [{"secretRef": {"name": HF_SECRET}}],
        "resources": {"limits": {k8s.gpu_resource(pool): str(pool.tp)}},
    }
    spec: dict[str, Any] = {"containers": [container], **k8s._scheduling(pool)}
    if pool.engine == "trtllm":
        volume = k8s_name(pool.role, "engine-config")
        container["volumeMounts"] = [
            {
                "name": volume,
                "mountPath": f"{TRTLLM_CONFIG_DIR}/{pool.role}.yaml",
                "subPath": f"{pool.role}.yaml",
                "readOnly": True,
            }
        ]
        spec["volumes"] = [{"name": volume, "configMap": {"name": _trtllm_config_map(plan, pool)}}]
    return {
        "name": name,
        "type": pool.role,
        "replicas": pool.max_replicas,
        "podTemplate": {
            "metadata": {"labels": {"planner.dev/pool": pool.name}},
            "spec": spec,
        },
    }


def dynamo_graph(plan: DeploymentPlan, model: str | None = None) -> dict[str, Any]:
    """The ``DynamoGraphDeployment`` of ``model``'s prefill and decode pools (the first
    disaggregated model when None): each role at its peak replicas, ``tp`` GPUs per worker."""
    pools = disaggregated_pools(plan, model)
    first = pools[0]
    engines = {p.engine for p in pools}
    if len(engines) > 1:
        raise UsageError(
            f"--target dynamo: {first.model}'s prefill and decode pools run different engines "
            f"({', '.join(sorted(engines))}); one Dynamo graph runs one"
        )
    components: list[dict[str, Any]] = [
        {
            "name": "Frontend",
            "type": "frontend",
            "replicas": 1,
            "podTemplate": {
                "spec": {"containers": [{"name": "main", "image": RUNTIME_IMAGES[first.engine]}]}
            },
        }
    ]
    for role in ROLES:
        of_role = [p for p in pools if p.role == role]
        for i, pool in enumerate(of_role):
            name = role if len(of_role) == 1 else k8s_name(role, str(i + 1))
            components.append(_worker(plan, pool, name))
    return {
        "apiVersion": API_VERSION,
        "kind": "DynamoGraphDeployment",
        "metadata": {
            "name": plan_name(plan, first.model),
            "labels": {
                "app.kubernetes.io/part-of": "planner",
                "planner.dev/recommendation": str(plan.recommendation_id),
                "planner.dev/engine": first.engine,
            },
        },
        "spec": {"backendFramework": first.engine, "components": components},
    }


def dynamo_docs(plan: DeploymentPlan, model: str | None = None) -> list[dict[str, Any]]:
    """The graph, after the ConfigMaps its TensorRT-LLM workers read (none for vLLM, SGLang)."""
    graph = dynamo_graph(plan, model)
    docs: list[dict[str, Any]] = []
    for pool in disaggregated_pools(plan, model):
        if pool.engine == "trtllm":
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": _trtllm_config_map(plan, pool)},
                    "data": {f"{pool.role}.yaml": trtllm_engine_config(pool)},
                }
            )
    return [*docs, graph]


def header_lines(plan: DeploymentPlan, model: str | None = None) -> list[str]:
    pools = disaggregated_pools(plan, model)
    first = pools[0]
    lines = [
        *plan.header(),
        f"NVIDIA Dynamo {DYNAMO_VERSION}: DynamoGraphDeployment ({API_VERSION}) of {first.model}, "
        f"disaggregated; image {RUNTIME_IMAGES[first.engine]}",
    ]
    for pool in pools:
        lines.append(
            f"{pool.role} pool {pool.name}: {pool.precision} on {pool.gpu} ({pool.provider} "
            f"{pool.region} {pool.instance_type}), TP {pool.tp}, {pool.max_replicas} replicas "
            f"(its peak; the schedule runs {pool.min_replicas} to {pool.max_replicas})"
        )
    lines += [
        "the KV cache moves from prefill to decode over NIXL (Dynamo's workers); the Frontend "
        f"serves the OpenAI API (the engines' own port {SERVE_PORT} is not used)",
        f"placeholders: env {MODEL_PATH_ENV} of each worker (default "
        f"{k8s.WEIGHTS_MOUNT}/{first.model}: mount the weights there, or set a Hugging Face id); "
        f"Secret {HF_SECRET} for gated models, referenced by name only",
    ]
    return lines


def render(plan: DeploymentPlan, model: str | None = None) -> str:
    """The graph (and any ConfigMaps) as one YAML file, the header comments first."""
    docs = dynamo_docs(plan, model)
    body = "---\n".join(
        yaml.dump(doc, Dumper=k8s._Dumper, sort_keys=False, default_flow_style=False, width=100)
        for doc in docs
    )
    return comment_block(header_lines(plan, model)) + "---\n" + body
