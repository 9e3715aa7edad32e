"""planner export --target dynamo: a disaggregated recommendation as NVIDIA Dynamo's
DynamoGraphDeployment, checked against the CRD of the pinned Dynamo version (data/k8s/), strict
too, with its replicas, GPUs, worker flags and header; a single pool is refused."""

from __future__ import annotations

import copy
import itertools
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml  # type: ignore[import-untyped]

from planner.deploy import dynamo
from planner.deploy.plan import DeploymentPlan, deployment_plan
from planner.errors import UsageError
from planner.usecases.export import TARGETS, _notes, export_files
from tests.deploy.crd import version_schema

CRD = (
    Path(__file__).parents[2] / "data" / "k8s" / f"dynamo-{dynamo.DYNAMO_VERSION}-"
    "dynamographdeployments.yaml"
)
MONDAY = 1_793_059_200  # 2026-10-26 00:00 UTC


def pool(role: str, engine: str, **over: Any) -> dict[str, Any]:
    base = {
        "kind": "instance",
        "role": role,
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "p5.48xlarge",
        "gpu": "H100-SXM",
        "gpus_per_instance": 8,
        "model": "llama-3.1-70b",
        "engine": engine,
        "tp": 4 if role == "prefill" else 2,
        "max_seqs": 32 if role == "prefill" else 256,
        "chunked_prefill": role == "decode",
        "kv_cache": "fp8",
        "precision": "fp8",
        "replicas_peak": 3 if role == "prefill" else 5,
        "purchase": "on-demand",
    }
    return {**base, **over}


def result(pools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "winner": {"pools": pools, "p99_ttft_s": 0.55, "p99_tpot_s": 0.03},
        "hourly": {"hour_start": [MONDAY + 3600 * h for h in range(24)], "replicas": [8] * 24},
        "demand": {"source": "chat 2026-10", "p99_input_tokens": 2500, "p99_output_tokens": 700},
        "plan": {"chosen": {"spot_share": 0.0}},
    }


def disagg_plan(engine: str = "vllm") -> DeploymentPlan:
    data = result([pool("prefill", engine), pool("decode", engine)])
    return deployment_plan(21, "2026-11-04 10:00", data)


@cache
def _crd() -> dict[str, Any]:
    crd: dict[str, Any] = yaml.load(CRD.read_text(), Loader=yaml.CSafeLoader)
    return crd


def crd_schema(strict: bool) -> dict[str, Any]:
    crd = _crd()
    assert crd["spec"]["group"] == "nvidia.com"
    assert crd["spec"]["names"]["kind"] == "DynamoGraphDeployment"
    assert dynamo.API_VERSION == "nvidia.com/v1beta1"
    return version_schema(crd, "v1beta1", strict)


def validate(doc: dict[str, Any], strict: bool) -> None:
    jsonschema.validate(doc, crd_schema(strict), cls=jsonschema.Draft7Validator)


def workers(graph: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in graph["spec"]["components"]}


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_the_graph_meets_dynamos_crd_schema(engine: str) -> None:
    graph = dynamo.dynamo_graph(disagg_plan(engine))
    for strict in (False, True):
        validate(graph, strict)
    bad_replicas = copy.deepcopy(graph)
    bad_replicas["spec"]["components"][1]["replicas"] = -1
    with pytest.raises(jsonschema.ValidationError):
        validate(bad_replicas, False)
    bad_type = copy.deepcopy(graph)
    bad_type["spec"]["components"][1]["type"] = "prefil"
    with pytest.raises(jsonschema.ValidationError):
        validate(bad_type, False)
    misplaced = copy.deepcopy(graph)
    misplaced["spec"]["components"][1]["extraPodSpec"] = {"mainContainer": {"image": "x"}}
    validate(misplaced, False)  # an unknown field passes the published schema (pruned) ...
    with pytest.raises(jsonschema.ValidationError):
        validate(misplaced, True)  # ... and fails the strict one


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_each_role_runs_its_peak_replicas_on_tp_gpus(engine: str) -> None:
    plan = disagg_plan(engine)
    graph = dynamo.dynamo_graph(plan)
    assert graph["kind"] == "DynamoGraphDeployment"
    assert graph["spec"]["backendFramework"] == engine
    by_type = workers(graph)
    assert set(by_type) == {"frontend", "prefill", "decode"}
    assert by_type["frontend"]["replicas"] == 1
    for pool_plan in plan.pools:
        component = by_type[pool_plan.role]
        assert (
            component["replicas"]
            == pool_plan.max_replicas
            == (3 if pool_plan.role == "prefill" else 5)
        )
        [main] = component["podTemplate"]["spec"]["containers"]
        assert main["name"] == "main"
        assert main["image"] == dynamo.RUNTIME_IMAGES[engine]
        assert dynamo.DYNAMO_VERSION in main["image"]
        assert main["resources"]["limits"] == {"nvidia.com/gpu": str(pool_plan.tp)}
        assert main["command"] == ["python3", "-m", f"dynamo.{engine}"]
        args = main["args"]
        assert args[args.index("--disaggregation-mode") + 1] == pool_plan.role
        assert dynamo.MODEL_PATH in args
        spec = component["podTemplate"]["spec"]
        assert spec["nodeSelector"]["node.kubernetes.io/instance-type"] == "p5.48xlarge"


def test_the_worker_flags_carry_the_verified_settings() -> None:
    prefill = disagg_plan("vllm").pools[0]
    args = dynamo.worker_args(disagg_plan("vllm"), prefill)
    given = dict(itertools.pairwise(args))
    assert given["--tensor-parallel-size"] == "4"
    assert given["--max-num-seqs"] == "32"
    assert given["--kv-cache-dtype"] == "fp8"
    assert "--no-enable-chunked-prefill" in args
    assert json.loads(given["--kv-transfer-config"])["kv_connector"] == "NixlConnector"
    assert "--host" not in args and "--port" not in args and "serve" not in args
    sglang = dynamo.worker_args(disagg_plan("sglang"), disagg_plan("sglang").pools[1])
    assert sglang[sglang.index("--tp-size") + 1] == "2"
    assert sglang[sglang.index("--disaggregation-transfer-backend") + 1] == "nixl"
    assert "--port" not in sglang
    trt = disagg_plan("trtllm")
    config = yaml.safe_load(dynamo.trtllm_engine_config(trt.pools[0]))
    assert config["tensor_parallel_size"] == 4 and config["max_batch_size"] == 32
    assert config["cache_transceiver_config"] == {"backend": "DEFAULT"}
    assert config["enable_chunked_prefill"] is False


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_the_file_starts_with_the_header_names_dynamo_and_holds_no_secret(engine: str) -> None:
    plan = disagg_plan(engine)
    text = dynamo.render(plan)
    header = [f"# {line}" for line in plan.header()]
    assert text.splitlines()[: len(header)] == header
    assert f"# NVIDIA Dynamo {dynamo.DYNAMO_VERSION}: DynamoGraphDeployment" in text
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    assert docs == dynamo.dynamo_docs(plan)
    assert docs[-1] == dynamo.dynamo_graph(plan)
    kinds = [d["kind"] for d in docs]
    assert kinds == (["ConfigMap"] * 2 if engine == "trtllm" else []) + ["DynamoGraphDeployment"]
    assert not re.search(r"hf_[A-Za-z0-9]{10,}", text)
    for component in docs[-1]["spec"]["components"][1:]:
        [main] = component["podTemplate"]["spec"]["containers"]
        assert main["envFrom"] == [{"secretRef": {"name": "hf-token-secret"}}]
        assert all("value" not in e or e["name"] == "MODEL_PATH" for e in main["env"])


def test_a_single_pool_is_refused_with_the_k8s_target_named() -> None:
    single = deployment_plan(7, "2026-11-04 10:00", result([pool("serve", "vllm")]))
    with pytest.raises(UsageError) as refused:
        dynamo.dynamo_graph(single)
    assert str(refused.value) == (
        "--target dynamo needs a disaggregated recommendation; recommendation #7 has one pool: "
        "use --target k8s"
    )
    with pytest.raises(UsageError, match="use --target k8s"):
        export_files(single, "dynamo")


def test_the_use_case_writes_one_graph_per_model() -> None:
    assert TARGETS[-2:] == ("keda", "dynamo")
    plan = disagg_plan("sglang")
    files = export_files(plan, "dynamo")
    assert list(files) == ["llama-3-1-70b-disagg.dynamo.yaml"]
    [graph] = [d for d in yaml.safe_load_all(files["llama-3-1-70b-disagg.dynamo.yaml"]) if d]
    validate(graph, True)
    assert not any("not generated" in n for n in _notes(plan, "dynamo"))
    assert any("--target dynamo" in n for n in _notes(plan, "k8s"))
