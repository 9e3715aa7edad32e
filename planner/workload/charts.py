"""How a dataset's charts are cut: arrivals into time buckets, token lengths into bins, and the
span of a log. Pure: values in, values out (the store's aggregates feed them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import numpy as np
import pandas as pd

from planner.errors import UsageError

# Bucket widths a chart of arrivals picks from: whole minutes, so a rate per minute is exact.
BUCKET_CHOICES_S: tuple[int, ...] = (60, 300, 600, 900, 1800, 3600, 6 * 3600, 86_400)
MAX_BUCKETS = 2_000  # points on one arrivals chart
TokenColumn = Literal["input_tokens", "output_tokens"]
TOKEN_COLUMNS: tuple[TokenColumn, ...] = ("input_tokens", "output_tokens")


def choose_bucket_s(span_s: float, max_buckets: int = MAX_BUCKETS) -> int:
    """The narrowest bucket of ``BUCKET_CHOICES_S`` that cuts ``span_s`` into at most
    ``max_buckets`` buckets (the widest one when none does)."""
    for bucket in BUCKET_CHOICES_S:
        if span_s / bucket <= max_buckets:
            return bucket
    return BUCKET_CHOICES_S[-1]


@dataclass(frozen=True)
class Histogram:
    """Requests per token-length bin ``[lower, upper)``."""

    lower: np.ndarray[Any, np.dtype[np.float64]]
    upper: np.ndarray[Any, np.dtype[np.float64]]
    requests: np.ndarray[Any, np.dtype[np.int64]]
    log: bool

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({"lower": self.lower, "upper": self.upper, "requests": self.requests})


def bin_counts(counts: pd.DataFrame, bins: int = 60, *, log: bool = False) -> Histogram:
    """``token_counts`` in ``bins`` bins of equal width, or of equal width on a log scale
    (``log``: lengths under 1 count in the first bin, which starts at 1)."""
    if bins < 1:
        raise UsageError(f"{bins} bins: expected at least 1")
    tokens = counts["tokens"].to_numpy(np.float64)
    weights = counts["requests"].to_numpy(np.int64)
    if tokens.size == 0:
        empty = np.zeros(0, dtype=np.float64)
        return Histogram(empty, empty, np.zeros(0, dtype=np.int64), log)
    low, high = float(tokens.min()), float(tokens.max())
    if log:
        low = max(low, 1.0)
        tokens = np.maximum(tokens, low)
        edges = np.geomspace(low, max(high + 1.0, low * 1.01), bins + 1)
    else:
        edges = np.linspace(low, high + 1.0, bins + 1)
    hist, _ = np.histogram(tokens, bins=edges, weights=weights)
    return Histogram(edges[:-1], edges[1:], np.rint(hist).astype(np.int64), log)


def span_s(start_at: datetime | None, end_at: datetime | None) -> float:
    """Seconds from the first request to the last (0 for an empty or one-request log)."""
    if start_at is None or end_at is None:
        return 0.0
    return max(0.0, (end_at - start_at).total_seconds())
