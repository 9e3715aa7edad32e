"""Saving recommendations to the store and reading them back."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from planner.errors import NotFoundError, PlannerError
from planner.recommend.engine import Recommendation
from planner.store import Store
from planner.store.recommend_models import RecommendationRun

SAVE_ATTEMPTS = 3  # a store busy with another writer: tries, a second apart


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


def save_recommendation(session: Session, result: Recommendation) -> RecommendationRun:
    data = _json_ready(result.to_dict())
    winner = result.winner
    plan = result.plan
    constraints = result.request["constraints"]
    run = RecommendationRun(
        demand_source=str(result.demand["source"]),
        model=", ".join([constraints["model"], *constraints["alternative_models"]]),
        winner=(
            f"{winner['provider']}/{winner['region']}/{winner['instance_type']} "
            f"{winner['model']} {winner['precision']} TP{winner['tp']}"
            if winner
            else None
        ),
        monthly_usd=plan["chosen"]["monthly_usd"] if plan else None,
        purchase=plan["chosen"]["option"] if plan else None,
        request=data["request"],
        result=data,
    )
    session.add(run)
    session.flush()
    return run


def save_retrying(
    store: Store, result: Recommendation, data: dict[str, Any], *, wait_s: float = 1.0
) -> str | None:
    """Store ``result`` and put its id into ``data`` (its ``to_dict()``); a store busy with
    another writer is tried again. Returns why it could not be stored (None once stored): a
    search's result is never lost to a failed save, its caller still holds it."""
    reason = ""
    for attempt in range(1, SAVE_ATTEMPTS + 1):
        try:
            with store.session() as session:
                data["id"] = save_recommendation(session, result).id
            return None
        except (SQLAlchemyError, PlannerError, OSError) as exc:
            data.pop("id", None)
            reason = failure_reason(exc)
            busy = "locked" in reason or "busy" in reason
            if not busy or attempt == SAVE_ATTEMPTS:
                break
            time.sleep(wait_s)
    return reason


def failure_reason(exc: BaseException) -> str:
    """One line about a store failure, without the SQL statement and its parameters."""
    if isinstance(exc, PlannerError):
        return str(exc)
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).splitlines()[0] if str(exc) else ""
    return f"{type(orig or exc).__name__}: {text}" if text else type(orig or exc).__name__


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
