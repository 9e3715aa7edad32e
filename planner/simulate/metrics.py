"""Streaming statistics of a simulation: latency histograms, SLO counts, a fleet timeline, costs.

The simulator hands over finished (or rejected) requests in columnar chunks
(:class:`RequestChunk`). Everything here keeps a fixed amount of state per request class, or per
``resolution_s`` of simulated time for the :class:`Timeline`, so memory does not grow with the
number of requests: 12 million requests cost the same memory as 12 thousand.

Latency percentiles come from :class:`LogHistogram`, whose log-spaced bins are 0.2% wide; a
percentile read from it is within 0.1% (half a bin) of the exact value for any duration between
1 µs and 11.6 days.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

from planner.common.csvsafe import safe_text
from planner.common.files import atomic_output
from planner.errors import UsageError

# pandas and pyarrow (0.2 s to import) are loaded where a frame or a request file is made, not
# by every simulation
if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

__all__ = [
    "SLO",
    "LogHistogram",
    "MetricsCollector",
    "RequestChunk",
    "RequestWriter",
    "Timeline",
    "cost",
]

QUANTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.50),
    ("p90", 0.90),
    ("p95", 0.95),
    ("p99", 0.99),
)


class LogHistogram:
    """A histogram of positive durations in seconds, on fixed log-spaced bins.

    Bin ``i`` (1-based) holds ``[LOW_S * RATIO**(i-1), LOW_S * RATIO**i)`` with ``RATIO = 1.002``
    (each bin is 0.2% wide), covering ``LOW_S`` = 1e-6 s to at least ``HIGH_S`` = 1e6 s in
    13,830 bins (110 kB of counts). Two more bins catch the rest: values below 1 µs (zero and
    negative ones included) go to the underflow bin and count as 0 s; values beyond the last bin
    go to the overflow bin and are reported as the exact maximum. NaN values are ignored.

    :meth:`quantile` follows numpy's default (linear) percentile definition: it locates the two
    order statistics the exact percentile interpolates between, replaces each by the geometric
    midpoint of its bin (clamped to the exact minimum and maximum), and interpolates between
    those. A value in a bin is within a factor ``sqrt(RATIO)`` of the bin's midpoint, so for
    values within the bins' range the result is within ``MAX_RELATIVE_ERROR`` (0.1%) of
    ``numpy.percentile`` -- inside the 0.2% bin width. When both order statistics fall in the
    same bin (the usual case) the result is simply that bin's midpoint.

    The sum, minimum and maximum are tracked exactly, so :attr:`mean` and :attr:`max` are exact
    and ``quantile(1.0)`` is the exact maximum.
    """

    LOW_S: ClassVar[float] = 1e-6
    HIGH_S: ClassVar[float] = 1e6
    RATIO: ClassVar[float] = 1.002
    BINS: ClassVar[int] = math.ceil(math.log(HIGH_S / LOW_S) / math.log(RATIO))
    MAX_RELATIVE_ERROR: ClassVar[float] = math.sqrt(RATIO) - 1.0

    _LOG_LOW: ClassVar[float] = math.log(LOW_S)
    _INV_LOG_RATIO: ClassVar[float] = 1.0 / math.log(RATIO)
    _OVERFLOW: ClassVar[int] = BINS + 1

    def __init__(self) -> None:
        # index 0: underflow, 1..BINS: regular bins, BINS + 1: overflow
        self._counts: NDArray[np.int64] = np.zeros(self.BINS + 2, dtype=np.int64)
        self._count = 0
        self._sum = 0.0
        self._min = math.inf
        self._max = -math.inf

    @classmethod
    def bin_index(cls, values: NDArray[np.float64]) -> NDArray[np.intp]:
        """The bin of each (non-NaN) value: 0 underflow, 1..BINS regular, BINS + 1 overflow."""
        # clip first so that log() sees neither zero, negatives nor inf
        clipped = np.clip(values, cls.LOW_S * 0.5, cls.HIGH_S * 2.0)
        position = np.floor((np.log(clipped) - cls._LOG_LOW) * cls._INV_LOG_RATIO) + 1.0
        return np.clip(position, 0, cls._OVERFLOW).astype(np.intp)

    @classmethod
    def bin_value(cls, index: int) -> float:
        """The value a bin stands for: 0 for underflow, the geometric midpoint otherwise.

        The overflow bin has no upper edge; it stands for its lower edge here, and
        :meth:`quantile` reports the exact maximum for it instead.
        """
        if index <= 0:
            return 0.0
        if index >= cls._OVERFLOW:
            return cls.LOW_S * float(cls.RATIO**cls.BINS)
        return cls.LOW_S * float(cls.RATIO ** (index - 0.5))

    def add(self, values: NDArray[np.float64]) -> None:
        """Count ``values`` (seconds); NaN is ignored, values <= 0 count as 0."""
        values = np.asarray(values, dtype=np.float64).ravel()
        values = values[~np.isnan(values)]
        if values.size == 0:
            return
        self._counts += np.bincount(self.bin_index(values), minlength=self.BINS + 2)
        nonneg = np.maximum(values, 0.0)
        self._count += int(values.size)
        self._sum += float(nonneg.sum())
        self._min = min(self._min, float(nonneg.min()))
        self._max = max(self._max, float(nonneg.max()))

    def merge(self, other: LogHistogram) -> None:
        """Add everything counted in ``other`` to this histogram."""
        self._counts += other._counts
        self._count += other._count
        self._sum += other._sum
        self._min = min(self._min, other._min)
        self._max = max(self._max, other._max)

    @property
    def count(self) -> int:
        """How many values were added (NaN excluded)."""
        return self._count

    @property
    def mean(self) -> float:
        """The exact mean of the values added (NaN when there are none)."""
        return self._sum / self._count if self._count else math.nan

    @property
    def max(self) -> float:
        """The exact maximum (NaN when empty)."""
        return self._max if self._count else math.nan

    @property
    def min(self) -> float:
        """The exact minimum, with values <= 0 counted as 0 (NaN when empty)."""
        return self._min if self._count else math.nan

    def quantile(self, q: float) -> float:
        """The ``q``-quantile (``q`` in [0, 1]); NaN when the histogram is empty."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile {q!r} is outside [0, 1]")
        if self._count == 0:
            return math.nan
        if q == 1.0:
            return self._max
        if q == 0.0:
            return self._min
        rank = q * (self._count - 1)  # numpy's "linear" definition, 0-based
        below = math.floor(rank)
        above = min(below + 1, self._count - 1)
        cumulative = np.cumsum(self._counts)
        bins = np.searchsorted(cumulative, [below, above], side="right")
        low, high = self._value_of(int(bins[0])), self._value_of(int(bins[1]))
        return low + (rank - below) * (high - low)

    def _value_of(self, index: int) -> float:
        if index >= self._OVERFLOW:
            return self._max
        return min(max(self.bin_value(index), self._min), self._max)

    def stats(self) -> dict[str, float | None]:
        """p50, p90, p95, p99, max and mean in seconds, None when empty (JSON-ready)."""
        if self._count == 0:
            return {name: None for name in [*(n for n, _ in QUANTILES), "max", "mean"]}
        out: dict[str, float | None] = {name: self.quantile(q) for name, q in QUANTILES}
        out["max"] = self.max
        out["mean"] = self.mean
        return out


def _column(values: Any, dtype: type[np.generic], name: str) -> NDArray[Any]:
    array = np.asarray(values, dtype=dtype)
    if array.ndim != 1:
        raise ValueError(f"RequestChunk.{name} must be one-dimensional, not shape {array.shape}")
    return array


@dataclass(eq=False)  # arrays do not compare to one bool
class RequestChunk:
    """One chunk of finished or rejected requests, as columns (one numpy array per field).

    Times are simulated seconds. A rejected request has ``first_token_s`` and ``finish_s`` NaN
    and ``replica`` -1. Arrays are converted to the declared dtypes on construction and must all
    have the same length.
    """

    request_id: NDArray[np.int64]
    arrival_s: NDArray[np.float64]
    first_token_s: NDArray[np.float64]
    finish_s: NDArray[np.float64]
    replica: NDArray[np.int32]
    class_index: NDArray[np.int16]
    input_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    cached_tokens: NDArray[np.int64]  # prompt tokens served from the prefix cache
    preemptions: NDArray[np.int32]
    rejected: NDArray[np.bool_]
    response_cache_hit: NDArray[np.bool_]

    DTYPES: ClassVar[dict[str, type[np.generic]]] = {
        "request_id": np.int64,
        "arrival_s": np.float64,
        "first_token_s": np.float64,
        "finish_s": np.float64,
        "replica": np.int32,
        "class_index": np.int16,
        "input_tokens": np.int64,
        "output_tokens": np.int64,
        "cached_tokens": np.int64,
        "preemptions": np.int32,
        "rejected": np.bool_,
        "response_cache_hit": np.bool_,
    }

    def __post_init__(self) -> None:
        lengths = set()
        for name, dtype in self.DTYPES.items():
            array = _column(getattr(self, name), dtype, name)
            setattr(self, name, array)
            lengths.add(array.shape[0])
        if len(lengths) > 1:
            sizes = {name: len(getattr(self, name)) for name in self.DTYPES}
            raise ValueError(f"RequestChunk columns differ in length: {sizes}")

    def __len__(self) -> int:
        return int(self.request_id.shape[0])

    @property
    def ttft_s(self) -> NDArray[np.float64]:
        """Time to first token: first token - arrival (NaN if rejected)."""
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> NDArray[np.float64]:
        """Time per output token after the first; NaN with fewer than 2 output tokens."""
        steps = (self.output_tokens - 1).astype(np.float64)
        out = np.full(len(self), np.nan)
        np.divide(self.finish_s - self.first_token_s, steps, out=out, where=steps > 0)
        return out

    @property
    def e2e_s(self) -> NDArray[np.float64]:
        """End-to-end latency: finish - arrival (NaN if rejected)."""
        return self.finish_s - self.arrival_s


@dataclass(frozen=True)
class SLO:
    """Latency targets of a request class in seconds; None means no target."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            target = getattr(self, name)
            if target is not None and not (math.isfinite(target) and target > 0):
                raise UsageError(f"SLO {name} target {target!r}: expected a positive number")

    @property
    def any(self) -> bool:
        """Whether any target is set."""
        return any(t is not None for t in (self.ttft_s, self.tpot_s, self.e2e_s))

    def met(self, chunk: RequestChunk) -> NDArray[np.bool_]:
        """Per request: not rejected and every target set holds (bounds inclusive).

        TPOT is only checked where it is defined (at least two output tokens).
        """
        ok: NDArray[np.bool_] = ~chunk.rejected
        if self.ttft_s is not None:
            ok &= chunk.ttft_s <= self.ttft_s
        if self.e2e_s is not None:
            ok &= chunk.e2e_s <= self.e2e_s
        if self.tpot_s is not None:
            tpot = chunk.tpot_s
            ok &= np.isnan(tpot) | (tpot <= self.tpot_s)
        return ok


@dataclass
class _ClassStats:
    ttft: LogHistogram = field(default_factory=LogHistogram)
    tpot: LogHistogram = field(default_factory=LogHistogram)
    e2e: LogHistogram = field(default_factory=LogHistogram)
    requests: int = 0
    rejected: int = 0
    response_cache_hits: int = 0
    slo_met: int = 0
    preemptions: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    def merge(self, other: _ClassStats) -> None:
        self.ttft.merge(other.ttft)
        self.tpot.merge(other.tpot)
        self.e2e.merge(other.e2e)
        self.requests += other.requests
        self.rejected += other.rejected
        self.response_cache_hits += other.response_cache_hits
        self.slo_met += other.slo_met
        self.preemptions += other.preemptions
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_tokens += other.cached_tokens

    def summary(self, duration_s: float | None, has_slo: bool = True) -> dict[str, Any]:
        """``has_slo`` False (no target set): attainment and goodput are None, not 100%."""
        finished = self.requests - self.rejected

        def rate(amount: int) -> float | None:
            return amount / duration_s if duration_s else None

        judged = has_slo and self.requests > 0

        return {
            "requests": self.requests,
            "finished": finished,
            "rejected": self.rejected,
            "response_cache_hits": self.response_cache_hits,
            "slo_met": self.slo_met,
            "slo_attainment": self.slo_met / self.requests if judged else None,
            "ttft": self.ttft.stats(),
            "tpot": self.tpot.stats(),
            "e2e": self.e2e.stats(),
            "goodput_rps": rate(self.slo_met) if has_slo else None,
            "throughput_rps": rate(finished),
            "output_tokens_per_s": rate(self.output_tokens),
            "input_tokens_per_s": rate(self.input_tokens),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cached_prompt_share": (
                self.cached_tokens / self.input_tokens if self.input_tokens else None
            ),
            "preemptions": self.preemptions,
        }


class MetricsCollector:
    """Per-class and overall statistics of the requests of a simulation, fed chunk by chunk.

    ``classes`` names the request classes; ``RequestChunk.class_index`` indexes it. ``slos``
    gives each class its targets; a class without an entry has none: its finished requests
    count as met in the overall attainment, and its own attainment and goodput are None (as
    are the overall ones when no class has a target). Token totals (and the token rates) count
    finished requests only: a rejected request's tokens were never processed. ``preemptions``
    counts all requests.
    """

    def __init__(self, classes: tuple[str, ...], slos: dict[str, SLO] | None = None) -> None:
        if not classes:
            raise UsageError("a simulation needs at least one request class")
        duplicates = sorted({name for name in classes if classes.count(name) > 1})
        if duplicates:
            raise UsageError(f"request classes are named twice: {', '.join(duplicates)}")
        slos = slos or {}
        unknown = sorted(set(slos) - set(classes))
        if unknown:
            raise UsageError(
                f"SLO given for unknown request class {', '.join(map(repr, unknown))}; "
                f"classes are: {', '.join(classes)}"
            )
        self.classes = tuple(classes)
        self.slos = {name: slos.get(name, SLO()) for name in self.classes}
        self._stats = [_ClassStats() for _ in self.classes]
        self._first_arrival = math.inf
        self._last_arrival = -math.inf
        self._last_finish = -math.inf

    def add(self, chunk: RequestChunk) -> None:
        """Count one chunk of finished or rejected requests."""
        if len(chunk) == 0:
            return
        classes = chunk.class_index.astype(np.intp)
        lowest, highest = int(classes.min()), int(classes.max())
        if lowest < 0 or highest >= len(self.classes):
            bad = lowest if lowest < 0 else highest
            raise ValueError(f"class_index {bad} outside the {len(self.classes)} classes")
        finished = ~chunk.rejected

        def per_class(weights: NDArray[Any] | None = None) -> list[int]:
            # float sums of integers: exact up to 2**53 per chunk
            sums = np.bincount(classes, weights=weights, minlength=len(self.classes))
            return [round(float(value)) for value in sums]

        def finished_only(values: NDArray[np.int64]) -> NDArray[np.int64]:
            return np.where(finished, values, 0)

        updates = {
            "requests": per_class(),
            "rejected": per_class(chunk.rejected),
            "response_cache_hits": per_class(chunk.response_cache_hit),
            "slo_met": per_class(self._met(chunk, classes, lowest, highest)),
            "preemptions": per_class(chunk.preemptions),
            "input_tokens": per_class(finished_only(chunk.input_tokens)),
            "output_tokens": per_class(finished_only(chunk.output_tokens)),
            "cached_tokens": per_class(finished_only(chunk.cached_tokens)),
        }
        for name, amounts in updates.items():
            for stats, amount in zip(self._stats, amounts, strict=True):
                setattr(stats, name, getattr(stats, name) + amount)

        latencies = (chunk.ttft_s, chunk.tpot_s, chunk.e2e_s)
        for index in range(lowest, highest + 1):
            mask = None if lowest == highest else classes == index
            stats = self._stats[index]
            for histogram, values in zip(
                (stats.ttft, stats.tpot, stats.e2e), latencies, strict=True
            ):
                histogram.add(values if mask is None else values[mask])

        self._first_arrival = min(self._first_arrival, float(chunk.arrival_s.min()))
        self._last_arrival = max(self._last_arrival, float(chunk.arrival_s.max()))
        if finished.any():
            self._last_finish = max(self._last_finish, float(np.nanmax(chunk.finish_s)))

    def _met(
        self, chunk: RequestChunk, classes: NDArray[np.intp], lowest: int, highest: int
    ) -> NDArray[np.bool_]:
        """Per request, whether it met its own class's SLO."""
        by_slo: dict[SLO, list[int]] = {}
        for index in range(lowest, highest + 1):
            by_slo.setdefault(self.slos[self.classes[index]], []).append(index)
        if len(by_slo) == 1:
            return next(iter(by_slo)).met(chunk)
        met = np.zeros(len(chunk), dtype=np.bool_)
        for slo, indices in by_slo.items():
            met |= slo.met(chunk) & np.isin(classes, indices)
        return met

    @property
    def requests(self) -> int:
        return sum(stats.requests for stats in self._stats)

    def span_s(self) -> float | None:
        """Last finish (or arrival, if later) minus first arrival; None before any request."""
        if self._first_arrival == math.inf:
            return None
        return max(self._last_finish, self._last_arrival) - self._first_arrival

    def summary(self, duration_s: float | None = None) -> dict[str, Any]:
        """JSON-ready statistics for all requests and for each class.

        Rates divide by ``duration_s``, by default the span from the first arrival to the last
        finish; they are None when that span is empty. Latencies are in seconds and None for a
        class without finished requests.
        """
        if duration_s is not None and not (math.isfinite(duration_s) and duration_s > 0):
            raise UsageError(f"duration {duration_s!r} s: expected a positive number of seconds")
        span = self.span_s()
        duration = duration_s if duration_s is not None else span
        if duration is not None and duration <= 0:
            duration = None
        overall = _ClassStats()
        for stats in self._stats:
            overall.merge(stats)
        return {
            "duration_s": duration,
            "first_arrival_s": None if span is None else self._first_arrival,
            "last_finish_s": self._last_finish if self._last_finish > -math.inf else None,
            "all": overall.summary(duration, any(slo.any for slo in self.slos.values())),
            "classes": {
                name: stats.summary(duration, self.slos[name].any)
                for name, stats in zip(self.classes, self._stats, strict=True)
            },
        }


class Timeline:
    """The fleet's state over time, kept as time-weighted means per ``resolution_s`` bucket.

    The simulator calls :meth:`record` at event times with the state from then on (the state is
    taken to hold until the next call). Each call adds the previous state, weighted by the time
    since the previous call, to the integrals of the buckets that interval covers, so memory is
    O(duration / resolution) however many events there are. Call :meth:`advance_to` at the end
    of the run to account for the last state up to the end time.
    """

    FIXED: ClassVar[tuple[str, ...]] = ("replicas_up", "busy_replicas", "queued", "running")
    RESERVED: ClassVar[frozenset[str]] = frozenset({"t_s", "utilization", *FIXED})

    def __init__(self, resolution_s: float = 60.0) -> None:
        if not (math.isfinite(resolution_s) and resolution_s > 0):
            raise UsageError(f"timeline resolution {resolution_s!r} s: expected a positive number")
        self.resolution_s = float(resolution_s)
        self._first_bucket = 0
        self._covered: list[float] = []  # seconds of each bucket covered so far
        self._fixed: list[list[float]] = [[] for _ in self.FIXED]  # integrals per bucket
        self._purchase: dict[str, list[float]] = {}  # integrals per bucket, may lag _covered
        self._t: float | None = None
        self._state: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
        self._by_purchase: dict[str, int] = {}

    @property
    def end_s(self) -> float | None:
        """The time of the last record (or advance); None before the first."""
        return self._t

    def record(
        self,
        t_s: float,
        replicas_up: int,
        busy_replicas: int,
        queued: int,
        running: int,
        by_purchase: dict[str, int],
    ) -> None:
        """The fleet's state from ``t_s`` on; times must not decrease."""
        self.advance_to(t_s)
        for name in by_purchase:
            if name not in self._purchase:
                if name in self.RESERVED:
                    raise UsageError(
                        f"purchase class {name!r} clashes with a timeline column; rename it"
                    )
                self._purchase[name] = []
        self._state = (float(replicas_up), float(busy_replicas), float(queued), float(running))
        self._by_purchase = dict(by_purchase)

    def advance_to(self, t_s: float) -> None:
        """Let the current state hold until ``t_s``."""
        t_s = float(t_s)
        if self._t is None:
            if not math.isfinite(t_s):
                raise ValueError(f"timeline time {t_s!r} is not finite")
            self._t = t_s
            self._first_bucket = math.floor(t_s / self.resolution_s)
            return
        if not t_s >= self._t or not math.isfinite(t_s):
            raise ValueError(f"timeline time {t_s!r} is before the previous one ({self._t!r})")
        start = self._t
        self._t = t_s
        if t_s == start:
            return
        resolution = self.resolution_s
        bucket = math.floor(start / resolution)
        while start < t_s:
            end = min(t_s, (bucket + 1) * resolution)
            if end <= start:  # rounding put start on the next bucket's edge
                bucket += 1
                continue
            self._accumulate(bucket - self._first_bucket, end - start)
            start = end
            bucket += 1

    def _accumulate(self, index: int, dt: float) -> None:
        covered = self._covered
        while len(covered) <= index:
            covered.append(0.0)
            for column in self._fixed:
                column.append(0.0)
        covered[index] += dt
        for column, value in zip(self._fixed, self._state, strict=True):
            if value:
                column[index] += value * dt
        for name, count in self._by_purchase.items():
            if count:
                column = self._purchase[name]
                if len(column) <= index:
                    column.extend([0.0] * (index + 1 - len(column)))
                column[index] += count * dt

    def to_frame(self) -> pd.DataFrame:
        """One row per bucket: its start ``t_s`` and the time-weighted mean of each quantity.

        ``utilization`` is busy replica-time over up replica-time (NaN with no replica up);
        each purchase class has a column of its mean number of replicas up.
        """
        import pandas as pd

        covered = np.asarray(self._covered, dtype=np.float64)
        n = covered.size
        t_s = (self._first_bucket + np.arange(n)) * self.resolution_s
        with np.errstate(invalid="ignore", divide="ignore"):
            data: dict[str, NDArray[np.float64]] = {"t_s": t_s.astype(np.float64)}
            for name, column in zip(self.FIXED, self._fixed, strict=True):
                data[name] = np.asarray(column, dtype=np.float64) / covered
            up = np.asarray(self._fixed[0], dtype=np.float64)
            busy = np.asarray(self._fixed[1], dtype=np.float64)
            data["utilization"] = np.where(up > 0, busy / np.where(up > 0, up, 1.0), np.nan)
            for name, column in self._purchase.items():
                padded = np.zeros(n)
                padded[: len(column)] = column
                data[name] = padded / covered
        return pd.DataFrame(data)

    def replica_seconds(self) -> dict[str, float]:
        """Integral over time of the replicas of each purchase class, in replica-seconds."""
        return {name: math.fsum(column) for name, column in self._purchase.items()}

    def gpu_hours(self, gpus_per_replica: int) -> dict[str, float]:
        """GPU-hours per purchase class: replica-seconds x ``gpus_per_replica`` / 3600."""
        if gpus_per_replica < 1:
            raise UsageError(f"{gpus_per_replica} GPUs per replica: expected at least 1")
        return {
            name: seconds * gpus_per_replica / 3600.0
            for name, seconds in self.replica_seconds().items()
        }


def cost(gpu_hours: dict[str, float], price_per_gpu_hour: dict[str, float]) -> dict[str, Any]:
    """The cost of ``gpu_hours`` per purchase class at the given prices, and the total.

    Returns ``{"total": ..., "by_purchase": {name: {"gpu_hours", "price_per_gpu_hour",
    "cost"}}}``. Every purchase class used needs a price.
    """
    missing = [name for name in gpu_hours if name not in price_per_gpu_hour]
    if missing:
        known = ", ".join(price_per_gpu_hour) or "none"
        raise UsageError(
            f"no price per GPU-hour for purchase class {', '.join(map(repr, missing))}; "
            f"prices are given for: {known}"
        )
    by_purchase: dict[str, dict[str, float]] = {}
    for name, hours in gpu_hours.items():
        price = price_per_gpu_hour[name]
        if not (math.isfinite(price) and price >= 0):
            raise UsageError(f"price per GPU-hour {price!r} for {name!r}: expected a number >= 0")
        by_purchase[name] = {"gpu_hours": hours, "price_per_gpu_hour": price, "cost": hours * price}
    total = math.fsum(entry["cost"] for entry in by_purchase.values())
    return {"total": total, "by_purchase": by_purchase}


_Format = Literal["parquet", "csv", "jsonl"]
_SUFFIXES: dict[str, _Format] = {".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl"}
_DERIVED = ("ttft_s", "tpot_s", "e2e_s")
_DICTIONARY_COLUMNS = ("class", "class_index", "replica", "preemptions")


class RequestWriter:
    """Streams request chunks to a ``.parquet``, ``.csv`` or ``.jsonl`` file during a run.

    Columns: the :class:`RequestChunk` fields, then ``ttft_s``, ``tpot_s``, ``e2e_s`` and
    ``class`` (the class name). Parquet gets one row group per chunk. The file is written under a
    temporary name in the same folder and renamed into place when the ``with`` block ends
    normally; if it raises, the temporary file is removed, so a failed run leaves no half-written
    file (and an existing file at ``path`` is left untouched). JSON Lines carries floats to 15
    significant digits; missing values (NaN) are null there.

    Usage::

        with RequestWriter(path, classes) as writer:
            writer.write(chunk)
    """

    SUFFIXES: ClassVar[tuple[str, ...]] = tuple(_SUFFIXES)

    def __init__(
        self, path: Path | str, classes: tuple[str, ...], option: str = "--out-requests"
    ) -> None:
        self.path = Path(path)
        self.option = option
        fmt = _SUFFIXES.get(self.path.suffix.lower())
        if fmt is None:
            raise UsageError(
                f"{self.path}: unsupported output format {self.path.suffix or '(no suffix)'!r}; "
                f"supported: {', '.join(self.SUFFIXES)}"
            )
        self.format: _Format = fmt
        self.classes = tuple(classes)
        import pyarrow as pa

        self._class_names = pa.array(self.classes, type=pa.string())
        # a class named "=HYPERLINK(...)" is text in a spreadsheet, not a formula
        self._csv_class_names = pa.array([safe_text(c) for c in self.classes], type=pa.string())
        self._parquet_schema = self.schema(pa.dictionary(pa.int16(), pa.string()))
        self._csv_schema = self.schema()
        self._temp: Path | None = None
        self._output: AbstractContextManager[Path] | None = None
        self._parquet: pq.ParquetWriter | None = None
        self._csv: pa_csv.CSVWriter | None = None
        self._jsonl: IO[str] | None = None
        self.rows = 0

    @classmethod
    def schema(cls, class_type: pa.DataType | None = None) -> pa.Schema:
        import pyarrow as pa

        types: dict[type[np.generic], pa.DataType] = {
            np.int64: pa.int64(),
            np.int32: pa.int32(),
            np.int16: pa.int16(),
            np.float64: pa.float64(),
            np.bool_: pa.bool_(),
        }
        columns = [(name, types[dtype]) for name, dtype in RequestChunk.DTYPES.items()]
        columns += [(name, pa.float64()) for name in _DERIVED]
        columns.append(("class", class_type or pa.string()))
        return pa.schema(columns)

    def __enter__(self) -> RequestWriter:
        folder = self.path.parent
        if not folder.is_dir():
            raise UsageError(f"{self.path}: folder {folder} does not exist")
        if self.path.is_dir():
            raise UsageError(f"{self.path}: is a folder; give a file name")
        # the temporary file made exclusively beside the destination (a link there refused),
        # renamed into place at the end (/dev/stdout: copied into it); the writers below reopen
        # it by path
        output = atomic_output(self.path, self.option)
        temp = output.__enter__()
        self._output, self._temp = output, temp
        try:
            import pyarrow.csv as pa_csv
            import pyarrow.parquet as pq

            if self.format == "parquet":
                # dictionary-encode only the low-cardinality columns: trying it on the float
                # columns costs time and saves nothing (pyarrow takes a list of column names
                # here; its stubs only know bool)
                self._parquet = pq.ParquetWriter(
                    str(temp),
                    self._parquet_schema,
                    use_dictionary=list(_DICTIONARY_COLUMNS),  # type: ignore[arg-type]
                )
            elif self.format == "csv":
                self._csv = pa_csv.CSVWriter(str(temp), self._csv_schema)
            else:
                self._jsonl = temp.open("w", encoding="utf-8")
        except OSError as exc:
            self._discard()
            raise self._failed(exc) from exc
        except BaseException:
            self._discard()
            raise
        return self

    def _failed(self, exc: OSError) -> UsageError:
        return UsageError(f"{self.option} {self.path}: could not write ({exc.strerror or exc})")

    def write(self, chunk: RequestChunk) -> None:
        """Append one chunk (an empty one writes nothing)."""
        if self._temp is None:
            raise RuntimeError("RequestWriter.write outside its with-block")
        if len(chunk) == 0:
            return
        classes = chunk.class_index
        if int(classes.min()) < 0 or int(classes.max()) >= len(self.classes):
            raise ValueError(f"class_index outside the {len(self.classes)} classes")
        try:
            self._write(chunk, classes)
        except OSError as exc:  # disk full, file system gone
            raise self._failed(exc) from exc
        self.rows += len(chunk)

    def _write(self, chunk: RequestChunk, classes: NDArray[np.int16]) -> None:
        import pandas as pd
        import pyarrow as pa

        columns: dict[str, Any] = {name: getattr(chunk, name) for name in RequestChunk.DTYPES}
        columns.update(ttft_s=chunk.ttft_s, tpot_s=chunk.tpot_s, e2e_s=chunk.e2e_s)
        if self._parquet is not None:
            columns["class"] = pa.DictionaryArray.from_arrays(classes, self._class_names)
            self._parquet.write_table(pa.table(columns, schema=self._parquet_schema))
        elif self._csv is not None:
            names = pa.DictionaryArray.from_arrays(classes, self._csv_class_names)
            columns["class"] = names.cast(pa.string())
            self._csv.write_table(pa.table(columns, schema=self._csv_schema))
        elif self._jsonl is not None:
            columns["class"] = np.asarray(self.classes, dtype=object)[classes]
            text = pd.DataFrame(columns).to_json(orient="records", lines=True, double_precision=15)
            self._jsonl.write(text if text.endswith("\n") else text + "\n")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self._discard()
            return
        try:
            self._close_writers()
        except OSError as exc:
            self._discard()
            raise self._failed(exc) from exc
        except BaseException:
            self._discard()
            raise
        output, self._output, self._temp = self._output, None, None
        assert output is not None
        output.__exit__(None, None, None)  # renamed into place (a UsageError if it cannot be)

    def _close_writers(self) -> None:
        parquet, csv, jsonl = self._parquet, self._csv, self._jsonl
        self._parquet = self._csv = self._jsonl = None
        if parquet is not None:
            parquet.close()
        if csv is not None:
            csv.close()
        if jsonl is not None:
            jsonl.close()

    def _discard(self) -> None:
        try:
            self._close_writers()
        finally:
            output, self._output, self._temp = self._output, None, None
            if output is not None:  # the temporary file removed, nothing renamed
                output.__exit__(_DiscardError, _DiscardError(), None)


class _DiscardError(Exception):
    """Thrown into :func:`atomic_output` to have it remove its temporary file."""
