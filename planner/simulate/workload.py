"""The requests a simulation serves: a dataset's requests replayed, or generated on a rate curve.

A :class:`Workload` is columnar (one numpy array per field) and sorted by arrival, so a week of
traffic at a few requests per second (millions of requests) stays small and fast to work with.
Everything here takes and returns values: a stored dataset's requests are read by
:mod:`planner.store.requests` and made a workload by :func:`planner.usecases.load.from_dataset`.

Replay (:func:`replayed`) makes a workload of a dataset's request columns; :meth:`Workload.scaled`
replays it at a different load: ``scale`` below 1 thins the log (each request kept with that
probability), above 1 replays each request ``floor(s)`` times plus once more with probability
``frac(s)``, every extra copy shifted by a random fraction of the dataset's mean gap between
arrivals, so the burst structure of the log is kept while the rate scales.

Generation (:func:`synthetic`) follows an hourly rate curve
(:class:`~planner.workload.rates.RateCurve`): arrivals of a Poisson process, of a gamma
renewal process with a chosen coefficient of variation of inter-arrival times (bursts), or at a
constant rate (evenly spaced, as a benchmark client's fixed interval), mapped onto the curve by
time rescaling; token lengths are drawn as (input, output) pairs from a pool (a
dataset's requests, :func:`planner.usecases.load.token_pool`), so their correlation is kept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from planner.common.text import shown
from planner.errors import UsageError
from planner.workload.rates import HOUR_S, RateCurve

if TYPE_CHECKING:
    import pandas as pd

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DEFAULT_CLASS = "default"  # the class of requests whose log gives none
MAX_CLASSES = int(np.iinfo(np.int16).max) + 1
MOONCAKE_BLOCK_TOKENS = 512  # Mooncake's hash_ids each stand for 512 prompt tokens
# Most requests any workload may hold, whatever a caller allows: past this the arrays alone
# take tens of GB (a load scale of 1e9, a rate curve of 1e12 requests an hour).
HARD_MAX_REQUESTS = 1 << 31


def check_request_count(expected: float, max_requests: int | None, what: str) -> None:
    """Refuse, before building it, a workload of more than ``max_requests`` requests (and
    never more than :data:`HARD_MAX_REQUESTS`); ``what`` says where the estimate comes from."""
    limit = HARD_MAX_REQUESTS if max_requests is None else min(max_requests, HARD_MAX_REQUESTS)
    if expected > limit:
        shown_count = f"{expected:,.0f}" if expected < 1e15 else f"{expected:.3g}"
        raise UsageError(
            f"{what} comes to about {shown_count} requests, over the limit of {limit:,} "
            "(--max-requests; each request takes time and memory to simulate)"
            + ("; raise --max-requests to run it anyway" if limit < HARD_MAX_REQUESTS else "")
        )


# --- the workload ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Workload:
    """Requests to simulate, columnar and sorted by arrival.

    ``output_tokens`` are at least 1 where a workload comes from :func:`from_dataset` or
    :func:`synthetic` (a request logged with 0 output tokens still produces one).
    """

    start: datetime  # UTC, time zero of arrival_s
    arrival_s: NDArray[np.float64]  # seconds since start, ascending
    input_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]  # >= 1 (a request with 0 output tokens is counted as 1)
    class_index: NDArray[np.int16]  # index into classes
    classes: tuple[str, ...]  # request classes, e.g. ("default",) or ("batch", "interactive")
    # per request: prefix-cache block ids (e.g. Mooncake hash_ids), or None
    prefix_blocks: list[tuple[int, ...]] | None = None
    prefix_block_tokens: int = MOONCAKE_BLOCK_TOKENS  # tokens per block id in prefix_blocks

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        lengths = {
            "input_tokens": len(self.input_tokens),
            "output_tokens": len(self.output_tokens),
            "class_index": len(self.class_index),
        }
        if self.prefix_blocks is not None:
            lengths["prefix_blocks"] = len(self.prefix_blocks)
        wrong = {name: size for name, size in lengths.items() if size != n}
        if wrong:
            raise ValueError(f"workload columns differ in length: arrival_s has {n}, {wrong}")
        if not self.classes:
            raise ValueError("a workload needs at least one request class")
        if self.start.tzinfo is None:
            raise ValueError("a workload's start must be a timezone-aware datetime")

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def duration_s(self) -> float:
        """Seconds from time zero to the last arrival (0 when empty)."""
        return float(self.arrival_s[-1]) if len(self.arrival_s) else 0.0

    def scaled(self, scale: float, seed: int = 0, *, mean_gap_s: float | None = None) -> Workload:
        """The same traffic at ``scale`` times the rate: below 1 a random subset of requests;
        above, every request plus copies shifted by up to ``mean_gap_s`` (default: the mean
        gap between arrivals), so bursts keep their shape. Deterministic for ``seed``."""
        if not (math.isfinite(scale) and scale > 0):
            raise UsageError(f"a load scale must be a positive number, got {scale}")
        check_request_count(len(self) * scale, None, f"{len(self):,} requests x {scale:g}")
        if mean_gap_s is None:
            n = len(self.arrival_s)
            mean_gap_s = self.duration_s / (n - 1) if n > 1 else 0.0
        order, arrival_s = _scale_load(
            np.random.default_rng(seed), self.arrival_s, scale, mean_gap_s
        )
        return Workload(
            start=self.start,
            arrival_s=arrival_s,
            input_tokens=self.input_tokens[order],
            output_tokens=self.output_tokens[order],
            class_index=self.class_index[order],
            classes=self.classes,
            prefix_blocks=(
                None if self.prefix_blocks is None else [self.prefix_blocks[i] for i in order]
            ),
            prefix_block_tokens=self.prefix_block_tokens,
        )

    def window(self, start_s: float, end_s: float) -> Workload:
        """The requests with ``start_s <= arrival < end_s``, with time zero moved to ``start_s``."""
        if end_s < start_s:
            raise ValueError(f"window end {end_s} s is before its start {start_s} s")
        first, stop = (int(i) for i in np.searchsorted(self.arrival_s, [start_s, end_s]))
        return Workload(
            start=self.start + timedelta(seconds=start_s),
            arrival_s=self.arrival_s[first:stop] - start_s,
            input_tokens=self.input_tokens[first:stop],
            output_tokens=self.output_tokens[first:stop],
            class_index=self.class_index[first:stop],
            classes=self.classes,
            prefix_blocks=(None if self.prefix_blocks is None else self.prefix_blocks[first:stop]),
            prefix_block_tokens=self.prefix_block_tokens,
        )

    def head(self, count: int) -> Workload:
        """The first ``count`` requests by arrival (all of them when there are fewer)."""
        if count < 1:
            raise UsageError(f"the first {count} requests: expected a count of at least 1")
        return self.subset(np.arange(min(count, len(self))))

    def subset(self, keep: NDArray[np.intp] | NDArray[np.bool_]) -> Workload:
        """The requests ``keep`` selects (indices in arrival order, or a mask), same start."""
        indices = np.arange(len(self))[keep]
        return Workload(
            start=self.start,
            arrival_s=self.arrival_s[indices],
            input_tokens=self.input_tokens[indices],
            output_tokens=self.output_tokens[indices],
            class_index=self.class_index[indices],
            classes=self.classes,
            prefix_blocks=(
                None if self.prefix_blocks is None else [self.prefix_blocks[i] for i in indices]
            ),
            prefix_block_tokens=self.prefix_block_tokens,
        )


# --- an engine's longest prompt ---------------------------------------------------------------

OVER_LENGTH_MODES = ("truncate", "refuse")


@dataclass(frozen=True)
class PromptLimit:
    """What a longest prompt (``--max-model-len``) did to a workload: ``kept`` is simulated;
    ``refused`` (mode refuse) are the over-long requests the engine turns away; ``affected``
    counts the over-long prompts, cut (truncate) or refused."""

    kept: Workload
    refused: Workload | None
    affected: int


def limit_prompts(workload: Workload, max_len: int | None, mode: str = "truncate") -> PromptLimit:
    """Apply an engine's longest prompt of ``max_len`` tokens (None: no limit): prompts longer
    are cut to ``max_len`` tokens (``truncate``, as engines that truncate do; their prefix-cache
    blocks past the cut are dropped, output lengths are kept) or the requests are refused
    (``refuse``). The workload keeps its arrival order."""
    if mode not in OVER_LENGTH_MODES:
        raise UsageError(f"--over-length {mode!r}: expected {' or '.join(OVER_LENGTH_MODES)}")
    if max_len is None:
        return PromptLimit(workload, None, 0)
    if max_len < 1:
        raise UsageError(f"--max-model-len {max_len}: expected at least 1 token")
    over = workload.input_tokens > max_len
    affected = int(over.sum())
    if not affected:
        return PromptLimit(workload, None, 0)
    if mode == "refuse":
        return PromptLimit(workload.subset(~over), workload.subset(over), affected)
    blocks = workload.prefix_blocks
    if blocks is not None:
        whole_blocks = max_len // workload.prefix_block_tokens  # only blocks wholly kept
        blocks = [b[:whole_blocks] if cut else b for b, cut in zip(blocks, over, strict=True)]
    cut = replace(
        workload,
        input_tokens=np.minimum(workload.input_tokens, max_len),
        prefix_blocks=blocks,
    )
    return PromptLimit(cut, None, affected)


# --- replay of a dataset's requests -----------------------------------------------------------


def prefix_block_tokens_of(options: Mapping[str, Any] | None) -> int:
    """The tokens each prefix block id of a dataset stands for, as its ingest recorded them
    (``--prefix-block-tokens``); :data:`MOONCAKE_BLOCK_TOKENS` for a dataset ingested before
    the option existed, or a value that is not a positive whole number."""
    value = (options or {}).get("prefix_block_tokens")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return MOONCAKE_BLOCK_TOKENS


def replayed(
    frame: pd.DataFrame,
    zero_us: int,
    name: str,
    prefix_block_tokens: int = MOONCAKE_BLOCK_TOKENS,
) -> Workload:
    """The workload of a dataset's requests (``name`` is how messages name it), given as
    columns ``arrival_us``, ``input_tokens``, ``output_tokens``, ``priority_class`` (None:
    :data:`DEFAULT_CLASS`) and ``prefix_block_ids`` (space-separated block ids, or None), in
    arrival order; time zero is ``zero_us`` (microseconds since the epoch). Each block id
    stands for ``prefix_block_tokens`` prompt tokens (the log's own block size, recorded at
    ingest: :func:`prefix_block_tokens_of`)."""
    import pandas as pd  # only a replay needs it: a synthetic run starts without pandas

    arrival_s = (frame["arrival_us"].to_numpy(np.int64) - zero_us) / 1e6
    input_tokens = frame["input_tokens"].to_numpy(np.int64)
    output_tokens = np.maximum(frame["output_tokens"].to_numpy(np.int64), 1)
    codes, uniques = pd.factorize(frame["priority_class"].fillna(DEFAULT_CLASS), sort=True)
    classes = tuple(str(u) for u in uniques)
    if len(classes) > MAX_CLASSES:
        raise UsageError(
            f"dataset {shown(name)} has {len(classes)} distinct priority classes; "
            f"planner simulates at most {MAX_CLASSES}"
        )
    class_index = codes.astype(np.int16)
    blocks: list[tuple[int, ...]] | None = None
    block_ids = frame["prefix_block_ids"]
    if block_ids.notna().any():
        blocks = [tuple(map(int, ids.split())) if ids else () for ids in block_ids]
    return Workload(
        start=from_micros(zero_us),
        arrival_s=arrival_s,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        class_index=class_index,
        classes=classes,
        prefix_blocks=blocks,
        prefix_block_tokens=prefix_block_tokens,
    )


def from_micros(micros: int) -> datetime:
    """The UTC moment ``micros`` microseconds after the epoch."""
    return EPOCH + timedelta(microseconds=int(micros))


def _scale_load(
    rng: np.random.Generator, arrival_s: NDArray[np.float64], scale: float, mean_gap_s: float
) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """Which requests to replay (indices into ``arrival_s``) and when, sorted by arrival."""
    n = len(arrival_s)
    if scale < 1:
        kept = np.flatnonzero(rng.random(n) < scale)
        return kept, arrival_s[kept]
    whole = math.floor(scale)
    fraction = scale - whole
    everyone = np.arange(n, dtype=np.intp)
    indices = [everyone]
    times = [arrival_s]
    for _ in range(whole - 1):
        indices.append(everyone)
        times.append(arrival_s + rng.uniform(0.0, mean_gap_s, n))
    if fraction > 0:
        extra = np.flatnonzero(rng.random(n) < fraction)
        indices.append(extra)
        times.append(arrival_s[extra] + rng.uniform(0.0, mean_gap_s, len(extra)))
    all_times = np.concatenate(times)
    order = np.argsort(all_times, kind="stable")  # originals first among equal times
    return np.concatenate(indices)[order], all_times[order]


# --- synthetic workloads --------------------------------------------------------------------


def synthetic(
    curve: RateCurve,
    inputs: NDArray[np.int64],
    outputs: NDArray[np.int64],
    *,
    seed: int = 0,
    cv: float = 1.0,
    classes: Sequence[str] = (DEFAULT_CLASS,),
    class_weights: Sequence[float] | None = None,
    max_requests: int | None = None,
    constant: bool = False,
) -> Workload:
    """Requests arriving at ``curve``'s hourly rates, with token lengths drawn from a pool.

    Arrivals: with ``cv == 1`` a Poisson process; otherwise a gamma renewal process whose
    inter-arrival times have coefficient of variation ``cv``; with ``constant`` (``cv`` then
    unused) evenly spaced at the rate, from a random phase (a deterministic renewal process).
    Each is generated at unit rate and mapped through the inverse of the curve's cumulative
    intensity (time rescaling), so the rate is piecewise constant per hour and hours with rate
    0 get no arrivals. Token lengths are (input, output) pairs drawn jointly, with
    replacement, from ``inputs``/``outputs``.
    Classes are drawn independently with ``class_weights`` (uniform by default).
    Deterministic for a ``seed``. A curve of more than ``max_requests`` expected requests is an
    error, raised before any is drawn.
    """
    if not (math.isfinite(cv) and cv > 0):
        raise UsageError(
            f"the coefficient of variation of inter-arrival times (--cv) must be a positive "
            f"number (1 is Poisson), got {cv}"
        )
    pool_in = np.asarray(inputs, dtype=np.int64)
    pool_out = np.asarray(outputs, dtype=np.int64)
    if pool_in.shape != pool_out.shape or pool_in.ndim != 1:
        raise ValueError("inputs and outputs must be one-dimensional arrays of the same length")
    if not len(pool_in):
        raise UsageError("the token pool is empty; token lengths are drawn from a dataset's")
    names = tuple(classes)
    probabilities = _class_probabilities(names, class_weights)
    if curve.total_requests <= 0:
        raise UsageError("the rate curve asks for no requests: every hour's y is 0")
    check_request_count(
        curve.total_requests,
        max_requests,
        f"the rate curve ({curve.hours:,} hours from {curve.start.isoformat()})",
    )

    rng = np.random.default_rng(seed)
    arrival_s = _arrivals(rng, curve.requests_per_hour, 0.0 if constant else cv)
    n = len(arrival_s)
    pick = rng.integers(0, len(pool_in), size=n)
    if len(names) == 1:
        class_index = np.zeros(n, dtype=np.int16)
    else:
        cumulative = np.cumsum(probabilities)
        cumulative[-1] = 1.0
        class_index = np.searchsorted(cumulative, rng.random(n), side="right").astype(np.int16)
    return Workload(
        start=curve.start,
        arrival_s=arrival_s,
        input_tokens=pool_in[pick],
        output_tokens=np.maximum(pool_out[pick], 1),
        class_index=class_index,
        classes=names,
    )


def _class_probabilities(
    classes: tuple[str, ...], weights: Sequence[float] | None
) -> NDArray[np.float64]:
    if not classes:
        raise UsageError("no request classes given; give at least one")
    if len(set(classes)) != len(classes):
        raise UsageError(f"request classes repeat: {', '.join(classes)}")
    if len(classes) > MAX_CLASSES:
        raise UsageError(f"{len(classes)} request classes; planner simulates at most {MAX_CLASSES}")
    if weights is None:
        return np.full(len(classes), 1.0 / len(classes))
    values = np.asarray(weights, dtype=np.float64)
    if values.shape != (len(classes),):
        raise UsageError(
            f"{len(values)} class weights for {len(classes)} classes ({', '.join(classes)}); "
            "give one weight per class"
        )
    if not (np.isfinite(values).all() and (values >= 0).all() and values.sum() > 0):
        raise UsageError(
            f"class weights must be non-negative numbers, not all 0; got {values.tolist()}"
        )
    probabilities: NDArray[np.float64] = values / values.sum()
    return probabilities


def _arrivals(
    rng: np.random.Generator, per_hour: NDArray[np.float64], cv: float
) -> NDArray[np.float64]:
    """Arrival times (s) of a unit-rate renewal process mapped onto the hourly rates (``cv``
    0: evenly spaced)."""
    ends = np.cumsum(per_hour)  # cumulative intensity (requests) at the end of each hour
    starts = np.concatenate(([0.0], ends[:-1]))
    units = _unit_renewal(rng, float(ends[-1]), cv)
    # Points in [starts[h], ends[h]) fall in hour h; an hour with rate 0 has starts == ends.
    counts = np.diff(np.searchsorted(units, ends), prepend=0)
    hour = np.repeat(np.arange(len(per_hour)), counts)
    seconds_per_request = np.zeros_like(per_hour)
    busy = ends > starts
    seconds_per_request[busy] = HOUR_S / (ends[busy] - starts[busy])
    times = units - starts[hour]
    times *= seconds_per_request[hour]
    times += hour * HOUR_S
    # Rounding must not push a request onto the next hour's start.
    last_instant = np.nextafter(np.arange(1, len(per_hour) + 1) * HOUR_S, 0.0)
    np.minimum(times, last_instant[hour], out=times)
    return times


def _unit_renewal(rng: np.random.Generator, total: float, cv: float) -> NDArray[np.float64]:
    """The points in ``[0, total)`` of a stationary renewal process with rate 1 and
    inter-arrival times of coefficient of variation ``cv`` (exponential when 1, 0: every gap
    1, from a uniform phase; else gamma)."""
    if cv == 0.0:
        points = rng.random() + np.arange(math.ceil(total), dtype=np.float64)
        return points[: int(np.searchsorted(points, total))]
    shape = 1.0 / (cv * cv)

    def gaps(size: int) -> NDArray[np.float64]:
        if cv == 1.0:
            return rng.standard_exponential(size)
        drawn = rng.standard_gamma(shape, size)
        drawn /= shape  # mean 1
        return drawn

    # Stationary start: the first point is the forward recurrence time, U times a
    # length-biased gap (for gamma(k) gaps, a gamma(k + 1) one).
    first = rng.random() * rng.standard_gamma(shape + 1.0) / shape
    chunk = int(total + 6.0 * cv * math.sqrt(total) + 16)
    parts: list[NDArray[np.float64]] = []
    position = first
    while position < total:
        points = gaps(chunk)
        points[0] = position if not parts else points[0] + position
        np.cumsum(points, out=points)
        parts.append(points)
        position = float(points[-1])
        chunk = max(1024, chunk // 4)
    if not parts:
        return np.empty(0, dtype=np.float64)
    points = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return points[: int(np.searchsorted(points, total))]
