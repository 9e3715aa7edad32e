"""Per-token APIs beside self-hosting (planner.recommend.api): on the same lengths, a tiny load
goes to the API, a large one to the self-hosted fleet, and the break-even between them is
where the two monthly costs meet, inside the two loads; ``never`` asks nothing and ``only``
names the API whatever it costs."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import numpy as np
import pytest

from planner.recommend.api import Tokens, break_even
from planner.recommend.engine import recommend
from planner.recommend.inputs import Constraints, Demand, Request, SearchOptions, Targets
from planner.simulate.metrics import SLO
from planner.workload.rates import RateCurve
from pricing.api import TokenPrice, cost_usd, load_api_snapshot
from tests.integration.test_recommend_engine import point, profile_for

START = datetime(2024, 1, 1, tzinfo=UTC)
PRICES = [point("p5.48xlarge", "H100-SXM", 8, 32.0), point("p5.4xlarge", "H100-SXM", 1, 4.0)]


def _run(
    rps: float, api: str = "allow", provider: str | None = "fireworks", **options: Any
) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    inputs = rng.integers(800, 1200, 600).astype(np.int64)
    outputs = rng.integers(150, 250, 600).astype(np.int64)
    demand = Demand(RateCurve(START, np.array([0.6, 1.0, 0.8]) * 3600 * rps), inputs, outputs, "t")
    request = Request(
        demand,
        Targets({"default": SLO(ttft_s=3.0, tpot_s=0.1)}),
        Constraints(model="llama-3.1-70b", precisions=("fp8",)),
        SearchOptions(
            workers=1,
            verify_top=2,
            growth_check=False,
            confidence=None,
            disaggregation="off",
            api=api,
            api_provider=provider,
            **options,
        ),
    )
    result = recommend(request, PRICES, profile_for=profile_for, api_prices=load_api_snapshot())
    return result.to_dict()


def test_a_tiny_load_buys_tokens_a_large_one_self_hosts_and_the_break_even_is_between() -> None:
    # the overflow plan aside (it wins at 40 requests/s: the next test)
    tiny, large = _run(0.05), _run(40.0, api_overflow=False)
    assert tiny["api"]["choice"] == "api" and large["api"]["choice"] == "self-hosted"
    for data in (tiny, large):
        api = data["api"]
        assert api["offer"]["provider"] == "fireworks"
        assert api["self_hosted_monthly_usd"] == pytest.approx(data["winner"]["monthly_usd"])
        # the API's bill worked by hand from the month's tokens
        month = api["month"]
        price = TokenPrice(**{k: v for k, v in api["offer"].items() if k != "monthly_usd"})
        assert api["api_monthly_usd"] == pytest.approx(
            cost_usd(price, month["input_tokens"], month["output_tokens"])
        )
    # the break-even lies between the two loads, and the costs meet there
    rps_tiny = tiny["api"]["month"]["requests"] / (730 * 3600)
    rps_large = large["api"]["month"]["requests"] / (730 * 3600)
    for data in (tiny, large):
        even = data["api"]["break_even"]
        assert rps_tiny < even["requests_per_s"] < rps_large
    assert tiny["api"]["api_monthly_usd"] < tiny["api"]["self_hosted_monthly_usd"]
    assert large["api"]["api_monthly_usd"] > large["api"]["self_hosted_monthly_usd"]


def test_never_asks_nothing_and_only_names_the_api() -> None:
    assert "api" not in _run(40.0, api="never")
    assert "overflow" not in _run(40.0, api="never")
    only = _run(40.0, api="only")
    assert only["api"]["choice"] == "api"
    assert only["api"]["api_monthly_usd"] > only["api"]["self_hosted_monthly_usd"]
    # no offer of this provider serves the model: nothing to compare
    assert "api" not in _run(0.05, provider="openai")


def test_the_break_even_on_a_known_curve() -> None:
    # the API: $1 per million tokens; self-hosting: $1,000 a month up to 1,000 M tokens, then
    # $2,000: they meet at 1,000 M tokens (a factor of 10 on 100 M tokens a month)
    price = TokenPrice(
        "test", "m", "m", None, 1.0, 1.0, None, None, None, None, None, "https://x", "2026-12-07"
    )
    tokens = Tokens(1e5, 5e7, 5e7)
    even = break_even(price, tokens, lambda f: 1000.0 if f * 1e8 <= 1e9 else 2000.0)
    assert even.load_factor == pytest.approx(10.0, rel=2e-3)
    assert even.tokens_per_month == pytest.approx(1e9, rel=2e-3)
    assert even.usd_per_month == pytest.approx(1000.0, rel=2e-3)
    never = break_even(price, tokens, lambda f: 1e12)
    assert never.load_factor is None


def test_the_cost_against_load_curve_the_chart_draws() -> None:
    api = _run(40.0)["api"]
    curve = api["curve"]
    assert len(curve) == 41
    rps = [c["requests_per_s"] for c in curve]
    assert rps == sorted(rps)
    # the API's cost is a straight line through zero; self-hosting never falls as load grows
    for c in curve:
        assert c["api_usd"] / c["requests_per_s"] == pytest.approx(
            curve[0]["api_usd"] / curve[0]["requests_per_s"]
        )
    hosted = [c["self_hosted_usd"] for c in curve]
    assert all(b >= a - 1e-6 for a, b in pairwise(hosted))
    # the lines cross where the break-even says
    even = api["break_even"]["requests_per_s"]
    below = [c for c in curve if c["requests_per_s"] < even * 0.9]
    above = [c for c in curve if c["requests_per_s"] > even * 1.5]
    assert all(c["api_usd"] < c["self_hosted_usd"] for c in below)
    assert any(c["api_usd"] > c["self_hosted_usd"] for c in above)


def test_an_overflow_plan_between_the_two_is_verified_and_cheaper_than_both() -> None:
    data = _run(40.0)
    api = data["api"]
    assert api["choice"] == "overflow"
    plan = api["overflow"]
    assert plan["verified"] and plan["rejected"] is None
    # cheaper than all on the API and all self-hosted
    assert plan["monthly_usd"] < min(api["api_monthly_usd"], api["self_hosted_monthly_usd"])
    # the base is smaller than the self-hosted fleet's peak and runs every hour
    winner = data["winner"]
    assert 0 < plan["base_replicas"] < winner["peak_replicas"]
    # its two pools: the base fleet and the API, whose bill is its tokens at the offer's price
    base, on_api = api["pools"]
    assert base["kind"] == "instance" and on_api["kind"] == "api"
    assert base["monthly_usd"] + on_api["monthly_usd"] == pytest.approx(plan["monthly_usd"])
    price = TokenPrice(**{k: v for k, v in api["offer"].items() if k != "monthly_usd"})
    assert on_api["monthly_usd"] == pytest.approx(
        cost_usd(price, on_api["input_tokens_per_month"], on_api["output_tokens_per_month"])
    )
    # the API pool carries the plan's share of the month's requests, at the demand's lengths
    month = api["month"]
    assert on_api["requests_per_month"] == pytest.approx(plan["api_share"] * month["requests"])
    assert on_api["input_tokens_per_month"] == pytest.approx(
        on_api["requests_per_month"] * month["input_tokens"] / month["requests"]
    )
    # the simulation sent a real share to the API, and every P99 target held with it
    check = plan["verification"]
    assert check["passed"] and check["overflow"]["requests"] > 0
    assert check["p99"]["default"]["ttft"] <= 3.0 and check["p99"]["default"]["tpot"] <= 0.1
    assert 0 < plan["api_share"] < 0.5
    # the month's share is at least what the fluid estimate says (queues send earlier)
    assert plan["api_share"] >= plan["api_share_estimate"] * 0.99


def test_an_api_too_slow_for_the_targets_carries_no_overflow() -> None:
    # a 2 s median to the first token: its P99 (~4 s) is over the 3 s target
    api = _run(40.0, api_ttft_s=2.0)["api"]
    assert api["choice"] == "self-hosted"
    assert "time to first token" in api["overflow"]["rejected"]
    assert not api["overflow"]["verified"] and api["pools"] == []
