"""The seasonal-naive baseline: the same hour one season (a week) earlier.

It is what every forecast here is measured against, and the fallback forecast for histories too
short for Prophet (``allow_baseline``). Its bands assume a seasonal random walk: the error of a
value carried ``k`` seasons ahead has ``sqrt(k)`` times the spread of one-season differences.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

WEEK_HOURS = 168
DAY_HOURS = 24
Z80 = 1.2815515655446004  # standard normal quantile at 0.9
Z95 = 1.959963984540054  # at 0.975


def season_for(history_hours: int) -> int:
    """A week when the history holds one, else a day, else the previous hour."""
    if history_hours >= WEEK_HOURS:
        return WEEK_HOURS
    if history_hours >= DAY_HOURS:
        return DAY_HOURS
    return 1


def naive_points(
    history: NDArray[np.float64], horizon: int, season: int
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """The value ``k`` seasons back for each of ``horizon`` hours after ``history``, skipping
    missing values further back; and ``k``. NaN where no season back is observed."""
    n = len(history)
    points = np.full(horizon, np.nan)
    steps = np.zeros(horizon, dtype=np.int64)
    for h in range(horizon):
        k = h // season + 1
        index = n + h - k * season
        while index >= 0 and not math.isfinite(history[index]):
            index -= season
            k += 1
        if index >= 0:
            points[h] = history[index]
            steps[h] = k
    return points, steps


def seasonal_differences(history: NDArray[np.float64], season: int) -> NDArray[np.float64]:
    """``y[t] - y[t - season]`` where both are observed."""
    if len(history) <= season:
        return np.empty(0)
    diffs = history[season:] - history[:-season]
    result: NDArray[np.float64] = diffs[np.isfinite(diffs)]
    return result


def naive_scale(history: NDArray[np.float64], season: int) -> float:
    """Mean absolute seasonal difference in the history: the MASE denominator (NaN if none)."""
    diffs = seasonal_differences(history, season)
    return float(np.mean(np.abs(diffs))) if len(diffs) else math.nan


def naive_sigma(history: NDArray[np.float64], season: int) -> float:
    """Spread of one-season differences (of one-hour ones when too few); 0 when none."""
    diffs = seasonal_differences(history, season)
    if len(diffs) < 2:
        diffs = seasonal_differences(history, 1)
    return float(np.std(diffs, ddof=1)) if len(diffs) >= 2 else 0.0


def naive_bands(
    points: NDArray[np.float64], steps: NDArray[np.int64], sigma: float
) -> dict[str, NDArray[np.float64]]:
    """80% and 95% bands around naive points, clipped at zero."""
    spread = sigma * np.sqrt(np.maximum(steps, 1))
    return {
        "lower_80": np.maximum(points - Z80 * spread, 0.0),
        "upper_80": points + Z80 * spread,
        "lower_95": np.maximum(points - Z95 * spread, 0.0),
        "upper_95": points + Z95 * spread,
    }


def naive_samples(
    points: NDArray[np.float64],
    steps: NDArray[np.int64],
    sigma: float,
    n: int,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """``n`` draws per hour from the baseline's predictive distribution, clipped at zero."""
    spread = sigma * np.sqrt(np.maximum(steps, 1))
    draws = points[:, None] + spread[:, None] * rng.standard_normal((len(points), n))
    result: NDArray[np.float64] = np.maximum(draws, 0.0)
    return result
