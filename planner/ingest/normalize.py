"""Turn raw file columns into typed request columns, finding every bad value by row and column.

Each converter works on a whole chunk at once (Arrow or pandas vectorized operations); the slow
per-value path runs only to describe values that failed, so clean files pay nothing for the
diagnostics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from planner.errors import RowProblem
from planner.ingest.formats import LogFormat, TimeKind, TimeSpec
from planner.ingest.readers import RawChunk

Column: TypeAlias = "pa.ChunkedArray[Any]"  # subscriptable only in the type stubs
INT32_MAX = 2**31 - 1
TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_tokens")
MILLISECOND_FIELDS = ("ttft_ms", "e2e_ms")
TEXT_FIELDS = ("model", "priority_class", "status")
PROBLEM_EXAMPLES = 5


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


@dataclass
class NormalizedChunk:
    columns: dict[str, Any]  # request column -> numpy array or list, one value per kept row
    num_rows: int
    min_arrival_us: int | None
    max_arrival_us: int | None
    problems: list[RowProblem]  # first problems of the chunk, in row order
    bad_rows: int


def normalize_chunk(
    chunk: RawChunk,
    fmt: LogFormat,
    fields: dict[str, str],
    *,
    start_us: int | None,
    default_model: str | None,
) -> NormalizedChunk:
    """Convert the raw columns of ``chunk`` (``fields``: request field -> file column)."""
    n = chunk.num_rows
    issues = ChunkIssues(np.zeros(n, dtype=bool))
    out: dict[str, Any] = {}
    for name, column in fields.items():
        raw = chunk.table.column(column)
        if name == "arrival":
            out["arrival_us"] = _arrival(raw, column, fmt.time, start_us, issues)
        elif name in TOKEN_FIELDS:
            out[name] = _integers(raw, column, issues, required=name != "cached_tokens")
        elif name in MILLISECOND_FIELDS:
            out[name] = _milliseconds(raw, column, issues)
        elif name == "prefix_block_ids":
            out[name] = _block_ids(raw, column, issues)
        else:
            out[name] = _text(raw)
    if default_model is not None:
        if "model" in out:
            out["model"] = [default_model if m is None else m for m in out["model"]]
        else:
            out["model"] = [default_model] * n

    keep = ~issues.bad
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
    )


def _select(values: Any, keep: npt.NDArray[np.bool_]) -> Any:
    if isinstance(values, np.ndarray):
        return values[keep]
    return [v for v, k in zip(values, keep, strict=True) if k]


def _shown(raw: Column, index: int) -> str:
    value = raw[index].as_py()
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _missing(raw: Column) -> npt.NDArray[np.bool_]:
    """Null or blank values."""
    if pa.types.is_string(raw.type) or pa.types.is_large_string(raw.type):
        blank = pc.equal(pc.utf8_trim_whitespace(raw), pa.scalar(""))
        missing = pc.fill_null(pc.or_(pc.is_null(raw), blank), pa.scalar(True))
        return np.asarray(missing)
    return np.asarray(pc.is_null(raw))


def _numbers(raw: Column) -> npt.NDArray[np.float64]:
    """Values as floats; NaN where a value is missing or not a number."""
    if pa.types.is_integer(raw.type) or pa.types.is_floating(raw.type):
        return np.asarray(pc.cast(raw, pa.float64()).to_numpy(zero_copy_only=False), dtype=float)
    if pa.types.is_string(raw.type) or pa.types.is_large_string(raw.type):
        series = pd.Series(raw.to_numpy(zero_copy_only=False), dtype=object)
        return np.asarray(pd.to_numeric(series, errors="coerce"), dtype=float)
    return np.full(len(raw), np.nan)  # lists, objects: never a number


def _integers(
    raw: Column, column: str, issues: ChunkIssues, *, required: bool
) -> npt.NDArray[np.int64] | list[int | None]:
    expected = "a non-negative integer"
    try:  # fast path: clean integers, whatever type the file stored them as
        values = np.asarray(pc.cast(raw, pa.int64()).to_numpy(zero_copy_only=False))
        in_range = values.size == 0 or (values.min() >= 0 and values.max() <= INT32_MAX)
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
        finite & (clean > INT32_MAX),
        column,
        lambda i: f"token count {_shown(raw, i)} is too large (at most {INT32_MAX})",
    )
    result = np.clip(clean, 0, INT32_MAX).astype(np.int64)
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
    return np.where(missing, np.nan, numbers)


def _text(raw: Column) -> list[str | None]:
    values = pc.cast(raw, pa.string()) if not pa.types.is_string(raw.type) else raw
    trimmed = pc.utf8_trim_whitespace(values)
    return [v if v else None for v in trimmed.to_pylist()]


def _block_ids(raw: Column, column: str, issues: ChunkIssues) -> list[str | None]:
    """Prefix block ids as space-separated integers, from a JSON list or delimited text."""
    result: list[str | None] = []
    bad = np.zeros(len(raw), dtype=bool)
    for index, value in enumerate(raw.to_pylist()):
        if value is None or value == "" or value == []:
            result.append(None)
            continue
        items = (
            value
            if isinstance(value, list)
            else str(value).replace(",", " ").replace(";", " ").strip("[] ").split()
        )
        try:
            ids = [int(item) for item in items]
        except (TypeError, ValueError):
            ids = [-1]
        if any(i < 0 for i in ids):
            bad[index] = True
            result.append(None)
        else:
            result.append(" ".join(map(str, ids)))
    issues.flag(
        bad,
        column,
        lambda i: f"expected a list of non-negative integer block ids, got {_shown(raw, i)}",
    )
    return result


def _arrival(
    raw: Column, column: str, time: TimeSpec, start_us: int | None, issues: ChunkIssues
) -> npt.NDArray[np.int64]:
    missing = _missing(raw)
    issues.flag(missing, column, lambda i: f"missing value, expected {time.expected()}")
    if time.kind is TimeKind.DATETIME:
        micros, unparsed = _datetimes(raw, time)
    else:
        micros, unparsed = _offsets(raw, time)
        if time.kind is TimeKind.RELATIVE:
            negative = ~unparsed & (micros < 0)
            issues.flag(
                negative & ~missing,
                column,
                lambda i: (
                    f"expected a non-negative offset ({time.expected()}), got {_shown(raw, i)}"
                ),
            )
            micros = micros + (start_us or 0)
    issues.flag(
        unparsed & ~missing, column, lambda i: f"expected {time.expected()}, got {_shown(raw, i)}"
    )
    return micros


def _datetimes(raw: Column, time: TimeSpec) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    if pa.types.is_timestamp(raw.type):
        series = pd.Series(raw.to_pandas())
    else:
        text = pd.Series(pc.cast(raw, pa.string()).to_numpy(zero_copy_only=False), dtype=object)
        series = pd.to_datetime(
            text, format=time.format or "ISO8601", utc=time.timezone == "UTC", errors="coerce"
        )
    if series.dt.tz is None:
        series = series.dt.tz_localize(time.timezone, ambiguous="NaT", nonexistent="NaT")
    series = series.dt.tz_convert("UTC")
    unparsed = np.asarray(series.isna())
    nanos = np.where(unparsed, 0, series.dt.as_unit("ns").array.asi8)
    return nanos // 1000, unparsed


def _offsets(raw: Column, time: TimeSpec) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    per_unit = time.unit.microseconds
    if pa.types.is_integer(raw.type) and raw.null_count == 0:  # exact integer arithmetic
        values = np.asarray(raw.to_numpy(), dtype=np.int64)
        micros = values // 1000 if per_unit < 1 else values * int(per_unit)
        return micros, np.zeros(len(values), dtype=bool)
    numbers = _numbers(raw)
    unparsed = ~np.isfinite(numbers)
    micros = np.round(np.where(unparsed, 0.0, numbers) * per_unit).astype(np.int64)
    return micros, unparsed
