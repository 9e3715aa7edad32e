"""The dashboard's entry script (``planner dashboard`` runs it with ``streamlit run``)."""

from __future__ import annotations

import streamlit as st

from app.common import PAGES, store_url
from planner import __version__
from planner.common.secrets import redact_url

st.set_page_config(page_title="planner", page_icon=":material/dns:", layout="wide")

groups: dict[str, list[st.Page]] = {}
for key, info in PAGES.items():
    groups.setdefault(info.group, []).append(
        st.Page(info.path, title=info.title, icon=info.icon, default=key == "overview")
    )
navigation = st.navigation(groups)
with st.sidebar:
    # which store every page reads (a password in the URL is never shown)
    st.caption(f"planner {__version__} · store `{redact_url(store_url(), 120)}`")
navigation.run()
