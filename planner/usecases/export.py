"""``planner export``: a stored recommendation as files a cluster runs: each pool's engine launch
script (``vllm``, ``sglang``, ``trtllm``) or its Kubernetes manifests with an HPA (``k8s``) or a
KEDA ScaledObject following the hourly schedule (``keda``), or, for a disaggregated one, NVIDIA
Dynamo's DynamoGraphDeployment of its prefill and decode pools (``dynamo``). The dashboard's
Recommendations page offers the same files as a zip (:func:`export_zip`)."""

from __future__ import annotations

import io
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

from planner.access import Action, require
from planner.deploy.plan import DeploymentPlan, deployment_plan
from planner.errors import NotFoundError, UsageError
from planner.usecases import SessionScope
from planner.usecases.audit import record

ENGINE_TARGETS = ("vllm", "sglang", "trtllm")
TARGETS = (*ENGINE_TARGETS, "k8s", "keda", "dynamo")


@dataclass(frozen=True)
class ExportRequest:
    recommendation_id: int
    target: str
    out: Path | None = None  # a folder; None: the files are only returned (the dashboard)


@dataclass(frozen=True)
class ExportResult:
    plan: DeploymentPlan
    target: str
    files: dict[str, str]  # file name: text, in writing order
    written: tuple[Path, ...]  # where they were written (none without ``out``)
    notes: tuple[str, ...]


def check_target(target: str) -> str:
    chosen = target.strip().lower()
    if chosen not in TARGETS:
        raise UsageError(f"--target {target!r}: expected one of {', '.join(TARGETS)}")
    return chosen


def export_files(plan: DeploymentPlan, target: str) -> dict[str, str]:
    """Every file of ``target`` for every pool of ``plan``, by file name (pure: no I/O)."""
    from planner.deploy import engines

    files: dict[str, str] = {}
    if target == "dynamo":
        from planner.deploy import dynamo

        models: list[str | None] = [*dynamo.disaggregated_models(plan)] or [None]
        for model in models:  # None: the use-k8s refusal
            files[f"{dynamo.plan_name(plan, model or '')}.dynamo.yaml"] = dynamo.render(plan, model)
        return files
    for pool in plan.pools:
        if target in ENGINE_TARGETS:
            files[f"{pool.name}.{target}.sh"] = engines.launch_script(plan, pool, target)
            if target == "trtllm":
                files[engines.trtllm_options_name(pool)] = engines.comment_block(
                    plan.header()
                ) + engines.trtllm_options(pool)
        else:
            from planner.deploy.kubernetes import manifests, render

            autoscaler = "hpa" if target == "k8s" else "keda"
            docs = manifests(plan, pool, autoscaler)
            files[f"{pool.name}.{target}.yaml"] = render(plan, pool, docs)
    return files


def _notes(plan: DeploymentPlan, target: str) -> tuple[str, ...]:
    notes = []
    if target in ENGINE_TARGETS:
        other = sorted({p.engine for p in plan.pools if p.engine != target})
        if other:
            notes.append(
                f"the latency model verified this fleet with {', '.join(other)}; {target}'s "
                "step times differ: run `planner recommend --engine "
                f"{target}` (or `planner simulate`) before deploying it with {target}"
            )
    roles = {p.role for p in plan.pools}
    if {"prefill", "decode"} <= roles and target != "dynamo":
        notes.append(
            "prefill and decode pools are written as two deployments; the KV-cache transfer "
            "between them (NVIDIA Dynamo, llm-d) is not generated"
            + (
                ": use --target dynamo for NVIDIA Dynamo's graph (KV transfer included)"
                if target in ("k8s", "keda")
                else ""
            )
        )
    return tuple(notes)


def _check_folder(out: Path) -> None:
    if out.is_symlink():
        raise UsageError(f"--out {out}: is a symbolic link; give a real folder")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file; give a folder")
    if not out.exists() and not out.parent.is_dir():
        raise UsageError(f"--out {out}: its folder {out.parent} does not exist")


def _write(out: Path, files: dict[str, str]) -> tuple[Path, ...]:
    """Each file written whole or not at all, never through a link."""
    from planner.common.files import atomic_output

    out.mkdir(exist_ok=True)
    written = []
    for name, text in files.items():
        path = out / name
        with atomic_output(path, "--out") as temp:
            temp.write_text(text, encoding="utf-8")
        if name.endswith(".sh"):  # runnable, set on the file itself (never through a link)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                os.fchmod(fd, 0o755)
            finally:
                os.close(fd)
        written.append(path)
    return tuple(written)


def export(request: ExportRequest, sessions: SessionScope) -> ExportResult:
    """Render ``request.target``'s files for the stored recommendation and write them into
    ``request.out`` (all rendered before the first is written)."""
    from planner.store.recommendations import load_recommendation

    target = check_target(request.target)
    if request.out is not None:
        _check_folder(request.out)
    require(Action.EXPORT)
    with sessions() as session:
        if session is None:
            raise NotFoundError(f"no stored recommendation #{request.recommendation_id}: no store")
        run = load_recommendation(session, request.recommendation_id)
        created = f"{run.created_at:%Y-%m-%d %H:%M}"
        plan = deployment_plan(run.id, created, run.result or {})
    files = export_files(plan, target)
    written = _write(request.out, files) if request.out is not None else ()
    record(sessions, Action.EXPORT, f"recommendation {plan.recommendation_id}", f"as {target}")
    return ExportResult(plan, target, files, written, _notes(plan, target))


def export_zip(result: ExportResult) -> bytes:
    """The files as one zip (the dashboard's download), scripts executable."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in result.files.items():
            info = zipfile.ZipInfo(
                f"planner-{result.plan.recommendation_id}-{result.target}/{name}"
            )
            info.external_attr = (0o755 if name.endswith(".sh") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text)
    return buffer.getvalue()
