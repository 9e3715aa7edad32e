"""The replica's scheduler (planner.simulate.engine): invariants over random workloads and
engine settings, and hand-built cases for chunked prefill, preemption, the prefix cache and
static batching.

Property tests drive a :class:`Replica` directly, one iteration or decode segment at a time, and
check its state in between; they also run the same requests through a one-replica
:class:`Fleet` and expect the same output. Hypothesis runs them derandomized (the same examples
every run), so a failure is reproducible and never flaky.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from planner.latency.catalog import load_catalog
from planner.latency.engines import deploy
from planner.latency.model import Deployment, LatencyModel
from planner.latency.profile import Profile, choose_profile
from planner.latency.serving import mixed_iteration, saturation_qps, steady_state
from planner.simulate.engine import (
    BLOCK_TOKENS,
    EngineConfig,
    Finished,
    LinearStepTimes,
    Replica,
    RooflineStepTimes,
    Sequence,
    StepTimes,
)
from planner.simulate.fleet import Fleet, FleetConfig
from planner.simulate.steady import steady_load
from planner.simulate.workload import Workload
from tests.conftest import profiles_2026_12_01

START = datetime(2024, 1, 1, tzinfo=UTC)
# Every admission policy the property tests run under: (admission, watermark). A 10% watermark
# so that the small caches of the scenarios (500 tokens and up) keep whole blocks free.
POLICIES = [("preempt", 0.0), ("preempt", 0.1), ("no_evict", 0.0)]
POLICY_IDS = ["preempt", "preempt-watermark", "no_evict"]
MAX_EVENTS = 1_000_000  # iterations and segments a scenario may take before we call it stuck
Columns = dict[str, NDArray[Any]]


@functools.cache
def roofline() -> RooflineStepTimes:
    """Step times of Llama 3.1 8B in FP8 on one H100 SXM, with the bundled calibration."""
    catalog = load_catalog()
    deployment = Deployment(
        gpu=catalog.gpus.get("H100-SXM"),
        model=catalog.models.get("llama-3.1-8b"),
        precision=catalog.precisions.get("fp8"),
    )
    profile = choose_profile(profiles_2026_12_01(), "H100-SXM")
    return RooflineStepTimes(LatencyModel(deployment, profile), max_batch=256)


def workload(
    arrival: list[float] | NDArray[np.float64],
    inputs: list[int] | NDArray[np.int64],
    outputs: list[int] | NDArray[np.int64],
    classes: list[int] | None = None,
    blocks: list[tuple[int, ...]] | None = None,
) -> Workload:
    n = len(arrival)
    return Workload(
        start=START,
        arrival_s=np.asarray(arrival, dtype=np.float64),
        input_tokens=np.asarray(inputs, dtype=np.int64),
        output_tokens=np.asarray(outputs, dtype=np.int64),
        class_index=np.asarray(classes if classes is not None else [0] * n, dtype=np.int16),
        classes=("a", "b"),
        prefix_blocks=blocks,
    )


def serve(w: Workload, times: StepTimes, engine: EngineConfig) -> Columns:
    """Run ``w`` through a one-replica fleet; the output columns in request order."""
    chunks: list[Columns] = []
    Fleet(w, times, engine, FleetConfig(), on_chunk=chunks.append).run()
    columns = {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]}
    order = np.argsort(columns["request_id"], kind="stable")
    return {name: values[order] for name, values in columns.items()}


def ttft(out: Columns) -> NDArray[np.float64]:
    result: NDArray[np.float64] = out["first_token_s"] - out["arrival_s"]
    return result


def tpot(out: Columns) -> NDArray[np.float64]:
    """Time per output token after the first (NaN with a single output token)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        result: NDArray[np.float64] = (out["finish_s"] - out["first_token_s"]) / (
            out["output_tokens"] - 1
        )
    return result


# --- a replica driven event by event -------------------------------------------------------


class Probe:
    """Drives a :class:`Replica` one iteration or decode segment at a time and checks its state
    after each step (``check``); records what it finishes and the replica clock at that moment.
    """

    def __init__(
        self,
        times: StepTimes,
        config: EngineConfig,
        check: Callable[[Replica], None] | None = None,
        prefix_block_tokens: int = 512,
    ) -> None:
        self.records: list[Finished] = []
        self.clock_at_finish: list[float] = []
        self.check = check
        self.events = 0
        self.replica = Replica(0, times, config, self.records, prefix_block_tokens)

    def _took_records(self) -> None:
        """The clock at which the last step's records came out (one activity a step: its end,
        or the submit that refused a request)."""
        new = len(self.records) - len(self.clock_at_finish)
        self.clock_at_finish.extend([self.replica.clock] * new)

    def _step(self) -> None:
        self.events += 1
        assert self.events <= MAX_EVENTS, "the replica is stuck: it never runs out of work"
        self.replica.advance(self.replica.next_event())
        self._took_records()
        if self.check is not None:
            self.check(self.replica)

    def run_until(self, t: float) -> None:
        while self.replica.next_event() <= t:
            self._step()

    def submit(self, seq: Sequence) -> None:
        self.run_until(seq.arrival)
        self.replica.submit(seq, seq.arrival)
        self._took_records()
        if self.check is not None:
            self.check(self.replica)

    def drain(self) -> None:
        while self.replica.next_event() < math.inf:
            self._step()

    def serve(self, w: Workload) -> list[Finished]:
        blocks = w.prefix_blocks
        for i, (t, inp, out, klass) in enumerate(
            zip(
                w.arrival_s.tolist(),
                w.input_tokens.tolist(),
                w.output_tokens.tolist(),
                w.class_index.tolist(),
                strict=True,
            )
        ):
            self.submit(Sequence(i, t, inp, out, klass, blocks[i] if blocks else None))
        self.drain()
        return self.records


# --- random scenarios ----------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    arrival: tuple[float, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    classes: tuple[int, ...]
    config: EngineConfig
    linear: LinearStepTimes | None  # None: the roofline of Llama 3.1 8B on an H100

    @property
    def times(self) -> StepTimes:
        return self.linear if self.linear is not None else roofline()

    def workload(self) -> Workload:
        return workload(
            list(self.arrival), list(self.inputs), list(self.outputs), list(self.classes)
        )

    def too_long(self, i: int) -> bool:
        """Longer than the whole KV cache (with the block its first output token needs)."""
        return self.inputs[i] + BLOCK_TOKENS > self.config.kv_capacity_tokens


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    static = draw(st.integers(0, 3)) == 3  # a quarter of the scenarios
    # small caches (down to 500 tokens) force preemption, large ones do not
    kv = draw(st.one_of(st.integers(500, 5000), st.integers(5000, 100_000)))
    config = EngineConfig(
        max_seqs=draw(st.integers(1, 16)),
        max_batched_tokens=draw(st.integers(16, 4096)),
        kv_capacity_tokens=kv,
        chunked_prefill=draw(st.booleans()),
        policy="static" if static else "continuous",
        static_max_batch=draw(st.integers(1, 8)),
        static_max_wait_s=draw(st.sampled_from([0.0, 0.01, 0.1])),
        prefix_hit_rate=draw(st.sampled_from([0.0, 0.0, 0.5])),
    )
    linear = draw(
        st.one_of(
            st.none(),
            st.builds(
                LinearStepTimes,
                per_token_s=st.floats(1e-6, 1e-3),
                per_iteration_s=st.floats(0.0, 5e-3),
            ),
        )
    )
    n = draw(st.integers(1, 60))
    # gaps of up to 2 s; bursts (all gaps short) make requests overlap
    spread = draw(st.sampled_from([2.0, 0.2, 0.01, 0.0]))
    gaps = draw(st.lists(st.floats(0.0, spread), min_size=n, max_size=n))
    inputs, outputs = [], []
    for _ in range(n):
        # Most requests fit the KV cache for their whole life: input + output + the
        # first-token block <= capacity (see test_request_that_outgrows_the_kv_cache_...).
        # Some (continuous batching only, see test_static_batching_refuses_...) are longer
        # than the whole cache and must be refused.
        if not static and kv - BLOCK_TOKENS < 3000 and draw(st.integers(0, 7)) == 0:
            inputs.append(draw(st.integers(kv - BLOCK_TOKENS + 1, 3000)))
            outputs.append(draw(st.integers(1, 400)))
            continue
        inp = draw(st.integers(1, min(3000, kv - 2 * BLOCK_TOKENS - 2)))
        inputs.append(inp)
        outputs.append(draw(st.integers(1, min(400, kv - inp - 2 * BLOCK_TOKENS))))
    classes = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return Scenario(
        arrival=tuple(np.cumsum(gaps).tolist()),
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        classes=tuple(classes),
        config=config,
        linear=linear,
    )


def state_checks(config: EngineConfig) -> Callable[[Replica], None]:
    """Invariants of a replica's state between steps."""
    last_clock = [0.0]
    cap = config.kv_capacity_tokens

    def check(r: Replica) -> None:
        # time never goes backwards
        assert r.clock >= last_clock[0]
        last_clock[0] = r.clock
        # KV: _kv_used() is the context of every decoding sequence, plus one partly filled
        # 16-token block each (an allowance), plus the whole prompt of every sequence being
        # prefilled (reserved at admission). The tokens actually held -- without the
        # allowance -- never exceed the capacity.
        held = r._kv_used() - BLOCK_TOKENS * r.batch
        assert held <= cap, f"KV over-committed: {held} tokens held, capacity {cap}"
        assert r.batch >= 0 and r.reserved >= 0
        if r.no_evict:
            # what is reserved is exactly the whole need of every request inside, never more
            # than the cache: so every admitted request can run to its end
            inside = [*r.prefilling, *(s for s in r.admit_order if s.state == 2)]
            assert r.committed == sum(
                s.input_tokens + s.output_tokens + BLOCK_TOKENS for s in inside
            )
            assert r.committed <= cap
            # and what is held (with the allowance) never exceeds what is reserved
            assert r._kv_used() <= r.committed
        if config.policy == "continuous":
            # admission is bounded by max_seqs
            assert r.batch + len(r.prefilling) <= config.max_seqs
            # an iteration batches at most max_batched_tokens (prefill-first may run one
            # prompt longer than that alone)
            work = [take for _, take in r.iteration_work]
            tokens = sum(work) + (r.batch if r.iteration_decodes else 0)
            if config.chunked_prefill:
                assert tokens <= config.max_batched_tokens
            else:
                assert len(work) <= 1 or tokens <= config.max_batched_tokens
        else:
            assert len(r.static_batch) <= config.static_max_batch

    return check


def as_columns(records: list[Finished]) -> Columns:
    names = (
        "request_id",
        "arrival_s",
        "first_token_s",
        "finish_s",
        "replica",
        "class_index",
        "input_tokens",
        "output_tokens",
        "cached_tokens",
        "preemptions",
    )
    return {name: np.array([r[i] for r in records]) for i, name in enumerate(names)}


def with_policy(s: Scenario, policy: tuple[str, float]) -> Scenario:
    admission, watermark = policy
    return replace(s, config=replace(s.config, admission=admission, watermark=watermark))


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
@settings(max_examples=200, deadline=None, derandomize=True)
@given(scenarios())
def test_replica_invariants(policy: tuple[str, float], s: Scenario) -> None:
    s = with_policy(s, policy)
    cfg = s.config
    probe = Probe(s.times, cfg, state_checks(cfg))
    records = probe.serve(s.workload())
    n = len(s.arrival)

    # every request comes out exactly once, finished or refused
    assert sorted(r[0] for r in records) == list(range(n))
    finished = [r for r in records if not math.isnan(r[3])]
    # finish times come out in order, at the replica's clock when they happen
    finish_times = [r[3] for r in finished]
    assert finish_times == sorted(finish_times)
    for record, clock in zip(records, probe.clock_at_finish, strict=True):
        if not math.isnan(record[3]):
            # the client sees the end after the request's time outside the engine
            assert record[3] == clock + s.times.request_overhead

    linear = s.linear
    for rid, arrival, first, finish, replica, klass, inp, out, cached, preemptions in records:
        assert replica == (-1 if math.isnan(finish) else 0)
        assert (arrival, klass, inp, out) == (
            s.arrival[rid],
            s.classes[rid],
            s.inputs[rid],
            s.outputs[rid],
        )
        if s.too_long(rid):
            # refused, not stuck
            assert math.isnan(first) and math.isnan(finish)
            assert cached == 0
            continue
        assert arrival <= first <= finish
        if out > 1:
            assert first < finish
        elif cfg.policy == "continuous":
            assert first == finish  # the first token is the last
        assert preemptions >= 0
        if cfg.admission == "no_evict":
            assert preemptions == 0
        # cached prompt tokens: the what-if hit rate, at most input - 1; a request preempted
        # and recomputed reports none
        expected_cached = min(int(inp * cfg.prefix_hit_rate), inp - 1)
        if cfg.policy == "static":
            assert cached == 0
        elif preemptions == 0:
            assert cached == expected_cached
        else:
            assert cached in (0, expected_cached)
        if linear is not None:
            # decoding starts only after the prompt is prefilled: at least one iteration
            # over the uncached prompt tokens, then out - 1 decode steps of >= 1 token
            min_prefill = linear.per_iteration_s + (inp - expected_cached) * linear.per_token_s
            assert first - arrival >= min_prefill * (1 - 1e-9) - 1e-12
            min_decode = (out - 1) * (linear.per_iteration_s + linear.per_token_s)
            assert finish - first >= min_decode * (1 - 1e-9) - 1e-12

    # a one-replica fleet produces the same output; same inputs, same output
    out1 = serve(s.workload(), s.times, cfg)
    out2 = serve(s.workload(), s.times, cfg)
    for name in out1:
        np.testing.assert_array_equal(out1[name], out2[name])
    mine = as_columns(sorted(records))
    for name, values in mine.items():
        np.testing.assert_array_equal(out1[name], values, err_msg=name)
    np.testing.assert_array_equal(out1["rejected"], [s.too_long(i) for i in range(n)])
    np.testing.assert_array_equal(out1["replica"], np.where(out1["rejected"], -1, 0))
    assert not out1["response_cache_hit"].any()


def replica_state(r: Replica) -> tuple[Any, ...]:
    return (
        r.clock,
        r.busy_s,
        r.outstanding,
        r.outstanding_tokens,
        r.activity,
        r.activity_end,
        r.steps,
        r.batch,
        len(r.prefilling),
    )


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
@settings(max_examples=100, deadline=None, derandomize=True)
@given(scenarios())
def test_next_event_is_the_only_time_a_replica_changes_on_its_own(
    policy: tuple[str, float], s: Scenario
) -> None:
    """The fleet advances a replica only once its next_event() is due (its wake-up heap holds
    just that time): advancing to any earlier time must change nothing, and advancing to it
    must end the current iteration or segment there."""
    s = with_policy(s, policy)

    def check(r: Replica) -> None:
        wake = r.next_event()
        if wake == math.inf:
            return
        before, count = replica_state(r), len(probe.records)
        r.advance(math.nextafter(wake, -math.inf))
        assert replica_state(r) == before and len(probe.records) == count

    probe = Probe(s.times, s.config, check)
    for i, t in enumerate(s.arrival):
        while probe.replica.next_event() <= t:
            wake = probe.replica.next_event()
            probe.run_until(wake)
            assert probe.replica.clock == wake  # the iteration ended at its wake-up time
        probe.submit(Sequence(i, t, s.inputs[i], s.outputs[i], s.classes[i]))
    probe.drain()
    assert len(probe.records) == len(s.arrival)
    assert probe.replica.next_event() == math.inf and probe.replica.outstanding == 0


# --- decodes and prefills ------------------------------------------------------------------

LINEAR = LinearStepTimes(per_token_s=1e-4)  # 10,000 tokens a second, nothing per iteration


def running_request_and_long_prompt(chunked: bool) -> tuple[Probe, int]:
    """Request 0 (100-token prompt, 2000 output tokens) decodes alone from t=0.01; a
    20,000-token prompt (one output token) arrives at t=0.05. Returns the probe at t=1 s, in the
    middle of the long prefill, and the decode steps done before the long prompt arrived."""
    probe = Probe(LINEAR, EngineConfig(max_batched_tokens=512, chunked_prefill=chunked))
    probe.submit(Sequence(0, 0.0, 100, 2000, 0))
    probe.submit(Sequence(1, 0.05, 20_000, 1, 0))
    probe.run_until(0.1)
    steps_before = probe.replica.steps
    # the decode segment was cut at the first step boundary at or after 0.05 s
    assert steps_before == 400
    probe.run_until(1.0)
    return probe, steps_before


def test_prefill_first_pauses_decodes_during_a_prefill() -> None:
    probe, steps_before = running_request_and_long_prompt(chunked=False)
    assert probe.replica.steps == steps_before  # no decode step while the prompt is prefilled
    probe.drain()
    finish = {r[0]: r[3] for r in probe.records}
    alone = 0.01 + 1999 * 1e-4
    # request 0 is delayed by exactly the long prompt's 2 s prefill, so its TPOT grows
    assert finish[0] == pytest.approx(alone + 2.0, abs=1e-9)
    assert finish[1] == pytest.approx(0.05 + 2.0, abs=1e-9)


def test_chunked_prefill_keeps_decodes_going_during_a_prefill() -> None:
    probe, steps_before = running_request_and_long_prompt(chunked=True)
    # one decode step rides along with every 511-token chunk (0.0512 s an iteration)
    assert probe.replica.steps - steps_before == math.floor((1.0 - 0.05) / 0.0512)
    probe.drain()
    assert {r[0] for r in probe.records} == {0, 1}


def test_tpot_of_a_running_request_grows_when_a_long_prompt_arrives_prefill_first() -> None:
    engine = EngineConfig(max_batched_tokens=512, chunked_prefill=False)
    alone = serve(workload([0.0], [100], [2000]), LINEAR, engine)
    crowded = serve(workload([0.0, 0.05], [100, 20_000], [2000, 1]), LINEAR, engine)
    assert tpot(alone)[0] == pytest.approx(1e-4)
    assert tpot(crowded)[0] == pytest.approx(1e-4 + 2.0 / 1999)


def test_chunked_prefill_does_not_let_a_short_prompt_overtake_a_long_one() -> None:
    # Chunks are scheduled first come, first served (as in vLLM): a short prompt behind a
    # long one waits for all of the long one's chunks, so with nothing else running its TTFT
    # is the same as with prefill-first.
    for chunked in (False, True):
        engine = EngineConfig(max_batched_tokens=1000, chunked_prefill=chunked)
        out = serve(workload([0.0, 0.01], [10_000, 100], [1, 1]), LINEAR, engine)
        np.testing.assert_allclose(out["first_token_s"], [1.0, 1.01], atol=1e-9)


def test_chunked_prefill_lowers_ttft_p99_of_short_prompts_behind_long_ones() -> None:
    # With slots the bottleneck (max_seqs=16), prefill-first stalls every decode for each
    # long prompt, so slots free up later and short prompts wait to be admitted; chunked
    # prefill lets decodes ride along the (compute-bound) prompt chunks almost for free.
    rng = np.random.default_rng(0)
    n = 1000
    arrival = np.cumsum(rng.exponential(1 / 6.0, n))
    long = rng.random(n) < 0.2
    inputs = np.where(long, 8000, 200)
    outputs = np.where(long, 50, 300)
    w = workload(arrival, inputs, outputs)
    result = {}
    for chunked in (False, True):
        engine = EngineConfig(max_seqs=16, max_batched_tokens=2048, chunked_prefill=chunked)
        out = serve(w, roofline(), engine)
        assert not out["rejected"].any()
        result[chunked] = (
            float(np.percentile(ttft(out)[~long], 99)),
            float(np.percentile(tpot(out)[~long], 99)),
        )
    (ttft_first, tpot_first), (ttft_chunked, tpot_chunked) = result[False], result[True]
    assert ttft_chunked < 0.85 * ttft_first
    assert tpot_chunked < tpot_first


# --- KV cache: preemption and refusal ------------------------------------------------------


def test_small_kv_cache_preempts_and_still_finishes_everything() -> None:
    # 12 requests of 200 + 600 tokens at once: each fits alone (817 tokens), not all together
    w = workload([0.0] * 12, [200] * 12, [600] * 12)
    small = EngineConfig(max_seqs=16, kv_capacity_tokens=3000)
    out = serve(w, LINEAR, small)
    assert int(out["preemptions"].sum()) > 0
    assert not out["rejected"].any()
    assert np.all(out["finish_s"] >= out["first_token_s"])
    big = serve(w, LINEAR, EngineConfig(max_seqs=16))
    assert int(big["preemptions"].sum()) == 0
    # recomputation costs time
    assert float(out["finish_s"].max()) > float(big["finish_s"].max())
    # the state checks hold throughout
    Probe(LINEAR, small, state_checks(small)).serve(w)


def test_prompt_longer_than_kv_cache_is_refused_and_the_rest_served() -> None:
    engine = EngineConfig(kv_capacity_tokens=1000)
    out = serve(workload([0.0, 0.001, 0.002], [300, 990, 300], [50, 5, 50]), LINEAR, engine)
    np.testing.assert_array_equal(out["rejected"], [False, True, False])
    assert math.isnan(out["first_token_s"][1]) and math.isnan(out["finish_s"][1])
    assert out["replica"][1] == -1
    assert np.all(np.isfinite(out["finish_s"][[0, 2]]))


def test_request_that_outgrows_the_kv_cache_is_not_stuck() -> None:
    # 500 + 1000 tokens in a 1000-token cache: it decodes until the cache is full, is
    # preempted, recomputed (484 + 16 tokens fit), preempted again before any decode step...
    probe = Probe(LINEAR, EngineConfig(kv_capacity_tokens=1000))
    probe.submit(Sequence(0, 0.0, 500, 1000, 0))
    for _ in range(10_000):
        if probe.replica.next_event() == math.inf:
            break
        probe.replica.advance(probe.replica.next_event())
    assert len(probe.records) == 1, f"still running at t={probe.replica.clock:.1f} s"


def test_chunked_prefill_iterations_respect_kv_capacity() -> None:
    cap = 3000
    config = EngineConfig(max_seqs=16, max_batched_tokens=16, kv_capacity_tokens=cap)

    def check(r: Replica) -> None:
        held = r._kv_used() - BLOCK_TOKENS * r.batch
        assert held <= cap, f"KV over-committed: {held} tokens held, capacity {cap}"

    probe = Probe(LINEAR, config, check)
    for i in range(8):
        probe.submit(Sequence(i, 0.0, 10, 2000, 0))
    probe.submit(Sequence(8, 0.1, 10, 5, 0))
    probe.run_until(0.11)
    # a prompt that just fits what is left: admitted, then prefilled 16 tokens an iteration
    # while the 8 decodes each grow a token per iteration
    left = cap - probe.replica._kv_used() - BLOCK_TOKENS
    probe.submit(Sequence(9, 0.11, left, 5, 0))
    probe.drain()


@pytest.mark.usefixtures("pure_engine")  # patches a replica method
def test_recomputed_request_runs_no_extra_decode_step(monkeypatch: pytest.MonkeyPatch) -> None:
    stints: dict[int, list[int]] = {}
    leave = Replica._leave_batch

    def record(self: Replica, seq: Sequence) -> None:
        stints.setdefault(seq.id, []).append(self.steps - seq.admit_step)
        leave(self, seq)

    monkeypatch.setattr(Replica, "_leave_batch", record)
    # two requests of 16 + 200 tokens in a 300-token cache: request 1 is preempted once
    probe = Probe(LINEAR, EngineConfig(kv_capacity_tokens=300, chunked_prefill=False))
    probe.submit(Sequence(0, 0.0, 16, 200, 0))
    probe.submit(Sequence(1, 0.0, 16, 200, 0))
    probe.drain()
    preemptions = {r[0]: r[9] for r in probe.records}
    assert preemptions == {0: 0, 1: 1}
    # 200 tokens: one from each prefill (the first and the recomputation), the rest decoded
    assert sum(stints[0]) == 199
    assert sum(stints[1]) == 200 - 1 - preemptions[1]


def test_static_batching_refuses_prompt_longer_than_kv_cache() -> None:
    engine = EngineConfig(kv_capacity_tokens=1000, policy="static")
    out = serve(workload([0.0], [5000], [10]), LINEAR, engine)
    assert out["rejected"][0]


# --- prefix cache --------------------------------------------------------------------------


def test_prefix_cache_serves_shared_blocks() -> None:
    # Mooncake-style block ids of 512 tokens; request 1 shares request 0's four blocks
    blocks: list[tuple[int, ...]] = [(1, 2, 3, 4), (1, 2, 3, 4, 5), (1, 9, 3, 4), (1, 2, 3, 4)]
    w = workload([0.0, 10.0, 20.0, 30.0], [2048, 2560, 2048, 2048], [1, 1, 1, 1], blocks=blocks)
    cached = serve(w, LINEAR, EngineConfig(prefix_cache_tokens=1_000_000))
    # request 2 matches only the first block (the prefix stops at the first miss); request 3
    # matches everything but still computes its last prompt token
    np.testing.assert_array_equal(cached["cached_tokens"], [0, 2048, 512, 2047])
    np.testing.assert_allclose(ttft(cached), np.array([2048, 512, 1536, 1]) * 1e-4)
    plain = serve(w, LINEAR, EngineConfig())
    np.testing.assert_array_equal(plain["cached_tokens"], [0, 0, 0, 0])
    np.testing.assert_allclose(ttft(plain), np.array([2048, 2560, 2048, 2048]) * 1e-4)
    assert ttft(cached)[1] < ttft(plain)[1]


def test_prefix_cache_evicts_least_recently_used_blocks() -> None:
    # room for 2 blocks: after request 0 only its last two blocks are kept, so request 1,
    # whose prefix starts with block 1, finds nothing
    blocks: list[tuple[int, ...]] = [(1, 2, 3, 4), (1, 2, 3, 4)]
    w = workload([0.0, 10.0], [2048, 2048], [1, 1], blocks=blocks)
    out = serve(w, LINEAR, EngineConfig(prefix_cache_tokens=1024))
    np.testing.assert_array_equal(out["cached_tokens"], [0, 0])


def test_prefix_hit_rate_caches_that_share_of_each_prompt() -> None:
    inputs = [1, 2, 3, 999, 1000, 4097]
    w = workload([10.0 * i for i in range(6)], inputs, [3] * 6)
    out = serve(w, LINEAR, EngineConfig(prefix_hit_rate=0.5))
    expected = [min(i // 2, i - 1) for i in inputs]
    np.testing.assert_array_equal(out["cached_tokens"], expected)
    assert expected == [0, 1, 1, 499, 500, 2048]
    np.testing.assert_allclose(ttft(out), (np.array(inputs) - expected) * 1e-4)


# --- static batching -----------------------------------------------------------------------

STATIC_TIMES = LinearStepTimes(per_token_s=1e-4, per_iteration_s=1e-3)
STATIC = EngineConfig(policy="static", static_max_batch=4, static_max_wait_s=0.05)


def test_static_lone_request_waits_for_the_window() -> None:
    out = serve(workload([1.0], [100], [10]), STATIC_TIMES, STATIC)
    first = 1.0 + 0.05 + (1e-3 + 100 * 1e-4)
    assert out["first_token_s"][0] == pytest.approx(first)
    assert out["finish_s"][0] == pytest.approx(first + 9 * (1e-3 + 1e-4))


def test_static_full_batch_starts_at_once_and_shares_its_times() -> None:
    w = workload([0.0, 0.01, 0.015, 0.02], [100, 200, 300, 50], [5, 20, 10, 1])
    out = serve(w, STATIC_TIMES, STATIC)
    # full at t=0.02: prefill 4 prompts padded to 300 tokens, decode 19 steps of 4 sequences
    first = 0.02 + 1e-3 + 4 * 300 * 1e-4
    finish = first + 19 * (1e-3 + 4 * 1e-4)
    np.testing.assert_allclose(out["first_token_s"], [first] * 4)
    np.testing.assert_allclose(out["finish_s"], [finish] * 4)


def test_static_requests_beyond_the_batch_wait_for_the_next_one() -> None:
    w = workload([0.0] * 6, [100] * 6, [10] * 6)
    out = serve(w, STATIC_TIMES, STATIC)
    first = 1e-3 + 4 * 100 * 1e-4
    end = first + 9 * (1e-3 + 4e-4)
    np.testing.assert_allclose(out["first_token_s"][:4], [first] * 4)
    np.testing.assert_allclose(out["finish_s"][:4], [end] * 4)
    # the window of the two left has long closed: their batch starts when the first ends
    second = end + 1e-3 + 2 * 100 * 1e-4
    np.testing.assert_allclose(out["first_token_s"][4:], [second] * 2)
    np.testing.assert_allclose(out["finish_s"][4:], [second + 9 * (1e-3 + 2e-4)] * 2)


# --- agreement with the latency model ------------------------------------------------------


def rough_model(model: str, precision: str, tp: int) -> LatencyModel:
    """``model`` on ``tp`` H100s with every term of the profile switched on: the GEMM curve,
    attention's fixed cost, the all-reduce."""
    catalog = load_catalog()
    deployment = Deployment(
        gpu=catalog.gpus.get("H100-SXM"),
        model=catalog.models.get(model),
        precision=catalog.precisions.get(precision),
        tp=tp,
    )
    profile = Profile(
        "rough", gemm_half_tokens=150.0, attn_layer_us=6.0, attn_decode_eff=0.55, allreduce_us=9.0
    )
    return LatencyModel(deployment, profile)


@pytest.mark.parametrize(("model", "tp"), [("llama-3.1-8b", 1), ("mixtral-8x7b", 2)])
def test_roofline_step_times_are_the_latency_models(model: str, tp: int) -> None:
    lm = rough_model(model, "fp8", tp)
    times = RooflineStepTimes(lm, max_batch=256)
    rng = np.random.default_rng(3)
    for batch, context in zip(
        rng.integers(1, 257, size=200).tolist(),
        rng.integers(0, 2_000_000, size=200).tolist(),
        strict=True,
    ):
        # a decode step is the base at its batch plus gamma per token of context, exactly
        step = times.decode_base(batch) + times.gamma * context
        assert step == pytest.approx(float(lm.decode_time(batch, context)), rel=1e-9)
    for tokens, pairs, kv, logits in [(1, 1, 0, 1), (4096, 8e6, 0, 2), (300, 9e5, 2e5, 200)]:
        assert times.iteration(tokens, pairs, kv, logits) == pytest.approx(
            float(lm.cost(tokens, pairs, kv, logits).total), rel=1e-12
        )


@pytest.mark.parametrize(
    ("model", "precision", "tp"),
    [
        ("llama-3.1-8b", "fp8", 1),
        ("llama-3.1-8b", "bf16", 2),
        ("mixtral-8x7b", "bf16", 2),
        ("mixtral-8x7b", "fp8", 4),
        ("llama-2-70b", "int4-awq", 8),
    ],
)
def test_compiled_iteration_is_the_latency_models_bit_for_bit(
    model: str, precision: str, tp: int
) -> None:
    # RooflineStepTimes.iteration and LatencyModel.iteration_seconds both call the one step
    # formula (planner.latency.step): the very same float, or the simulator's results would
    # drift from the model (tests/unit/test_sim_compiled.py holds its compiled build to its source)
    lm = rough_model(model, precision, tp)
    times = RooflineStepTimes(lm, max_batch=8)
    rng = np.random.default_rng(5)
    tokens = rng.integers(1, 9000, size=500).astype(np.float64)
    tokens[:30] = rng.integers(1, 4, size=30)  # tiny iterations: a MoE touches few experts
    pairs = tokens * rng.uniform(1, 3000, size=500)
    kv = rng.integers(0, 500_000, size=500).astype(np.float64)
    logits = np.minimum(tokens, rng.integers(0, 300, size=500)).astype(np.float64)
    logits[::7] = 0
    for t, p, k, n in zip(
        tokens.tolist(), pairs.tolist(), kv.tolist(), logits.tolist(), strict=True
    ):
        assert times.iteration(t, p, k, n) == lm.iteration_seconds(t, p, k, n)
    assert times.iteration(0.0, 0.0, 0.0, 0.0) == 0.0


class Recorder:
    """Step times that remember every iteration the replica asks for."""

    def __init__(self, inner: RooflineStepTimes) -> None:
        self.inner = inner
        self.gamma = inner.gamma
        self.request_overhead = inner.request_overhead
        self.calls: list[tuple[tuple[float, float, float, float], float]] = []

    def decode_base(self, batch: int) -> float:
        return self.inner.decode_base(batch)

    def iteration(self, tokens: float, attn_pairs: float, kv_read: float, logits: float) -> float:
        seconds = self.inner.iteration(tokens, attn_pairs, kv_read, logits)
        self.calls.append(((tokens, attn_pairs, kv_read, logits), seconds))
        return seconds


@pytest.mark.parametrize(("batch", "prompts"), [(1, 1), (16, 3), (64, 8)])
def test_a_simulated_mixed_iteration_is_serving_mixed_iteration(batch: int, prompts: int) -> None:
    # `batch` sequences decode together; then `prompts` prompts arrive at once: the replica
    # batches all of them with the decodes in one iteration, which must cost what
    # planner.latency.serving.mixed_iteration says for that batch, prompts and context
    s = 128
    recorder = Recorder(roofline())
    probe = Probe(recorder, EngineConfig(max_seqs=256, max_batched_tokens=8192))
    # a one-token request first keeps the replica busy, so the `batch` sequences are prefilled
    # together and decode with equal contexts
    probe.submit(Sequence(10_000, 0.0, 4000, 1, 0))
    for i in range(batch):
        probe.submit(Sequence(i, 0.0, s, 1000, 0))
    for i in range(prompts):
        probe.submit(Sequence(batch + i, 0.5, s, 1000, 0))
    replica = probe.replica
    assert replica.batch == batch and len(replica.waiting) == prompts
    probe.run_until(replica.next_event())  # the decode segment ends at a step boundary
    assert replica.batch == batch and len(replica.prefilling) == prompts
    assert replica.iteration_decodes and len(replica.iteration_work) == prompts
    (tokens, pairs, kv, logits), seconds = recorder.calls[-1]
    context = s + 1 + replica.steps  # each decoding sequence's context
    assert (tokens, pairs, kv, logits) == (
        batch + prompts * s,
        batch * (context + 1) + prompts * s * (s + 1) / 2,
        batch * context,
        batch + prompts,
    )
    # mixed_iteration's mean context is input + output / 2
    expected = mixed_iteration(roofline().model, batch, prompts, s, 2 * (context - s))
    assert seconds == pytest.approx(expected, rel=1e-12)


def bundled_model(engine: str, precision: str) -> tuple[Deployment, Profile, LatencyModel]:
    catalog = load_catalog()
    deployment = deploy(
        engine,
        catalog.gpus.get("H100-SXM"),
        catalog.models.get("llama-3.1-8b"),
        catalog.precisions.get(precision),
    )
    profile = choose_profile(profiles_2026_12_01(), "H100-SXM")
    return deployment, profile, LatencyModel(deployment, profile)


@pytest.mark.parametrize(
    ("engine", "precision", "inp", "out"),
    [("vllm", "bf16", 467, 256), ("trtllm", "fp8", 1024, 128), ("vllm", "bf16", 128, 512)],
)
def test_simulated_poisson_load_tpot_agrees_with_steady_state(
    engine: str, precision: str, inp: int, out: int
) -> None:
    # at half the saturation rate, the mean time per output token of 2000 simulated Poisson
    # arrivals (middle of the run) is within 15% of the mean-value model's (measured: within 2%)
    deployment, profile, lm = bundled_model(engine, precision)
    qps = 0.5 * saturation_qps(lm, inp, out)
    model = steady_state(lm, inp, out, "qps", qps)
    simulated = steady_load(deployment, profile, inp, out, qps, 2000, seed=1)
    assert simulated.measured > 1000
    assert simulated.percentiles["tpot"]["mean"] == pytest.approx(model.tpot_ms, rel=0.15)


def test_simulated_light_load_ttft_includes_the_request_overhead() -> None:
    deployment, profile, lm = bundled_model("trtllm", "fp8")
    assert profile.request_overhead_ms > 4  # the bundled H100 profile: 4.4 ms
    qps = 0.2 * saturation_qps(lm, 467, 256)
    model = steady_state(lm, 467, 256, "qps", qps)
    simulated = steady_load(deployment, profile, 467, 256, qps, 2000, seed=1)
    assert simulated.percentiles["ttft"]["mean"] == pytest.approx(model.ttft_ms, rel=0.1)


# --- the running heap ----------------------------------------------------------------------


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 6), st.integers(0, 5)),  # push?, finish, id
        max_size=200,
    )
)
def test_the_running_heap_keeps_heapqs_layout(ops: list[tuple[bool, int, int]]) -> None:
    # the replica's unboxed heap against heapq over the tuples it replaced: the same entries
    # in the same places after every push and pop (evict returns the sequences in heap
    # order), with ties in finish step and id (a sequence readmitted: the same id, a new gen)
    replica = Replica(0, LINEAR, EngineConfig())
    reference: list[tuple[int, int, int, Sequence]] = []
    for gen, (push, finish, rid) in enumerate(ops):
        if push or not reference:
            seq = Sequence(rid, 0.0, 10, 10, 0)
            replica._run_push(finish, rid, gen, seq)
            heapq.heappush(reference, (finish, rid, gen, seq))
        else:
            replica._run_pop()
            heapq.heappop(reference)
        keys = list(replica.run_keys)
        held = [(*keys[3 * k : 3 * k + 3], s) for k, s in enumerate(replica.running)]
        assert [entry[:3] for entry in held] == [entry[:3] for entry in reference]
        assert all(a[3] is b[3] for a, b in zip(held, reference, strict=True))
