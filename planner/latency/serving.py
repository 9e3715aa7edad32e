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
from planner.latency.model import DEFAULT_MAX_SEQS, DoesNotFitError, LatencyModel

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


def max_batch(
    model: LatencyModel, input_tokens: int, output_tokens: int, max_seqs: int = DEFAULT_MAX_SEQS
) -> int:
    """Most sequences of this shape that fit the KV cache at once (and the max-sequences cap);
    a sequence longer than the whole KV cache is an error."""
    per_sequence = input_tokens + output_tokens
    capacity = model.deployment.kv_capacity_tokens
    if per_sequence > capacity:
        d = model.deployment
        raise DoesNotFitError(
            f"a sequence of {per_sequence:,} tokens needs more KV cache than the {capacity:,} "
            f"tokens {d.model.name} leaves on {d.tp} x {d.gpu.name}"
        )
    return min(max_seqs, capacity // per_sequence)


def max_throughput(
    model: LatencyModel, input_tokens: int, output_tokens: int, max_seqs: int = DEFAULT_MAX_SEQS
) -> dict[str, float]:
    """Output tokens/s at the largest batch that fits, prefills included."""
    batch = max_batch(model, input_tokens, output_tokens, max_seqs)
    step = _scalar(model.decode_time(batch, batch * (input_tokens + output_tokens / 2)))
    prefill = _scalar(model.prefill_time(input_tokens))
    cycle = output_tokens * step + batch * prefill  # every sequence in the batch is replaced once
    tokens_per_s = batch * output_tokens / cycle
    return {
        "batch": float(batch),
        "output_tokens_per_s": tokens_per_s,
        "requests_per_s": tokens_per_s / output_tokens,
    }


def steady_state(
    model: LatencyModel,
    input_tokens: int,
    output_tokens: int,
    kind: LoadKind,
    load: float,
    max_seqs: int = DEFAULT_MAX_SEQS,
) -> RequestLatency:
    """Mean TTFT and time per output token under a load: ``batch`` (a static batch of that
    many), ``qps`` (Poisson arrivals per second) or ``concurrency`` (that many clients, each
    sending its next request when the last one ends)."""
    if not (math.isfinite(load) and load > 0):
        raise UsageError(f"a {kind} load must be positive and finite, got {load:g}")
    if kind == "batch":
        return at_batch(model, input_tokens, output_tokens, int(load))
    capacity = max_batch(model, input_tokens, output_tokens, max_seqs)
    prefill = _scalar(model.prefill_time(input_tokens))
    overhead = model.profile.request_overhead_ms * 1e-3
    mean_context = input_tokens + output_tokens / 2
    decode_steps = max(output_tokens - 1, 0)

    def at_rate(rate: float, batch: float, busy: float) -> tuple[float, float]:
        """(time per output token, TTFT) with ``rate`` prefills/s, ``batch`` decoding, and
        ``busy`` the chance that an iteration is running when a prompt arrives."""
        prefill_share = rate * prefill
        step_raw = _scalar(model.decode_time(batch, batch * mean_context))
        step = step_raw / (1 - prefill_share)
        wait = rate * prefill**2 / (2 * (1 - prefill_share))  # M/D/1 queue of prefills
        return step, overhead + prefill + wait + busy * step_raw / 2

    def result(ttft: float, step: float, batch: float) -> RequestLatency:
        return RequestLatency(ttft * 1e3, step * 1e3, (ttft + decode_steps * step) * 1e3, batch)

    if kind == "qps":
        if load * prefill >= 1:
            share = load * prefill
            need = f"{share:.0%} of" if share < 10 else "over ten times"
            raise SaturatedError(f"prefills alone need {need} the GPU time")
        batch, busy = 1.0, 0.0
        for _ in range(200):  # Little's law: batch = rate x decode time
            step, ttft = at_rate(load, batch, busy)
            new_batch = max(1.0, load * decode_steps * step)
            if new_batch > capacity:
                raise SaturatedError(
                    f"{new_batch:.0f} sequences in flight exceed the {capacity} that fit"
                )
            # Requests in the system are Poisson (M/G/inf): the server is idle with e^-N.
            new_busy = 1 - math.exp(-load * (ttft + decode_steps * step))
            if math.isclose(new_batch, batch, rel_tol=1e-9) and math.isclose(
                new_busy, busy, rel_tol=1e-9
            ):
                break
            batch, busy = new_batch, new_busy
        return result(ttft, step, batch)

    # Closed loop: at most `capacity` clients are served at once, the rest queue for a slot.
    batch = float(min(load, capacity))
    busy = 1.0 if load > 1 else 0.0  # with two or more clients another one is always running
    low, high = 0.0, 1.0 / prefill
    for _ in range(100):  # the rate at which `batch` clients cycle: rate x cycle = batch
        rate = (low + high) / 2
        step, ttft = at_rate(rate, batch, busy)
        cycle = ttft + decode_steps * step
        low, high = (rate, high) if rate * cycle < batch else (low, rate)
    ttft += max(0.0, load - capacity) / rate  # waiting for a free slot
    return result(ttft, step, batch)


def saturation_qps(
    model: LatencyModel, input_tokens: int, output_tokens: int, max_seqs: int = DEFAULT_MAX_SEQS
) -> float:
    """The highest Poisson rate (requests/s, to 0.1%) that :func:`steady_state` serves without
    saturating: the capacity a ``qps`` load is measured against."""

    def served(rate: float) -> bool:
        try:
            steady_state(model, input_tokens, output_tokens, "qps", rate, max_seqs)
        except SaturatedError:
            return False
        return True

    prefill = _scalar(model.prefill_time(input_tokens))
    low, high = 0.0, 1.0 / prefill  # prefills alone saturate at 1 / prefill
    while high - low > 1e-3 * high:
        middle = (low + high) / 2
        low, high = (middle, high) if served(middle) else (low, middle)
    return low
