"""The Overview's headline of a stored fleet of pools: money added up over the pools, the worst
pool's P99s against the strictest target, the share of the spend on commitments."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.store import open_store
from planner.store.headlines import latest_recommendation, recommendation_headline
from tests.report.test_fleet_report import fleet_store, small_fleet


def test_a_fleet_headline_adds_up_its_pools(tmp_path: Path) -> None:
    fleet_store(tmp_path)
    data = small_fleet().to_dict()
    pools = data["winner"]["pools"]
    with open_store(f"sqlite:///{tmp_path / 'planner.db'}") as store, store.session() as session:
        run = latest_recommendation(session)
        assert run is not None
        headline = recommendation_headline(run)
    assert headline.pools == len(pools)
    assert headline.monthly_usd == pytest.approx(data["winner"]["monthly_usd"])
    on_demand = sum(p["plan"]["all_on_demand_monthly_usd"] for p in pools)
    assert headline.on_demand_monthly_usd == pytest.approx(on_demand)
    assert headline.savings_usd == pytest.approx(on_demand - data["winner"]["monthly_usd"])
    tokens = sum(p["monthly_usd"] / p["usd_per_million_tokens"] for p in pools)
    assert headline.usd_per_million_tokens == pytest.approx(data["winner"]["monthly_usd"] / tokens)
    assert headline.p99_ttft_s == max(p["p99_ttft_s"] for p in pools)
    assert headline.target_ttft_s == pytest.approx(2.0)
    costs = [p["plan"]["chosen"]["cost"] for p in pools]
    committed = sum(c["reserved_usd"] + c["savings_plan_usd"] for c in costs)
    assert headline.committed_spend_share == pytest.approx(
        committed / sum(c["total_usd"] for c in costs)
    )
    assert headline.hourly_instances == data["hourly"]["instances"]
