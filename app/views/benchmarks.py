"""Benchmarks & calibration: a placeholder until the benchmark harness and the calibration loop
(issue 15) land. Until then it shows what exists: the calibration profiles the latency model
uses (bundled with planner, and fitted into the store by ``planner calibrate``) with their
stated errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from app import common
from planner.latency.profile import Profile, bundled_profiles_path, load_bundled_profiles
from planner.latency.registry import profile_accuracy, stored_profiles

CALIBRATE_HINT = (
    "planner calibrate data/reference/published_latency.csv --name my-h100 --engine trtllm "
    "--gpu H100-SXM"
)


def _row(profile: Profile, accuracy: dict[str, Any] | None) -> dict[str, Any]:
    """A profile with the error its fit states on the points it was not fitted to."""
    accuracy = accuracy or {}
    heldout = accuracy.get("heldout_test") or {}
    return {
        "profile": profile.name,
        "engine": profile.engine,
        "GPU": profile.gpu or "any",
        "fitted at": accuracy.get("fitted_at"),
        "points": accuracy.get("points"),
        "held-out points": heldout.get("points"),
        "held-out MAPE": heldout.get("mape"),
        "held-out median APE": heldout.get("median_ape"),
        "held-out worst APE": heldout.get("worst_ape"),
        "worst point": heldout.get("worst_point"),
        "after-fit MAPE (all points)": (accuracy.get("after_all") or {}).get("mape"),
        "sources": ", ".join(accuracy.get("sources") or []),
    }


def _tables(
    profiles: list[Profile], accuracy: Callable[[Profile], dict[str, Any] | None]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(profiles and their stated errors, fitted parameters)."""
    return (
        pd.DataFrame([_row(p, accuracy(p)) for p in profiles]),
        pd.DataFrame([{"profile": p.name, **p.params()} for p in profiles]),
    )


@st.cache_data(show_spinner=False)
def _bundled(path: str, modified_ns: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The profiles bundled with planner (``data/calibration``), as the latency model loads
    them (cached on the file's modification time)."""
    return _tables(load_bundled_profiles(Path(path)), lambda p: profile_accuracy(None, p))


@st.cache_data(show_spinner=False)
def _stored(url: str, version: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Profiles fitted into the store (``planner calibrate``), newest first."""
    with common.session() as session:
        return _tables(stored_profiles(session), lambda p: profile_accuracy(session, p))


PERCENT = st.column_config.NumberColumn(format="percent")
ERROR_COLUMNS = {
    "held-out MAPE": PERCENT,
    "held-out median APE": PERCENT,
    "held-out worst APE": PERCENT,
    "after-fit MAPE (all points)": PERCENT,
}


def _page() -> None:
    st.title("Benchmarks & calibration")
    st.info(
        "The benchmark harness and the calibration loop (run a deployment under load, fit the "
        "latency model to what it measured, compare predictions with measurements) come with "
        "issue 15 and will fill this page. Until then, it shows what exists: the calibration "
        "profiles the latency model uses, with the errors their fits state.",
        icon=":material/construction:",
    )

    st.subheader("Bundled profiles")
    st.caption(
        "Fitted on published measurements; a held-out error is measured on points the fit "
        "did not see. A profile for a GPU wins over its engine's GPU-independent one."
    )
    path = bundled_profiles_path()
    if not path.exists():
        st.warning(f"No bundled profiles file at {path}.", icon=":material/warning:")
    else:
        profiles, params = _bundled(str(path), path.stat().st_mtime_ns)
        st.dataframe(profiles, hide_index=True, column_config=ERROR_COLUMNS, key="bench-bundled")
        common.download_table(profiles, "bundled-profiles", key="bench-bundled-dl")
        with st.expander("Fitted parameters of the bundled profiles"):
            st.dataframe(params, hide_index=True, key="bench-bundled-params")
            common.download_table(params, "bundled-profile-parameters", key="bench-params-dl")

    st.subheader("Profiles fitted into this store")
    stored, stored_params = _stored(common.store_url(), common.version())
    if stored.empty:
        st.info(
            "No profile fitted into this store yet. Fit one to your own measurements with "
            f"`planner calibrate` (it states the fit's error before storing it), e.g.\n\n"
            f"`{CALIBRATE_HINT}`",
            icon=":material/info:",
        )
    else:
        st.caption("They win over bundled profiles of the same GPU and engine.")
        st.dataframe(stored, hide_index=True, column_config=ERROR_COLUMNS, key="bench-stored")
        common.download_table(stored, "stored-profiles", key="bench-stored-dl")
        with st.expander("Fitted parameters of the stored profiles"):
            st.dataframe(stored_params, hide_index=True, key="bench-stored-params")
            common.download_table(
                stored_params, "stored-profile-parameters", key="bench-stored-params-dl"
            )

    st.caption(
        "Speed benchmarks of the planner itself (ingest, forecast, latency model, simulator, "
        "recommender, dashboard) are the scripts in `benchmarks/`; their results are in "
        "`docs/benchmarks.md`."
    )


with common.shown_errors():
    _page()
