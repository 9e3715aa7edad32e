"""Benchmarks & calibration: a placeholder until the benchmark harness and the calibration loop
(issue 15) land. Until then it shows what exists: the calibration profiles the latency model
uses (bundled with planner, and fitted into the store by ``planner calibrate``) with their
stated errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import select

from app import common
from planner.latency.profile import bundled_profiles_path, load_bundled_profiles
from planner.store.models import CalibrationProfile

CALIBRATE_HINT = (
    "planner calibrate data/reference/published_latency.csv --name my-h100 --engine trtllm "
    "--gpu H100-SXM"
)


def _errors(summary: dict[str, Any] | None) -> dict[str, Any]:
    """A fit's stated error on its held-out points (the measurements it was not fitted to)."""
    summary = summary or {}
    return {
        "held-out points": summary.get("points"),
        "held-out MAPE": summary.get("mape"),
        "held-out median APE": summary.get("median_ape"),
        "held-out worst APE": summary.get("worst_ape"),
        "worst point": summary.get("worst_point"),
    }


@st.cache_data(show_spinner=False)
def _bundled(path: str, modified_ns: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The bundled profiles (checked by the loader the latency model uses) with the fit report
    stored beside each in the same file: (profiles and errors, fitted parameters)."""
    profiles = load_bundled_profiles(Path(path))
    entries = json.loads(Path(path).read_text(encoding="utf-8"))["profiles"]
    reports = {e["profile"]["name"]: e for e in entries}
    rows, params = [], []
    for profile in profiles:
        entry = reports.get(profile.name, {})
        rows.append(
            {
                "profile": profile.name,
                "engine": profile.engine,
                "GPU": profile.gpu or "any",
                "fitted on": entry.get("fitted_at"),
                "points": entry.get("points"),
                **_errors(entry.get("heldout_test")),
                "after-fit MAPE (all points)": (entry.get("after_all") or {}).get("mape"),
                "parameters at a bound": ", ".join(entry.get("at_bound", [])) or "-",
                "sources": ", ".join(entry.get("sources", [])),
            }
        )
        params.append({"profile": profile.name, **profile.params()})
    return pd.DataFrame(rows), pd.DataFrame(params)


@st.cache_data(show_spinner=False)
def _stored(url: str, version: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Profiles fitted into the store (``planner calibrate``): they win over bundled ones of
    the same GPU and engine."""
    with common.session() as session:
        found = list(
            session.scalars(
                select(CalibrationProfile).order_by(CalibrationProfile.created_at.desc())
            )
        )
        rows = [
            {
                "profile": p.name,
                "engine": p.engine,
                "GPU": p.gpu or "any",
                "fitted at": p.created_at,
                "points": (p.report or {}).get("points"),
                **_errors((p.report or {}).get("heldout_test")),
                "after-fit MAPE (all points)": ((p.report or {}).get("after_all") or {}).get(
                    "mape"
                ),
                "sources": ", ".join(p.sources or []),
            }
            for p in found
        ]
        params = [{"profile": p.name, **(p.params or {})} for p in found]
    return pd.DataFrame(rows), pd.DataFrame(params)


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
