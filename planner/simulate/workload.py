"""The requests a simulation serves: replayed from a stored dataset, or generated from a rate curve.

A :class:`Workload` is columnar (one numpy array per field) and sorted by arrival, so a week of
traffic at a few requests per second (millions of requests) stays small and fast to work with.

Replay (:func:`from_dataset`) reads a dataset's requests back from the store, optionally within
a time window and at a different load: ``load_scale`` below 1 thins the log (each request kept
with that probability), above 1 replays each request ``floor(s)`` times plus once more with
probability ``frac(s)``, every extra copy shifted by a random fraction of the dataset's mean gap
between arrivals, so the burst structure of the log is kept while the rate scales.

Generation (:func:`synthetic`) follows an hourly rate curve (:func:`read_rate_curve`, a CSV with
columns ``ds,y`` as written by forecasting tools): arrivals of a Poisson process, or of a gamma
renewal process with a chosen coefficient of variation of inter-arrival times, mapped onto the
curve by time rescaling; token lengths are drawn as (input, output) pairs from a dataset's
requests (:func:`token_pool`), so their correlation is kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import overload

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from planner.common.text import shown
from planner.errors import InputFileError, RowProblem, UsageError
from planner.store.models import Request
from planner.store.queries import get_dataset
from planner.workload.hourly_csv import check_fields, csv_rows, ds_y_columns, parse_hour, read_text

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
HOUR_S = 3600.0
DEFAULT_CLASS = "default"  # the class of requests whose log gives none
MAX_CLASSES = int(np.iinfo(np.int16).max) + 1
MOONCAKE_BLOCK_TOKENS = 512  # Mooncake's hash_ids each stand for 512 prompt tokens
FETCH_ROWS = 200_000
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


# --- replay of a stored dataset -------------------------------------------------------------


def from_dataset(
    session: Session,
    name: str,
    *,
    load_scale: float = 1.0,
    start: datetime | None = None,
    end: datetime | None = None,
    seed: int = 0,
    max_requests: int | None = None,
) -> Workload:
    """The requests of dataset ``name`` (optionally those in ``[start, end)``) at ``load_scale``.

    Time zero is ``start`` when given, otherwise the dataset's first arrival. More than
    ``max_requests`` requests (the window's count times ``load_scale``) is an error, raised
    before any request is read.
    """
    if not (math.isfinite(load_scale) and load_scale > 0):
        raise UsageError(
            f"--load-scale must be a positive number (1 replays the log as it is), got {load_scale}"
        )
    start_us = None if start is None else _micros(start, "start")
    end_us = None if end is None else _micros(end, "end")
    if start is not None and end is not None and end <= start:
        raise UsageError(
            f"the window end {end.isoformat()} is not after its start {start.isoformat()}"
        )
    dataset = get_dataset(session, name)
    first_us, last_us, count = session.execute(
        select(func.min(Request.arrival_us), func.max(Request.arrival_us), func.count()).where(
            Request.dataset_id == dataset.id
        )
    ).one()
    if not count:
        raise UsageError(f"dataset {shown(name)} has no requests")
    inside = count
    if start_us is not None or end_us is not None:
        counting = select(func.count()).where(Request.dataset_id == dataset.id)
        if start_us is not None:
            counting = counting.where(Request.arrival_us >= start_us)
        if end_us is not None:
            counting = counting.where(Request.arrival_us < end_us)
        inside = session.execute(counting).scalar_one()
    check_request_count(
        inside * load_scale,
        max_requests,
        f"dataset {shown(name)}: {inside:,} requests at --load-scale {load_scale:g}",
    )

    query = select(
        Request.arrival_us,
        Request.input_tokens,
        Request.output_tokens,
        Request.priority_class,
        Request.prefix_block_ids,
    ).where(Request.dataset_id == dataset.id)
    if start_us is not None:
        query = query.where(Request.arrival_us >= start_us)
    if end_us is not None:
        query = query.where(Request.arrival_us < end_us)
    query = query.order_by(Request.arrival_us, Request.id)
    columns = ["arrival_us", "input_tokens", "output_tokens", "priority_class", "prefix_block_ids"]
    result = session.execute(query.execution_options(yield_per=FETCH_ROWS))
    parts = [pd.DataFrame(part, columns=columns) for part in result.partitions()]
    if not parts:
        raise UsageError(
            f"dataset {shown(name)} has no requests in the window from "
            f"{_when(start) or 'its start'} to {_when(end) or 'its end'} "
            f"(its requests arrive from {_when(_from_micros(first_us))} "
            f"to {_when(_from_micros(last_us))})"
        )
    frame = pd.concat(parts, ignore_index=True)

    zero_us = int(first_us) if start_us is None else start_us
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

    workload = Workload(
        start=_from_micros(zero_us),
        arrival_s=arrival_s,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        class_index=class_index,
        classes=classes,
        prefix_blocks=blocks,
        prefix_block_tokens=MOONCAKE_BLOCK_TOKENS,
    )
    if load_scale == 1.0:
        return workload
    mean_gap_s = (int(last_us) - int(first_us)) / 1e6 / (count - 1) if count > 1 else 0.0
    scaled = workload.scaled(load_scale, seed, mean_gap_s=mean_gap_s)
    if not len(scaled):
        raise UsageError(
            f"--load-scale {load_scale} kept none of the {len(workload)} requests of dataset "
            f"{shown(name)}; use a larger scale"
        )
    return scaled


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


def token_pool(session: Session, name: str) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The (input, output) token counts of dataset ``name``'s requests, in arrival order."""
    dataset = get_dataset(session, name)
    query = (
        select(Request.input_tokens, Request.output_tokens)
        .where(Request.dataset_id == dataset.id)
        .order_by(Request.arrival_us, Request.id)
    )
    result = session.execute(query.execution_options(yield_per=FETCH_ROWS))
    parts = [np.array(part, dtype=np.int64).reshape(-1, 2) for part in result.partitions()]
    if not parts:
        raise UsageError(f"dataset {shown(name)} has no requests to draw token lengths from")
    pairs = np.concatenate(parts)
    return np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])


def _micros(moment: datetime, which: str) -> int:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise UsageError(
            f"the window {which} {moment.isoformat()} has no time zone; "
            "give it with an offset, e.g. 2024-06-01T00:00:00+00:00"
        )
    return (moment - EPOCH) // timedelta(microseconds=1)


def _from_micros(micros: int) -> datetime:
    return EPOCH + timedelta(microseconds=int(micros))


def _when(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


# --- hourly rate curves ---------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RateCurve:
    """Requests per hour over consecutive hours from ``start``; no requests outside them."""

    start: datetime  # UTC, start of the first hour
    requests_per_hour: NDArray[np.float64]

    def __post_init__(self) -> None:
        if self.start.tzinfo is None:
            raise ValueError("a rate curve's start must be a timezone-aware datetime")
        object.__setattr__(self, "start", self.start.astimezone(UTC))
        rates = np.asarray(self.requests_per_hour, dtype=np.float64)
        if rates.ndim != 1 or not len(rates):
            raise ValueError("a rate curve needs a one-dimensional array of at least one hour")
        bad = np.flatnonzero(~(np.isfinite(rates) & (rates >= 0)))
        if len(bad):
            hour = int(bad[0])
            value = float(rates[hour])
            what = (
                "not a number"
                if math.isnan(value)
                else "infinite (too large)"
                if math.isinf(value)
                else "negative"
            )
            moment = self.start + timedelta(hours=hour)
            raise UsageError(
                f"rate curve hour {hour + 1} ({moment.isoformat()}): {value:g} requests, "
                f"{what}; every hour needs a finite number of requests >= 0"
                + (f" ({len(bad)} hours are wrong)" if len(bad) > 1 else "")
            )
        object.__setattr__(self, "requests_per_hour", rates)

    @property
    def hours(self) -> int:
        return len(self.requests_per_hour)

    @property
    def duration_s(self) -> float:
        return self.hours * HOUR_S

    @property
    def total_requests(self) -> float:
        """The expected number of requests over the whole curve."""
        return float(self.requests_per_hour.sum())

    @overload
    def rate_at(self, t_s: float) -> float: ...

    @overload
    def rate_at(self, t_s: NDArray[np.float64]) -> NDArray[np.float64]: ...

    def rate_at(self, t_s: float | NDArray[np.float64]) -> float | NDArray[np.float64]:
        """Requests per second at ``t_s`` seconds after ``start`` (0 outside the curve)."""
        times = np.asarray(t_s, dtype=np.float64)
        hour = np.floor(times / HOUR_S)
        inside = (hour >= 0) & (hour < self.hours)
        index = np.where(inside, hour, 0).astype(np.intp)
        rates: NDArray[np.float64] = np.where(inside, self.requests_per_hour[index] / HOUR_S, 0.0)
        if rates.ndim == 0:
            return float(rates)
        return rates


def read_rate_curve(path: Path | str) -> RateCurve:
    """Read an hourly rate curve: a CSV with ``ds`` (hour start, ISO 8601; naive means UTC) and
    ``y`` (requests in that hour), one row per hour, consecutive hours."""
    path = Path(path)
    text = read_text(path, "a CSV rate curve with columns ds,y")
    header: list[str] | None = None
    header_line = 0
    ds_col = y_col = 0
    hours: list[float] = []
    first: datetime | None = None
    previous: datetime | None = None
    for row, line, fields in csv_rows(path, text):
        if header is None:
            header = [f.strip() for f in fields]
            header_line = line
            ds_col, y_col = ds_y_columns(path, header, line)
            continue
        check_fields(path, fields, header, row, (line, header_line))
        moment = parse_hour(path, fields[ds_col], row, line)
        if previous is None:
            first = moment
        else:
            expected = previous + timedelta(hours=1)
            if moment != expected:
                raise InputFileError(
                    path,
                    RowProblem(
                        row,
                        "ds",
                        f"{shown(fields[ds_col].strip())} {_step(moment - previous)}: expected "
                        f"{expected.isoformat()}, one hour after the previous row "
                        "(one row per hour, consecutive hours, no gaps)",
                        line,
                    ),
                )
        previous = moment
        hours.append(_parse_requests(path, fields[y_col], row, line))
    if header is None:
        raise InputFileError(path, "the file is empty; expected a CSV with columns ds,y")
    if first is None:
        raise InputFileError(
            path, "no data rows; expected at least one hour: a row of ds,y under the header"
        )
    return RateCurve(first, np.array(hours, dtype=np.float64))


def _parse_requests(path: Path, text: str, row: int, line: int) -> float:
    value = text.strip()
    expected = "expected a non-negative number of requests in the hour"
    try:
        requests = float(value)
    except ValueError:
        what = shown(value) if value else "empty"
        raise InputFileError(path, RowProblem(row, "y", f"{what}: {expected}", line)) from None
    if not math.isfinite(requests) or requests < 0:
        raise InputFileError(path, RowProblem(row, "y", f"{shown(value)}: {expected}", line))
    return requests


def _step(gap: timedelta) -> str:
    if gap == timedelta(0):
        return "repeats the previous hour"
    if gap < timedelta(0):
        return "is before the previous row"
    if gap % timedelta(hours=1) == timedelta(0):
        missing = gap // timedelta(hours=1) - 1
        return f"leaves a gap of {missing} hour{'s' if missing != 1 else ''}"
    return "is not a whole number of hours after the previous row"


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
) -> Workload:
    """Requests arriving at ``curve``'s hourly rates, with token lengths drawn from a pool.

    Arrivals: with ``cv == 1`` a Poisson process; otherwise a gamma renewal process whose
    inter-arrival times have coefficient of variation ``cv``. Either is generated at unit rate
    and mapped through the inverse of the curve's cumulative intensity (time rescaling), so the
    rate is piecewise constant per hour and hours with rate 0 get no arrivals. Token lengths
    are (input, output) pairs drawn jointly, with replacement, from ``inputs``/``outputs``.
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
    arrival_s = _arrivals(rng, curve.requests_per_hour, cv)
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
    """Arrival times (s) of a unit-rate renewal process mapped onto the hourly rates."""
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
    inter-arrival times of coefficient of variation ``cv`` (exponential when 1, else gamma)."""
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
