"""The Recommendations page's downloads of what a cluster runs (``planner export``): each pool's
engine launch script or its Kubernetes manifests, as a zip built when the button is clicked."""

from __future__ import annotations

import functools
from typing import Any

import streamlit as st

from app import common, signin
from planner.access import Actor, acting_as
from planner.usecases.export import TARGETS, ExportRequest, export, export_zip

TARGET_LABELS = {
    "vllm": "vLLM launch scripts",
    "sglang": "SGLang launch scripts",
    "trtllm": "TensorRT-LLM launch scripts",
    "k8s": "Kubernetes: Deployment, Service, PDB, HPA",
    "keda": "Kubernetes with a KEDA ScaledObject (the hourly schedule)",
    "dynamo": "NVIDIA Dynamo graph (disaggregated prefill/decode)",
}


def offered_targets(data: dict[str, Any]) -> list[str]:
    """The targets for this recommendation: dynamo only where its winner has a prefill pool."""
    roles = {str(p.get("role") or "") for p in (data.get("winner") or {}).get("pools") or []}
    return [t for t in TARGETS if t != "dynamo" or "prefill" in roles]


def _zip(recommendation_id: int, target: str, actor: Actor) -> bytes:
    """Rendered on click, for whoever clicked (the download runs outside the page's run), and
    noted in the audit trail as an export."""
    with acting_as(actor):
        return export_zip(export(ExportRequest(recommendation_id, target), common.session))


def deploy_downloads(data: dict[str, Any], recommendation_id: int | None) -> None:
    """The downloads, for a stored recommendation (``recommendation_id``) with a fleet."""
    if recommendation_id is None or data.get("winner") is None:
        return
    st.subheader("Deploy it")
    engine = str((data.get("winner") or {}).get("engine") or "vllm")
    st.caption(
        "Each pool's engine settings as this search verified them, or its Kubernetes manifests; "
        "every file names this recommendation, its date and assumptions. The same as "
        f"`planner export --recommendation {recommendation_id} --target TARGET --out DIR`; "
        "docs/deploy.md says what to fill in."
    )
    left, right = st.columns([2, 1])
    targets = offered_targets(data)
    target = left.selectbox(
        "Target",
        targets,
        index=targets.index(engine) if engine in targets else 0,
        format_func=TARGET_LABELS.__getitem__,
        key="rec-deploy-target",
    )
    right.download_button(
        "Download (zip)",
        functools.partial(_zip, int(recommendation_id), target, signin.run_actor()),
        file_name=f"planner-{recommendation_id}-{target}.zip",
        mime="application/zip",
        key="rec-deploy-download",
        icon=":material/download:",
    )
    if target in ("vllm", "sglang", "trtllm") and target != engine:
        st.caption(
            f"This fleet was verified with {engine}'s step times; {target} will differ. Search "
            f"again with the engine set to {target} before deploying with it."
        )
