"""Reports: the finance report of a stored recommendation (the same files `planner report`
writes): a preview of its figures, plan vs actual spend when asked, and the Excel workbook, the
PDF and the FOCUS CSV to download."""

from __future__ import annotations

import functools
import json
from datetime import date

import pandas as pd
import streamlit as st

from app import common, signin
from planner.access import Actor, acting_as
from planner.common.uploads import uploaded_file
from planner.report.export import FORMATS, MEDIA_TYPES, report_bytes
from planner.report.model import Report
from planner.usecases.report import ReportRequest, build_report, parse_month, record_export


@st.cache_data(show_spinner="Building the report ...")
def _report(
    url: str,
    version: str,
    recommendation_id: int,
    months: int,
    first_month: date | None,
    current_monthly: float | None,
) -> Report:
    request = ReportRequest(
        recommendation_id,
        months=months,
        first_month=first_month,
        current_fleet_monthly_usd=current_monthly,
    )
    return build_report(request, common.session)


def _first_month(text: str) -> date | None:
    return parse_month(text.strip() or None, "First month")


_money = common.money


def _column_config(frame: pd.DataFrame) -> dict[str, object]:
    """Money as money in every report table: amounts in whole dollars, prices per unit with
    their digits, shares as percentages (the columns are named by what they hold)."""
    config: dict[str, object] = {}
    for column in map(str, frame.columns):
        if "usd_per_" in column or column == "hourly_commitment_usd":
            config[column] = common.price_column(column)
        elif column.endswith("_usd") or column.endswith(("(cash)", "(amortized)")):
            config[column] = common.money_column(column)
        elif column.endswith(("utilization", "coverage")) or column.endswith("_pct"):
            config[column] = st.column_config.NumberColumn(column, format="percent")
    return config


def _summary(report: Report) -> None:
    s = report.summary
    columns = st.columns(4)
    columns[0].metric("Monthly cost", _money(s["monthly_usd"]), border=True)
    columns[1].metric(
        "Savings vs all on-demand",
        _money(s["savings_vs_on_demand_usd"]),
        f"{s['savings_vs_on_demand_pct']:.1%} of {_money(s['on_demand_monthly_usd'])}",
        border=True,
    )
    columns[2].metric(
        "$ per million tokens",
        common.unit_price(s["usd_per_million_tokens"]),
        border=True,
    )
    if s.get("savings_vs_current_usd") is not None:
        columns[3].metric(
            "Savings vs the current fleet",
            _money(s["savings_vs_current_usd"]),
            f"{s['savings_vs_current_pct']:.1%} of {_money(s['current_fleet_monthly_usd'])}",
            border=True,
        )
    else:
        columns[3].metric("Peak instances", f"{s['peak_instances']:,}", border=True)
    st.markdown(f"**{report.title}** · {s['fleet']} · {s['purchase']}")
    data = common.stored_recommendation(
        common.store_url(), common.version(), report.recommendation_id
    )
    st.info(common.planned_load(data.get("demand")), icon=":material/scale:")
    st.markdown("\n".join(f"- {line}" for line in report.key_assumptions))


def _tables(report: Report) -> None:
    from planner.report.charts import report_figures

    figures = report_figures(report)
    for key, fig in figures.items():
        common.chart(fig, key=f"reports-chart-{key}")
    totals = pd.DataFrame(
        {
            f"{scenario} ({view})": report.monthly_totals(scenario, view)
            for scenario in ("low", "expected", "high")
            for view in ("cash", "amortized")
        }
    ).reset_index()
    by_model = None
    if report.showback is not None:  # a fleet of pools: what each model and pool costs
        from planner.report.model import showback_by_model

        by_model = showback_by_model(report.showback)
    sections: list[tuple[str, pd.DataFrame | None]] = [
        ("Monthly totals", totals),
        ("Showback per model", by_model),
        ("Showback per pool", report.showback),
        ("12-month projection", report.projection),
        ("Commitment schedule", report.commitments),
        ("Sensitivity", report.sensitivity),
        ("Assumptions and sources", report.assumptions),
        ("Plan vs actual", report.actuals),
    ]
    for title, frame in sections:
        if frame is None:
            continue
        opened = title.startswith(("Monthly", "Showback"))
        with st.expander(f"{title} ({common.plural(len(frame), 'row')})", expanded=opened):
            common.table(frame, width="stretch", column_config=_column_config(frame))
            slug = title.lower().replace(" ", "-").replace(",", "").replace("$", "usd")
            common.download_table(frame, f"report-{report.recommendation_id}-{slug}", key=slug)


def _actuals(report: Report) -> Report:
    """Plan vs actual: actual spend from a GCP billing export (uploaded), AWS Cost Explorer or
    Azure Cost Management (credentials from the server's own SDK chains)."""
    from planner.report.export import ActualSources, with_actuals

    st.subheader("Plan vs actual")
    st.caption(
        "Actual spend of the report's months that have begun, set against the plan: set the "
        "first month to the month the plan began. AWS and Azure are read with the credentials "
        "of the machine the dashboard runs on (their SDKs' own chains); none is stored."
    )
    left, middle, right = st.columns(3)
    aws = left.checkbox("AWS Cost Explorer", key="reports-aws")
    scope = middle.text_input(
        "Azure scope", placeholder="/subscriptions/...", key="reports-azure-scope"
    )
    export = right.file_uploader("GCP billing export (CSV)", type=["csv"], key="reports-gcp")
    if not st.button("Compare with actual spend", key="reports-actuals"):
        return report
    if export is not None:
        with uploaded_file(export.name, export.getvalue()) as path:
            return with_actuals(
                report, ActualSources(aws=aws, azure_scope=scope.strip() or None, gcp_export=path)
            )
    sources = ActualSources(aws=aws, azure_scope=scope.strip() or None)
    if sources:
        return with_actuals(report, sources)
    st.info("Choose at least one source of actual spend.", icon=":material/info:")
    return report


def _focus_metadata(report: Report) -> bytes:
    from planner.report.focus import focus_metadata

    csv = report_bytes(report, "csv")
    name = f"planner-report-{report.recommendation_id}.csv"
    data = focus_metadata(report, name, csv.count(b"\n") - 1, len(csv))
    return json.dumps(data, indent=2, default=str).encode()


def _exported(report: Report, fmt: str, actor: Actor) -> bytes:
    """The file, written when its button is clicked, and the export noted in the audit trail
    for whoever clicked (the download runs outside the page's run: its identity is passed)."""
    data = report_bytes(report, fmt)
    with acting_as(actor):
        record_export(common.session, report.recommendation_id, fmt)
    return data


def _downloads(report: Report) -> None:
    """The files are written when a button is clicked (a PDF takes seconds), not on every
    rerun of the page."""
    st.subheader("Download")
    columns = st.columns(len(FORMATS) + 1)
    name = f"planner-report-{report.recommendation_id}"
    for column, (fmt, label) in zip(columns[:-1], FORMATS.items(), strict=True):
        column.download_button(
            label,
            functools.partial(_exported, report, fmt, signin.run_actor()),
            file_name=f"{name}.{fmt}",
            mime=MEDIA_TYPES[fmt],
            key=f"reports-download-{fmt}",
            icon=":material/download:",
        )
    columns[-1].download_button(
        "FOCUS metadata (JSON)",
        functools.partial(_focus_metadata, report),
        file_name=f"{name}.focus-metadata.json",
        mime="application/json",
        key="reports-download-focus-metadata",
        icon=":material/download:",
    )
    st.caption(
        "The FOCUS CSV holds every scenario (column x_Scenario): filter to one before adding "
        "up. Its metadata (FOCUS version, column definitions) is the JSON beside it."
    )


def _page() -> None:
    st.title("Reports")
    st.caption(
        "The finance report of a stored recommendation, as `planner report` writes it: executive "
        "summary, 12-month projection (low / expected / high, cash and amortized), commitment "
        "schedule, sensitivity, assumptions and sources, and plan vs actual."
    )
    url, version = common.store_url(), common.version()
    stored = common.stored_recommendations(url, version)
    if not stored:
        common.empty_store_hint("stored recommendations")
        common.link("recommend", "Find a fleet on the Recommendations page")
        return
    by_id = {b["id"]: b for b in stored}
    columns = st.columns([3, 1, 1, 1])
    chosen = columns[0].selectbox(
        "Stored recommendation",
        list(by_id),
        index=len(by_id) - 1,  # the newest
        format_func=lambda i: common.recommendation_label(by_id[i]),
        key="reports-recommendation",
    )
    months = int(
        columns[1].number_input("Months", min_value=1, max_value=60, value=12, key="reports-months")
    )
    first = columns[2].text_input(
        "First month (YYYY-MM)", placeholder="next month", key="reports-first-month"
    )
    current = columns[3].number_input(
        "Current fleet, $ a month",
        min_value=0.0,
        value=None,
        placeholder="optional",
        key="reports-current",
    )
    if by_id[chosen]["winner"] is None:
        st.warning(
            f"Recommendation #{chosen} found no fleet that meets its targets: there is nothing "
            "to report. Its tables are on the Recommendations page.",
            icon=":material/warning:",
        )
        return
    report = _report(
        url, version, int(chosen), months, _first_month(first), float(current) if current else None
    )
    _summary(report)
    report = _actuals(report)
    _tables(report)
    _downloads(report)
    common.link("recommend", "See the recommendation behind it")


with common.shown_errors():
    _page()
