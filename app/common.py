"""What every dashboard page shares: the store and caching keyed on its contents, errors shown
as messages (never a traceback), downloads for tables, and the chart conventions (one colour
per provider and purchase option, units on axes, SLO lines).

Pages call the library the CLI calls; nothing here computes a planning result.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from planner.common.colours import PROVIDER_COLOURS as PROVIDER_COLOURS
from planner.common.colours import PURCHASE_COLOURS as PURCHASE_COLOURS
from planner.common.colours import SLO_COLOUR
from planner.common.csvsafe import csv_bytes
from planner.config import UPLOAD_LIMIT_MB as UPLOAD_LIMIT_MB  # pages show the server's limit
from planner.config import database_url
from planner.errors import PlannerError
from planner.store import Store, open_store
from planner.store.queries import contents_version

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


@dataclass(frozen=True)
class PageInfo:
    path: str  # relative to app/, as st.Page and st.page_link take it
    title: str
    icon: str
    group: str


PAGES: dict[str, PageInfo] = {
    "overview": PageInfo("views/overview.py", "Overview", ":material/dashboard:", "Plan"),
    "logs": PageInfo("views/request_logs.py", "Request logs", ":material/upload_file:", "Data"),
    "forecast": PageInfo("views/forecast.py", "Load forecast", ":material/trending_up:", "Data"),
    "prices": PageInfo("views/prices.py", "Prices", ":material/sell:", "Data"),
    "latency": PageInfo("views/latency.py", "Latency model", ":material/speed:", "Model"),
    "whatif": PageInfo("views/whatif.py", "What-if simulator", ":material/science:", "Model"),
    "recommend": PageInfo(
        "views/recommendations.py", "Recommendations", ":material/recommend:", "Plan"
    ),
    "reports": PageInfo("views/reports.py", "Reports", ":material/description:", "Plan"),
    "bench": PageInfo(
        "views/benchmarks.py", "Benchmarks & calibration", ":material/timer:", "Model"
    ),
}


def store_url() -> str:
    """The store the dashboard reads: ``$PLANNER_DATABASE_URL``, else SQLite in
    ``$PLANNER_HOME`` (``planner dashboard --db URL`` sets the former)."""
    return database_url()


@st.cache_resource(show_spinner=False)
def _store(url: str) -> Store:
    return open_store(url)  # migrated once per server process; its engine pools connections


@contextmanager
def session() -> Iterator[Session]:
    with _store(store_url()).session() as active:
        yield active


def version() -> str:
    """Changes whenever the store's contents do: the key of every cached store read."""
    with session() as active:
        return contents_version(active)


@contextmanager
def shown_errors() -> Iterator[None]:
    """A planner error becomes a red message naming what was wrong; the page goes on."""
    try:
        yield
    except PlannerError as exc:
        st.error(str(exc), icon=":material/error:")
    except Exception as exc:  # a bug: still a message, never a traceback
        st.error(
            f"unexpected error ({type(exc).__name__}): {exc}. Please report it with what you did.",
            icon=":material/bug_report:",
        )


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name) or "table"


def download_table(frame: pd.DataFrame, name: str, *, key: str | None = None) -> None:
    """CSV and JSON downloads of a table, side by side."""
    base = _safe_name(name)
    left, right = st.columns(2)
    left.download_button(
        "CSV",
        csv_bytes(frame),
        file_name=f"{base}.csv",
        mime="text/csv",
        key=f"{key or base}-csv",
        icon=":material/download:",
    )
    right.download_button(
        "JSON",
        frame.to_json(orient="records", date_format="iso", indent=1).encode(),
        file_name=f"{base}.json",
        mime="application/json",
        key=f"{key or base}-json",
        icon=":material/download:",
    )


def download_json(data: Any, name: str, *, key: str | None = None) -> None:
    st.download_button(
        "JSON",
        json.dumps(data, indent=2, default=str).encode(),
        file_name=f"{_safe_name(name)}.json",
        mime="application/json",
        key=key or f"{_safe_name(name)}-json",
        icon=":material/download:",
    )


def on_log_axis(fig: go.Figure, x: float) -> None:
    """Put the label of the vertical line just added at ``x`` where it belongs on a log x axis:
    Plotly places the line at the value but its annotation at the value's log10."""
    fig.layout.annotations[-1].x = math.log10(x)


def slo_line(
    fig: go.Figure, value: float, label: str, *, vertical: bool = True, log_x: bool = False
) -> None:
    """A dashed red line at an SLO target, labelled with it (``log_x``: the x axis is log)."""
    line = {"color": SLO_COLOUR, "dash": "dash", "width": 2}
    if vertical:
        fig.add_vline(x=value, line=line, annotation_text=label, annotation_position="top")
        if log_x:
            on_log_axis(fig, value)
    else:
        fig.add_hline(y=value, line=line, annotation_text=label, annotation_position="right")


def chart(fig: go.Figure, *, key: str | None = None) -> None:
    """Every Plotly chart the same way: full width, legend on top (under the title, if any)."""
    titled = bool(fig.layout.title.text)
    fig.update_layout(
        margin={"l": 10, "r": 10, "t": 90 if titled else 40, "b": 10},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    if titled:
        fig.update_layout(title={"y": 0.98, "yanchor": "top"})
    st.plotly_chart(fig, width="stretch", key=key)


def option_index(options: list[str], wanted: str | None) -> int:
    """Where ``wanted`` is among a select box's options (the first when it is not there)."""
    return options.index(wanted) if wanted in options else 0


@st.cache_data(show_spinner=False)
def stored_recommendations(url: str, version: str) -> list[dict[str, Any]]:
    """Briefs of the stored recommendations, oldest first (no full results loaded)."""
    from planner.usecases.recommendations import stored_recommendations

    return stored_recommendations(session)


@st.cache_data(show_spinner=False)
def stored_recommendation(url: str, version: str, recommendation_id: int) -> dict[str, Any]:
    """One stored recommendation's whole result."""
    from planner.usecases.recommendations import open_recommendation

    result: dict[str, Any] = open_recommendation(recommendation_id, session).result
    return result


def recommendation_label(brief: dict[str, Any]) -> str:
    cost = f"${brief['monthly_usd']:,.0f}/month" if brief["monthly_usd"] is not None else "-"
    winner = brief["winner"] or "none met the targets"
    created = brief["created_at"][:16].replace("T", " ")
    return f"#{brief['id']} · {created} · {brief['model']} · {winner} · {cost}"


@dataclass(frozen=True)
class DeploymentChoice:
    gpu: str
    model: str
    precision: str
    tp: int
    engine: str


def deployment_inputs(page: str, defaults: dict[str, str]) -> tuple[DeploymentChoice, list[Any]]:
    """GPU, model, weights precision and tensor parallelism in one row, the engine first in the
    next (widget keys ``<page>-gpu`` ...); returns the choice and the next row's three free
    columns for the page's own settings."""
    from planner.latency.catalog import load_catalog
    from planner.latency.engines import engine_names
    from planner.latency.profile import DEFAULT_ENGINE

    catalog = load_catalog()
    gpus, models = catalog.gpus.names(), catalog.models.names()
    precisions, engines = catalog.precisions.names(), engine_names()
    first = st.columns(4)
    gpu = first[0].selectbox(
        "GPU", gpus, index=option_index(gpus, defaults.get("gpu")), key=f"{page}-gpu"
    )
    model = first[1].selectbox(
        "Model", models, index=option_index(models, defaults.get("model")), key=f"{page}-model"
    )
    precision = first[2].selectbox(
        "Weights precision",
        precisions,
        index=option_index(precisions, defaults.get("precision")),
        key=f"{page}-precision",
    )
    tp = first[3].number_input(
        "Tensor parallelism (GPUs per replica)",
        min_value=1,
        max_value=64,
        value=1,
        step=1,
        key=f"{page}-tp",
    )
    second = st.columns(4)
    engine = second[0].selectbox(
        "Engine", engines, index=option_index(engines, DEFAULT_ENGINE), key=f"{page}-engine"
    )
    choice = DeploymentChoice(str(gpu), str(model), str(precision), int(tp), str(engine))
    return choice, list(second[1:])


def link(page: str, label: str) -> None:
    """A link to another page of the dashboard (``PAGES`` key)."""
    info = PAGES[page]
    st.page_link(info.path, label=label, icon=info.icon)


def linked_choice(options: list[str], param: str = "dataset") -> str | None:
    """The option a link named in the page's URL (``?dataset=NAME``), if it is one of
    ``options``: links and bookmarks open a page on one item."""
    wanted = st.query_params.get(param)
    return wanted if wanted in options else None


def empty_store_hint(what: str) -> None:
    st.info(
        f"No {what} in the store yet. Load the demo with `make demo`, or start on the "
        "Request logs page.",
        icon=":material/info:",
    )
