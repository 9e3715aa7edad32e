"""Audit trail (admins): who uploaded, imported, ran, exported or deleted what, and when; the
same rows ``planner audit`` prints, downloadable as CSV."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import common
from planner.usecases.audit import (
    ACTION_KEYS,
    AUDIT_COLUMNS,
    TRAIL_MAX,
    AuditRequest,
    audit_csv,
    audit_trail,
)

st.title("Audit trail")
st.caption(
    "Every upload, price import, forecast, stored search, benchmark, report export, "
    "calibration and deletion, by whom and when (newest first). What-if runs change nothing "
    "and are not listed. Times are UTC."
)
left, middle, right = st.columns([2, 2, 1])
who = left.text_input("Who (e-mail or user name, exactly)", key="audit-actor").strip()
action = middle.selectbox("Action", ["all", *ACTION_KEYS], key="audit-action")
limit = int(right.number_input("Rows", 1, TRAIL_MAX, 500, step=100, key="audit-limit"))
with common.shown_errors():
    entries = audit_trail(
        AuditRequest(limit=limit, actor=who or None, action=None if action == "all" else action),
        common.session,
    )
    if not entries:
        st.info("Nothing recorded yet with these filters.")
    else:
        frame = pd.DataFrame(
            [[getattr(e, c) for c in AUDIT_COLUMNS] for e in entries], columns=list(AUDIT_COLUMNS)
        )
        frame["at"] = frame["at"].map(lambda t: t.strftime("%Y-%m-%d %H:%M:%S"))
        st.dataframe(frame, hide_index=True, width="stretch")
        st.download_button(
            "Download as CSV",
            audit_csv(entries),
            file_name="planner-audit.csv",
            mime="text/csv",
            key="audit-download",
            icon=":material/download:",
        )
