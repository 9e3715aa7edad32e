"""``planner report``: a stored recommendation as a finance report (Excel, PDF or FOCUS CSV),
optionally with the actual spend from the clouds set against it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from planner.cli.context import print_json, sessions_from, stderr, stdout
from planner.common.files import check_output_path
from planner.common.text import shown
from planner.errors import UsageError

if TYPE_CHECKING:
    from planner.report.model import Report
    from planner.usecases.report import ReportRequest

#: the most a fleet can cost a month, USD, for --current-monthly-usd
MAX_MONTHLY_USD = 1e10


def report_command(
    ctx: typer.Context,
    recommendation: int = typer.Option(
        ...,
        "--recommendation",
        min=1,
        max=2**63 - 1,
        help="Stored recommendation id (`planner recommendations list`).",
    ),
    out: Path = typer.Option(..., "--out", help="File to write: .xlsx, .pdf or .csv."),
    fmt: str | None = typer.Option(
        None, "--format", help="xlsx, pdf or csv (FOCUS); default: from --out's suffix."
    ),
    months: int = typer.Option(12, "--months", min=1, max=60, help="Months to project."),
    first_month: str | None = typer.Option(
        None,
        "--first-month",
        help="First month of the plan, YYYY-MM (default: next month; the month the plan began "
        "to compare with actual spend).",
    ),
    current_monthly: float | None = typer.Option(
        None,
        "--current-monthly-usd",
        help="What the current fleet costs a month, for the savings against it.",
    ),
    actuals_aws: bool = typer.Option(
        False,
        "--actuals-aws",
        help="Actual spend from AWS Cost Explorer (credentials from boto3's default chain).",
    ),
    actuals_azure: str | None = typer.Option(
        None,
        "--actuals-azure",
        metavar="SCOPE",
        help="Actual spend from Azure Cost Management for this scope, e.g. "
        "/subscriptions/ID (credentials from DefaultAzureCredential).",
    ),
    actuals_gcp: Path | None = typer.Option(
        None,
        "--actuals-gcp",
        metavar="CSV",
        help="Actual spend from a GCP billing export (BigQuery export schema, as CSV).",
    ),
    max_actual_usd: float = typer.Option(
        1e9,
        "--max-actual-usd",
        help="Largest amount (either sign) taken as one charge of actual spend: a line item of "
        "the GCP export, a month of AWS or Azure spend; a larger one is refused as implausible. "
        "Raise it for a bill that large.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report's summary as JSON."),
) -> None:
    """A finance report of a stored recommendation: cost projection, commitment schedule,
    sensitivity, assumptions and plan vs actual."""
    from planner.report.export import format_for, write_report
    from planner.usecases.report import build_report, record_export

    chosen = format_for(out, fmt)
    check_output_path(out, "--out")
    request = _request(
        recommendation,
        months,
        first_month,
        current_monthly,
        (actuals_aws, actuals_azure, actuals_gcp, max_actual_usd),
    )
    with sessions_from(ctx) as sessions:
        report = build_report(request, sessions)
    # every source is read before anything is written: a failure leaves no file behind
    written = write_report(report, chosen, out)
    with sessions_from(ctx) as sessions:
        record_export(sessions, recommendation, chosen)
    _render(report, chosen, written, as_json)


def _request(
    recommendation: int,
    months: int,
    first_month: str | None,
    current_monthly: float | None,
    actuals: tuple[bool, str | None, Path | None, float],
) -> ReportRequest:
    """The options as a report request, checked as the options they are (``actuals``: the
    values of --actuals-aws, --actuals-azure, --actuals-gcp and --max-actual-usd)."""
    from planner.report.export import ActualSources
    from planner.usecases.report import ReportRequest, parse_month

    aws, azure, gcp, max_actual_usd = actuals
    start = parse_month(first_month)
    if current_monthly is not None and not (
        math.isfinite(current_monthly) and 0 < current_monthly <= MAX_MONTHLY_USD
    ):
        raise UsageError(
            f"--current-monthly-usd {current_monthly:g}: expected a positive amount of dollars, "
            f"at most {MAX_MONTHLY_USD:,.0f}"
        )
    if not (math.isfinite(max_actual_usd) and max_actual_usd > 0):
        raise UsageError(f"--max-actual-usd {max_actual_usd:g}: expected a positive amount of USD")
    if gcp is not None and not gcp.is_file():
        raise UsageError(f"--actuals-gcp {shown(str(gcp))}: no such file")
    if azure is not None and not azure.strip().startswith("/"):
        raise UsageError(
            f"--actuals-azure {shown(azure)}: expected a scope such as "
            "/subscriptions/00000000-0000-0000-0000-000000000000"
        )
    sources = ActualSources(
        aws=aws, azure_scope=azure, gcp_export=gcp, max_amount_usd=max_actual_usd
    )
    return ReportRequest(
        recommendation,
        months=months,
        first_month=start,
        current_fleet_monthly_usd=current_monthly,
        actuals=sources,
    )


def _render(report: Report, chosen: str, written: Path, as_json: bool) -> None:
    from planner.report.export import FORMATS, summary_json

    if as_json:
        data = summary_json(report)
        data["format"] = chosen
        data["out"] = str(written)
        print_json(data)
        return
    summary = report.summary
    stdout.print(f"wrote {written} ({FORMATS[chosen]})", markup=False)
    stdout.print(f"  {report.title}", markup=False)
    stdout.print(
        f"  ${summary['monthly_usd']:,.2f} a month; ${summary['savings_vs_on_demand_usd']:,.2f} "
        f"({summary['savings_vs_on_demand_pct']:.1%}) less than all on demand",
        markup=False,
    )
    expected = report.monthly_totals("expected", "cash")
    stdout.print(
        f"  {len(expected)} months from {summary['first_month']:%Y-%m}: "
        f"${expected.sum():,.2f} expected (cash), "
        f"${report.monthly_totals('low', 'cash').sum():,.2f} to "
        f"${report.monthly_totals('high', 'cash').sum():,.2f}",
        markup=False,
    )
    if report.actuals is not None and not report.actuals.empty:
        actual = report.actuals
        stdout.print(
            f"  actual spend ${actual['actual_usd'].sum():,.2f} against "
            f"${actual['planned_usd'].sum():,.2f} planned over {actual['month'].nunique()} "
            "month(s)",
            markup=False,
        )
    for note in report.notes:
        stderr.print(f"note: {note}", markup=False, soft_wrap=True)
