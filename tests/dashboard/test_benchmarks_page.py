"""The Benchmarks & calibration page: until the benchmark harness lands it says what will fill
it, and offers what exists (the bundled and stored calibration profiles with their stated
errors)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

from planner.latency.profile import Profile, load_bundled_profiles
from planner.store import CalibrationProfile, open_store
from tests.dashboard.conftest import no_exception


def _texts(elements: Iterable[Any]) -> str:
    return " ".join(str(e.value) for e in elements)


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
