"""Benchmark: fit + 14-day forecast + rolling backtest of a 90-day hourly series.

The series is ServeGen's weekly pattern (both models summed, collection gaps filled from the
same hour of the other week) tiled over 90 days with a 30% rise, day-to-day level noise,
hourly lognormal noise and a few collection gaps, all from a fixed seed. Timed: building the
series, Prophet's fit and 14-day forecast (1,000 predictive draws, 80%/95% bands), and a
rolling-origin backtest with the default plan (5 cutoffs, 7-day horizon) next to the
seasonal-naive baseline; optionally --tune. Target: under 30 s for fit + forecast + backtest.

    python benchmarks/forecast_bench.py [--days 90] [--repeat 3] [--tune] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner.forecast.backtest import backtest, plan_backtest, tune
from planner.forecast.model import ForecastSettings, forecast
from planner.forecast.series import HourlySeries, read_servegen

ROOT = Path(__file__).resolve().parent.parent
SERVEGEN = ROOT / "data" / "samples" / "servegen_rates_10min.csv"
TARGET_S = 30.0


def synthetic_series(days: int, seed: int = 0) -> HourlySeries:
    week = read_servegen(SERVEGEN).values  # 336 hours, NaN at collection gaps
    pattern = week.reshape(2, 168)
    filled = np.where(np.isfinite(pattern), pattern, pattern[::-1]).mean(axis=0)
    filled = np.where(np.isfinite(filled), filled, np.nanmean(filled))
    hours = days * 24
    rng = np.random.default_rng(seed)
    base = np.tile(filled, hours // 168 + 1)[:hours]
    growth = np.linspace(1.0, 1.3, hours)
    daily_level = np.repeat(rng.lognormal(0, 0.05, days), 24)
    y = base * growth * daily_level * rng.lognormal(0, 0.08, hours)
    for start in rng.integers(0, hours - 6, 6):  # a few outages of 1-5 hours
        y[start : start + int(rng.integers(1, 6))] = np.nan
    ds = pd.date_range("2025-01-06", periods=hours, freq="h")
    return HourlySeries(pd.DataFrame({"ds": ds, "y": y}), source=f"synthetic {days} days")


def once(days: int, do_tune: bool) -> dict[str, Any]:
    timings: dict[str, float] = {}
    began = time.perf_counter()
    series = synthetic_series(days)
    timings["series_s"] = time.perf_counter() - began
    settings = ForecastSettings(horizon_hours=14 * 24)

    began = time.perf_counter()
    result = forecast(series, settings)
    timings["fit_forecast_s"] = time.perf_counter() - began

    began = time.perf_counter()
    plan = plan_backtest(series, forecast_horizon_hours=settings.horizon_hours)
    checked = backtest(series, settings, plan)
    timings["backtest_s"] = time.perf_counter() - began
    timings["total_s"] = timings["fit_forecast_s"] + timings["backtest_s"]
    out: dict[str, Any] = {
        "days": days,
        "hours": series.hours,
        "observed_hours": series.observed_hours,
        "growth": result.growth,
        "cutoffs": len(plan.cutoffs),
        "backtest_horizon_hours": plan.horizon_hours,
        "prophet_mape": checked.prophet.mape,
        "baseline_mape": checked.baseline.mape,
        "coverage_80": checked.prophet.coverage_80,
        "coverage_95": checked.prophet.coverage_95,
        **{k: round(v, 3) for k, v in timings.items()},
    }
    if do_tune:
        began = time.perf_counter()
        tuned = tune(series, settings, plan)
        out["tune_s"] = round(time.perf_counter() - began, 3)
        out["tune_candidates"] = len(tuned.table)
        out["tuned_mape"] = tuned.table[0]["mape"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--repeat", type=int, default=3, help="runs; the fastest counts")
    parser.add_argument("--tune", action="store_true", help="also time --tune's grid")
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args()

    runs = [once(args.days, args.tune and i == 0) for i in range(args.repeat)]
    best = min(runs, key=lambda r: r["total_s"])
    if args.tune:
        best = {**best, **{k: v for k, v in runs[0].items() if k.startswith("tune")}}
    print(
        f"{best['days']} days ({best['hours']:,} h, {best['observed_hours']:,} observed), "
        f"growth {best['growth']}"
    )
    print(f"  fit + 14-day forecast: {best['fit_forecast_s']:.2f} s")
    print(
        f"  backtest ({best['cutoffs']} cutoffs x {best['backtest_horizon_hours']} h): "
        f"{best['backtest_s']:.2f} s; MAPE {best['prophet_mape']:.1%} vs baseline "
        f"{best['baseline_mape']:.1%}; 80%/95% coverage {best['coverage_80']:.0%}/"
        f"{best['coverage_95']:.0%}"
    )
    verdict = "under" if best["total_s"] < TARGET_S else "OVER"
    print(f"  total {best['total_s']:.2f} s ({verdict} the {TARGET_S:.0f} s target)")
    if args.tune:
        print(
            f"  --tune: {best['tune_candidates']} candidates in {best['tune_s']:.1f} s, "
            f"best MAPE {best['tuned_mape']:.1%}"
        )
    if args.json:
        payload = {"machine": platform.platform(), "python": platform.python_version()}
        args.json.write_text(json.dumps({**payload, "best": best, "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
