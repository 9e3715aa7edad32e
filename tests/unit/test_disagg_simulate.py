"""The disaggregated simulator (planner.simulate.disagg): transfers contend per NIC, TTFT
includes the transfer, decodes see no prefill interference, a full decode pool holds requests
back (and the metrics say so), and every request is accounted for."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from planner.errors import UsageError
from planner.latency.disagg import (
    deployment_kv_transfer,
    kv_transfer_seconds,
    load_link_table,
)
from planner.simulate.disagg import DisaggregatedSpec, simulate_disaggregated, transfers
from planner.simulate.fleet import FleetConfig
from planner.simulate.run import ServingSpec, simulate
from planner.simulate.workload import Workload
from tests.unit.test_latency_model import IDEAL

START = datetime(2026, 1, 1, tzinfo=UTC)
SERVING = ServingSpec(gpu="H100", model="llama-3.1-70b", precision="bf16", tp=4, engine="vllm")


def workload(
    n: int, rate: float, inputs: int | np.ndarray, outputs: int, seed: int = 0
) -> Workload:
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    return Workload(
        start=START,
        arrival_s=arrivals,
        input_tokens=np.broadcast_to(np.asarray(inputs, dtype=np.int64), n).copy(),
        output_tokens=np.full(n, outputs, dtype=np.int64),
        class_index=np.zeros(n, dtype=np.int16),
        classes=("default",),
    )


def one(replicas: int = 1) -> FleetConfig:
    return FleetConfig(replicas={"on-demand": replicas})


def run(w: Workload, link: str, prefill: int = 1, decode: int = 1, **spec: object):  # type: ignore[no-untyped-def]
    d = DisaggregatedSpec(SERVING, spec.pop("decode_spec", SERVING), link, **spec)  # type: ignore[arg-type]
    return simulate_disaggregated(w, d, one(prefill), one(decode), IDEAL)


def test_transfers_from_one_sender_queue_and_receivers_share_the_rest() -> None:
    ready = np.array([0.0, 0.0, 0.0])
    busy = np.array([1.0, 1.0, 1.0])
    # one sender: one after another, each landing latency after its last byte
    start, landed = transfers(ready, np.array([0, 0, 0]), busy, 0.5, receivers=8)
    assert start.tolist() == [0.0, 1.0, 2.0]
    assert landed.tolist() == [1.5, 2.5, 3.5]
    # three senders, two receivers: the third waits for the first receiver to free
    start, _ = transfers(ready, np.array([0, 1, 2]), busy, 0.0, receivers=2)
    assert start.tolist() == [0.0, 0.0, 1.0]
    # a request never prefilled (NaN) is never sent
    start, landed = transfers(np.array([0.0, np.nan]), np.array([0, 0]), busy[:2], 0.0, 1)
    assert np.isnan(start[1]) and np.isnan(landed[1])


def test_ttft_includes_the_transfer_over_a_slow_link() -> None:
    w = workload(60, 0.5, 4000, 50)
    fast = run(w, "nvlink-h100")
    slow = run(w, "ethernet-25g")
    link = load_link_table().get("ethernet-25g")
    dep = SERVING.deployment()
    expected = kv_transfer_seconds(deployment_kv_transfer(dep, dep, 4000), link)
    assert slow.disaggregation is not None and fast.disaggregation is not None
    # 1.3 GB of KV cache at 25 Gbit/s x 0.8: about half a second, on every request
    assert slow.disaggregation["transfer_s"]["p50"] == pytest.approx(expected, rel=1e-6)
    gap = slow.summary["all"]["ttft"]["p50"] - fast.summary["all"]["ttft"]["p50"]
    assert gap == pytest.approx(expected - fast.disaggregation["transfer_s"]["p50"], rel=0.05)
    assert slow.disaggregation["transfer_share_of_ttft"]["p50"] > 0.3
    # the decode side is the same whatever the link
    assert slow.summary["all"]["tpot"]["p50"] == pytest.approx(
        fast.summary["all"]["tpot"]["p50"], rel=0.02
    )
    assert slow.summary["all"]["finished"] == fast.summary["all"]["finished"] == 60


def test_decodes_see_no_prefill_interference() -> None:
    # long prompts arriving while others decode: aggregated, chunked prefills share the
    # decodes' iterations and stretch TPOT; disaggregated, decode steps run alone
    w = workload(150, 1.0, 8000, 200, seed=3)
    agg = simulate(w, SERVING, one(2), IDEAL)
    dis = run(w, "nvlink-h100")
    agg_tpot = agg.summary["all"]["tpot"]["p99"]
    dis_tpot = dis.summary["all"]["tpot"]["p99"]
    assert dis_tpot < 0.7 * agg_tpot
    assert dis.summary["all"]["finished"] == 150


def test_a_full_decode_pool_holds_requests_back_and_says_so() -> None:
    w = workload(80, 4.0, 1000, 300, seed=5)
    roomy = run(w, "nvlink-h100")
    tight = run(w, "nvlink-h100", decode_spec=ServingSpec(**{**SERVING.__dict__, "max_seqs": 2}))
    assert tight.disaggregation is not None and roomy.disaggregation is not None
    roomy_wait = roomy.disaggregation["decode_wait_s"]["p99"]
    tight_wait = tight.disaggregation["decode_wait_s"]["p99"]
    assert tight_wait > 10 * roomy_wait
    assert tight.disaggregation["pools"][1]["queued_peak"] > 1
    assert (
        tight.summary["all"]["ttft"]["p99"] > roomy.summary["all"]["ttft"]["p99"] + tight_wait / 2
    )


def test_the_first_token_from_the_prefill_side_skips_the_decode_step() -> None:
    w = workload(40, 0.2, 2000, 100, seed=7)
    decode_side = run(w, "aws-p5-efa", first_token="decode")
    prefill_side = run(w, "aws-p5-efa", first_token="prefill")
    assert prefill_side.summary["all"]["ttft"]["p50"] < decode_side.summary["all"]["ttft"]["p50"]
    assert prefill_side.serving["first_token"] == "prefill"
    # TTFT = the prefill's end + the transfer, request by request, in prefill mode
    d = prefill_side.disaggregation
    assert d is not None
    assert prefill_side.summary["all"]["ttft"]["p50"] == pytest.approx(
        d["prefill_s"]["p50"] + d["transfer_stage_s"]["p50"], rel=0.05
    )


def test_roles_may_use_different_gpus_and_tp() -> None:
    w = workload(30, 0.5, 3000, 50, seed=2)
    decode = ServingSpec(gpu="H200", model="llama-3.1-70b", precision="bf16", tp=2, engine="vllm")
    result = run(w, "aws-p5-efa", decode_spec=decode)
    assert result.serving["prefill"]["gpu"] == "H100-SXM"
    assert result.serving["decode"]["gpu"] == "H200"
    assert result.serving["decode"]["tp"] == 2
    assert result.summary["all"]["finished"] == 30
    # GPU-hours of both pools: 4 prefill GPUs and 2 decode GPUs for the run's span
    hours = result.fleet.gpu_hours["on-demand"]
    pools = result.disaggregation["pools"]
    assert hours == pytest.approx(sum(p["fleet"]["gpu_hours"]["on-demand"] for p in pools))


def test_bad_specs_are_refused_clearly() -> None:
    other = ServingSpec(gpu="H100", model="llama-3.1-8b", tp=1)
    with pytest.raises(UsageError, match="both roles serve one model"):
        DisaggregatedSpec(SERVING, other, "nvlink-h100")
    with pytest.raises(UsageError, match="first token"):
        DisaggregatedSpec(SERVING, SERVING, "nvlink-h100", first_token="both")
    with pytest.raises(UsageError, match="unknown link"):
        run(workload(3, 1.0, 100, 10), "carrier-pigeon")


def test_each_pool_takes_its_own_schedule_and_autoscaler() -> None:
    from planner.simulate.fleet import Autoscaler

    # two hours: the prefill pool scheduled 1 then 3 replicas, the decode pool autoscaled
    w = workload(700, 0.1, 1000, 50, seed=11)
    w = w.subset(w.arrival_s < 7200)
    spec = DisaggregatedSpec(SERVING, SERVING, "nvlink-h100")
    result = simulate_disaggregated(
        w,
        spec,
        FleetConfig(schedule=[1, 3]),
        FleetConfig(autoscaler=Autoscaler(min_replicas=1, max_replicas=4, target_utilization=0.7)),
        IDEAL,
    )
    assert result.disaggregation is not None
    prefill, decode = result.disaggregation["pools"]
    # 1 replica the first hour, 3 from then to the run's end, 4 GPUs each
    second_hour = result.simulated_s / 3600 - 1
    assert 0.5 < second_hour <= 1.0
    expected = 4 * (1 + 3 * second_hour)
    assert prefill["fleet"]["gpu_hours"]["on-demand"] == pytest.approx(expected, rel=0.02)
    assert prefill["fleet"]["peak_replicas"] == 3
    assert 1 <= decode["fleet"]["peak_replicas"] <= 4
    assert result.summary["all"]["finished"] == len(w)
