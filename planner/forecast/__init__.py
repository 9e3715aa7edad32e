"""Load forecasting on values: hourly series (series), Prophet fits with 80%/95% bands (model),
backtests against the seasonal-naive baseline and tuning (backtest), demand curves for the
simulator (demand), and a run as ``planner forecast`` makes it (run).

Import the module you need: this package imports nothing itself, so that reading a series or a
demand curve does not import Prophet (half a second; ``model`` and ``backtest`` do). Reading a
dataset's hours and storing forecasts are ``planner.store.forecasts``'; both together are the
use case ``planner.usecases.forecast``. See docs/forecasting.md.
"""
