"""The Overview page's headlines: the latest recommendation and the latest forecast, read from
the stored rows (:mod:`planner.store.headlines`) and returned as values the page renders."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.store.forecasts import load_forecast, points_frame
from planner.store.headlines import (
    ForecastHeadline,
    RecommendationHeadline,
    forecast_headline,
    latest_forecast,
    latest_recommendation,
    recommendation_headline,
)
from planner.usecases import SessionScope

if TYPE_CHECKING:
    import pandas as pd


def recommendation_overview(sessions: SessionScope) -> RecommendationHeadline | None:
    """The headline of the latest stored recommendation; none when there is none (or no store)."""
    with sessions() as session:
        if session is None:
            return None
        run = latest_recommendation(session)
        return recommendation_headline(run) if run is not None else None


def forecast_overview(sessions: SessionScope) -> tuple[ForecastHeadline, pd.DataFrame] | None:
    """The headline of the latest stored forecast and its points (columns ``ds``, ``mean`` and
    the bands); none when there is none (or no store)."""
    with sessions() as session:
        if session is None:
            return None
        run = latest_forecast(session)
        if run is None:
            return None
        return forecast_headline(run), points_frame(load_forecast(session, run.id))
