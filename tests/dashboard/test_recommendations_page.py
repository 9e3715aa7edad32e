"""The Recommendations page on real stores: the demo's stored recommendation reopened (winner,
Pareto chart, rejections), a small search run from the page in the background while the
analyst is on another page, stored and shown, and bad inputs said as messages."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app.common import PAGES
from app.deploy import TARGET_LABELS
from planner.store import open_store
from planner.store.recommendations import list_briefs, load_recommendation
from tests.dashboard.conftest import no_exception

SEARCH_TIMEOUT_S = 240  # a small search on two busy cores takes a few seconds


def _store_url(home: Path) -> str:
    return f"sqlite:///{home / 'planner.db'}"


def _stored(home: Path) -> list[dict[str, Any]]:
    with open_store(_store_url(home)) as store, store.session() as session:
        return list_briefs(session)


def _result(home: Path, recommendation_id: int) -> dict[str, Any]:
    with open_store(_store_url(home)) as store, store.session() as session:
        data: dict[str, Any] = load_recommendation(session, recommendation_id).result
        return data


def _texts(elements: Any) -> list[str]:
    return [str(e.value) for e in elements]


def _table(at: AppTest, column: str) -> pd.DataFrame:
    """The one table with ``column`` (AppTest does not keep a table's key)."""
    [frame] = [d.value for d in at.dataframe if column in d.value.columns]
    return frame


def _charts(at: AppTest) -> list[dict[str, Any]]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def _small_search(at: AppTest, *, ttft_ms: float = 2000.0) -> None:
    """One GPU type, two candidates simulated, no extra checks, a tenth of the demo's load."""
    at.number_input(key="rec-load-scale").set_value(0.1)
    at.number_input(key="rec-ttft").set_value(ttft_ms)
    at.multiselect(key="rec-gpus").set_value(["L4"])
    at.number_input(key="rec-verify-top").set_value(2)
    at.number_input(key="rec-tighten").set_value(0)
    at.checkbox(key="rec-compare-gpus").uncheck()
    at.checkbox(key="rec-growth-check").uncheck()
    at.run()


def _wait_until(at: AppTest, done: Callable[[AppTest], bool]) -> None:
    began = time.monotonic()
    while not done(at):
        assert time.monotonic() - began < SEARCH_TIMEOUT_S, "the search did not end in time"
        time.sleep(0.5)
        at.run()
        no_exception(at)


def test_renders_on_an_empty_store(empty_home: Path, page: Callable[[str], AppTest]) -> None:
    at = page("recommend")
    no_exception(at)
    infos = " ".join(_texts(at.info))
    assert "No stored recommendations in the store yet" in infos
    assert "No datasets" in infos  # a search needs one: the form says so instead of failing
    assert not at.button  # nothing to run a search on


def test_the_demo_recommendation_reopens(demo_home: Path, page: Callable[[str], AppTest]) -> None:
    [brief] = _stored(demo_home)
    data = _result(demo_home, brief["id"])
    winner = data["winner"]
    at = page("recommend")
    no_exception(at)
    assert at.selectbox(key="rec-stored").value == brief["id"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["$ per month"] == f"${winner['monthly_usd']:,.0f}"
    assert metrics["Instances at peak"] == str(winner["peak_instances"])
    # Deploy it: the engine the fleet was verified with first; no Dynamo graph for one pool
    deploy = at.selectbox(key="rec-deploy-target")
    assert deploy.value == winner["engine"]
    assert TARGET_LABELS["dynamo"] not in deploy.options and TARGET_LABELS["keda"] in deploy.options
    assert metrics["P99 TTFT (simulated)"] == f"{winner['p99_ttft_s'] * 1e3:,.0f} ms"
    # the alternatives, every simulated candidate
    alternatives = _table(at, "Pareto")
    assert list(alternatives["configuration"]) == [r["id"] for r in data["ranked"]]
    assert list(alternatives["rank"]) == list(range(1, len(data["ranked"]) + 1))
    # the Pareto chart: cost against P99 TTFT, the target drawn as a line at 2,000 ms
    # the Pareto chart, the API comparison (planner.recommend.api) and the fleet by hour
    pareto, api, fleet = _charts(at)
    assert api["layout"]["xaxis"]["title"]["text"] == "mean requests/s"
    # the demo's demand is cheapest as a base fleet with its peaks on the API: the plan is
    # told, and starred on the chart at its monthly cost
    plan = data["api"]["overflow"]
    assert data["api"]["choice"] == "overflow" and plan["verified"]
    told = " ".join(m.value for m in at.markdown)
    assert f"**${plan['monthly_usd']:,.0f}** a month" in told
    [star] = [t for t in api["data"] if t.get("name", "").startswith("overflow plan")]
    assert star["y"] == [pytest.approx(plan["monthly_usd"])]
    assert pareto["layout"]["xaxis"]["title"]["text"] == "P99 TTFT (ms), simulated"
    assert pareto["layout"]["yaxis"]["title"]["text"] == "$ per month"
    assert [s["x0"] for s in pareto["layout"]["shapes"]] == [2000.0]
    [front] = [t for t in pareto["data"] if t.get("name", "").startswith("Pareto front")]
    verified = sorted(
        (r["p99_ttft_s"] * 1e3, r["monthly_usd"]) for r in data["ranked"] if r["verified"]
    )
    assert (front["x"][0], front["y"][0]) == verified[0]  # the fastest fleet starts it
    assert front["y"] == sorted(front["y"], reverse=True)  # cheaper as the P99 grows
    assert fleet["layout"]["yaxis"]["title"]["text"] == "instances"
    # another P99 on the x axis: the TPOT target moves with it
    at.selectbox(key="rec-pareto-metric").select("tpot").run()
    pareto = _charts(at)[0]
    assert pareto["layout"]["xaxis"]["title"]["text"] == "P99 TPOT (ms), simulated"
    assert [s["x0"] for s in pareto["layout"]["shapes"]] == [200.0]
    # the plan and its sensitivity, from the stored plan
    sensitivity = _table(at, "$ per month replanned")
    assert list(sensitivity["load"]) == ["-20%", "+20%"]
    assert len(_table(at, "detail")) == len(data["rejected"])
    assert at.get("download_button"), "no downloads"


def test_a_small_search_runs_in_the_background_and_is_stored(
    demo_home: Path, page: Callable[[str], AppTest]
) -> None:
    before = _stored(demo_home)
    at = page("recommend")
    at.selectbox(key="rec-dataset").select("demo-azure-conv")
    _small_search(at, ttft_ms=500.0)  # tight enough that the screen rules some out
    at.button(key="rec-run").click().run()
    no_exception(at)
    assert not at.error, _texts(at.error)
    # the analyst goes to another page while it runs; the search goes on and is stored
    at.switch_page(PAGES["reports"].path)
    at.run()
    _wait_until(at, lambda at: len(_stored(demo_home)) == len(before) + 1)
    at.switch_page(PAGES["recommend"].path)
    at.run()
    no_exception(at)
    new = _stored(demo_home)[-1]
    data = _result(demo_home, new["id"])
    assert f"stored as recommendation #{new['id']}" in " ".join(_texts(at.success))
    assert at.selectbox(key="rec-stored").value == new["id"]
    assert data["request"]["constraints"]["gpus"] == ["L4"]
    assert data["request"]["options"]["verify_top"] == 2
    assert data["winner"] is not None and data["winner"]["gpu"] == "L4"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["$ per month"] == f"${data['winner']['monthly_usd']:,.0f}"
    # its rejections, by reason, and filtered to one reason
    reasons = Counter(r["reason"] for r in data["rejected"])
    assert {"misses-ttft", "costlier"} <= set(reasons), reasons
    rejected = _table(at, "detail")
    assert len(rejected) == len(data["rejected"])
    at.multiselect(key="rec-reject-filter").set_value(["screen: misses-ttft"]).run()
    no_exception(at)
    narrowed = _table(at, "detail")
    assert len(narrowed) == reasons["misses-ttft"] < len(rejected)
    assert set(narrowed["reason"]) == {"misses-ttft"}


def test_a_load_scale_of_zero_is_refused_with_a_message(
    demo_home: Path, page: Callable[[str], AppTest]
) -> None:
    before = _stored(demo_home)
    at = page("recommend")
    at.number_input(key="rec-load-scale").set_value(0.0).run()
    at.button(key="rec-run").click().run()
    no_exception(at)
    assert any("the load scale 0: expected a positive number" in e for e in _texts(at.error))
    assert _stored(demo_home) == before  # nothing ran, nothing stored


def test_no_target_is_refused_with_a_message(
    demo_home: Path, page: Callable[[str], AppTest]
) -> None:
    before = _stored(demo_home)
    at = page("recommend")
    # 0 is no target, like an empty field (AppTest cannot empty one)
    at.number_input(key="rec-ttft").set_value(0.0)
    at.number_input(key="rec-tpot").set_value(0.0).run()
    at.button(key="rec-run").click().run()
    no_exception(at)
    assert any("Give at least one P99 target" in e for e in _texts(at.error))
    assert _stored(demo_home) == before


def test_a_budget_nothing_fits_says_why(demo_home: Path, page: Callable[[str], AppTest]) -> None:
    before = _stored(demo_home)
    at = page("recommend")
    _small_search(at)
    at.number_input(key="rec-budget").set_value(10.0).run()
    at.button(key="rec-run").click().run()
    no_exception(at)
    _wait_until(at, lambda at: bool(at.warning))
    assert "no configuration met the targets" in _texts(at.warning)[0]
    # stored like the CLI stores it, without a winner, and shown with the reason
    assert len(_stored(demo_home)) == len(before) + 1
    assert any("over-budget" in e for e in _texts(at.error))
    assert any("costs more than the $10 budget" in i for i in _texts(at.info))
    assert not [d for d in at.dataframe if "Pareto" in d.value.columns]  # nothing simulated


def test_a_forecast_is_planned_with_a_dataset_for_the_lengths(
    demo_home: Path, page: Callable[[str], AppTest]
) -> None:
    before = _stored(demo_home)
    at = page("recommend")
    at.selectbox(key="rec-forecast").select(1)
    at.selectbox(key="rec-dataset").select("demo-azure-conv")
    _small_search(at)
    at.number_input(key="rec-load-scale").set_value(0.001).run()  # 7 days at ~0.03 req/s
    at.button(key="rec-run").click().run()
    no_exception(at)
    _wait_until(at, lambda at: bool(at.success) or bool(at.error))
    assert not at.error, _texts(at.error)
    [new] = [b for b in _stored(demo_home) if b not in before]
    assert new["demand_source"].startswith("forecast #1 at q")
    data = _result(demo_home, new["id"])
    assert data["demand"]["hours"] == 168 and not data["demand"]["replayed"]
    assert f"{data['demand']['source']}: 168 h" in " ".join(_texts(at.caption))


def test_every_model_of_a_log_is_planned_as_a_fleet(
    empty_home: Path, page: Callable[[str], AppTest], tmp_path: Path
) -> None:
    """A gateway log of two models, every model chosen: a background search of a fleet, one
    pool per model, the 70B's own TTFT target taken from the per-model targets."""
    from app.views.recommendations import EVERY_MODEL
    from tests.e2e.test_multi_model_log import ingest, rows

    ingest(empty_home, tmp_path, "multi", rows())
    at = page("recommend")
    at.selectbox(key="rec-dataset").select("multi")
    at.selectbox(key="rec-model").select(EVERY_MODEL)
    at.multiselect(key="rec-gpus").set_value(["H100-SXM"])
    at.multiselect(key="rec-precisions").set_value(["fp8"])
    at.number_input(key="rec-verify-top").set_value(1)
    at.number_input(key="rec-tighten").set_value(0)
    at.number_input(key="rec-confidence").set_value(0.0)
    at.checkbox(key="rec-compare-gpus").uncheck()
    at.checkbox(key="rec-growth-check").uncheck()
    at.text_input(key="rec-size-buckets").input("none")
    at.text_input(key="rec-model-slos").input("llama-3.1-70b:ttft=5s")
    at.selectbox(key="rec-api").select("never")  # a tiny log is cheaper on an API
    at.run()
    at.button(key="rec-run").click().run()
    no_exception(at)
    assert not at.error, _texts(at.error)
    _wait_until(at, lambda at: len(_stored(empty_home)) == 1)
    [brief] = _stored(empty_home)
    data = _result(empty_home, brief["id"])
    assert data["kind"] == "fleet" and data["winner"] is not None
    assert sorted(m for p in data["winner"]["pools"] for m in p["models"]) == [
        "llama-3.1-70b",
        "llama-3.1-8b",
    ]
    targets = data["request"]["targets"]
    assert targets["llama-3.1-70b"]["slos"]["default"]["ttft_s"] == 5.0
    assert targets["llama-3.1-8b"]["slos"]["default"]["ttft_s"] == 2.0


def test_a_disaggregated_search_shows_its_roles_and_transfer(
    demo_home: Path, page: Callable[[str], AppTest]
) -> None:
    before = _stored(demo_home)
    at = page("recommend")
    at.selectbox(key="rec-dataset").select("demo-azure-conv")
    at.selectbox(key="rec-disaggregation").select("only")
    _small_search(at)
    at.button(key="rec-run").click().run()
    no_exception(at)
    _wait_until(at, lambda at: len(_stored(demo_home)) == len(before) + 1)
    at.run()
    no_exception(at)
    data = _result(demo_home, _stored(demo_home)[-1]["id"])
    winner = data["winner"]
    assert data["request"]["options"]["disaggregation"] == "only"
    assert winner is not None and winner["architecture"] == "disaggregated"
    text = " ".join(_texts(at.markdown))
    assert "**Disaggregated**" in text and winner["kv_link"] in text
    roles = _table(at, "role")
    assert list(roles["role"]) == ["prefill", "decode"]
    assert roles["$ per month"].sum() == pytest.approx(winner["monthly_usd"])
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["$ per month"] == f"${winner['monthly_usd']:,.0f}"
    # Deploy it: NVIDIA Dynamo's graph is offered for a prefill/decode winner
    assert TARGET_LABELS["dynamo"] in at.selectbox(key="rec-deploy-target").options


def test_the_api_comparison_and_its_chart(demo_home: Path, page: Callable[[str], AppTest]) -> None:
    [brief] = _stored(demo_home)[:1]
    data = _result(demo_home, brief["id"])
    api = data["api"]  # the demo's model, llama-3.1-8b, has per-token offers
    at = page("recommend")
    no_exception(at)
    text = " ".join(_texts(at.markdown))
    assert f"{api['offer']['provider']} {api['offer']['offer']}" in text
    assert f"${api['api_monthly_usd']:,.0f}" in text and f"**{api['choice']}**" in text
    [chart] = [c for c in _charts(at) if "mean requests/s" in json.dumps(c["layout"])]
    names = [t.get("name", "") for t in chart["data"]]
    assert any(n.startswith("API:") for n in names) and any("self-hosted" in n for n in names)
