"""Reports' fixtures: a small hand-made :class:`Report` that follows the contract in
``planner.report.model`` (for the writers' tests, independent of the model's arithmetic)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

import pandas as pd
import pytest

from planner.report.model import (
    ASSUMPTION_COLUMNS,
    COMMITMENT_COLUMNS,
    PROJECTION_COLUMNS,
    SENSITIVITY_COLUMNS,
    Report,
)

if TYPE_CHECKING:
    from planner.usecases.report import ReportRequest

COMMITTED_RATE = 0.444  # $/instance-hour, committed-3y g2-standard-4 (no upfront)
ON_DEMAND_RATE = 0.7045
HOURS = {1: 744, 2: 672, 3: 744, 4: 720, 5: 744, 6: 720, 7: 744, 8: 744, 9: 720, 10: 744}


def _month(i: int) -> date:
    return date(2027 + (i // 12), i % 12 + 1, 1)


def example_report() -> Report:
    rows: list[tuple[object, ...]] = []
    for i in range(12):
        month = _month(i)
        hours = HOURS.get(month.month, 730 if month.month in (11, 12) else 744)
        for scenario, extra in (("low", 0.5), ("expected", 1.0), ("high", 2.0)):
            committed = 7.0 * hours
            on_demand = extra * 0.4 * hours
            upfront = 1000.0 if i == 0 else 0.0
            rows.append(
                (month, scenario, "gcp", "us-east4", "g2-standard-4", "committed-3y",
                 committed, committed * COMMITTED_RATE + upfront,
                 committed * COMMITTED_RATE + 1000.0 / 36, upfront, 3.2e3 * (1 + extra))
            )  # fmt: skip
            rows.append(
                (month, scenario, "gcp", "us-east4", "g2-standard-4", "on-demand",
                 on_demand, on_demand * ON_DEMAND_RATE, on_demand * ON_DEMAND_RATE, 0.0,
                 200.0 * extra)
            )  # fmt: skip
    projection = pd.DataFrame(rows, columns=list(PROJECTION_COLUMNS))
    commitments = pd.DataFrame(
        [
            ("committed-3y", "gcp", "us-east4", "g2-standard-4", 3, date(2027, 1, 1),
             date(2030, 1, 1), 7, 7 * COMMITTED_RATE, 1000.0, 0.63, 0.962, 0.94, 86.4)
        ],
        columns=list(COMMITMENT_COLUMNS),
    )  # fmt: skip
    sensitivity = pd.DataFrame(
        [
            ("load", "load -20%", 0.8, 1620.0, 1540.0, "committed-3y x 6"),
            ("load", "load +20%", 1.2, 2370.0, 2175.0, "committed-3y x 9"),
            (
                "spot_interruptions",
                "spot interruptions x2",
                2.0,
                1828.0,
                1828.0,
                "committed-3y x 7",
            ),
            ("price", "prices +10%", 1.1, 2010.8, 2010.8, "committed-3y x 7"),
        ],
        columns=list(SENSITIVITY_COLUMNS),
    )
    assumptions = pd.DataFrame(
        [
            ("price sheet", "bundled snapshot v1 (2026-11-15)", "data/prices/snapshot"),
            ("calibration profile", "trtllm-default, held-out median error 9.0%", "profiles.json"),
            ("forecast", "Prophet MAPE 21.5% vs baseline 23.0%", "forecast #1"),
            ("planner version", "0.1.0", "planner"),
        ],
        columns=list(ASSUMPTION_COLUMNS),
    )
    return Report(
        recommendation_id=1,
        title="GPU fleet plan: llama-3.1-8b on gcp/us-east4/g2-standard-4",
        built_at=datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
        planner_version="0.1.0",
        currency="USD",
        summary={
            "monthly_usd": 1828.21,
            "on_demand_monthly_usd": 3670.50,
            "savings_vs_on_demand_usd": 1842.29,
            "savings_vs_on_demand_pct": 0.502,
            "current_fleet_monthly_usd": None,
            "savings_vs_current_usd": None,
            "savings_vs_current_pct": None,
            "usd_per_million_tokens": 0.0253,
            "slo_attainment": 0.9992,
            "p99_ttft_ms": 1083.0,
            "p99_tpot_ms": 120.0,
            "p99_e2e_ms": 52300.0,
            "target_ttft_ms": 2000.0,
            "target_tpot_ms": 200.0,
            "target_e2e_ms": None,
            "fleet": "gcp/us-east4/g2-standard-4, 1 x L4, llama-3.1-8b fp8, TP 1",
            "purchase": "committed-3y for 7 instances, the rest on demand",
            "peak_instances": 9,
            "mean_instances": 7.1,
            "first_month": date(2027, 1, 1),
            "months": 12,
        },
        key_assumptions=[
            "Load follows forecast #1 at its 90th percentile, repeated week by week.",
            "Prices are the bundled price sheet of 2026-11-15; they do not change.",
        ],
        projection=projection,
        commitments=commitments,
        sensitivity=sensitivity,
        assumptions=assumptions,
    )


@pytest.fixture
def report() -> Report:
    return example_report()


# --- real reports from the demo store (loaded once a session: it takes seconds) ----------------


@pytest.fixture(scope="session")
def demo_store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A demo store (``load_demo(quick=True)``) the report tests read and never write."""
    from planner.demo import load_demo

    url = f"sqlite:///{tmp_path_factory.mktemp('report-demo') / 'planner.db'}"
    load_demo(url, quick=True)
    without_api(url)
    return url


def without_api(url: str, recommendation_id: int = 1) -> None:
    """Drop the stored recommendation's ``api`` block, as ``recommend --api never`` stores it:
    the demo's recommendation may buy API traffic (the API or an overflow plan cheaper than
    self-hosting), and the fleet's own arithmetic is what these tests check
    (tests/report/test_api_report.py checks the API's rows)."""
    from planner.store.db import open_store
    from planner.store.recommendations import load_recommendation

    store = open_store(url)
    try:
        with store.session() as session:
            run = load_recommendation(session, recommendation_id)
            run.result = {k: v for k, v in run.result.items() if k != "api"}
    finally:
        store.engine.dispose()


def report_from(url: str, request: ReportRequest) -> Report:
    """The report ``request`` asks for, built from the store at ``url``."""
    from contextlib import nullcontext

    from planner.store.db import open_store
    from planner.usecases.report import build_report

    store = open_store(url)
    try:
        with store.session() as session:
            return build_report(request, lambda: nullcontext(session))
    finally:
        store.engine.dispose()


@pytest.fixture(scope="session")
def focus_demo_report(demo_store_url: str) -> Report:
    """The demo's recommendation #1 from January 2027: what the FOCUS tests check."""
    from planner.usecases.report import ReportRequest

    return report_from(demo_store_url, ReportRequest(1, first_month=date(2027, 1, 1)))
