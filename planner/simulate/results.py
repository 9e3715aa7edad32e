"""A finished simulation as tables a person reads: latency percentiles, cost per purchase
option, and latency CDFs from the per-request results (``simulate(requests_out=...)``).

CDFs are kept small whatever the run's size: each is the latency at a fixed set of shares
(finer towards the tail, where SLOs live), so two runs of a million requests each compare on
a chart of a few hundred points.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from numpy.typing import NDArray

from planner.errors import UsageError

LATENCIES = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E"}
PERCENTILES = {"p50": "P50", "p90": "P90", "p99": "P99"}


def cdf_shares(points: int = 200) -> NDArray[np.float64]:
    """Shares of requests (0 to 1) a CDF is drawn at: even steps up to 0.9, then a log-spaced
    tail to 0.9999, then 1."""
    body = np.linspace(0.0, 0.9, points // 2, endpoint=False)
    tail = 1.0 - np.geomspace(0.1, 1e-4, points - points // 2)
    return np.unique(np.concatenate([body, tail, [1.0]]))


def latency_cdf(values_s: NDArray[np.float64], points: int = 200) -> pd.DataFrame:
    """The CDF of latencies given in seconds: ``ms`` (the latency) at each ``share`` of
    requests; NaN values (rejected requests, or TPOT of one-token outputs) are left out."""
    finite = np.asarray(values_s, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if not finite.size:
        return pd.DataFrame({"ms": pd.Series(dtype=float), "share": pd.Series(dtype=float)})
    shares = cdf_shares(points)
    return pd.DataFrame({"ms": np.quantile(finite, shares) * 1e3, "share": shares})


def read_requests(path: Path | str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Per-request results a run wrote as Parquet (``columns`` of them, default all), with
    ``ttft_s``, ``tpot_s`` and ``e2e_s`` NaN where a request was rejected (and TPOT where it
    had one output token)."""
    try:
        table = pq.read_table(path, columns=list(columns) if columns is not None else None)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a per-request results file planner wrote ({exc})") from None
    frame: pd.DataFrame = table.to_pandas()
    return frame


def request_cdfs(requests: pd.DataFrame, points: int = 200) -> pd.DataFrame:
    """TTFT, TPOT and E2E CDFs of per-request results (:func:`read_requests`): ``metric``
    (ttft/tpot/e2e), ``ms``, ``share``."""
    missing = [f"{m}_s" for m in LATENCIES if f"{m}_s" not in requests.columns]
    if missing:
        raise UsageError(f"per-request results lack the columns {', '.join(missing)}")
    parts = []
    for metric in LATENCIES:
        cdf = latency_cdf(requests[f"{metric}_s"].to_numpy(np.float64), points)
        parts.append(cdf.assign(metric=metric))
    return pd.concat(parts, ignore_index=True)[["metric", "ms", "share"]]


def percentile_table(summary: dict[str, Any]) -> pd.DataFrame:
    """P50/P90/P99, mean and max (ms) of TTFT, TPOT and E2E from a run's ``summary["all"]``
    (the simulator's streaming statistics, the numbers ``planner simulate`` prints)."""
    overall = summary["all"]
    rows = []
    for metric, label in LATENCIES.items():
        stats = overall[metric]
        row: dict[str, Any] = {"latency": label}
        for key in (*PERCENTILES, "mean", "max"):
            value = stats.get(key)
            row[f"{PERCENTILES.get(key, key)} (ms)"] = None if value is None else value * 1e3
        rows.append(row)
    return pd.DataFrame(rows)


def cost_table(cost: dict[str, Any] | None, hours: float) -> pd.DataFrame:
    """Cost per purchase option: GPU-hours, $ per GPU-hour, $ in all and $ per hour of the
    run (``hours`` simulated); empty when the run was not priced."""
    columns = ["purchase", "GPU-hours", "$ per GPU-hour", "cost ($)", "$ per hour"]
    if cost is None:
        return pd.DataFrame(columns=columns)
    rows = [
        {
            "purchase": name,
            "GPU-hours": entry["gpu_hours"],
            "$ per GPU-hour": entry["price_per_gpu_hour"],
            "cost ($)": entry["cost"],
            "$ per hour": entry["cost"] / hours if hours > 0 else None,
        }
        for name, entry in cost["by_purchase"].items()
    ]
    return pd.DataFrame(rows, columns=columns)


def headline(result: dict[str, Any]) -> dict[str, float | None]:
    """A run's key numbers (from ``SimulationResult.to_dict()``), to compare runs side by
    side: P50/P90/P99 of each latency in ms, SLO attainment, throughput, cost in all and per
    hour, peak replicas; with an API behind the fleet, its share of requests and its cost."""
    overall = result["summary"]["all"]
    numbers: dict[str, float | None] = {}
    for metric, label in LATENCIES.items():
        for key, name in PERCENTILES.items():
            value = overall[metric].get(key)
            numbers[f"{label} {name} (ms)"] = None if value is None else value * 1e3
    numbers["SLO attainment"] = overall["slo_attainment"]
    numbers["requests"] = overall["requests"]
    numbers["rejected"] = overall["rejected"]
    numbers["throughput (req/s)"] = overall["throughput_rps"]
    numbers["output tokens/s"] = overall["output_tokens_per_s"]
    cost = result.get("cost")
    hours = result["simulated_s"] / 3600 if result["simulated_s"] else 0.0
    numbers["cost ($)"] = cost["total"] if cost else None
    numbers["$ per hour"] = cost["total"] / hours if cost and hours > 0 else None
    numbers["peak replicas"] = result["fleet"]["peak_replicas"]
    # an API behind the fleet: its share and, priced, the bill with it (None without one, so
    # two runs' numbers line up)
    api = result["summary"].get("api") or {}
    numbers["share on the API"] = api.get("share")
    numbers["API cost ($)"] = api.get("cost_usd")
    numbers["fleet + API cost ($)"] = api.get("total_usd")
    return numbers
