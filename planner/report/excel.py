"""The finance report as an Excel workbook: one sheet per section, totals and variances as real
formulas (so finance can audit them and any spreadsheet recalculates them), native charts, and a
page setup that prints one page wide.

Nothing here computes a figure: values come from the :class:`~planner.report.model.Report` as
they are (unrounded; cells round for display), and every total on the sheets is a formula over
those cells (SUMIFS by month, scenario and purchase option; SUM for grand totals; actual minus
planned for variances).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from openpyxl import Workbook  # type: ignore[import-untyped]
from openpyxl.chart import BarChart, LineChart, Reference  # type: ignore[import-untyped]
from openpyxl.chart.text import RichText  # type: ignore[import-untyped]
from openpyxl.drawing.text import (  # type: ignore[import-untyped]
    CharacterProperties,
    Paragraph,
    ParagraphProperties,
    RichTextProperties,
)
from openpyxl.styles import Alignment, Border, Font, PatternFill, Side  # type: ignore[import-untyped]
from openpyxl.utils import get_column_letter  # type: ignore[import-untyped]

from planner.common.colours import purchase_colour
from planner.common.files import atomic_output, check_output_path
from planner.report.model import API_OPTION, SCENARIOS, Report

# Number formats (Excel codes; LibreOffice reads the same).
MONEY = "$#,##0.00"
MONEY_WHOLE = "$#,##0"  # chart axes
PERCENT = "0.0%"
PERCENT_FINE = "0.00%"  # SLO attainment: 99.92% must not show as 99.9%
MONTH = "yyyy-mm"
TIMESTAMP = 'yyyy-mm-dd hh:mm "UTC"'
HOURS = "#,##0.0"
MILLIONS = "#,##0.00"
UNIT_PRICE = "$#,##0.0000"  # $ per million tokens
FACTOR = '0.00"x"'
MILLISECONDS = "#,##0"
COUNT = "#,##0"
MEAN_COUNT = "#,##0.0"

DETAIL = "Projection detail"
SHOWBACK = "Showback"  # a fleet of pools only
SHEETS = (
    "Summary",
    "Projection",
    DETAIL,
    "Commitments",
    "Sensitivity",
    "Assumptions",
    "Plan vs actual",  # only with actual spend
)

# Every sheet: title on row 1, what the sheet shows on row 2, table headers on row 4; panes
# frozen under the headers and the header row repeated on every printed page.
HEADER_ROW = 4
FIRST_ROW = HEADER_ROW + 1

HEADER_FONT = Font(bold=True, color="FFFFFF")
HEADER_FILL = PatternFill("solid", fgColor="1F4E79")
HEADER_ALIGNMENT = Alignment(wrap_text=True, vertical="center", horizontal="center")
SECTION_FONT = Font(bold=True, size=12, color="1F4E79")
SECTION_FILL = PatternFill("solid", fgColor="DDEBF7")
TOTAL_FONT = Font(bold=True)
TOTAL_FILL = PatternFill("solid", fgColor="F2F2F2")
TITLE_FONT = Font(bold=True, size=16, color="1F4E79")
NOTE_FONT = Font(italic=True, color="595959")
THIN = Side(style="thin", color="BFBFBF")
CELL_BORDER = Border(left=THIN, right=THIN, top=THIN, bottom=THIN)
WRAP_TOP = Alignment(wrap_text=True, vertical="top")

SCENARIO_COLOURS = {"low": "2CA02C", "expected": "1F4E79", "high": "D62728"}
SENSITIVITY_KINDS = {
    "load": "Load",
    "spot_interruptions": "Spot interruptions",
    "price": "Prices",
}
# Characters XML 1.0 cannot carry (openpyxl refuses them): dropped from text cells.
ILLEGAL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def write_workbook(report: Report, path: Path, option: str = "--out") -> Path:
    """Write ``report`` as an .xlsx workbook to ``path``, whole or not at all (a failure leaves
    no file, and an existing file as it was). Raises :class:`~planner.errors.UsageError` naming
    ``option`` when the path cannot be written."""
    check_output_path(path, option)
    workbook = build_workbook(report)
    with atomic_output(path, option) as temp:
        workbook.save(temp)
    return path


def build_workbook(report: Report) -> Any:
    """The workbook of ``report`` (an ``openpyxl.Workbook``), not yet saved."""
    workbook = Workbook()
    names = list(SHEETS if report.actuals is not None else SHEETS[:-1])
    if report.showback is not None:  # a fleet of pools: its showback after the summary
        names.insert(1, SHOWBACK)
    sheets = {name: workbook.create_sheet(name) for name in names}
    workbook.remove(workbook["Sheet"])

    rows = _projection_detail_sheet(sheets[DETAIL], report)
    projection = _projection_sheet(sheets["Projection"], report, rows)
    _commitments_sheet(sheets["Commitments"], report)
    _sensitivity_sheet(sheets["Sensitivity"], report)
    _assumptions_sheet(sheets["Assumptions"], report)
    if report.showback is not None:
        _showback_sheet(sheets[SHOWBACK], report.showback, report.currency)
    actuals = None
    if report.actuals is not None:
        actuals = _plan_vs_actual_sheet(sheets["Plan vs actual"], report.actuals)
    _summary_sheet(sheets["Summary"], report, projection, actuals)

    for sheet in workbook.worksheets:
        _fit_rows(sheet)
        _page_setup(sheet, report)
    workbook.active = 0
    _properties(workbook, report)
    # No cached values are stored with the formulas: have Excel compute them all on opening
    # (LibreOffice computes formulas that carry no value anyway).
    workbook.calculation.fullCalcOnLoad = True
    return workbook


# --------------------------------------------------------------------------------------------
# Sheets


@dataclass(frozen=True)
class DetailRanges:
    """The Projection detail's columns as absolute ranges (``'Projection detail'!$H$5:$H$76``),
    by column name, for the totals' SUMIFS."""

    ranges: dict[str, str]
    months: list[date]
    options: list[str]

    def __getitem__(self, column: str) -> str:
        return self.ranges[column]


@dataclass
class ProjectionCells:
    """Where the Projection sheet's totals are, for the Summary's formulas."""

    months: int
    # (scenario, "cash" | "amortized") -> the whole projection's total cell, the monthly range
    totals: dict[tuple[str, str], str] = field(default_factory=dict)
    monthly: dict[tuple[str, str], str] = field(default_factory=dict)


@dataclass
class ActualCells:
    actual_total: str
    planned_total: str
    variance_total: str
    variance_pct_total: str
    months: int


PROJECTION_TABLE = (
    # (column, header, number format)
    ("month", "Month", MONTH),
    ("scenario", "Scenario", None),
    ("provider", "Provider", None),
    ("region", "Region", None),
    ("instance_type", "Instance type", None),
    ("purchase_option", "Purchase option", None),
    ("instance_hours", "Instance-hours (hours)", HOURS),
    ("cash_usd", "Cash cost ($ in the month)", MONEY),
    ("amortized_usd", "Amortized cost ($ in the month)", MONEY),
    ("upfront_usd", "Upfront paid ($)", MONEY),
    ("tokens_millions", "Tokens served (millions)", MILLIONS),
)
# a plan with per-token API pools: their rows' tokens and prices (empty on instance rows)
API_TABLE = (
    ("input_tokens_millions", "Input tokens (millions)", MILLIONS),
    ("output_tokens_millions", "Output tokens (millions)", MILLIONS),
    ("input_usd_per_mtok", "$ per million input tokens", UNIT_PRICE),
    ("output_usd_per_mtok", "$ per million output tokens", UNIT_PRICE),
)
VIEWS = (("cash", "cash_usd"), ("amortized", "amortized_usd"))
# a fleet of pools' rows also name the model and pool they belong to
POOL_COLUMNS = (("model", "Model", None), ("pool", "Pool", None))


def _with_pools(table: tuple[Any, ...], frame: pd.DataFrame) -> tuple[Any, ...]:
    """``table``'s columns, with the model and pool first when ``frame`` carries them."""
    if all(name in frame.columns for name, _, _ in POOL_COLUMNS):
        return POOL_COLUMNS + tuple(table)
    return tuple(table)


def _projection_detail_sheet(ws: Any, report: Report) -> DetailRanges:
    """One row per month, scenario, provider, region, instance type and purchase option."""
    frame = _sorted_projection(report.projection)
    table = _with_pools(PROJECTION_TABLE, frame)
    api = "input_tokens" in frame.columns
    if api:  # per-token API pools: the offer in the instance type's column, tokens and prices
        frame = frame.assign(
            input_tokens_millions=frame["input_tokens"] / 1e6,
            output_tokens_millions=frame["output_tokens"] / 1e6,
        )
        table = (
            tuple(
                (n, "Instance type or API offer", f) if n == "instance_type" else (n, h, f)
                for n, h, f in table
            )
            + API_TABLE
        )
    _title(
        ws,
        "12-month cost projection: every row",
        "One row per month, scenario, "
        + ("model, pool, " if "pool" in frame.columns else "")
        + "provider, region, instance type and purchase option; the Projection sheet adds "
        "them up by formulas. Cash: what is paid in the month, "
        "upfronts when paid. Amortized: usage plus each upfront spread evenly over its term. "
        + (
            f"Rows of purchase option \u201c{API_OPTION}\u201d are a per-token API's: its "
            "input and output tokens at their prices per million tokens, no instance-hours. "
            if api
            else ""
        )
        + f"Money in {report.currency}.",
        last_column=len(table),
    )
    _headers(ws, HEADER_ROW, 1, [header for _, header, _ in table])
    for offset, values in enumerate(_records(frame)):
        row = FIRST_ROW + offset
        for i, (name, _, number_format) in enumerate(table):
            _put(ws.cell(row, i + 1), values[name], number_format)
    if frame.empty:
        _note(ws, FIRST_ROW, "The projection is empty.")
    ws.auto_filter.ref = f"A{HEADER_ROW}:{get_column_letter(len(table))}{HEADER_ROW}"
    _fit_columns(ws)
    last = FIRST_ROW + max(len(frame), 1) - 1
    ranges = {}
    for i, (name, _, _) in enumerate(table):
        letter = get_column_letter(i + 1)
        ranges[name] = f"'{DETAIL}'!${letter}${FIRST_ROW}:${letter}${last}"
    months = sorted(set(frame["month"]))
    return DetailRanges(ranges, months, _purchase_options(frame))


def _projection_sheet(ws: Any, report: Report, rows: DetailRanges) -> ProjectionCells:
    """Monthly totals by scenario (cash and amortized) and, for the expected scenario, by
    purchase option: SUMIFS over the Projection detail; totals as SUM; two charts."""
    _title(
        ws,
        "12-month cost projection",
        "Totals per month as formulas over the Projection detail sheet. Cash: what is paid in "
        "the month, upfronts when paid. Amortized: usage plus each upfront spread evenly over "
        "its term. Low / expected / high follow the forecast's bands. Money in "
        f"{report.currency}.",
        last_column=15,
    )
    months = rows.months
    _section(ws, HEADER_ROW - 1, 1, "Monthly totals by scenario ($ per month)")
    headers = ["Month"]
    headers += [f"{s.capitalize()}: {view}" for s in SCENARIOS for view, _ in VIEWS]
    _headers(ws, HEADER_ROW, 1, headers)
    cells = ProjectionCells(months=len(months))
    total_row = FIRST_ROW + len(months)
    for offset, month in enumerate(months):
        row = FIRST_ROW + offset
        _put(ws.cell(row, 1), month, MONTH)
        column = 1
        for scenario in SCENARIOS:
            for _view, source in VIEWS:
                column += 1
                formula = _Formula(
                    f"=SUMIFS({rows[source]},{rows['month']},$A{row},"
                    f'{rows["scenario"]},"{scenario}")'
                )
                _put(ws.cell(row, column), formula, MONEY)
    _total_label(ws.cell(total_row, 1), f"Total, {len(months)} months")
    column = 1
    for scenario in SCENARIOS:
        for view, _ in VIEWS:
            column += 1
            letter = get_column_letter(column)
            monthly = f"${letter}${FIRST_ROW}:${letter}${total_row - 1}"
            _put(ws.cell(total_row, column), _Formula(f"=SUM({monthly})"), MONEY)
            _total_style(ws.cell(total_row, column))
            cells.totals[(scenario, view)] = f"Projection!${letter}${total_row}"
            cells.monthly[(scenario, view)] = f"Projection!{monthly}"

    # Expected scenario by purchase option, amortized (a commitment's upfront would otherwise
    # dwarf its first month): SUMIFS by month and by the option named in the header cell.
    options = rows.options
    block_header = total_row + 3
    _section(
        ws, block_header - 1, 1, "Expected scenario by purchase option: amortized ($ per month)"
    )
    _headers(ws, block_header, 1, ["Month", *options, "All options"])
    for offset, month in enumerate(months):
        row = block_header + 1 + offset
        _put(ws.cell(row, 1), month, MONTH)
        for i, _option in enumerate(options):
            option_cell = f"{get_column_letter(2 + i)}${block_header}"
            formula = _Formula(
                f"=SUMIFS({rows['amortized_usd']},{rows['month']},$A{row},"
                f'{rows["scenario"]},"expected",{rows["purchase_option"]},{option_cell})'
            )
            _put(ws.cell(row, 2 + i), formula, MONEY)
        every = f"=SUM(B{row}:{get_column_letter(1 + len(options))}{row})" if options else "=0"
        _put(ws.cell(row, 2 + len(options)), _Formula(every), MONEY)
    option_total_row = block_header + 1 + len(months)
    _total_label(ws.cell(option_total_row, 1), f"Total, {len(months)} months")
    for i in range(len(options) + 1):
        letter = get_column_letter(2 + i)
        cell = ws.cell(option_total_row, 2 + i)
        total = f"=SUM({letter}{block_header + 1}:{letter}{option_total_row - 1})"
        _put(cell, _Formula(total), MONEY)
        _total_style(cell)

    _fit_columns(ws, minimum=12)
    if months:
        chart_column = get_column_letter(max(len(SCENARIOS) * 2, len(options) + 1) + 3)
        ws.add_chart(_scenario_chart(ws, total_row), f"{chart_column}{HEADER_ROW - 1}")
        chart = _purchase_chart(ws, block_header, options, len(months))
        ws.add_chart(chart, f"{chart_column}{block_header - 1}")
    return cells


def _sorted_projection(projection: pd.DataFrame) -> pd.DataFrame:
    order = {scenario: i for i, scenario in enumerate(SCENARIOS)}
    frame = projection.copy()
    frame["_scenario_order"] = frame["scenario"].map(lambda s: order.get(s, len(order)))
    keys = ["_scenario_order", "month", "provider", "region", "instance_type", "purchase_option"]
    if "pool" in frame.columns:  # a fleet: each pool's rows together within a month
        keys = ["_scenario_order", "month", "pool", *keys[2:]]
    return frame.sort_values(keys, kind="stable").drop(columns="_scenario_order")


def _purchase_options(frame: pd.DataFrame) -> list[str]:
    """The purchase options in the projection: commitments first (the base of the stacked
    bars), then spot, then on demand."""
    last = {"spot": 1, "on-demand": 2}
    present = set(frame["purchase_option"].astype(str))
    return sorted(present, key=lambda option: (last.get(option, 0), option))


def _scenario_chart(ws: Any, total_row: int) -> Any:
    chart = LineChart()
    chart.title = "Monthly cost by scenario (amortized)"
    chart.y_axis.title = "$ per month"
    chart.x_axis.title = "Month"
    chart.y_axis.number_format = MONEY_WHOLE
    for i, scenario in enumerate(SCENARIOS):
        column = 3 + 2 * i  # the amortized column of each scenario
        data = Reference(ws, min_col=column, min_row=HEADER_ROW, max_row=total_row - 1)
        chart.add_data(data, titles_from_data=True)
        series = chart.series[-1]
        series.graphicalProperties.line.solidFill = SCENARIO_COLOURS.get(scenario, "7F7F7F")
        series.graphicalProperties.line.width = 28575  # 2.25 pt
        series.smooth = False
    categories = Reference(ws, min_col=1, min_row=FIRST_ROW, max_row=total_row - 1)
    chart.set_categories(categories)
    return _sized(chart)


def _purchase_chart(ws: Any, header_row: int, options: Sequence[str], months: int) -> Any:
    chart = BarChart()
    chart.type = "col"
    chart.grouping = "stacked"
    chart.overlap = 100
    chart.title = "Expected monthly cost by purchase option (amortized)"
    chart.y_axis.title = "$ per month"
    chart.x_axis.title = "Month"
    chart.y_axis.number_format = MONEY_WHOLE
    for i, option in enumerate(options):
        data = Reference(ws, min_col=2 + i, min_row=header_row, max_row=header_row + months)
        chart.add_data(data, titles_from_data=True)
        colour = purchase_colour(option).lstrip("#")
        chart.series[-1].graphicalProperties.solidFill = colour
        chart.series[-1].graphicalProperties.line.solidFill = colour
    categories = Reference(ws, min_col=1, min_row=header_row + 1, max_row=header_row + months)
    chart.set_categories(categories)
    return _sized(chart)


def _sized(chart: Any) -> Any:
    chart.width = 17  # cm
    chart.height = 8.5
    chart.legend.position = "b"
    # openpyxl 3.1 marks axes deleted unless told otherwise (Excel then draws none)
    chart.x_axis.delete = False
    chart.y_axis.delete = False
    chart.x_axis.number_format = MONTH
    chart.x_axis.txPr = _rotated_labels()
    return chart


def _rotated_labels() -> Any:
    """Axis labels turned 45 degrees, so twelve YYYY-MM months fit without wrapping."""
    body = RichTextProperties(rot=-2700000, vert="horz")
    size = CharacterProperties(sz=800)
    return RichText(
        bodyPr=body, p=[Paragraph(pPr=ParagraphProperties(defRPr=size), endParaRPr=size)]
    )


COMMITMENT_TABLE = (
    ("purchase_option", "Purchase option", None),
    ("provider", "Provider", None),
    ("region", "Region", None),
    ("instance_type", "Instance type", None),
    ("term_years", "Term (years)", "0"),
    ("start", "Starts (month)", MONTH),
    ("end", "Ends before (month)", MONTH),
    ("instances", "Instances (savings plans: none)", "#,##0"),
    ("hourly_commitment_usd", "Hourly commitment ($ per hour)", "$#,##0.0000"),
    ("upfront_usd", "Upfront ($, paid at the start)", MONEY),
    ("break_even_utilization", "Break-even utilization (% of committed hours)", PERCENT),
    ("expected_utilization", "Expected utilization (% used, expected scenario)", PERCENT),
    ("coverage", "Coverage (% of the fleet's instance-hours)", PERCENT),
    ("unused_usd_per_month", "Unused commitment ($ per month)", MONEY),
)


def _commitments_sheet(ws: Any, report: Report) -> None:
    frame = report.commitments
    table = _with_pools(COMMITMENT_TABLE, frame)
    _title(
        ws,
        "Commitment schedule: what to buy",
        "Reserved instances, savings plans and committed use discounts the plan buys. Break-even "
        "utilization: the share of committed hours the fleet must use for the commitment to "
        "cost less than on demand (commitment rate / on-demand rate). Unused commitment: "
        "committed dollars a month that buy nothing in the expected scenario. Total over the "
        "term (formula): hourly commitment x hours from start to end, plus the upfront.",
        last_column=len(table) + 1,
    )
    headers = [header for _, header, _ in table] + ["Total over the term ($)"]
    _headers(ws, HEADER_ROW, 1, headers)
    letters = {name: get_column_letter(i + 1) for i, (name, _, _) in enumerate(table)}
    if frame.empty:
        _note(ws, FIRST_ROW, "No commitments: the plan buys on demand (or spot) only.")
        _fit_columns(ws)
        return
    for offset, values in enumerate(_records(frame)):
        row = FIRST_ROW + offset
        for i, (name, _, number_format) in enumerate(table):
            _put(ws.cell(row, i + 1), values[name], number_format)
        hourly, start, end = letters["hourly_commitment_usd"], letters["start"], letters["end"]
        upfront = letters["upfront_usd"]
        term_total = _Formula(f"={hourly}{row}*({end}{row}-{start}{row})*24+{upfront}{row}")
        _put(ws.cell(row, len(table) + 1), term_total, MONEY)
    total_row = FIRST_ROW + len(frame)
    _total_label(ws.cell(total_row, 1), "Total")
    summed = ["instances", "hourly_commitment_usd", "upfront_usd", "unused_usd_per_month"]
    for name in summed:
        column = list(letters).index(name) + 1
        _sum_cell(ws, total_row, column, table[column - 1][2])
    _sum_cell(ws, total_row, len(table) + 1, MONEY)
    for column in range(2, len(table) + 2):
        _total_style(ws.cell(total_row, column))
    _fit_columns(ws)


def _sensitivity_sheet(ws: Any, report: Report) -> None:
    _title(
        ws,
        "Sensitivity: what if load, spot interruptions or prices change",
        "Each case changes one thing. Plan kept: the monthly cost of the fleet and commitments "
        "as bought, under the new case. Re-planned: the monthly cost if the purchase were "
        "chosen again for that case. Saving from re-planning = kept - re-planned (formula).",
        last_column=8,
    )
    headers = [
        "What changes",
        "Case",
        "Factor applied (times)",
        "Plan kept ($ per month)",
        "Re-planned ($ per month)",
        "Saving from re-planning ($ per month)",
        "Saving from re-planning (% of plan kept)",
        "What the re-plan buys",
    ]
    _headers(ws, HEADER_ROW, 1, headers)
    for offset, record in enumerate(_records(report.sensitivity)):
        row = FIRST_ROW + offset
        kind = str(record["kind"])
        _put(ws.cell(row, 1), SENSITIVITY_KINDS.get(kind, kind))
        _put(ws.cell(row, 2), record["case"])
        _put(ws.cell(row, 3), record["factor"], FACTOR)
        _put(ws.cell(row, 4), record["kept_monthly_usd"], MONEY)
        _put(ws.cell(row, 5), record["replanned_monthly_usd"], MONEY)
        _put(ws.cell(row, 6), _Formula(f"=D{row}-E{row}"), MONEY)
        _put(ws.cell(row, 7), _Formula(f'=IF(D{row}=0,"n/a",F{row}/D{row})'), PERCENT)
        _put(ws.cell(row, 8), record["replanned_purchase"])
    if report.sensitivity.empty:
        _note(ws, FIRST_ROW, "No sensitivity cases were computed.")
    _fit_columns(ws)


SHOWBACK_TABLE = (
    # (column, header, number format)
    ("model", "Model", None),
    ("pool", "Pool", None),
    ("provider", "Provider", None),
    ("region", "Region", None),
    ("instance_type", "Instance type", None),
    ("input_tokens", "Input tokens served", None),
    ("share_of_requests", "Share of requests (%)", PERCENT),
    ("purchase", "Purchase", None),
    ("monthly_usd", "Cost ($ per month)", MONEY),
    ("share_of_cost", "Share of cost (%)", PERCENT),
    ("tokens_millions_per_month", "Tokens (millions per month)", MILLIONS),
    ("usd_per_million_tokens", "Cost per million tokens ($)", "$#,##0.0000"),
)


def _showback_sheet(ws: Any, showback: pd.DataFrame, currency: str) -> None:
    """A fleet of pools' showback: one row per pool, then a subtotal per model and the fleet's
    total as formulas ($ per million tokens: the $ over the tokens, so totals agree)."""
    _title(
        ws,
        "Showback: cost per model and pool",
        "What each pool of the fleet costs in an average month (730 hours) as bought, and per "
        "million tokens (input + output) it serves; each model's subtotal and the fleet's total "
        f"are formulas over the pools' rows. Money in {currency}.",
        last_column=len(SHOWBACK_TABLE),
    )
    _headers(ws, HEADER_ROW, 1, [header for _, header, _ in SHOWBACK_TABLE])
    letters = {name: get_column_letter(i + 1) for i, (name, _, _) in enumerate(SHOWBACK_TABLE)}
    summed = ("share_of_requests", "monthly_usd", "share_of_cost", "tokens_millions_per_month")
    money, tokens = letters["monthly_usd"], letters["tokens_millions_per_month"]
    per_million = list(letters).index("usd_per_million_tokens") + 1
    row = FIRST_ROW
    subtotals: list[int] = []
    for model, pools in showback.groupby("model", sort=False):
        first = row
        for values in _records(pools):
            for i, (name, _, number_format) in enumerate(SHOWBACK_TABLE):
                _put(ws.cell(row, i + 1), values[name], number_format)
            row += 1
        _total_label(ws.cell(row, 1), f"{model}: all pools")
        for name in summed:
            column = list(letters).index(name) + 1
            letter = letters[name]
            formula = _Formula(f"=SUM({letter}{first}:{letter}{row - 1})")
            _put(ws.cell(row, column), formula, SHOWBACK_TABLE[column - 1][2])
        ratio = _Formula(f'=IF({tokens}{row}=0,"n/a",{money}{row}/{tokens}{row})')
        _put(ws.cell(row, per_million), ratio, "$#,##0.0000")
        for column in range(1, len(SHOWBACK_TABLE) + 1):
            _total_style(ws.cell(row, column))
        subtotals.append(row)
        row += 1
    _total_label(ws.cell(row, 1), "Fleet")
    for name in summed:
        column = list(letters).index(name) + 1
        cells = ",".join(f"{letters[name]}{r}" for r in subtotals) or "0"
        _put(ws.cell(row, column), _Formula(f"=SUM({cells})"), SHOWBACK_TABLE[column - 1][2])
    ratio = _Formula(f'=IF({tokens}{row}=0,"n/a",{money}{row}/{tokens}{row})')
    _put(ws.cell(row, per_million), ratio, "$#,##0.0000")
    for column in range(1, len(SHOWBACK_TABLE) + 1):
        _total_style(ws.cell(row, column))
    _fit_columns(ws)


def _assumptions_sheet(ws: Any, report: Report) -> None:
    _title(
        ws,
        "Assumptions and sources",
        "Where every input of this report comes from: price sheets and their dates, the "
        "calibration profile and its stated error, the forecast's backtest against the "
        "baseline, and the planner version.",
        last_column=3,
    )
    _headers(ws, HEADER_ROW, 1, ["Item", "Value", "Source"])
    row = FIRST_ROW
    for record in _records(report.assumptions):
        for column, name in enumerate(("item", "value", "source"), start=1):
            _put(ws.cell(row, column), record[name])
            ws.cell(row, column).alignment = WRAP_TOP  # long values wrap, never cut
        row += 1
    _fit_columns(ws, maximum=60)
    if report.notes:
        row += 1
        _section(ws, row, 1, "Notes")
        for note in report.notes:
            row += 1
            _sentence(ws, row, 1, 3, note)


ACTUAL_TABLE = (
    ("month", "Month", MONTH),
    ("provider", "Provider", None),
    ("currency", "Billed currency", None),
    ("actual_usd", "Actual ($)", MONEY),
    ("planned_usd", "Planned, expected scenario ($, cash)", MONEY),
    ("low_usd", "Forecast range: low ($)", MONEY),
    ("high_usd", "Forecast range: high ($)", MONEY),
)


def _plan_vs_actual_sheet(ws: Any, actuals: pd.DataFrame) -> ActualCells:
    _title(
        ws,
        "Plan vs actual",
        "Actual spend from each cloud's billing (AWS Cost Explorer, Azure Cost Management, "
        "GCP billing export) against the plan's expected scenario (cash view), with the "
        "forecast's low and high scenarios as the range. Variance = actual - planned; "
        "variance % = variance / planned (formulas).",
        last_column=len(ACTUAL_TABLE) + 3,
    )
    frame = actuals.sort_values(["month", "provider"], kind="stable")
    headers = [header for _, header, _ in ACTUAL_TABLE]
    headers += ["Variance ($)", "Variance (% of planned)", "Within the forecast range?"]
    _headers(ws, HEADER_ROW, 1, headers)
    for offset, values in enumerate(_records(frame)):
        row = FIRST_ROW + offset
        for i, (name, _, number_format) in enumerate(ACTUAL_TABLE):
            _put(ws.cell(row, i + 1), values[name], number_format)
        _variance_formulas(ws, row, 8, ("D", "E", "F", "G"))
    last = FIRST_ROW + max(len(frame), 1) - 1

    def rows_of(letter: str) -> str:
        return f"${letter}${FIRST_ROW}:${letter}${last}"

    # Monthly totals over all providers (SUMIFS), with variances and a grand total, below.
    months = sorted(set(frame["month"]))
    header_row = last + 3
    _section(ws, header_row - 1, 1, "Monthly totals, all providers")
    block_headers = ["Month", "Actual ($)", "Planned ($)", "Low ($)", "High ($)"]
    block_headers += ["Variance ($)", "Variance (% of planned)", "Within the forecast range?"]
    _headers(ws, header_row, 1, block_headers)
    for offset, month in enumerate(months):
        row = header_row + 1 + offset
        _put(ws.cell(row, 1), month, MONTH)
        for i, source in enumerate(("D", "E", "F", "G")):
            formula = _Formula(f"=SUMIFS({rows_of(source)},{rows_of('A')},$A{row})")
            _put(ws.cell(row, 2 + i), formula, MONEY)
        _variance_formulas(ws, row, 6, ("B", "C", "D", "E"))
    total_row = header_row + 1 + len(months)
    _total_label(ws.cell(total_row, 1), f"Total, {len(months)} months")
    for letter in "BCDE":
        total = _Formula(f"=SUM({letter}{header_row + 1}:{letter}{total_row - 1})")
        _put(ws[f"{letter}{total_row}"], total, MONEY)
    _variance_formulas(ws, total_row, 6, ("B", "C", "D", "E"))
    for column in range(2, 9):
        _total_style(ws.cell(total_row, column))

    _fit_columns(ws)
    if months:
        chart_column = get_column_letter(len(ACTUAL_TABLE) + 5)
        ws.add_chart(_actual_chart(ws, header_row, len(months)), f"{chart_column}{HEADER_ROW}")

    def at(letter: str) -> str:
        return f"'Plan vs actual'!${letter}${total_row}"

    return ActualCells(
        actual_total=at("B"),
        planned_total=at("C"),
        variance_total=at("F"),
        variance_pct_total=at("G"),
        months=len(months),
    )


def _variance_formulas(ws: Any, row: int, column: int, sources: tuple[str, str, str, str]) -> None:
    """Variance ($ and %) and whether the actual is in the forecast's range, in ``column`` and
    the two after it, from the actual, planned, low and high cells (column letters)."""
    actual, planned, low, high = sources
    _put(ws.cell(row, column), _Formula(f"={actual}{row}-{planned}{row}"), MONEY)
    variance = get_column_letter(column)
    pct = _Formula(f'=IF({planned}{row}=0,"n/a",{variance}{row}/{planned}{row})')
    _put(ws.cell(row, column + 1), pct, PERCENT)
    ws.cell(row, column + 1).alignment = Alignment(horizontal="right")  # "n/a" with the numbers
    within = _Formula(f'=IF(AND({actual}{row}>={low}{row},{actual}{row}<={high}{row}),"yes","no")')
    _put(ws.cell(row, column + 2), within)
    ws.cell(row, column + 2).alignment = Alignment(horizontal="center")


def _actual_chart(ws: Any, header_row: int, months: int) -> Any:
    """Actual spend as bars, the plan (expected) and the forecast range (low, high) as lines,
    from the monthly totals block (Month, Actual, Planned, Low, High in columns A to E)."""
    lines = LineChart()
    for column, scenario in ((3, "expected"), (4, "low"), (5, "high")):
        data = Reference(ws, min_col=column, min_row=header_row, max_row=header_row + months)
        lines.add_data(data, titles_from_data=True)
        line = lines.series[-1].graphicalProperties.line
        line.solidFill = SCENARIO_COLOURS[scenario]
        line.width = 28575
        if scenario != "expected":
            line.dashStyle = "dash"
    bars = BarChart()
    bars.type = "col"
    bars.gapWidth = 120
    actual = Reference(ws, min_col=2, min_row=header_row, max_row=header_row + months)
    bars.add_data(actual, titles_from_data=True)
    # Hollow bars: LibreOffice draws bars over lines, whichever comes first, and the plan's
    # line must show through the actual spend.
    bars.series[0].graphicalProperties.noFill = True
    bars.series[0].graphicalProperties.line.solidFill = "595959"
    bars.series[0].graphicalProperties.line.width = 19050  # 1.5 pt
    categories = Reference(ws, min_col=1, min_row=header_row + 1, max_row=header_row + months)
    bars.set_categories(categories)
    lines.set_categories(categories)
    lines.title = "Actual spend vs plan, all providers"
    lines.y_axis.title = "$ per month"
    lines.x_axis.title = "Month"
    lines.y_axis.number_format = MONEY_WHOLE
    lines += bars
    return _sized(lines)


@dataclass(frozen=True)
class Line:
    """One row of the Summary: a figure, its value (or a formula), unit and meaning."""

    label: str
    value: Any
    unit: str
    meaning: str
    number_format: str | None = None


def _summary_lines(
    report: Report, projection: ProjectionCells, actuals: ActualCells | None
) -> list[tuple[str, list[Line]]]:
    """The Summary's rows, in sections."""
    summary = report.summary

    def get(key: str) -> Any:
        return summary.get(key)

    unstated = "" if get("current_fleet_monthly_usd") is not None else " Not stated."
    about = [
        Line("Recommendation", report.recommendation_id, "id",
             "The stored recommendation (planner recommendations list) laid out here.", "0"),
        Line("Built at", _naive_utc(report.built_at), "UTC", "When the report was computed.",
             TIMESTAMP),
        Line("Planner version", report.planner_version, "", "The planner that computed it."),
        Line("First month", get("first_month"), "YYYY-MM", "First month projected.", MONTH),
        Line("Months projected", get("months"), "months", "Length of the projection.", "0"),
    ]  # fmt: skip
    cost = [
        Line("Monthly cost of the recommended fleet", get("monthly_usd"), "$ per month",
             "A 730-hour month at the expected load, purchase as planned, upfronts spread "
             "over their terms.", MONEY),
        Line("Monthly cost, all on demand", get("on_demand_monthly_usd"), "$ per month",
             "The same fleet bought on demand only, for comparison.", MONEY),
        Line("Savings vs all on demand", get("savings_vs_on_demand_usd"), "$ per month",
             "All on demand minus the recommended purchase.", MONEY),
        Line("Savings vs all on demand", get("savings_vs_on_demand_pct"), "% of on demand",
             "The savings as a share of the all-on-demand cost.", PERCENT),
        Line("Current fleet, monthly cost", get("current_fleet_monthly_usd"), "$ per month",
             "What the fleet in service today costs, as stated by the user." + unstated, MONEY),
        Line("Savings vs current fleet", get("savings_vs_current_usd"), "$ per month",
             "Current fleet minus the recommended fleet." + unstated, MONEY),
        Line("Savings vs current fleet", get("savings_vs_current_pct"), "% of current",
             "The savings as a share of the current fleet's cost." + unstated, PERCENT),
        Line("Cost per million tokens", get("usd_per_million_tokens"), "$ per million tokens",
             "Monthly cost over the tokens served (input + output), on provisioned capacity.",
             "$#,##0.0000"),
    ]  # fmt: skip
    service = [
        Line("SLO attainment", get("slo_attainment"), "% of requests",
             "Share of requests meeting every latency target in the simulation.", PERCENT_FINE),
    ]  # fmt: skip
    for metric, name in (
        ("ttft", "time to first token"),
        ("tpot", "time per output token"),
        ("e2e", "end-to-end latency"),
    ):
        target = get(f"target_{metric}_ms")
        goal = f"Target {target:,.0f} ms." if target is not None else "No target set."
        meaning = f"99th percentile over the simulated requests. {goal}"
        service.append(Line(f"P99 {name}", get(f"p99_{metric}_ms"), "ms", meaning, MILLISECONDS))
        if get("confidence") is not None and get(f"p99_{metric}_upper_ms") is not None:
            service.append(
                Line(f"P99 {name}, upper bound", get(f"p99_{metric}_upper_ms"), "ms",
                     "The simulated P99 allowing for the latency model's measured error and "
                     "the simulation's sampling error, at the confidence below. " + goal,
                     MILLISECONDS)
            )  # fmt: skip
    if get("confidence") is not None:
        service += [
            Line("Confidence", get("confidence"), "%",
                 "The fleet is sized so the P99 targets hold at this confidence.", PERCENT),
            Line("Confidence margin", get("margin_usd_per_month"), "$ per month",
                 "What the margin costs: the recommended fleet less the cheapest fleet meeting "
                 "the targets on the point estimates.", MONEY),
            Line("Fleet on point estimates", get("point_estimate_monthly_usd"), "$ per month",
                 "The cheapest fleet simulated whose point P99s met the targets.", MONEY),
        ]  # fmt: skip
    fleet = [
        Line("Fleet", get("fleet"), "", "Provider, region, instance type, GPUs, serving setup."),
        Line("Purchase", get("purchase"), "", "How the fleet is bought."),
        Line("Peak instances", get("peak_instances"), "instances",
             "Most instances running at once over the forecast.", COUNT),
        Line("Mean instances", get("mean_instances"), "instances",
             "Average instances running over the forecast.", MEAN_COUNT),
    ]  # fmt: skip
    if get("api_choice") is not None:  # the plan buys per-token API traffic
        fleet += [
            Line("API choice", get("api_choice"), "",
                 "api: the API serves the whole demand; overflow: a self-hosted base fleet, "
                 "the rest on the API; by model: a fleet's models each on the API or on their "
                 "own pools."),
            Line("API offers", get("api_offers"), "", "The offers bought and their prices."),
            Line("API spend, monthly", get("api_monthly_usd"), "$ per month",
                 "A 730-hour month of the API's tokens at its prices.", MONEY),
            Line("API share of tokens", get("api_share_of_tokens"), "% of tokens",
                 "The demand's tokens (input + output) the API serves.", PERCENT),
            Line("Self-hosted part, monthly", get("self_hosted_part_monthly_usd"),
                 "$ per month", "The self-hosted fleet the plan buys (0: none).", MONEY),
            Line("Self-hosted alternative, monthly", get("self_hosted_alternative_monthly_usd"),
                 "$ per month", "The cheapest verified fleet serving the whole demand, when "
                 "one was found.", MONEY),
            Line("Break-even load", get("break_even_requests_per_s"), "requests/s",
                 "The mean load at which the API and self-hosting cost the same.", "#,##0.000"),
        ]  # fmt: skip
    if get("pools") is not None:  # a fleet of pools
        fleet += [
            Line("Pools", get("pools"), "pools",
                 "Pools of the fleet: each serves one model's requests of some input sizes on "
                 "its own instances (the Showback sheet).", COUNT),
            Line("Models", get("models"), "models", "Models the fleet serves.", COUNT),
            Line("One pool per model, monthly cost", get("single_pool_monthly_usd"),
                 "$ per month", "The cheapest fleet of one pool per model, when recommended.",
                 MONEY),
            Line("Savings vs one pool per model", get("saving_vs_single_pool_usd"),
                 "$ per month", "One pool per model minus the pools, when recommended.", MONEY),
        ]  # fmt: skip
    months = projection.months
    totals = [
        Line(f"{scenario.capitalize()} scenario, {view}: {months}-month total",
             _Formula(f"={projection.totals[(scenario, view)]}"), "$",
             f"The {view} cost of every month added up, {scenario} scenario.", MONEY)
        for scenario in SCENARIOS
        for view, _ in VIEWS
    ]  # fmt: skip
    if months:
        average = _Formula(f"=AVERAGE({projection.monthly[('expected', 'amortized')]})")
        totals.append(Line("Expected scenario, amortized: average month", average,
                           "$ per month", "The expected amortized total over the months.",
                           MONEY))  # fmt: skip
    sections = [
        ("This report", about),
        ("Cost", cost),
        ("Service level", service),
        ("Fleet", fleet),
        ("Projection totals (formulas over the Projection sheet)", totals),
    ]
    if actuals is not None:
        sections.append((
            "Plan vs actual to date (formulas over the Plan vs actual sheet)",
            [
                Line("Actual spend", _Formula(f"={actuals.actual_total}"), "$",
                     f"What the clouds billed over {actuals.months} month(s).", MONEY),
                Line("Planned spend", _Formula(f"={actuals.planned_total}"), "$",
                     "The plan's expected scenario (cash) over the same months.", MONEY),
                Line("Variance", _Formula(f"={actuals.variance_total}"), "$",
                     "Actual minus planned.", MONEY),
                Line("Variance", _Formula(f"={actuals.variance_pct_total}"), "% of planned",
                     "The variance over planned.", PERCENT),
            ],
        ))  # fmt: skip
    return sections


def _summary_sheet(
    ws: Any, report: Report, projection: ProjectionCells, actuals: ActualCells | None
) -> None:
    built = _naive_utc(report.built_at)
    _title(
        ws,
        report.title,
        f"Finance report of stored recommendation #{report.recommendation_id}, built "
        f"{built:%Y-%m-%d %H:%M} UTC by planner {report.planner_version}. Money in "
        f"{report.currency}. Each sheet explains its figures; totals are formulas over the "
        "Projection and Plan vs actual sheets.",
        last_column=4,
    )
    _headers(ws, HEADER_ROW, 1, ["Figure", "Value", "Unit", "What it means"])
    row = FIRST_ROW
    for heading, lines in _summary_lines(report, projection, actuals):
        _put(ws.cell(row, 1), heading)
        ws.cell(row, 1).font = SECTION_FONT
        for column in range(1, 5):
            ws.cell(row, column).fill = SECTION_FILL
        row += 1
        for line in lines:
            _put(ws.cell(row, 1), line.label)
            if _plain(line.value) is None:  # None or NaN
                _put(ws.cell(row, 2), "not known")
                ws.cell(row, 2).font = NOTE_FONT
            else:
                _put(ws.cell(row, 2), line.value, line.number_format)
            _put(ws.cell(row, 3), line.unit)
            _put(ws.cell(row, 4), line.meaning)
            for column in range(1, 5):
                ws.cell(row, column).alignment = WRAP_TOP
            row += 1
    row += 1
    _section(ws, row, 1, "Key assumptions")
    for sentence in report.key_assumptions:
        row += 1
        _sentence(ws, row, 1, 4, f"• {sentence}")
    for letter, width in zip("ABCD", (42, 30, 20, 72), strict=True):
        ws.column_dimensions[letter].width = width


# --------------------------------------------------------------------------------------------
# Cells and styles


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _put(cell: Any, value: Any, number_format: str | None = None) -> None:
    """A cell's value, made writable: NaN and None as empty, numpy scalars as Python numbers,
    times as naive UTC. Only a :class:`_Formula` is written as a formula: text from the report
    that starts with "=" (a provider named "=HYPERLINK(...)") stays text."""
    value = _plain(value)
    cell.value = value
    if isinstance(value, str) and not isinstance(value, _Formula):
        cell.data_type = "s"
    if number_format is not None and value is not None:
        cell.number_format = number_format
    cell.border = CELL_BORDER


class _Formula(str):
    """A formula this module wrote (text from the report is never one)."""


def _plain(value: Any) -> Any:
    missing = not isinstance(value, str) and pd.api.types.is_scalar(value) and pd.isna(value)
    if value is None or missing:
        return None  # None, NaN, NaT, pd.NA: an empty cell
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    if isinstance(value, datetime):
        value = _naive_utc(value)
        if value.time() == datetime.min.time():
            return value.date()
        return value
    if isinstance(value, date):
        return value
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()  # numpy scalar
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else str(value)
    if isinstance(value, _Formula):
        return value
    return ILLEGAL_CHARACTERS.sub("", text)


def _naive_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


def _title(ws: Any, title: str, explanation: str, last_column: int) -> None:
    _put(ws.cell(1, 1), title)
    ws.cell(1, 1).font = TITLE_FONT
    ws.cell(1, 1).border = Border()
    ws.row_dimensions[1].height = 24
    _sentence(ws, 2, 1, last_column, explanation)
    ws.cell(2, 1).font = NOTE_FONT
    ws.freeze_panes = ws.cell(FIRST_ROW, 1).coordinate
    ws.print_title_rows = f"{HEADER_ROW}:{HEADER_ROW}"


def _sentence(ws: Any, row: int, first: int, last: int, text: str) -> None:
    """A wrapped sentence across columns ``first``..``last`` (its height set by
    :func:`_fit_rows`)."""
    if last > first:
        ws.merge_cells(start_row=row, start_column=first, end_row=row, end_column=last)
    cell = ws.cell(row, first)
    _put(cell, text)
    cell.border = Border()
    cell.alignment = WRAP_TOP


def _fit_rows(ws: Any) -> None:
    """Row heights for wrapped text, once the columns have their widths: spreadsheets keep
    the heights a file gives (and never fit merged cells)."""
    merged = {bounds.min_row: bounds for bounds in ws.merged_cells.ranges}
    for row in ws.iter_rows():
        lines = 1
        for cell in row:
            if cell.value is None or not cell.alignment.wrap_text:
                continue
            bounds = merged.get(cell.row)
            if bounds is not None and bounds.min_col == cell.column:
                columns = range(bounds.min_col, bounds.max_col + 1)
            else:
                columns = range(cell.column, cell.column + 1)
            width = sum(_width(ws, c) for c in columns)
            lines = max(lines, _wrapped_lines(str(cell.value), width, bold=bool(cell.font.b)))
        if lines > 1 or row[0].row == HEADER_ROW:
            ws.row_dimensions[row[0].row].height = 15 * lines + 4


def _width(ws: Any, column: int) -> float:
    width = ws.column_dimensions[get_column_letter(column)].width
    return float(width) if width else 9.0


def _wrapped_lines(text: str, width: float, bold: bool) -> int:
    """Lines ``text`` takes wrapped at word boundaries in a column ``width`` characters wide."""
    # a column's width counts digits; text averages narrower (bold a little wider)
    fits = max((width - 1.5) * (1.05 if bold else 1.2), 1.0)
    lines = 0
    for paragraph in text.split("\n"):
        lines += 1
        used = 0.0
        for word in paragraph.split():
            if used and used + 1 + len(word) > fits:
                lines += 1
                used = len(word)
            else:
                used += (1 if used else 0) + len(word)
    return max(lines, 1)


def _note(ws: Any, row: int, text: str) -> None:
    _put(ws.cell(row, 1), text)
    ws.cell(row, 1).font = NOTE_FONT
    ws.cell(row, 1).border = Border()


def _section(ws: Any, row: int, column: int, text: str) -> None:
    cell = ws.cell(row, column)
    _put(cell, text)
    cell.font = SECTION_FONT
    cell.border = Border()


def _headers(ws: Any, row: int, column: int, headers: Iterable[str]) -> None:
    for i, header in enumerate(headers):
        cell = ws.cell(row, column + i)
        _put(cell, header)
        cell.font = HEADER_FONT
        cell.fill = HEADER_FILL
        cell.alignment = HEADER_ALIGNMENT


def _total_label(cell: Any, text: str) -> None:
    _put(cell, text)
    _total_style(cell)


def _total_style(cell: Any) -> None:
    cell.font = TOTAL_FONT
    cell.fill = TOTAL_FILL
    cell.border = CELL_BORDER


def _sum_cell(ws: Any, row: int, column: int, number_format: str | None) -> None:
    letter = get_column_letter(column)
    _put(
        ws.cell(row, column),
        _Formula(f"=SUM({letter}{FIRST_ROW}:{letter}{row - 1})"),
        number_format,
    )


def _fit_columns(ws: Any, minimum: float = 9, maximum: float = 48) -> None:
    """Column widths from what the cells show (headers wrap, so their longest word counts)."""
    widths: dict[int, float] = {}
    merged = {cell for bounds in ws.merged_cells.ranges for cell in _cells_of(bounds)}
    for row in ws.iter_rows(min_row=HEADER_ROW - 1):
        for cell in row:
            if cell.value is None or cell.coordinate in merged:
                continue
            if cell.font == SECTION_FONT or cell.font == NOTE_FONT:
                continue  # section titles and notes overflow to the right
            if cell.row == HEADER_ROW or cell.font == HEADER_FONT:
                text = str(cell.value)
                shown = max(max(len(word) for word in text.split()), len(text) / 3)
            else:
                shown = _shown_length(cell)
            widths[cell.column] = max(widths.get(cell.column, 0), shown + 2)
    for column, width in widths.items():
        ws.column_dimensions[get_column_letter(column)].width = min(max(width, minimum), maximum)


def _cells_of(bounds: Any) -> list[str]:
    return [
        f"{get_column_letter(c)}{r}"
        for r in range(bounds.min_row, bounds.max_row + 1)
        for c in range(bounds.min_col, bounds.max_col + 1)
    ]


def _shown_length(cell: Any) -> float:
    value = cell.value
    fmt = cell.number_format or ""
    if isinstance(value, str) and value.startswith("=") and cell.data_type == "f":
        return 14 if "$" in fmt else 10
    if isinstance(value, datetime | date):
        return 16 if "hh" in fmt else 8
    if isinstance(value, bool | int | float):
        if "%" in fmt:
            return 8
        text = f"{value:,.2f}"
        return len(text) + (1 if "$" in fmt else 0)
    return len(str(value))


def _page_setup(ws: Any, report: Report) -> None:
    ws.page_setup.orientation = "landscape"
    ws.page_setup.fitToWidth = 1
    ws.page_setup.fitToHeight = 0  # as many pages tall as needed
    ws.sheet_properties.pageSetUpPr.fitToPage = True
    ws.print_options.horizontalCentered = True
    ws.page_margins.left = ws.page_margins.right = 0.4
    ws.page_margins.top = ws.page_margins.bottom = 0.75
    ws.page_margins.header = ws.page_margins.footer = 0.3
    ws.oddHeader.left.text = _header_text(report.title)
    ws.oddFooter.left.text = "&A"
    ws.oddFooter.right.text = "Page &P of &N"


def _header_text(text: str) -> str:
    return text.replace("&", "&&")[:200]


def _properties(workbook: Any, report: Report) -> None:
    properties = workbook.properties
    properties.title = report.title
    properties.creator = f"planner {report.planner_version}"
    properties.lastModifiedBy = properties.creator
    properties.subject = "Finance report: cost projection, commitments, plan vs actual"
    properties.description = f"Recommendation #{report.recommendation_id}"
    properties.created = _naive_utc(report.built_at)
    properties.modified = _naive_utc(report.built_at)
