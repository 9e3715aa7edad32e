"""The Load forecast page on real stores: the demo's stored forecast opened with its chart and
backtest beside the baseline, a small forecast fitted from the page (stored as ``planner
forecast`` stores it), and bad input shown as located messages."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

from planner.config import database_url
from planner.store import open_store
from planner.store.forecasts import list_forecasts, load_forecast, points_frame
from tests.conftest import SERVEGEN
from tests.dashboard.conftest import no_exception

Page = Callable[[str], AppTest]


def _stored() -> list[tuple[int, str, str | None, int, bool]]:
    """(id, source, model, horizon hours, has a backtest) of every stored forecast."""
    with open_store(database_url()) as store, store.session() as session:
        return [
            (r.id, r.source, r.model, r.horizon_hours, bool((r.scores or {}).get("backtest")))
            for r in list_forecasts(session)
        ]


def _chart(at: AppTest) -> dict[str, object]:
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    spec: dict[str, object] = json.loads(charts[0].proto.spec)
    return spec


def _trace_names(at: AppTest) -> list[str]:
    data = _chart(at)["data"]
    assert isinstance(data, list)
    return [str(trace.get("name")) for trace in data]


def _backtest(at: AppTest) -> pd.DataFrame:
    frames = [d.value for d in at.dataframe if "MAPE" in d.value.columns]
    assert len(frames) == 1
    return frames[0]


def test_an_empty_store_offers_a_fit_and_says_what_is_missing(empty_home: Path, page: Page) -> None:
    at = page("forecast")
    no_exception(at)
    assert at.title[0].value == "Load forecast"
    assert any("No forecasts in the store yet" in i.value for i in at.info)
    assert not at.get("plotly_chart")
    # the dataset source has nothing to offer yet: a hint, and nothing to fit
    assert any("No datasets in the store yet" in i.value for i in at.info)
    assert at.button(key="forecast-fit").disabled


def test_the_demo_forecast_opens_with_its_chart_and_backtest(demo_home: Path, page: Page) -> None:
    at = page("forecast")
    no_exception(at)
    ((forecast_id, source, model, horizon, backtested),) = _stored()
    assert at.selectbox(key="forecast-stored").value == forecast_id
    assert (source, model, horizon, backtested) == (
        "ServeGen servegen_rates_10min.csv",
        "m-small",
        168,
        True,
    )
    assert [m.value for m in at.metric][:2] == ["prophet", "168 h"]
    names = _trace_names(at)
    assert names[:2] == ["95% band", "80% band"]
    assert "history" in names  # re-read from the bundled series it was fitted on
    assert "forecast (prophet)" in names and "demand curve (q=0.9)" in names
    layout = _chart(at)["layout"]
    assert isinstance(layout, dict)
    assert layout["yaxis"]["title"]["text"] == "requests / hour"
    table = _backtest(at)
    assert table["method"].tolist() == ["Prophet", "baseline: same hour last week"]
    for column in ("MAPE", "sMAPE", "MASE", "80% band coverage", "95% band coverage"):
        assert table[column].notna().all(), column
    assert at.download_button(key="forecast-demand-csv").label.startswith(
        "Demand curve at q0.9 (CSV ds,y)"
    )
    # the peak of the demand curve shown is the stored curve's
    with open_store(database_url()) as store, store.session() as session:
        demand = points_frame(load_forecast(session, forecast_id))["demand"]
    assert at.metric[3].value == f"{demand.max():,.0f}"


def test_a_small_forecast_fitted_from_the_page_is_stored_and_opened(
    demo_home: Path, page: Page
) -> None:
    at = page("forecast")
    before = _stored()
    at.radio(key="forecast-source").set_value("Bundled series").run()
    assert at.selectbox(key="forecast-sample-model").options == [
        "all models (summed)",
        "m-mid",
        "m-small",
    ]
    at.selectbox(key="forecast-sample-model").select("m-mid").run()
    at.number_input(key="forecast-horizon").set_value(1).run()
    at.number_input(key="forecast-cutoffs").set_value(1).run()
    at.number_input(key="forecast-quantile").set_value(0.8).run()
    at.button(key="forecast-fit").click().run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    after = _stored()
    assert after[: len(before)] == before
    ((new_id, source, model, horizon, backtested),) = after[len(before) :]
    assert (source, model, horizon, backtested) == (
        f"ServeGen {SERVEGEN.name}",
        "m-mid",
        24,
        True,
    )
    assert at.selectbox(key="forecast-stored").value == new_id  # opened after the fit
    assert at.metric[1].value == "24 h"
    assert "demand curve (q=0.8)" in _trace_names(at)
    assert _backtest(at)["method"].tolist()[1] == "baseline: same hour last week"


def test_bad_input_is_a_located_message_and_stores_nothing(demo_home: Path, page: Page) -> None:
    at = page("forecast")
    before = _stored()
    # the demo dataset holds one hour: too little for Prophet, said so, nothing stored
    at.radio(key="forecast-source").set_value("Dataset in the store").run()
    at.button(key="forecast-fit").click().run()
    no_exception(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "dataset demo-azure-conv" in errors[0], errors
    assert "Prophet needs at least 48" in errors[0]
    # an uploaded series with a bad value names the file, the row and the column
    at.radio(key="forecast-source").set_value("Upload a series").run()
    bad = b"ds,y\n2025-01-06T00:00:00Z,10\n2025-01-06T01:00:00Z,lots\n"
    at.file_uploader(key="forecast-upload").upload("mine.csv", bad, "text/csv").run()
    at.button(key="forecast-fit").click().run()
    no_exception(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("mine.csv: row 2, line 3, column 'y'"), errors
    assert _stored() == before


def test_an_uploaded_series_fits_without_a_backtest(demo_home: Path, page: Page) -> None:
    at = page("forecast")
    at.radio(key="forecast-source").set_value("Upload a series").run()
    at.file_uploader(key="forecast-upload").upload(
        "rates.csv", SERVEGEN.read_bytes(), "text/csv"
    ).run()
    at.selectbox(key="forecast-upload-model").select("m-small").run()
    at.number_input(key="forecast-horizon").set_value(2).run()
    at.checkbox(key="forecast-backtest").uncheck().run()
    at.button(key="forecast-fit").click().run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    (_id, source, model, horizon, backtested) = _stored()[-1]
    assert (source, model, horizon, backtested) == ("ServeGen rates.csv", "m-small", 48, False)
    # the upload is not kept in the store, but this session still draws its history
    assert "history" in _trace_names(at)
    assert any("No backtest was stored" in i.value for i in at.info)
    assert not [d for d in at.dataframe if "MAPE" in d.value.columns]
