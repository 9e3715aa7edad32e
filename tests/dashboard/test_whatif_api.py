"""The What-if page's "API behind the fleet" (``planner simulate --api-overflow-queue``): off by
default; on, the run takes the settings the page shows and its result gives the numbers the
library gives for the same what-if: the API's share, requests, tokens, what its rate limit sent
back and its cost."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from planner.demo import DATASET
from planner.simulate.inputs import ApiOverflow, DemandSource, FleetSettings, WhatIf
from tests.dashboard.test_whatif_page import (
    L4_8B,
    LOAD_SCALE,
    TARGETS,
    Page,
    _library,
    _run,
    _runs,
    _sheet_prices,
)


@pytest.fixture(autouse=True)
def _run_files_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_the_api_is_off_by_default(demo_home: Path, page: Page) -> None:
    at = page("whatif")
    at.number_input(key="whatif-load-scale").set_value(LOAD_SCALE).run()
    assert at.toggle(key="whatif-api").value is False
    assert not [w for w in at.number_input if w.key == "whatif-api-queue"]
    _run(at)
    [run] = _runs(at)
    assert "api" not in run["result"]["summary"]
    assert run["result"]["fleet"]["overflowed"] == 0
    assert not [m for m in at.metric if m.label == "API share of requests"]


def test_an_api_behind_the_fleet_shows_its_share_as_simulate_gives_it(
    demo_home: Path, page: Page
) -> None:
    at = page("whatif")
    at.number_input(key="whatif-load-scale").set_value(LOAD_SCALE).run()
    at.toggle(key="whatif-api").set_value(True).run()
    at.number_input(key="whatif-api-queue").set_value(0).run()  # every arrival, as limits allow
    at.number_input(key="whatif-api-rpm").set_value(20.0).run()
    offers = at.selectbox(key="whatif-api-price").options
    assert offers[0] == "Not priced" and len(offers) > 1
    offer = offers[1]
    at.selectbox(key="whatif-api-price").select(offer).run()
    _run(at)
    assert not at.error, [e.value for e in at.error]
    api = ApiOverflow(queue=0, ttft_s=0.5, tpot_s=0.012, rpm=20.0, price=offer)
    expected = _library(
        WhatIf(
            serving=L4_8B,
            demand=DemandSource(dataset=DATASET, load_scale=LOAD_SCALE),
            fleet=FleetSettings(api=api),
            prices=_sheet_prices(),
            slo=TARGETS,
        )
    )
    [run] = _runs(at)
    assert run["result"]["summary"] == expected.summary
    shown_api = expected.summary["api"]
    # the rate limit caps what the API takes; the rest waited on the replica
    assert 0 < shown_api["requests"] < expected.requests
    assert shown_api["rate_limited"] > 0
    assert shown_api["cost_usd"] > 0
    shown = {m.label: m.value for m in at.metric}
    assert shown["API share of requests"] == f"{shown_api['share']:.1%}"
    assert shown["API requests"] == f"{shown_api['requests']:,}"
    assert shown["Sent back by its rate limit"] == f"{shown_api['rate_limited']:,}"
    assert shown["API cost"] == f"${shown_api['cost_usd']:,.2f}"
    assert "at 0 per replica" in run["settings"]["API behind the fleet"]
