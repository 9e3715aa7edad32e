"""Saving recommendations to the store and reading them back."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from planner.errors import NotFoundError
from planner.store.recommend_models import RecommendationRun

if TYPE_CHECKING:
    from planner.recommend.engine import Recommendation
    from planner.recommend.mix import FleetRecommendation


def _json_ready(data: dict[str, Any]) -> dict[str, Any]:
    """Plain JSON (no NaN/inf, which PostgreSQL's JSON rejects): floats that are not finite
    become None."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and (value != value or value in (float("inf"), -float("inf"))):
            return None
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    cleaned: dict[str, Any] = json.loads(json.dumps(clean(data), default=str))
    return cleaned


def save_recommendation(
    session: Session, result: Recommendation | FleetRecommendation
) -> RecommendationRun:
    data = _json_ready(result.to_dict())
    if data.get("kind") == "fleet":
        return _save_fleet(session, data)
    winner = data["winner"]
    plan = data["plan"]
    constraints = data["request"]["constraints"]
    # a proprietary model without a substitute: the API bill is the plan
    offer = (data.get("api") or {}).get("offer") if data.get("api_only") else None
    run = RecommendationRun(
        demand_source=str(data["demand"]["source"]),
        model=", ".join([constraints["model"], *constraints["alternative_models"]]),
        winner=(
            f"{winner['provider']}/{winner['region']}/{winner['instance_type']} "
            f"{winner['model']} {winner['precision']} {_layout(winner)}"
            if winner
            else (f"per-token API: {offer['provider']} {offer['offer']}" if offer else None)
        ),
        monthly_usd=plan["chosen"]["monthly_usd"] if plan else (offer or {}).get("monthly_usd"),
        purchase=plan["chosen"]["option"] if plan else ("per-token" if offer else None),
        request=data["request"],
        result=data,
    )
    session.add(run)
    session.flush()
    return run


def _layout(winner: dict[str, Any]) -> str:
    """TP of a replica, or of each role of a disaggregated winner."""
    if winner.get("architecture") == "disaggregated":
        return f"disaggregated: prefill TP{winner['prefill_tp']} + decode TP{winner['decode_tp']}"
    return f"TP{winner['tp']}"


def _save_fleet(session: Session, data: dict[str, Any]) -> RecommendationRun:
    """A fleet of pools: its models, its pools in a line, its monthly cost."""
    winner = data["winner"]
    pools = winner["pools"] if winner else []
    options = sorted({p["purchase"] for p in pools if p.get("purchase")})
    run = RecommendationRun(
        demand_source=str(data["demand"]["source"]),
        model=", ".join(data["request"]["models"])[:200],
        winner=(
            f"{len(pools)} pool{'s' if len(pools) != 1 else ''}: "
            + "; ".join(f"{p['instance_type']} {p['precision']} TP{p['tp']}" for p in pools)
        )[:300]
        if winner
        else None,
        monthly_usd=winner["monthly_usd"] if winner else None,
        purchase=", ".join(options)[:32] if options else None,
        request=data["request"],
        result=data,
    )
    session.add(run)
    session.flush()
    return run


def load_recommendation(session: Session, recommendation_id: int) -> RecommendationRun:
    run = session.get(RecommendationRun, recommendation_id)
    if run is None:
        raise NotFoundError(
            f"no stored recommendation #{recommendation_id} (see `planner recommendations list`)"
        )
    return run


def list_recommendations(session: Session) -> list[RecommendationRun]:
    query = select(RecommendationRun).order_by(RecommendationRun.created_at, RecommendationRun.id)
    return list(session.scalars(query))


def list_briefs(session: Session) -> list[dict[str, Any]]:
    """:func:`brief` of every stored recommendation, oldest first, without reading their
    results (a result can run to megabytes)."""
    columns = (
        RecommendationRun.id,
        RecommendationRun.created_at,
        RecommendationRun.demand_source,
        RecommendationRun.model,
        RecommendationRun.winner,
        RecommendationRun.monthly_usd,
        RecommendationRun.purchase,
    )
    rows = session.execute(
        select(*columns).order_by(RecommendationRun.created_at, RecommendationRun.id)
    )
    return [{**row._asdict(), "created_at": row.created_at.isoformat()} for row in rows]


def brief(run: RecommendationRun) -> dict[str, Any]:
    return {
        "id": run.id,
        "created_at": run.created_at.isoformat(),
        "demand_source": run.demand_source,
        "model": run.model,
        "winner": run.winner,
        "monthly_usd": run.monthly_usd,
        "purchase": run.purchase,
    }
