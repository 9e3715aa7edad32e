"""The analytic screen: how many requests per second one replica serves within the P99
targets, from the latency model alone, and the hourly fleet that follows.

A mean-value model of continuous batching, vectorized over the batch size ``B``: at batch
``B`` a decode step takes ``s(B)``; a request decodes ``D`` steps and each arrival's prefill
takes the GPU for ``p`` (its share ``rho = r E[p]`` stretches every step by ``1/(1 - rho)``).
Little's law, ``B = r D s(B) / (1 - r E[p])``, solves for the arrival rate in closed form::

    r(B) = B / (D s(B) + B E[p])

so every batch size gives one load and its latencies, and the capacity is the largest load
whose predicted P99s meet the targets. The P99s use standard tail approximations:

* TTFT: the prompt's prefill (P99 prompt; with chunked prefill, plus the decode batch sharing
  each chunk's iteration), the M/G/1 wait for the prefills ahead of it with an exponential tail
  (``P(W > t) = rho exp(-rho t / E[W])``), the wait for a free sequence slot (M/M/c over the
  KV-cache / max-sequences slots, Erlang C) and the iteration in progress; the P99 of their sum
  is the sum of their means plus the root-sum-square of each one's P99 excess;
* TPOT: the step at the 99th percentile of the (Poisson) batch, plus the prefills that land
  during each request's decode (a compound Poisson sum, gamma-approximated), the P99 taken over
  the mix of output lengths (short outputs make the tail);
* E2E: mean TTFT plus the P99 output length at the mean step.

The batch must also leave room for its own fluctuation (``B + 2.33 sqrt(B)`` within the KV cache
and the max-sequences limit), and the load stay within 85% of the replica's saturated
throughput. The screen ranks; the simulator decides (``verify``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import gammaincc

from planner.latency.model import LatencyModel
from planner.simulate.metrics import SLO
from planner.simulate.workload import HOUR_S

Z99 = 2.326  # standard normal 99th percentile
LIGHT_BATCHES = np.array([0.05, 0.1, 0.2, 0.35, 0.5, 0.7])  # loads below one sequence at a time
TPOT_MIX_POINTS = 256  # output-length quantiles the TPOT tail is averaged over
MAX_UTILIZATION = 0.85  # of the replica's saturated throughput (see below)
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
    prefills = np.asarray(model.prefill_time(lengths.inputs.astype(np.float64)))
    ep, ep2 = float(prefills.mean()), float(np.mean(prefills**2))
    p99_prefill = float(model.prefill_time(lengths.quantile_input(0.99))[()])
    chunks = math.ceil(lengths.quantile_input(0.99) / deployment.max_batched_tokens)
    overhead = model.profile.request_overhead_ms * 1e-3

    slots = deployment.kv_capacity_tokens // max(1, math.ceil(mean_in + mean_out))
    batch_max = max(1, min(max_seqs, slots))
    # fractional batches are light loads: one sequence decoding part of the time
    batch = np.concatenate((LIGHT_BATCHES, np.arange(1, batch_max + 1, dtype=np.float64)))
    decoding = np.maximum(batch, 1.0)
    step_raw = np.asarray(model.decode_time(decoding, decoding * (mean_in + mean_out / 2)))
    rate = batch / (steps * step_raw + batch * ep)
    rho = rate * ep
    step = step_raw / (1 - rho)
    wait = rate * ep2 / (2 * (1 - rho))
    # conditional mean wait W/rho, exponential tail: P(W > t) = rho exp(-t rho / W)
    tail = np.log(np.maximum(rho, 0.01) / 0.01)
    wait99 = np.where(rho > 0.01, wait / np.maximum(rho, 1e-12) * tail, 0.0)
    busy = 1 - np.exp(-batch)
    ttft_mean = overhead + ep + wait + busy * step_raw / 2
    # waiting for a free sequence slot (KV cache or max sequences): M/M/c with c slots
    hold = ttft_mean + steps * step  # how long a request keeps its slot
    offered = rate * hold
    queued = erlang_c(batch_max, offered)
    headroom = np.maximum(batch_max - offered, 1e-9)
    slot_wait = queued * hold / headroom
    slot_wait99 = np.where(
        queued > 0.01, hold / headroom * np.log(np.maximum(queued, 0.01) / 0.01), 0.0
    )
    ttft_mean = ttft_mean + slot_wait
    # P99 of the sum of independent delays: the means plus the root-sum-square of each one's
    # excess of its P99 over its mean (adding P99s would assume they all peak together)
    prompt99 = p99_prefill + (chunks * step_raw if chunked_prefill else 0.0)
    excess = np.sqrt(
        (prompt99 - ep) ** 2
        + (wait99 - wait) ** 2
        + (slot_wait99 - slot_wait) ** 2
        + (busy * step_raw / 2) ** 2
    )
    ttft99 = ttft_mean + excess
    e2e99 = ttft_mean + max(lengths.quantile_output(0.99) - 1, 0) * step

    fluctuation = batch + Z99 * np.sqrt(batch)
    # index of the grid's step at the fluctuated batch (whole batches start after the light ones)
    index99 = len(LIGHT_BATCHES) + np.minimum(np.ceil(fluctuation).astype(np.intp), batch_max) - 1
    decode_steps = np.maximum(lengths.outputs, 1).astype(np.float64) - 1
    decode_steps = decode_steps[decode_steps > 0]  # TPOT needs two output tokens
    if len(decode_steps) > TPOT_MIX_POINTS:  # the mix, by equally likely quantiles
        decode_steps = np.quantile(
            decode_steps, (np.arange(TPOT_MIX_POINTS) + 0.5) / TPOT_MIX_POINTS
        )

    def tpot99_at(i: int) -> float:
        return tpot_p99(
            float(step_raw[index99[i]]), float(rate[i] * step[i]), decode_steps, ep, ep2
        )

    ok = {
        "ttft": ttft99 <= (slo.ttft_s or math.inf),
        "e2e": e2e99 <= (slo.e2e_s or math.inf),
        # room for the batch to fluctuate, and for queues: near saturation (the last 15% of
        # the replica's throughput) P99 TTFT grows several-fold within a few percent of load;
        # 0.9 still gave 1.1-1.4x the TTFT target in simulation without chunked prefill
        "batch": ((fluctuation <= batch_max) | (batch <= 1))
        & (offered < batch_max)
        & (rate <= MAX_UTILIZATION * rate[-1]),
    }
    feasible = np.logical_and.reduce(list(ok.values()))
    # the largest batch below the first infeasible one (latencies grow with the load)
    bad = np.flatnonzero(~feasible)
    last = (int(bad[0]) if len(bad) else len(batch)) - 1
    binding = "batch"
    if last + 1 < len(batch):
        binding = next(k for k, v in ok.items() if not v[last + 1])
    if slo.tpot_s is not None and last >= 0 and tpot99_at(last) > slo.tpot_s:
        # TPOT's tail is one number per load: bisect for the last batch that meets it
        low, high = -1, last  # tpot99_at(high) misses; low meets (or -1: none does)
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if tpot99_at(mid) <= slo.tpot_s else (low, mid)
        last, binding = low, "tpot"
    if last < 0:
        tpot0 = tpot99_at(0)
        if not ok["ttft"][0]:
            binding = "ttft"
        elif slo.tpot_s is not None and tpot0 > slo.tpot_s:
            binding = "tpot"
        elif not ok["e2e"][0]:
            binding = "e2e"
        i, rps = 0, 0.0
    else:
        i, rps = last, float(rate[last])
    return Capacity(
        rps=rps,
        batch=float(batch[i]),
        ttft_p99_s=float(ttft99[i]),
        tpot_p99_s=tpot99_at(i),
        e2e_p99_s=float(e2e99[i]),
        binding=binding,
        max_rps=float(rate[-1]),
    )


def erlang_c(servers: int, load: NDArray[np.float64]) -> NDArray[np.float64]:
    """Probability that an arrival waits in an M/M/c queue with ``servers`` servers and
    ``load`` Erlangs offered (1 where the load reaches the servers)."""
    blocking = np.ones_like(load)
    for k in range(1, servers + 1):  # Erlang B, the stable recursion
        blocking = load * blocking / (k + load * blocking)
    below = load < servers
    waiting = servers * blocking / np.where(below, servers - load * (1 - blocking), 1.0)
    result: NDArray[np.float64] = np.where(below, np.clip(waiting, 0.0, 1.0), 1.0)
    return result


def tpot_p99(
    base_step: float,
    arrivals_per_step: float,
    decode_steps: NDArray[np.float64],
    mean_prefill: float,
    mean_square_prefill: float,
) -> float:
    """P99 of time per output token over the mix of output lengths.

    A request decoding ``n`` steps takes ``base_step`` per step plus the prefills that arrive
    meanwhile (``arrivals_per_step x n`` of them, Poisson); their total is a compound Poisson
    sum, approximated by the gamma with its mean and variance. Short outputs make the tail: one
    long prompt's prefill over a few steps. Returns the t with ``mean_i P(TPOT_i > t) = 1%``.
    """
    if not len(decode_steps):
        return base_step
    arrivals = arrivals_per_step * decode_steps
    if arrivals_per_step <= 0 or mean_prefill <= 0:
        return base_step
    mean = arrivals * mean_prefill
    variance = arrivals * mean_square_prefill
    shape, scale = mean**2 / variance, variance / mean

    def exceed(t: float) -> float:
        return float(np.mean(gammaincc(shape, (t - base_step) * decode_steps / scale)))

    low, high = base_step, base_step + float(np.max((mean + 12 * np.sqrt(variance)) / decode_steps))
    for _ in range(40):  # to 1e-12 of the bracket
        mid = (low + high) / 2
        low, high = (mid, high) if exceed(mid) > 0.01 else (low, mid)
    return high


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
