"""What a request log looks like: size, span, token lengths and request rates.

Peak rates are counted over sliding windows (the busiest 60 s and the busiest 3600 s anywhere
in the log), not clock-aligned buckets, so a one-hour trace that starts at 18:15 still has a
meaningful peak hour.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

MINUTE_US = 60_000_000
HOUR_US = 3_600_000_000


@dataclass(frozen=True)
class TokenStats:
    mean: float
    p50: float
    p99: float
    max: int

    @classmethod
    def of(cls, values: npt.NDArray[np.int64]) -> TokenStats:
        if values.size == 0:
            return cls(0.0, 0.0, 0.0, 0)
        p50, p99 = np.percentile(values, [50, 99])
        return cls(float(values.mean()), float(p50), float(p99), int(values.max()))


@dataclass(frozen=True)
class RateStats:
    """Requests per window: the mean over the log's span and the busiest sliding window."""

    mean: float
    peak: int
    window_s: int
    span_covers_window: bool  # False when the log is shorter than one window


@dataclass(frozen=True)
class DatasetSummary:
    model: str | None  # None: all models together
    rows: int
    start_at: datetime | None
    end_at: datetime | None
    duration_s: float
    input_tokens: TokenStats
    output_tokens: TokenStats
    per_minute: RateStats
    per_hour: RateStats
    by_model: list[DatasetSummary] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("start_at", "end_at"):
            data[key] = data[key].isoformat() if data[key] else None
        data["by_model"] = [m.to_dict() for m in self.by_model]
        return data


def peak_in_window(sorted_us: npt.NDArray[np.int64], window_us: int) -> int:
    """Most arrivals in any half-open window [t, t + window) starting at an arrival."""
    if sorted_us.size == 0:
        return 0
    ends = np.searchsorted(sorted_us, sorted_us + window_us, side="left")
    return int((ends - np.arange(sorted_us.size)).max())


def _rates(sorted_us: npt.NDArray[np.int64], window_us: int) -> RateStats:
    n = sorted_us.size
    span_us = int(sorted_us[-1] - sorted_us[0]) if n else 0
    covers = span_us >= window_us
    mean = n * window_us / span_us if span_us > 0 and covers else float(n)
    return RateStats(
        float(mean), peak_in_window(sorted_us, window_us), window_us // 1_000_000, covers
    )


def _summary_of(frame: pd.DataFrame, model: str | None) -> DatasetSummary:
    arrivals = np.sort(frame["arrival_us"].to_numpy(dtype=np.int64))
    n = arrivals.size
    start = pd.Timestamp(int(arrivals[0]), unit="us", tz="UTC").to_pydatetime() if n else None
    end = pd.Timestamp(int(arrivals[-1]), unit="us", tz="UTC").to_pydatetime() if n else None
    return DatasetSummary(
        model=model,
        rows=n,
        start_at=start,
        end_at=end,
        duration_s=float(arrivals[-1] - arrivals[0]) / 1e6 if n else 0.0,
        input_tokens=TokenStats.of(frame["input_tokens"].to_numpy(dtype=np.int64)),
        output_tokens=TokenStats.of(frame["output_tokens"].to_numpy(dtype=np.int64)),
        per_minute=_rates(arrivals, MINUTE_US),
        per_hour=_rates(arrivals, HOUR_US),
    )


def summarize(frame: pd.DataFrame) -> DatasetSummary:
    """Summary of requests (columns arrival_us, model, input_tokens, output_tokens), per model too
    when there are several."""
    overall = _summary_of(frame, None)
    models: list[Any] = list(frame["model"].fillna("(none)").unique()) if "model" in frame else []
    if len(models) == 1 and models[0] != "(none)":
        return replace(overall, model=str(models[0]))
    if len(models) < 2:
        return overall
    by_model = [
        _summary_of(frame[frame["model"].fillna("(none)") == m], str(m)) for m in sorted(models)
    ]
    return replace(overall, by_model=by_model)
