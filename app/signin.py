"""Sign-in for a shared dashboard: Streamlit's OpenID Connect (``st.login`` / ``st.user``) and
planner's roles.

``planner dashboard --auth-config FILE`` hands Streamlit the file's [auth] settings and names the
file in ``PLANNER_AUTH_CONFIG``; then every script run first finds who is signed in and their
role, and a visitor who is not signed in, or has no role, sees no data. Without that variable
the dashboard is the local user's (loopback, or ``--no-auth``), who holds every role.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import streamlit as st

from planner.access import (
    AUTH_CONFIG_ENV,
    NOBODY,
    Actor,
    AuthConfig,
    Role,
    actor_for,
    local_user,
    read_auth_config,
)
from planner.errors import PlannerError

ACTOR_KEY = "planner-actor"  # the run's identity, for fragments (they rerun without main.py)


def auth_path() -> Path | None:
    named = os.environ.get(AUTH_CONFIG_ENV)
    return Path(named) if named else None


@st.cache_resource(show_spinner=False)
def _config(path: str, modified_ns: int) -> AuthConfig:
    """The checked settings, read again when the file changes (roles edited by an admin)."""
    return read_auth_config(Path(path))


def auth_config() -> AuthConfig | None:
    path = auth_path()
    if path is None:
        return None
    return _config(str(path), path.stat().st_mtime_ns)


def _sign_in_page(config: AuthConfig) -> None:
    st.title("planner")
    st.markdown(
        "This planner is shared by a team: sign in to see its request logs, forecasts, prices "
        "and recommendations."
    )
    if not config.providers:
        st.button("Sign in", type="primary", on_click=st.login, icon=":material/login:")
        return
    for name in config.providers:
        st.button(
            f"Sign in with {name}",
            key=f"sign-in-{name}",
            type="primary",
            on_click=st.login,
            args=(name,),
            icon=":material/login:",
        )


def _no_role_page(actor: Actor) -> None:
    st.title("planner")
    st.warning(
        f"You are signed in as **{actor.name}**, but this planner has given you no role yet. "
        "Ask an admin to add your e-mail address or one of your groups to the dashboard's "
        "sign-in settings ([planner.roles])."
    )
    st.button("Sign out", on_click=st.logout, icon=":material/logout:")


def current_actor() -> Actor | None:
    """Who this run acts for, or None when the page must show nothing else (the sign-in page
    or the no-role page is shown instead)."""
    try:
        config = auth_config()
    except (PlannerError, OSError) as exc:
        st.error(f"The dashboard's sign-in settings cannot be read: {exc}")
        return None
    if config is None:
        actor = local_user()
    elif not st.user.is_logged_in:
        _sign_in_page(config)
        return None
    else:
        claims: dict[str, Any] = st.user.to_dict()
        actor = actor_for(claims, config.roles)
        if actor.role is None:
            _no_role_page(actor)
            return None
    st.session_state[ACTOR_KEY] = actor
    return actor


def signed_in_box(actor: Actor) -> None:
    """The sidebar's line on who is signed in, with the sign-out button."""
    if actor.via != "sign-in":
        return
    assert actor.role is not None
    st.caption(f"Signed in as **{actor.name}** ({actor.role.label})")
    if actor.role is Role.VIEWER:
        st.caption(
            "Viewers read every page and download reports; uploads, price imports, forecasts, "
            "searches and what-ifs need the planner role."
        )
    st.button("Sign out", key="sign-out", on_click=st.logout, icon=":material/logout:")


def run_actor() -> Actor:
    """This session's identity, set by the last full run (fragments and downloads run
    without main.py); nobody before one."""
    actor: Actor | None = st.session_state.get(ACTOR_KEY)
    return actor if actor is not None else NOBODY
