"""One report in one of its formats, with the actual spend set against it when asked: what
``planner report`` and the dashboard's Reports page both call."""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from planner.common.text import shown
from planner.errors import UsageError
from planner.report.model import Report, first_of_next_month

FORMATS = {"xlsx": "Excel workbook", "pdf": "PDF document", "csv": "FOCUS CSV"}
MEDIA_TYPES = {
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pdf": "application/pdf",
    "csv": "text/csv",
}


def format_for(path: Path, explicit: str | None) -> str:
    """The format asked for, else the one ``path``'s suffix names."""
    if explicit is not None:
        chosen = explicit.strip().lower()
        if chosen not in FORMATS:
            raise UsageError(f"--format {shown(explicit)}: expected one of {', '.join(FORMATS)}")
        return chosen
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        given = shown(path.suffix or "(no suffix)")
        raise UsageError(
            f"--out {shown(str(path))}: cannot tell the format from {given}; "
            "name a .xlsx, .pdf or .csv file or give --format"
        )
    return suffix


def write_report(report: Report, fmt: str, path: Path) -> Path:
    """Write ``report`` as ``fmt`` to ``path`` (whole or not at all)."""
    if fmt == "xlsx":
        from planner.report.excel import write_workbook

        return write_workbook(report, path)
    if fmt == "pdf":
        from planner.report.pdf import write_pdf

        return write_pdf(report, path)
    if fmt == "csv":
        from planner.report.focus import write_focus_csv

        return write_focus_csv(report, path)
    raise UsageError(f"format {shown(fmt)}: expected one of {', '.join(FORMATS)}")


def report_bytes(report: Report, fmt: str) -> bytes:
    """The file's bytes, for a download."""
    suffix = "csv" if fmt == "csv" else fmt
    with tempfile.TemporaryDirectory(prefix="planner-report-") as folder:
        path = write_report(report, fmt, Path(folder) / f"report.{suffix}")
        return path.read_bytes()


@dataclass(frozen=True)
class ActualSources:
    """Where actual spend comes from; credentials only from each SDK's own default chain."""

    aws: bool = False
    azure_scope: str | None = None
    gcp_export: Path | None = None
    #: the largest amount taken as one charge (None: ``actuals_common.MAX_AMOUNT_USD``)
    max_amount_usd: float | None = None

    def __bool__(self) -> bool:
        return self.aws or self.azure_scope is not None or self.gcp_export is not None


def actual_window(report: Report, today: date | None = None) -> tuple[date, date]:
    """The report's months that have begun: from its first month to the start of next month
    (exclusive), or its last month's end if that comes first."""
    first: date = report.summary["first_month"]
    months: int = report.summary["months"]
    end = first
    for _ in range(months):
        end = first_of_next_month(end)
    now = today or datetime.now(UTC).date()
    stop = min(end, first_of_next_month(now))
    if stop <= first:
        raise UsageError(
            f"the report starts {first:%Y-%m}, after this month: there is no actual spend to "
            "compare yet (give --first-month the month the plan began)"
        )
    return first, stop


def with_actuals(report: Report, sources: ActualSources, today: date | None = None) -> Report:
    """``report`` with the actual spend of its months that have begun set against the plan."""
    if not sources:
        return report
    from planner.report.actuals import aws_actuals, azure_actuals, gcp_actuals, plan_vs_actual

    frames: list[pd.DataFrame] = []
    if sources.aws or sources.azure_scope is not None:
        start, end = actual_window(report, today)  # the APIs are asked for these months
        if sources.aws:
            frames.append(aws_actuals(start, end, max_amount_usd=sources.max_amount_usd))
        if sources.azure_scope is not None:
            frames.append(
                azure_actuals(
                    sources.azure_scope, start, end, max_amount_usd=sources.max_amount_usd
                )
            )
    if sources.gcp_export is not None:  # an export holds the months it holds
        frames.append(gcp_actuals(sources.gcp_export, max_amount_usd=sources.max_amount_usd))
    actual = pd.concat(frames, ignore_index=True)
    return report.with_actuals(plan_vs_actual(report, actual))


def summary_json(report: Report) -> dict[str, Any]:
    """The report's headline figures and totals, for ``--json``."""
    totals = {
        scenario: {
            view: round(float(report.monthly_totals(scenario, view).sum()), 2)
            for view in ("cash", "amortized")
        }
        for scenario in ("low", "expected", "high")
    }
    data: dict[str, Any] = {
        "recommendation_id": report.recommendation_id,
        "title": report.title,
        "built_at": report.built_at.isoformat(),
        "planner_version": report.planner_version,
        "currency": report.currency,
        "summary": {
            k: (v.isoformat() if isinstance(v, date) else v) for k, v in report.summary.items()
        },
        "key_assumptions": report.key_assumptions,
        "totals_usd": totals,
        "commitments": len(report.commitments),
        "notes": report.notes,
    }
    if report.actuals is not None:
        data["actuals"] = [
            {k: _json_value(v) for k, v in row.items()}
            for row in report.actuals.to_dict(orient="records")
        ]
    return data


def _json_value(value: Any) -> Any:
    """Dates as ISO text; NaN (no plan to compare with) as null, which JSON can carry."""
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
