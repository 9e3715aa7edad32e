"""The analytic screen: how many requests per second one replica serves within the P99
targets, from the latency model alone, and the hourly fleet that follows.

A mean-value model of continuous batching, vectorized over the batch size ``B``: at batch
``B`` a decode step takes ``s(B)``; a request decodes ``D`` steps and each arrival's prefill
takes the GPU for ``p`` (its share ``rho = r E[p]`` stretches every step by ``1/(1 - rho)``).
Little's law, ``B = r D s(B) / (1 - r E[p])``, solves for the arrival rate in closed form::

    r(B) = B / (D s(B) + B E[p])

so every batch size gives one load and its latencies, and the capacity is the largest load
whose predicted P99s meet the targets. The P99s use standard tail approximations:

* TTFT: the P99 prompt's prefill, plus the M/G/1 wait for the prefills ahead of it with an
  exponential tail (``P(W > t) = rho exp(-rho t / E[W])``), plus the iteration in progress and,
  with chunked prefill, the decode batch sharing each chunk's iteration;
* TPOT: the step at the 99th percentile of the (Poisson) batch, plus the prefills that land
  during a typical request's decode (mean + 2.33 standard deviations);
* E2E: mean TTFT plus the P99 output length at the mean step.

The batch must also leave room for its own fluctuation: ``B + 2.33 sqrt(B)`` within the KV cache
and the max-sequences limit. The screen ranks; the simulator decides (``verify``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.latency.model import LatencyModel
from planner.simulate.metrics import SLO
from planner.simulate.workload import HOUR_S

Z99 = 2.326  # standard normal 99th percentile
METRICS = ("ttft", "tpot", "e2e")


@dataclass(frozen=True)
class Lengths:
    """Token-length statistics the screen needs, from a sample of (input, output) pairs."""

    inputs: NDArray[np.int64]
    outputs: NDArray[np.int64]

    @classmethod
    def sample(
        cls, inputs: NDArray[np.int64], outputs: NDArray[np.int64], size: int, seed: int = 0
    ) -> Lengths:
        if len(inputs) <= size:
            return cls(np.asarray(inputs), np.asarray(outputs))
        pick = np.random.default_rng(seed).choice(len(inputs), size=size, replace=False)
        pick.sort()
        return cls(np.asarray(inputs)[pick], np.asarray(outputs)[pick])

    @property
    def mean_input(self) -> float:
        return float(self.inputs.mean())

    @property
    def mean_output(self) -> float:
        return float(np.maximum(self.outputs, 1).mean())

    def quantile_input(self, q: float) -> float:
        return float(np.quantile(self.inputs, q))

    def quantile_output(self, q: float) -> float:
        return float(np.quantile(np.maximum(self.outputs, 1), q))


@dataclass(frozen=True)
class Capacity:
    """Requests/s one replica serves within the targets, with its predicted P99s there.

    ``rps`` is 0 when even the lightest load misses a target (``binding`` says which, and the
    P99s are those at the lightest load)."""

    rps: float
    batch: float
    ttft_p99_s: float
    tpot_p99_s: float
    e2e_p99_s: float
    binding: str  # ttft, tpot, e2e, or batch (KV cache / max sequences)
    max_rps: float  # throughput with the batch full, targets aside

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def miss(self, slo: SLO) -> tuple[str, float, float] | None:
        """(metric, predicted, target) of the worst miss at this load, or None."""
        worst: tuple[str, float, float] | None = None
        for metric, value, target in self._pairs(slo):
            if (
                target is not None
                and value > target
                and (worst is None or value / target > worst[1] / worst[2])
            ):
                worst = (metric, value, target)
        return worst

    def _pairs(self, slo: SLO) -> list[tuple[str, float, float | None]]:
        return [
            ("ttft", self.ttft_p99_s, slo.ttft_s),
            ("tpot", self.tpot_p99_s, slo.tpot_s),
            ("e2e", self.e2e_p99_s, slo.e2e_s),
        ]


def replica_capacity(
    model: LatencyModel, lengths: Lengths, slo: SLO, *, max_seqs: int, chunked_prefill: bool
) -> Capacity:
    """See the module's docstring."""
    deployment = model.deployment
    mean_in, mean_out = lengths.mean_input, lengths.mean_output
    steps = max(mean_out - 1.0, 0.01)  # decode steps after the first token (> 0: rho < 1)
    typical_steps = max(lengths.quantile_output(0.5) - 1.0, 1.0)
    prefills = np.asarray(model.prefill_time(lengths.inputs.astype(np.float64)))
    ep, ep2 = float(prefills.mean()), float(np.mean(prefills**2))
    p99_prefill = float(model.prefill_time(lengths.quantile_input(0.99))[()])
    chunks = math.ceil(lengths.quantile_input(0.99) / deployment.max_batched_tokens)
    overhead = model.profile.request_overhead_ms * 1e-3

    slots = deployment.kv_capacity_tokens // max(1, math.ceil(mean_in + mean_out))
    batch_max = max(1, min(max_seqs, slots))
    batch = np.arange(1, batch_max + 1, dtype=np.float64)
    step_raw = np.asarray(model.decode_time(batch, batch * (mean_in + mean_out / 2)))
    rate = batch / (steps * step_raw + batch * ep)
    rho = rate * ep
    step = step_raw / (1 - rho)
    wait = rate * ep2 / (2 * (1 - rho))
    # conditional mean wait W/rho, exponential tail: P(W > t) = rho exp(-t rho / W)
    tail = np.log(np.maximum(rho, 0.01) / 0.01)
    wait99 = np.where(rho > 0.01, wait / np.maximum(rho, 1e-12) * tail, 0.0)
    busy = 1 - np.exp(-batch)
    ttft99 = overhead + p99_prefill + wait99 + busy * step_raw
    if chunked_prefill:
        ttft99 = ttft99 + chunks * step_raw
    ttft_mean = overhead + ep + wait + busy * step_raw / 2

    fluctuation = batch + Z99 * np.sqrt(batch)
    index99 = np.minimum(np.ceil(fluctuation).astype(np.intp), batch_max) - 1
    stalls = rate * typical_steps * step  # prefills landing during a typical decode
    tpot99 = step_raw[index99] + (stalls * ep + Z99 * np.sqrt(stalls * ep2)) / typical_steps
    e2e99 = ttft_mean + max(lengths.quantile_output(0.99) - 1, 0) * step

    ok = {
        "ttft": ttft99 <= (slo.ttft_s or math.inf),
        "tpot": tpot99 <= (slo.tpot_s or math.inf),
        "e2e": e2e99 <= (slo.e2e_s or math.inf),
        "batch": (fluctuation <= batch_max) | (batch == 1),
    }
    feasible = np.logical_and.reduce(list(ok.values()))
    # the largest batch below the first infeasible one (latencies grow with the load)
    bad = np.flatnonzero(~feasible)
    last = (int(bad[0]) if len(bad) else len(batch)) - 1
    if last < 0:
        binding = next(k for k, v in ok.items() if not v[0])
        i, rps = 0, 0.0
    else:
        i = last
        rps = float(rate[i])
        binding = (
            next((k for k, v in ok.items() if not v[i + 1]), "batch")
            if i + 1 < len(batch)
            else "batch"
        )
    return Capacity(
        rps=rps,
        batch=float(batch[i]),
        ttft_p99_s=float(ttft99[i]),
        tpot_p99_s=float(tpot99[i]),
        e2e_p99_s=float(e2e99[i]),
        binding=binding,
        max_rps=float(rate[-1]),
    )


def hourly_replicas(
    requests_per_hour: NDArray[np.float64], rps_per_replica: float, min_replicas: int
) -> NDArray[np.int64]:
    """Replicas each hour needs at ``rps_per_replica`` each (never below ``min_replicas``)."""
    if rps_per_replica <= 0:
        raise ValueError("a replica with no capacity cannot serve any load")
    need = np.ceil(requests_per_hour / HOUR_S / rps_per_replica - 1e-9)
    return np.maximum(need, min_replicas).astype(np.int64)


def hourly_instances(replicas: NDArray[np.int64], replicas_per_instance: int) -> NDArray[np.int64]:
    """Whole instances for the replicas (an 8-GPU instance at TP 2 holds 4)."""
    return -(-replicas // replicas_per_instance)
