"""The dashboard's entry script (``planner dashboard`` runs it with ``streamlit run``)."""

from __future__ import annotations

import streamlit as st

from app.common import PAGES

st.set_page_config(page_title="planner", page_icon=":material/dns:", layout="wide")

groups: dict[str, list[st.Page]] = {}
for key, info in PAGES.items():
    groups.setdefault(info.group, []).append(
        st.Page(info.path, title=info.title, icon=info.icon, default=key == "overview")
    )
st.navigation(groups).run()
