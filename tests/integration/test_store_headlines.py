"""Headline figures of the latest forecast and recommendation, read from stored rows (SQLite,
and PostgreSQL when configured). The rows carry the JSON ``planner forecast`` and ``planner
recommend`` store (the keys as they write them); the dashboard's tests read the demo's real
ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from planner.store import ForecastRun, RecommendationRun, Store
from planner.store.headlines import (
    forecast_headline,
    latest_forecast,
    latest_recommendation,
    recommendation_headline,
)

T0 = datetime(2025, 1, 6, tzinfo=UTC)


def _cost(**values: float | int | None) -> dict[str, Any]:
    cost: dict[str, Any] = {
        "hours": 168,
        "total_usd": 420.0,
        "reserved_usd": 370.0,
        "savings_plan_usd": 0.0,
        "on_demand_usd": 50.0,
        "served_instance_hours": 1200.0,
        "reserved_instances": 7,
        "reserved_utilization": 0.96,
        "savings_plan_utilization": None,
    }
    cost.update(values)
    return cost


def _result(winner: bool = True, cost: dict[str, Any] | None = None) -> dict[str, Any]:
    option = "committed-3y" if cost is None or cost["reserved_instances"] else "savings-plan-1y"
    return {
        "winner": {
            "gpu": "L4",
            "usd_per_million_tokens": 0.025,
            "p99_ttft_s": 1.08,
            "p99_tpot_s": 0.12,
            "peak_instances": 9,
            "mean_instances": 7.1,
            "on_demand_monthly_usd": 3670.0,
        }
        if winner
        else None,
        "plan": {
            "chosen": {
                "option": option,
                "commitment_level": 7 if option == "committed-3y" else 2.5,
                "commitment_unit": "instances" if option == "committed-3y" else "usd_per_hour",
                "monthly_usd": 1828.0,
                "cost": cost or _cost(),
            },
            "all_on_demand_monthly_usd": 3670.0,
            "savings_vs_on_demand_monthly_usd": 1842.0,
            "savings_vs_on_demand_pct": 50.19,
        }
        if winner
        else None,
        "hourly": {"hour_start": [1737331200.0, 1737334800.0], "instances": [6.0, 7.0]},
    }


def _request(**slos: dict[str, float | None]) -> dict[str, Any]:
    return {"targets": {"slos": slos, "quantile": 0.99}}


def _recommendation(
    created: datetime, result: dict[str, Any], request: dict[str, Any]
) -> RecommendationRun:
    return RecommendationRun(
        demand_source="forecast #1",
        model="llama-3.1-8b",
        winner="gcp/us-east4/g2-standard-4 llama-3.1-8b fp8 TP1" if result["winner"] else None,
        monthly_usd=1828.0 if result["winner"] else None,
        purchase=result["plan"]["chosen"]["option"] if result["plan"] else None,
        request=request,
        result=result,
        created_at=created,
    )


def _forecast(created: datetime, scores: dict[str, Any]) -> ForecastRun:
    return ForecastRun(
        source="file rates.csv",
        model=None,
        metric="requests",
        method="prophet",
        history_start=T0,
        history_end=T0 + timedelta(days=14),
        horizon_hours=168,
        demand_quantile=0.9,
        settings={},
        scores=scores,
        created_at=created,
    )


def test_latest_rows_are_the_newest(store: Store) -> None:
    with store.session() as session:
        assert latest_forecast(session) is None and latest_recommendation(session) is None
        session.add_all(
            [
                _forecast(T0 + timedelta(days=2), {}),
                _forecast(T0 + timedelta(days=1), {}),
                _recommendation(T0 + timedelta(days=1), _result(), _request()),
                _recommendation(T0 + timedelta(days=3), _result(winner=False), _request()),
            ]
        )
    with store.session() as session:
        forecast = latest_forecast(session)
        recommendation = latest_recommendation(session)
        assert forecast is not None and forecast.created_at == T0 + timedelta(days=2)
        assert recommendation is not None and recommendation.winner is None


def test_recommendation_headline(store: Store) -> None:
    request = _request(
        default={"ttft_s": 2.0, "tpot_s": 0.2, "e2e_s": None},
        batch={"ttft_s": 5.0, "tpot_s": 0.1, "e2e_s": None},
    )
    with store.session() as session:
        session.add(_recommendation(T0, _result(), request))
    with store.session() as session:
        run = latest_recommendation(session)
        assert run is not None
        head = recommendation_headline(run)
    assert (head.monthly_usd, head.on_demand_monthly_usd) == (1828.0, 3670.0)
    assert (head.savings_usd, head.savings_pct) == (1842.0, 50.19)
    assert head.usd_per_million_tokens == 0.025
    assert (head.p99_ttft_s, head.p99_tpot_s) == (1.08, 0.12)
    # the strictest target of each kind over the classes, as the search plans for
    assert (head.target_ttft_s, head.target_tpot_s, head.quantile) == (2.0, 0.1, 0.99)
    assert (head.commitment_level, head.commitment_unit, head.purchase) == (
        7.0,
        "instances",
        "committed-3y",
    )
    # 7 reserved instances, 96% used, over 168 h, of 1200 instance-hours served
    assert head.committed_hours_share == pytest.approx(0.96 * 7 * 168 / 1200)
    assert head.committed_spend_share == pytest.approx(370 / 420)
    assert head.commitment_utilization == 0.96
    assert head.hourly_instances == [6.0, 7.0] and len(head.hourly_start_s) == 2


def test_savings_plan_coverage_is_by_spend() -> None:
    cost = _cost(
        reserved_instances=0,
        reserved_usd=0.0,
        reserved_utilization=None,
        savings_plan_usd=300.0,
        savings_plan_utilization=0.8,
    )
    head = recommendation_headline(_recommendation(T0, _result(cost=cost), _request()))
    assert head.committed_hours_share is None
    assert head.committed_spend_share == pytest.approx(300 / 420)
    assert head.commitment_utilization == 0.8
    assert head.commitment_unit == "usd_per_hour"


def test_all_on_demand_covers_nothing() -> None:
    cost = _cost(reserved_instances=0, reserved_usd=0.0, reserved_utilization=None)
    head = recommendation_headline(_recommendation(T0, _result(cost=cost), _request()))
    assert head.committed_hours_share == 0.0 and head.committed_spend_share == 0.0


def test_no_winner_has_no_figures() -> None:
    head = recommendation_headline(_recommendation(T0, _result(winner=False), _request()))
    assert head.winner is None
    assert head.monthly_usd is None and head.savings_usd is None and head.p99_ttft_s is None
    assert head.committed_spend_share is None


def test_forecast_headline_with_and_without_a_backtest() -> None:
    scores = {
        "backtest": {
            "prophet": {"mape": 0.21448},
            "baseline": {"mape": 0.22959},
            "beats_baseline": True,
            "baseline_name": "same hour last week",
        }
    }
    head = forecast_headline(_forecast(T0, scores))
    assert (head.mape, head.baseline_mape, head.beats_baseline) == (0.21448, 0.22959, True)
    assert head.baseline_name == "same hour last week" and head.horizon_hours == 168
    bare = forecast_headline(_forecast(T0, {"backtest": None}))
    assert bare.mape is None and bare.baseline_mape is None and bare.beats_baseline is None
