"""The What-if simulator page on real stores: a run on the demo dataset gives the numbers
``simulate()`` gives for the same inputs (built by the same library function the CLI uses),
with latency CDFs against the SLO lines, cost per purchase option and the fleet over time;
two runs compared side by side; runs too big refused as ``planner simulate`` refuses them."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from planner.config import database_url
from planner.demo import DATASET
from planner.simulate.inputs import (
    DemandSource,
    Disaggregation,
    FleetSettings,
    ReplicaPrices,
    WhatIf,
    curve_window,
    scaled_curve,
    sheet_instances,
)
from planner.simulate.metrics import SLO
from planner.simulate.results import headline
from planner.simulate.run import ServingSpec, SimulationResult
from planner.store import open_store
from planner.usecases.load import stored_demand
from planner.usecases.simulate import prepare_whatif, run_whatif
from pricing.sheets import latest_prices
from tests.dashboard.conftest import no_exception

Page = Callable[[str], AppTest]
LOAD_SCALE = 0.05  # about 970 of the demo's 19,366 requests: a run of about a second
L4_8B = ServingSpec(gpu="L4", model="llama-3.1-8b")  # the page's defaults
TARGETS = SLO(ttft_s=2.0, tpot_s=0.2)  # the page's default targets


@pytest.fixture(autouse=True)
def _run_files_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs' per-request files go where pytest cleans up, not the machine's temp folder."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@contextmanager
def _store_session() -> Iterator[Session]:
    with open_store(database_url()) as store, store.session() as session:
        yield session


def _sheet_prices(gpu: str = "L4", tp: int = 1) -> ReplicaPrices:
    """The page's default prices: the cheapest instance per GPU on the store's price sheet."""
    with _store_session() as session:
        return sheet_instances(latest_prices(session, gpu=gpu), tp)[0].per_replica(tp)


def _library(whatif: WhatIf) -> SimulationResult:
    return run_whatif(prepare_whatif(whatif, _store_session))


def _run(at: AppTest) -> AppTest:
    at.button(key="whatif-run").click().run()
    no_exception(at)
    return at


def _table(at: AppTest, column: str) -> pd.DataFrame:
    frames = [d.value for d in at.dataframe if column in d.value.columns]
    assert frames, f"no table with a {column!r} column"
    return frames[0]


def _charts(at: AppTest) -> list[str]:
    return [str(c.proto.spec) for c in at.get("plotly_chart")]


def _runs(at: AppTest) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = at.session_state["whatif-runs"]
    return runs


def test_an_empty_store_says_what_to_load(empty_home: Path, page: Page) -> None:
    at = page("whatif")
    no_exception(at)
    assert at.title[0].value == "What-if simulator"
    assert any("No datasets in the store yet" in i.value for i in at.info)
    assert not at.button


def test_the_demo_store_offers_its_dataset_and_estimates_the_run(
    demo_home: Path, page: Page
) -> None:
    at = page("whatif")
    no_exception(at)
    assert at.selectbox(key="whatif-dataset").value == DATASET
    at.number_input(key="whatif-load-scale").set_value(LOAD_SCALE).run()
    captions = " ".join(c.value for c in at.caption)
    assert f"About {19_366 * LOAD_SCALE:,.0f} requests through up to 1 replicas" in captions
    assert at.button(key="whatif-run").label == "Run simulation"
    assert not _charts(at)  # nothing simulated until asked


def test_a_run_shows_the_numbers_simulate_gives(demo_home: Path, page: Page) -> None:
    at = page("whatif")
    at.number_input(key="whatif-load-scale").set_value(LOAD_SCALE).run()
    _run(at)
    assert not at.error
    expected = _library(
        WhatIf(
            serving=L4_8B,
            demand=DemandSource(dataset=DATASET, load_scale=LOAD_SCALE),
            prices=_sheet_prices(),
            slo=TARGETS,
        )
    )
    overall = expected.summary["all"]
    assert 900 < overall["requests"] < 1050
    table = _table(at, "P99 (ms)").set_index("latency")
    for metric, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E")):
        for key, column in (("p50", "P50 (ms)"), ("p90", "P90 (ms)"), ("p99", "P99 (ms)")):
            assert table.loc[label, column] == pytest.approx(overall[metric][key] * 1e3)
    shown = {m.label: m.value for m in at.metric}
    assert shown["SLO attainment"] == f"{overall['slo_attainment']:.1%}"
    assert shown["Finished / rejected"] == f"{overall['finished']:,} / {overall['rejected']:,}"
    assert expected.cost is not None
    assert shown["Cost"] == f"${expected.cost['total']:,.2f}"
    costs = _table(at, "GPU-hours")
    assert costs["purchase"].tolist() == ["on-demand"]
    assert costs["cost ($)"].iloc[0] == pytest.approx(expected.cost["total"])
    # CDFs in ms with the SLO line, and the fleet over time.
    charts = _charts(at)
    ttft = next(c for c in charts if "TTFT CDF" in c)
    assert "TTFT (ms)" in ttft and '"log"' in ttft
    [slo] = [a for a in json.loads(ttft)["layout"]["annotations"] if a["text"].startswith("SLO")]
    assert slo["text"] == "SLO 2,000 ms"
    assert slo["x"] == pytest.approx(math.log10(2000))  # a label on a log axis sits at log10
    assert any("TPOT CDF" in c and "SLO 200 ms" in c for c in charts)
    assert any('"replicas"' in c for c in charts)
    assert any('"requests queued"' in c for c in charts)
    [run] = _runs(at)
    assert run["result"]["summary"] == expected.summary
    assert run["cdfs"]["metric"].unique().tolist() == ["ttft", "tpot", "e2e"]
    folder = Path(run["folder"])
    assert folder.parent == demo_home.parent  # the test's tmp_path
    assert (folder / "requests.parquet").is_file()  # the per-request download
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels.count("CSV") >= 3 and labels.count("JSON") >= 3


def test_two_runs_compare_side_by_side(demo_home: Path, page: Page) -> None:
    at = page("whatif")
    at.number_input(key="whatif-load-scale").set_value(LOAD_SCALE).run()
    _run(at)
    at.number_input(key="whatif-on-demand").set_value(2).run()
    at.text_input(key="whatif-label").input("two replicas").run()
    _run(at)
    first, second = _runs(at)
    assert second["label"] == "two replicas"
    assert at.selectbox(key="whatif-compare-a").value == first["label"]
    assert at.selectbox(key="whatif-compare-b").value == second["label"]
    prices = _sheet_prices()
    demand = DemandSource(dataset=DATASET, load_scale=LOAD_SCALE)
    expected = _library(
        WhatIf(
            serving=L4_8B,
            demand=demand,
            fleet=FleetSettings(replicas=2),
            prices=prices,
            slo=TARGETS,
        )
    )
    numbers = _table(at, "B - A").set_index("")
    assert numbers.loc["peak replicas", "A"] == 1 and numbers.loc["peak replicas", "B"] == 2
    for name, value in headline(expected.to_dict()).items():
        if value is not None:
            assert numbers.loc[name, "B"] == pytest.approx(value), name
    differences = dict(zip(numbers.index, numbers["B - A"].astype(float), strict=True))
    assert differences["cost ($)"] > 0  # twice the replicas: more cost
    overlaid = [c for c in _charts(at) if "TTFT CDF" in c and "A: " in c]
    assert overlaid and "B: two replicas" in overlaid[0]


def test_a_forecast_demand_curve_runs_with_a_datasets_lengths(demo_home: Path, page: Page) -> None:
    at = page("whatif")
    at.radio(key="whatif-source").set_value("A forecast's demand curve").run()
    no_exception(at)
    at.number_input(key="whatif-curve-scale").set_value(0.0002).run()
    _run(at)
    assert not at.error
    with _store_session() as session:
        demand = stored_demand(session, 1)
    curve = scaled_curve(curve_window(demand.curve, 0, 1), 0.0002)
    [run] = _runs(at)
    whatif = run["whatif"]
    assert whatif.demand.tokens_from == DATASET  # the forecast has no dataset: the first one
    assert whatif.demand.rates.requests_per_hour.tolist() == curve.requests_per_hour.tolist()
    expected = _library(
        WhatIf(
            serving=L4_8B,
            demand=DemandSource(rates=curve, tokens_from=DATASET),
            prices=_sheet_prices(),
            slo=TARGETS,
        )
    )
    assert run["result"]["summary"] == expected.summary
    assert run["result"]["requests"] == pytest.approx(curve.total_requests, rel=0.1)


def test_a_run_too_big_is_refused_as_the_cli_refuses_it(demo_home: Path, page: Page) -> None:
    at = page("whatif")
    at.number_input(key="whatif-load-scale").set_value(1000.0).run()
    _run(at)
    [error] = at.error
    assert "19,366 requests at --load-scale 1000 comes to about 19,366,000 requests" in error.value
    assert "over the limit of 10,000,000" in error.value
    assert not at.session_state["whatif-runs"]


def test_a_fleet_without_a_price_for_its_spot_replicas_is_refused(
    demo_home: Path, page: Page
) -> None:
    at = page("whatif")
    at.number_input(key="whatif-load-scale").set_value(LOAD_SCALE).run()
    at.radio(key="whatif-price-source").set_value("By hand").run()
    at.number_input(key="whatif-price-od").set_value(1.0).run()
    at.number_input(key="whatif-spot").set_value(1).run()
    _run(at)
    assert [e.value for e in at.error] == [
        "the fleet has spot replicas but no price for them; give a spot price per "
        "replica-hour too (or no prices at all)"
    ]


def test_a_disaggregated_run_shows_its_roles_as_simulate_gives_them(
    demo_home: Path, page: Page
) -> None:
    at = page("whatif")
    at.number_input(key="whatif-load-scale").set_value(LOAD_SCALE).run()
    at.toggle(key="whatif-disagg").set_value(True).run()
    at.number_input(key="whatif-decode-replicas").set_value(2).run()
    at.selectbox(key="whatif-kv-link").select("ethernet-25g").run()
    _run(at)
    assert not at.error, [e.value for e in at.error]
    expected = _library(
        WhatIf(
            serving=L4_8B,
            demand=DemandSource(dataset=DATASET, load_scale=LOAD_SCALE),
            prices=_sheet_prices(),
            slo=TARGETS,
            disaggregation=Disaggregation(1, 2, prefill_tp=1, decode_tp=1, kv_link="ethernet-25g"),
        )
    )
    [run] = _runs(at)
    assert run["result"]["summary"] == expected.summary
    d = expected.disaggregation
    assert d is not None
    shown = {m.label: m.value for m in at.metric}
    assert shown["KV transfer P99"] == f"{d['transfer_s']['p99'] * 1e3:,.1f} ms"
    assert shown["Decode wait P99"] == f"{d['decode_wait_s']['p99'] * 1e3:,.1f} ms"
    roles = _table(at, "role")
    assert roles["role"].tolist() == ["prefill", "decode"]
    assert roles["replicas"].tolist() == [1, 2]
    # both pools priced at the sheet's per-GPU price: their costs add up to the run's
    assert roles["cost"].sum() == pytest.approx(expected.cost["total"])  # type: ignore[index]
    assert (Path(run["folder"]) / "requests.parquet").is_file()
