"""The Reports and Benchmarks & calibration pages: until their capabilities land they say
which will fill them, and offer what exists (a recommendation's JSON and tables; the bundled
and stored calibration profiles with their stated errors)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

from planner.latency.profile import Profile, load_bundled_profiles
from planner.recommend.store import list_briefs, load_recommendation
from planner.recommend.tables import result_tables
from planner.store import CalibrationProfile, open_store
from tests.dashboard.conftest import no_exception


def _texts(elements: Iterable[Any]) -> str:
    return " ".join(str(e.value) for e in elements)


def test_reports_on_an_empty_store_says_what_will_fill_it(
    empty_home: Path, page: Callable[[str], AppTest]
) -> None:
    at = page("reports")
    no_exception(at)
    said = _texts(at.info)
    assert "issue 14" in said and "planner report" in said and "FOCUS CSV" in said
    assert "No stored recommendations in the store yet" in said
    assert not at.get("download_button")


def test_reports_offers_a_stored_recommendation_as_json_and_csv(
    demo_home: Path, page: Callable[[str], AppTest]
) -> None:
    url = f"sqlite:///{demo_home / 'planner.db'}"
    with open_store(url) as store, store.session() as session:
        [brief] = list_briefs(session)
        data = load_recommendation(session, brief["id"]).result
    tables = {name: frame for name, frame in result_tables(data).items() if not frame.empty}
    at = page("reports")
    no_exception(at)
    assert at.selectbox(key="reports-recommendation").value == brief["id"]
    shown = _texts(at.markdown)
    assert f"**Rejected**: {len(data['rejected']):,} rows" in shown
    assert f"**Alternatives**: {len(data['ranked']):,} rows" in shown
    # the whole JSON, and a CSV and a JSON of every table that has rows
    assert len(at.get("download_button")) == 1 + 2 * len(tables)


def test_benchmarks_lists_the_bundled_profiles_and_hints_at_calibrate(
    empty_home: Path, page: Callable[[str], AppTest]
) -> None:
    at = page("bench")
    no_exception(at)
    said = _texts(at.info)
    assert "issue 15" in said and "planner calibrate" in said
    bundled = load_bundled_profiles()
    [table] = [d.value for d in at.dataframe if "held-out MAPE" in d.value.columns]
    assert list(table["profile"]) == [p.name for p in bundled]
    assert list(table["engine"]) == [p.engine for p in bundled]
    [params] = [d.value for d in at.dataframe if "compute_eff" in d.value.columns]
    assert list(params["compute_eff"]) == [p.compute_eff for p in bundled]


def test_benchmarks_lists_profiles_fitted_into_the_store(
    empty_home: Path, page: Callable[[str], AppTest]
) -> None:
    fitted = Profile("my-h100", engine="trtllm", gpu="H100-SXM", compute_eff=0.61)
    url = f"sqlite:///{empty_home / 'planner.db'}"
    with open_store(url) as store, store.session() as session:
        session.add(
            CalibrationProfile(
                name=fitted.name,
                engine=fitted.engine,
                gpu=fitted.gpu,
                params=fitted.params(),
                report={"points": 12, "heldout_test": {"points": 4, "mape": 0.125}},
                sources=["measurements.csv"],
            )
        )
    at = page("bench")
    no_exception(at)
    assert "No profile fitted into this store yet" not in _texts(at.info)
    [stored] = [
        d.value for d in at.dataframe if "fitted at" in d.value.columns and len(d.value) == 1
    ]
    assert stored.loc[0, "profile"] == "my-h100"
    assert stored.loc[0, "GPU"] == "H100-SXM"
    assert stored.loc[0, "held-out MAPE"] == 0.125
    assert stored.loc[0, "sources"] == "measurements.csv"
