"""Request-level latencies derived from iteration times: one request at a batch size, maximum
throughput, and the steady state of a server under an open (requests/s) or closed
(concurrency) load.

The steady state is a mean-value approximation of continuous batching, not a simulation: decode
steps run at the batch the load sustains (Little's law), stretched by the share of time spent
on other requests' prefills; a prompt waits for the prefills ahead of it (M/D/1) and for the
iteration in progress. The discrete-event simulator gives distributions and P99s; this gives
means in microseconds, for calibration against published load tests and for quick screening.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from planner.errors import PlannerError, UsageError
from planner.latency.model import DoesNotFitError, LatencyModel

LoadKind = Literal["batch", "qps", "concurrency"]


@dataclass(frozen=True)
class RequestLatency:
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    batch: float  # sequences decoding together

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SaturatedError(PlannerError, ValueError):
    """The load exceeds what the deployment can serve: queues grow without bound."""


def _scalar(value: Any) -> float:
    return float(np.asarray(value).reshape(-1)[0])


def at_batch(
    model: LatencyModel, input_tokens: int, output_tokens: int, batch: int = 1
) -> RequestLatency:
    """One request decoding alongside ``batch - 1`` others of the same shape."""
    if batch < 1:
        raise UsageError(f"batch must be at least 1, got {batch}")
    others = batch - 1
    mean_context = input_tokens + output_tokens / 2
    prefill = model.mixed_time(input_tokens, 0, others, others * mean_context)
    tpot = model.decode_time(batch, batch * mean_context)
    ttft = _scalar(prefill) + model.profile.request_overhead_ms * 1e-3
    step = _scalar(tpot)
    e2e = ttft + max(output_tokens - 1, 0) * step
    return RequestLatency(ttft * 1e3, step * 1e3, e2e * 1e3, float(batch))


def static_batch(
    model: LatencyModel, input_tokens: int, output_tokens: int, batch: int = 1
) -> RequestLatency:
    """Static batching, as benchmark tables' "static batching" rows run it: ``batch`` prompts
    prefilled together in one iteration, then decoded together to the end. Time per output
    token is the mean decode step over the growing context."""
    if batch < 1:
        raise UsageError(f"batch must be at least 1, got {batch}")
    prefill = _scalar(model.prefill_time(input_tokens, batch))
    ttft = prefill + model.profile.request_overhead_ms * 1e-3
    mean_context = input_tokens + output_tokens / 2
    step = _scalar(model.decode_time(batch, batch * mean_context))
    e2e = ttft + max(output_tokens - 1, 0) * step
    return RequestLatency(ttft * 1e3, step * 1e3, e2e * 1e3, float(batch))


def max_batch(
    model: LatencyModel, input_tokens: int, output_tokens: int, max_seqs: int | None = None
) -> int:
    """Most sequences of this shape that fit the KV cache at once (and the max-sequences cap);
    a sequence longer than the whole KV cache is an error."""
    per_sequence = input_tokens + output_tokens
    d = model.deployment
    capacity = d.kv_capacity_tokens
    if per_sequence > capacity:
        raise DoesNotFitError(
            f"a sequence of {per_sequence:,} tokens needs more KV cache than the {capacity:,} "
            f"tokens {d.model.name} leaves on {d.tp} x {d.gpu.name}"
        )
    limit = d.max_seqs if max_seqs is None else max_seqs
    return min(limit, capacity // per_sequence)


def mixed_iteration(
    model: LatencyModel, decoding: float, prompts: float, input_tokens: int, output_tokens: int
) -> float:
    """Seconds of one continuous-batching iteration: ``decoding`` sequences each take a decode
    step while ``prompts`` whole prompts are prefilled alongside (engines batch them all into
    one forward pass up to the batched-token budget, so the weights are read once)."""
    context = input_tokens + output_tokens / 2
    s = float(input_tokens)
    return model.iteration_seconds(
        decoding + prompts * s,
        decoding * (context + 1) + prompts * s * (s + 1) / 2,
        decoding * context,
        decoding + prompts,
    )


def max_throughput(
    model: LatencyModel, input_tokens: int, output_tokens: int, max_seqs: int | None = None
) -> dict[str, float]:
    """Offline maximum throughput: every iteration decodes the largest batch that fits and
    prefills the prompts that replace finishing sequences, batched together within the
    token budget (a sequence is replaced every ``output - 1`` iterations)."""
    budget = model.deployment.max_batched_tokens
    resident = max_batch(model, input_tokens, output_tokens, max_seqs)
    if output_tokens <= 1:  # prefill only: as many whole prompts as the budget takes
        decoding = 0.0
        prompts = float(max(1, min(resident, budget // input_tokens)))
    else:
        lifetime = output_tokens - 1  # iterations a sequence decodes after its first token
        # resident = decoding + prompts, prompts = decoding / lifetime; tokens within budget
        decoding = min(resident * lifetime / (lifetime + 1), budget / (1 + input_tokens / lifetime))
        prompts = decoding / lifetime
    step = mixed_iteration(model, decoding, prompts, input_tokens, output_tokens)
    requests_per_s = prompts / step
    return {
        "batch": decoding + prompts,
        "prompts_per_iteration": prompts,
        "iteration_ms": step * 1e3,
        "output_tokens_per_s": requests_per_s * output_tokens,
        "requests_per_s": requests_per_s,
    }


def _check_load(kind: str, load: float) -> None:
    if not (math.isfinite(load) and load > 0):
        raise UsageError(f"a {kind} load must be positive and finite, got {load:g}")


def steady_state(
    model: LatencyModel,
    input_tokens: int,
    output_tokens: int,
    kind: LoadKind,
    load: float,
    max_seqs: int | None = None,
) -> RequestLatency:
    """Mean TTFT and time per output token under a load: ``batch`` (a batch of that many),
    ``qps`` (Poisson arrivals per second) or ``concurrency`` (that many clients, each sending
    its next request when the last one ends).

    Continuous batching as engines run it: each iteration decodes the batch and prefills the
    prompts that arrived during the previous one, together (see :func:`mixed_iteration`). With
    ``p = 1 - exp(-rate x T)`` of the iterations carrying prompts, the mean iteration is
    ``T = (1 - p) decode(B) + p mixed(B, rate x T / p)``, the batch follows Little's law
    (``B = rate x (output - 1) x T``), and a prompt waits for the iteration in progress and, as
    the token budget fills, for the prompt tokens ahead of it (an M/D/1 queue)."""
    _check_load(kind, load)
    if kind == "batch":
        return at_batch(model, input_tokens, output_tokens, int(load))
    capacity = max_batch(model, input_tokens, output_tokens, max_seqs)
    budget = model.deployment.max_batched_tokens
    overhead = model.profile.request_overhead_ms * 1e-3
    decode_steps = max(output_tokens - 1, 0)
    s = input_tokens

    def at_rate(rate: float, batch: float, busy: float) -> tuple[float, float, float]:
        """(time per output token, TTFT, prompt-token utilization) at ``rate`` arrivals/s with
        ``batch`` sequences decoding and ``busy`` the chance an iteration is running."""
        t_dec = mixed_iteration(model, batch, 0.0, s, output_tokens) if batch else 0.0
        step = mixed_iteration(model, batch, 1.0, s, output_tokens)
        for _ in range(40):  # T depends on the prompts per iteration, which depend on T
            arrivals = rate * step if step else 0.0
            share = -math.expm1(-arrivals)
            per = max(arrivals / share, 1.0) if share > 0 else 1.0
            mixed = mixed_iteration(model, batch, per, s, output_tokens)
            new = (1 - share) * t_dec + share * mixed
            if math.isclose(new, step, rel_tol=1e-7):
                break
            step = new
        room = max(budget - batch, 1.0)
        utilization = rate * s * step / room  # prompt tokens per iteration / budget left
        own = mixed_iteration(model, batch, 1 + rate * step, s, output_tokens)
        queue = utilization / (2 * (1 - utilization)) * step if utilization < 1 else math.inf
        ttft = overhead + busy * step / 2 + own + queue
        return step, ttft, utilization

    def result(ttft: float, step: float, batch: float) -> RequestLatency:
        return RequestLatency(ttft * 1e3, step * 1e3, (ttft + decode_steps * step) * 1e3, batch)

    def solve(
        rate: float, busy_floor: float = 0.0, limit: float | None = None
    ) -> tuple[float, float, float, float]:
        """(step, TTFT, decoding batch, requests in the system) at ``rate``; raises
        SaturatedError past the token budget or ``limit`` sequences in the system (default: the
        KV capacity). With a ``limit`` (a closed loop) the chance an iteration is running
        stays ``busy_floor``: the clients, not the arrivals, say whether one is."""
        most = capacity if limit is None else limit
        # from just above an empty batch (a decode step reads the weights whatever the batch;
        # from exactly zero the iteration could settle on the empty batch, steps of no time)
        batch = 1e-9 if rate > 0 and decode_steps else 0.0
        busy = busy_floor
        step = ttft = in_system = 0.0
        for _ in range(500):  # Little's law: batch = rate x decode time (rises from below)
            step, ttft, utilization = at_rate(rate, batch, busy)
            if not (utilization < 1 and math.isfinite(step) and math.isfinite(ttft)):
                raise SaturatedError(
                    f"{rate:g} prompts/s of {s:,} tokens need more than the "
                    f"{budget:,}-token iteration budget"
                )
            new_batch = rate * decode_steps * step
            in_system = rate * (ttft + decode_steps * step)
            if in_system > most * (1 + 1e-12):
                raise SaturatedError(
                    f"{in_system:.0f} sequences in flight exceed the {most:g} that fit"
                )
            new_busy = busy_floor if limit is not None else max(busy_floor, -math.expm1(-in_system))
            if math.isclose(new_batch, batch, rel_tol=1e-10, abs_tol=1e-12) and math.isclose(
                new_busy, busy, rel_tol=1e-10
            ):
                break
            batch, busy = new_batch, new_busy
        return step, ttft, batch, in_system

    if kind == "qps":
        step, ttft, batch, _ = solve(load)
        return result(ttft, step, max(batch, 1.0))

    # Closed loop: at most `capacity` clients are served at once, the rest queue for a slot.
    # The served clients cycle at the rate X where X x (TTFT(X) + decode time(X)) = served
    # (Little's law over the whole cycle). The cycle does not shorten as X rises, so
    # X x cycle(X) increases with X: bisect on X, a rate that would hold more than the served
    # clients in the system (or overrun the token budget) being too high.
    served = float(min(load, capacity))
    busy_floor = 1.0 if load > 1 else 0.0  # with two or more clients one is always running
    alone = at_batch(model, s, output_tokens, 1)
    low, high = 0.0, served / (alone.e2e_ms * 1e-3)  # about the shortest cycle
    for _ in range(60):  # make sure `high` is too high
        try:
            solve(high, busy_floor, limit=served)
        except SaturatedError:
            break
        low, high = high, 2 * high
    solved: tuple[float, float, float, float] | None = None
    for _ in range(200):
        middle = (low + high) / 2
        try:
            solved = solve(middle, busy_floor, limit=served)
        except SaturatedError:
            high = middle
            continue
        low = middle
        if high - low <= 1e-10 * high:
            break
    if solved is None or low == 0.0:
        raise SaturatedError(f"{load:g} clients of {s:,}-token prompts cannot be served")
    step, ttft, batch, _ = solve(low, busy_floor, limit=served)
    ttft += max(0.0, load - capacity) / low  # waiting for a free slot
    return result(ttft, step, max(batch, 1.0))


def saturation_qps(
    model: LatencyModel, input_tokens: int, output_tokens: int, max_seqs: int | None = None
) -> float:
    """The highest Poisson rate (requests/s, to 0.1%) that :func:`steady_state` serves without
    saturating: the capacity a ``qps`` load is measured against."""

    def served(rate: float) -> bool:
        try:
            steady_state(model, input_tokens, output_tokens, "qps", rate, max_seqs)
        except SaturatedError:
            return False
        return True

    # the offline maximum bounds any sustainable rate
    low, high = (
        0.0,
        2 * max_throughput(model, input_tokens, output_tokens, max_seqs)["requests_per_s"],
    )
    while high - low > 1e-3 * high:
        middle = (low + high) / 2
        low, high = (middle, high) if served(middle) else (low, middle)
    return low
