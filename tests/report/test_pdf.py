"""The PDF report read back: its pages, sections, figures (as the document formats them, from
the report's own numbers), page numbers and embedded fonts (pypdf), and every page rendered to
PNG by poppler's ``pdftoppm`` to prove it is a valid document."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from PIL import Image
from pypdf import PdfReader
from pypdf.generic import ArrayObject, DictionaryObject

from planner.demo import load_demo
from planner.errors import PlannerError, UsageError
from planner.report.charts import ChartRenderError
from planner.report.model import ACTUAL_COLUMNS, SCENARIOS, Report
from planner.report.pdf import report_html, write_pdf
from planner.store.db import open_store
from planner.usecases.report import ReportRequest, build_report
from tests.report.conftest import example_report, without_api
from tests.report.test_charts import _chromium_or_skip, with_actuals

REQUIRE_OFFICE_ENV = "PLANNER_REQUIRE_OFFICE"  # set by .ci/run: no pdftoppm fails, never skips
HOSTILE_TITLE = "Plan <script>alert('x')</script> & co"
HOSTILE_ASSUMPTION = 'Costs stay < $5 & > $1; "<b>not bold</b>"'
SECTIONS = (
    "Executive summary",
    "12-month projection",
    "Commitment schedule",
    "Sensitivity",
    "Assumptions and sources",
    "Plan vs actual",
)


def usd(value: float) -> str:
    """Money as the document shows it (rounded to the cent)."""
    return f"-${abs(value):,.2f}" if round(value, 2) < 0 else f"${value:,.2f}"


def full_report() -> Report:
    """The example report with actuals (so every section is there) and text that HTML would
    take for markup."""
    report = with_actuals(example_report())
    return replace(
        report,
        title=HOSTILE_TITLE,
        key_assumptions=[*report.key_assumptions, HOSTILE_ASSUMPTION],
    )


def flat(text: str) -> str:
    """Text as compared here: runs of white space as one space, and no space after a hyphen or
    a slash (where a cell's line may wrap)."""
    return re.sub(r"([-/]) ", r"\1", re.sub(r"\s+", " ", text))


class WrittenPdf:
    def __init__(self, report: Report, path: Path):
        self.report = report
        self.path = path
        self.reader = PdfReader(path)
        self.pages = [page.extract_text() or "" for page in self.reader.pages]
        self.text = "\n".join(self.pages)
        self.flat = flat(self.text)

    def shows(self, text: str) -> bool:
        return flat(text) in self.flat


@pytest.fixture(scope="module")
def example_pdf(tmp_path_factory: pytest.TempPathFactory) -> WrittenPdf:
    _chromium_or_skip()
    path = tmp_path_factory.mktemp("pdf") / "report.pdf"
    report = full_report()
    assert write_pdf(report, path) == path
    return WrittenPdf(report, path)


@pytest.fixture(scope="module")
def demo_pdf(tmp_path_factory: pytest.TempPathFactory) -> WrittenPdf:
    """The report of the demo store's recommendation #1, built by build_report."""
    _chromium_or_skip()
    folder = tmp_path_factory.mktemp("pdf-demo")
    url = f"sqlite:///{folder / 'planner.db'}"
    load_demo(url, quick=True)
    without_api(url)  # the fleet's own report (test_api_report: the API's rows)
    with open_store(url) as store, store.session() as session:
        report = build_report(ReportRequest(1, built_at=datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
            current_fleet_monthly_usd=3000.0), lambda: nullcontext(session))  # fmt: skip
    path = write_pdf(report, folder / "report.pdf")
    return WrittenPdf(report, path)


@pytest.fixture(scope="module", params=["example", "demo"])
def written(request: pytest.FixtureRequest) -> WrittenPdf:
    """Each PDF: the hand-made example (with actuals) and a real report from the demo store."""
    pdf = request.getfixturevalue(f"{request.param}_pdf")
    assert isinstance(pdf, WrittenPdf)
    return pdf


def sections_of(report: Report) -> tuple[str, ...]:
    return SECTIONS if report.actuals is not None else SECTIONS[:-1]


def test_a_real_document_with_every_section(written: WrittenPdf) -> None:
    assert written.path.read_bytes().startswith(b"%PDF-")
    assert len(written.pages) > 3
    for heading in sections_of(written.report):
        assert heading in written.text, heading
    if written.report.actuals is None:
        assert "Plan vs actual" not in written.text
    title_page = written.pages[0]
    for text in ("Recommendation #1", "2026-12-01 12:00 UTC", "Contents"):
        assert text in title_page, text
    assert f"Planner version {written.report.planner_version}" in title_page


def test_contents_give_the_page_each_section_starts_on(written: WrittenPdf) -> None:
    contents = written.pages[0]
    for heading in sections_of(written.report):
        match = re.search(rf"{re.escape(heading)} \.+\s*page (\d+)", contents)
        assert match, heading
        page = int(match.group(1))
        # a section's heading is the first line of its first page
        assert written.pages[page - 1].lstrip().startswith(heading), (heading, page)


def test_every_page_is_numbered(written: WrittenPdf) -> None:
    count = len(written.pages)
    for number, text in enumerate(written.pages, start=1):
        assert f"Page {number} of {count}" in text


def test_headline_figures_as_the_report_states_them(written: WrittenPdf) -> None:
    summary = written.report.summary
    title_page = written.pages[0]
    for key in ("monthly_usd", "savings_vs_on_demand_usd"):
        assert usd(summary[key]) in title_page, key
    assert f"${summary['usd_per_million_tokens']:,.4f}" in title_page
    assert f"{summary['slo_attainment']:.2%}" in title_page
    for key in ("monthly_usd", "on_demand_monthly_usd"):
        assert usd(summary[key]) in written.flat, key
    for saved in ("on_demand", "current"):
        if summary[f"savings_vs_{saved}_usd"] is not None:
            amount, share = summary[f"savings_vs_{saved}_usd"], summary[f"savings_vs_{saved}_pct"]
            assert f"{usd(amount)} ({share:.1%})" in written.flat, saved
    if summary["current_fleet_monthly_usd"] is None:
        assert "No current fleet was stated" in written.flat
    else:
        assert f"Current fleet, per month {usd(summary['current_fleet_monthly_usd'])}" in (
            written.flat
        )
    assert f"{summary['p99_ttft_ms']:,.0f} ms" in written.flat
    assert f"target {summary['target_ttft_ms']:,.0f} ms" in written.flat
    assert f"{summary['peak_instances']} at peak, {summary['mean_instances']:.1f} on average" in (
        written.flat
    )
    for sentence in written.report.key_assumptions + written.report.notes:
        assert written.shows(sentence), sentence


def test_monthly_totals_to_the_cent(written: WrittenPdf) -> None:
    report = written.report
    for view in ("cash", "amortized"):
        for scenario in SCENARIOS:
            totals = report.monthly_totals(scenario, view)
            assert len(totals) == 12
            for month, value in totals.items():
                assert usd(float(value)) in written.flat, (scenario, view, month)
            assert usd(float(totals.sum())) in written.flat, (scenario, view)
    # each month's row: the month, then low / expected / high cash, then the same amortized
    for month in report.monthly_totals().index:
        row = " ".join(
            [f"{month:%Y-%m}"]
            + [
                usd(float(report.monthly_totals(scenario, view)[month]))
                for view in ("cash", "amortized")
                for scenario in SCENARIOS
            ]
        )
        assert row in written.flat, row


def test_commitment_schedule(written: WrittenPdf) -> None:
    commitments = written.report.commitments
    assert not commitments.empty
    for row in commitments.to_dict("records"):
        last_month = row["end"] - timedelta(days=1)
        term = f"{row['term_years']} years, {row['start']:%Y-%m} to {last_month:%Y-%m}"
        cells = [
            term,
            usd(row["upfront_usd"]),
            usd(row["hourly_commitment_usd"]),
            f"{row['break_even_utilization']:.1%}",
            f"{row['expected_utilization']:.1%}",
            f"{row['coverage']:.1%}",
            usd(row["unused_usd_per_month"]),
        ]
        assert " ".join(cells) in written.flat
        assert written.shows(f"{row['purchase_option']} {row['provider']} / {row['region']}")


def test_sensitivity_cases(written: WrittenPdf) -> None:
    for row in written.report.sensitivity.to_dict("records"):
        difference = row["kept_monthly_usd"] - row["replanned_monthly_usd"]
        sign = "+" if round(difference, 2) > 0 else ""
        cells = [
            str(row["case"]),
            f"x {row['factor']:g}",
            usd(row["kept_monthly_usd"]),
            usd(row["replanned_monthly_usd"]),
            sign + usd(difference),
            str(row["replanned_purchase"]),
        ]
        assert written.shows(" ".join(cells)), cells


def test_assumptions_and_sources(written: WrittenPdf) -> None:
    for row in written.report.assumptions.to_dict("records"):
        assert written.shows(f"{row['item']} {row['value']} {row['source']}"), row["item"]


def test_plan_vs_actual_with_variances_and_the_range(example_pdf: WrittenPdf) -> None:
    actuals = example_pdf.report.actuals
    assert actuals is not None
    for row in actuals.to_dict("records"):
        sign = "+" if row["variance_usd"] > 0 else ""
        assert f"{usd(row['actual_usd'])} {usd(row['planned_usd'])}" in example_pdf.flat
        assert f"{sign}{usd(row['variance_usd'])} {row['variance_pct']:+.1%}" in example_pdf.flat
    assert f"Total {usd(float(actuals['actual_usd'].sum()))}" in example_pdf.flat
    for status in ("within the range", "above the range", "below the range"):
        assert status in example_pdf.flat


def test_text_is_shown_as_written_never_as_markup(example_pdf: WrittenPdf) -> None:
    assert HOSTILE_TITLE in example_pdf.pages[0]
    assert HOSTILE_ASSUMPTION in example_pdf.flat


def _fonts(resources: Any, seen: set[int]) -> Iterator[DictionaryObject]:
    """Every font a page's resources use, including those of its forms (the SVG charts)."""
    if resources is None or id(resources) in seen:
        return
    seen.add(id(resources))
    resources = resources.get_object()
    for font in (resources.get("/Font") or {}).values():
        yield font.get_object()
    for xobject in (resources.get("/XObject") or {}).values():
        xobject = xobject.get_object()
        if xobject.get("/Subtype") == "/Form":
            yield from _fonts(xobject.get("/Resources"), seen)


def _descriptor(font: DictionaryObject) -> DictionaryObject:
    if font.get("/Subtype") == "/Type0":
        descendants = font["/DescendantFonts"].get_object()
        assert isinstance(descendants, ArrayObject) and len(descendants) == 1
        font = descendants[0].get_object()
    descriptor = font["/FontDescriptor"].get_object()
    assert isinstance(descriptor, DictionaryObject)
    return descriptor


def test_fonts_are_embedded(written: WrittenPdf) -> None:
    names = set()
    for number, page in enumerate(written.reader.pages, start=1):
        fonts = list(_fonts(page.get("/Resources"), set()))
        assert fonts, f"page {number} uses no font"
        for font in fonts:
            descriptor = _descriptor(font)
            assert "/FontFile2" in descriptor or "/FontFile3" in descriptor, (number, font)
            names.add(str(font["/BaseFont"]).split("+")[-1])
    assert "DejaVu-Sans" in names and "DejaVu-Sans-Bold" in names


def test_every_page_renders_to_an_image(written: WrittenPdf, tmp_path: Path) -> None:
    if shutil.which("pdftoppm") is None:
        if os.environ.get(REQUIRE_OFFICE_ENV) == "1":
            pytest.fail(f"{REQUIRE_OFFICE_ENV}=1 but pdftoppm (poppler-utils) is missing")
        pytest.skip("pdftoppm is missing: install poppler-utils to render the PDF's pages")
    result = subprocess.run(
        ["pdftoppm", "-r", "50", "-png", str(written.path), str(tmp_path / "page")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    images = sorted(tmp_path.glob("page-*.png"))
    assert len(images) == len(written.pages)
    for image_path in images:
        with Image.open(image_path) as image:
            assert image.width > image.height  # A4 landscape
            darkest, _ = image.convert("L").getextrema()
            assert isinstance(darkest, int) and darkest < 100, f"{image_path.name} is blank"


def test_without_actuals_there_is_no_plan_vs_actual_section(report: Report) -> None:
    document = report_html(report, {})
    assert "Executive summary" in document
    assert "Plan vs actual" not in document
    no_spend = report.with_actuals(pd.DataFrame(columns=list(ACTUAL_COLUMNS)))
    with_empty = report_html(no_spend, {})
    assert "Plan vs actual" in with_empty
    assert "No spend was reported" in with_empty


def test_nothing_is_written_when_the_charts_cannot_be_drawn(report: Report, tmp_path: Path) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(b"the previous report")
    with pytest.raises(ChartRenderError, match="no Chromium at /no/such/chromium"):
        write_pdf(report, path, browser="/no/such/chromium")
    assert path.read_bytes() == b"the previous report"
    assert [p.name for p in tmp_path.iterdir()] == ["report.pdf"]  # no temporary file left


def test_an_unwritable_path_fails_before_any_work(report: Report, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        # the missing browser is never reached: the path is checked first
        write_pdf(report, tmp_path / "missing" / "report.pdf", browser="/no/such/chromium")
    with pytest.raises(PlannerError, match="is a folder"):
        write_pdf(report, tmp_path)
