"""Reports: a placeholder until the report capability (issue 14) lands. Until then it offers
what exists: a stored recommendation's whole JSON and its tables as CSV."""

from __future__ import annotations

import streamlit as st

from app import common
from planner.recommend.tables import result_tables


def _page() -> None:
    st.title("Reports")
    st.info(
        "Reports for finance and capacity reviews (Excel and PDF, a FOCUS CSV of the planned "
        "spend, and plan against actual spend) come with the reporting capability (issue 14), "
        "with a `planner report` command beside them. Until then, this page offers what "
        "exists: a stored recommendation as JSON and its tables as CSV.",
        icon=":material/construction:",
    )
    url, version = common.store_url(), common.version()
    stored = common.stored_recommendations(url, version)
    if not stored:
        common.empty_store_hint("stored recommendations")
        common.link("recommend", "Find a fleet on the Recommendations page")
        return
    by_id = {b["id"]: b for b in stored}
    chosen = st.selectbox(
        "Stored recommendation",
        list(by_id),
        index=len(by_id) - 1,  # the newest
        format_func=lambda i: common.recommendation_label(by_id[i]),
        key="reports-recommendation",
    )
    data = common.stored_recommendation(url, version, chosen)
    name = f"recommendation-{chosen}"
    st.markdown("**The whole result** (targets, constraints, winner, plan, every candidate)")
    common.download_json(data, name, key="reports-json")
    try:
        frames = result_tables(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        st.error(
            f"Recommendation #{chosen} is stored in a form this planner cannot read as tables "
            f"({type(exc).__name__}: {exc}); its JSON above is as stored.",
            icon=":material/error:",
        )
        return
    for table, frame in frames.items():
        if frame.empty:
            continue
        st.markdown(f"**{table.replace('-', ' ').capitalize()}**: {len(frame):,} rows")
        common.download_table(frame, f"{name}-{table}", key=f"reports-{table}")
    common.link("recommend", "See it on the Recommendations page")


with common.shown_errors():
    _page()
