"""The dashboard's entry script (``planner dashboard`` runs it with ``streamlit run``)."""

from __future__ import annotations

import streamlit as st

from app.common import ADMIN_PAGES, PAGES, answer_unknown_page, store_url
from app.signin import current_actor, signed_in_box
from planner import __version__
from planner.access import Role, acting_as
from planner.common.secrets import redact_url

st.set_page_config(page_title="planner", page_icon=":material/dns:", layout="wide")

# Who this run acts for: a visitor who is not signed in (or has no role) sees the sign-in page
# and nothing of the store.
actor = current_actor()
if actor is None:
    st.stop()
assert actor is not None and actor.role is not None

shown = tuple(key for key in PAGES if key not in ADMIN_PAGES or actor.role >= Role.ADMIN)
groups: dict[str, list[st.Page]] = {}
for key in shown:
    info = PAGES[key]
    groups.setdefault(info.group, []).append(
        st.Page(info.path, title=info.title, icon=info.icon, default=key == "overview")
    )
navigation = st.navigation(groups)
answer_unknown_page(shown)  # a URL naming no page says so, not the Overview
with st.sidebar:
    signed_in_box(actor)
    # which store every page reads (a password in the URL is never shown)
    st.caption(f"planner {__version__} · store `{redact_url(store_url(), 120)}`")
# every use case a page calls acts for this identity, and refuses what its role may not do
with acting_as(actor):
    navigation.run()
