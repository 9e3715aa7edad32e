"""Charts of a recommendation: the winner's fleet hour by hour against the demand, and every
simulated alternative's cost against its P99s with the Pareto front. They read the result's
dict (``Recommendation.to_dict()`` or a stored one), so the dashboard and reports draw the same."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from planner.common.files import write_text_atomic
from planner.common.text import plural


def figure(result: dict[str, Any]) -> Any:
    """A Plotly figure (plotly is imported here: only charts need it)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    if result.get("kind") == "fleet":  # a fleet of pools: its pools hour by hour
        fleet = fleet_by_pool(result)
        if fleet is None:
            fleet = go.Figure()
        fleet.update_layout(title_text="demand and the recommended fleet by pool, per hour (UTC)")
        return fleet
    fig = make_subplots(
        rows=2,
        cols=1,
        vertical_spacing=0.16,
        specs=[[{"secondary_y": True}], [{}]],
        subplot_titles=(
            "demand and the recommended fleet, per hour (UTC)",
            "simulated alternatives: cost against P99 time to first token",
        ),
    )
    hourly = result["hourly"]
    hours = [datetime.fromtimestamp(t, UTC) for t in hourly["hour_start"]]
    fig.add_trace(
        go.Scatter(
            x=hours,
            y=[r / 3600 for r in hourly["requests"]],
            mode="lines",
            line={"color": "rgb(31, 119, 180)"},
            name="demand (req/s)",
        ),
        row=1,
        col=1,
    )
    if "instances" in hourly:
        fig.add_trace(
            go.Scatter(
                x=hours,
                y=hourly["instances"],
                mode="lines",
                line={"color": "rgb(214, 39, 40)", "shape": "hv"},
                name="instances",
            ),
            row=1,
            col=1,
            secondary_y=True,
        )
        plan = result.get("plan") or {}
        chosen = plan.get("chosen") or {}
        if chosen.get("commitment_unit") == "instances" and chosen.get("commitment_level"):
            level = chosen["commitment_level"]
            fig.add_trace(
                go.Scatter(
                    x=[hours[0], hours[-1]],
                    y=[level, level],
                    mode="lines",
                    line={"color": "rgb(44, 160, 44)", "dash": "dash"},
                    name=f"committed ({chosen['option']})",
                ),
                row=1,
                col=1,
                secondary_y=True,
            )
    pareto = set(result.get("pareto", []))
    rows = [r for r in result["ranked"] if r.get("p99_ttft_s") is not None]
    for gpu in sorted({r["gpu"] for r in rows}):
        mine = [r for r in rows if r["gpu"] == gpu]
        fig.add_trace(
            go.Scatter(
                x=[r["p99_ttft_s"] * 1e3 for r in mine],
                y=[r["monthly_usd"] for r in mine],
                mode="markers",
                marker={
                    "size": [12 if r["id"] in pareto else 8 for r in mine],
                    "symbol": ["circle" if r["verified"] else "x" for r in mine],
                },
                text=[
                    f"#{r['id']} {r['provider']} {r['instance_type']} {r['model']} "
                    f"{r['precision']} TP{r['tp']}, {r['max_seqs']} seqs"
                    + (", chunked" if r["chunked_prefill"] else "")
                    + ("" if r["verified"] else " (missed a target)")
                    for r in mine
                ],
                hovertemplate="%{text}<br>P99 TTFT %{x:,.0f} ms<br>$%{y:,.0f}/month",
                name=gpu,
            ),
            row=2,
            col=1,
        )
    front = sorted(
        (r for r in rows if r["id"] in pareto), key=lambda r: (r["p99_ttft_s"], r["monthly_usd"])
    )
    if front:
        fig.add_trace(
            go.Scatter(
                x=[r["p99_ttft_s"] * 1e3 for r in front],
                y=[r["monthly_usd"] for r in front],
                mode="lines",
                line={"color": "grey", "dash": "dot"},
                name="Pareto front",
                hoverinfo="skip",
            ),
            row=2,
            col=1,
        )
    winner = result.get("winner")
    title = "no configuration met the targets"
    if winner is not None:
        title = (
            f"recommended: {winner['provider']} {winner['instance_type']} "
            f"({winner['gpus_per_instance']} x {winner['gpu']}), {winner['model']} "
            f"{winner['precision']} TP{winner['tp']}: ${winner['monthly_usd']:,.0f}/month"
        )
    fig.update_yaxes(title_text="requests/s", row=1, col=1, secondary_y=False, rangemode="tozero")
    top = max(hourly.get("instances", [1.0]))
    fig.update_yaxes(
        title_text="instances",
        row=1,
        col=1,
        secondary_y=True,
        range=[0, top * 1.15],
        dtick=max(1, round(top / 6)),  # whole instances
        showgrid=False,
    )
    fig.update_xaxes(title_text="P99 TTFT (ms), simulated", type="log", row=2, col=1)
    fig.update_yaxes(title_text="$ per month", type="log", row=2, col=1)
    fig.update_layout(
        title={"text": f"{title}<br><sup>{result['demand']['source']}</sup>"},
        template="plotly_white",
        height=900,
        legend={"orientation": "h", "y": -0.08},
    )
    return fig


def write_html(result: dict[str, Any], path: Path | str, option: str = "--plot") -> Path:
    """A self-contained HTML file (plotly.js embedded: opens offline), written whole or not at
    all (a full disk leaves no half chart)."""
    path = Path(path)
    write_text_atomic(path, html(result), option)
    return path


def html(result: dict[str, Any]) -> str:
    """The chart as a self-contained HTML page."""
    text: str = figure(result).to_html(include_plotlyjs=True, full_html=True)
    return text


METRIC_LABELS = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E"}


def cost_vs_p99(
    result: dict[str, Any], metric: str = "ttft", colours: Mapping[str, str] | None = None
) -> Any:
    """Every simulated alternative's monthly cost against its simulated P99 ``metric`` (ttft,
    tpot or e2e), one colour per provider; the cost-vs-this-P99 front joined, the result's
    Pareto front (cost, P99 TTFT and TPOT, quality) ringed, the winner a star, a candidate
    that missed a target an x."""
    import plotly.graph_objects as go

    key = f"p99_{metric}_s"
    label = METRIC_LABELS[metric]
    pareto = set(result.get("pareto", []))
    rows = [r for r in result["ranked"] if r.get(key) is not None]
    winner_id = (result.get("winner") or {}).get("id")
    fig = go.Figure()
    for provider in sorted({r["provider"] for r in rows}):
        mine = [r for r in rows if r["provider"] == provider]
        fig.add_trace(
            go.Scatter(
                x=[r[key] * 1e3 for r in mine],
                y=[r["monthly_usd"] for r in mine],
                mode="markers",
                marker={
                    "size": [16 if r["id"] == winner_id else 10 for r in mine],
                    "symbol": [
                        "star" if r["id"] == winner_id else "circle" if r["verified"] else "x"
                        for r in mine
                    ],
                    "color": (colours or {}).get(provider),
                    "line": {
                        "width": [2 if r["id"] in pareto else 0 for r in mine],
                        "color": "black",
                    },
                },
                text=[_describe(r) for r in mine],
                hovertemplate=f"%{{text}}<br>P99 {label} %{{x:,.0f}} ms<br>$%{{y:,.0f}}/month",
                name=provider,
            )
        )
    # the line: the two-criteria front of this chart (nothing cheaper at a lower P99); the
    # rings: the stored front over cost, P99 TTFT and TPOT, and quality together
    front, cheapest = [], float("inf")
    for r in sorted((r for r in rows if r["verified"]), key=lambda r: (r[key], r["monthly_usd"])):
        if r["monthly_usd"] < cheapest:
            front.append(r)
            cheapest = r["monthly_usd"]
    if front:
        fig.add_trace(
            go.Scatter(
                x=[r[key] * 1e3 for r in front],
                y=[r["monthly_usd"] for r in front],
                mode="lines",
                line={"color": "grey", "dash": "dot", "shape": "hv"},
                name=f"Pareto front (cost, P99 {label})",
                hoverinfo="skip",
            )
        )
    fig.update_xaxes(title_text=f"P99 {label} (ms), simulated", rangemode="tozero")
    costs = [r["monthly_usd"] for r in rows if r["monthly_usd"]]
    wide = bool(costs) and max(costs) >= 10 * min(costs)  # log only where costs span a decade
    fig.update_yaxes(
        title_text="$ per month",
        type="log" if wide else "linear",
        tickprefix="$",
        tickformat=",.0f",
    )
    fig.update_layout(template="plotly_white")
    return fig


def fleet_by_purchase(result: dict[str, Any], colours: Mapping[str, str] | None = None) -> Any:
    """The winner's instances hour by hour, stacked by how the plan buys them, under the
    demand (requests/s, right axis). None without a winner."""
    from planner.recommend.plan import hourly_by_purchase

    split = hourly_by_purchase(result)
    hourly = result["hourly"]
    if "instances" not in hourly:
        return None
    series = (
        {k: v for k, v in split.items() if k != "hour_start"}
        if split is not None
        else {"instances": hourly["instances"]}
    )
    return _stacked_fleet(hourly, series, colours, "%{x}<br>%{y:,.2f} instances")


def fleet_by_pool(result: dict[str, Any], colours: Mapping[str, str] | None = None) -> Any:
    """A fleet of pools' instances hour by hour, stacked by pool, under the demand (requests/s,
    right axis). None without an hourly fleet."""
    hourly = result.get("hourly") or {}
    by_pool: dict[str, list[float]] = hourly.get("instances_by_pool") or {}
    if not by_pool or not hourly.get("hour_start"):
        return None
    fig = _stacked_fleet(hourly, by_pool, colours, "{name}: %{{y:,.0f}} instances<extra></extra>")
    fig.update_layout(legend_title_text="pool")
    return fig


def _stacked_fleet(
    hourly: Mapping[str, Any],
    series: Mapping[str, list[float]],
    colours: Mapping[str, str] | None,
    hover: str,
) -> Any:
    """Instances hour by hour, one stacked area per series (``hover`` may name it as
    ``{name}``), under the demand in requests/s on the right axis."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    # each hour drawn as a step to the next hour's start: the last hour (or the only one) too
    starts = [*hourly["hour_start"], hourly["hour_start"][-1] + 3600]
    hours = [datetime.fromtimestamp(t, UTC) for t in starts]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for name, counts in series.items():
        fig.add_trace(
            go.Scatter(
                x=hours,
                y=[*counts, counts[-1]],
                mode="lines",
                stackgroup="fleet",
                line={"shape": "hv", "width": 0.5, "color": (colours or {}).get(name)},
                name=name,
                hovertemplate=hover.format(name=name) if "{name}" in hover else hover,
            ),
            secondary_y=False,
        )
    requests = hourly.get("requests") or []
    if requests:
        fig.add_trace(
            go.Scatter(
                x=hours,
                y=[r / 3600 for r in [*requests, requests[-1]]],
                mode="lines",
                line={"color": "black", "width": 1, "shape": "hv"},
                name="demand (requests/s)",
            ),
            secondary_y=True,
        )
    fig.update_yaxes(title_text="instances", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title_text="requests/s", rangemode="tozero", showgrid=False, secondary_y=True)
    fig.update_xaxes(title_text="hour (UTC)")
    fig.update_layout(template="plotly_white", hovermode="x unified")
    return fig


def _describe(row: dict[str, Any]) -> str:
    return (
        f"#{row['id']} {row['provider']} {row['instance_type']} ({row['gpus_per_instance']} x "
        f"{row['gpu']}) {row['model']} {row['precision']} TP{row['tp']}, {row['max_seqs']} seqs"
        + (", chunked" if row["chunked_prefill"] else "")
        + ("" if row["verified"] else " (missed a target)")
    )


def api_vs_self_hosted(result: dict[str, Any]) -> Any:
    """The monthly cost of the model's cheapest per-token offer and of self-hosting against
    the load (mean requests/s, log-log), with the break-even and this demand's load marked,
    and the verified overflow plan's cost at this load (base fleet plus API) when there is one;
    None when the result has no such comparison (``api.curve``)."""
    api = result.get("api") or {}
    curve = api.get("curve") or []
    if not curve:
        return None
    import plotly.graph_objects as go

    x = [c["requests_per_s"] for c in curve]
    offer = api["offer"]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[c["api_usd"] for c in curve],
            mode="lines",
            name=f"API: {offer['provider']} {offer['offer']}",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[c["self_hosted_usd"] for c in curve],
            mode="lines",
            line_shape="hv",
            name="self-hosted (cheapest configuration at each load)",
        )
    )
    month = api["month"]
    now = month["requests"] / (730 * 3600.0)
    fig.add_vline(
        x=now, line_dash="dot", annotation_text="this demand", annotation_position="top left"
    )
    even = api.get("break_even") or {}
    if even.get("requests_per_s") is not None:
        fig.add_trace(
            go.Scatter(
                x=[even["requests_per_s"]],
                y=[even["usd_per_month"]],
                mode="markers",
                marker={"size": 11, "symbol": "x"},
                name=f"break-even: {even['requests_per_s']:,.3g} req/s",
            )
        )
    overflow = api.get("overflow") or {}
    if overflow.get("verified"):
        fig.add_trace(
            go.Scatter(
                x=[now],
                y=[overflow["monthly_usd"]],
                mode="markers",
                marker={"size": 12, "symbol": "star"},
                name=(
                    f"overflow plan: {plural(overflow['base_replicas'], 'base replica')}, "
                    f"{overflow['api_share']:.0%} of requests on the API"
                ),
            )
        )
    fig.update_xaxes(type="log", title_text="mean requests/s", dtick=1)
    fig.update_yaxes(type="log", title_text="$ per month", tickprefix="$", dtick=1)
    fig.update_layout(legend={"orientation": "h", "y": -0.25}, margin={"t": 30})
    return fig
