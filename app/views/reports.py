"""Reports: a placeholder until the report capability (issue 14) lands. Until then it offers
what exists: a stored recommendation's whole JSON and its tables as CSV."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app import common
from planner.recommend.store import list_briefs, load_recommendation
from planner.recommend.tables import result_tables


@st.cache_data(show_spinner=False)
def _stored(url: str, version: str) -> list[dict[str, Any]]:
    with common.session() as session:
        return list_briefs(session)


@st.cache_data(show_spinner=False)
def _result(url: str, version: str, recommendation_id: int) -> dict[str, Any]:
    with common.session() as session:
        result: dict[str, Any] = load_recommendation(session, recommendation_id).result
        return result


def _label(brief: dict[str, Any]) -> str:
    cost = f"${brief['monthly_usd']:,.0f}/month" if brief["monthly_usd"] is not None else "-"
    created = brief["created_at"][:16].replace("T", " ")
    winner = brief["winner"] or "none met the targets"
    return f"#{brief['id']} · {created} · {brief['model']} · {winner} · {cost}"


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
    stored = _stored(url, version)
    if not stored:
        common.empty_store_hint("stored recommendations")
        common.link("recommend", "Find a fleet on the Recommendations page")
        return
    by_id = {b["id"]: b for b in stored}
    chosen = st.selectbox(
        "Stored recommendation",
        list(by_id),
        index=len(by_id) - 1,  # the newest
        format_func=lambda i: _label(by_id[i]),
        key="reports-recommendation",
    )
    data = _result(url, version, chosen)
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
