"""Hostile user price sheets, read without a store: numbers, cells, CSV and XLSX files."""

from __future__ import annotations

import time
import zipfile
from pathlib import Path

import pytest

from planner.errors import InputFileError
from pricing.model import PricePoint, Provider, PurchaseOption
from pricing.sheets import (
    MAX_CELL_CHARS,
    MAX_XLSX_PART_BYTES,
    number_text,
    point_problems,
    read_sheet_rows,
)
from pricing.snapshot import RawRow

HEADER = ["provider", "region", "instance_type", "purchase_option", "usd_per_hour"]
ROW = ["aws", "us-east-1", "g5.2xlarge", "on-demand"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.09", "1.09"),
        ("$1.09", "1.09"),
        (" 44.032 ", "44.032"),
        ("1,234.50", "1234.50"),  # a thousands comma next to a decimal point: unambiguous
        ("1,234,567", "1234567"),  # two groups: no locale reads that as a decimal
        ("1e-3", "1e-3"),
        ("", ""),
    ],
)
def test_numbers_with_a_decimal_point(text: str, expected: str) -> None:
    assert number_text(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1,09", "decimal comma is ambiguous"),  # was read as 109
        ("1,234", "1234 in some locales"),  # 1234 or 1.234
        ("1_0", "expected a number"),  # float() would read 10
        ("0x10", "expected a number"),
        ("1 100", "expected a number"),
        ("1.10€", "expected a number"),
        ("12,34,56", "expected a number"),
        ("inf", "expected a number"),
        ("nan", "expected a number"),
        ("1.2.3", "expected a number"),
    ],
)
def test_ambiguous_or_malformed_numbers_are_refused(text: str, reason: str) -> None:
    with pytest.raises(ValueError) as info:
        number_text(text)
    assert reason in " ".join(info.value.args)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1,09", "1.09"), ("1.234,50", "1234.50"), ("1.234.567", "1234567"), ("44", "44")],
)
def test_numbers_with_a_decimal_comma(text: str, expected: str) -> None:
    assert number_text(text, decimal_comma=True) == expected


@pytest.mark.parametrize("text", ["1.09", "1.234", "1,2,3"])
def test_decimal_comma_refuses_points_that_are_not_thousands(text: str) -> None:
    with pytest.raises(ValueError):
        number_text(text, decimal_comma=True)


def _csv(tmp_path: Path, text: str, name: str = "sheet.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _rows(path: Path, **options: bool) -> list[RawRow]:
    from pricing.sheets import SheetOptions

    _, rows = read_sheet_rows(path, SheetOptions(**options))
    return list(rows)


def test_csv_comma_price_is_refused_with_its_location(tmp_path: Path) -> None:
    path = _csv(tmp_path, ",".join(HEADER) + "\n" + ",".join(ROW) + ',"1,09"\n')
    with pytest.raises(InputFileError) as info:
        _rows(path)
    message = str(info.value)
    assert (
        f"{path}: row 1, line 2, column 'usd_per_hour': expected a number with a decimal "
        "point, e.g. 1.09, got '1,09': a decimal comma is ambiguous"
    ) in message
    assert "--decimal-comma" in message
    (row,) = _rows(path, decimal_comma=True)
    assert row.values["usd_per_hour"] == "1.09"


def test_semicolon_csv_with_bom_and_decimal_commas(tmp_path: Path) -> None:
    path = _csv(tmp_path, "\ufeff" + ";".join(HEADER) + "\n" + ";".join(ROW) + ";1,09\n")
    (row,) = _rows(path, decimal_comma=True)
    assert row.values["provider"] == "aws" and row.values["usd_per_hour"] == "1.09"


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("us-east\x00-1", "control characters"),
        ("\x1b[31mus-east-1", "control characters"),
        ("us-east\u202e-1", "control characters"),  # a bidi override spoofs tables
        ("r" * 65, "at most 64 characters, got 65"),
        ("r" * (MAX_CELL_CHARS + 1), f"at most {MAX_CELL_CHARS:,}"),
    ],
)
def test_bad_text_cells_are_refused_and_cut_in_the_message(
    tmp_path: Path, cell: str, message: str
) -> None:
    path = _csv(tmp_path, ",".join(HEADER) + f"\naws,{cell},g5.2xlarge,on-demand,1.0\n")
    with pytest.raises(InputFileError) as info:
        _rows(path)
    text = str(info.value)
    assert "row 1, line 2, column 'region'" in text and message in text
    assert len(text) < 400 and "\x00" not in text and "\x1b" not in text


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("gpu_count", "99999999999999999999", "out of range"),  # was exit 70 on SQLite
        ("gpu_count", "1e20", "out of range"),
        ("usd_per_hour", "1e300", "out of range"),
    ],
)
def test_numbers_beyond_any_price_sheet_are_refused(
    tmp_path: Path, column: str, value: str, message: str
) -> None:
    header = ["provider", "region", "instance_type", "gpu_model", "gpu_count"]
    header += ["purchase_option", "usd_per_hour"]
    cells = {"gpu_count": "8", "usd_per_hour": "10"} | {column: value}
    line = f"other,dc1,box,H100,{cells['gpu_count']},on-demand,{cells['usd_per_hour']}"
    path = _csv(tmp_path, ",".join(header) + "\n" + line + "\n")
    with pytest.raises(InputFileError, match=f"column '{column}': .*{message}"):
        _rows(path)


def test_a_huge_header_cell_is_cut(tmp_path: Path) -> None:
    path = _csv(tmp_path, "x" * 100_000 + "\n1\n")
    with pytest.raises(InputFileError) as info:
        _rows(path)
    assert "(100,000 characters)" in str(info.value) and len(str(info.value)) < 600


# -- XLSX ----------------------------------------------------------------------------------------

CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
    "</Types>"
)
ROOT_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/>'
    "</Relationships>"
)
WORKBOOK = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
    '<sheets><sheet name="prices" sheetId="1" r:id="rId1"/></sheets></workbook>'
)
WORKBOOK_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/>'
    "</Relationships>"
)


def _cell(ref: str, value: str | float) -> str:
    if isinstance(value, str):
        return f'<c r="{ref}" t="inlineStr"><is><t>{value}</t></is></c>'
    return f'<c r="{ref}"><v>{value}</v></c>'


def _row(number: int, values: list[str | float]) -> str:
    cells = "".join(_cell(f"{'ABCDE'[i]}{number}", v) for i, v in enumerate(values))
    return f'<row r="{number}">{cells}</row>'


def _xlsx(
    path: Path, rows_xml: str, *, dimension: str = "A1:E2", tail: str = "</sheetData></worksheet>"
) -> Path:
    """A minimal workbook written by hand, so a test can say what a hostile file says (a
    dimension, a far cell, broken XML after row 2)."""
    sheet = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
        f'<dimension ref="{dimension}"/><sheetData>{rows_xml}{tail}'
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", CONTENT_TYPES)
        archive.writestr("_rels/.rels", ROOT_RELS)
        archive.writestr("xl/workbook.xml", WORKBOOK)
        archive.writestr("xl/_rels/workbook.xml.rels", WORKBOOK_RELS)
        archive.writestr("xl/worksheets/sheet1.xml", sheet)
    return path


def test_handmade_workbook_reads(tmp_path: Path) -> None:
    path = _xlsx(tmp_path / "ok.xlsx", _row(1, [*HEADER]) + _row(2, [*ROW, 1.09]))
    (row,) = _rows(path)
    assert (row.row, row.line, row.values["usd_per_hour"]) == (1, 2, "1.09")


def test_a_claimed_huge_dimension_and_a_far_cell_stay_cheap(tmp_path: Path) -> None:
    # 5 KB on disk, one cell at XFD1048576: pandas padded every row to 16,384 columns and
    # 1,048,576 rows (15 GB, the OOM killer). Streaming stops at the column limit.
    far = '<row r="1048576"><c r="XFD1048576" t="inlineStr"><is><t>x</t></is></c></row>'
    path = _xlsx(
        tmp_path / "far.xlsx",
        _row(1, [*HEADER]) + _row(2, [*ROW, 1.0]) + far,
        dimension="A1:XFD1048576",
    )
    assert path.stat().st_size < 5_000
    started = time.monotonic()
    (row,) = _rows(path)
    assert row.values["usd_per_hour"] == "1.0"
    assert time.monotonic() - started < 20

    # the same far row inside the header's columns: past the row limit, refused by its row
    inside = '<row r="1048576"><c r="E1048576" t="inlineStr"><is><t>x</t></is></c></row>'
    path = _xlsx(tmp_path / "far2.xlsx", _row(1, [*HEADER]) + _row(2, [*ROW, 1.0]) + inside)
    with pytest.raises(InputFileError, match=r"row 1048575, line 1048576: more than 100,000"):
        _rows(path)


def test_the_first_bad_row_is_reported_before_the_rest_is_read(tmp_path: Path) -> None:
    # Row 2 is bad; everything after it is broken XML. A reader that loads the whole sheet
    # first fails on the XML; the streaming reader reports row 2.
    path = _xlsx(
        tmp_path / "early.xlsx",
        _row(1, [*HEADER]) + _row(2, [*ROW, "cheap"]) + '<row r="3"><c r="A3"',
        tail="",
    )
    with pytest.raises(InputFileError) as info:
        _rows(path)
    assert "row 1, line 2, column 'usd_per_hour': expected a number, got 'cheap'" in str(info.value)
    broken = _xlsx(tmp_path / "broken.xlsx", _row(1, [*HEADER]) + '<row r="2"><c r="A2"', tail="")
    with pytest.raises(InputFileError, match="not a readable .xlsx worksheet after line 1"):
        _rows(broken)


def test_a_part_that_unpacks_too_large_is_refused_before_reading(tmp_path: Path) -> None:
    # a 400 MB cell would be a 400 MB error message; the string table is refused unread
    path = _xlsx(tmp_path / "big.xlsx", _row(1, [*HEADER]) + _row(2, [*ROW, 1.0]))
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/sharedStrings.xml", "x" * (MAX_XLSX_PART_BYTES + 1))
    assert path.stat().st_size < 200_000
    with pytest.raises(InputFileError) as info:
        _rows(path)
    assert "'xl/sharedStrings.xml' unpacks to" in str(info.value)
    assert len(str(info.value)) < 400


def test_a_huge_cell_in_a_workbook_is_cut_in_the_message(tmp_path: Path) -> None:
    path = _xlsx(tmp_path / "cell.xlsx", _row(1, [*HEADER]) + _row(2, ["aws", "r" * 50_000]))
    with pytest.raises(InputFileError) as info:
        _rows(path)
    assert "a cell of 50,000 characters" in str(info.value) and len(str(info.value)) < 400


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "not a zip archive"),
        (b"\x00\x01binary junk" * 100, "not a zip archive"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600, "password-protected"),
    ],
)
def test_files_that_are_not_workbooks(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "quote.xlsx"
    path.write_bytes(content)
    with pytest.raises(InputFileError, match=message):
        _rows(path)


def test_a_zip_that_is_not_a_workbook(tmp_path: Path) -> None:
    path = tmp_path / "quote.xlsx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hello.txt", "hi")
    with pytest.raises(InputFileError, match="not a readable .xlsx workbook"):
        _rows(path)


def test_old_xls_and_folders(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match=r"got '.xls' \(save it as .xlsx or CSV\)"):
        _rows(_csv(tmp_path, "x", "old.xls"))
    folder = tmp_path / "dir.csv"
    folder.mkdir()
    with pytest.raises(InputFileError, match="not a file"):
        _rows(folder)


def _point(**changes: object) -> PricePoint:
    values: dict[str, object] = {
        "provider": Provider.OTHER,
        "region": "dc1",
        "instance_type": "box",
        "gpu_model": "H100-SXM",
        "gpu_count": 8,
        "purchase_option": PurchaseOption.ON_DEMAND,
        "usd_per_hour": 10.0,
        "source": "test",
        "effective_date": "2026-01-01",
    }
    values.update(changes)
    return PricePoint(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"region": "dc\x001"}, "NUL"),
        ({"instance_type": "i" * 101}, "the store holds 100"),
        ({"source": "s\x00"}, "NUL"),
        ({"gpu_count": 2**40}, "expected a whole number"),
        ({"usd_per_hour": float("nan")}, "finite"),
    ],
)
def test_points_the_store_cannot_hold_are_named(changes: dict[str, object], message: str) -> None:
    problems = point_problems(_point(**changes))
    assert problems and message in problems[0]
    assert "\x00" not in problems[0] and len(problems[0]) < 400
