"""The fleet search (planner.recommend.mix): the MILP's assignment on known answers, the size
buckets, the savings plan across pools, and, over random workloads, the property the search
promises: the fleet never costs more than the best single pool of each model and every pool
meets its P99 targets in simulation."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.errors import UsageError
from planner.recommend.inputs import Constraints, Demand, Request, SearchOptions, Targets
from planner.recommend.mix import (
    FleetRequest,
    ModelDemand,
    assign,
    bucket_edges,
    fleet_savings_plans,
    recommend_fleet,
    sub_demand,
)
from planner.simulate.metrics import SLO
from planner.workload.rates import RateCurve
from pricing.model import PricePoint, PurchaseOption
from tests.integration.test_recommend_engine import point, profile_for

START = datetime(2024, 1, 1, tzinfo=UTC)
PRICES = [
    point("g6.xlarge", "L4", 1, 0.8),
    point("g5.xlarge", "A10G", 1, 1.0),
    point("p5.4xlarge", "H100-SXM", 1, 4.0),
]


def test_the_milp_splits_buckets_when_that_is_cheaper() -> None:
    # A: $1 an instance, 5 req/s of short prompts, cannot serve long ones; B: $4, 10 req/s
    # of either. All on B: 2 instances, $8. Short on A (2 instances) and long on B (1): $6.
    capacity = np.array([[5.0, 10.0], [0.0, 10.0]])
    found = assign([10.0, 10.0], capacity, [1, 1], [1.0, 4.0])
    assert found is not None
    assert found.choice == (0, 1)
    assert found.instances == {0: 2, 1: 1}
    assert found.cost == pytest.approx(6.0)
    # with B at $1.90, all on B ($3.80) beats the split ($2 + $1.90)
    one = assign([10.0, 10.0], capacity, [1, 1], [1.0, 1.9])
    assert one is not None and one.choice == (1, 1) and one.cost == pytest.approx(3.8)


def test_the_milp_refuses_a_bucket_nothing_serves() -> None:
    assert assign([1.0, 1.0], np.array([[1.0], [0.0]]), [1], [1.0]) is None


def test_replicas_per_instance_count_in_the_assignment() -> None:
    # an 8-GPU instance holds 8 replicas: 40 req/s at 5 per replica is one instance
    found = assign([40.0], np.array([[5.0, 5.0]]), [8, 1], [7.0, 1.0])
    assert found is not None and found.choice == (0,) and found.instances == {0: 1}


def test_a_bucket_with_few_requests_joins_its_neighbour() -> None:
    inputs = np.array([100] * 97 + [600] * 2 + [9000] * 1, dtype=np.int64)
    assert bucket_edges(inputs, (512, 2048, 8192)) == []
    mixed = np.array([100] * 50 + [1000] * 46 + [3000] * 2 + [9000] * 2, dtype=np.int64)
    assert bucket_edges(mixed, (512, 2048, 8192)) == [512]


def test_a_part_of_the_demand_keeps_its_hours() -> None:
    rng = np.random.default_rng(1)
    inputs = rng.integers(10, 5000, 400).astype(np.int64)
    outputs = rng.integers(1, 200, 400).astype(np.int64)
    demand = Demand(RateCurve(START, np.array([100.0, 300.0, 0.0])), inputs, outputs, "t")
    keep = inputs < 1000
    part = sub_demand(demand, keep, "short")
    assert part.hours == 3
    assert part.curve.total_requests == pytest.approx(400 * keep.mean())
    assert part.inputs.max() < 1000


def _fleet(
    seed: int,
    ttft: float,
    tpot: float,
    scale: float,
    edges: tuple[int, ...],
    short_share: float | None = None,
    long: tuple[int, int] = (2000, 6000),
    prices: list[PricePoint] = PRICES,
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    n = 600
    share = rng.uniform(0.3, 0.9) if short_share is None else short_share
    short = np.arange(n) < round(n * share)
    inputs = np.where(short, rng.integers(50, 400, n), rng.integers(*long, n)).astype(np.int64)
    outputs = rng.integers(50, 300, n).astype(np.int64)
    rates = np.array([1.0, 2.0, 3.0, 1.5]) * 3600 * scale
    demand = Demand(RateCurve(START, rates), inputs, outputs, "random")
    targets = Targets({"default": SLO(ttft, tpot, None)})
    template = Request(
        demand,
        targets,
        Constraints(
            model="llama-3.1-8b",
            gpus=("L4", "A10G", "H100-SXM"),
            precisions=("bf16", "fp8"),
            tp_degrees=(1,),
            max_seqs=(64, 128),
            chunked_prefill=(True,),
        ),
        SearchOptions(verify_top=2, growth_check=False, compare_gpus=False, workers=1),
    )
    request = FleetRequest((ModelDemand("llama-3.1-8b", demand, targets),), template, edges)
    return recommend_fleet(request, prices, profile_for).to_dict()


@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 10_000),
    ttft=st.sampled_from([2.0, 5.0]),
    tpot=st.sampled_from([0.1, 0.2]),
    scale=st.sampled_from([0.5, 4.0, 12.0]),
)
def test_the_fleet_never_costs_more_than_one_pool_and_meets_its_targets(
    seed: int, ttft: float, tpot: float, scale: float
) -> None:
    data = _fleet(seed, ttft, tpot, scale, (1024,))
    winner = data["winner"]
    assert winner is not None
    assert winner["monthly_usd"] <= winner["single_pool_monthly_usd"] + 1e-6
    assert winner["saving_vs_single_pool_usd"] >= -1e-6
    assert winner["monthly_usd"] == pytest.approx(sum(p["monthly_usd"] for p in winner["pools"]))
    assert sum(p["share_of_requests"] for p in winner["pools"]) == pytest.approx(1.0)
    for pool in winner["pools"]:
        assert pool["verified"]
        assert pool["p99_ttft_s"] <= ttft and pool["p99_tpot_s"] <= tpot
    # the fleet by hour is the pools' fleets added up
    hourly = data["hourly"]
    summed = np.sum([v for v in hourly["instances_by_pool"].values()], axis=0)
    assert np.allclose(summed, hourly["instances"])


def test_short_prompts_go_to_the_cheap_gpu_and_long_ones_to_the_fast_one() -> None:
    """70% chat-sized prompts, 30% of 3,000-7,000 tokens, ~50 requests/s at peak, TTFT 10 s
    and TPOT 200 ms: the short ones are cheapest on L4, the long ones on H100; two verified
    pools, 5% cheaper than all on H100 (measured 2026-12-07: $5,548 against $5,840)."""
    rng = np.random.default_rng(0)
    n = 2000
    inputs = np.concatenate(
        [rng.integers(50, 400, int(n * 0.7)), rng.integers(3000, 7000, n - int(n * 0.7))]
    ).astype(np.int64)
    outputs = rng.integers(50, 300, n).astype(np.int64)
    rates = np.array([3000.0, 6000.0, 9000.0, 5000.0]) * 20
    demand = Demand(RateCurve(START, rates), inputs, outputs, "chat and documents")
    targets = Targets({"default": SLO(10.0, 0.2, None)})
    constraints = Constraints(
        model="llama-3.1-8b",
        gpus=("L4", "A10G", "H100-SXM"),
        precisions=("bf16", "fp8"),
        tp_degrees=(1,),
        max_seqs=(64, 128),
        chunked_prefill=(True,),
    )
    options = SearchOptions(verify_top=3, growth_check=False, workers=1)
    template = Request(demand, targets, constraints, options)
    request = FleetRequest((ModelDemand("llama-3.1-8b", demand, targets),), template, (1024,))
    winner = recommend_fleet(request, PRICES, profile_for).to_dict()["winner"]
    pools = {tuple(p["input_tokens_range"]): p for p in winner["pools"]}
    assert set(pools) == {(0, 1024), (1024, None)}
    assert pools[(0, 1024)]["gpu"] == "L4"
    assert pools[(1024, None)]["gpu"] == "H100-SXM"
    assert pools[(0, 1024)]["share_of_requests"] == pytest.approx(0.7)
    assert 0 < winner["saving_vs_single_pool_usd"] < winner["single_pool_monthly_usd"]


def test_size_buckets_must_increase() -> None:
    demand = Demand(RateCurve(START, np.array([10.0])), np.array([5]), np.array([5]), "t")
    targets = Targets({"default": SLO(1.0, None, None)})
    template = Request(demand, targets, Constraints(model="llama-3.1-8b"))
    with pytest.raises(UsageError, match="--size-buckets"):
        FleetRequest((ModelDemand("llama-3.1-8b", demand, targets),), template, (2048, 512))


def test_one_savings_plan_across_a_clouds_pools() -> None:
    """Two pools of steady fleets under one savings plan: the commitment is their spend at
    the plan's rates, all of it used, so the fleet costs that a month."""
    from types import SimpleNamespace

    from planner.recommend.space import Offer

    def offer(instance: str, gpu: str, od: float, sp: float) -> Offer:
        points = (
            point(instance, gpu, 1, od),
            point(instance, gpu, 1, sp, PurchaseOption.SAVINGS_PLAN_1Y),
        )
        return Offer("aws", "us-east-1", instance, gpu, 1, points)

    def pool(name: str, o: Offer, count: int, monthly: float) -> SimpleNamespace:
        screened = SimpleNamespace(
            candidate=SimpleNamespace(offer=o), instances=np.full(24, count), monthly_usd=monthly
        )
        return SimpleNamespace(name=name, screened=screened, monthly_usd=monthly)

    a = pool("a", offer("g6.xlarge", "L4", 1.0, 0.7), 3, 3 * 730.0)
    b = pool("b", offer("p5.4xlarge", "H100-SXM", 4.0, 3.0), 2, 8 * 730.0)
    [plan] = fleet_savings_plans([a, b])  # type: ignore[list-item]
    assert plan["option"] == "savings-plan-1y"
    assert plan["usd_per_hour"] == pytest.approx(3 * 0.7 + 2 * 3.0)
    assert plan["monthly_usd"] == pytest.approx((3 * 0.7 + 2 * 3.0) * 730)
    assert plan["saving_usd"] == pytest.approx(11 * 730 - 8.1 * 730)
    assert plan["utilization"] == pytest.approx(1.0)


def _two_quiet_models(colocate: bool) -> dict[str, Any]:
    """Llama-3.1-8B and Mistral-7B at 0.2 requests/s each: each alone needs one L4, and the two
    fit on one at FP8 and meet their targets together."""
    rng = np.random.default_rng(5)
    models = []
    for name in ("llama-3.1-8b", "mistral-7b"):
        inputs = rng.integers(100, 1500, 300).astype(np.int64)
        outputs = rng.integers(50, 300, 300).astype(np.int64)
        demand = Demand(RateCurve(START, np.array([720.0, 720.0])), inputs, outputs, name)
        models.append(ModelDemand(name, demand, Targets({"default": SLO(2.0, 0.1, None)})))
    template = Request(
        models[0].demand,
        models[0].targets,
        Constraints(
            model="llama-3.1-8b",
            gpus=("L4",),
            precisions=("bf16", "fp8"),
            tp_degrees=(1,),
            max_seqs=(64,),
            chunked_prefill=(True,),
        ),
        SearchOptions(verify_top=2, growth_check=False, compare_gpus=False, workers=1),
    )
    request = FleetRequest(tuple(models), template, (), colocate=colocate)
    return recommend_fleet(request, PRICES, profile_for).to_dict()


def test_quiet_small_models_share_an_instance_when_they_fit_and_meet_their_targets() -> None:
    apart = _two_quiet_models(colocate=False)["winner"]
    assert [p["models"] for p in apart["pools"]] == [["llama-3.1-8b"], ["mistral-7b"]]
    together = _two_quiet_models(colocate=True)
    winner = together["winner"]
    [pool] = winner["pools"]
    assert pool["models"] == ["llama-3.1-8b", "mistral-7b"]
    assert pool["instances_peak"] == 1 and pool["share_of_requests"] == pytest.approx(1.0)
    # the pair was checked: memory split by the rule, both models' P99s simulated together
    check = pool["colocation"]
    memory = check["memory"]
    assert memory["fits"] and len(memory["members"]) == 2
    assert sum(m["share"] for m in memory["members"]) <= memory["budget"] + 1e-9
    assert check["precisions"] == {"llama-3.1-8b": "fp8", "mistral-7b": "fp8"}
    assert pool["p99_tpot_s"] <= 0.1 and pool["p99_ttft_s"] <= 2.0
    assert all(m["stretch"] > 1.0 for m in check["simulated"]["members"])  # they interfere
    # one instance instead of two; each model bears its share of it
    assert winner["monthly_usd"] == pytest.approx(apart["monthly_usd"] / 2)
    shares = [m["monthly_usd"] for m in together["models"]]
    assert sum(shares) == pytest.approx(winner["monthly_usd"])


def test_runners_up_are_the_best_of_each_other_gpu_type_near_the_leader() -> None:
    from types import SimpleNamespace

    from planner.recommend.engine import RUNNER_UP_MARGIN, runners_up

    def fleet(gpu: str, usd: float) -> SimpleNamespace:
        return SimpleNamespace(
            candidate=SimpleNamespace(offer=SimpleNamespace(gpu=gpu)), monthly_usd=usd
        )

    leaders = [
        fleet("L4", 100.0),
        fleet("L4", 110.0),  # the leader's own type: not a runner-up
        fleet("A10G", 120.0),
        fleet("A10G", 125.0),  # its type's second: only the cheapest is
        fleet("H100-SXM", 100.0 * RUNNER_UP_MARGIN + 1),  # too dear to come under the leader
    ]
    found = runners_up(leaders)  # type: ignore[arg-type]
    assert [(s.candidate.offer.gpu, s.monthly_usd) for s in found] == [("A10G", 120.0)]


def test_a_quiet_model_is_bought_by_the_token_beside_a_busy_one_self_hosted() -> None:
    """Two models in one fleet: the 8B at 0.05 requests/s costs less on an API than on any
    GPU kept all month; the 70B at 30 requests/s is cheaper self-hosted. The 8B leaves the GPU
    fleet for an API pool, and the fleet's cost is its pools' plus the API's."""
    from pricing.api import cost_usd, load_api_snapshot

    rng = np.random.default_rng(2)
    inputs = rng.integers(800, 1200, 400).astype(np.int64)
    outputs = rng.integers(150, 250, 400).astype(np.int64)
    targets = Targets({"default": SLO(3.0, 0.1, None)})
    shape = np.array([0.6, 1.0, 0.8]) * 3600

    def demand(rps: float, name: str) -> Demand:
        return Demand(RateCurve(START, shape * rps), inputs, outputs, name)

    quiet, busy = demand(0.05, "quiet"), demand(30.0, "busy")
    template = Request(
        busy,
        targets,
        Constraints(
            model="llama-3.1-70b",
            gpus=("L4", "H100-SXM"),
            precisions=("fp8",),
            tp_degrees=(1,),
            max_seqs=(64,),
        ),
        SearchOptions(
            verify_top=1,
            growth_check=False,
            compare_gpus=False,
            workers=1,
            confidence=None,
            disaggregation="off",
            api_provider="fireworks",
            api_overflow=False,
        ),
    )
    request = FleetRequest(
        (
            ModelDemand("llama-3.1-8b", quiet, targets),
            ModelDemand("llama-3.1-70b", busy, targets),
        ),
        template,
        (),
    )
    data = recommend_fleet(request, PRICES, profile_for, api_prices=load_api_snapshot()).to_dict()
    winner = data["winner"]
    models = {m["model"]: m for m in data["models"]}
    assert models["llama-3.1-8b"]["choice"] == "api" and models["llama-3.1-8b"]["pools"] == []
    assert models["llama-3.1-70b"]["choice"] == "self-hosted"
    [on_api] = winner["api_pools"]
    assert on_api["kind"] == "api" and on_api["pool"] == "llama-3.1-8b"
    assert [p["models"] for p in winner["pools"]] == [["llama-3.1-70b"]]
    pools = [*winner["pools"], on_api]
    assert sum(p["share_of_requests"] for p in pools) == pytest.approx(1.0)
    # the API's bill: the quiet model's month of tokens at the offer's prices, below what its
    # own GPU pool would cost
    api = models["llama-3.1-8b"]["api"]
    assert on_api["monthly_usd"] == pytest.approx(
        cost_usd(
            load_api_snapshot()[0].__class__(
                **{k: v for k, v in api["offer"].items() if k != "monthly_usd"}
            ),
            api["month"]["input_tokens"],
            api["month"]["output_tokens"],
        )
    )
    assert on_api["monthly_usd"] < models["llama-3.1-8b"]["single_pool_monthly_usd"]
    assert winner["monthly_usd"] == pytest.approx(
        sum(p["monthly_usd"] for p in winner["pools"]) + on_api["monthly_usd"]
    )
    # without API prices both models are self-hosted
    plain = recommend_fleet(request, PRICES, profile_for).to_dict()["winner"]
    assert plain["api_pools"] == [] and len(plain["pools"]) == 2
