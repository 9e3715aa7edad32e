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
from planner.common.text import plural as plural  # pages say counts as the CLI does
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
    # admins only: app/main.py leaves it out of everyone else's navigation
    "audit": PageInfo("views/audit.py", "Audit trail", ":material/history:", "Admin"),
}
ADMIN_PAGES = ("audit",)


def store_url() -> str:
    """The store the dashboard reads: ``$PLANNER_DATABASE_URL``, else SQLite in
    ``$PLANNER_HOME`` (``planner --db URL dashboard`` sets the former)."""
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


def readable_log_axes(fig: go.Figure) -> None:
    """Every log axis of ``fig`` not already set by :func:`log_axis` gets its readable ticks
    and the range of its traces' data (charts the library draws included)."""
    for name in [k for k in fig.layout.to_plotly_json() if k.startswith(("xaxis", "yaxis"))]:
        axis = fig.layout[name]
        if axis.type != "log" or axis.tickmode == "array":
            continue
        letter, ref = name[0], name[0] + name[5:]  # "xaxis2" is the traces' "x2"
        values = [
            v
            for trace in fig.data
            if (getattr(trace, f"{letter}axis", None) or letter) == ref
            and getattr(trace, letter, None) is not None
            for v in trace[letter]
            if isinstance(v, int | float) and not isinstance(v, bool)
        ]
        settings = log_axis_settings(values, prefix=axis.tickprefix or "")
        if settings is not None:
            fig.layout[name].update(settings)


def chart(fig: go.Figure, *, key: str | None = None) -> None:
    """Every Plotly chart the same way: full width, legend on top (under the title, if any),
    log axes labelled so they read as a scale."""
    readable_log_axes(fig)
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


# --- numbers as people read them: one format for money, prices, counts and gaps ---------------

MISSING = "—"  # a value that is not there, in every table and figure
MONEY_STEP = 1  # amounts in whole dollars: $1,554
PRICE_DIGITS = 4  # a unit price ($ per million tokens, $ per hour): $0.0215
MONEY_COLUMN = st.column_config.NumberColumn(format="dollar", step=MONEY_STEP)
PRICE_COLUMN = st.column_config.NumberColumn(format="dollar", step=10**-PRICE_DIGITS)


def _missing(value: float | None) -> bool:
    return value is None or not math.isfinite(float(value))


def money(value: float | None) -> str:
    """An amount in whole dollars with thousands separators ($1,554; -$12); "—" when missing."""
    if _missing(value):
        return MISSING
    assert value is not None
    text = f"${abs(value):,.0f}"
    return f"-{text}" if round(value) < 0 else text


def unit_price(value: float | None, unit: str = "") -> str:
    """A price per unit, with enough digits to tell prices apart ($0.0215), the same on every
    page; ``unit`` follows it ("/hour")."""
    if _missing(value):
        return MISSING
    assert value is not None
    return f"${value:,.{PRICE_DIGITS}f}{unit}"


def money_column(label: str | None = None, help: str | None = None) -> Any:
    """A dataframe column of amounts, formatted as :func:`money` formats them."""
    return st.column_config.NumberColumn(label, format="dollar", step=MONEY_STEP, help=help)


def price_column(label: str | None = None, help: str | None = None) -> Any:
    """A dataframe column of unit prices, formatted as :func:`unit_price` formats them."""
    return st.column_config.NumberColumn(label, format="dollar", step=10**-PRICE_DIGITS, help=help)


def table(frame: Any, **kwargs: Any) -> None:
    """``st.dataframe`` without the index, with "—" in every cell whose value is missing
    (never "None" or "nan"); numbers stay numbers, so columns still sort."""
    kwargs.setdefault("hide_index", True)
    kwargs.setdefault("placeholder", MISSING)
    st.dataframe(frame, **kwargs)


def file_name(path: str | None) -> str:
    """A file's name without its folders (the full path goes in a tooltip)."""
    if not path:
        return MISSING
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


# --- the load a result was planned for ---------------------------------------------------------


def planned_load(demand: dict[str, Any] | None) -> str:
    """One sentence naming the load a recommendation was planned for, from its stored demand:
    the source (forecast and quantile, load scale), the hours and the requests an hour. Shown
    wherever its cost or fleet is."""
    if not demand:
        return "Planned load: not stored with this result."
    hours = demand.get("hours")
    start = str(demand.get("start") or "")[:16].replace("T", " ")
    span = f"{plural(hours, 'hour')} from {start} UTC" if hours and start else MISSING
    mean, peak = demand.get("mean_requests_per_s"), demand.get("peak_requests_per_s")
    rates = (
        f"mean {mean * 3600:,.0f} requests/hour ({mean:,.2f} req/s), peak {peak * 3600:,.0f} "
        f"requests/hour ({peak:,.2f} req/s)"
        if mean is not None and peak is not None
        else MISSING
    )
    return f"**Planned for** {demand.get('source', MISSING)}: {span}; {rates}."


# --- log axes ------------------------------------------------------------------------------------


def log_ticks(low: float, high: float) -> list[float]:
    """Where a log axis from ``low`` to ``high`` is labelled: the powers of ten (1, 10, 100,
    ...) when the range holds at least two; else 1, 2, 5 times them, each labelled in full."""
    low, high = max(float(low), 1e-12), max(float(high), float(low), 1e-12)
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    decades = [10.0**e for e in range(first, last + 1)]
    if sum(low <= v <= high for v in decades) >= 2:
        return decades
    return [m * 10.0**e for e in range(first, last + 1) for m in (1, 2, 5)]


def tick_label(value: float) -> str:
    """A tick's label in full: 0.1, 5, 20, 1,000, 10k, 1M."""
    for least, size, suffix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if value >= least:
            return f"{value / size:,g}{suffix}"
    return f"{value:,g}"


def log_axis_settings(values: Any, prefix: str = "", **kwargs: Any) -> dict[str, Any] | None:
    """Plotly settings of a log axis over ``values`` whose labels read as a scale: only the
    ticks :func:`log_ticks` picks are labelled, in full; the rest are unlabelled marks (Plotly's
    own labels, "1 2 5 10 2 5 100", read as a broken scale); ``prefix`` ("$") leads each label.
    None without a positive value."""
    data = pd.to_numeric(pd.Series(list(values), dtype="float64"), errors="coerce")
    data = data[data > 0]
    if data.empty:
        return None
    low, high = math.log10(float(data.min())), math.log10(float(data.max()))
    pad = max(high - low, 1.0) * 0.05
    ticks = log_ticks(float(data.min()), float(data.max()))
    return {
        "type": "log",
        "range": [low - pad, high + pad],  # the data's, not an annotation's stray log10
        "tickmode": "array",
        "tickvals": ticks,
        "ticktext": [f"{prefix}{tick_label(v)}" for v in ticks],
        **kwargs,
    }


def log_axis(fig: go.Figure, axis: str, values: Any, **kwargs: Any) -> None:
    """Make ``axis`` ("x" or "y") of ``fig`` a log axis over ``values`` with readable labels
    (:func:`log_axis_settings`)."""
    settings = log_axis_settings(values, **kwargs)
    if settings is None:
        return
    if axis == "x":
        fig.update_xaxes(**settings)
    else:
        fig.update_yaxes(**settings)


# --- a page URL that names no page ---------------------------------------------------------------


def url_paths(shown: tuple[str, ...] | None = None) -> dict[str, str]:
    """Each page's URL path (``/`` for the Overview, else its script's name) by ``PAGES`` key:
    of the pages ``shown`` (default: every page)."""
    return {
        key: "/" if key == "overview" else "/" + info.path.rsplit("/", 1)[-1].removesuffix(".py")
        for key, info in PAGES.items()
        if shown is None or key in shown
    }


def unknown_path(url: str | None, shown: tuple[str, ...] | None = None) -> str | None:
    """The path of ``url`` when it names none of the pages ``shown`` (``/xyz``), else None."""
    if not url:
        return None
    from urllib.parse import urlparse

    path = urlparse(url).path.strip("/")
    base = str(st.get_option("server.baseUrlPath") or "").strip("/")
    if base and (path == base or path.startswith(base + "/")):
        path = path[len(base) :].strip("/")
    known = {p.strip("/") for p in url_paths(shown).values()}
    return None if path in known else f"/{path}"


def answer_unknown_page(shown: tuple[str, ...] | None = None) -> None:
    """Called right after ``st.navigation``: a URL naming none of the pages ``shown`` gets "No
    page at /xyz" and the list of pages, instead of Streamlit silently showing the default
    page (``st.navigation`` falls back to it)."""
    missing = unknown_path(st.context.url, shown)
    if missing is None:
        return
    paths = url_paths(shown)
    st.title("Page not found")
    st.error(f"No page at `{missing}`. The pages are:", icon=":material/link_off:")
    for key, path in paths.items():
        info = PAGES[key]
        st.page_link(info.path, label=f"{info.title} ({path})", icon=info.icon)
    st.stop()


PLAN_WORDS = {
    "overflow": "the overflow plan: a base fleet all month, the peaks on the per-token API",
    "api": "all on the per-token API",
}


def api_plan_note(choice: str | None, plan_usd: float | None, fleet_usd: float | None) -> None:
    """When the recommendation chose the API for some or all of the traffic, say so beside the
    self-hosted fleet's cost: the plan's cost is the one the report and FOCUS export carry."""
    if choice not in PLAN_WORDS or plan_usd is None:
        return
    st.info(
        f"Recommended: **{PLAN_WORDS[choice]}**, **{money(plan_usd)}** a month "
        f"(the self-hosted fleet below alone: {money(fleet_usd)}). The Reports page costs "
        "that plan; *Per-token API or self-hosting* shows how it was chosen.",
        icon=":material/call_split:",
    )


def markdown_text(text: str) -> str:
    """User text (file and dataset names) shown literally inside Markdown (the names sit inside
    a sentence, so only the characters that mark up inline text are escaped)."""
    return "".join("\\" + c if c in "\\`*_[]<>|~$" else c for c in text)
