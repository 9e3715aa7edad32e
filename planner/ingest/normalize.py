"""Turn raw file columns into typed request columns, finding every bad value by row and column.

Each converter works on a whole chunk at once (Arrow or pandas vectorized operations); the slow
per-value path runs only to describe values that failed, so clean files pay nothing for the
diagnostics.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeAlias, cast

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from planner.common.text import shown
from planner.errors import RowProblem, UsageError
from planner.ingest.formats import LogFormat, TimeKind, TimeSpec, TimeUnit
from planner.ingest.readers import RawChunk
from planner.store.models import Request

Column: TypeAlias = "pa.ChunkedArray[Any]"  # subscriptable only in the type stubs
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# The most tokens one request of a real log holds (the longest context windows are 10 million);
# a larger count is a broken log.
MAX_TOKENS = 100_000_000
# The longest time-to-first-token or end-to-end latency a log may give (7 days, in ms).
MAX_LATENCY_MS = 7 * 86_400_000
TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_tokens")
MILLISECOND_FIELDS = ("ttft_ms", "e2e_ms")
TEXT_FIELDS = ("model", "priority_class", "status")
# Longest text the store keeps per field; checked here so every backend refuses the same rows.
TEXT_LIMITS: dict[str, int] = {
    name: int(getattr(Request.__table__.columns[name].type, "length", None) or 10**9)
    for name in TEXT_FIELDS
}
PROBLEM_EXAMPLES = 5

# Arrival times planner can store and compute with (pandas' nanosecond timestamps end in 2262).
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ARRIVAL_MIN = datetime(1678, 1, 1, tzinfo=UTC)
ARRIVAL_MAX = datetime(2262, 1, 1, tzinfo=UTC)  # exclusive
ARRIVAL_MIN_US = (ARRIVAL_MIN - EPOCH) // timedelta(microseconds=1)
ARRIVAL_MAX_US = (ARRIVAL_MAX - EPOCH) // timedelta(microseconds=1)
ARRIVAL_RANGE = "planner handles arrival times from 1678-01-01 to 2261-12-31"
# Where epoch times of a real log fall, to suggest the --time-unit that was meant.
PLAUSIBLE_MIN_US = (datetime(1990, 1, 1, tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)
PLAUSIBLE_MAX_US = (datetime(2100, 1, 1, tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)
PLAUSIBLE_SPAN_US = 50 * 366 * 86_400 * 1_000_000  # a relative log spans less than 50 years
# Arrival times a request log can really hold: from the Unix epoch to a year from now. Outside
# them a row is refused unless the ingest allows any time (--allow-any-time).
FUTURE_ALLOWANCE = timedelta(days=366)
# A date-time written with a UTC offset (or Z): the offset follows the time of day.
WITH_OFFSET = (
    r"[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?"
    r"\s*(?:[zZ]|UTC|GMT|[+-][0-9]{2}(?::?[0-9]{2})?)\s*$"
)
UNIT_MICROS: dict[TimeUnit, tuple[int, int]] = {  # microseconds per unit, as a fraction
    TimeUnit.S: (1_000_000, 1),
    TimeUnit.MS: (1_000, 1),
    TimeUnit.US: (1, 1),
    TimeUnit.NS: (1, 1_000),
}
# A number as a person writes it: decimal digits, optional sign, fraction and exponent. Not
# hex (0x10), not 1_000, not inf/nan, not true/false.
DECIMAL_NUMBER = r"^\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*$"
DIGITS = re.compile(r"[0-9]+")


@dataclass
class ChunkIssues:
    """Bad rows of one chunk: a mask over its rows and the first few problems, in row order."""

    bad: npt.NDArray[np.bool_]
    examples: list[tuple[int, str, str]] = field(default_factory=list)  # (index, column, message)

    def flag(
        self, mask: npt.NDArray[np.bool_], column: str, describe: Callable[[int], str]
    ) -> None:
        new = mask & ~self.bad
        self.bad |= mask
        for index in np.flatnonzero(new)[:PROBLEM_EXAMPLES]:
            self.examples.append((int(index), column, describe(int(index))))


@dataclass(frozen=True)
class TimeForm:
    """The first date-time of a chunk written one way (with or without a UTC offset)."""

    row: int
    line: int | None
    value: str
    count: int  # values of the chunk written that way


@dataclass
class NormalizedChunk:
    columns: dict[str, Any]  # request column -> numpy array or list, one value per kept row
    num_rows: int
    min_arrival_us: int | None
    max_arrival_us: int | None
    problems: list[RowProblem]  # first problems of the chunk, in row order
    bad_rows: int
    # ISO 8601 date-times: the first written with a UTC offset, and the first without
    with_offset: TimeForm | None = None
    without_offset: TimeForm | None = None


def plausible_window(now: datetime | None = None) -> tuple[int, int]:
    """Arrival times (µs since the epoch) a real log can hold: the epoch to a year from now."""
    moment = now or datetime.now(UTC)
    return 0, (moment + FUTURE_ALLOWANCE - EPOCH) // timedelta(microseconds=1)


def _us_text(micros: int) -> str:
    return _iso(micros) + " UTC"


def _iso(micros: int) -> str:
    return (EPOCH + timedelta(microseconds=int(micros))).strftime("%Y-%m-%d %H:%M:%S")


def normalize_chunk(
    chunk: RawChunk,
    fmt: LogFormat,
    fields: dict[str, str],
    *,
    start_us: int | None,
    default_model: str | None,
    window: tuple[int, int] | None = None,
) -> NormalizedChunk:
    """Convert the raw columns of ``chunk`` (``fields``: request field -> file column).

    ``window``: the arrival times (µs since the epoch, both ends included) a row may have, as
    :func:`plausible_window` gives them; a row outside is bad. None: any time planner can store.
    """
    n = chunk.num_rows
    issues = ChunkIssues(np.zeros(n, dtype=bool))
    out: dict[str, Any] = {}
    arrival_raw: Column | None = None
    for name, column in fields.items():
        raw = _plain(chunk.table.column(column))
        if name == "arrival":
            out["arrival_us"] = _arrival(raw, column, fmt.time, start_us, issues)
            if window is not None:
                _implausible(out["arrival_us"], raw, column, fmt.time, window, issues)
            arrival_raw = raw
        elif name in TOKEN_FIELDS:
            out[name] = _integers(raw, column, issues, required=name != "cached_tokens")
        elif name in MILLISECOND_FIELDS:
            out[name] = _milliseconds(raw, column, issues)
        elif name == "prefix_block_ids":
            out[name] = _block_ids(raw, column, issues)
        else:
            out[name] = _text(raw, column, issues, TEXT_LIMITS.get(name))
    if default_model is not None:
        if "model" in out:
            out["model"] = [default_model if m is None else m for m in out["model"]]
        else:
            out["model"] = [default_model] * n

    keep = ~issues.bad
    forms: tuple[TimeForm | None, TimeForm | None] = (None, None)
    if arrival_raw is not None and fmt.time.kind is TimeKind.DATETIME and fmt.time.format is None:
        forms = _offset_forms(chunk, arrival_raw, keep)
    bad_rows = int(issues.bad.sum())
    if bad_rows:
        out = {k: _select(v, keep) for k, v in out.items()}
    problems = []
    for index, column, message in sorted(issues.examples)[:PROBLEM_EXAMPLES]:
        row, line = chunk.row_of(index)
        problems.append(RowProblem(row, column, message, line))
    arrivals = out["arrival_us"]
    kept = n - bad_rows
    return NormalizedChunk(
        columns=out,
        num_rows=kept,
        min_arrival_us=int(arrivals.min()) if kept else None,
        max_arrival_us=int(arrivals.max()) if kept else None,
        problems=problems,
        bad_rows=bad_rows,
        with_offset=forms[0],
        without_offset=forms[1],
    )


def _implausible(
    micros: npt.NDArray[np.int64],
    raw: Column,
    column: str,
    time: TimeSpec,
    window: tuple[int, int],
    issues: ChunkIssues,
) -> None:
    """Flag arrivals before ``window`` (the Unix epoch) or after it (a year from now)."""
    low, high = window
    early = micros < low
    late = micros > high

    def describe(index: int) -> str:
        value = int(micros[index])
        given = _shown(raw, index)
        read = "" if time.kind is TimeKind.DATETIME else f" ({time.expected()})"
        if value < low:
            where = f"before {_us_text(low)}"
        else:
            where = f"more than a year from now (after {_us_text(high)})"
        return (
            f"arrival {given}{read} is {_us_text(value)}, {where}: not a time a request log "
            "holds; check --time-kind, --time-unit and --start, or pass --allow-any-time if "
            "it is right"
        )

    issues.flag(early | late, column, describe)


def _offset_forms(
    chunk: RawChunk, raw: Column, good: npt.NDArray[np.bool_]
) -> tuple[TimeForm | None, TimeForm | None]:
    """The first good value of a text column of date-times written with a UTC offset and the
    first written without one, each with how many there are."""
    if not _is_text(raw):
        return None, None
    present = good & ~_missing(raw)
    offset = np.asarray(pc.fill_null(pc.match_substring_regex(raw, WITH_OFFSET), pa.scalar(False)))
    found: list[TimeForm | None] = []
    for mask in (present & offset, present & ~offset):
        where = np.flatnonzero(mask)
        if where.size == 0:
            found.append(None)
            continue
        index = int(where[0])
        row, line = chunk.row_of(index)
        found.append(TimeForm(row, line, _shown(raw, index), int(where.size)))
    return found[0], found[1]


def _plain(raw: Column) -> Column:
    """Dictionary-encoded columns (pandas categoricals in Parquet) and string views as plain
    arrays of their values, so every converter sees one shape."""
    if pa.types.is_dictionary(raw.type):
        return _plain(pc.cast(raw, raw.type.value_type))
    if pa.types.is_string_view(raw.type) or pa.types.is_large_string(raw.type):
        return pc.cast(raw, pa.string())
    return raw


def _select(values: Any, keep: npt.NDArray[np.bool_]) -> Any:
    if isinstance(values, np.ndarray):
        return values[keep]
    return [v for v, k in zip(values, keep, strict=True) if k]


def _shown(raw: Column, index: int) -> str:
    try:
        value = raw[index].as_py()
    except (OverflowError, ValueError):  # a timestamp beyond Python's years 1 to 9999
        number = cast(Any, pc.cast(raw.slice(index, 1), pa.int64())).to_pylist()[0]
        return f"{number} {getattr(raw.type, 'unit', '')} since the Unix epoch".strip()
    if isinstance(value, date):  # dates and date-times of Parquet columns, as a person writes them
        return shown(value.isoformat(), 60)
    return shown(value if isinstance(value, str) else repr(value), 60)


def _is_text(raw: Column) -> bool:
    return bool(pa.types.is_string(raw.type) or pa.types.is_large_string(raw.type))


def _missing(raw: Column) -> npt.NDArray[np.bool_]:
    """Null or blank values."""
    if _is_text(raw):
        blank = pc.equal(pc.utf8_trim_whitespace(raw), pa.scalar(""))
        missing = pc.fill_null(pc.or_(pc.is_null(raw), blank), pa.scalar(True))
        return np.asarray(missing)
    return np.asarray(pc.is_null(raw))


def _numbers(raw: Column) -> npt.NDArray[np.float64]:
    """Values as floats; NaN where a value is missing or not a decimal number (booleans, hex,
    ``inf`` and ``nan`` are not numbers here)."""
    if pa.types.is_integer(raw.type) or pa.types.is_floating(raw.type):
        return np.asarray(
            pc.cast(raw, pa.float64(), safe=False).to_numpy(zero_copy_only=False), dtype=float
        )
    if pa.types.is_decimal(raw.type):
        return np.asarray(
            pc.cast(raw, pa.float64(), safe=False).to_numpy(zero_copy_only=False), dtype=float
        )
    if _is_text(raw):
        decimal = pc.fill_null(pc.match_substring_regex(raw, DECIMAL_NUMBER), pa.scalar(False))
        series = pd.Series(raw.to_numpy(zero_copy_only=False), dtype=object)
        numbers = np.asarray(pd.to_numeric(series, errors="coerce"), dtype=float)
        return np.where(np.asarray(decimal), numbers, np.nan)
    return np.full(len(raw), np.nan)  # booleans, lists, objects: never a number


def _integers(
    raw: Column, column: str, issues: ChunkIssues, *, required: bool
) -> npt.NDArray[np.int64] | list[int | None]:
    expected = "a non-negative integer"
    plain = pa.types.is_integer(raw.type) or (
        _is_text(raw)
        and bool(pc.all(pc.match_substring_regex(raw, "^[0-9]+$"), skip_nulls=True).as_py())
    )
    if plain:  # fast path: clean integers, as integers or decimal digits
        try:
            values = np.asarray(pc.cast(raw, pa.int64()).to_numpy(zero_copy_only=False))
            in_range = values.size == 0 or (values.min() >= 0 and values.max() <= MAX_TOKENS)
            if values.dtype == np.int64 and in_range:
                return values if required else values.tolist()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            pass
    missing = _missing(raw)
    numbers = _numbers(raw)
    if required:
        issues.flag(missing, column, lambda i: f"missing value, expected {expected}")
    unparsed = ~missing & ~np.isfinite(numbers)
    issues.flag(unparsed, column, lambda i: f"expected {expected}, got {_shown(raw, i)}")
    finite = np.isfinite(numbers)
    clean = np.where(finite, numbers, 0.0)
    issues.flag(
        finite & (clean != np.floor(clean)),
        column,
        lambda i: f"expected {expected}, got a fraction {_shown(raw, i)}",
    )
    issues.flag(
        finite & (clean < 0), column, lambda i: f"expected {expected}, got {_shown(raw, i)}"
    )
    issues.flag(
        finite & (clean > MAX_TOKENS),
        column,
        lambda i: (
            f"token count {_shown(raw, i)} is too large (at most {MAX_TOKENS:,} tokens a request)"
        ),
    )
    result = np.clip(clean, 0, MAX_TOKENS).astype(np.int64)
    if not required:  # optional counts keep NULL where the log has none
        return [None if m else int(v) for v, m in zip(result, missing, strict=True)]
    return result


def _milliseconds(raw: Column, column: str, issues: ChunkIssues) -> npt.NDArray[np.float64]:
    missing = _missing(raw)
    numbers = _numbers(raw)
    bad = ~missing & (~np.isfinite(numbers) | (np.nan_to_num(numbers) < 0))
    issues.flag(
        bad,
        column,
        lambda i: f"expected a non-negative number of milliseconds, got {_shown(raw, i)}",
    )
    issues.flag(
        ~missing & (np.nan_to_num(numbers) > MAX_LATENCY_MS),
        column,
        lambda i: (
            f"{_shown(raw, i)} ms is too long (at most {MAX_LATENCY_MS:,} ms, 7 days, a request)"
        ),
    )
    return np.where(missing, np.nan, numbers)


def _text(raw: Column, column: str, issues: ChunkIssues, limit: int | None) -> list[str | None]:
    """Text values, trimmed; NUL characters and text longer than the store keeps are bad rows,
    on every backend alike."""
    nested = pa.types.is_nested(raw.type) or pa.types.is_binary(raw.type)
    if nested:  # lists and objects are not names
        issues.flag(
            ~np.asarray(pc.is_null(raw)),
            column,
            lambda i: f"expected text, got {_shown(raw, i)}",
        )
        return [None] * len(raw)
    values = raw if _is_text(raw) else pc.cast(raw, pa.string())
    trimmed = pc.utf8_trim_whitespace(values)
    has_nul = np.asarray(pc.fill_null(pc.match_substring(trimmed, "\x00"), pa.scalar(False)))
    issues.flag(has_nul, column, lambda i: f"text with a NUL character (\\x00): {_shown(raw, i)}")
    if limit is not None:
        lengths = np.asarray(pc.fill_null(pc.utf8_length(cast(Any, trimmed)), 0))
        issues.flag(
            lengths > limit,
            column,
            lambda i: (
                f"text of {int(lengths[i]):,} characters, longer than the {limit} "
                f"planner keeps: {_shown(raw, i)}"
            ),
        )
    return [v if v else None for v in trimmed.to_pylist()]


def _block_id(item: Any) -> int | None:
    """One prefix block id, or None when ``item`` is not a non-negative int64 integer."""
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        number = item
    elif isinstance(item, str) and DIGITS.fullmatch(item):
        number = int(item)
    else:
        return None
    return number if 0 <= number <= INT64_MAX else None


def _block_ids(raw: Column, column: str, issues: ChunkIssues) -> list[str | None]:
    """Prefix block ids as space-separated integers, from a JSON list or delimited text."""
    result: list[str | None] = []
    bad = np.zeros(len(raw), dtype=bool)
    for index, value in enumerate(raw.to_pylist()):
        if value is None or value == "" or value == []:
            result.append(None)
            continue
        if isinstance(value, list):
            items = value
        elif isinstance(value, str):
            items = value.replace(",", " ").replace(";", " ").strip("[] ").split()
        else:
            items = [value]
        ids = [_block_id(item) for item in items]
        if not ids or any(i is None for i in ids):
            bad[index] = True
            result.append(None)
        else:
            result.append(" ".join(map(str, ids)))
    issues.flag(
        bad,
        column,
        lambda i: (
            "expected a list of non-negative integer block ids "
            f"(at most {INT64_MAX}), got {_shown(raw, i)}"
        ),
    )
    return result


def _arrival(
    raw: Column, column: str, time: TimeSpec, start_us: int | None, issues: ChunkIssues
) -> npt.NDArray[np.int64]:
    missing = _missing(raw)
    issues.flag(missing, column, lambda i: f"missing value, expected {time.expected()}")
    if time.kind is TimeKind.DATETIME:
        micros, unparsed = _datetimes(raw, time)
        outside = ~unparsed & ((micros < ARRIVAL_MIN_US) | (micros >= ARRIVAL_MAX_US))
        issues.flag(
            outside & ~missing,
            column,
            lambda i: f"date-time {_shown(raw, i)} is out of range: {ARRIVAL_RANGE}",
        )
        issues.flag(unparsed & ~missing, column, lambda i: _unparsed_datetime(raw, i, time))
        return np.where(outside | unparsed, 0, micros)
    origin = (start_us or 0) if time.kind is TimeKind.RELATIVE else 0
    micros, unparsed, negative, outside = _offsets(raw, time, origin)
    if time.kind is TimeKind.RELATIVE:
        issues.flag(
            negative & ~missing,
            column,
            lambda i: f"expected a non-negative offset ({time.expected()}), got {_shown(raw, i)}",
        )
    issues.flag(
        unparsed & ~missing, column, lambda i: f"expected {time.expected()}, got {_shown(raw, i)}"
    )
    issues.flag(outside & ~missing, column, lambda i: _out_of_range(raw, i, time, origin))
    return micros


def _out_of_range(raw: Column, index: int, time: TimeSpec, origin: int) -> str:
    """Message for a numeric time outside the range, suggesting the --time-unit that fits."""
    value = float(_numbers(raw.slice(index, 1))[0])
    what = (
        f"{_shown(raw, index)} {time.unit.value} after the start"
        if time.kind is TimeKind.RELATIVE
        else f"{_shown(raw, index)} {time.unit.value} since the Unix epoch"
    )
    message = f"arrival {what} is out of range: {ARRIVAL_RANGE}"
    for unit in TimeUnit:
        if unit is time.unit:
            continue
        micros = value * unit.microseconds
        if time.kind is TimeKind.EPOCH:
            fits = PLAUSIBLE_MIN_US <= micros < PLAUSIBLE_MAX_US
        else:
            fits = 0 <= micros < PLAUSIBLE_SPAN_US and origin + micros < ARRIVAL_MAX_US
        if fits:
            return f"{message}; are the times in {unit.value}? then pass --time-unit {unit.value}"
    return message


def _offsets(
    raw: Column, time: TimeSpec, origin: int
) -> tuple[
    npt.NDArray[np.int64], npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.bool_]
]:
    """Numeric times as microseconds since the epoch: (micros, unparsed, negative, outside).

    Ranges are checked before any arithmetic, so no value can wrap around int64.
    """
    per, div = UNIT_MICROS[time.unit]
    low, high = ARRIVAL_MIN_US - origin, ARRIVAL_MAX_US - 1 - origin  # offsets in microseconds
    if pa.types.is_integer(raw.type):
        try:
            values = np.asarray(
                cast(Any, pc.cast(raw, pa.int64())).fill_null(0).to_numpy(zero_copy_only=False),
                dtype=np.int64,
            )
        except (pa.ArrowInvalid, OverflowError):  # uint64 beyond int64: judged as floats below
            values = None
        if values is not None:
            # Bounds in the file's unit: low <= v * per / div <= high.
            low_v = -((-low * div) // per)
            high_v = (high * div) // per
            outside = (values < max(low_v, -(2**63))) | (values > min(high_v, INT64_MAX))
            safe = np.where(outside, 0, values)
            micros = safe * per if div == 1 else safe // div
            negative = values < 0
            unparsed = np.zeros(len(values), dtype=bool)
            return micros + origin, unparsed, negative, outside & ~negative
    numbers = _numbers(raw)
    unparsed = ~np.isfinite(numbers)
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = np.where(unparsed, 0.0, numbers) * (per / div)
    negative = ~unparsed & (numbers < 0)
    outside = ~unparsed & ((scaled < low) | (scaled > high)) & ~negative
    micros = np.round(np.where(outside | unparsed, 0.0, scaled)).astype(np.int64)
    return micros + origin, unparsed, negative, outside


def _text_column(raw: Column) -> pa.ChunkedArray[Any] | None:
    """The column as text, or None for types that cannot hold a date-time (lists, objects)."""
    if _is_text(raw):
        return raw
    try:
        return pc.cast(raw, pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def _datetimes(raw: Column, time: TimeSpec) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Date-times as microseconds since the epoch (UTC), and which failed to parse. Values far
    outside planner's range come back as they are, for the caller to flag."""
    if pa.types.is_timestamp(raw.type):
        return _timestamps(raw, time)
    text = _text_column(raw)
    if text is None:
        return np.zeros(len(raw), dtype=np.int64), np.ones(len(raw), dtype=bool)
    values = pd.Series(text.to_numpy(zero_copy_only=False), dtype=object)
    utc = time.timezone == "UTC"
    try:
        series = pd.to_datetime(values, format=time.format or "ISO8601", utc=utc, errors="coerce")
    except ValueError as exc:
        if "bad directive" in str(exc) or "stray %" in str(exc):
            raise UsageError(f"--time-format {shown(time.format)}: {exc}") from exc
        # Mixed UTC offsets with a non-UTC --timezone, or anything else pandas cannot do in
        # one go: one value at a time.
        micros_list = [_parse_one(v, time) for v in values]
        unparsed = np.array([m is None for m in micros_list], dtype=bool)
        return np.array([m or 0 for m in micros_list], dtype=np.int64), unparsed
    if not isinstance(series.dtype, pd.DatetimeTZDtype) and series.dtype != object:
        series = series.dt.tz_localize(time.timezone, ambiguous="NaT", nonexistent="NaT")
    if series.dtype == object:  # pandas could not settle on one type
        micros_list = [_parse_one(v, time) for v in values]
        unparsed = np.array([m is None for m in micros_list], dtype=bool)
        return np.array([m or 0 for m in micros_list], dtype=np.int64), unparsed
    series = series.dt.tz_convert("UTC").dt.as_unit("us")
    unparsed = np.asarray(series.isna())
    return np.where(unparsed, 0, _asi8(series)), unparsed


def _asi8(series: pd.Series[Any]) -> npt.NDArray[np.int64]:
    """The int64 values of a datetime series (its own unit; NaT as the minimum int64)."""
    return np.asarray(cast(Any, series.array).asi8, dtype=np.int64)


def _timestamps(raw: Column, time: TimeSpec) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """An Arrow timestamp column, range-checked in its own unit before any arithmetic."""
    unit = TimeUnit(raw.type.unit)
    per, div = UNIT_MICROS[unit]
    values = np.asarray(
        cast(Any, pc.cast(raw, pa.int64())).fill_null(0).to_numpy(zero_copy_only=False),
        dtype=np.int64,
    )
    # Far outside the range: out of range whatever the zone; keep them as a sentinel.
    low_v = -(((-ARRIVAL_MIN_US + 86_400_000_000) * div) // per)
    high_v = ((ARRIVAL_MAX_US + 86_400_000_000) * div) // per
    far = (values < max(low_v, -(2**63))) | (values > min(high_v, INT64_MAX))
    safe = np.where(far, 0, values)
    micros = safe * per if div == 1 else safe // div
    unparsed = np.zeros(len(values), dtype=bool)
    if raw.type.tz is None and time.timezone != "UTC":
        local = pd.Series(micros.astype("datetime64[us]"))
        zoned = local.dt.tz_localize(time.timezone, ambiguous="NaT", nonexistent="NaT")
        unparsed = np.asarray(zoned.isna()) & ~far
        utc = zoned.dt.tz_convert("UTC").dt.as_unit("us")
        micros = np.where(unparsed, 0, _asi8(utc))
    return np.where(far, ARRIVAL_MAX_US, micros), unparsed


def _parse_one(value: object, time: TimeSpec) -> int | None:
    """One date-time as microseconds since the epoch (UTC, any year pandas can read), or None."""
    if value is None:
        return None
    try:
        moment = pd.to_datetime(str(value), format=time.format or "ISO8601")
    except (ValueError, TypeError, OverflowError):
        return None
    if not isinstance(moment, pd.Timestamp) or pd.isna(moment):
        return None
    try:
        if moment.tzinfo is None:
            zoned = moment.tz_localize(time.timezone, ambiguous="NaT", nonexistent="NaT")
            if not isinstance(zoned, pd.Timestamp) or pd.isna(zoned):
                return None
            moment = zoned
        naive = moment.tz_convert("UTC").tz_localize(None).to_pydatetime(warn=False)
    except (ValueError, OverflowError):
        return None
    return (naive.replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)


def _unparsed_datetime(raw: Column, index: int, time: TimeSpec) -> str:
    micros = _parse_one(raw[index].as_py(), time)
    if micros is not None and not ARRIVAL_MIN_US <= micros < ARRIVAL_MAX_US:
        return f"date-time {_shown(raw, index)} is out of range: {ARRIVAL_RANGE}"
    if micros is None and time.timezone != "UTC":
        as_utc = _parse_one(raw[index].as_py(), TimeSpec(time.kind, time.unit, time.format))
        if as_utc is not None:  # it parses, but is no single moment in the zone
            return (
                f"date-time {_shown(raw, index)} does not exist or is ambiguous in "
                f"{time.timezone} (a daylight-saving change); write it with its UTC offset"
            )
    return f"expected {time.expected()}, got {_shown(raw, index)}"
