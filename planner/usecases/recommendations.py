"""Stored recommendations, listed and opened: ``planner recommendations list|show`` and the
dashboard's stored-recommendation pickers both call these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.errors import StoreError
from planner.store.recommendations import brief, list_briefs, load_recommendation
from planner.usecases import SessionScope


@dataclass(frozen=True)
class StoredRecommendation:
    """One stored recommendation: its brief (id, created_at, demand_source, model, winner,
    monthly_usd, purchase) and its whole result, as stored."""

    header: dict[str, Any]
    result: Any


def stored_recommendations(sessions: SessionScope) -> list[dict[str, Any]]:
    """Briefs of the stored recommendations, oldest first (no full results read)."""
    with sessions() as session:
        if session is None:
            raise StoreError("stored recommendations are read from a store")
        return list_briefs(session)


def open_recommendation(recommendation_id: int, sessions: SessionScope) -> StoredRecommendation:
    """Stored recommendation ``recommendation_id``; a NotFoundError names the command that
    lists them."""
    with sessions() as session:
        if session is None:
            raise StoreError("stored recommendations are read from a store")
        run = load_recommendation(session, recommendation_id)
        return StoredRecommendation(brief(run), run.result)
