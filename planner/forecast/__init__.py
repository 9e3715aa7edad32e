"""Load forecasting: hourly series, Prophet fits with 80%/95% bands, backtests against the
seasonal-naive baseline, tuning, stored forecasts and demand curves for the simulator.

See docs/forecasting.md. Importing this package imports Prophet (half a second): the CLI
imports it inside ``planner forecast`` only.
"""

from planner.forecast.backtest import (
    BacktestPlan,
    BacktestResult,
    Scores,
    TuneResult,
    backtest,
    holdout_plan,
    plan_backtest,
    tune,
)
from planner.forecast.demand import demand_curve, rate_curve, write_demand_curve
from planner.forecast.model import (
    Event,
    Forecast,
    ForecastSettings,
    forecast,
    read_events,
)
from planner.forecast.series import (
    METRICS,
    SERVEGEN_START,
    HourlySeries,
    SeriesReport,
    read_series,
    read_series_csv,
    read_servegen,
    series_from_dataset,
)
from planner.forecast.store import list_forecasts, load_forecast, points_frame, save_forecast

__all__ = [
    "METRICS",
    "SERVEGEN_START",
    "BacktestPlan",
    "BacktestResult",
    "Event",
    "Forecast",
    "ForecastSettings",
    "HourlySeries",
    "Scores",
    "SeriesReport",
    "TuneResult",
    "backtest",
    "demand_curve",
    "forecast",
    "holdout_plan",
    "list_forecasts",
    "load_forecast",
    "plan_backtest",
    "points_frame",
    "rate_curve",
    "read_events",
    "read_series",
    "read_series_csv",
    "read_servegen",
    "save_forecast",
    "series_from_dataset",
    "tune",
    "write_demand_curve",
]
