"""The analytic screen: how many requests per second one replica serves within the P99
targets, from the latency model alone, and the hourly fleet that follows.

A mean-value model of continuous batching, vectorized over the batch size ``B``: at batch
``B`` a decode step takes ``s(B)``; a request decodes ``D`` steps and each arrival's prefill
takes the GPU for ``p`` (its share ``rho = r E[p]`` stretches every step by ``1/(1 - rho)``).
Little's law, ``B = r D s(B) / (1 - r E[p])``, solves for the arrival rate in closed form::

    r(B) = B / (D s(B) + B E[p])

so every batch size gives one load and its latencies (with chunked prefill ``p`` is only a
prompt's excess over the decode step it rides along with), and the capacity is the largest load
whose predicted P99s meet the targets. How many requests a replica holds, and what an arrival
finds on its replica, come from :func:`fleet_occupancy` (a birth-death chain of the fleet behind
the least-loaded router, pooled over ``replicas``). The P99s:

* TTFT: the prompt's prefill (the P99 prompt in its shared iteration), the wait for prompts
  ahead (:func:`prompt_queue`: M/G/1 on one replica, fewer and shorter waits behind the
  least-loaded router; exponential tail), the wait for a free sequence slot (exponential, from the
  chain) and the iteration in progress; the P99 of their sum is the sum of their means plus the
  root-sum-square of each one's P99 excess;
* TPOT: the step at the batch a decoding request sees (mean and 99th percentile), plus the
  prompts that land during its decode (a compound Poisson sum of busy periods,
  gamma-approximated), the P99 taken over the mix of output lengths (short outputs make the
  tail), the two tails combined like TTFT's;
* E2E: mean TTFT plus the P99 output length at the mean step.

The load must stay below the full batch's throughput; the capacity is interpolated between the
two grid loads where the binding target is crossed. The screen ranks; the simulator decides
(``verify``). Accuracy against the simulator: ``docs/recommender.md``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import gammaincc

from planner.latency.model import LatencyModel
from planner.simulate.engine import ADMISSION_POLICIES, whole_kv_need
from planner.simulate.engine import BLOCK_TOKENS as KV_BLOCK_TOKENS
from planner.simulate.metrics import SLO
from planner.workload.rates import HOUR_S

LIGHT_BATCHES = np.array([0.05, 0.1, 0.2, 0.35, 0.5, 0.7])  # loads below one sequence at a time
TPOT_MIX_POINTS = 256  # output-length quantiles the TPOT tail is averaged over
PROMPT_POINTS = 32  # prompt-length quantiles a prefill's stall of the batch is averaged over
METRICS = ("ttft", "tpot", "e2e")
# The prompt queue an arrival meets, fitted to the simulator (benchmarks/prompt_queue.py;
# docs/recommender.md). A lone replica's M/G/1 wait runs this much longer than Pollaczek-
# Khinchine's (chunked prompts, the iteration in progress):
LONE_REPLICA_WAIT = 2**0.25
# Behind the least-loaded router a replica that has just taken a request holds one more than
# the rest, so the next arrivals go elsewhere: each replica's arrivals come more evenly than
# Poisson, by a smoothing s(n) = SMOOTHING * (1 - n^-SMOOTHING_DECAY) (0 for one replica):
SMOOTHING, SMOOTHING_DECAY = 0.54, 1.17
# - the share of arrivals that wait for prompts ahead is one replica's times 1 - s(n) + BUSIER
#   rho (at most 1), and the queue they meet seldom holds more than the prompt in service: the
#   M/G/1 wait's growth 1 / (1 - rho) flattens to (1 - rho) ** -((2 / n) ** BACKLOG_DECAY);
BUSIER, BACKLOG_DECAY = 0.35, 0.6
# - the arrivals in a window expecting m of them vary by m (1 - s(n) m / (m + COUNT_SCALE))
#   instead of Poisson's m (their index of dispersion falls from 1 toward 1 - s(n))
COUNT_SCALE = 1.5


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
    def decoding_context(self) -> float:
        """Mean context (prompt and output so far) of a sequence in the decode batch: a request
        decoding D steps is there for D of them, so longer outputs weigh more."""
        steps = self._decode_steps
        return self._decode_weighted(self.inputs + 1 + steps / 2, float(self.inputs.mean()) + 1.0)

    @property
    def decoding_need(self) -> float:
        """Mean whole KV need of a sequence in the decode batch, weighted like
        :attr:`decoding_context`: what a no-evict engine reserves."""
        needs = self._whole_needs
        return self._decode_weighted(needs, float(needs.mean()))

    @property
    def packing_loss(self) -> float:
        """KV tokens a no-evict cache leaves free on average while the request at the head of
        the queue waits for room: half its need, a need met in proportion to its size."""
        needs = self._whole_needs
        return float((needs**2).sum() / (2 * needs.sum()))

    @property
    def _decode_steps(self) -> NDArray[np.float64]:
        return np.maximum(self.outputs, 1).astype(np.float64) - 1

    @property
    def _whole_needs(self) -> NDArray[np.float64]:
        outputs = np.maximum(self.outputs, 1)
        return np.asarray(whole_kv_need(self.inputs, outputs), dtype=np.float64)

    def _decode_weighted(self, values: NDArray[np.float64], without_decodes: float) -> float:
        """Mean of ``values`` over the sequences in the decode batch (each weighted by its
        decode steps); ``without_decodes`` when no request decodes at all."""
        steps = self._decode_steps
        if steps.sum() <= 0:
            return without_decodes
        return float((steps * values).sum() / steps.sum())

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
    model: LatencyModel,
    lengths: Lengths,
    slo: SLO,
    *,
    max_seqs: int,
    chunked_prefill: bool,
    replicas: int = 1,
    admission: str = "preempt",
    watermark: float = 0.0,
) -> Capacity:
    """See the module's docstring. ``replicas``: how many replicas share the load behind the
    least-loaded router (1: the replica alone, the most conservative). ``admission`` and
    ``watermark``: the engine's admission policy (``planner.simulate.engine``): ``no_evict``
    reserves each sequence's whole KV need, ``preempt`` lets sequences hold what they have
    written and keeps ``watermark`` of the cache free."""
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    if admission not in ADMISSION_POLICIES:
        raise ValueError(f"admission must be one of {ADMISSION_POLICIES}, got {admission!r}")
    deployment = model.deployment
    steps = max(lengths.mean_output - 1.0, 0.01)  # decode steps after the first token (> 0)
    prefills = np.asarray(model.prefill_time(lengths.inputs.astype(np.float64)))
    ep, ep2 = float(prefills.mean()), float(np.mean(prefills**2))
    p99_prefill = float(model.prefill_time(lengths.quantile_input(0.99))[()])
    chunks = math.ceil(lengths.quantile_input(0.99) / deployment.max_batched_tokens)
    overhead = model.profile.request_overhead_ms * 1e-3

    # a decoding sequence holds its context plus one partly filled KV block; under no-evict
    # admission it holds its whole need from the start
    held = lengths.decoding_context
    per_slot = lengths.decoding_need if admission == "no_evict" else held + KV_BLOCK_TOKENS
    usable = deployment.kv_capacity_tokens * (1.0 - watermark)
    if admission == "no_evict":
        # first come, first served: the free space left when the next request's need does not
        # fit is wasted, on average half a need met in proportion to its size
        usable -= lengths.packing_loss
    slots = int(usable // max(1, math.ceil(per_slot)))
    batch_max = max(1, min(max_seqs, slots))
    # fractional batches are light loads: one sequence decoding part of the time
    batch = np.concatenate((LIGHT_BATCHES, np.arange(1, batch_max + 1, dtype=np.float64)))
    decoding = np.maximum(batch, 1.0)
    context = decoding * held
    step_raw = np.asarray(model.decode_time(decoding, context))
    if chunked_prefill:
        # the decodes ride along in the prefill's iteration: a prompt holds the batch back only
        # by its iteration's excess over a decode step (weights are read once for both)
        quantiles = np.quantile(lengths.inputs, (np.arange(PROMPT_POINTS) + 0.5) / PROMPT_POINTS)
        stall = mixed_iteration(model, quantiles[None, :], decoding[:, None], context[:, None])
        stall = np.maximum(stall - step_raw[:, None], 0.0)
        xp, xp2 = stall.mean(axis=1), (stall**2).mean(axis=1)
        q99 = lengths.quantile_input(0.99)
        ride = mixed_iteration(model, np.full_like(decoding, q99), decoding, context) - p99_prefill
        prompt99 = p99_prefill + chunks * np.maximum(ride, 0.0)
    else:  # prefill-first: the prompt's iteration runs alone and the batch waits it out
        xp, xp2 = np.full_like(batch, ep), np.full_like(batch, ep2)
        prompt99 = np.full_like(batch, p99_prefill)
    rate = batch / (steps * step_raw + batch * xp)
    step = step_raw / (1 - rate * xp)
    rho = rate * ep  # the GPU's share spent on prompts: their M/G/1 queue
    # how many requests the fleet holds, and what an arrival finds on its replica
    fleet = fleet_occupancy(rate, rate[len(LIGHT_BATCHES) :], replicas)
    # an arrival waits for prompts ahead with probability `waits`, and then for an exponential
    # time with mean `queued` (one prompt's residual E[p^2] / 2 E[p], stretched by the backlog)
    waits, backlog = prompt_queue(rho, fleet.prefill_share, replicas)
    queued = backlog * ep2 / (2 * ep)
    wait = waits * queued
    tail = np.log(np.maximum(waits, 0.01) / 0.01)
    wait99 = np.where(waits > 0.01, queued * tail, 0.0)
    in_progress = fleet.all_busy * step_raw / 2  # the iteration the arrival's replica is in
    slot_wait = fleet.slot_wait / fleet.slot_rate
    slot_wait99 = np.where(
        fleet.slot_wait > 0.01,
        np.log(np.maximum(fleet.slot_wait, 0.01) / 0.01) / fleet.slot_rate,
        0.0,
    )
    ttft_mean = overhead + ep + wait + in_progress + slot_wait
    # P99 of the sum of independent delays: the means plus the root-sum-square of each one's
    # excess of its P99 over its mean (adding P99s would assume they all peak together)
    excess = np.sqrt(
        (prompt99 - ep) ** 2
        + (wait99 - wait) ** 2
        + (slot_wait99 - slot_wait) ** 2
        + in_progress**2
    )
    ttft99 = ttft_mean + excess
    e2e99 = ttft_mean + max(lengths.quantile_output(0.99) - 1, 0) * step

    # index of the grid's step at the replica's P99 batch (whole batches follow the light ones)
    index99 = len(LIGHT_BATCHES) + fleet.batch99 - 1
    decode_steps = np.maximum(lengths.outputs, 1).astype(np.float64) - 1
    decode_steps = decode_steps[decode_steps > 0]  # TPOT needs two output tokens
    if len(decode_steps) > TPOT_MIX_POINTS:  # the mix, by equally likely quantiles
        decode_steps = np.quantile(
            decode_steps, (np.arange(TPOT_MIX_POINTS) + 0.5) / TPOT_MIX_POINTS
        )

    whole_batches = np.arange(1, batch_max + 1, dtype=np.float64)
    whole_steps = step_raw[len(LIGHT_BATCHES) :]

    def tpot99_at(i: int) -> float:
        """A request's TPOT: the step at the batch it decodes in, plus the prompts landing on
        its replica meanwhile. The step fluctuates with the replica's batch (mean at the batch
        a decoding request sees, P99 at the replica's P99 batch); the landings are a compound
        sum over the request's decode (Poisson on one replica, more even behind the
        least-loaded router: :func:`jsq_smoothing`). Each prompt holds the batch back by a busy
        period (prompts arriving during a stall stall it further: mean ``x / (1 - rho)``,
        second moment ``x2 / (1 - rho)^3``). The two tails combine like TTFT's delays: the
        means plus the root-sum-square of the excesses."""
        step_mean = float(np.interp(fleet.batch_seen[i], whole_batches, whole_steps))
        step99 = max(float(step_raw[index99[i]]), step_mean)
        # prefills land only on the least-loaded replicas (fleet_occupancy's landing_share)
        landing = float(rate[i] * step_mean * fleet.landing_share[i])
        busy = max(1.0 - float(rate[i] * xp[i]), 1e-9)
        stall_mean, stall_square = float(xp[i]) / busy, float(xp2[i]) / busy**3
        stall99 = tpot_p99(
            0.0, landing, decode_steps, stall_mean, stall_square, jsq_smoothing(replicas)
        )
        stall_per_step = landing * stall_mean
        spread = math.hypot(step99 - step_mean, max(stall99 - stall_per_step, 0.0))
        return step_mean + stall_per_step + spread

    ok = {
        "ttft": ttft99 <= (slo.ttft_s or math.inf),
        "e2e": e2e99 <= (slo.e2e_s or math.inf),
        # the queue for sequence slots is stable only below the full batch's throughput
        "batch": (fleet.full_load < 1) & (rho < 1),
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
        return Capacity(
            rps=0.0,
            batch=float(batch[0]),
            ttft_p99_s=float(ttft99[0]),
            tpot_p99_s=tpot0,
            e2e_p99_s=float(e2e99[0]),
            binding=binding,
            max_rps=float(rate[-1]),
        )
    at = {
        "rate": rate[last],
        "batch": batch[last],
        "ttft": ttft99[last],
        "tpot": tpot99_at(last),
        "e2e": e2e99[last],
    }
    if binding in METRICS and last + 1 < len(batch) and ok["batch"][last + 1]:
        # the grid's next batch misses the binding target: the capacity lies between the two
        # loads, where the target is crossed (latencies are smooth in the load; whole batches
        # would be a step of 1/B in the capacity, and the light loads are coarser still)
        after = {
            "rate": rate[last + 1],
            "batch": batch[last + 1],
            "ttft": ttft99[last + 1],
            "tpot": tpot99_at(last + 1),
            "e2e": e2e99[last + 1],
        }
        target = {"ttft": slo.ttft_s, "tpot": slo.tpot_s, "e2e": slo.e2e_s}[binding]
        assert target is not None  # a binding latency has a target
        rise = after[binding] - at[binding]
        share = min(max((target - at[binding]) / rise, 0.0), 1.0) if rise > 0 else 0.0
        at = {key: value + share * (after[key] - value) for key, value in at.items()}
    return Capacity(
        rps=float(at["rate"]),
        batch=float(at["batch"]),
        ttft_p99_s=float(at["ttft"]),
        tpot_p99_s=float(at["tpot"]),
        e2e_p99_s=float(at["e2e"]),
        binding=binding,
        max_rps=float(rate[-1]),
    )


def prompt_queue(
    rho: NDArray[np.float64], prefill_share: NDArray[np.float64], replicas: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The prompt queue an arrival meets at its replica: the probability that it waits for
    prompts ahead, and how much the wait given that exceeds one prompt's residual.

    ``rho``: a replica's share of time on prompts; ``prefill_share``: how much more often than
    the fleet's average an arrival meets a busy replica (:func:`fleet_occupancy`). One replica is
    an M/G/1 queue (it waits with probability ``rho``, for ``1 / (1 - rho)`` residuals) with the
    fitted ``LONE_REPLICA_WAIT``. Behind the least-loaded router the replica that has just taken
    a prompt holds one request more than the rest, so arrivals join it less often, and less
    often still with more replicas to choose from (:func:`jsq_smoothing`); the queue seldom
    holds a second prompt, so the backlog's growth with ``rho`` flattens. Both are fitted to the
    simulator over 5 deployments, 2-8 replicas and ``rho`` 0.07-0.42 (docs/recommender.md).
    """
    idle = np.maximum(1 - rho, 1e-9)  # (rho >= 1 is flagged infeasible by the caller)
    waits = prefill_share * rho
    if replicas == 1:
        return waits, LONE_REPLICA_WAIT / idle
    avoided = 1 - jsq_smoothing(replicas) + BUSIER * rho
    return waits * np.minimum(avoided, 1.0), idle ** -((2 / replicas) ** BACKLOG_DECAY)


def jsq_smoothing(replicas: int) -> float:
    """How much more evenly than Poisson the least-loaded router spreads arrivals over
    ``replicas`` (0: Poisson, one replica); fitted to the simulator (see the constants)."""
    return SMOOTHING * (1 - math.pow(replicas, -SMOOTHING_DECAY))


def mixed_iteration(
    model: LatencyModel,
    prompt: NDArray[np.float64],
    batch: NDArray[np.float64],
    context: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Seconds of one iteration that prefills ``prompt`` tokens while ``batch`` sequences
    holding ``context`` tokens decode a step (chunked prefill; arrays broadcast)."""
    cost = model.cost(
        prompt + batch, prompt * (prompt + 1) / 2 + context + batch, context, 1 + batch
    )
    return np.asarray(cost.total, dtype=np.float64)


@dataclass(frozen=True)
class Occupancy:
    """What the fleet holds at each arrival rate of :func:`fleet_occupancy` (arrays over the
    rates), and what an arriving request finds on the replica the router gives it."""

    all_busy: NDArray[np.float64]  # every replica holds work: the arrival's replica is busy
    prefill_share: NDArray[np.float64]  # its replica's chance to be prefilling, relative to one
    landing_share: NDArray[np.float64]  # a replica's arrivals, relative, that land beside a
    # decoding request (the least-loaded router sends fewer to the busier replicas)
    slot_wait: NDArray[np.float64]  # P(every sequence slot of the fleet is taken)
    slot_rate: NDArray[np.float64]  # the wait for a slot, given one, is exponential at this rate
    batch99: NDArray[np.intp]  # the replica's 99th-percentile batch (whole sequences, >= 1)
    batch_seen: NDArray[np.float64]  # mean batch of the replica a decoding request is in (>= 1)
    full_load: NDArray[np.float64]  # arrivals / the full replicas' completions (< 1: stable)


OCCUPANCY_CELLS = 4_000_000  # states x rates computed at once (memory bound)


def fleet_occupancy(
    arrival_rate: NDArray[np.float64], completion_rate: NDArray[np.float64], replicas: int
) -> Occupancy:
    """Requests in a fleet of ``replicas`` behind a least-loaded (join-the-shortest-queue)
    router, as a birth-death chain on the fleet's total ``N``.

    ``arrival_rate``: requests/s per replica. ``completion_rate[k - 1]``: requests/s a replica
    completes with ``k`` sequences decoding (``k = 1 .. slots``); past its slots the rest wait.
    The router keeps the replicas within one request of each other, so with ``N = n q + m`` the
    fleet completes ``m c(q + 1) + (n - m) c(q)``: a pooled queue whose service rate grows with
    what it holds, M/M/infinity (Poisson) at light load and a single saturating server near
    the full batch. An arrival waits for a slot when every slot is taken, behind the requests
    queued at its own replica (no jockeying): a geometric number of completions at the full
    replica's rate, an exponential wait. With one replica this is the replica's own queue;
    with more, an arrival goes to an idle replica while there is one.
    """
    n = replicas
    slots = len(completion_rate)
    states = n * slots
    per_replica = np.concatenate(([0.0], completion_rate, completion_rate[-1:]))
    quotient, remainder = np.divmod(np.arange(1, states + 1), n)
    fleet_rate = remainder * per_replica[quotient + 1] + (n - remainder) * per_replica[quotient]
    full_rate = float(completion_rate[-1])
    arrivals = np.asarray(arrival_rate, dtype=np.float64)
    load = arrivals / full_rate  # past the slots the chain is geometric with this ratio
    stable = load < 1
    ratio = np.where(stable, load, 0.5)  # unstable rates get placeholders, flagged by full_load
    all_busy = np.empty_like(arrivals)
    spread = np.empty_like(arrivals)  # E[min(N, n)] / n: a given replica is busy
    slot_wait = np.empty_like(arrivals)
    batch99 = np.empty(len(arrivals), dtype=np.intp)
    batch_seen = np.empty_like(arrivals)
    landing_share = np.empty_like(arrivals)
    # per state N = n q + m: m replicas decode q + 1 sequences, the others q (past the slots,
    # every replica is full); sum of the replicas' batches and of their squares
    whole, extra = np.divmod(np.arange(states + 1), n)
    batches = np.arange(states + 1, dtype=np.float64)
    squares = extra * (whole + 1.0) ** 2 + (n - extra) * whole.astype(np.float64) ** 2
    rows = max(1, OCCUPANCY_CELLS // (states + 1))
    log_fleet_rate = np.log(fleet_rate)
    for first in range(0, len(arrivals), rows):
        part = slice(first, first + rows)
        log_arrival = np.log(np.maximum(n * arrivals[part], 1e-300))[:, None]
        log_p = np.zeros((len(log_arrival), states + 1))
        log_p[:, 1:] = np.cumsum(log_arrival - log_fleet_rate, axis=1)
        weight = np.exp(log_p - log_p.max(axis=1, keepdims=True))
        queued = weight[:, -1] / (1 - ratio[part])  # N >= every slot, the geometric tail
        total = weight[:, :-1].sum(axis=1) + queued
        p = weight / total[:, None]
        below = p[:, : min(n, states + 1)].sum(axis=1)  # some replica is idle
        all_busy[part] = 1 - below
        held = np.minimum(np.arange(states + 1), n)
        spread[part] = ((p * held).sum(axis=1) + (queued / total - p[:, -1]) * n) / n
        slot_wait[part] = queued / total
        # the replica's batch is ceil(N / n) (at most its slots); its 99th percentile
        cdf = np.cumsum(p, axis=1)
        reach = np.argmax(cdf >= 0.99, axis=1)
        reach = np.where(cdf[:, -1] >= 0.99, reach, states)
        batch99[part] = np.maximum(-(-reach // n), 1)
        # a decoding request sits in a replica with probability in proportion to its batch
        beyond = (queued / total - p[:, -1])[:, None]  # N past the slots: every replica full
        sequences = (p * batches).sum(axis=1) + beyond[:, 0] * n * slots
        sequences_squared = (p * squares).sum(axis=1) + beyond[:, 0] * n * slots**2
        batch_seen[part] = np.where(
            sequences > 0, sequences_squared / np.maximum(sequences, 1e-300), 1.0
        )
        # arrivals go to the least-loaded replicas: with N = n q + m, the n - m replicas at q
        # take them all (every replica when m = 0), nothing lands on the m at q + 1; summed over
        # the sequences decoding, n x arrivals x q, so a decoding request meets n q / N of a
        # replica's arrivals (the busier replicas, where size-biased requests sit, get fewer)
        landed = (p * whole).sum(axis=1) + beyond[:, 0] * slots
        landing_share[part] = np.where(
            sequences > 0, n * landed / np.maximum(sequences, 1e-300), 1.0
        )
    stay = 1 - ratio**n  # a waiting request's completions left: geometric with this chance
    return Occupancy(
        all_busy=all_busy,
        prefill_share=np.where(spread > 0, all_busy / np.maximum(spread, 1e-300), 1.0),
        landing_share=landing_share,
        slot_wait=np.where(stable, slot_wait, 1.0),
        slot_rate=np.where(stable, stay * full_rate, 1e-12),
        batch99=np.minimum(batch99, slots),
        batch_seen=np.clip(batch_seen, 1.0, slots),
        full_load=load,
    )


def tpot_p99(
    base_step: float,
    arrivals_per_step: float,
    decode_steps: NDArray[np.float64],
    mean_prefill: float,
    mean_square_prefill: float,
    smoothing: float = 0.0,
) -> float:
    """P99 of time per output token over the mix of output lengths.

    A request decoding ``n`` steps takes ``base_step`` per step plus the prefills that arrive
    meanwhile (``m = arrivals_per_step x n`` of them); their total is a compound sum,
    approximated by the gamma with its mean and variance. The arrivals are Poisson with
    ``smoothing`` 0, more even than that behind the least-loaded router (:func:`jsq_smoothing`:
    their count varies by ``m (1 - smoothing m / (m + COUNT_SCALE))``). Short outputs make the
    tail: one long prompt's prefill over a few steps. Returns the t with ``mean_i P(TPOT_i > t)
    = 1%``.
    """
    if not len(decode_steps):
        return base_step
    arrivals = arrivals_per_step * decode_steps
    if arrivals_per_step <= 0 or mean_prefill <= 0:
        return base_step
    mean = arrivals * mean_prefill
    # Var = E[m] Var[X] + Var[m] E[X]^2, with Var[m] = E[m] x the count's index of dispersion
    dispersion = 1 - smoothing * arrivals / (arrivals + COUNT_SCALE)
    variance = arrivals * (mean_square_prefill - (1 - dispersion) * mean_prefill**2)
    shape, scale = mean**2 / variance, variance / mean

    def exceed(t: float) -> float:
        return float(np.mean(gammaincc(shape, (t - base_step) * decode_steps / scale)))

    low, high = base_step, base_step + float(np.max((mean + 12 * np.sqrt(variance)) / decode_steps))
    if exceed(high) > 0.01:  # the tail past the 12-sigma bracket: its end, as bisection gave
        return high
    from scipy.optimize import brentq  # loaded with the screen's first tail, not at start-up

    # Brent's method: about a dozen evaluations of the mix where bisection took 40 (the screen
    # spends most of its time here); the root to 1e-12 of the bracket, rounded up
    tolerance = (high - low) * 1e-12
    root = brentq(lambda t: exceed(t) - 0.01, low, high, xtol=tolerance)
    return float(root) + tolerance


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
