"""An interactive chart of a forecast: history, point forecast, 80%/95% bands, demand curve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner.common.files import atomic_output, check_output_path
from planner.forecast.model import Forecast


def metric_axis(metric: str) -> str:
    """The y axis of an hourly metric: ``requests / hour``, ``input tokens / hour``."""
    return f"{metric.replace('_', ' ')} / hour"


def figure(
    result: Forecast, demand: pd.DataFrame | None = None, quantile: float | None = None
) -> Any:
    """A Plotly figure of ``result`` (plotly is imported here: only charts need it)."""
    return forecast_figure(
        result.points,
        history=result.series.frame,
        fitted=result.fitted,
        demand=demand,
        quantile=quantile,
        label=result.series.label,
        metric=result.metric,
        method=result.method,
    )


def forecast_figure(
    points: pd.DataFrame,
    *,
    history: pd.DataFrame | None = None,
    fitted: pd.DataFrame | None = None,
    demand: pd.DataFrame | None = None,
    quantile: float | None = None,
    label: str = "",
    metric: str = "requests",
    method: str = "prophet",
) -> Any:
    """History (``ds``, ``y``; missing hours NaN), forecast (``points``: ``ds``, ``mean`` and
    the 80%/95% bands) and demand curve (``ds``, ``y``) on one chart: what a fitted forecast
    and a stored one (whose history may be gone) both draw."""
    import plotly.graph_objects as go

    fig = go.Figure()
    band_x = pd.concat([points["ds"], points["ds"][::-1]])
    for width, alpha in ((95, 0.15), (80, 0.3)):
        upper = points[f"upper_{width}"]
        lower = points[f"lower_{width}"][::-1]
        fig.add_trace(
            go.Scatter(
                x=band_x,
                y=pd.concat([upper, lower]),
                fill="toself",
                fillcolor=f"rgba(31, 119, 180, {alpha})",
                line={"width": 0},
                hoverinfo="skip",
                name=f"{width}% band",
            )
        )
    if history is not None:
        fig.add_trace(
            go.Scatter(
                x=history["ds"],
                y=history["y"],  # missing hours are NaN: drawn as breaks, not bridged
                mode="lines",
                line={"color": "black", "width": 1},
                name="history",
                connectgaps=False,
            )
        )
    if fitted is not None:
        fig.add_trace(
            go.Scatter(
                x=fitted["ds"],
                y=fitted["mean"],
                mode="lines",
                line={"color": "rgba(31, 119, 180, 0.6)", "width": 1},
                name="fit",
                visible="legendonly",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=points["ds"],
            y=points["mean"],
            mode="lines",
            line={"color": "rgb(31, 119, 180)", "width": 2},
            name=f"forecast ({method})",
        )
    )
    if demand is not None:
        name = f"demand curve (q={quantile:g})" if quantile is not None else "demand curve"
        fig.add_trace(
            go.Scatter(
                x=demand["ds"],
                y=demand["y"],
                mode="lines",
                line={"color": "rgb(214, 39, 40)", "width": 1.5, "dash": "dash"},
                name=name,
            )
        )
    if history is not None:
        missing = int((~np.isfinite(history["y"].to_numpy(np.float64))).sum())
        subtitle = f"history {len(history)} h ({missing} missing), horizon {len(points)} h; UTC"
    else:
        subtitle = f"horizon {len(points)} h (history not available); UTC"
    fig.update_layout(
        title={"text": f"{label}<br><sup>{subtitle}</sup>"},
        xaxis_title="hour (UTC)",
        yaxis_title=metric_axis(metric),
        hovermode="x unified",
        template="plotly_white",
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def write_html(
    result: Forecast,
    path: Path | str,
    demand: pd.DataFrame | None = None,
    quantile: float | None = None,
    option: str = "output",
) -> Path:
    """A self-contained HTML file (plotly.js embedded: opens offline), written whole or not at
    all (a failure is a :class:`~planner.errors.UsageError` naming ``option``)."""
    path = Path(path)
    check_output_path(path, option)
    chart = figure(result, demand, quantile)
    with atomic_output(path, option) as temp:
        chart.write_html(str(temp), include_plotlyjs=True, full_html=True)
    return path
