"""The Kubernetes manifests of a pool, read back by real validators: every Kubernetes object
through the official ``kubernetes`` client's models (and written out again unchanged, so no
field is misspelled or misplaced), every KEDA ScaledObject against KEDA's own CRD schema
(data/k8s/), its cron triggers replayed the way KEDA's cron scaler reads them."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml  # type: ignore[import-untyped]
from kubernetes.client import ApiClient  # type: ignore[import-untyped]

from planner.deploy import kubernetes as k8s
from planner.deploy.engines import ENGINE_VERSIONS, SERVE_PORT
from planner.deploy.plan import DeploymentPlan, PoolPlan, deployment_plan
from tests.deploy.crd import version_schema

pytestmark = pytest.mark.unit

CRD = Path(__file__).parents[2] / "data" / "k8s" / "keda-v2.20.2-scaledobjects.yaml"
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MODELS = {
    "Deployment": "V1Deployment",
    "Service": "V1Service",
    "PodDisruptionBudget": "V1PodDisruptionBudget",
    "ConfigMap": "V1ConfigMap",
    "HorizontalPodAutoscaler": "V2HorizontalPodAutoscaler",
}
MONDAY = dt.datetime(2026, 11, 2, tzinfo=dt.UTC).timestamp()  # a Monday, 00:00 UTC
WEEKDAY = [3, 3, 1, 1, 1, 1, 1, 2, 2, 4, 4, 4, 4, 4, 4, 3, 3, 3, 3, 2, 2, 2, 3, 3]  # over midnight
WEEKEND = [2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 2, 2]


def result(pool: dict[str, Any], replicas: list[int], spot: float = 0.0) -> dict[str, Any]:
    return {
        "winner": {"pools": [pool], "p99_ttft_s": 0.42, "p99_tpot_s": 0.031},
        "hourly": {
            "hour_start": [MONDAY + 3600 * h for h in range(len(replicas))],
            "replicas": replicas,
        },
        "demand": {
            "source": "chat log 2026-10",
            "p99_input_tokens": 1800,
            "p99_output_tokens": 600,
        },
        "plan": {"chosen": {"spot_share": spot}},
    }


def pool(**over: Any) -> dict[str, Any]:
    base = {
        "kind": "instance",
        "provider": "gcp",
        "region": "us-central1",
        "instance_type": "g2-standard-8",
        "gpu": "L4",
        "gpus_per_instance": 1,
        "tp": 1,
        "replicas_per_instance": 1,
        "precision": "bf16",
        "kv_cache": "fp8",
        "max_seqs": 64,
        "engine": "vllm",
        "model": "llama-3.1-8b",
        "purchase": "on-demand",
    }
    return {**base, **over}


def plans() -> dict[str, DeploymentPlan]:
    week = [v for day in range(7) for v in (WEEKDAY if day < 5 else WEEKEND)]
    return {
        # one day on L4 (GKE): a daily pattern, one step over midnight
        "vllm-daily": deployment_plan(7, "2026-11-01T09:30:00", result(pool(), WEEKDAY)),
        # a week on H100 with TP 2, half on spot (EKS with Karpenter): a weekly pattern
        "sglang-spot-tp2": deployment_plan(
            8,
            "2026-11-01T09:30:00",
            result(
                pool(
                    provider="aws",
                    region="us-east-1",
                    instance_type="p5.48xlarge",
                    gpu="H100-SXM",
                    gpus_per_instance=8,
                    tp=2,
                    engine="sglang",
                    model="llama-3.1-70b",
                    precision="fp8",
                ),
                week,
                spot=0.5,
            ),
        ),
        # two different days of TensorRT-LLM on H200, all spot (AKS): folded onto one day
        "trtllm-spot": deployment_plan(
            9,
            "2026-11-01T09:30:00",
            result(
                pool(
                    provider="azure",
                    region="eastus2",
                    instance_type="Standard_ND96isr_H200_v5",
                    gpu="H200",
                    gpus_per_instance=8,
                    engine="trtllm",
                ),
                WEEKDAY + WEEKEND,
                spot=1.0,
            ),
        ),
    }


PLANS = plans()
CASES = [(name, autoscaler) for name in PLANS for autoscaler in k8s.AUTOSCALERS]


def only_pool(name: str) -> tuple[DeploymentPlan, PoolPlan]:
    plan = PLANS[name]
    [the_pool] = plan.pools
    return plan, the_pool


class Response:  # what ApiClient.deserialize reads: an HTTP response's body
    def __init__(self, doc: dict[str, Any]) -> None:
        self.data = json.dumps(doc)


def round_trip(doc: dict[str, Any]) -> Any:
    client = ApiClient()
    model = client.deserialize(Response(doc), MODELS[doc["kind"]])
    return client.sanitize_for_serialization(model)


@pytest.mark.parametrize(("name", "autoscaler"), CASES)
def test_every_kubernetes_object_reads_back_unchanged_through_the_official_models(
    name: str, autoscaler: str
) -> None:
    plan, the_pool = only_pool(name)
    docs = k8s.manifests(plan, the_pool, autoscaler)
    kinds = [d["kind"] for d in docs]
    assert kinds[-4:-1] == ["Deployment", "Service", "PodDisruptionBudget"]
    assert kinds[-1] == ("HorizontalPodAutoscaler" if autoscaler == "hpa" else "ScaledObject")
    assert ("ConfigMap" in kinds) == (the_pool.engine == "trtllm")
    for doc in docs:
        if doc["kind"] in MODELS:
            assert round_trip(doc) == doc, doc["kind"]
    # a misplaced field is caught: the models drop it, the round trip differs
    broken = json.loads(json.dumps(docs[kinds.index("Deployment")]))
    broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"periodSeconds": 5}
    assert round_trip(broken) != broken


@pytest.mark.parametrize("name", list(PLANS))
def test_the_deployment_runs_the_engine_on_the_planned_gpus(name: str) -> None:
    plan, the_pool = only_pool(name)
    [dep] = [d for d in k8s.manifests(plan, the_pool, "hpa") if d["kind"] == "Deployment"]
    spec = dep["spec"]["template"]["spec"]
    [container] = spec["containers"]
    assert container["image"] == ENGINE_VERSIONS[the_pool.engine].image
    assert container["resources"]["limits"] == {"nvidia.com/gpu": str(the_pool.tp)}
    assert dep["spec"]["replicas"] == the_pool.min_replicas
    assert "$(MODEL_PATH)" in container["command"]
    env = {e["name"]: e for e in container["env"]}
    assert env["MODEL_PATH"]["value"] == f"/models/{the_pool.model}"
    health = ENGINE_VERSIONS[the_pool.engine].health_path
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": health, "port": "http"}
    assert container["startupProbe"]["failureThreshold"] * 10 >= 20 * 60  # loading takes minutes
    assert container["ports"][0]["containerPort"] == SERVE_PORT
    selector = spec["nodeSelector"]
    assert selector["node.kubernetes.io/instance-type"] == the_pool.instance_type
    assert selector["nvidia.com/gpu.product"] == k8s.GPU_PRODUCT[the_pool.gpu]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert ("/dev/shm" in mounts) == (the_pool.tp > 1)
    tolerations = {t["key"] for t in spec["tolerations"]}
    if name == "vllm-daily":  # on-demand on GKE
        assert selector["cloud.google.com/gke-accelerator"] == "nvidia-l4"
        assert "affinity" not in spec and tolerations == {"nvidia.com/gpu"}
    if name == "sglang-spot-tp2":  # half spot: preferred, never required
        terms = spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert terms[0]["weight"] == 50
        assert terms[0]["preference"]["matchExpressions"][0]["key"] == "karpenter.sh/capacity-type"
        assert "karpenter.sh/capacity-type" not in selector
    if name == "trtllm-spot":  # all spot on AKS: required, and the spot taint tolerated
        assert selector["kubernetes.azure.com/scalesetpriority"] == "spot"
        assert "kubernetes.azure.com/scalesetpriority" in tolerations
        assert "/etc/planner" in mounts
        assert "--extra_llm_api_options" in container["command"]


def test_names_are_dns_1035_and_secrets_are_referenced_by_name_only() -> None:
    for name, autoscaler in CASES:
        plan, the_pool = only_pool(name)
        docs = k8s.manifests(plan, the_pool, autoscaler)
        for doc in docs:
            assert DNS_1035.match(doc["metadata"]["name"]), doc["metadata"]["name"]
            assert len(doc["metadata"]["name"]) <= 63
            assert doc["metadata"]["labels"]["planner.dev/recommendation"] == str(
                plan.recommendation_id
            )
            assert doc["kind"] != "Secret"
        [dep] = [d for d in docs if d["kind"] == "Deployment"]
        pod = dep["spec"]["template"]["spec"]
        for container in pod["containers"]:
            assert DNS_1035.match(container["name"])
            for env in container["env"]:
                assert env["name"] == "MODEL_PATH" or set(env) == {"name", "valueFrom"}
                if "valueFrom" in env:
                    assert env["valueFrom"] == {
                        "secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}
                    }
        for volume in pod["volumes"]:
            assert DNS_1035.match(volume["name"])
        text = k8s.render(plan, the_pool, docs)
        assert not re.search(r"hf_[A-Za-z0-9]{10,}", text)  # no token value anywhere


def crd_schema(strict: bool) -> dict[str, Any]:
    return version_schema(yaml.safe_load(CRD.read_text()), "v1alpha1", strict)


def scaled_object(name: str) -> dict[str, Any]:
    plan, the_pool = only_pool(name)
    [found] = [d for d in k8s.manifests(plan, the_pool, "keda") if d["kind"] == "ScaledObject"]
    return found


@pytest.mark.parametrize("name", list(PLANS))
def test_the_scaled_object_meets_kedas_crd_schema(name: str) -> None:
    doc = scaled_object(name)
    for strict in (False, True):
        jsonschema.validate(doc, crd_schema(strict), cls=jsonschema.Draft7Validator)
    bad_count = json.loads(json.dumps(doc))
    bad_count["spec"]["triggers"][0]["metadata"]["desiredReplicas"] = 3  # must be a string
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad_count, crd_schema(False), cls=jsonschema.Draft7Validator)
    misspelled = json.loads(json.dumps(doc))
    misspelled["spec"]["minReplicas"] = misspelled["spec"].pop("minReplicaCount")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(misspelled, crd_schema(True), cls=jsonschema.Draft7Validator)


def cron_matches(expr: str, when: dt.datetime) -> bool:
    minute, hour, dom, month, dow = expr.split()
    assert (minute, dom, month) == ("0", "*", "*"), expr
    return (
        when.minute == 0
        and when.hour == int(hour)
        and (dow == "*" or (when.weekday() + 1) % 7 == int(dow))
    )


def next_time(expr: str, now: dt.datetime) -> dt.datetime:
    when = now.replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=1)
    for _ in range(8 * 24):
        if cron_matches(expr, when):
            return when
        when += dt.timedelta(hours=1)
    raise AssertionError(f"{expr} never fires")


def desired(doc: dict[str, Any], now: dt.datetime) -> int:
    """Replicas KEDA asks for at ``now``: as pkg/scalers/cron_scaler.go (v2.20.2) decides a
    trigger is active (its next end comes before its next start), the largest active trigger,
    at least minReplicaCount."""
    active: list[int] = [doc["spec"]["minReplicaCount"]]
    for trigger in doc["spec"]["triggers"]:
        meta = trigger["metadata"]
        assert trigger["type"] == "cron" and meta["timezone"] == "UTC"
        if not next_time(meta["start"], now) < next_time(meta["end"], now):
            active.append(int(meta["desiredReplicas"]))
    return max(active)


@pytest.mark.parametrize("name", list(PLANS))
def test_the_cron_triggers_replay_the_hourly_schedule(name: str) -> None:
    doc = scaled_object(name)
    _, the_pool = only_pool(name)
    assert doc["spec"]["minReplicaCount"] == the_pool.min_replicas
    assert doc["spec"]["maxReplicaCount"] == the_pool.max_replicas
    replayed = [
        desired(doc, dt.datetime.fromtimestamp(start + 1800, tz=dt.UTC))
        for start in the_pool.hour_start_s
    ]
    if name == "trtllm-spot":  # two different days on one daily pattern: each hour's larger
        assert replayed == [max(a, b) for a, b in zip(WEEKDAY, WEEKEND, strict=True)] * 2
        assert all(r >= h for r, h in zip(replayed, the_pool.hourly_replicas, strict=True))
    else:
        assert replayed == list(the_pool.hourly_replicas)
    weekly = name == "sglang-spot-tp2"
    days = {t["metadata"]["start"].split()[-1] for t in doc["spec"]["triggers"]}
    assert (days != {"*"}) == weekly


def test_a_flat_schedule_gets_fixed_replicas_and_no_autoscaler() -> None:
    plan = deployment_plan(3, "2026-11-01T09:30:00", result(pool(), [2] * 24))
    [the_pool] = plan.pools
    for autoscaler in k8s.AUTOSCALERS:
        docs = k8s.manifests(plan, the_pool, autoscaler)
        assert [d["kind"] for d in docs] == ["Deployment", "Service", "PodDisruptionBudget"]
        assert docs[0]["spec"]["replicas"] == 2
        assert "the schedule is flat" in k8s.render(plan, the_pool, docs)


def test_the_hpa_is_bounded_by_the_schedule_and_scales_on_the_engines_batch() -> None:
    plan, the_pool = only_pool("vllm-daily")
    [hpa] = [d for d in k8s.manifests(plan, the_pool, "hpa") if d["kind"] != "Deployment"][-1:]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 4)
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "vllm:num_requests_running"


@pytest.mark.parametrize(("name", "autoscaler"), CASES)
def test_the_file_starts_with_the_header_and_reads_back_as_the_manifests(
    name: str, autoscaler: str
) -> None:
    plan, the_pool = only_pool(name)
    docs = k8s.manifests(plan, the_pool, autoscaler)
    text = k8s.render(plan, the_pool, docs)
    header = [f"# {line}" for line in plan.header()]
    assert text.splitlines()[: len(header)] == header
    assert text.startswith(f"# planner recommendation #{plan.recommendation_id}, planned ")
    assert "# assumption: " in text
    assert [d for d in yaml.safe_load_all(text) if d is not None] == docs


def test_a_disaggregated_pool_says_its_kv_transfer_is_not_generated() -> None:
    prefill = pool(role="prefill", hourly_replicas=[2] * 12 + [3] * 12)
    decode = pool(role="decode", hourly_replicas=[4] * 12 + [6] * 12)
    data = result(prefill, [0] * 24)
    data["winner"]["pools"] = [prefill, decode]
    plan = deployment_plan(11, "2026-11-01T09:30:00", data)
    names = set()
    for the_pool in plan.pools:
        docs = k8s.manifests(plan, the_pool, "keda")
        names.add(docs[0]["metadata"]["name"])
        assert docs[0]["metadata"]["labels"]["app.kubernetes.io/component"] == the_pool.role
        assert "is not generated" in k8s.render(plan, the_pool, docs)
    assert len(names) == 2
