"""Error bars on the dashboard: the Recommendations page's confidence margin (a small search at
90% confidence from the page, its P99 intervals beside the simulated P99s, the error groups and
the margin's monthly cost) and the What-if page's P99 intervals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.dashboard.conftest import no_exception
from tests.dashboard.test_recommendations_page import (
    _result,
    _small_search,
    _stored,
    _table,
    _texts,
    _wait_until,
)
from tests.dashboard.test_whatif_page import LOAD_SCALE, Page
from tests.dashboard.test_whatif_page import _run as _run_whatif
from tests.dashboard.test_whatif_page import _table as _whatif_table

FIXTURE = Path(__file__).parent.parent / "fixtures" / "accuracy_sample.json"


def test_a_search_at_90_percent_shows_intervals_and_margin_cost(
    demo_home: Path, page: Callable[[str], AppTest], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANNER_ACCURACY", str(FIXTURE))
    before = _stored(demo_home)
    at = page("recommend")
    assert at.number_input(key="rec-confidence").value == 0.9  # the default
    at.selectbox(key="rec-dataset").select("demo-azure-conv")
    _small_search(at)
    at.button(key="rec-run").click().run()
    no_exception(at)
    assert not at.error, _texts(at.error)
    _wait_until(at, lambda at: len(_stored(demo_home)) == len(before) + 1)
    at.run()
    no_exception(at)
    data = _result(demo_home, _stored(demo_home)[-1]["id"])
    conf = data["confidence"]
    assert conf["level"] == 0.9 and data["request"]["options"]["confidence"] == 0.9
    table = _table(at, "upper bound at 90%")
    row = table[table["target"] == "P99 TTFT"].iloc[0]
    ttft = conf["targets"]["ttft"]
    assert row["upper bound at 90%"] == f"{ttft['upper_s'] * 1e3:,.0f} ms"
    assert row["P99 (simulated)"] == f"{ttft['point_p99_s'] * 1e3:,.0f} ms"
    assert row["error group"].startswith(ttft["error_group"]["group"])
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Margin cost per month"] == f"${conf['margin_usd_per_month']:,.0f}"


def test_a_what_if_shows_each_p99_with_its_interval(demo_home: Path, page: Page) -> None:
    at = page("whatif")
    at.number_input(key="whatif-load-scale").set_value(LOAD_SCALE).run()
    _run_whatif(at)
    assert not at.error
    table = _whatif_table(at, "P99 90% high (ms)").set_index("latency")
    for label in ("TTFT", "TPOT", "E2E"):
        row = {str(k): float(v) for k, v in table.loc[label].to_dict().items()}
        low, p99, high = (row[c] for c in ("P99 90% low (ms)", "P99 (ms)", "P99 90% high (ms)"))
        assert low < p99 < high
