"""``recommend()`` end to end (planner.recommend.engine) on small synthetic demands, with price
points made by hand so the right answer is known: the candidates are screened, the cheapest
verified in the simulator (serially, on a process pool, on Dask: the same answer), and only a
verified fleet is recommended.

Demand: ~2,000-token prompts and 100-300 output tokens for llama-3.1-8b, a few hours of
Poisson arrivals (or replayed bursts). A10G at $1/h prefills a 2,000-token prompt in ~365 ms
(its KV cache holds ~50k tokens: about twenty such requests), an H100-SXM at $4/h in ~50 ms
(the latency model's bundled profiles of 2026-12-01, kept in tests/fixtures: these tests pin
the search's behaviour on known answers, not the calibration, so they keep the profiles they
were measured under when the bundled ones are refitted, as issue 37 did).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from planner.latency.catalog import load_catalog
from planner.latency.model import LatencyModel
from planner.latency.profile import Profile, choose_profile
from planner.recommend.engine import Recommendation, recommend
from planner.recommend.inputs import Constraints, Demand, Request, SearchOptions, Targets
from planner.recommend.screen import Lengths, replica_capacity
from planner.recommend.space import enumerate_candidates
from planner.recommend.sweep import Screened, Sweep, adopt, size
from planner.recommend.verify import Runner
from planner.simulate.metrics import SLO
from planner.workload.rates import RateCurve
from pricing.model import PricePoint, Provider, PurchaseOption
from tests.conftest import profiles_2026_12_01
from tests.workloads import uniform_workload

START = datetime(2024, 1, 1, tzinfo=UTC)
MODEL = "llama-3.1-8b"
RATES = (2000.0, 4000.0, 6000.0, 3000.0)  # requests an hour: 0.6 to 1.7 per second


def point(
    instance_type: str,
    gpu: str,
    gpus: int,
    usd_per_hour: float,
    option: PurchaseOption = PurchaseOption.ON_DEMAND,
) -> PricePoint:
    return PricePoint(
        provider=Provider.AWS,
        region="us-east-1",
        instance_type=instance_type,
        gpu_model=gpu,
        gpu_count=gpus,
        purchase_option=option,
        usd_per_hour=usd_per_hour,
        source="test",
        effective_date="2024-01-01",
    )


A10G = point("g5.xlarge", "A10G", 1, 1.0)
H100 = point("p5.4xlarge", "H100-SXM", 1, 4.0)
H100_X8 = point("p5.48xlarge", "H100-SXM", 8, 32.0)
L4 = point("g6.xlarge", "L4", 1, 0.8)


def token_pool(size: int = 500) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    rng = np.random.default_rng(0)
    return (
        rng.integers(1800, 2200, size).astype(np.int64),
        rng.integers(100, 300, size).astype(np.int64),
    )


def demand(rates: Iterable[float] = RATES) -> Demand:
    inputs, outputs = token_pool()
    return Demand(RateCurve(START, np.array(list(rates))), inputs, outputs, "test")


def request(
    slo: SLO,
    gpus: tuple[str, ...] = ("A10G", "H100-SXM"),
    load: Demand | None = None,
    options: SearchOptions | None = None,
    **constraints: Any,
) -> Request:
    fields: dict[str, Any] = {
        "precisions": ("bf16",),
        "tp_degrees": (1,),
        "max_seqs": (128,),
        "chunked_prefill": (True,),
    }
    fields.update(constraints)
    return Request(
        demand=load or demand(),
        targets=Targets({"default": slo}),
        constraints=Constraints(model=MODEL, gpus=gpus, **fields),
        options=options or SearchOptions(verify_top=3, growth_check=False, workers=1),
    )


PROFILES = profiles_2026_12_01()


def profile_for(gpu: str) -> Profile:
    return choose_profile(PROFILES, gpu)


def run(req: Request, prices: list[PricePoint]) -> dict[str, Any]:
    result: Recommendation = recommend(req, prices, profile_for=profile_for)
    data = result.to_dict()
    check_only_verified_fleets_recommended(data)
    return data


def check_only_verified_fleets_recommended(data: dict[str, Any]) -> None:
    """What every recommendation must satisfy: the winner passed its simulation, it is the
    cheapest row that did, and nothing unverified is ranked above a verified one."""
    ranked = data["ranked"]
    winner = data["winner"]
    passed = [row for row in ranked if row["verified"]]
    if winner is None:
        assert passed == [] and data["plan"] is None
        return
    assert winner["verified"] is True
    assert winner["verification"]["passed"] is True
    assert winner["verification"]["misses"] == []
    # the winner is the first ranked row, listed as a fleet's pools are too (one pool)
    assert {k: v for k, v in winner.items() if k not in ("pools", "saving_vs_single_pool_usd")} == (
        ranked[0]
    )
    # one pool; a disaggregated winner's two (prefill, decode) on its instance type
    roles = ["prefill", "decode"] if winner.get("architecture") == "disaggregated" else [None]
    assert [p.get("role") for p in winner["pools"]] == roles
    assert {p["instance_type"] for p in winner["pools"]} == {ranked[0]["instance_type"]}
    assert winner["saving_vs_single_pool_usd"] == 0.0
    assert winner["monthly_usd"] == min(row["monthly_usd"] for row in passed)
    assert ranked[: len(passed)] == passed  # verified rows first
    for row in passed:
        assert row["verification"]["passed"] and row["attempts"] >= 1
    for row in ranked[len(passed) :]:
        assert row["verification"] is not None and not row["verification"]["passed"]
    assert set(data["pareto"]) <= {row["id"] for row in passed}
    # the front starts at the winner's cost (the winner itself unless a fleet at the same
    # cost is faster: the front weighs cost and P99s, not quality)
    assert any(
        r["monthly_usd"] == winner["monthly_usd"] for r in passed if r["id"] in data["pareto"]
    )
    assert data["plan"]["chosen"]["monthly_usd"] == pytest.approx(winner["monthly_usd"])
    assert max(winner_instances(data)) == winner["peak_instances"]


def winner_instances(data: dict[str, Any]) -> list[int]:
    return [int(i) for i in data["hourly"]["instances"]]


def rejected(data: dict[str, Any], **match: Any) -> list[dict[str, Any]]:
    return [r for r in data["rejected"] if all(r.get(k) == v for k, v in match.items())]


# --- known answers ------------------------------------------------------------------------


def test_tight_ttft_needs_the_h100() -> None:
    data = run(request(SLO(ttft_s=0.25, tpot_s=0.1)), [A10G, H100])
    winner = data["winner"]
    assert (winner["gpu"], winner["instance_type"]) == ("H100-SXM", "p5.4xlarge")
    assert winner["p99_ttft_s"] <= 0.25
    # one H100 serves every hour ($4 x 730 h)
    assert winner_instances(data) == [1, 1, 1, 1]
    assert winner["monthly_usd"] == pytest.approx(4.0 * 730)
    assert data["plan"]["chosen"]["option"] == "on-demand"  # no commitment price given
    [a10g] = rejected(data, gpu="A10G")
    assert a10g["reason"].startswith("misses-")
    assert a10g["stage"] in ("screen", "verify")
    # the screen's P99 at the lightest load is ~970 ms: the P99 prompt's prefill, one chunk of
    # decode batch, the iteration in progress
    assert a10g["reason"] == "misses-ttft"
    assert data["rejected_by_reason"] == {"misses-ttft": 1}
    assert data["stats"]["candidates"] == 2 and data["stats"]["runner"] == "serial"


def test_loose_ttft_takes_the_cheaper_a10g() -> None:
    data = run(request(SLO(ttft_s=2.0, tpot_s=0.1)), [A10G, H100])
    winner = data["winner"]
    assert winner["gpu"] == "A10G"
    assert winner["p99_ttft_s"] <= 2.0 and winner["p99_tpot_s"] <= 0.1
    h100 = next(row for row in data["ranked"] if row["gpu"] == "H100-SXM")
    assert h100["verified"]
    assert winner["monthly_usd"] < h100["monthly_usd"]
    # more A10Gs at peak than H100s, and still cheaper
    assert winner["peak_instances"] > h100["peak_instances"] == 1
    assert data["rejected"] == []


@pytest.mark.parametrize("max_loss", [None, 0.5])
def test_fp8_wins_when_its_quality_loss_is_allowed(max_loss: float | None) -> None:
    # 60,000 requests in the peak hour (17 per second): one FP8 H100, two in BF16 (the
    # simulator passes one BF16 H100 at 40,000: P99 TTFT 0.38 s, TPOT 45 ms)
    load = demand((30_000.0, 60_000.0, 45_000.0))
    req = request(
        SLO(ttft_s=0.5, tpot_s=0.05),
        gpus=("H100-SXM",),
        load=load,
        precisions=("bf16", "fp8"),
        max_quality_loss_pct=max_loss,
    )
    data = run(req, [H100])
    winner = data["winner"]
    assert winner["precision"] == "fp8"
    assert winner["quality_delta_pct"] == pytest.approx(-0.3)
    bf16 = next(row for row in data["ranked"] if row["precision"] == "bf16")
    assert winner["peak_instances"] == 1 < bf16["peak_instances"]
    assert winner["monthly_usd"] < bf16["monthly_usd"]
    assert rejected(data, reason="quality") == []


def test_bf16_wins_when_no_quality_loss_is_allowed() -> None:
    load = demand((30_000.0, 60_000.0, 45_000.0))
    req = request(
        SLO(ttft_s=0.5, tpot_s=0.05),
        gpus=("H100-SXM",),
        load=load,
        precisions=("bf16", "fp8"),
        max_quality_loss_pct=0.0,
    )
    data = run(req, [H100])
    winner = data["winner"]
    assert winner["precision"] == "bf16"
    assert winner["peak_instances"] == 2
    [fp8] = rejected(data, precision="fp8")
    assert (fp8["stage"], fp8["reason"]) == ("space", "quality")
    assert [row["precision"] for row in data["ranked"]] == ["bf16"]


def test_a_tie_goes_to_the_smaller_quality_loss() -> None:
    # 20,000 requests an hour: one H100 either way, the same price; BF16 is preferred
    load = demand((10_000.0, 20_000.0, 15_000.0))
    req = request(
        SLO(ttft_s=0.5, tpot_s=0.05), gpus=("H100-SXM",), load=load, precisions=("bf16", "fp8")
    )
    data = run(req, [H100])
    assert [row["precision"] for row in data["ranked"]] == ["bf16", "fp8"]
    assert data["ranked"][0]["monthly_usd"] == data["ranked"][1]["monthly_usd"]


# --- budget -------------------------------------------------------------------------------


def test_a_budget_below_every_fleet_gives_no_winner() -> None:
    data = run(request(SLO(ttft_s=2.0, tpot_s=0.1), budget_usd_per_month=100.0), [A10G, H100])
    assert data["winner"] is None
    assert data["plan"] is None
    assert data["ranked"] == [] and data["pareto"] == []
    over = rejected(data, reason="over-budget")
    assert {r["gpu"] for r in over} == {"A10G", "H100-SXM"}
    assert all(r["stage"] == "budget" and "budget $100" in r["detail"] for r in over)
    assert data["rejected_by_reason"] == {"over-budget": 2}
    assert data["stats"]["verified"] == 0 and data["stats"]["simulations"] == 0
    # the note names the budget and the cheapest screened cost, not a simulation failure
    assert any("budget" in n and "nothing was simulated" in n for n in data["notes"])
    assert "instances" not in data["hourly"]


def test_a_budget_between_the_fleets_keeps_the_affordable_one() -> None:
    data = run(request(SLO(ttft_s=0.25, tpot_s=0.1), budget_usd_per_month=3000.0), [A10G, H100])
    assert data["winner"]["gpu"] == "H100-SXM"
    assert data["winner"]["monthly_usd"] <= 3000.0


def test_the_winner_stays_within_the_budget_after_escalation() -> None:
    # bursty arrivals: the H100 ($2,920 a month for one instance) fails its first simulation
    # and needs a second instance; the $3,000 budget then rules it out (the A10G is over the
    # budget at the screen: measured 2026-12-01, 109 instances at peak, $79,570 a month)
    req = request(
        SLO(ttft_s=0.5, tpot_s=0.05), load=bursty_demand(20, 4.0), budget_usd_per_month=3000.0
    )
    data = run(req, [A10G, H100])
    assert data["winner"] is None
    grown = [r for r in rejected(data, reason="over-budget") if r["gpu"] == "H100-SXM"]
    assert grown and grown[0]["stage"] == "budget" and "once verified" in grown[0]["detail"]


# --- the verification ---------------------------------------------------------------------


def bursty_demand(burst: int, gap_s: float, hours: int = 2) -> Demand:
    """Replayed requests arriving ``burst`` at a time (within 50 ms) every ``gap_s`` seconds."""
    starts = np.arange(0.0, hours * 3600.0, gap_s)
    arrival = np.repeat(starts, burst) + np.tile(np.linspace(0.0, 0.05, burst), len(starts))
    workload = uniform_workload(arrival, 2000, 200, start=START)
    return Demand.from_workload(workload, f"bursts of {burst}")


def test_failed_verification_escalates_until_it_passes() -> None:
    # 5 requests/s on average, the screen's Poisson capacity is ~10.5/s: one replica; the
    # real arrivals come 20 at once every 4 s, which one replica cannot take in 500 ms (the
    # engine prefills up to 8,192 tokens an iteration: four of these prompts at a time; 10
    # every 2 s passed on one replica at P99 TTFT 460 ms). Measured 2026-12-01: the second
    # attempt, two replicas at 4.67 rps each, passes at P99 TTFT 439 ms
    load = bursty_demand(20, 4.0)
    assert load.replay is not None and load.curve.requests_per_hour.tolist() == [18000, 18000]
    options = SearchOptions(verify_top=3, growth_check=False, workers=1, tighten_steps=0)
    req = request(SLO(ttft_s=0.5, tpot_s=0.05), gpus=("H100-SXM",), load=load, options=options)
    data = run(req, [H100])
    winner = data["winner"]
    assert winner["attempts"] > 1
    assert winner["replica_capacity_rps"] < winner["screen"]["rps"]  # sized for less load
    assert winner["peak_replicas"] > 1
    assert winner["verification"]["attempt"] == winner["attempts"]
    # one candidate: every attempt simulated a bigger fleet
    assert data["stats"]["verifications"] == data["stats"]["simulations"] == winner["attempts"]


def test_a_fleet_that_never_passes_is_rejected_after_max_attempts() -> None:
    # 40 at once every 8 s: even three single-GPU instances miss; the 8-GPU instance passes
    load = bursty_demand(40, 8.0)
    data = run(
        request(SLO(ttft_s=0.5, tpot_s=0.05), gpus=("H100-SXM",), load=load), [H100, H100_X8]
    )
    assert data["winner"]["instance_type"] == "p5.48xlarge"
    small = next(row for row in data["ranked"] if row["instance_type"] == "p5.4xlarge")
    assert small["verified"] is False
    assert small["attempts"] == 3  # SearchOptions.max_attempts
    assert small["monthly_usd"] < data["winner"]["monthly_usd"]  # cheaper, but it failed
    # (disaggregated pairs on it may have been simulated and rejected too: their own reasons)
    [failed] = [
        r
        for r in rejected(data, instance_type="p5.4xlarge")
        if not r["reason"].startswith("disaggregated-")
    ]
    assert (failed["stage"], failed["reason"]) == ("verify", "misses-ttft")
    assert "after 3 attempt(s)" in failed["detail"]


def screened_on(instance: PricePoint) -> tuple[Screened, Request]:
    """The one candidate on ``instance`` (an H100 type), sized at its screened capacity."""
    req = request(SLO(ttft_s=0.5, tpot_s=0.05), gpus=("H100-SXM",))
    [cand], _ = enumerate_candidates([instance], req.constraints, load_catalog())
    model = LatencyModel(
        cand.serving(req.constraints).deployment(),
        profile_for("H100-SXM"),
    )
    lengths = Lengths(req.demand.inputs, req.demand.outputs)
    capacity = replica_capacity(
        model, lengths, req.targets.strictest(), max_seqs=128, chunked_prefill=True
    )
    return size(cand, capacity, capacity.rps, req, 0.0), req


def escalate(screened: Screened, req: Request) -> None:
    """One escalation step of the verification: 15% less load per replica until it grows."""
    with Runner(workers=1) as runner:
        bigger = Sweep(req, 0.0, {}, runner).resized(screened, 0.85)
    assert bigger is not None
    adopt(screened, bigger)


def test_escalate_grows_the_fleet() -> None:
    screened, req = screened_on(H100)
    assert screened.instances.tolist() == [1, 1, 1, 1]  # ~10 rps each, 1.7 rps at peak
    before, cost = screened.instances.copy(), screened.monthly_usd
    escalate(screened, req)
    assert np.all(screened.instances >= before)
    assert np.any(screened.instances > before)
    assert screened.instances.tolist() == [1, 1, 2, 1]  # the peak hour first
    assert screened.rps_per_replica < screened.capacity.rps  # the screen's figure is kept
    # the largest step 0.85^k below the capacity that needs a second replica at 6,000/h
    k = math.ceil(math.log(6000 / 3600 / screened.capacity.rps) / math.log(0.85))
    assert screened.rps_per_replica == pytest.approx(screened.capacity.rps * 0.85**k)
    assert screened.monthly_usd > cost
    assert np.array_equal(screened.replicas, screened.instances)


def test_escalate_grows_a_many_replica_instance() -> None:
    # 8 replicas each hour, 1.7 rps at peak: the capacity per replica must fall to a small
    # fraction of the screen's before a second instance is needed; an escalation that stopped
    # short would verify the very same fleet again
    screened, req = screened_on(H100_X8)
    assert screened.instances.tolist() == [1, 1, 1, 1]
    before = screened.instances.copy()
    escalate(screened, req)
    assert np.any(screened.instances > before)
    assert screened.instances.tolist() == [1, 1, 2, 1]
    assert np.array_equal(screened.replicas, screened.instances * 8)
    steps = np.log(screened.rps_per_replica / screened.capacity.rps) / np.log(0.85)
    assert steps == pytest.approx(round(steps)) and steps > 10  # whole 15% steps, many of them


def test_progress_reports_each_stage() -> None:
    seen: list[tuple[str, int, int]] = []
    recommend(
        request(SLO(ttft_s=2.0, tpot_s=0.1)),
        [A10G, H100],
        progress=lambda stage, done, total: seen.append((stage, done, total)),
    )
    stages = [s for s, _, _ in seen]
    assert stages[0] == "screen" and seen[0][1:] == (2, 2)
    assert "verify (round 1, attempt 1)" in stages
    assert (("verify (round 1, attempt 1)", 2, 2)) in seen


def test_min_replicas_zero_with_an_idle_hour() -> None:
    req = request(
        SLO(ttft_s=0.5, tpot_s=0.05),
        gpus=("H100-SXM",),
        load=demand((0.0, 20_000.0, 0.0)),
        min_replicas=0,
    )
    data = run(req, [H100])
    assert winner_instances(data) == [0, 1, 0]


# --- the same answer on every runner ------------------------------------------------------


def scrub(data: dict[str, Any]) -> dict[str, Any]:
    """The recommendation without wall-clock times (every ``*_s`` of the stats, each
    simulation's ``simulation_wall_s``) and the runner's own settings."""
    data = copy.deepcopy(data)
    data["stats"] = {
        k: v for k, v in data["stats"].items() if k != "runner" and not k.endswith("_s")
    }
    for key in ("workers", "dask"):
        data["request"]["options"].pop(key)
    for row in [*data["ranked"], *([data["winner"]] if data["winner"] else [])]:
        if row["verification"] is not None:
            row["verification"].pop("simulation_wall_s", None)  # the winner is ranked[0]
    return data


def sweep(options: SearchOptions) -> dict[str, Any]:
    """Twelve candidates on three GPU types, bursty real arrivals (20 at once every 4 s): the
    four L4 ones miss TPOT at the screen, the four H100 ones fail their first simulation and
    pass the second (escalated), over two verification rounds; the A10G ones screen at ~30x
    the H100's cost (measured 2026-12-01: 109 instances at peak, $79,570 a month against
    $5,840), two verified in the second round and two left unsimulated."""
    req = request(
        SLO(ttft_s=0.5, tpot_s=0.05),
        gpus=("A10G", "L4", "H100-SXM"),
        max_seqs=(64, 128),
        chunked_prefill=(True, False),
        load=bursty_demand(20, 4.0),
        options=options,
    )
    return run(req, [A10G, L4, H100])


def one_round(options: SearchOptions) -> dict[str, Any]:
    """Eight H100 candidates, four verified in one round, each passing its first simulation."""
    req = request(
        SLO(ttft_s=0.5, tpot_s=0.05),
        gpus=("H100-SXM",),
        precisions=("bf16", "fp8"),
        max_seqs=(64, 128),
        chunked_prefill=(True, False),
        options=options,
    )
    return run(req, [H100])


def test_serial_and_process_pool_give_the_same_answer() -> None:
    serial = sweep(SearchOptions(verify_top=4, growth_check=False, workers=1))
    assert serial["stats"]["runner"] == "serial"
    assert serial["stats"]["verify_rounds"] > 1
    assert serial["stats"]["verifications"] > serial["stats"]["verified"] >= 4  # escalations
    assert serial["winner"]["gpu"] == "H100-SXM" and serial["winner"]["attempts"] == 2
    pool = sweep(SearchOptions(verify_top=4, growth_check=False, workers=2))
    assert pool["stats"]["runner"] == "2 local processes"
    assert scrub(pool) == scrub(serial)


def test_dask_gives_the_same_answer() -> None:
    serial = one_round(SearchOptions(verify_top=4, growth_check=False, workers=1))
    assert (serial["stats"]["verify_rounds"], serial["stats"]["simulations"]) == (1, 4)
    dask = one_round(SearchOptions(verify_top=4, growth_check=False, workers=2, dask="local"))
    assert dask["stats"]["runner"] == "dask local"
    assert scrub(dask) == scrub(serial)


def test_dask_gives_the_same_answer_over_several_rounds() -> None:
    serial = sweep(SearchOptions(verify_top=4, growth_check=False, workers=1))
    dask = sweep(SearchOptions(verify_top=4, growth_check=False, workers=2, dask="local"))
    assert scrub(dask) == scrub(serial)


def test_a_runner_can_be_shared_between_sweeps() -> None:
    options = SearchOptions(verify_top=2, growth_check=False, workers=2)
    req = request(SLO(ttft_s=2.0, tpot_s=0.1), options=options)
    with Runner(workers=2) as runner:
        first = recommend(req, [A10G, H100], runner=runner, profile_for=profile_for).to_dict()
        again = recommend(req, [A10G, H100], runner=runner, profile_for=profile_for).to_dict()
    assert scrub(first) == scrub(again)
    assert first["winner"]["gpu"] == "A10G"


# --- tightening -----------------------------------------------------------------------------


@pytest.mark.parametrize("peak_per_hour", [26300, 53000])
def test_the_winner_is_tightened_onto_fewer_replicas_when_the_simulator_allows(
    peak_per_hour: int,
) -> None:
    # the screen is conservative here; the winner is re-simulated on smaller fleets and keeps
    # the smallest one that still passes. Measured 2026-12-01: with a 150 ms TTFT target the
    # screen gives an H100 replica 3.61 rps, bound by the wait for prompts ahead on one replica;
    # behind the least-loaded router a fleet's arrivals avoid the replicas busy prefilling, so
    # it holds more (about 4 rps each on two, 5 on three). These peaks (7.3 and 14.7 rps) sit
    # past 2 and 4 times 3.61 rps: the screen rounds up to 3 and 5 replicas and tightening
    # serves them on 2 and 3 or 4, its peak hour also at +10% load
    load = demand([peak_per_hour // 4, peak_per_hour // 2, peak_per_hour, peak_per_hour // 2])

    def winner(steps: int) -> dict[str, Any]:
        options = SearchOptions(verify_top=2, growth_check=False, workers=1, tighten_steps=steps)
        req = request(SLO(ttft_s=0.15, tpot_s=0.1), gpus=("H100-SXM",), load=load, options=options)
        found: dict[str, Any] = run(req, [H100])["winner"]
        return found

    plain, tight = winner(0), winner(3)
    assert plain["tightened_steps"] == 0
    assert tight["tightened_steps"] >= 1
    assert tight["monthly_usd"] < plain["monthly_usd"]
    assert tight["peak_replicas"] < plain["peak_replicas"]
    assert tight["replica_capacity_rps"] > plain["replica_capacity_rps"]
    # the tightened fleet is the one that was simulated last, and it passed
    assert tight["verification"]["passed"] and tight["verification"]["attempt"] == tight["attempts"]
    assert tight["p99_ttft_s"] <= 0.15 and tight["p99_tpot_s"] <= 0.1


# --- alternative models ---------------------------------------------------------------------


def test_alternative_models_are_searched_and_the_asked_for_one_wins_a_tie() -> None:
    req = request(
        SLO(ttft_s=2.0, tpot_s=0.1),
        gpus=("H100-SXM",),
        alternative_models=("qwen2.5-7b", "llama-3.1-70b"),
    )
    data = run(req, [H100])
    models = {row["model"] for row in data["ranked"]}
    assert {"llama-3.1-8b", "qwen2.5-7b"} <= models
    # one H100 serves this load with either small model: the model asked for wins the tie
    winner = data["winner"]
    assert winner["model"] == "llama-3.1-8b" and winner["alternative_model"] is False
    tied = [r for r in data["ranked"] if r["model"] == "qwen2.5-7b"]
    assert tied and all(r["alternative_model"] for r in tied)
    assert tied[0]["monthly_usd"] == winner["monthly_usd"]
    # 70B in bf16 does not fit one 80 GB H100: rejected before any latency is computed
    big = [r for r in data["rejected"] if r.get("model") == "llama-3.1-70b"]
    assert big and all(r["reason"] == "does-not-fit" for r in big)


# --- load growth -----------------------------------------------------------------------------


def test_the_growth_check_says_how_much_more_peak_load_the_winner_holds() -> None:
    load = demand([18000, 36000, 72000, 36000])
    options = SearchOptions(verify_top=2, workers=1, tighten_steps=3, tighten_margin=0.1)
    req = request(SLO(ttft_s=2.0, tpot_s=0.1), gpus=("H100-SXM",), load=load, options=options)
    winner = run(req, [H100])["winner"]
    growth = winner["load_headroom"]
    checked = growth["checked"]
    assert [c["load"] for c in checked] == [1.1, 1.2, 1.3, 1.5, 1.75, 2.0]
    # holds_up_to is the last load before the first miss, and misses carry their reason
    passed = [c["passed"] for c in checked]
    first_miss = passed.index(False) if False in passed else len(passed)
    assert growth["holds_up_to"] == (checked[first_miss - 1]["load"] if first_miss else 1.0)
    assert all(c["misses"] for c in checked if not c["passed"])
    if winner["tightened_steps"]:
        # a tightened fleet was required to hold +10% at peak, and the check agrees
        assert growth["holds_up_to"] >= 1.1
    # at double the load a fleet sized for this one must miss
    assert checked[-1]["passed"] is False


def test_tightening_keeps_a_margin_at_the_peak() -> None:
    # every tightening step also simulates the peak hour at +margin load; a fleet that only
    # just serves the demand is not taken. Measured 2026-12-01 (150 ms TTFT, 14.7 rps at peak):
    # without a margin three steps take the screen's fleet to 3 replicas at peak ($5,840 a
    # month); with a +50% margin the second step's peak-hour check fails: 5 ($9,490)
    load = demand([13250, 26500, 53000, 26500])

    def result(margin: float) -> dict[str, Any]:
        options = SearchOptions(
            verify_top=2, workers=1, growth_check=False, tighten_steps=3, tighten_margin=margin
        )
        req = request(SLO(ttft_s=0.15, tpot_s=0.1), gpus=("H100-SXM",), load=load, options=options)
        return run(req, [H100])

    bare, kept = result(0.0), result(0.5)
    assert bare["winner"]["tightened_steps"] >= 1
    # with the margin the peak-hour checks are simulations of their own
    assert kept["stats"]["simulations"] - kept["stats"]["verifications"] >= 1
    assert kept["winner"]["tightened_steps"] < bare["winner"]["tightened_steps"]
    assert kept["winner"]["monthly_usd"] > bare["winner"]["monthly_usd"]
