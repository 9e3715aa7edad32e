"""The finance report as a PDF: a title page with the headline figures and the contents, then
the executive summary, the 12-month projection, the commitment schedule, the sensitivity
analysis, the assumptions and their sources, and plan vs actual when there are actuals.

The document is HTML laid out by WeasyPrint (CSS paged media: "Page N of M" footers, contents
with page numbers, PDF bookmarks), in DejaVu Sans, which WeasyPrint embeds. Charts are the
Plotly figures of :mod:`planner.report.charts`, drawn as SVG by kaleido. Every text from the
report is HTML-escaped; the only resources the document may load are its own ``data:`` images.
Money is shown rounded to the cent from the model's unrounded figures; totals are summed
unrounded, then rounded, so they equal the model's own totals to the cent.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from planner.common.files import atomic_output, check_output_path
from planner.report.charts import (
    month_label,
    render_figures,
    report_figures,
)
from planner.report.model import API_OPTION, SCENARIOS, Report, showback_by_model
from pricing.costs import HOURS_PER_MONTH

MISSING = "n/a"
# units in column headers, kept on one line (a header wraps before them, never inside)
PER_MONTH = "($\u00a0per\u00a0month)"
PER_HOUR = "($\u00a0per\u00a0hour)"


# ---------------------------------------------------------------------------------------------
# Values as the document shows them


def _upper(s: dict[str, Any], key: str) -> str:
    """``; at most X ms at 90% confidence`` where the fleet was sized with a margin."""
    upper = s.get(f"p99_{key}_upper_ms")
    if _is_missing(upper) or _is_missing(s.get("confidence")):
        return ""
    return f"; at most {milliseconds(upper)} at {percent(s['confidence'], 0)} confidence"


def _is_missing(value: object) -> bool:
    if value is None or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)


def money(value: object) -> str:
    """$1,234.56; -$12.30 for a negative amount."""
    if _is_missing(value):
        return MISSING
    amount = float(value)  # type: ignore[arg-type]
    text = f"${abs(amount):,.2f}"
    return f"-{text}" if round(amount, 2) < 0 else text


def signed_money(value: object) -> str:
    """+$12.30 / -$12.30: a variance."""
    if _is_missing(value):
        return MISSING
    amount = float(value)  # type: ignore[arg-type]
    return ("+" if round(amount, 2) > 0 else "") + money(amount)


def unit_money(value: object) -> str:
    """A price per unit, e.g. per million tokens: cents when it is $1 or more, else 4 decimals."""
    if _is_missing(value):
        return MISSING
    amount = float(value)  # type: ignore[arg-type]
    return money(amount) if abs(amount) >= 1 else f"${amount:,.4f}"


def percent(value: object, digits: int = 1) -> str:
    """A share (0.502) as 50.2%."""
    if _is_missing(value):
        return MISSING
    return f"{float(value):.{digits}%}"  # type: ignore[arg-type]


def signed_percent(value: object) -> str:
    if _is_missing(value):
        return MISSING
    return f"{float(value):+.1%}"  # type: ignore[arg-type]


def number(value: object, digits: int = 0) -> str:
    if _is_missing(value):
        return MISSING
    return f"{float(value):,.{digits}f}"  # type: ignore[arg-type]


def milliseconds(value: object) -> str:
    return MISSING if _is_missing(value) else f"{number(value)} ms"


def month_text(value: object) -> str:
    if _is_missing(value):
        return MISSING
    if isinstance(value, date | pd.Timestamp):
        return month_label(value)
    return str(value)


def built_at_text(moment: datetime) -> str:
    """The build time in UTC, to the minute."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def term_text(row: Mapping[Hashable, Any]) -> str:
    """ "3 years, 2027-01 to 2029-12": the end in the contract is exclusive, so the last month
    covered is the one before it."""
    years = row["term_years"]
    length = f"{number(years)} year{'s' if float(years) != 1 else ''}"
    start, end = row["start"], row["end"]
    if _is_missing(start) or _is_missing(end):
        return length
    last_month = end - timedelta(days=1)
    return f"{length}, {month_text(start)} to {month_text(last_month)}"


# ---------------------------------------------------------------------------------------------
# HTML pieces


class Safe(str):
    """HTML built here from escaped parts: put in the document as it is."""

    __slots__ = ()


def esc(text: object) -> Safe:
    return Safe(html.escape(str(text), quote=True))


@dataclass(frozen=True)
class Column:
    title: str
    numeric: bool = False
    nowrap: bool = False  # names like "us-east4" or "g2-standard-4": never split at a hyphen

    def css(self) -> str:
        classes = " ".join(c for c, on in (("num", self.numeric), ("nowrap", self.nowrap)) if on)
        return f' class="{classes}"' if classes else ""


def _cell(value: str | Safe, column: Column, tag: str = "td") -> str:
    content = value if isinstance(value, Safe) else esc(value)
    css = ' class="num"' if column.numeric and tag == "th" else column.css()
    return f"<{tag}{css}>{content}</{tag}>"


def table(
    columns: Sequence[Column],
    rows: Iterable[Sequence[str | Safe]],
    total: Sequence[str | Safe] | None = None,
    css_class: str = "data",
) -> Safe:
    head = "".join(_cell(c.title, c, "th") for c in columns)
    body = [
        "<tr>" + "".join(_cell(v, c) for c, v in zip(columns, row, strict=True)) + "</tr>"
        for row in rows
    ]
    if total is not None:
        cells = "".join(_cell(v, c) for c, v in zip(columns, total, strict=True))
        body.append(f'<tr class="total">{cells}</tr>')
    return Safe(
        f'<table class="{css_class}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def paragraph(text: str) -> Safe:
    return Safe(f"<p>{esc(text)}</p>")


def figure(images: Mapping[str, bytes], name: str, caption: str) -> Safe:
    """A chart as an SVG image, or nothing when the report has no such chart."""
    image = images.get(name)
    if image is None:
        return Safe("")
    data = base64.b64encode(image).decode("ascii")
    return Safe(
        f'<div class="figure"><img alt="{esc(caption)}" src="data:image/svg+xml;base64,{data}">'
        f'<p class="caption">{esc(caption)}</p></div>'
    )


@dataclass(frozen=True)
class Section:
    anchor: str
    heading: str
    body: Safe


def _section(section: Section) -> str:
    return (
        f'<section class="chapter" id="{section.anchor}">'
        f"<h1>{esc(section.heading)}</h1>{section.body}</section>"
    )


# ---------------------------------------------------------------------------------------------
# Sections


@dataclass(frozen=True)
class Headline:
    label: str
    value: str
    explanation: str


def headlines(report: Report) -> list[Headline]:
    """The summary's figures, each with what it means, in the order finance reads them."""
    s = report.summary
    rows = [
        Headline(
            "Monthly cost of the recommended fleet",
            money(s.get("monthly_usd")),
            f"What the recommended fleet costs in an average month ({HOURS_PER_MONTH:g} hours) "
            "at the planned load, bought as planned, with any upfront spread over its term.",
        ),
        Headline(
            "The same fleet, all on demand",
            money(s.get("on_demand_monthly_usd")),
            "What the same fleet would cost in an average month at on-demand prices, with no "
            "commitment and no spot.",
        ),
        Headline(
            "Savings vs all on demand",
            _money_and_share(s.get("savings_vs_on_demand_usd"), s.get("savings_vs_on_demand_pct")),
            "All on demand minus the recommended plan, per month, and as a share of the "
            "on-demand cost.",
        ),
    ]
    if not _is_missing(s.get("current_fleet_monthly_usd")):
        rows += [
            Headline(
                "Current fleet, per month",
                money(s.get("current_fleet_monthly_usd")),
                "What the fleet running today costs a month, as stated when the report was "
                "built (not computed by the planner).",
            ),
            Headline(
                "Savings vs the current fleet",
                _money_and_share(s.get("savings_vs_current_usd"), s.get("savings_vs_current_pct")),
                "The current fleet minus the recommended plan, per month, and as a share of "
                "the current fleet's cost.",
            ),
        ]
    else:
        rows.append(
            Headline(
                "Savings vs the current fleet",
                MISSING,
                "No current fleet was stated, so there is nothing to compare with.",
            )
        )
    rows += [
        Headline(
            "Cost per million tokens",
            unit_money(s.get("usd_per_million_tokens")),
            "The fleet's cost divided by the tokens (input and output) it serves at the "
            "planned load, in millions: the cost of the capacity as provisioned.",
        ),
        Headline(
            "SLO attainment",
            percent(s.get("slo_attainment"), 2),
            "Share of requests within their latency targets when the recommended fleet was "
            "simulated (the lowest share where there are several request classes).",
        ),
    ]
    for key, name in (("ttft", "time to first token"), ("tpot", "time per output token")):
        rows.append(
            Headline(
                f"P99 {name}",
                milliseconds(s.get(f"p99_{key}_ms")),
                f"99th percentile of the {name} in the simulation; "
                f"{_target(s.get(f'target_{key}_ms'))}{_upper(s, key)}.",
            )
        )
    if not _is_missing(s.get("confidence")):
        rows.append(
            Headline(
                "Confidence margin",
                money(s.get("margin_usd_per_month")),
                f"What sizing the fleet so the P99 targets hold at {percent(s['confidence'], 0)} "
                "confidence costs a month, over the cheapest fleet meeting them on the "
                f"point estimates ({money(s.get('point_estimate_monthly_usd'))} a month).",
            )
        )
    if not _is_missing(s.get("p99_e2e_ms")):
        rows.append(
            Headline(
                "P99 end-to-end latency",
                milliseconds(s.get("p99_e2e_ms")),
                f"99th percentile of a whole request's latency; {_target(s.get('target_e2e_ms'))}.",
            )
        )
    rows += [
        Headline(
            "Instances",
            f"{number(s.get('peak_instances'))} at peak, {number(s.get('mean_instances'), 1)} "
            "on average",
            "Instances running at the busiest hour of the planned load, and on average over "
            "its hours.",
        ),
        Headline(
            "Projection",
            _projection_span(report),
            "The months projected; each month is billed for its real hours (672 to 744).",
        ),
    ]
    return rows


def _money_and_share(amount: object, share: object) -> str:
    if _is_missing(amount):
        return MISSING
    return f"{money(amount)} ({percent(share)})" if not _is_missing(share) else money(amount)


def _target(value: object) -> str:
    return "no target set" if _is_missing(value) else f"target {milliseconds(value)}"


def _projection_span(report: Report) -> str:
    months = sorted(report.projection["month"].unique())
    if not months:
        return MISSING
    return f"{month_text(months[0])} to {month_text(months[-1])} ({len(months)} months)"


def summary_section(report: Report) -> Section:
    s = report.summary
    parts: list[str] = []
    fleet, purchase = s.get("fleet"), s.get("purchase")
    if fleet or purchase:
        parts.append(
            paragraph(
                f"The planner recommends {fleet or 'the fleet below'}"
                + (f", bought as: {purchase}." if purchase else ".")
            )
        )
    parts.append(
        table(
            [Column("Figure"), Column("Value", numeric=True), Column("What it means")],
            [
                (h.label, h.value, Safe(f'<span class="explain">{esc(h.explanation)}</span>'))
                for h in headlines(report)
            ],
            css_class="data summary",
        )
    )
    if report.key_assumptions:
        parts.append("<h2>Key assumptions</h2>")
        parts.append(_bullets(report.key_assumptions))
    if report.notes:
        parts.append("<h2>Notes</h2>")
        parts.append(_bullets(report.notes))
    return Section("summary", "Executive summary", Safe("".join(parts)))


def _bullets(items: Iterable[str]) -> Safe:
    return Safe("<ul>" + "".join(f"<li>{esc(item)}</li>" for item in items) + "</ul>")


def projection_section(report: Report, images: Mapping[str, bytes]) -> Section:
    months = sorted(report.projection["month"].unique())
    views = ("cash", "amortized")
    totals = {
        (scenario, view): report.monthly_totals(scenario, view)
        for view in views
        for scenario in SCENARIOS
    }
    columns = [Column("Month", nowrap=True)] + [
        Column(f"{scenario.capitalize()}, {view} {PER_MONTH}", numeric=True)
        for view in views
        for scenario in SCENARIOS
    ]
    rows = [
        [month_text(m)]
        + [money(totals[(sc, view)].get(m, 0.0)) for view in views for sc in SCENARIOS]
        for m in months
    ]
    total_row = [f"Total, {len(months)} months"] + [
        money(float(totals[(sc, view)].sum())) for view in views for sc in SCENARIOS
    ]
    parts = [
        paragraph(
            "Three scenarios follow the load forecast's bands: low, expected and high. The "
            "cash view is what is paid each month, with an upfront payment in the month it is "
            "paid; the amortized view spreads each upfront over its commitment's term, so "
            "months compare like for like."
        ),
        figure(
            images,
            "projection",
            "Monthly cost of the plan: the expected scenario in cash (solid) and amortized "
            "(dashed); the band runs from the low to the high scenario (cash).",
        ),
        Safe('<div class="page-break"><h2>Monthly totals by scenario</h2>'),
        table(columns, rows, total_row),
        Safe("</div>"),
        Safe('<div class="keep"><h2>By provider, instance type and purchase option</h2>'),
        paragraph(
            f"Totals over the {len(months)} months of the projection. Instance-hours and the "
            "amortized cost are the expected scenario's."
        ),
        _breakdown_table(report),
        Safe("</div>"),
        _api_spend(report),
        figure(
            images,
            "purchase",
            "Monthly cost of the expected scenario (amortized), stacked by purchase option.",
        ),
    ]
    return Section("projection", "12-month projection", Safe("".join(parts)))


def _api_spend(report: Report) -> Safe:
    """A plan with per-token API pools: each offer's tokens and spend over the projection
    (expected scenario), at its prices per million tokens; nothing for a fleet alone."""
    projection = report.projection
    if "input_tokens" not in projection.columns:
        return Safe("")
    rows = projection[
        (projection["purchase_option"] == API_OPTION) & (projection["scenario"] == "expected")
    ]
    grouped = rows.groupby(
        ["provider", "instance_type", "input_usd_per_mtok", "output_usd_per_mtok"], sort=True
    )[["input_tokens", "output_tokens", "cash_usd"]].sum()
    columns = [
        Column("Provider"),
        Column("Offer"),
        Column("Input tokens (millions)", numeric=True),
        Column("Per million input", numeric=True),
        Column("Output tokens (millions)", numeric=True),
        Column("Per million output", numeric=True),
        Column("Spend, expected", numeric=True),
    ]
    body = [
        [
            str(line["provider"]),
            str(line["instance_type"]),
            number(line["input_tokens"] / 1e6, 2),
            unit_money(line["input_usd_per_mtok"]),
            number(line["output_tokens"] / 1e6, 2),
            unit_money(line["output_usd_per_mtok"]),
            money(line["cash_usd"]),
        ]
        for line in grouped.reset_index().to_dict("records")
    ]
    total = ["Total", "", "", "", "", "", money(grouped["cash_usd"].sum())]
    return Safe(
        '<div class="keep"><h2>Per-token API spend</h2>'
        + paragraph(
            f"The plan buys these offers by the token over the {len(set(rows['month']))} "
            "months (expected scenario): each month's tokens follow its requests, input and "
            "output tokens each at the offer's list price; the prices' sources and dates are "
            "in the assumptions."
        )
        + table(columns, body, total)
        + "</div>"
    )


def _breakdown_table(report: Report) -> Safe:
    projection = report.projection
    pooled = "pool" in projection.columns  # a fleet: a line per pool
    keys = ["pool"] * pooled + ["provider", "region", "instance_type", "purchase_option"]
    cash = projection.pivot_table(
        index=keys, columns="scenario", values="cash_usd", aggfunc="sum", sort=True
    ).reindex(columns=list(SCENARIOS), fill_value=0.0)
    expected = (
        projection[projection["scenario"] == "expected"]
        .groupby(keys, sort=True)[["instance_hours", "upfront_usd", "amortized_usd"]]
        .sum()
    )
    columns = [Column("Pool", nowrap=True)] * pooled + [
        Column("Provider"),
        Column("Region", nowrap=True),
        Column("Instance type", nowrap=True),
        Column("Purchase option", nowrap=True),
        Column("Instance-hours (expected)", numeric=True),
        Column("Upfront (expected)", numeric=True),
        Column("Cash, low", numeric=True),
        Column("Cash, expected", numeric=True),
        Column("Cash, high", numeric=True),
        Column("Amortized, expected", numeric=True),
    ]
    rows = []
    for key in cash.index:
        line = expected.loc[key] if key in expected.index else None
        rows.append(
            [str(k) for k in key]
            + [
                number(line["instance_hours"]) if line is not None else MISSING,
                money(line["upfront_usd"]) if line is not None else MISSING,
            ]
            + [money(cash.loc[key, sc]) for sc in SCENARIOS]
            + [money(line["amortized_usd"]) if line is not None else MISSING]
        )
    total = (
        ["Total", "", "", ""]
        + [""] * pooled
        + [number(expected["instance_hours"].sum()), money(expected["upfront_usd"].sum())]
        + [money(cash[sc].sum()) for sc in SCENARIOS]
        + [money(expected["amortized_usd"].sum())]
    )
    return table(columns, rows, total)


def commitments_section(report: Report, images: Mapping[str, bytes]) -> Section:
    commitments = report.commitments
    if commitments.empty:
        body = paragraph(
            "The plan buys no commitment (no reserved instances, savings plans or committed "
            "use): every instance-hour is bought on demand or as spot, so nothing is owed if "
            "the load falls."
        )
        return Section("commitments", "Commitment schedule", body)
    pooled = "pool" in commitments.columns  # a fleet: each commitment names its pool
    columns = [Column("Pool", nowrap=True)] * pooled + [
        Column("What to buy", nowrap=True),
        Column("Provider / region", nowrap=True),
        Column("Instance type", nowrap=True),
        Column("Instances", numeric=True),
        Column("Term", nowrap=True),
        Column("Upfront", numeric=True),
        Column(f"Committed {PER_HOUR}", numeric=True),
        Column("Break-even utilization", numeric=True),
        Column("Expected utilization", numeric=True),
        Column("Coverage", numeric=True),
        Column(f"Unused {PER_MONTH}", numeric=True),
    ]
    rows = []
    for row in commitments.to_dict("records"):
        rows.append(
            ([str(row["pool"])] if pooled else [])
            + [
                str(row["purchase_option"]),
                f"{row['provider']} / {row['region']}",
                str(row["instance_type"]),
                number(row["instances"])
                if not _is_missing(row["instances"])
                else "$ per hour plan",
                term_text(row),
                money(row["upfront_usd"]),
                money(row["hourly_commitment_usd"]),
                percent(row["break_even_utilization"]),
                percent(row["expected_utilization"]),
                percent(row["coverage"]),
                money(row["unused_usd_per_month"]),
            ]
        )
    total = [
        *("Total", "", "", "", ""),
        *[""] * pooled,
        money(commitments["upfront_usd"].sum()),
        money(commitments["hourly_commitment_usd"].sum()),
        *("", "", ""),
        money(commitments["unused_usd_per_month"].sum()),
    ]
    parts = [
        paragraph(
            "What to buy, and what each commitment is expected to return. The upfront is paid "
            "at the start; the hourly commitment is owed for every hour of the term, used or "
            "not (instances times the committed rate, or a savings plan's $ per hour)."
        ),
        table(columns, rows, total),
        _bullets(
            [
                "Break-even utilization: the committed rate divided by the on-demand rate. A "
                "commitment used less than this costs more than buying on demand.",
                "Expected utilization: the share of the committed hours (or $) the expected "
                "load uses.",
                "Coverage: the share of the fleet's instance-hours the commitment pays for.",
                "Unused: committed $ a month that buys nothing at the expected load.",
            ]
        ),
        figure(
            images,
            "commitments",
            "Expected utilization and coverage of each commitment; the red mark is its "
            "break-even utilization.",
        ),
    ]
    return Section("commitments", "Commitment schedule", Safe("".join(parts)))


_SENSITIVITY_KINDS = {
    "load": "load",
    "spot_interruptions": "spot interruptions",
    "price": "prices",
}


def sensitivity_section(report: Report, images: Mapping[str, bytes]) -> Section:
    sensitivity = report.sensitivity
    base = report.summary.get("monthly_usd")
    parts = [
        paragraph(
            "How the monthly cost moves when the load, the spot interruption rate or the "
            "prices differ from the plan's assumptions. \u201cKept\u201d prices the plan as "
            "bought (its commitments stay, the rest is bought on demand or as spot); "
            "\u201cbought again\u201d re-plans the fleet for the case; a positive difference is "
            "what re-planning would save a month."
            + (f" The recommended plan costs {money(base)} a month." if base is not None else "")
        )
    ]
    if sensitivity.empty:
        parts.append(paragraph("No sensitivity case was computed for this recommendation."))
    else:
        columns = [
            Column("What changes", nowrap=True),
            Column("Case", nowrap=True),
            Column("Factor", numeric=True),
            Column(f"Plan kept {PER_MONTH}", numeric=True),
            Column(f"Bought again {PER_MONTH}", numeric=True),
            Column("Kept minus bought again", numeric=True),
            Column("What the re-plan buys"),
        ]
        rows = [
            [
                _SENSITIVITY_KINDS.get(str(r["kind"]), str(r["kind"])),
                str(r["case"]),
                f"x {float(r['factor']):g}",
                money(r["kept_monthly_usd"]),
                money(r["replanned_monthly_usd"]),
                signed_money(float(r["kept_monthly_usd"]) - float(r["replanned_monthly_usd"])),
                str(r["replanned_purchase"]),
            ]
            for r in sensitivity.to_dict("records")
        ]
        parts.append(table(columns, rows, css_class="data tight-numbers"))
        parts.append(
            figure(
                images,
                "sensitivity",
                "Monthly cost in each case: the plan kept as bought and the plan bought again; "
                "the dashed line is the recommended plan's monthly cost.",
            )
        )
    return Section("sensitivity", "Sensitivity", Safe("".join(parts)))


def assumptions_section(report: Report) -> Section:
    rows = [
        [str(r["item"]), str(r["value"]), str(r["source"])]
        for r in report.assumptions.to_dict("records")
    ]
    stated = {str(item).strip().lower() for item in report.assumptions["item"]}
    for item, value in (
        ("report built", built_at_text(report.built_at)),
        ("planner version", report.planner_version),
        ("currency", report.currency),
    ):
        if item not in stated:
            rows.append([item, value, "this report"])
    parts = [
        paragraph(
            "Every input the figures rest on, with where it comes from, so each figure can be "
            "traced and checked."
        ),
        table([Column("Item"), Column("Value"), Column("Source")], rows),
    ]
    return Section("assumptions", "Assumptions and sources", Safe("".join(parts)))


def actuals_section(report: Report, images: Mapping[str, bytes]) -> Section | None:
    actuals = report.actuals
    if actuals is None:
        return None
    parts = [
        paragraph(
            "What was really spent, from each provider's billing, set against the plan: "
            "planned is the expected scenario's cash view, and the range runs from the low to "
            "the high scenario. Variance is actual minus planned; a positive variance is an "
            "overspend."
        )
    ]
    if actuals.empty:
        parts.append(paragraph("No spend was reported for the months of the plan yet."))
        return Section("actuals", "Plan vs actual", Safe("".join(parts)))
    columns = [
        Column("Month", nowrap=True),
        Column("Provider"),
        Column("Currency"),
        Column("Actual", numeric=True),
        Column("Planned", numeric=True),
        Column("Low", numeric=True),
        Column("High", numeric=True),
        Column("Variance ($)", numeric=True),
        Column("Variance (%)", numeric=True),
        Column("Against the range"),
    ]
    ordered = actuals.sort_values(["month", "provider"], kind="stable")
    rows = [
        [
            month_text(r["month"]),
            str(r["provider"]),
            str(r["currency"]),
            money(r["actual_usd"]),
            money(r["planned_usd"]),
            money(r["low_usd"]),
            money(r["high_usd"]),
            signed_money(r["variance_usd"]),
            signed_percent(r["variance_pct"]),
            _range_status(r),
        ]
        for r in ordered.to_dict("records")
    ]
    planned = float(actuals["planned_usd"].sum())
    variance = float(actuals["variance_usd"].sum())
    total = [
        "Total",
        "",
        "",
        money(actuals["actual_usd"].sum()),
        money(planned),
        money(actuals["low_usd"].sum()),
        money(actuals["high_usd"].sum()),
        signed_money(variance),
        signed_percent(variance / planned) if planned else MISSING,
        "",
    ]
    parts.append(table(columns, rows, total))
    parts.append(
        figure(
            images,
            "actuals",
            "Actual spend per month, stacked by provider, against the planned cost (line); the "
            "whiskers run from the low to the high scenario (the forecast range).",
        )
    )
    return Section("actuals", "Plan vs actual", Safe("".join(parts)))


def _range_status(row: Mapping[Hashable, Any]) -> Safe:
    actual, low, high = row["actual_usd"], row["low_usd"], row["high_usd"]
    if any(_is_missing(v) for v in (actual, low, high)):
        return Safe(MISSING)
    if round(float(actual), 2) > round(float(high), 2):
        return Safe('<span class="status-above">above the range</span>')
    if round(float(actual), 2) < round(float(low), 2):
        return Safe('<span class="status-below">below the range</span>')
    return Safe("within the range")


# ---------------------------------------------------------------------------------------------
# The document


def _title_page(report: Report, sections: Sequence[Section]) -> str:
    s = report.summary
    meta = [
        ("Recommendation", f"#{report.recommendation_id}"),
        ("Built at", built_at_text(report.built_at)),
        ("Planner version", report.planner_version),
        ("Currency", report.currency),
        ("Projection", _projection_span(report)),
    ]
    if s.get("fleet"):
        meta.append(("Fleet", str(s["fleet"])))
    if s.get("purchase"):
        meta.append(("Purchase", str(s["purchase"])))
    cards = [
        ("Monthly cost", money(s.get("monthly_usd")), "recommended fleet, average month"),
        (
            "Savings vs all on demand",
            money(s.get("savings_vs_on_demand_usd")),
            f"{percent(s.get('savings_vs_on_demand_pct'))} a month",
        ),
        (
            "Cost per million tokens",
            unit_money(s.get("usd_per_million_tokens")),
            "on the provisioned fleet",
        ),
        ("SLO attainment", percent(s.get("slo_attainment"), 2), "requests within every target"),
    ]
    meta_rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in meta)
    card_html = "".join(
        f'<div class="headline"><div class="label">{esc(label)}</div>'
        f'<div class="value">{esc(value)}</div><div class="detail">{esc(detail)}</div></div>'
        for label, value, detail in cards
    )
    contents = "".join(
        f'<li><a href="#{section.anchor}">{esc(section.heading)}</a></li>' for section in sections
    )
    return (
        '<section class="title-page">'
        '<p class="kicker">GPU fleet cost report</p>'
        f'<h1 class="doc-title">{esc(report.title)}</h1>'
        f'<table class="meta">{meta_rows}</table>'
        f'<div class="headlines">{card_html}</div>'
        f'<nav class="contents"><h2>Contents</h2><ol>{contents}</ol></nav>'
        "</section>"
    )


def showback_section(report: Report) -> Section | None:
    """A fleet of pools' showback: a table per model (its $ a month and $ per million tokens)
    and one per pool; None for a one-pool report."""
    showback = report.showback
    if showback is None:
        return None
    models = showback_by_model(showback)
    model_columns = [
        Column("Model", nowrap=True),
        Column("Pools", numeric=True),
        Column("Share of requests", numeric=True),
        Column(f"Cost {PER_MONTH}", numeric=True),
        Column("Share of cost", numeric=True),
        Column("Tokens, millions a month", numeric=True),
        Column("$ per million tokens", numeric=True),
    ]
    model_rows = [
        [
            str(r["model"]),
            number(r["pools"]),
            percent(r["share_of_requests"]),
            money(r["monthly_usd"]),
            percent(r["share_of_cost"]),
            number(r["tokens_millions_per_month"], 2),
            unit_money(r["usd_per_million_tokens"]),
        ]
        for r in models.to_dict("records")
    ]
    monthly = float(showback["monthly_usd"].sum())
    tokens = float(showback["tokens_millions_per_month"].sum())
    model_total = [
        "Fleet",
        number(len(showback)),
        percent(showback["share_of_requests"].sum()),
        money(monthly),
        percent(1.0 if monthly else None),
        number(tokens, 2),
        unit_money(monthly / tokens if tokens > 0 else None),
    ]
    pool_columns = [
        Column("Model", nowrap=True),
        Column("Pool", nowrap=True),
        Column("Instance", nowrap=True),
        Column("Input tokens"),
        Column("Share of requests", numeric=True),
        Column("Purchase"),
        Column(f"Cost {PER_MONTH}", numeric=True),
        Column("Share of cost", numeric=True),
        Column("$ per million tokens", numeric=True),
    ]
    pool_rows = [
        [
            str(r["model"]),
            str(r["pool"]),
            f"{r['provider']} / {r['region']} / {r['instance_type']}",
            str(r["input_tokens"]),
            percent(r["share_of_requests"]),
            str(r["purchase"]),
            money(r["monthly_usd"]),
            percent(r["share_of_cost"]),
            unit_money(r["usd_per_million_tokens"]),
        ]
        for r in showback.to_dict("records")
    ]
    parts = [
        paragraph(
            "What each model and each pool of the fleet costs in an average month "
            f"({HOURS_PER_MONTH:g} hours) as bought, and per million tokens (input + output) "
            "it serves: for charging each model's users back. The router sends each request "
            "to the pool of its model and input size, so the pools share no instance."
        ),
        Safe('<div class="keep"><h2>By model</h2>'),
        table(model_columns, model_rows, model_total),
        Safe("</div>"),
        Safe('<div class="keep"><h2>By pool</h2>'),
        table(pool_columns, pool_rows),
        Safe("</div>"),
    ]
    return Section("showback", "Showback per model", Safe("".join(parts)))


def report_sections(report: Report, images: Mapping[str, bytes]) -> list[Section]:
    """The document's sections in order (the showback only for a fleet of pools, plan vs
    actual only when there are actuals)."""
    showback = showback_section(report)
    sections = [
        summary_section(report),
        *([showback] if showback is not None else []),
        projection_section(report, images),
        commitments_section(report, images),
        sensitivity_section(report, images),
        assumptions_section(report),
    ]
    actuals = actuals_section(report, images)
    if actuals is not None:
        sections.append(actuals)
    return sections


def _stylesheet() -> str:
    return (resources.files("planner.report") / "templates" / "report.css").read_text("utf-8")


def report_html(report: Report, images: Mapping[str, bytes]) -> str:
    """The whole document as HTML (``images``: chart name -> SVG, from ``render_figures``)."""
    sections = report_sections(report, images)
    # The footer names the recommendation: an int, so nothing to escape in the CSS string.
    footer = (
        "@page { @bottom-left { content: "
        f'"Finance report, recommendation #{int(report.recommendation_id)}"; '
        'font-family: "DejaVu Sans", sans-serif; font-size: 8pt; color: #555; } }'
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(report.title)}</title>"
        '<meta name="author" content="planner">'
        f'<meta name="generator" content="planner {esc(report.planner_version)}">'
        f'<meta name="dcterms.created" content="{esc(report.built_at.isoformat())}">'
        f"<style>{_stylesheet()}\n{footer}</style></head><body>"
        + _title_page(report, sections)
        + "".join(_section(section) for section in sections)
        + "</body></html>"
    )


def pdf_bytes(report: Report, *, browser: str | Path | None = None) -> bytes:
    """The report as PDF bytes (for a download button); charts drawn with ``browser``
    (see :func:`planner.report.charts.chromium_path`)."""
    # imported here: WeasyPrint loads pango at import, which only the PDF needs
    from weasyprint import HTML, URLFetcher

    images = render_figures(report_figures(report), "svg", browser=browser)
    document = HTML(
        string=report_html(report, images),
        # only the document's own data: images; never a file or the network
        url_fetcher=URLFetcher(allowed_protocols={"data"}),
    )
    data = document.write_pdf(pdf_tags=True)
    assert isinstance(data, bytes)
    return data


def write_pdf(
    report: Report, path: Path, *, browser: str | Path | None = None, option: str = "--out"
) -> Path:
    """Write the report to ``path`` as a PDF, whole or not at all: the path is checked first,
    then the charts are drawn and the document laid out before anything is written. Returns
    ``path``; a path that cannot be written, or charts that cannot be drawn, raise a
    :class:`~planner.errors.PlannerError` and leave any file already there as it was."""
    check_output_path(path, option)
    data = pdf_bytes(report, browser=browser)
    with atomic_output(path, option) as temp:
        temp.write_bytes(data)
    return path
