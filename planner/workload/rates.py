"""Hourly rate curves: requests per hour over consecutive hours, the demand a synthetic
workload follows (``planner simulate --rates``, a forecast's demand curve, a recommendation's
load).

:func:`read_rate_curve` reads a CSV with columns ``ds,y`` (as written by forecasting tools and
``planner forecast``); :class:`RateCurve` is the curve in memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import overload

import numpy as np
from numpy.typing import NDArray

from planner.common.text import shown
from planner.errors import InputFileError, RowProblem, UsageError
from planner.workload.hourly_csv import ds_y_rows, parse_hour, read_text

HOUR_S = 3600.0


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
    hours: list[float] = []
    first: datetime | None = None
    previous: datetime | None = None
    for row, line, ds, y in ds_y_rows(path, text):
        moment = parse_hour(path, ds, row, line)
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
                        f"{shown(ds.strip())} {_step(moment - previous)}: expected "
                        f"{expected.isoformat()}, one hour after the previous row "
                        "(one row per hour, consecutive hours, no gaps)",
                        line,
                    ),
                )
        previous = moment
        hours.append(_parse_requests(path, y, row, line))
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
