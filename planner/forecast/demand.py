"""Demand curves: the hourly load to plan for, at a chosen quantile of the forecast.

A demand curve is a CSV ``ds,y`` (hour start in UTC, requests in that hour), one row per hour,
exactly what :func:`planner.workload.rates.read_rate_curve` reads (``planner simulate
--rates``); :func:`rate_curve` hands it to the simulator in memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from planner.forecast.series import _utc, write_hourly_csv
from planner.workload.rates import RateCurve

if TYPE_CHECKING:
    from planner.forecast.model import Forecast  # imports Prophet: for the annotation only


def demand_curve(result: Forecast, quantile: float = 0.9) -> pd.DataFrame:
    """``ds``, ``y``: each forecast hour's ``quantile`` of the predictive draws."""
    return result.demand(quantile)


def write_demand_curve(curve: pd.DataFrame, path: Path | str, option: str = "output") -> Path:
    """Write a demand curve as ``ds,y`` CSV for ``planner simulate --rates`` (whole or not at
    all; a failure is a :class:`~planner.errors.UsageError` naming ``option``)."""
    path = Path(path)
    write_hourly_csv(curve["ds"], curve["y"].to_numpy(np.float64), path, option)
    return path


def rate_curve(curve: pd.DataFrame) -> RateCurve:
    """The demand curve as the simulator's rate curve (requests per hour)."""
    return RateCurve(_utc(curve["ds"].iloc[0]), curve["y"].to_numpy(np.float64))
