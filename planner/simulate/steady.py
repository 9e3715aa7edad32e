"""A steady synthetic load on one replica through the discrete-event simulator: the latency
percentiles ``planner latency --qps`` shows beside the model's steady-state means."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from planner.errors import UsageError
from planner.latency.model import Deployment, LatencyModel
from planner.latency.profile import Profile
from planner.simulate.engine import EngineConfig, RooflineStepTimes
from planner.simulate.fleet import Fleet, FleetConfig
from planner.simulate.workload import Workload

WARMUP_SHARE = 0.2  # steady-load runs: the first arrivals, while queues and batches fill
COOLDOWN_SHARE = 0.1  # and the last, while the server drains with no arrivals behind them


@dataclass(frozen=True)
class SteadyLoad:
    """Latency percentiles of a steady synthetic load, from the discrete-event simulator."""

    requests: int  # simulated
    measured: int  # the middle ones the percentiles describe (warm-up and drain excluded)
    simulated_s: float
    wall_s: float
    percentiles: dict[str, dict[str, float]]  # ttft/tpot/e2e -> p50/p90/p99/mean, in ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": "discrete-event simulator",
            "arrivals": "poisson",
            "requests": self.requests,
            "measured_requests": self.measured,
            "excluded": f"first {WARMUP_SHARE:.0%} (warm-up) and last {COOLDOWN_SHARE:.0%} "
            "(drain) of arrivals",
            "simulated_s": self.simulated_s,
            "wall_s": self.wall_s,
            **self.percentiles,
        }


def steady_load(
    deployment: Deployment,
    profile: Profile,
    input_tokens: int,
    output_tokens: int,
    qps: float,
    requests: int,
    *,
    seed: int = 0,
    engine: EngineConfig | None = None,
) -> SteadyLoad:
    """Simulate ``requests`` Poisson arrivals at ``qps`` of one shape on one replica and
    measure the middle of the run. ``engine``: how the replica schedules, as ``planner
    simulate`` builds it for the engine (:meth:`planner.simulate.run.ServingSpec.engine_config`:
    its admission, batch limits, chunked prefill); None: chunked prefill, the deployment's batch
    limits, the simulator's default admission, no prefix cache.
    """
    if requests < 10:
        raise UsageError(f"a steady-load simulation needs at least 10 requests, got {requests}")
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / qps, requests))
    workload = Workload(
        start=datetime(2026, 1, 1, tzinfo=UTC),
        arrival_s=arrivals - arrivals[0],
        input_tokens=np.full(requests, input_tokens, dtype=np.int64),
        output_tokens=np.full(requests, output_tokens, dtype=np.int64),
        class_index=np.zeros(requests, dtype=np.int16),
        classes=("default",),
    )
    engine = engine or EngineConfig(
        max_seqs=deployment.max_seqs,
        max_batched_tokens=deployment.max_batched_tokens,
        kv_capacity_tokens=deployment.kv_capacity_tokens,
        chunked_prefill=True,
    )
    times = RooflineStepTimes(LatencyModel(deployment, profile), deployment.max_seqs)
    chunks: list[dict[str, np.ndarray]] = []
    began = time.perf_counter()
    runner = Fleet(workload, times, engine, FleetConfig(seed=seed), chunks.append)
    runner.run()
    wall = time.perf_counter() - began
    done = {key: np.concatenate([c[key] for c in chunks]) for key in chunks[0]}
    order = np.argsort(done["request_id"])
    ids = done["request_id"][order]
    keep = (ids >= int(requests * WARMUP_SHARE)) & (ids < int(requests * (1 - COOLDOWN_SHARE)))
    keep &= ~done["rejected"][order]
    arrival = done["arrival_s"][order][keep]
    first = done["first_token_s"][order][keep]
    finish = done["finish_s"][order][keep]
    samples = {
        "ttft": (first - arrival) * 1e3,
        "e2e": (finish - arrival) * 1e3,
    }
    if output_tokens > 1:
        samples["tpot"] = (finish - first) / (output_tokens - 1) * 1e3
    percentiles = {
        name: {
            "p50": float(np.percentile(values, 50)),
            "p90": float(np.percentile(values, 90)),
            "p99": float(np.percentile(values, 99)),
            "mean": float(values.mean()),
        }
        for name, values in samples.items()
        if len(values)
    }
    return SteadyLoad(requests, int(keep.sum()), runner.end_s, wall, percentiles)
