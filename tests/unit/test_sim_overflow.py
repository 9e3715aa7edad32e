"""The overflow API (planner.simulate.fleet.Overflow): what the replicas are too busy for goes
to a per-token API with its own latency, within its rate limit."""

from __future__ import annotations

import numpy as np
import pytest

from planner.errors import UsageError
from planner.simulate.engine import EngineConfig, LinearStepTimes
from planner.simulate.fleet import API_REPLICA, FleetConfig, Overflow
from tests.unit.test_sim_fleet import Run, poisson, workload

TIMES = LinearStepTimes(per_token_s=2e-5, per_iteration_s=5e-3)
ENGINE = EngineConfig(max_seqs=8, max_batched_tokens=4096)


def overloaded(rate: float = 40.0, seconds: float = 120.0) -> tuple[np.ndarray, int, int]:
    return poisson(rate, seconds, seed=3), 800, 60


def test_overflow_takes_what_the_replicas_cannot_and_cuts_the_tail() -> None:
    arrival, inputs, outputs = overloaded()
    w = workload(arrival, inputs, outputs)
    alone = Run(w, TIMES, ENGINE, FleetConfig(replicas={"on-demand": 2}))
    api = Overflow(queue=8, ttft_s=0.4, tpot_s=0.01, sigma=0.0)
    both = Run(w, TIMES, ENGINE, FleetConfig(replicas={"on-demand": 2}, overflow=api))
    on_api = both.out["replica"] == API_REPLICA
    # the replicas are overloaded alone: the API takes a real share, not all of it
    assert 0.05 < on_api.mean() < 0.95
    assert both.stats.overflowed == int(on_api.sum())
    assert both.stats.overflow_input_tokens == int(both.out["input_tokens"][on_api].sum())
    assert both.stats.overflow_output_tokens == int(both.out["output_tokens"][on_api].sum())
    # with no spread the API's latency is its medians exactly
    np.testing.assert_allclose(both.ttft[on_api], 0.4)
    tpot = (both.out["finish_s"] - both.out["first_token_s"])[on_api] / (outputs - 1)
    np.testing.assert_allclose(tpot, 0.01)
    # nothing is rejected or counted as a response-cache hit
    assert not both.out["rejected"].any() and not both.out["response_cache_hit"].any()
    assert np.percentile(both.ttft, 99) < 0.5 * np.percentile(alone.ttft, 99)


def test_no_overflow_while_the_replicas_keep_up() -> None:
    arrival = poisson(2.0, 120.0, seed=4)
    run = Run(
        workload(arrival, 200, 20),
        TIMES,
        ENGINE,
        FleetConfig(replicas={"on-demand": 2}, overflow=Overflow(queue=8, ttft_s=0.4, tpot_s=0.01)),
    )
    assert run.stats.overflowed == 0 and not (run.out["replica"] == API_REPLICA).any()


def test_rate_limit_caps_the_api_per_minute_and_the_rest_waits() -> None:
    arrival, inputs, outputs = overloaded(rate=60.0, seconds=180.0)
    api = Overflow(queue=4, ttft_s=0.4, tpot_s=0.01, rpm=30)
    run = Run(
        workload(arrival, inputs, outputs),
        TIMES,
        ENGINE,
        FleetConfig(replicas={"on-demand": 1}, overflow=api),
    )
    sent = np.sort(run.out["arrival_s"][run.out["replica"] == API_REPLICA])
    assert len(sent) > 30
    # no 60-second window holds more than the limit
    ends = np.searchsorted(sent, sent + 60.0, side="left")
    assert int((ends - np.arange(len(sent))).max()) <= 30
    assert run.stats.overflow_rate_limited > 0
    # the ones turned back were served by the replica, none lost
    assert not run.out["rejected"].any()


def test_token_limit_counts_input_and_output() -> None:
    arrival, inputs, outputs = overloaded(rate=60.0, seconds=120.0)
    api = Overflow(queue=2, ttft_s=0.4, tpot_s=0.01, tpm=(inputs + outputs) * 10)
    run = Run(
        workload(arrival, inputs, outputs),
        TIMES,
        ENGINE,
        FleetConfig(replicas={"on-demand": 1}, overflow=api),
    )
    sent = np.sort(run.out["arrival_s"][run.out["replica"] == API_REPLICA])
    ends = np.searchsorted(sent, sent + 60.0, side="left")
    assert int((ends - np.arange(len(sent))).max()) <= 10


def test_with_no_replica_up_everything_goes_to_the_api() -> None:
    arrival = poisson(5.0, 60.0, seed=5)
    api = Overflow(queue=4, ttft_s=0.3, tpot_s=0.01)
    run = Run(
        workload(arrival, 100, 10),
        TIMES,
        ENGINE,
        FleetConfig(schedule=[0], overflow=api),
    )
    assert (run.out["replica"] == API_REPLICA).all()


def test_same_seed_same_api_latencies() -> None:
    arrival, inputs, outputs = overloaded()
    w = workload(arrival, inputs, outputs)
    config = FleetConfig(
        replicas={"on-demand": 2}, overflow=Overflow(queue=8, ttft_s=0.4, tpot_s=0.01), seed=7
    )
    a, b = Run(w, TIMES, ENGINE, config), Run(w, TIMES, ENGINE, config)
    np.testing.assert_array_equal(a.out["finish_s"], b.out["finish_s"])


@pytest.mark.parametrize(
    "settings",
    [
        {"queue": -1, "ttft_s": 0.4, "tpot_s": 0.01},
        {"queue": 4, "ttft_s": 0.0, "tpot_s": 0.01},
        {"queue": 4, "ttft_s": 0.4, "tpot_s": 0.01, "rpm": 0},
    ],
)
def test_overflow_settings_are_checked(settings: dict[str, float]) -> None:
    with pytest.raises(UsageError, match="overflow"):
        Overflow(**settings)  # type: ignore[arg-type]
