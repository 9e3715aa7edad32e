"""A pool as Kubernetes manifests: a Deployment running the pool's engine with the launch
command of :mod:`planner.deploy.engines`, a Service, a PodDisruptionBudget, and an autoscaler
from the verified replica schedule: an HPA (``autoscaling/v2``) bounded by the schedule's
minimum and maximum, or a KEDA ``ScaledObject`` whose cron triggers follow the schedule hour by
hour (UTC).

Plain dictionaries in the shape of the Kubernetes API (the tests read each back through the
official client's models and KEDA's CRD schema); nothing here needs the ``kubernetes`` package.
Placeholders are named, never guessed: the weights come from a PersistentVolumeClaim
``<pool>-weights`` mounted read-only at ``/models``, the Hugging Face token from the Secret
``hf-token`` (key ``token``) by name only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML (a dependency) ships no types

from planner.deploy.engines import (
    ENGINE_VERSIONS,
    SERVE_PORT,
    TRTLLM_OPTIONS_FILE,
    comment_block,
    launch_args,
    trtllm_options,
)
from planner.deploy.plan import DeploymentPlan, PoolPlan, k8s_name

AUTOSCALERS = ("hpa", "keda")
KEDA_VERSION = "2.20.2"  # the ScaledObject schema the tests check against (data/k8s/)
WEIGHTS_MOUNT = "/models"
HF_SECRET = "hf-token"  # a Secret the cluster holds; referenced by name, its value never written
HF_SECRET_KEY = "token"
STARTUP_SECONDS = 30 * 60  # model download and load: the startup probe waits this long
DAY_HOURS = 24
WEEK_HOURS = 7 * DAY_HOURS

# The product label NVIDIA's GPU feature discovery puts on a node (``nvidia.com/gpu.product``:
# the product name nvidia-smi reports, spaces as '-'); GFD's README and the NVIDIA GPU operator's
# node labels. A GPU missing here is selected by instance type alone.
GPU_PRODUCT = {
    "T4": "Tesla-T4",
    "A10G": "NVIDIA-A10G",
    "L4": "NVIDIA-L4",
    "L40S": "NVIDIA-L40S",
    "A40": "NVIDIA-A40",
    "A100-40GB": "NVIDIA-A100-SXM4-40GB",
    "A100-80GB": "NVIDIA-A100-SXM4-80GB",
    "H100-SXM": "NVIDIA-H100-80GB-HBM3",
    "H100-PCIe": "NVIDIA-H100-PCIe",
    "H100-NVL": "NVIDIA-H100-NVL",
    "H200": "NVIDIA-H200",
    "B200": "NVIDIA-B200",
}
# GKE's accelerator label (cloud.google.com/gke-accelerator), as GKE's GPU documentation lists it.
GKE_ACCELERATOR = {
    "T4": "nvidia-tesla-t4",
    "L4": "nvidia-l4",
    "A100-40GB": "nvidia-tesla-a100",
    "A100-80GB": "nvidia-a100-80gb",
    "H100-SXM": "nvidia-h100-80gb",
    "H200": "nvidia-h200-141gb",
    "B200": "nvidia-b200",
}
AMD_GPUS = ("MI300X",)  # scheduled through AMD's device plugin (amd.com/gpu)

# Where each cloud marks spot capacity: the node label to prefer or require, and the taint its
# spot nodes carry (None: the platform puts none there by default).
AKS_SPOT = "kubernetes.azure.com/scalesetpriority"
SPOT = {
    "gcp": ("cloud.google.com/gke-spot", "true", "cloud.google.com/gke-spot"),
    "aws": ("karpenter.sh/capacity-type", "spot", None),
    "azure": (AKS_SPOT, "spot", AKS_SPOT),
}

# Each engine's gauge of requests in its running batch (Prometheus), the HPA's per-pod metric.
# trtllm-serve's /metrics answers JSON iteration stats rather than Prometheus text: a JSON
# exporter must publish their numActiveRequests under the name below.
RUNNING_GAUGE = {
    "vllm": "vllm:num_requests_running",
    "sglang": "sglang:num_running_reqs",
    "trtllm": "trtllm_num_active_requests",
}
BATCH_TARGET = 0.8  # the HPA adds a replica once the average batch passes 80% of max_num_seqs


def _labels(plan: DeploymentPlan, pool: PoolPlan) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": pool.name,
        "app.kubernetes.io/part-of": "planner",
        "app.kubernetes.io/component": pool.role,
        "planner.dev/recommendation": str(plan.recommendation_id),
        "planner.dev/engine": pool.engine,
    }


def _selector(pool: PoolPlan) -> dict[str, str]:
    return {"app.kubernetes.io/name": pool.name, "app.kubernetes.io/part-of": "planner"}


def _metadata(plan: DeploymentPlan, pool: PoolPlan, name: str, **notes: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": _labels(plan, pool)}
    if notes:
        meta["annotations"] = {f"planner.dev/{k.replace('_', '-')}": v for k, v in notes.items()}
    return meta


def gpu_resource(pool: PoolPlan) -> str:
    return "amd.com/gpu" if pool.gpu in AMD_GPUS else "nvidia.com/gpu"


def _node_selector(pool: PoolPlan) -> dict[str, str]:
    selector = {}
    if pool.instance_type:
        selector["node.kubernetes.io/instance-type"] = pool.instance_type
    if pool.gpu in GPU_PRODUCT:
        selector["nvidia.com/gpu.product"] = GPU_PRODUCT[pool.gpu]
    if pool.provider == "gcp" and pool.gpu in GKE_ACCELERATOR:
        selector["cloud.google.com/gke-accelerator"] = GKE_ACCELERATOR[pool.gpu]
    spot = SPOT.get(pool.provider)
    if spot and pool.spot_share >= 1:  # all of it on spot: required
        selector[spot[0]] = spot[1]
    return selector


def _scheduling(pool: PoolPlan) -> dict[str, Any]:
    """Node selector, tolerations and (for a partly spot pool) a preferred spot affinity."""
    # GPU nodes are commonly tainted nvidia.com/gpu:NoSchedule (EKS and AKS GPU pools; GKE adds
    # this toleration itself): tolerating it is harmless where the taint is absent.
    tolerations: list[dict[str, Any]] = [
        {"key": gpu_resource(pool), "operator": "Exists", "effect": "NoSchedule"}
    ]
    spec: dict[str, Any] = {"nodeSelector": _node_selector(pool)}
    spot = SPOT.get(pool.provider)
    if spot and pool.spot_share > 0:
        label, value, taint = spot
        if taint:
            tolerations.append(
                {"key": taint, "operator": "Equal", "value": value, "effect": "NoSchedule"}
            )
        if pool.spot_share < 1:
            # Kubernetes schedules no ratio: spot is preferred, in proportion to the planned
            # share, and on-demand nodes take the rest when spot capacity is short.
            spec["affinity"] = {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": max(1, min(100, round(pool.spot_share * 100))),
                            "preference": {
                                "matchExpressions": [
                                    {"key": label, "operator": "In", "values": [value]}
                                ]
                            },
                        }
                    ]
                }
            }
    spec["tolerations"] = tolerations
    return spec


def _probe(pool: PoolPlan, period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": ENGINE_VERSIONS[pool.engine].health_path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def _config_map_name(pool: PoolPlan) -> str:
    return k8s_name(pool.name[:52], "options")


def deployment(plan: DeploymentPlan, pool: PoolPlan, replicas: int) -> dict[str, Any]:
    pinned = ENGINE_VERSIONS[pool.engine]
    model_path = f"{WEIGHTS_MOUNT}/{pool.model}"
    gpus = str(pool.tp)  # one replica per pod, its tensor-parallel group on one node
    mounts: list[dict[str, Any]] = [
        {"name": "weights", "mountPath": WEIGHTS_MOUNT, "readOnly": True}
    ]
    volumes: list[dict[str, Any]] = [
        {
            "name": "weights",
            "persistentVolumeClaim": {
                "claimName": k8s_name(pool.name, "weights"),
                "readOnly": True,
            },
        }
    ]
    if pool.tp > 1:  # NCCL between the tensor-parallel ranks needs more than Docker's 64 MiB
        mounts.append({"name": "shm", "mountPath": "/dev/shm"})
        volumes.append({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}})
    if pool.engine == "trtllm":
        folder = TRTLLM_OPTIONS_FILE.rsplit("/", 1)[0]
        mounts.append({"name": "options", "mountPath": folder, "readOnly": True})
        volumes.append({"name": "options", "configMap": {"name": _config_map_name(pool)}})
    container = {
        "name": pool.engine,
        "image": pinned.image,
        # Kubernetes expands $(MODEL_PATH) in the command from the container's env
        "command": launch_args(pool, pool.engine, model_path="$(MODEL_PATH)"),
        "env": [
            {"name": "MODEL_PATH", "value": model_path},
            {
                "name": "HF_TOKEN",
                "valueFrom": {
                    "secretKeyRef": {"name": HF_SECRET, "key": HF_SECRET_KEY, "optional": True}
                },
            },
        ],
        "ports": [{"name": "http", "containerPort": SERVE_PORT, "protocol": "TCP"}],
        "resources": {
            "requests": {gpu_resource(pool): gpus},
            "limits": {gpu_resource(pool): gpus},
        },
        "startupProbe": _probe(pool, 10, STARTUP_SECONDS // 10),
        "readinessProbe": _probe(pool, 5, 3),
        "livenessProbe": _probe(pool, 10, 3),
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(
            plan,
            pool,
            pool.name,
            image=f"{pool.engine} {pinned.version}, the version the launch flags were written "
            "for; replace the image to run another build of it",
            weights=f"PersistentVolumeClaim {k8s_name(pool.name, 'weights')} holding "
            f"{pool.model} at {model_path} (a named placeholder: create it)",
        ),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": _selector(pool)},
            # keep the verified capacity through a rollout: one extra pod, none taken down first
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": _labels(plan, pool)},
                "spec": {
                    "containers": [container],
                    "volumes": volumes,
                    "terminationGracePeriodSeconds": 60,  # in-flight requests finish
                    **_scheduling(pool),
                },
            },
        },
    }


def service(plan: DeploymentPlan, pool: PoolPlan) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(plan, pool, pool.name),
        "spec": {
            "type": "ClusterIP",
            "selector": _selector(pool),
            "ports": [
                {"name": "http", "port": SERVE_PORT, "targetPort": "http", "protocol": "TCP"}
            ],
        },
    }


def disruption_budget(plan: DeploymentPlan, pool: PoolPlan) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(plan, pool, pool.name),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": _selector(pool)}},
    }


def config_map(plan: DeploymentPlan, pool: PoolPlan) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(plan, pool, _config_map_name(pool)),
        "data": {TRTLLM_OPTIONS_FILE.rsplit("/", 1)[1]: trtllm_options(pool)},
    }


def hpa(plan: DeploymentPlan, pool: PoolPlan) -> dict[str, Any]:
    """Bounded by the schedule's minimum and maximum; scaled on the engine's running batch.

    CPU says nothing about a GPU-bound engine, so the metric is a Pods metric: the engine's
    running-requests gauge per pod, which the custom metrics API serves only through a metrics
    adapter (e.g. prometheus-adapter with a rule for :data:`RUNNING_GAUGE`). Without one the HPA
    holds the replica count it has; the KEDA form follows the verified schedule instead."""
    metric = RUNNING_GAUGE[pool.engine]
    target = max(1, round(BATCH_TARGET * pool.max_num_seqs))
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(
            plan,
            pool,
            pool.name,
            metric=f"{metric} per pod through a custom metrics adapter (prometheus-adapter); "
            f"target {target} = {BATCH_TARGET:.0%} of max_num_seqs {pool.max_num_seqs}",
        ),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": pool.name},
            "minReplicas": pool.min_replicas,
            "maxReplicas": pool.max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": metric},
                        "target": {"type": "AverageValue", "averageValue": str(target)},
                    },
                }
            ],
            # model loading takes minutes: scale down slowly, so a brief dip keeps its replicas
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600}},
        },
    }


def folded_schedule(pool: PoolPlan) -> tuple[int, list[int]]:
    """The schedule on one week (168 hours from Sunday 00:00 UTC) when it spans a week, else on
    one day (24 hours from 00:00 UTC): each slot the most replicas any of its hours wanted."""
    hours = pool.hourly_replicas
    starts = pool.hour_start_s or tuple(3600.0 * i for i in range(len(hours)))
    span = (max(starts) - min(starts) + 3600.0) if starts else 0.0
    period = WEEK_HOURS if span >= WEEK_HOURS * 3600 else DAY_HOURS
    folded = [pool.min_replicas] * period
    for start, replicas in zip(starts, hours, strict=False):
        slot = _slot(start, period)
        folded[slot] = max(folded[slot], replicas)
    return period, folded


def _slot(start_s: float, period: int) -> int:
    when = dt.datetime.fromtimestamp(start_s, tz=dt.UTC)
    if period == DAY_HOURS:
        return when.hour
    return ((when.weekday() + 1) % 7) * DAY_HOURS + when.hour  # cron's weekdays: 0 is Sunday


def _cron(slot: int, period: int) -> str:
    slot %= period
    day = "*" if period == DAY_HOURS else str(slot // DAY_HOURS)
    return f"0 {slot % DAY_HOURS} * * {day}"


def schedule_runs(period: int, folded: list[int], base: int) -> list[tuple[int, int, int]]:
    """Runs of hours above ``base`` with one replica count, as (first slot, hours, replicas) on
    the ring of ``period`` slots; a run reaching round the whole ring is cut in two (a cron
    trigger's start and end must differ)."""
    if all(v == folded[0] for v in folded):
        if folded[0] <= base:
            return []
        half = period // 2
        return [(0, half, folded[0]), (half, period - half, folded[0])]
    # start the walk where the value changes, so no run wraps past the end of the list
    first = next(i for i in range(period) if folded[i] != folded[i - 1])
    runs: list[tuple[int, int, int]] = []
    for offset in range(period):
        slot = (first + offset) % period
        value = folded[slot]
        if runs and runs[-1][2] == value and (runs[-1][0] + runs[-1][1]) % period == slot:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1, value)
        else:
            runs.append((slot, 1, value))
    return sorted(r for r in runs if r[2] > base)


WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # cron's 0 to 6


def _trigger_name(start: int, length: int, replicas: int, period: int) -> str:
    day = "" if period == DAY_HOURS else WEEKDAYS[start // DAY_HOURS] + "-"
    return f"{day}{start % DAY_HOURS:02d}00-{length}h-r{replicas}"


def scaled_object(plan: DeploymentPlan, pool: PoolPlan) -> dict[str, Any]:
    """A KEDA ScaledObject: outside every trigger the Deployment holds ``min_replicas``; each
    run of hours above it is a cron trigger (UTC) asking for that run's replicas (KEDA takes the
    largest active trigger)."""
    period, folded = folded_schedule(pool)
    triggers = [
        {
            "type": "cron",
            "name": _trigger_name(start, length, replicas, period),
            "metadata": {
                "timezone": "UTC",
                "start": _cron(start, period),
                "end": _cron(start + length, period),
                "desiredReplicas": str(replicas),
            },
        }
        for start, length, replicas in schedule_runs(period, folded, pool.min_replicas)
    ]
    fold = "weekly" if period == WEEK_HOURS else "daily"
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": _metadata(
            plan,
            pool,
            pool.name,
            schedule=f"the verified hourly schedule folded onto a {fold} cron pattern (UTC), "
            f"each hour at the most replicas it had; KEDA {KEDA_VERSION}",
        ),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": pool.name},
            "minReplicaCount": pool.min_replicas,
            "maxReplicaCount": pool.max_replicas,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}}
                }
            },
            "triggers": triggers,
        },
    }


def manifests(plan: DeploymentPlan, pool: PoolPlan, autoscaler: str) -> list[dict[str, Any]]:
    """The objects that run ``pool``: ``autoscaler`` "hpa" (target k8s) or "keda" (target
    keda, whose ScaledObject makes its own HPA; with a flat schedule it has no trigger to set
    and is left out, the Deployment's replicas fixed)."""
    if autoscaler not in AUTOSCALERS:
        raise ValueError(f"autoscaler {autoscaler!r}: one of {', '.join(AUTOSCALERS)}")
    docs: list[dict[str, Any]] = []
    if pool.engine == "trtllm":
        docs.append(config_map(plan, pool))
    docs += [
        deployment(plan, pool, pool.min_replicas),
        service(plan, pool),
        disruption_budget(plan, pool),
    ]
    if autoscaler == "hpa":
        if pool.max_replicas > pool.min_replicas:
            docs.append(hpa(plan, pool))
    else:
        keda = scaled_object(plan, pool)
        if keda["spec"]["triggers"]:
            docs.append(keda)
    return docs


def header_lines(
    plan: DeploymentPlan, pool: PoolPlan, docs: Sequence[Mapping[str, Any]]
) -> list[str]:
    pinned = ENGINE_VERSIONS[pool.engine]
    lines = [
        *plan.header(),
        f"pool {pool.name}: {pool.model} {pool.precision} on {pool.gpu} "
        f"({pool.provider} {pool.region} {pool.instance_type}), TP {pool.tp}, role {pool.role}",
        f"{pool.engine} {pinned.version} (image {pinned.image})",
        f"replicas {pool.min_replicas} to {pool.max_replicas} over the hourly schedule (UTC)",
        f"placeholders: PersistentVolumeClaim {k8s_name(pool.name, 'weights')} with the weights "
        f"at {WEIGHTS_MOUNT}/{pool.model}; Secret {HF_SECRET} (key {HF_SECRET_KEY}, optional) "
        "for gated models, referenced by name only",
    ]
    kinds = {d.get("kind") for d in docs}
    if "HorizontalPodAutoscaler" in kinds:
        lines.append(
            f"the HPA reads {RUNNING_GAUGE[pool.engine]} per pod: it needs a custom metrics "
            "adapter (prometheus-adapter); without one it keeps its replicas"
        )
    if "ScaledObject" in kinds:
        lines.append(
            f"KEDA {KEDA_VERSION}: its cron triggers replay the schedule; replicas start on the "
            "hour, so the first minutes of each step run on the previous count (model loading)"
        )
    if pool.min_replicas == pool.max_replicas:
        lines.append("the schedule is flat: fixed replicas, no autoscaler")
    if pool.role != "serve":
        lines.append(
            f"disaggregated {pool.role} pool: an ordinary Deployment; the KV-cache transfer "
            "between prefill and decode (NVIDIA Dynamo, llm-d) is not generated here: "
            "--target dynamo writes NVIDIA Dynamo's graph with it"
        )
    return lines


class _Dumper(yaml.SafeDumper):  # type: ignore[misc]  # untyped base
    """Safe YAML, with a multi-line string (the TensorRT-LLM options file) as a literal block."""


def _str(dumper: yaml.SafeDumper, text: str) -> Any:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)


def render(plan: DeploymentPlan, pool: PoolPlan, docs: list[dict[str, Any]]) -> str:
    """``docs`` as one YAML file, the header comments first."""
    body = "---\n".join(
        yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)
        for doc in docs
    )
    return comment_block(header_lines(plan, pool, docs)) + "---\n" + body
