"""The Excel workbook: its sheets, formats, formulas, charts and page setup, read back with
openpyxl; its formulas recalculated by a real spreadsheet engine (LibreOffice, headless) and
the totals compared with the model's own numbers; printed to PDF to prove each sheet prints one
page wide; and written whole or not at all."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import openpyxl  # type: ignore[import-untyped]
import pandas as pd
import pytest
from openpyxl.utils import get_column_letter  # type: ignore[import-untyped]
from pypdf import PdfReader

from planner.errors import UsageError
from planner.report.excel import (
    DETAIL,
    MONEY,
    MONTH,
    PERCENT,
    SHEETS,
    build_workbook,
    write_workbook,
)
from planner.report.model import ACTUAL_COLUMNS, COMMITMENT_COLUMNS, SCENARIOS, Report
from tests.report.conftest import example_report, report_from
from tests.report.spreadsheet import convert, recalculated, required_tool

BUILT = datetime(2026, 12, 1, 12, tzinfo=UTC)
FORMULA_LOOKALIKE = '=HYPERLINK("http://example.invalid","click")'
CENT = 0.005
FOOTER = re.compile(r"^(.+) Page \d+ of \d+$", re.MULTILINE)


# --------------------------------------------------------------------------------------------
# Reports


def with_actuals(report: Report) -> Report:
    """``report`` with the actual spend of its first three months: each planned provider at
    101%, 160% and 50% of its plan (within, above and below the forecast range), and one
    provider the plan never used (planned $0: its variance % is "n/a")."""
    expected = report.projection[report.projection["scenario"] == "expected"]
    months = sorted(set(expected["month"]))[:3]
    rows: list[tuple[object, ...]] = []
    for month, ratio in zip(months, (1.01, 1.6, 0.5), strict=True):
        for provider in sorted(set(expected["provider"])):

            def planned(scenario: str, month: date = month, provider: str = provider) -> float:
                frame = report.projection
                chosen = frame[
                    (frame["scenario"] == scenario)
                    & (frame["month"] == month)
                    & (frame["provider"] == provider)
                ]
                return float(chosen["cash_usd"].sum())

            plan, actual = planned("expected"), planned("expected") * ratio
            rows.append(
                (month, provider, "USD", actual, plan, planned("low"), planned("high"),
                 actual - plan, (actual - plan) / plan)
            )  # fmt: skip
    rows.append((months[1], "azure", "USD", 42.25, 0.0, 0.0, 0.0, 42.25, None))
    return report.with_actuals(pd.DataFrame(rows, columns=list(ACTUAL_COLUMNS)))


def tricky(report: Report) -> Report:
    """``report`` with text a spreadsheet would take for a formula, a savings plan (no instance
    count, unknown break-even: empty cells) and a headline figure that is not a number."""
    assumptions = pd.concat(
        [report.assumptions, pd.DataFrame([("link", FORMULA_LOOKALIKE, "=1+1")],
                                          columns=list(report.assumptions.columns))],
        ignore_index=True,
    )  # fmt: skip
    plan = dict(zip(COMMITMENT_COLUMNS, report.commitments.iloc[0], strict=True))
    plan.update(purchase_option="savings-plan-1y", term_years=1, instances=None,
                hourly_commitment_usd=1.25, upfront_usd=0.0, end=date(2028, 1, 1),
                break_even_utilization=float("nan"))  # fmt: skip
    commitments = pd.concat([report.commitments, pd.DataFrame([plan])], ignore_index=True)
    return replace(
        report,
        assumptions=assumptions,
        commitments=commitments,
        key_assumptions=[*report.key_assumptions, "=SUM(1,2) is how a formula starts."],
        summary={**report.summary, "p99_e2e_ms": float("nan")},
    )


@pytest.fixture(scope="module")
def demo_report(demo_store_url: str) -> Report:
    """A real report: the demo store's recommendation #1, built by the model."""
    from planner.usecases.report import ReportRequest

    return report_from(
        demo_store_url, ReportRequest(1, built_at=BUILT, current_fleet_monthly_usd=3000.0)
    )


@dataclass
class Book:
    report: Report
    path: Path
    formulas: Any  # the workbook as written (openpyxl)
    values: Any = None  # the same, recalculated by LibreOffice (openpyxl, data_only)


@pytest.fixture(scope="module")
def books(tmp_path_factory: pytest.TempPathFactory, demo_report: Report) -> dict[str, Book]:
    folder = tmp_path_factory.mktemp("excel")
    reports = {
        "example": tricky(with_actuals(example_report())),
        "demo": with_actuals(demo_report),
        "demo-no-actuals": demo_report,
    }
    written = {}
    for name, report in reports.items():
        path = write_workbook(report, folder / f"{name}.xlsx")
        written[name] = Book(report, path, openpyxl.load_workbook(path))
    return written


@pytest.fixture(scope="module")
def soffice() -> str:
    """LibreOffice, else the test is skipped (failed under PLANNER_REQUIRE_OFFICE=1) before
    any report is built."""
    return required_tool("soffice")


@pytest.fixture(scope="module")
def recalculated_books(
    soffice: str, books: dict[str, Book], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Book]:
    """Every workbook opened by LibreOffice, recalculated and saved: the formulas' values."""
    names = list(books)
    paths = recalculated([books[n].path for n in names], tmp_path_factory.mktemp("recalc"))
    for name, path in zip(names, paths, strict=True):
        books[name].values = openpyxl.load_workbook(path, data_only=True)
    return books


# --------------------------------------------------------------------------------------------
# Reading the sheets


def header_columns(ws: Any, row: int) -> dict[str, int]:
    return {str(c.value): c.column for c in ws[row] if c.value is not None}


def header_rows(ws: Any, first: str = "Month") -> list[int]:
    """Rows whose column A holds a table header (``first``) in the header style."""
    return [c.row for c in ws["A"] if c.value == first and c.font.b and c.fill.fgColor.rgb]


def block(ws: Any, header_row: int) -> tuple[list[int], int]:
    """A totals block's month rows and its total row (the first row labelled "Total...")."""
    rows = []
    row = header_row + 1
    while not str(ws.cell(row, 1).value).startswith("Total"):
        rows.append(row)
        row += 1
        assert row < header_row + 200, "no total row"
    return rows, row


def label_row(ws: Any, label: str, column: int = 1) -> int:
    found = [c.row for c in ws[get_column_letter(column)] if c.value == label]
    assert found, f"{label!r} not on {ws.title}"
    return int(found[0])


def as_date(value: Any) -> date:
    return value.date() if isinstance(value, datetime) else value


def cents_equal(value: Any, expected: float) -> bool:
    return isinstance(value, int | float) and abs(float(value) - expected) < CENT


# --------------------------------------------------------------------------------------------
# The workbook as written


def test_one_sheet_per_section(books: dict[str, Book], report: Report) -> None:
    assert books["example"].formulas.sheetnames == list(SHEETS)
    assert books["demo-no-actuals"].formulas.sheetnames == list(SHEETS[:-1])
    assert "Plan vs actual" not in build_workbook(report).sheetnames


def test_headers_formatted_and_panes_frozen_under_them(books: dict[str, Book]) -> None:
    for ws in books["example"].formulas:
        assert ws.freeze_panes == "A5", ws.title
        headers = [c for c in ws[4] if c.value is not None]
        assert len(headers) >= 3, ws.title
        for cell in headers:
            assert cell.font.b, (ws.title, cell.coordinate)
            assert cell.fill.fill_type == "solid" and cell.fill.fgColor.rgb.endswith("1F4E79")
            assert cell.alignment.wrap_text, (ws.title, cell.coordinate)
        # widths set from the content: no column left at the default, none absurd
        for letter in {c.column_letter for c in headers}:
            width = ws.column_dimensions[letter].width
            assert 8 <= width <= 75, (ws.title, letter, width)


def test_money_percent_and_month_formats(books: dict[str, Book]) -> None:
    book = books["example"].formulas
    detail = book[DETAIL]
    columns = header_columns(detail, 4)
    first = detail.cell(5, columns["Cash cost ($ in the month)"])
    assert isinstance(first.value, float) and first.number_format == MONEY == "$#,##0.00"
    month = detail.cell(5, columns["Month"])
    assert as_date(month.value) == date(2027, 1, 1) and month.number_format == MONTH
    assert MONTH == "yyyy-mm"

    commitments = book["Commitments"]
    columns = header_columns(commitments, 4)
    for header in (
        "Break-even utilization (% of committed hours)",
        "Expected utilization (% used, expected scenario)",
        "Coverage (% of the fleet's instance-hours)",
    ):
        assert commitments.cell(5, columns[header]).number_format == PERCENT
    assert commitments.cell(5, columns["Starts (month)"]).number_format == MONTH

    summary = book["Summary"]
    row = label_row(summary, "Savings vs all on demand")
    assert summary.cell(row, 2).number_format == MONEY
    assert summary.cell(row + 1, 2).number_format == PERCENT
    assert summary.cell(label_row(summary, "First month"), 2).number_format == MONTH

    actual = book["Plan vs actual"]
    columns = header_columns(actual, 4)
    assert actual.cell(5, columns["Variance ($)"]).number_format == MONEY
    assert actual.cell(5, columns["Variance (% of planned)"]).number_format == PERCENT


def test_totals_and_variances_are_formulas(books: dict[str, Book]) -> None:
    book = books["example"].formulas
    projection = book["Projection"]
    scenario_header, option_header = header_rows(projection)
    months, total = block(projection, scenario_header)
    assert len(months) == 12
    for column in range(2, 8):
        for row in months:
            formula = projection.cell(row, column).value
            assert formula.startswith("=SUMIFS('Projection detail'!"), formula
        assert projection.cell(total, column).value.startswith("=SUM(")
    months, total = block(projection, option_header)
    assert projection.cell(months[0], 2).value.startswith("=SUMIFS(")
    assert f"B${option_header}" in projection.cell(months[0], 2).value  # the option's header

    actual = book["Plan vs actual"]
    columns = header_columns(actual, 4)
    assert actual.cell(5, columns["Variance ($)"]).value == "=D5-E5"
    assert actual.cell(5, columns["Variance (% of planned)"]).value == '=IF(E5=0,"n/a",H5/E5)'
    (totals_header,) = [r for r in header_rows(actual) if r > 4]
    _, total = block(actual, totals_header)
    assert actual.cell(total, 2).value.startswith("=SUM(")

    summary = book["Summary"]
    formulas = [c.value for c in summary["B"] if isinstance(c.value, str) and c.data_type == "f"]
    assert "=Projection!$E$17" in formulas  # expected, amortized, 12-month total
    assert any(f.startswith("='Plan vs actual'!") for f in formulas)
    assert book["Sensitivity"]["F5"].value == "=D5-E5"
    assert book["Commitments"].cell(5, len(COMMITMENT_COLUMNS) + 1).value.startswith("=")


def test_text_that_looks_like_a_formula_stays_text(books: dict[str, Book]) -> None:
    book = books["example"].formulas
    assumptions = book["Assumptions"]
    row = label_row(assumptions, "link")
    for cell in (assumptions.cell(row, 2), assumptions.cell(row, 3)):
        assert cell.data_type == "s" and cell.value in (FORMULA_LOOKALIKE, "=1+1")
    sentence = [c for c in book["Summary"]["A"] if str(c.value).startswith("• =SUM")]
    assert len(sentence) == 1


def test_missing_values_are_empty_cells_or_said(books: dict[str, Book]) -> None:
    book = books["example"].formulas
    commitments = book["Commitments"]
    columns = header_columns(commitments, 4)
    plan_row = label_row(commitments, "savings-plan-1y")
    assert commitments.cell(plan_row, columns["Instances (savings plans: none)"]).value is None
    breakeven = "Break-even utilization (% of committed hours)"
    assert commitments.cell(plan_row, columns[breakeven]).value is None  # NaN: no "nan" cell
    summary = book["Summary"]
    assert summary.cell(label_row(summary, "P99 end-to-end latency"), 2).value == "not known"
    assert summary.cell(label_row(summary, "Current fleet, monthly cost"), 2).value == ("not known")


def test_native_charts(books: dict[str, Book]) -> None:
    workbook = build_workbook(books["example"].report)
    charts = workbook["Projection"]._charts
    assert [type(c).__name__ for c in charts] == ["LineChart", "BarChart"]
    line, bars = charts
    assert len(line.series) == len(SCENARIOS)
    assert bars.grouping == "stacked" and len(bars.series) == 2  # committed-3y, on-demand
    (combined,) = workbook["Plan vs actual"]._charts
    kinds = {type(c).__name__ for c in [combined, *combined._charts]}
    assert kinds == {"LineChart", "BarChart"}
    for name in ("Summary", DETAIL, "Commitments", "Sensitivity", "Assumptions"):
        assert not workbook[name]._charts
    with zipfile.ZipFile(books["example"].path) as archive:
        parts = [n for n in archive.namelist() if n.startswith("xl/charts/chart")]
    assert len(parts) == 3


def test_prints_landscape_one_page_wide_with_the_header_repeated(books: dict[str, Book]) -> None:
    for ws in books["example"].formulas:
        setup = ws.page_setup
        assert setup.orientation == "landscape", ws.title
        assert (setup.fitToWidth, setup.fitToHeight) == (1, 0), ws.title
        assert ws.sheet_properties.pageSetUpPr.fitToPage, ws.title
        assert ws.print_title_rows == "$4:$4", ws.title


def test_workbook_properties(books: dict[str, Book]) -> None:
    book = books["example"]
    properties = book.formulas.properties
    assert properties.title == book.report.title
    assert properties.creator == f"planner {book.report.planner_version}"
    assert properties.created == datetime(2026, 12, 1, 12, 0)


def test_summary_states_the_models_headline_figures(books: dict[str, Book]) -> None:
    for name in ("example", "demo"):
        book = books[name]
        summary, figures = book.formulas["Summary"], book.report.summary
        assert summary["A1"].value == book.report.title
        for label, key in (
            ("Monthly cost of the recommended fleet", "monthly_usd"),
            ("Monthly cost, all on demand", "on_demand_monthly_usd"),
            ("Cost per million tokens", "usd_per_million_tokens"),
            ("SLO attainment", "slo_attainment"),
            ("Peak instances", "peak_instances"),
        ):
            # as stored (openpyxl writes 16 significant digits: far below a cent)
            value = summary.cell(label_row(summary, label), 2).value
            assert value == pytest.approx(figures[key], rel=1e-14), label
        assert summary.cell(label_row(summary, "Recommendation"), 2).value == 1
        sentences = [str(c.value) for c in summary["A"] if str(c.value).startswith("• ")]
        assert sentences == [f"• {s}" for s in book.report.key_assumptions]
    demo = books["demo"].formulas["Summary"]
    assert demo.cell(label_row(demo, "Current fleet, monthly cost"), 2).value == 3000.0


def test_projection_detail_holds_every_row_of_the_model(books: dict[str, Book]) -> None:
    for name in ("example", "demo"):
        book = books[name]
        detail = book.formulas[DETAIL]
        columns = header_columns(detail, 4)
        rows = list(detail.iter_rows(min_row=5, values_only=True))
        assert len(rows) == len(book.report.projection)
        cash = sum(r[columns["Cash cost ($ in the month)"] - 1] for r in rows)
        assert cash == pytest.approx(book.report.projection["cash_usd"].sum(), abs=1e-6)
        scenarios = [r[columns["Scenario"] - 1] for r in rows]
        assert scenarios == sorted(scenarios, key=SCENARIOS.index)  # low, expected, high


def test_sheets_with_nothing_to_show_say_so(report: Report, tmp_path: Path) -> None:
    empty = replace(
        report,
        commitments=report.commitments.iloc[0:0],
        sensitivity=report.sensitivity.iloc[0:0],
    )
    workbook = openpyxl.load_workbook(write_workbook(empty, tmp_path / "empty.xlsx"))
    assert workbook["Commitments"]["A5"].value.startswith("No commitments")
    assert workbook["Sensitivity"]["A5"].value.startswith("No sensitivity")


# --------------------------------------------------------------------------------------------
# Recalculated by LibreOffice


def test_monthly_totals_recalculated_equal_the_models(
    recalculated_books: dict[str, Book],
) -> None:
    for name, book in recalculated_books.items():
        projection = book.values["Projection"]
        header = header_rows(book.formulas["Projection"])[0]
        months, total = block(projection, header)
        columns = header_columns(projection, header)
        for scenario in SCENARIOS:
            for view in ("cash", "amortized"):
                column = columns[f"{scenario.capitalize()}: {view}"]
                model = book.report.monthly_totals(scenario, view)
                assert len(months) == len(model), name
                for row in months:
                    month = as_date(projection.cell(row, 1).value)
                    value = projection.cell(row, column).value
                    assert cents_equal(value, float(model[month])), (name, scenario, view, month)
                grand = projection.cell(total, column).value
                assert cents_equal(grand, float(model.sum())), (name, scenario, view)


def test_purchase_option_totals_recalculated_equal_the_models(
    recalculated_books: dict[str, Book],
) -> None:
    for name, book in recalculated_books.items():
        projection = book.values["Projection"]
        header = header_rows(book.formulas["Projection"])[1]
        months, total = block(projection, header)
        frame = book.report.projection
        expected = frame[frame["scenario"] == "expected"]
        by_option = expected.groupby(["month", "purchase_option"])["amortized_usd"].sum()
        for option, column in header_columns(projection, header).items():
            if option == "Month":
                continue
            for row in months:
                month = as_date(projection.cell(row, 1).value)
                if option == "All options":
                    model = float(expected[expected["month"] == month]["amortized_usd"].sum())
                else:
                    model = float(by_option.get((month, option), 0.0))
                assert cents_equal(projection.cell(row, column).value, model), (name, option)
        all_options = projection.cell(total, header_columns(projection, header)["All options"])
        assert cents_equal(all_options.value, float(expected["amortized_usd"].sum()))


def test_summary_formulas_recalculated(recalculated_books: dict[str, Book]) -> None:
    for name, book in recalculated_books.items():
        summary = book.values["Summary"]
        report = book.report
        for scenario in SCENARIOS:
            for view in ("cash", "amortized"):
                row = label_row(
                    summary, f"{scenario.capitalize()} scenario, {view}: 12-month total"
                )
                total = float(report.monthly_totals(scenario, view).sum())
                assert cents_equal(summary.cell(row, 2).value, total), (name, scenario, view)
        average = summary.cell(label_row(summary, "Expected scenario, amortized: average month"), 2)
        assert cents_equal(
            average.value, float(report.monthly_totals("expected", "amortized").mean())
        )
        if report.actuals is not None:
            actual = float(report.actuals["actual_usd"].sum())
            planned = float(report.actuals["planned_usd"].sum())
            assert cents_equal(summary.cell(label_row(summary, "Actual spend"), 2).value, actual)
            assert cents_equal(summary.cell(label_row(summary, "Planned spend"), 2).value, planned)
            variance_row = label_row(summary, "Variance")
            assert cents_equal(summary.cell(variance_row, 2).value, actual - planned)
            assert summary.cell(variance_row + 1, 2).value == pytest.approx(
                (actual - planned) / planned
            )


def test_variances_recalculated_are_actual_minus_planned(
    recalculated_books: dict[str, Book],
) -> None:
    for name in ("example", "demo"):
        book = recalculated_books[name]
        sheet = book.values["Plan vs actual"]
        columns = header_columns(sheet, 4)
        actuals = book.report.actuals
        assert actuals is not None
        frame = actuals.sort_values(["month", "provider"], kind="stable").reset_index()
        for i, expected in frame.iterrows():
            row = 5 + int(str(i))
            assert sheet.cell(row, columns["Provider"]).value == expected["provider"]
            variance = sheet.cell(row, columns["Variance ($)"]).value
            assert cents_equal(variance, expected["actual_usd"] - expected["planned_usd"])
            share = sheet.cell(row, columns["Variance (% of planned)"]).value
            within = sheet.cell(row, columns["Within the forecast range?"]).value
            if expected["planned_usd"] == 0:
                assert share == "n/a"
            else:
                assert share == pytest.approx(expected["variance_pct"])
            inside = expected["low_usd"] <= expected["actual_usd"] <= expected["high_usd"]
            assert within == ("yes" if inside else "no")
        # monthly totals over the providers, and the grand total
        (header,) = [r for r in header_rows(book.formulas["Plan vs actual"]) if r > 4]
        months, total = block(sheet, header)
        actual_by_month = frame.groupby("month")["actual_usd"].sum()
        planned_by_month = frame.groupby("month")["planned_usd"].sum()
        assert len(months) == len(actual_by_month)
        for row in months:
            month = as_date(sheet.cell(row, 1).value)
            actual, planned = float(actual_by_month[month]), float(planned_by_month[month])
            assert cents_equal(sheet.cell(row, 2).value, actual)
            assert cents_equal(sheet.cell(row, 3).value, planned)
            assert cents_equal(sheet.cell(row, 6).value, actual - planned)
        variance = float(actual_by_month.sum() - planned_by_month.sum())
        assert cents_equal(sheet.cell(total, 6).value, variance)


def test_commitment_and_sensitivity_formulas_recalculated(
    recalculated_books: dict[str, Book],
) -> None:
    for name, book in recalculated_books.items():
        commitments = book.values["Commitments"]
        columns = header_columns(commitments, 4)
        frame = book.report.commitments
        for i, plan in enumerate(frame.to_dict(orient="records")):
            hours = (plan["end"] - plan["start"]).days * 24
            term = plan["hourly_commitment_usd"] * hours + plan["upfront_usd"]
            value = commitments.cell(5 + i, columns["Total over the term ($)"]).value
            assert cents_equal(value, term), name
        total = 5 + len(frame)
        assert commitments.cell(total, 1).value == "Total"
        unused = commitments.cell(total, columns["Unused commitment ($ per month)"]).value
        assert cents_equal(unused, float(frame["unused_usd_per_month"].sum()))
        instances = commitments.cell(total, columns["Instances (savings plans: none)"]).value
        assert instances == frame["instances"].sum(skipna=True)

        sensitivity = book.values["Sensitivity"]
        for i, case in enumerate(book.report.sensitivity.to_dict(orient="records")):
            saving = case["kept_monthly_usd"] - case["replanned_monthly_usd"]
            assert sensitivity.cell(5 + i, 2).value == case["case"]
            assert cents_equal(sensitivity.cell(5 + i, 6).value, saving), name


def test_text_stays_text_after_recalculation(recalculated_books: dict[str, Book]) -> None:
    assumptions = recalculated_books["example"].values["Assumptions"]
    row = label_row(assumptions, "link")
    assert assumptions.cell(row, 2).value == FORMULA_LOOKALIKE
    assert assumptions.cell(row, 3).value == "=1+1"


def test_each_sheet_prints_one_page_wide(
    soffice: str, books: dict[str, Book], tmp_path: Path
) -> None:
    """Printed by LibreOffice: every sheet in order, landscape, and each page carries its
    sheet's first and last column headers (the header row repeats, and no sheet is cut into
    columns across pages)."""
    book = books["demo"]
    (pdf,) = convert([book.path], "pdf", tmp_path)
    printed: list[str] = []
    for page in PdfReader(pdf).pages:
        text = page.extract_text()
        (sheet,) = FOOTER.findall(text)  # each page's footer: "<sheet> Page N of M"
        printed.append(sheet)
        assert page.mediabox.width > page.mediabox.height, sheet  # landscape
        headers = [c.value for c in book.formulas[sheet][4] if c.value is not None]
        for header in (headers[0], headers[-1]):
            assert header.split()[0] in text, (sheet, header)
    assert list(dict.fromkeys(printed)) == list(SHEETS)
    assert printed.count("Projection") == 1  # totals and both charts on one page
    assert printed.count(DETAIL) == 2  # 72 rows, the header repeated


# --------------------------------------------------------------------------------------------
# Whole or not at all


def test_an_unwritable_path_fails_cleanly(report: Report, tmp_path: Path) -> None:
    missing = tmp_path / "no such folder" / "report.xlsx"
    with pytest.raises(UsageError, match="does not exist"):
        write_workbook(report, missing)
    assert not missing.parent.exists()
    with pytest.raises(UsageError, match="is a folder"):
        write_workbook(report, tmp_path)
    assert list(tmp_path.iterdir()) == []


WRITE_UNDER_A_SIZE_LIMIT = """
import resource, signal, sys
from pathlib import Path
from planner.errors import UsageError
from planner.report.excel import write_workbook
from tests.report.conftest import example_report

report = example_report()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    write_workbook(report, Path(sys.argv[1]))
except UsageError as exc:
    print(exc)
    sys.exit(3)
"""


def test_a_failure_while_writing_leaves_the_old_file_and_no_part(tmp_path: Path) -> None:
    """A real write failure (the file-size limit hit halfway through the workbook): the error
    is a clear message, the file that was there is untouched and no temporary file is left."""
    path = tmp_path / "report.xlsx"
    path.write_bytes(b"the previous report")
    done = subprocess.run(
        [sys.executable, "-c", WRITE_UNDER_A_SIZE_LIMIT, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert "could not write" in done.stdout and "Traceback" not in done.stderr
    assert path.read_bytes() == b"the previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.xlsx"]


def test_written_atomically_over_an_existing_file(report: Report, tmp_path: Path) -> None:
    path = tmp_path / "report.xlsx"
    path.write_bytes(b"old")
    path.chmod(0o640)
    assert write_workbook(report, path) == path
    assert zipfile.is_zipfile(path) and (path.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["report.xlsx"]
