"""``planner export``: a stored recommendation as engine launch scripts or Kubernetes manifests."""

from __future__ import annotations

from pathlib import Path

import typer

from planner.cli.context import print_json, sessions_from, stderr, stdout, user_errors
from planner.cli.options import JSON_OPTION


@user_errors
def export_command(
    ctx: typer.Context,
    recommendation: int = typer.Option(
        ..., "--recommendation", min=1, help="Id of a stored recommendation."
    ),
    target: str = typer.Option(
        ...,
        "--target",
        help="vllm, sglang or trtllm (a launch script per pool), k8s (Deployment, Service, "
        "PodDisruptionBudget, HPA per pool), keda (the same with a KEDA ScaledObject that "
        "follows the hourly schedule) or dynamo (NVIDIA Dynamo's DynamoGraphDeployment of a "
        "disaggregated recommendation's prefill and decode pools).",
    ),
    out: Path = typer.Option(..., "--out", help="Folder to write the files into (created)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Write what a cluster needs to run a stored recommendation: each pool's engine settings
    or Kubernetes manifests, every file headed by the recommendation, its date and assumptions."""
    from planner.usecases.export import ExportRequest, export

    with sessions_from(ctx) as sessions:
        result = export(ExportRequest(recommendation, target, out), sessions)
    if as_json:
        print_json(
            {
                "recommendation": result.plan.recommendation_id,
                "target": result.target,
                "files": [str(p) for p in result.written],
                "pools": [
                    {
                        "name": p.name,
                        "role": p.role,
                        "model": p.model,
                        "gpu": p.gpu,
                        "instance_type": p.instance_type,
                        "tp": p.tp,
                        "min_replicas": p.min_replicas,
                        "max_replicas": p.max_replicas,
                    }
                    for p in result.plan.pools
                ],
                "notes": list(result.notes),
            }
        )
        return
    for path in result.written:
        stdout.print(str(path), markup=False, soft_wrap=True)
    for note in result.notes:
        stderr.print(f"note: {note}", markup=False, soft_wrap=True)
