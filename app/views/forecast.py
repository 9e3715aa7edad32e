"""Load forecast: fit an hourly forecast of a dataset or a series (as ``planner forecast`` does,
stored the same way) or open a stored one; history and forecast with 80%/95% bands, the
backtest beside the seasonal-naive baseline, and the demand curve to plan for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from app import common
from planner.forecast.model import DEFAULT_HORIZON_HOURS, ForecastSettings
from planner.forecast.plot import forecast_figure, metric_axis
from planner.forecast.run import (
    MAX_HORIZON_HOURS,
    BacktestOptions,
    bundled_series,
    demand_csv,
    demand_frame,
    series_models,
    series_upload_models,
)
from planner.forecast.series import METRICS
from planner.usecases.datasets import dataset_model_names, dataset_names
from planner.usecases.forecast import ForecastRequest, forecast
from planner.usecases.forecasts import (
    StoredForecast,
    StoredForecasts,
    open_forecast,
    stored_forecasts,
)

ALL_MODELS = "all models (summed)"
SOURCES = ("Dataset in the store", "Bundled series", "Upload a series")
PENDING = "forecast-pending"  # the id to open after a fit (set before the picker exists)
HISTORIES = "forecast-histories"  # id -> history of forecasts fitted in this session
SCORE_FORMATS = {
    "MAPE": st.column_config.NumberColumn(format="percent"),
    "sMAPE": st.column_config.NumberColumn(format="percent"),
    "MASE": st.column_config.NumberColumn(format="%.2f"),
    "80% band coverage": st.column_config.NumberColumn(format="percent"),
    "95% band coverage": st.column_config.NumberColumn(format="percent"),
    "accuracy (1 - MAPE)": st.column_config.NumberColumn(format="percent"),
    "Prophet MAPE": st.column_config.NumberColumn(format="percent"),
    "baseline MAPE": st.column_config.NumberColumn(format="percent"),
}

# --- store reads, cached on the store's contents ---------------------------------------------


@st.cache_data(show_spinner=False)
def _forecasts(url: str, version: str) -> StoredForecasts:
    return stored_forecasts(common.session)


@st.cache_data(show_spinner=False)
def _datasets(url: str, version: str) -> list[str]:
    return dataset_names(common.session)


@st.cache_data(show_spinner=False)
def _dataset_models(url: str, version: str, name: str) -> list[str]:
    return dataset_model_names(name, common.session)


@st.cache_data(show_spinner=False)
def _stored(url: str, version: str, forecast_id: int) -> StoredForecast:
    """Everything the page shows of a stored forecast (plain values: cached by pickling)."""
    return open_forecast(forecast_id, common.session)


@st.cache_data(show_spinner=False)
def _bundled_models(path: str) -> list[str]:
    return series_models(Path(path))


@st.cache_data(show_spinner=False)
def _upload_models(name: str, data: bytes) -> list[str]:
    return series_upload_models(name, data)


# --- fitting ---------------------------------------------------------------------------------


def _model_choice(models: list[str], *, key: str) -> str | None:
    chosen = st.selectbox("Model", [ALL_MODELS, *models], key=key)
    return None if chosen == ALL_MODELS else chosen


def _series_inputs(url: str, version: str) -> tuple[str, Any] | None:
    """The chosen series as (kind, how to read it), or None when nothing can be read yet."""
    source = st.radio("Series", SOURCES, horizontal=True, key="forecast-source")
    if source == SOURCES[0]:
        names = _datasets(url, version)
        if not names:
            common.empty_store_hint("datasets")
            return None
        left, middle, right = st.columns(3)
        with left:
            name = st.selectbox("Dataset", names, key="forecast-dataset")
        with middle:
            metric = st.selectbox(
                "Metric per hour",
                list(METRICS),
                key="forecast-metric",
                format_func=lambda m: m.replace("_", " "),
            )
        with right:
            model = _model_choice(_dataset_models(url, version, name), key="forecast-model")
        return "dataset", {"dataset": name, "metric": metric, "model": model}
    if source == SOURCES[1]:
        files = bundled_series()
        if not files:
            st.info("No series are bundled with this installation.", icon=":material/info:")
            return None
        left, right = st.columns(2)
        with left:
            path = st.selectbox(
                "Bundled series", files, format_func=lambda p: p.name, key="forecast-sample"
            )
        with right:
            model = _model_choice(_bundled_models(str(path)), key="forecast-sample-model")
        st.caption(
            "ServeGen's rates file (alibaba/ServeGen, Apache-2.0): requests per 10 minutes of "
            "two models over two weeks, summed per hour; see data/samples/README.md."
        )
        return "file", {"series_file": path, "model": model}
    uploaded = st.file_uploader(
        f"Hourly series: CSV with columns ds,y (or ServeGen's rates file); at most "
        f"{common.UPLOAD_LIMIT_MB:,} MB",
        type=["csv"],
        key="forecast-upload",
    )
    if uploaded is None:
        return None
    name, data = uploaded.name, uploaded.getvalue()
    models: list[str] = []
    with common.shown_errors():
        models = _upload_models(name, data)
    model = _model_choice(models, key="forecast-upload-model") if models else None
    return "upload", {"name": name, "data": data, "model": model}


def _request(
    kind: str, how: dict[str, Any], settings: ForecastSettings, **options: Any
) -> ForecastRequest:
    """The forecast request of the chosen series (see :func:`_series_inputs`)."""
    if kind == "upload":
        source: dict[str, Any] = {"upload": (how["name"], how["data"]), "model": how["model"]}
    else:
        source = how
    return ForecastRequest(settings, **source, **options)


def _fit_options() -> dict[str, Any]:
    """The fit's options, as widgets: the horizon, the quantile and how to fit and check."""
    left, middle, right = st.columns(3)
    horizon_days = left.number_input(
        "Horizon (days)",
        min_value=1,
        max_value=MAX_HORIZON_HOURS // 24,
        value=DEFAULT_HORIZON_HOURS // 24,
        key="forecast-horizon",
    )
    quantile = middle.number_input(
        "Demand-curve quantile",
        min_value=0.5,
        max_value=0.99,
        value=0.9,
        step=0.05,
        key="forecast-quantile",
        help="The planning quantile: 0.9 plans for a load that 90% of outcomes stay under.",
    )
    mode = right.selectbox(
        "Seasonality", ["additive", "multiplicative"], key="forecast-seasonality"
    )
    left, middle, right = st.columns(3)
    growth = left.selectbox(
        "Trend",
        ["auto", "linear", "flat"],
        key="forecast-growth",
        help="auto: linear from 28 days of history, else flat.",
    )
    holidays = middle.text_input(
        "Country holidays", key="forecast-holidays", placeholder="none (e.g. US, GB, CN)"
    )
    cutoffs = right.number_input(
        "Backtest cutoffs",
        min_value=1,
        max_value=10,
        value=5,
        key="forecast-cutoffs",
        help="Forecasts from this many cutoffs, a day apart, scored against what happened.",
    )
    left, middle, right = st.columns(3)
    log = left.checkbox(
        "Fit log(1 + y)", key="forecast-log", help="Growth in proportion, bands that scale."
    )
    run_backtest = middle.checkbox(
        "Backtest",
        value=True,
        key="forecast-backtest",
        help="Rolling-origin backtest against the seasonal-naive baseline (when the history "
        "allows); the bands are scaled to the width that covered 80%.",
    )
    allow_baseline = right.checkbox(
        "Seasonal-naive under two days",
        key="forecast-allow-baseline",
        help="Under 48 hours of history Prophet cannot tell the daily pattern from noise: a "
        "seasonal-naive forecast instead of an error.",
    )
    return {
        "horizon_days": horizon_days,
        "quantile": quantile,
        "mode": mode,
        "growth": growth,
        "holidays": holidays,
        "cutoffs": cutoffs,
        "log": log,
        "run_backtest": run_backtest,
        "allow_baseline": allow_baseline,
    }


def _fit_section(url: str, version: str) -> None:
    chosen = _series_inputs(url, version)
    options = _fit_options()
    clicked = st.button("Fit forecast", key="forecast-fit", type="primary", disabled=chosen is None)
    if not clicked or chosen is None:
        return
    kind, how = chosen
    with common.shown_errors():
        settings = ForecastSettings(
            horizon_hours=int(options["horizon_days"]) * 24,
            growth=options["growth"],
            seasonality_mode=options["mode"],
            country_holidays=options["holidays"].strip().upper() or None,
            log_transform=options["log"],
        )
        checks = BacktestOptions(
            wanted=None if options["run_backtest"] else False, cutoffs=int(options["cutoffs"])
        )
        request = _request(
            kind,
            how,
            settings,
            checks=checks,
            quantile=float(options["quantile"]),
            allow_baseline=options["allow_baseline"],
        )
        bar = st.progress(0.0, text="reading the series")

        def progress(stage: str, done: int, total: int) -> None:
            bar.progress(done / total if total else 0.0, text=f"{stage}: {done} of {total} fits")

        with st.spinner("Fitting the forecast (Prophet: a few seconds a fit)..."):
            fitted = forecast(request, common.session, progress=progress)
            bar.progress(1.0, text="stored the forecast")
        st.session_state.setdefault(HISTORIES, {})[fitted.forecast_id] = fitted.series.frame
        st.session_state[PENDING] = fitted.forecast_id
        st.rerun()  # the picker lists the new forecast and opens it


# --- a forecast, shown -----------------------------------------------------------------------


def _show(url: str, version: str, forecast_id: int) -> None:
    view = _stored(url, version, forecast_id)
    history = view.history
    if history is None:
        history = st.session_state.get(HISTORIES, {}).get(forecast_id)
    demand = None
    with common.shown_errors():
        demand = demand_frame(view.points)
    _chart(view, history, demand)
    _backtest(view)
    for warning in view.warnings:
        st.warning(warning, icon=":material/warning:")
    if view.notes:
        with st.expander("Notes: the series and the fit", expanded=False):
            for note in view.notes:
                st.markdown(f"- {note}")
    _downloads(view, demand)


def _chart(view: StoredForecast, history: pd.DataFrame | None, demand: pd.DataFrame | None) -> None:
    """The headline figures and the chart of history, forecast, bands and demand."""
    points, quantile = view.points, view.quantile
    unit = metric_axis(view.metric)
    st.subheader(f"Forecast #{view.id}: {view.title}")
    columns = st.columns(4)
    columns[0].metric("Method", view.method)
    columns[1].metric("Horizon", f"{len(points):,} h", help=f"{len(points) / 24:.1f} days")
    columns[2].metric("Mean forecast", f"{points['mean'].mean():,.0f}", help=unit)
    if demand is not None and quantile is not None:
        columns[3].metric(
            f"Peak demand (q{quantile:g})",
            f"{demand['y'].max():,.0f}",
            help=f"{unit}: the busiest hour of the demand curve",
        )
    fig = forecast_figure(
        points,
        history=history,
        demand=demand,
        quantile=quantile,
        label=view.title,
        metric=view.metric,
        method=view.method,
    )
    fig.update_layout(title=None)  # the subheader names it; the legend sits on top
    fig.update_yaxes(nticks=8)  # enough labelled ticks to read an hour's value off the axis
    common.chart(fig, key="forecast-chart")
    if history is None:
        st.caption(
            "The history is not shown: the series this forecast was fitted on is not in the "
            "store or among the bundled series any more."
        )
    else:
        missing = int(history["y"].isna().sum())
        st.caption(
            f"History {len(history):,} h ({missing:,} missing: breaks in the line, never "
            f"filled in), forecast {len(points):,} h; hours in UTC."
        )


def _coverage_said(view: StoredForecast) -> dict[str, Any]:
    """The backtest scored Prophet's own bands; when the bands were rescaled after it, the
    coverage columns say they are the unscaled bands' (and the scale is stated beside them)."""
    scaled = [n for n in view.notes if n.startswith("bands scaled by")]
    if not scaled:
        return SCORE_FORMATS
    st.caption(
        "Band coverage is of Prophet's own (unscaled) bands, as the backtest scored them; the "
        f"bands drawn above and planned on were then rescaled: {scaled[0]}."
    )
    said = {
        f"{level}% band coverage": st.column_config.NumberColumn(
            f"{level}% band coverage (unscaled)",
            format="percent",
            help=f"Prophet's own {level}% band, before the bands were rescaled",
        )
        for level in (80, 95)
    }
    return {**SCORE_FORMATS, **said}


def _backtest(view: StoredForecast) -> None:
    """The backtest beside the baseline, MAPE by day ahead, and the tuning table."""
    forecast_id, backtest = view.id, view.backtest
    st.markdown("**Backtest: Prophet beside the seasonal-naive baseline on the same hours**")
    if backtest.empty:
        st.info(
            "No backtest was stored with this forecast (turned off, or the history was too short).",
            icon=":material/info:",
        )
    else:
        plan = view.backtest_plan or {}
        cutoffs = plan.get("cutoffs") or []
        if cutoffs:
            st.caption(
                f"{common.plural(len(cutoffs), 'cutoff')} from {cutoffs[0]} to {cutoffs[-1]}, "
                "each forecasting "
                f"{plan.get('horizon_hours')} h; MAPE, sMAPE and accuracy as shares, MASE against "
                "the in-sample weekly change, coverage: the share of actual hours inside the band."
            )
        common.table(
            backtest,
            width="stretch",
            column_config=_coverage_said(view),
            key="forecast-backtest-table",
        )
        common.download_table(backtest, f"forecast-{forecast_id}-backtest", key="forecast-bt")
        if view.beats_baseline is False:
            st.warning(
                "Prophet did no better than the baseline in the backtest: plan with the "
                "baseline's view of next week in mind.",
                icon=":material/warning:",
            )
        if not view.by_day.empty:
            with st.expander("MAPE by day ahead"):
                common.table(view.by_day, width="stretch", column_config=SCORE_FORMATS)
                common.download_table(
                    view.by_day, f"forecast-{forecast_id}-by-day", key="forecast-by-day"
                )
    if not view.tune.empty:
        with st.expander("Tuning: candidates by backtest MAPE"):
            common.table(view.tune, width="stretch")
            common.download_table(view.tune, f"forecast-{forecast_id}-tuning", key="forecast-tune")


def _downloads(view: StoredForecast, demand: pd.DataFrame | None) -> None:
    forecast_id, quantile = view.id, view.quantile
    st.markdown("**Downloads**")
    if demand is not None:
        st.download_button(
            f"Demand curve at q{quantile:g} (CSV ds,y)",
            demand_csv(demand).encode(),
            file_name=f"demand-forecast-{forecast_id}.csv",
            mime="text/csv",
            key="forecast-demand-csv",
            icon=":material/download:",
            help="What `planner simulate --rates FILE` and `planner recommend --demand FILE` "
            f"read; `--demand {forecast_id}` reads it from the store.",
        )
    st.caption("Every forecast hour: point forecast, 80% and 95% bands, demand")
    common.download_table(view.points, f"forecast-{forecast_id}-hours", key="forecast-points")
    with st.expander("Settings"):
        st.json(view.settings)


# --- the page --------------------------------------------------------------------------------

st.title("Load forecast")
st.caption(
    "Hourly load forecast with Prophet, as `planner forecast` makes it: 80% and 95% bands, a "
    "rolling-origin backtest against the seasonal-naive baseline (same hour last week), and "
    "the demand curve that `planner recommend --demand` and `simulate --rates` plan for."
)
url, version = common.store_url(), common.version()
stored: StoredForecasts | None = None
with common.shown_errors():
    stored = _forecasts(url, version)
labels: dict[int, str] = stored.labels if stored is not None else {}
pending = st.session_state.pop(PENDING, None)
if pending is not None and pending in labels:
    st.session_state["forecast-stored"] = pending  # before the picker: opens the new forecast

chosen_id: int | None = None
if labels:
    ids = sorted(labels, reverse=True)  # newest first
    chosen_id = st.selectbox(
        "Stored forecast", ids, format_func=labels.__getitem__, key="forecast-stored"
    )
    with st.expander("All stored forecasts"):
        runs = stored.rows if stored is not None else pd.DataFrame()
        common.table(runs, width="stretch")
        common.download_table(runs, "forecasts", key="forecast-runs")
else:
    common.empty_store_hint("forecasts")

with st.expander("Fit a new forecast", expanded=not labels):
    _fit_section(url, version)

if chosen_id is not None:
    with common.shown_errors():
        _show(url, version, int(chosen_id))
