"""The report's charts as Plotly figures, and their rendering to images for the PDF.

Every figure is drawn from a :class:`~planner.report.model.Report` only (no arithmetic beyond
sums of its rows), with units on the axes and the shared provider / purchase colours. Images come
from kaleido (>= 1), which drives a Chromium: Debian's ``/usr/bin/chromium`` unless
``$PLANNER_CHROMIUM`` (or choreographer's ``$BROWSER_PATH``) names another. Nothing is
downloaded: MathJax is off and plotly.js is the copy bundled with plotly.
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
from collections.abc import Coroutine, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path
from typing import Any, Literal, TypeVar

import pandas as pd
import plotly.graph_objects as go

from planner.common.colours import provider_colour, purchase_colour
from planner.errors import PlannerError
from planner.report.model import Report

CHROMIUM_ENV = "PLANNER_CHROMIUM"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
FONT_FAMILY = "DejaVu Sans"  # a Debian font the PDF embeds; the SVG text names it too
EXPECTED_COLOUR = "#1F4E79"
RANGE_COLOUR = "rgba(31, 78, 121, 0.18)"
AMORTIZED_COLOUR = "#C55A11"
ACTUAL_LINE_COLOUR = "#222222"
KEPT_COLOUR = "#1F4E79"
REPLANNED_COLOUR = "#8FAADC"
WIDTH_PX = 960
HEIGHT_PX = 420

ImageFormat = Literal["svg", "png"]
T = TypeVar("T")


class ChartRenderError(PlannerError):
    """The charts could not be drawn as images (no Chromium, or it failed)."""


def month_label(month: date | pd.Timestamp) -> str:
    """Months as finance reads them: YYYY-MM."""
    return f"{month.year:04d}-{month.month:02d}"


def _layout(fig: go.Figure, title: str, y_title: str, x_title: str | None = None) -> go.Figure:
    fig.update_layout(
        title={
            "text": title,
            "x": 0.01,
            "xanchor": "left",
            "y": 0.97,
            "yanchor": "top",
            "font": {"size": 16},
        },
        font={"family": FONT_FAMILY, "size": 12, "color": "#222222"},
        template="plotly_white",
        width=WIDTH_PX,
        height=HEIGHT_PX,
        margin={"l": 80, "r": 30, "t": 80, "b": 60},
        # the legend between the title and the plot: never over an axis title, whatever the height
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0.0, "xanchor": "left"},
    )
    fig.update_yaxes(title_text=y_title, separatethousands=True)
    if x_title is not None:
        fig.update_xaxes(title_text=x_title)
    return fig


def _money_axis(fig: go.Figure, axis: Literal["x", "y"] = "y") -> None:
    settings = {"tickprefix": "$", "tickformat": ",.0f", "rangemode": "tozero"}
    if axis == "y":
        fig.update_yaxes(**settings)
    else:
        fig.update_xaxes(**settings)


def projection_figure(report: Report) -> go.Figure:
    """Monthly cost of the plan: the expected scenario (cash and amortized) and the range from
    the low to the high scenario (cash)."""
    months = sorted(report.projection["month"].unique())
    labels = [month_label(m) for m in months]

    def totals(scenario: str, view: str) -> list[float]:
        series = report.monthly_totals(scenario, view)
        return [float(series.get(m, 0.0)) for m in months]

    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=labels, y=totals("high", "cash"), mode="lines", line={"width": 0},
            showlegend=False, hoverinfo="skip", name="high scenario (cash)",
        )
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(
            x=labels, y=totals("low", "cash"), mode="lines", line={"width": 0},
            fill="tonexty", fillcolor=RANGE_COLOUR, name="low to high scenario (cash)",
        )
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(
            x=labels, y=totals("expected", "cash"), mode="lines+markers",
            line={"color": EXPECTED_COLOUR, "width": 2.5}, name="expected scenario (cash)",
        )
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(
            x=labels, y=totals("expected", "amortized"), mode="lines",
            line={"color": AMORTIZED_COLOUR, "width": 2, "dash": "dash"},
            name="expected scenario (amortized)",
        )
    )  # fmt: skip
    _layout(fig, "Monthly cost by scenario", "$ per month", "Month")
    _money_axis(fig)
    fig.update_xaxes(type="category")
    return fig


def purchase_figure(report: Report, scenario: str = "expected") -> go.Figure:
    """Monthly cost of one scenario (amortized) stacked by purchase option."""
    rows = report.projection[report.projection["scenario"] == scenario]
    table = rows.pivot_table(
        index="month", columns="purchase_option", values="amortized_usd", aggfunc="sum"
    ).fillna(0.0)
    labels = [month_label(m) for m in table.index]
    fig = go.Figure()
    for option in table.columns:
        fig.add_trace(
            go.Bar(
                x=labels,
                y=table[option].astype(float).tolist(),
                name=str(option),
                marker_color=purchase_colour(str(option)),
            )
        )
    fig.update_layout(barmode="stack")
    _layout(
        fig, f"Cost by purchase option ({scenario} scenario, amortized)", "$ per month", "Month"
    )
    _money_axis(fig)
    fig.update_xaxes(type="category")
    return fig


def commitment_label(row: Mapping[Hashable, Any]) -> str:
    """One commitment in a few words: what, where, how many."""
    label = f"{row['purchase_option']} {row['provider']}/{row['region']} {row['instance_type']}"
    instances = row.get("instances")
    if instances is not None and not (isinstance(instances, float) and math.isnan(instances)):
        label += f" x {int(instances)}"
    pool = row.get("pool")
    if isinstance(pool, str) and pool:  # a fleet: two pools may buy the same commitment
        label = f"{pool}: {label}"
    return label


def commitment_figure(report: Report) -> go.Figure | None:
    """Each commitment's expected utilization and coverage, against its break-even utilization.
    None when the plan commits to nothing."""
    if report.commitments.empty:
        return None
    rows = report.commitments.to_dict("records")
    labels = [commitment_label(row) for row in rows]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            y=labels, x=[100 * float(r["expected_utilization"]) for r in rows],
            orientation="h", name="expected utilization", marker_color=EXPECTED_COLOUR,
        )
    )  # fmt: skip
    fig.add_trace(
        go.Bar(
            y=labels, x=[100 * float(r["coverage"]) for r in rows], orientation="h",
            name="coverage of the fleet's instance-hours", marker_color=REPLANNED_COLOUR,
        )
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(
            y=labels, x=[100 * float(r["break_even_utilization"]) for r in rows],
            mode="markers", name="break-even utilization",
            marker={"symbol": "line-ns-open", "size": 28, "line": {"width": 3},
                    "color": "#D62728"},
        )
    )  # fmt: skip
    fig.update_layout(barmode="group")
    _layout(fig, "Commitments: utilization and coverage", "", "%")
    fig.update_layout(height=max(260, 170 + 60 * len(rows)))
    fig.update_xaxes(range=[0, 105], ticksuffix="%")
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig


def sensitivity_figure(report: Report) -> go.Figure | None:
    """Monthly cost in each sensitivity case: the plan kept as bought vs bought again."""
    if report.sensitivity.empty:
        return None
    rows = report.sensitivity.to_dict("records")
    cases = [str(r["case"]) for r in rows]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            y=cases, x=[float(r["kept_monthly_usd"]) for r in rows], orientation="h",
            name="plan kept as bought", marker_color=KEPT_COLOUR,
        )
    )  # fmt: skip
    fig.add_trace(
        go.Bar(
            y=cases, x=[float(r["replanned_monthly_usd"]) for r in rows], orientation="h",
            name="plan bought again for the case", marker_color=REPLANNED_COLOUR,
        )
    )  # fmt: skip
    base = report.summary.get("monthly_usd")
    if base is not None:
        fig.add_vline(
            x=float(base), line={"color": "#D62728", "dash": "dash", "width": 2},
            annotation_text="recommended plan", annotation_position="top",
        )  # fmt: skip
    fig.update_layout(barmode="group")
    _layout(fig, "Sensitivity: monthly cost in each case", "", "$ per month")
    fig.update_layout(height=max(300, 150 + 45 * len(rows)))
    _money_axis(fig, "x")
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig


def actuals_figure(report: Report) -> go.Figure | None:
    """Actual spend per month (bars stacked by provider) against the plan (a line), with the
    forecast range from the low to the high scenario as whiskers on the plan. None when the
    report has no actuals."""
    actuals = report.actuals
    if actuals is None or actuals.empty:
        return None
    by_month = actuals.groupby("month")[["planned_usd", "low_usd", "high_usd"]].sum()
    labels = [month_label(m) for m in by_month.index]
    planned = by_month["planned_usd"].astype(float)
    fig = go.Figure()
    for provider, rows in actuals.groupby("provider", sort=True):
        spent = rows.groupby("month")["actual_usd"].sum()
        fig.add_trace(
            go.Bar(
                x=labels, y=[float(spent.get(m, 0.0)) for m in by_month.index],
                name=f"actual: {provider}", marker_color=provider_colour(str(provider)),
                width=0.55,
            )
        )  # fmt: skip
    # whiskers rather than a band: a band over the bars would hide them
    fig.add_trace(
        go.Scatter(
            x=labels, y=planned.tolist(), mode="lines+markers",
            line={"color": ACTUAL_LINE_COLOUR, "width": 2.5}, marker={"size": 8},
            name="planned (expected, cash), whiskers: forecast range (low to high)",
            error_y={
                "type": "data", "symmetric": False,
                "array": (by_month["high_usd"].astype(float) - planned).tolist(),
                "arrayminus": (planned - by_month["low_usd"].astype(float)).tolist(),
                "color": ACTUAL_LINE_COLOUR, "thickness": 1.5, "width": 14,
            },
        )
    )  # fmt: skip
    fig.update_layout(barmode="stack")
    _layout(fig, "Plan vs actual spend", "$ per month", "Month")
    fig.update_layout(height=340)  # fits under a few months' table on one page
    _money_axis(fig)
    fig.update_xaxes(type="category")
    return fig


def report_figures(report: Report) -> dict[str, go.Figure]:
    """Every chart the report has, by name (charts without data are left out)."""
    figures: dict[str, go.Figure | None] = {
        "projection": projection_figure(report),
        "purchase": purchase_figure(report),
        "commitments": commitment_figure(report),
        "sensitivity": sensitivity_figure(report),
        "actuals": actuals_figure(report),
    }
    return {name: fig for name, fig in figures.items() if fig is not None}


def chromium_path(explicit: str | Path | None = None) -> str:
    """The Chromium kaleido drives: ``explicit``, else ``$PLANNER_CHROMIUM``, else
    ``$BROWSER_PATH``, else Debian's /usr/bin/chromium or one on the PATH. Raises a
    :class:`ChartRenderError` naming the path tried when there is none."""
    named = explicit or os.environ.get(CHROMIUM_ENV) or os.environ.get("BROWSER_PATH")
    if named:
        path, source = str(named), (
            "the browser path given" if explicit else
            CHROMIUM_ENV if os.environ.get(CHROMIUM_ENV) else "BROWSER_PATH"
        )  # fmt: skip
        if not Path(path).is_file() or not os.access(path, os.X_OK):
            raise ChartRenderError(
                f"cannot draw the report's charts: no Chromium at {path} ({source}). "
                "Install Debian's chromium package, or set "
                f"{CHROMIUM_ENV} to a Chromium or Chrome executable"
            )
        return path
    for candidate in (DEFAULT_CHROMIUM, shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise ChartRenderError(
        "cannot draw the report's charts: no Chromium found (looked for /usr/bin/chromium and "
        f"chromium on the PATH). Install Debian's chromium package, or set {CHROMIUM_ENV} to a "
        "Chromium or Chrome executable"
    )


def render_figures(
    figures: Mapping[str, go.Figure],
    image_format: ImageFormat = "svg",
    *,
    browser: str | Path | None = None,
    scale: float = 2.0,
) -> dict[str, bytes]:
    """Each figure as an image (SVG text or PNG bytes), drawn by one Chromium session."""
    if not figures:
        return {}
    path = chromium_path(browser)
    # imported here: kaleido starts nothing on import, but is heavy and only the PDF needs it
    import kaleido
    from kaleido.errors import BrowserClosedError, BrowserFailedError, ChromeNotFoundError

    async def draw() -> dict[str, bytes]:
        images: dict[str, bytes] = {}
        async with kaleido.Kaleido(path=path, mathjax=False, timeout=120) as session:
            for name, fig in figures.items():
                opts: dict[str, Any] = {"format": image_format}
                if image_format == "png":
                    opts["scale"] = scale
                images[name] = await session.calc_fig(fig, opts=opts)
        return images

    try:
        return _run_coroutine(draw())
    except (ChromeNotFoundError, BrowserFailedError, BrowserClosedError) as exc:
        reason = str(exc.args[0]) if exc.args else type(exc).__name__
        raise ChartRenderError(
            f"cannot draw the report's charts: Chromium at {path} did not start ({reason}). "
            f"Install Debian's chromium package, or set {CHROMIUM_ENV} to a working Chromium"
        ) from None
    except TimeoutError:
        raise ChartRenderError(
            f"cannot draw the report's charts: Chromium at {path} took too long to draw them"
        ) from None


def _run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end in a thread of its own, so a caller's event loop (the
    dashboard's, a notebook's) is neither needed nor disturbed."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="planner-charts") as pool:
        return pool.submit(asyncio.run, coroutine).result()
