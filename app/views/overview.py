"""Overview: what the store holds and what planner recommends now. The current (latest)
recommendation's cost, savings against all on-demand, $ per million tokens, P99 latencies against
their targets and commitment coverage; the latest forecast and its backtest score beside the
seasonal-naive baseline's; the datasets. Each group of figures links to the page it comes from.

Read through the use cases (``planner.usecases.overview`` and ``planner.usecases.datasets``),
cached on the store's contents.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import common
from planner.common.text import duration_text
from planner.usecases.datasets import list_datasets
from planner.usecases.overview import forecast_overview, recommendation_overview
from planner.workload.charts import span_s

if TYPE_CHECKING:
    from planner.store.headlines import ForecastHeadline, RecommendationHeadline

CACHE_ENTRIES = 16


# --- cached store reads: keyed on the store and its contents ----------------------------------


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def _recommendation(url: str, version: str) -> RecommendationHeadline | None:
    return recommendation_overview(common.session)


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def _forecast(url: str, version: str) -> tuple[ForecastHeadline, pd.DataFrame] | None:
    return forecast_overview(common.session)


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def _datasets(url: str, version: str) -> pd.DataFrame:
    records = list_datasets(common.session)
    return pd.DataFrame(
        [
            {
                "name": r["name"],
                "requests": r["rows"],
                "span": duration_text(span_s(r["start_at"], r["end_at"])),
                "start (UTC)": f"{r['start_at']:%Y-%m-%d %H:%M}"
                if r["start_at"]
                else common.MISSING,
                "format": r["format"],
            }
            for r in records
        ],
        columns=["name", "requests", "span", "start (UTC)", "format"],
    )


# --- formatting ---------------------------------------------------------------------------------


usd = common.money


def ms(seconds: float | None) -> str:
    return common.MISSING if seconds is None else f"{seconds * 1e3:,.0f} ms"


def share(value: float | None) -> str:
    return common.MISSING if value is None else f"{value:.0%}"


def when(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def latency_metric(
    place: st.delta_generator.DeltaGenerator,
    label: str,
    value: float | None,
    target: float | None,
    quantile: float,
) -> None:
    """A simulated P99 beside its target: the delta is the distance to the target (green when
    under it)."""
    delta = None if value is None or target is None else f"{(value - target) * 1e3:+,.0f} ms"
    place.metric(
        label,
        ms(value),
        delta,
        delta_color="inverse",
        delta_description=f"vs {ms(target)} target" if target is not None else None,
        help=f"simulated P{quantile * 100:g} of the winning fleet (the worst request class); "
        + (f"the target is {ms(target)}" if target is not None else "no target was set"),
        border=True,
    )


# --- sections -----------------------------------------------------------------------------------


def _what_was_planned(rec: RecommendationHeadline) -> None:
    """The recommendation, the load it was planned for, and the API's share of the plan."""
    st.markdown(
        f"Recommendation #{rec.id} ({when(rec.created_at)}) for {rec.demand_source}: "
        f"**{rec.winner}**, bought as **{rec.purchase}**."
    )
    planned_load(rec.id)
    common.api_plan_note(rec.api_choice, rec.api_plan_monthly_usd, rec.monthly_usd)


def recommendation_section(rec: RecommendationHeadline | None) -> None:
    st.subheader("Current recommendation")
    if rec is None:
        common.empty_store_hint("recommendations")
        common.link("recommend", "Recommendations: search for the cheapest fleet")
        return
    if rec.winner is None:
        st.warning(
            f"Recommendation #{rec.id} ({when(rec.created_at)}, demand {rec.demand_source}): "
            "no configuration met the targets.",
            icon=":material/warning:",
        )
        common.link("recommend", f"Recommendation #{rec.id}: why each configuration was rejected")
        return
    _what_was_planned(rec)
    top = st.columns(3)
    top[0].metric(
        "Monthly cost" if rec.api_plan_monthly_usd is None else "Self-hosted fleet, monthly",
        usd(rec.monthly_usd),
        help="the fleet and its commitment plan, per 730-hour month",
        border=True,
    )
    top[1].metric(
        "Savings vs all on-demand",
        f"{usd(rec.savings_usd)} / month",
        f"{rec.savings_pct:.1f}%" if rec.savings_pct is not None else None,
        delta_description=f"of {usd(rec.on_demand_monthly_usd)} all on demand",
        help=f"the same fleet bought all on demand costs {usd(rec.on_demand_monthly_usd)} "
        "per month",
        border=True,
    )
    top[2].metric(
        "$ per million tokens",
        common.unit_price(rec.usd_per_million_tokens),
        help="monthly cost over the month's input and output tokens",
        border=True,
    )
    bottom = st.columns(3)
    latency_metric(bottom[0], "P99 TTFT", rec.p99_ttft_s, rec.target_ttft_s, rec.quantile)
    latency_metric(bottom[1], "P99 TPOT", rec.p99_tpot_s, rec.target_tpot_s, rec.quantile)
    coverage = (
        rec.committed_hours_share
        if rec.committed_hours_share is not None
        else rec.committed_spend_share
    )
    committed = (
        common.plural(round(rec.commitment_level), "instance")
        if rec.commitment_unit == "instances" and rec.commitment_level is not None
        else common.unit_price(rec.commitment_level, "/hour")
        if rec.commitment_level is not None
        else "nothing"
    )
    bought = (
        f"{committed} {rec.purchase}"
        if rec.pools == 1
        else f"{common.plural(rec.pools, 'pool')}: {rec.purchase}"
    )
    bottom[2].metric(
        "Commitment coverage",
        share(coverage),
        bought if rec.purchase != "on-demand" else "all on demand",
        delta_color="off",
        delta_arrow="off",
        help=(
            "share of the fleet's instance-hours on committed capacity"
            if rec.committed_hours_share is not None
            else "share of the fleet's spend on commitments"
        )
        + f"; {share(rec.committed_spend_share)} of the spend is committed, "
        f"{share(rec.commitment_utilization)} of what is committed is used",
        border=True,
    )
    fleet_chart(rec)
    common.link(
        "recommend",
        f"Recommendation #{rec.id}: alternatives, Pareto chart, commitment plan, rejections",
    )


def planned_load(recommendation_id: int) -> None:
    """The load the recommendation was planned for, beside its cost and fleet."""
    data = common.stored_recommendation(common.store_url(), common.version(), recommendation_id)
    st.info(common.planned_load(data.get("demand")), icon=":material/scale:")


def fleet_chart(rec: RecommendationHeadline) -> None:
    if not rec.hourly_instances:
        return
    hours = pd.to_datetime(rec.hourly_start_s, unit="s", utc=True)
    colour = common.PURCHASE_COLOURS.get(rec.purchase or "", common.PURCHASE_COLOURS["on-demand"])
    fig = go.Figure(
        go.Scatter(
            x=hours,
            y=rec.hourly_instances,
            mode="lines",
            line={"shape": "hv", "color": common.PURCHASE_COLOURS["on-demand"]},
            name="instances needed",
            hovertemplate="%{x|%Y-%m-%d %H:00} UTC: %{y:,.0f} instances<extra></extra>",
        )
    )
    if rec.commitment_unit == "instances" and rec.commitment_level:
        fig.add_hline(
            y=rec.commitment_level,
            line={"color": colour, "dash": "dash", "width": 2},
            annotation_text=f"{rec.purchase}: "
            + common.plural(round(rec.commitment_level), "instance"),
            annotation_position="top left",
        )
    st.markdown("**The recommended fleet, hour by hour**")
    fig.update_layout(
        xaxis_title="hour (UTC)",
        yaxis_title="instances",
        yaxis_rangemode="tozero",
        height=280,
    )
    common.chart(fig, key="overview-fleet-chart")


def forecast_section(found: tuple[ForecastHeadline, pd.DataFrame] | None) -> None:
    st.subheader("Latest forecast")
    if found is None:
        common.empty_store_hint("forecasts")
        common.link("forecast", "Load forecast: fit one on a dataset")
        return
    head, points = found
    model = f", model {head.model}" if head.model else ""
    st.markdown(
        f"Forecast #{head.id} ({when(head.created_at)}) of {head.metric} per hour from "
        f"{head.source}{model}: history {head.history_start:%Y-%m-%d} to "
        f"{head.history_end:%Y-%m-%d}."
    )
    columns = st.columns(3)
    columns[0].metric(
        "Horizon",
        duration_text(head.horizon_hours * 3600).replace(" 0h 0m", "").replace(" 0m", ""),
        help=f"{head.horizon_hours:,} hours ahead",
        border=True,
    )
    columns[1].metric(
        "Method",
        head.method,
        f"demand at q{head.demand_quantile:g}" if head.demand_quantile is not None else None,
        delta_color="off",
        delta_arrow="off",
        border=True,
    )
    if head.mape is not None:
        gap = None if head.baseline_mape is None else (head.mape - head.baseline_mape) * 100
        columns[2].metric(
            "Backtest MAPE",
            f"{head.mape:.1%}",
            f"{gap:+.1f} pts" if gap is not None else None,
            delta_color="inverse",
            delta_description=(
                f"vs {head.baseline_mape:.1%} for {head.baseline_name or 'the baseline'}"
                if head.baseline_mape is not None
                else None
            ),
            help="mean absolute percentage error over the rolling-origin backtest, beside the "
            "seasonal-naive baseline's (lower is better)",
            border=True,
        )
    else:
        columns[2].metric(
            "Backtest MAPE", common.MISSING, help="no backtest was stored", border=True
        )
    forecast_chart(head, points)
    common.link("forecast", f"Forecast #{head.id}: history, bands, backtest, demand curve")


def forecast_chart(head: ForecastHeadline, points: pd.DataFrame) -> None:
    if points.empty:
        return
    colour = common.PURCHASE_COLOURS["on-demand"]
    fig = go.Figure(
        [
            go.Scatter(
                x=points["ds"],
                y=points["upper_80"],
                mode="lines",
                line={"width": 0},
                showlegend=False,
                hoverinfo="skip",
            ),
            go.Scatter(
                x=points["ds"],
                y=points["lower_80"],
                mode="lines",
                line={"width": 0},
                fill="tonexty",
                fillcolor="rgba(99, 110, 250, 0.2)",
                name="80% band",
                hoverinfo="skip",
            ),
            go.Scatter(
                x=points["ds"],
                y=points["mean"],
                mode="lines",
                line={"color": colour},
                name="forecast",
                hovertemplate="%{x|%Y-%m-%d %H:00} UTC: %{y:,.0f}<extra></extra>",
            ),
        ]
    )
    st.markdown(f"**Forecast {head.metric.replace('_', ' ')} per hour, with the 80% band**")
    st.caption(
        "The forecast's whole load. A recommendation may plan for a share of it (its load "
        "scale): each says what it was planned for."
    )
    fig.update_layout(
        xaxis_title="hour (UTC)",
        yaxis={"title": f"{head.metric.replace('_', ' ')} / hour", "nticks": 8},
        height=320,
    )
    common.chart(fig, key="overview-forecast-chart")


def datasets_section(table: pd.DataFrame) -> None:
    st.subheader("Datasets")
    if table.empty:
        common.empty_store_hint("datasets")
        common.link("logs", "Request logs: ingest a log")
        return
    columns = st.columns(3)
    columns[0].metric("Datasets", f"{len(table):,}", border=True)
    columns[1].metric("Requests", f"{int(table['requests'].sum()):,}", border=True)
    with columns[2].container(border=True):  # a name is not a number: whole, in text's size
        st.caption("Newest")
        st.markdown(f"**{common.markdown_text(str(table['name'].iloc[-1]))}**")
    common.table(
        table,
        column_config={"requests": st.column_config.NumberColumn("requests", format="localized")},
    )
    common.download_table(table, "datasets", key="overview-datasets")
    common.link("logs", "Request logs: arrivals, token lengths and models of each dataset")


def getting_started() -> None:
    st.info(
        "The store is empty. To see planner at work, run `make demo`: it loads a sample of the "
        "Azure LLM inference trace, cloud prices, a forecast and a recommendation, then opens "
        "this dashboard. Or start with your own request log on the Request logs page, then fit "
        "a forecast and ask for a recommendation.",
        icon=":material/rocket_launch:",
    )
    common.link("logs", "Request logs: ingest a log")
    common.link("forecast", "Load forecast")
    common.link("recommend", "Recommendations")


st.title("Overview")
st.caption(
    "What the store holds and what planner recommends now; each group of figures links to the "
    "page it comes from."
)
with common.shown_errors():
    url, version = common.store_url(), common.version()
    recommendation = _recommendation(url, version)
    forecast = _forecast(url, version)
    datasets = _datasets(url, version)
    if recommendation is None and forecast is None and datasets.empty:
        getting_started()
    else:
        recommendation_section(recommendation)
        forecast_section(forecast)
        datasets_section(datasets)
