"""Co-location (issue 32): the memory rule (planner.recommend.colocate) and the simulation of
models time-sharing the GPUs (planner.simulate.colocate)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import cache

import numpy as np
import pytest

from planner.errors import UsageError
from planner.latency.catalog import GIB, load_catalog
from planner.latency.engines import deploy, get_engine
from planner.latency.model import Deployment, LatencyModel
from planner.latency.profile import Profile, choose_profile, load_bundled_profiles
from planner.recommend.colocate import MIN_KV_TOKENS, ColocationFit, colocation_fit
from planner.simulate.colocate import (
    ColocatedMember,
    MemberOutcome,
    StretchedStepTimes,
    simulate_colocated,
)
from planner.simulate.engine import (
    VLLM_WATERMARK,
    EngineConfig,
    LinearStepTimes,
    RooflineStepTimes,
)
from planner.simulate.fleet import FleetConfig
from planner.simulate.run import ServingSpec, simulate
from planner.simulate.workload import Workload

pytestmark = pytest.mark.unit

GPU = "H100-SXM"
SMALL = "llama-3.1-8b"
LARGE = "llama-3.1-70b"


# --- the memory rule -----------------------------------------------------------------------


def _deployed(engine: str, model: str, utilization: float | None, max_seqs: int) -> Deployment:
    catalog = load_catalog()
    return deploy(
        engine,
        catalog.gpus.get(GPU),
        catalog.models.get(model),
        catalog.precisions.get("bf16"),
        1,
        memory_utilization=utilization,
        max_seqs=max_seqs,
    )


def test_two_8b_models_fit_one_h100_under_vllm() -> None:
    fit = colocation_fit("vllm", GPU, 1, [(SMALL, "bf16", 256), (SMALL, "bf16", 64)])
    assert fit.fits and fit.reason == ""
    assert fit.budget == get_engine("vllm").memory_fraction
    assert fit.total_share <= fit.budget
    busy, quiet = fit.members
    # the rest is split by KV bytes per token x max_seqs: four times the sequences, more memory
    assert busy.share > quiet.share
    for member in fit.members:
        assert member.setting_name == "gpu_memory_utilization"
        assert member.setting == member.share  # vLLM's flag is the share itself
        # the engine's own sizing at that share, and at least one 8k-token sequence
        sized = _deployed("vllm", SMALL, member.share, member.max_seqs)
        assert member.kv_capacity_tokens == sized.kv_capacity_tokens
        assert member.kv_capacity_tokens >= member.min_kv_tokens == MIN_KV_TOKENS
        assert member.share * sized.gpu.memory_bytes / GIB >= member.need_gib


def test_two_70b_models_do_not_fit_and_the_reason_names_the_model_and_the_gib() -> None:
    fit = colocation_fit("vllm", GPU, 1, [(LARGE, "bf16", 256), (LARGE, "bf16", 256)])
    assert not fit.fits
    assert LARGE in fit.reason
    short = float(re.search(r"([\d.]+) GiB short", fit.reason).group(1))  # type: ignore[union-attr]
    d = _deployed("vllm", LARGE, None, 256)
    need = d.weight_bytes_per_gpu + d.activation_reserve_bytes + 8192 * d.kv_bytes_per_token
    assert short == pytest.approx((need - 0.9 * d.gpu.memory_bytes) / GIB, abs=0.1)
    assert all(m.kv_capacity_tokens == 0 for m in fit.members)


def test_a_small_model_beside_a_large_one_names_the_large_one() -> None:
    fit = colocation_fit("vllm", GPU, 1, [(SMALL, "bf16", 64), (LARGE, "bf16", 64)])
    small, large = fit.members
    assert small.fits and not large.fits
    assert fit.reason.startswith(LARGE) and "with the models before it" in fit.reason


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_one_model_alone_gets_the_engines_default_sizing(engine: str) -> None:
    fit = colocation_fit(engine, GPU, 1, [(SMALL, "bf16", 128)])
    alone = _deployed(engine, SMALL, None, 128)
    (member,) = fit.members
    assert member.setting == pytest.approx(alone.memory_utilization, abs=0.0015)
    # thousandths of the flag, at most ~0.1% of the memory
    assert member.kv_capacity_tokens == pytest.approx(alone.kv_capacity_tokens, rel=0.005)


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_the_other_memory_rules_split_within_their_budget(engine: str) -> None:
    fit = colocation_fit(engine, GPU, 1, [(SMALL, "bf16", 128)] * 3)
    assert fit.fits
    assert fit.total_share <= fit.budget + 1e-9
    kv = [m.kv_capacity_tokens for m in fit.members]
    assert min(kv) >= MIN_KV_TOKENS
    # three processes of one model share the memory a third each, less three runtimes
    single = colocation_fit(engine, GPU, 1, [(SMALL, "bf16", 128)]).members[0]
    assert sum(kv) < single.kv_capacity_tokens
    if engine == "sglang":  # activations live outside the static pool
        assert all(m.setting < m.share for m in fit.members)


def test_a_lower_memory_utilization_shrinks_the_budget() -> None:
    members = [(SMALL, "bf16", 128), (SMALL, "bf16", 128)]
    low = colocation_fit("vllm", GPU, 1, members, memory_utilization=0.6)
    assert low.fits and low.total_share <= 0.6
    full = colocation_fit("vllm", GPU, 1, members)
    assert sum(m.kv_capacity_tokens for m in low.members) < sum(
        m.kv_capacity_tokens for m in full.members
    )


def test_an_fp8_kv_cache_holds_more_tokens_in_the_same_shares() -> None:
    members = [(SMALL, "bf16", 128), (SMALL, "bf16", 128)]
    fp16 = colocation_fit("vllm", GPU, 1, members)
    fp8 = colocation_fit("vllm", GPU, 1, members, kv_cache="fp8")
    for half, eighth in zip(fp16.members, fp8.members, strict=True):
        assert eighth.kv_capacity_tokens > 1.9 * half.kv_capacity_tokens


def test_bad_input_is_a_usage_error_with_the_catalogs_message() -> None:
    with pytest.raises(UsageError) as expected:
        load_catalog().models.get("llama-9b")
    with pytest.raises(UsageError) as got:
        colocation_fit("vllm", GPU, 1, [(SMALL, "bf16", 64), ("llama-9b", "bf16", 64)])
    assert str(got.value) == str(expected.value)
    with pytest.raises(UsageError, match="at least one model"):
        colocation_fit("vllm", GPU, 1, [])
    with pytest.raises(UsageError, match="max sequences 0"):
        colocation_fit("vllm", GPU, 1, [(SMALL, "bf16", 0)])


def test_a_combination_the_gpu_cannot_run_is_a_result_not_an_error() -> None:
    fit = colocation_fit("vllm", GPU, 3, [(SMALL, "bf16", 64)])  # 3 does not divide 32 heads
    assert isinstance(fit, ColocationFit) and not fit.fits
    assert "cannot run" in fit.reason and "tensor parallelism 3" in fit.reason


# --- the simulation --------------------------------------------------------------------------


def test_stretched_step_times_stretch_the_gpu_time_only() -> None:
    inner = LinearStepTimes(
        per_token_s=1e-4, per_iteration_s=2e-3, gamma=3e-7, request_overhead=0.01
    )
    stretched = StretchedStepTimes(inner, 1.5)
    assert stretched.gamma == pytest.approx(1.5 * inner.gamma)
    assert stretched.decode_base(8) == pytest.approx(1.5 * inner.decode_base(8))
    assert stretched.iteration(100, 0, 0, 1) == pytest.approx(1.5 * inner.iteration(100, 0, 0, 1))
    assert stretched.request_overhead == inner.request_overhead
    with pytest.raises(ValueError):
        StretchedStepTimes(inner, 0.5)


@cache
def _profile() -> Profile:
    return choose_profile(load_bundled_profiles(), GPU, "vllm")


def _workload(rate: float, count: int, seed: int) -> Workload:
    rng = np.random.default_rng(seed)
    return Workload(
        start=datetime(2026, 1, 1, tzinfo=UTC),
        arrival_s=np.cumsum(rng.exponential(1 / rate, count)),
        input_tokens=rng.integers(256, 2048, count),
        output_tokens=rng.integers(64, 384, count),
        class_index=np.zeros(count, dtype=np.int16),
        classes=("default",),
    )


def _members(rates: list[float], count: int = 300) -> list[ColocatedMember]:
    """One 8B process per rate on one H100, sized by the memory rule."""
    fit = colocation_fit("vllm", GPU, 1, [(SMALL, "bf16", 128)] * len(rates))
    assert fit.fits
    members = []
    for index, (rate, sized) in enumerate(zip(rates, fit.members, strict=True)):
        d = _deployed("vllm", SMALL, sized.share, sized.max_seqs)
        engine = EngineConfig(
            max_seqs=d.max_seqs,
            max_batched_tokens=d.max_batched_tokens,
            kv_capacity_tokens=sized.kv_capacity_tokens,
            watermark=VLLM_WATERMARK,
        )
        times = RooflineStepTimes(LatencyModel(d, _profile()), d.max_seqs)
        members.append(ColocatedMember(f"m{index}", engine, times, _workload(rate, count, index)))
    return members


def _p99(outcome: MemberOutcome, metric: str) -> float:
    value = outcome.p99[metric]
    assert value is not None
    return value


def test_one_member_alone_is_the_plain_fleet_simulation() -> None:
    (member,) = _members([2.0])
    result = simulate_colocated([member], replicas=2)
    assert result.converged and result.iterations == 1
    (outcome,) = result.members
    assert outcome.stretch == 1.0
    serving = ServingSpec(gpu=GPU, model=SMALL, engine="vllm", max_seqs=128)
    plain = simulate(
        member.workload,
        serving,
        FleetConfig(replicas={"on-demand": 2}),
        _profile(),
        times=member.times,
    )
    # the same requests, replica for replica: every statistic, not only the P99s
    assert outcome.summary["all"] == plain.summary["all"]
    assert outcome.p99["tpot"] == plain.summary["all"]["tpot"]["p99"]
    assert 0 < outcome.busy_fraction < 1


def test_two_quiet_members_barely_interfere() -> None:
    result = simulate_colocated(_members([0.02, 0.02], count=150), replicas=1)
    assert result.converged
    for outcome in result.members:
        other = next(o for o in result.members if o is not outcome)
        assert outcome.stretch == pytest.approx(1 + other.busy_fraction, rel=0.01)
        assert 1.0 < outcome.stretch < 1.1


def test_two_busy_members_slow_each_other_down() -> None:
    members = _members([1.2, 1.2])
    together = simulate_colocated(members, replicas=1)
    assert together.iterations > 1
    for member, outcome in zip(members, together.members, strict=True):
        alone = simulate_colocated([member], replicas=1).members[0]
        assert outcome.stretch > 1.3
        assert outcome.busy_fraction > alone.busy_fraction
        assert _p99(outcome, "tpot") > 1.2 * _p99(alone, "tpot")
        assert _p99(outcome, "e2e") > _p99(alone, "e2e")
    # the factors only grow, round after round
    history = np.array(together.history)
    assert (np.diff(history, axis=0) >= 0).all()


def test_the_fixed_point_stops_at_max_iterations() -> None:
    result = simulate_colocated(_members([1.2, 1.2]), replicas=1, max_iterations=2)
    assert result.iterations == 2 and not result.converged
    with pytest.raises(UsageError, match="named twice"):
        member = _members([1.0])[0]
        simulate_colocated([member, member], replicas=1)


def test_a_member_counts_only_the_part_of_the_others_run_it_overlaps() -> None:
    # m0 is busy for ~4 minutes, m1 quiet for ~50: m1 meets m0 in a twelfth of its window
    busy, quiet = simulate_colocated(_members([1.2, 0.1]), replicas=1).members
    assert busy.busy_fraction > 0.5
    assert quiet.stretch < 1 + busy.busy_fraction / 4
    # m1 runs through all of m0's window (from a first arrival a few seconds later)
    assert 1 + 0.8 * quiet.busy_fraction < busy.stretch < 1.01 * (1 + quiet.busy_fraction)
