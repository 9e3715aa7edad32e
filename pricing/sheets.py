"""Versioned price sheets in the store: load, import, refresh, read the latest, diff.

Every load is a new *version* (table ``price_sheet_versions``) holding the prices it brought
(``price_points``), written in the caller's one transaction: a version lands whole or not at
all. The bundled snapshot, each provider's live refresh and each user sheet are versions of
their own kind (``snapshot``, ``aws``, ``gcp``, ``azure``, ``user``).

The prices in force (:func:`latest_prices`) are, for each price key (provider, region, instance
type, purchase option, payment, plan kind), the newest successful version's price; a user
sheet's price for a key beats any list price of that key (negotiated discounts override list
prices where they apply). A failed refresh is recorded as a ``failed`` version with its error
and no prices, so the last good prices stay in force.

The values read and written here (:class:`~pricing.entries.PriceEntry`,
:class:`~pricing.entries.VersionInfo`, :class:`~pricing.entries.SheetDiff`) and what is computed
on them without the store (GPU matching, option groups, comparing two versions' prices) are in
:mod:`pricing.entries`, which the pure core may import; this module is the store's side.
"""

from __future__ import annotations

import csv
import hashlib
import importlib
import importlib.util
import math
import re
import unicodedata
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from planner.common.secrets import redact_text
from planner.common.text import closest, printable, shown
from planner.errors import InputFileError, NotFoundError, PlannerError, RowProblem, UsageError
from planner.store.price_models import (
    SOURCE_KINDS,
    STATUS_FAILED,
    PricePointRow,
    PriceSheetVersion,
)
from pricing.entries import (
    STATUS_OK,
    PriceEntry,
    Scope,
    SheetDiff,
    SourceKind,
    VersionInfo,
    compare_versions,
    gpu_matches,
    option_filter,
    sort_key,
)
from pricing.model import PricePoint, Provider, PurchaseOption
from pricing.snapshot import (
    COLUMNS,
    IGNORED_COLUMNS,
    RawRow,
    check_header,
    gpu_aliases,
    load_snapshot,
    parse_points,
    snapshot_path,
)
from pricing.versions import VersionTable

REFRESH_PROVIDERS = ("aws", "gcp", "azure")
LIST_KINDS = ("snapshot", "aws", "gcp", "azure")  # list prices, as opposed to user sheets
#: The columns a user sheet must have; the others default (see :func:`import_sheet`).
USER_REQUIRED = ("provider", "region", "instance_type", "purchase_option", "usd_per_hour")


class RefreshError(PlannerError):
    """A live refresh failed; the failure is recorded and the last good prices stay."""

    def __init__(self, provider: str, reason: str, kept: str) -> None:
        self.provider = provider
        self.reason = reason
        super().__init__(f"{provider} price refresh failed: {reason}. {kept}")


def version_info(row: PriceSheetVersion) -> VersionInfo:
    """A stored version as a value, detached from the session."""
    return VERSIONS.info(row)


# -- writing versions --------------------------------------------------------------------------


def _point_values(point: PricePoint, version_id: int) -> dict[str, Any]:
    return {
        "version_id": version_id,
        "provider": point.provider.value,
        "region": point.region,
        "instance_type": point.instance_type,
        "gpu_model": point.gpu_model,
        "gpu_count": point.gpu_count,
        "gpu_memory_gb": point.gpu_memory_gb,
        "vcpus": point.vcpus,
        "ram_gb": point.ram_gb,
        "purchase_option": point.purchase_option.value,
        "usd_per_hour": point.usd_per_hour,
        "upfront_usd": point.upfront_usd,
        "payment": point.payment,
        "plan_kind": point.plan_kind,
        "currency": point.currency,
        "effective_date": point.effective_date,
        "source": point.source,
        "fetched_at": point.fetched_at,
    }


def _to_point(row: PricePointRow) -> PricePoint:
    return PricePoint(
        provider=Provider(row.provider),
        region=row.region,
        instance_type=row.instance_type,
        gpu_model=row.gpu_model,
        gpu_count=row.gpu_count,
        purchase_option=PurchaseOption(row.purchase_option),
        usd_per_hour=row.usd_per_hour,
        source=row.source,
        effective_date=row.effective_date,
        gpu_memory_gb=row.gpu_memory_gb,
        vcpus=row.vcpus,
        ram_gb=row.ram_gb,
        upfront_usd=row.upfront_usd,
        payment=row.payment,
        plan_kind=row.plan_kind,
        currency=row.currency,
        fetched_at=row.fetched_at,
    )


#: The versions of instance price sheets, as :mod:`pricing.versions` handles them.
VERSIONS = VersionTable[PricePoint](PriceSheetVersion, PricePointRow, _point_values)


#: The store's column lengths (``price_points``): longer text is refused before writing, the
#: same way on SQLite (which would keep it) and PostgreSQL (which would fail mid-write).
STORE_TEXT_LIMITS = {
    "region": 64,
    "instance_type": 100,
    "gpu_model": 64,
    "payment": 32,
    "plan_kind": 32,
    "currency": 3,
    "effective_date": 10,
    "source": 100_000,
}
_MAX_INT = 2**31 - 1


def point_problems(point: PricePoint) -> list[str]:
    """What is wrong with a point before it is stored (a loader's, a sheet's): the reason for a
    refresh's error, or for refusing to write it."""
    problems = []
    if not isinstance(point, PricePoint):
        return [f"not a PricePoint: {type(point).__name__}"]
    where = "/".join(
        printable(str(x), 40)
        for x in (point.provider, point.region, point.instance_type, point.purchase_option)
    )
    for name, limit in STORE_TEXT_LIMITS.items():
        value = getattr(point, name)
        if not isinstance(value, str):
            problems.append(f"{where}: {name} is not text ({type(value).__name__})")
        elif "\x00" in value:
            problems.append(f"{where}: {name} {shown(value)} holds a NUL character")
        elif len(value) > limit:
            problems.append(
                f"{where}: {name} of {len(value):,} characters (the store holds {limit}): "
                f"{shown(value)}"
            )
    for name in ("gpu_count", "vcpus"):
        value = getattr(point, name)
        if value is not None and not (isinstance(value, int) and -_MAX_INT <= value <= _MAX_INT):
            problems.append(f"{where}: {name} {shown(value)} (expected a whole number)")
    for name in ("usd_per_hour", "upfront_usd", "gpu_memory_gb", "ram_gb"):
        value = getattr(point, name)
        if value is not None and not (isinstance(value, int | float) and math.isfinite(value)):
            problems.append(f"{where}: {name} {shown(value)} (expected a finite number)")
    if problems:
        return problems
    if not (point.usd_per_hour > 0):
        problems.append(f"{where}: price {point.usd_per_hour!r} (expected > 0)")
    if point.gpu_count < 1:
        problems.append(f"{where}: gpu_count {point.gpu_count!r} (expected >= 1)")
    if point.upfront_usd < 0:
        problems.append(f"{where}: upfront {point.upfront_usd!r} (expected >= 0)")
    if point.currency != "USD":
        problems.append(f"{where}: currency {shown(point.currency)} (expected USD)")
    if not point.source or not point.effective_date:
        problems.append(f"{where}: no source or effective date")
    else:
        try:
            date.fromisoformat(point.effective_date)
        except ValueError:
            problems.append(f"{where}: effective date {shown(point.effective_date)} is not ISO")
    return problems


def store_version(
    session: Session,
    points: Sequence[PricePoint],
    *,
    source_kind: SourceKind,
    label: str,
    source_ref: str = "",
    sha256: str | None = None,
    fetched_at: datetime | None = None,
) -> VersionInfo:
    """Write ``points`` as a new successful version, in the session's transaction."""
    if source_kind not in SOURCE_KINDS:
        raise UsageError(f"unknown price source kind {source_kind!r}")
    seen: set[tuple[str, ...]] = set()
    for point in points:
        problems = point_problems(point)
        if problems:
            raise PlannerError(f"cannot store price: {problems[0]}")
        if point.key() in seen:
            raise PlannerError(f"cannot store price: {'/'.join(point.key())} given twice")
        seen.add(point.key())
    if "\x00" in label or "\x00" in source_ref:
        raise PlannerError(f"cannot store price sheet {shown(label)}: NUL in its label or source")
    return VERSIONS.add(
        session,
        points,
        source_kind=source_kind,
        label=label,
        source_ref=source_ref,
        sha256=sha256,
        fetched_at=fetched_at,
    )


def load_snapshot_version(
    session: Session, path: Path | None = None, *, force: bool = False
) -> tuple[VersionInfo, bool]:
    """Load the bundled snapshot as a version; ``(version, True)`` if loaded now.

    Loading the same file again is a no-op (``(that version, False)``) unless ``force``.
    """
    return VERSIONS.load_snapshot(
        session, path or snapshot_path(), load_snapshot, store_version, force=force
    )


def ensure_list_prices(session: Session) -> VersionInfo | None:
    """Load the bundled snapshot when the store has no list prices yet; the version if loaded."""
    if VERSIONS.has_prices(session, LIST_KINDS):
        return None
    version, _ = load_snapshot_version(session)
    return version


# -- reading user sheets -----------------------------------------------------------------------

#: Limits on a user sheet, stated in the messages and in docs/pricing.md: a price sheet is a few
#: hundred rows, so anything far beyond these is a wrong file, and is refused before it can
#: exhaust memory or time.
MAX_ROWS = 100_000
MAX_COLUMNS = 64
MAX_CELL_CHARS = 1_000  # any one cell (source and notes included)
MAX_HEADER_CHARS = 64
#: An .xlsx file is a zip archive; a worksheet or string table unpacking to more than this is
#: refused before it is read (a 5 KB workbook can unpack to gigabytes).
MAX_XLSX_PART_BYTES = 64 * 1024 * 1024
EXCEL_MAX_ROWS = 1_048_576
#: Longest text each column holds in the store (the columns of ``price_points``).
TEXT_LIMITS = {
    "provider": 16,
    "region": 64,
    "instance_type": 100,
    "gpu_model": 64,
    "purchase_option": 32,
    "payment": 32,
    "plan_kind": 32,
    "currency": 16,
    "effective_date": 32,
    "source": MAX_CELL_CHARS,
}
NUMBER_COLUMNS = ("usd_per_hour", "upfront_usd", "gpu_count", "gpu_memory_gb", "vcpus", "ram_gb")
#: Values no price sheet holds: refused outright (the float and integer columns' sanity range).
NUMBER_LIMITS = {
    "usd_per_hour": 1_000_000.0,
    "upfront_usd": 1_000_000_000.0,
    "gpu_count": 65_536.0,
    "gpu_memory_gb": 100_000.0,
    "vcpus": 1_000_000.0,
    "ram_gb": 1_000_000_000.0,
}
#: Columns holding a cloud's own names (``us-east-1``, ``europe-west4``, ``eastus``,
#: ``a3-highgpu-8g``, ``Standard_ND96isr_H100_v5``): ASCII letters and digits, then also
#: ``.`` ``-`` ``_`` ``/`` ``:``. This refuses look-alikes (a region typed with U+2010 hyphens
#: would be a new region) and text a spreadsheet runs (``=HYPERLINK(...)``, ``@SUM(1)``).
IDENTIFIER_COLUMNS = ("region", "instance_type")
IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:-]*")
IDENTIFIER_EXPECTED = (
    "expected a name as clouds write them: ASCII letters and digits, then also . - _ / : "
    "(e.g. us-east-1, a3-highgpu-8g, Standard_ND96isr_H100_v5)"
)
_POINT = re.compile(r"[+-]?(?:\d+|\d{1,3}(?:,\d{3})+)?(?:\.\d+)?(?:[eE][+-]?\d+)?")
_COMMA = re.compile(r"[+-]?(?:\d+|\d{1,3}(?:\.\d{3})+)?(?:,\d+)?")


def number_text(text: str, *, decimal_comma: bool = False) -> str:
    """A number as typed in a sheet, as plain ``1234.5`` text; :class:`ValueError` with
    ``(what was expected, why)`` when it is not a number or its separators are ambiguous.

    By default the decimal separator is a point; commas are accepted only as thousands
    separators where that is unambiguous (``1,234.50``, ``1,234,567``). ``1,09`` and ``1,234``
    are refused: one reader means 1.09 and 1.234, another 109 and 1234. With ``decimal_comma``
    the comma is the decimal separator and points group thousands (``1.234,50``); ``1.234`` and
    ``1.09`` are then refused the same way. A leading ``$`` is read past.
    """
    value = text.strip().removeprefix("$").strip()
    if not value:
        return ""
    if decimal_comma:
        expected = "expected a number with a decimal comma (--decimal-comma), e.g. 1,09 or 1.234,50"
        if not _COMMA.fullmatch(value) or not any(c.isdigit() for c in value):
            raise ValueError(expected, "")
        if value.split(",")[0].count(".") == 1 and "," not in value:
            raise ValueError(
                expected, "with --decimal-comma a point groups thousands; write 1234 or 1,234"
            )
        return value.replace(".", "").replace(",", ".")
    expected = "expected a number with a decimal point, e.g. 1.09"
    if not _POINT.fullmatch(value) or not any(c.isdigit() for c in value):
        if "," in value and _COMMA.fullmatch(value):
            raise ValueError(
                expected,
                "a decimal comma is ambiguous (1,09 is 1.09 in some locales and 109 in "
                "others); write 1.09, or pass --decimal-comma if the whole sheet uses decimal "
                "commas",
            )
        raise ValueError("expected a number", "")
    if value.count(",") == 1 and "." not in value:
        raise ValueError(
            expected,
            "1,234 is 1234 in some locales and 1.234 in others; write it without the comma, "
            "or pass --decimal-comma if the whole sheet uses decimal commas",
        )
    return value.replace(",", "")


@dataclass(frozen=True)
class SheetOptions:
    """How to read a user sheet's cells."""

    decimal_comma: bool = False


_HIDDEN = ("Cc", "Cf", "Cs", "Zl", "Zp")  # control, format (bidi overrides), separators


def _control_free(text: str) -> bool:
    return text.isprintable() or not any(unicodedata.category(ch) in _HIDDEN for ch in text)


def _check_cells(
    path: Path, raw: RawRow, options: SheetOptions, native: Sequence[str] = ()
) -> RawRow:
    """The row with its numbers made plain (``1,234.50`` -> ``1234.50``), after checking every
    cell against the limits: at most :data:`MAX_CELL_CHARS` (and each column's store length),
    no control characters (NUL included) outside notes, numbers unambiguous and in range.
    ``native`` names the cells a workbook stored as numbers (never locale-dependent)."""

    def fail(column: str, message: str) -> InputFileError:
        return InputFileError(path, RowProblem(raw.row, column, message, raw.line))

    values = dict(raw.values)
    for column, value in raw.values.items():
        if len(value) > MAX_CELL_CHARS:
            raise fail(
                column,
                f"a cell of {len(value):,} characters (at most {MAX_CELL_CHARS:,}): {shown(value)}",
            )
        if column in IGNORED_COLUMNS:
            continue
        text = value.strip()
        if not _control_free(text):
            raise fail(column, f"control characters (NUL, escape, ...) in {shown(text)}")
        limit = TEXT_LIMITS.get(column)
        if limit is not None and len(text) > limit:
            raise fail(column, f"at most {limit} characters, got {len(text)}: {shown(text)}")
        if column in IDENTIFIER_COLUMNS and text and not IDENTIFIER.fullmatch(text):
            raise fail(column, f"{IDENTIFIER_EXPECTED}; got {shown(text)}{_odd_characters(text)}")
        if column in NUMBER_COLUMNS:
            if column in native:
                plain = text
            else:
                try:
                    plain = number_text(text, decimal_comma=options.decimal_comma)
                except ValueError as exc:
                    expected, why = exc.args
                    raise fail(
                        column, f"{expected}, got {shown(text)}" + (f": {why}" if why else "")
                    ) from None
            if plain:
                number = float(plain)
                if not math.isfinite(number):
                    raise fail(column, f"expected a finite number, got {shown(text)}")
                if abs(number) > NUMBER_LIMITS[column]:
                    raise fail(
                        column,
                        f"{shown(text)} is out of range (at most {NUMBER_LIMITS[column]:,.0f})",
                    )
            values[column] = plain
    return RawRow(raw.row, raw.line, values)


def _odd_characters(text: str) -> str:
    """The characters of ``text`` outside ASCII named (a U+2010 HYPHEN looks like ``-``)."""
    odd = dict.fromkeys(ch for ch in text if not ch.isascii())
    if not odd:
        return ""
    names = ", ".join(f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')}" for ch in odd)
    return f" (not ASCII: {names})"


def _header_names(path: Path, cells: Sequence[str]) -> list[str]:
    if len(cells) > MAX_COLUMNS:
        raise InputFileError(
            path, f"{len(cells)} columns in the header (a price sheet has at most {MAX_COLUMNS})"
        )
    names = []
    for cell in cells:
        if len(cell) > MAX_HEADER_CHARS or not _control_free(cell):
            raise InputFileError(
                path,
                f"header cell {shown(cell)} is not a column name (the columns are: "
                f"{', '.join(COLUMNS)})",
            )
        names.append(_name(cell))
    return names


def _no_value_under_blank(
    path: Path, row: int, line: int | None, names: Sequence[str], cells: Sequence[str]
) -> None:
    """Columns with a blank header are read past, unless a row has a value there."""
    for name, cell in zip(names, cells, strict=False):
        if not name and cell.strip():
            raise InputFileError(
                path,
                RowProblem(row, None, f"a value under a blank header cell: {shown(cell)}", line),
            )


def _too_many_rows(path: Path, row: int, line: int | None) -> InputFileError:
    return InputFileError(
        path,
        RowProblem(
            row, None, f"more than {MAX_ROWS:,} price rows (a price sheet has far fewer)", line
        ),
    )


def _sniff_delimiter(header_line: str) -> str:
    """``,`` unless the header is plainly separated by ``;`` or tabs (a spreadsheet's export
    in a locale whose list separator is ``;``)."""
    counts = {d: header_line.count(d) for d in (",", ";", "\t")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] > counts[","] else ","


def _csv_rows(path: Path) -> tuple[list[str], Iterator[RawRow]]:
    """Header and lazily read rows of a CSV user sheet (UTF-8, optional BOM; separated by
    commas, semicolons or tabs, as the header shows)."""
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise InputFileError(path, f"cannot read the file ({exc.strerror or exc})") from None
    try:
        try:
            first = handle.readline(MAX_COLUMNS * (MAX_HEADER_CHARS + 3))
            handle.seek(0)
            if handle.read(1) != "\ufeff":
                handle.seek(0)
        except UnicodeDecodeError as exc:
            raise InputFileError(
                path, f"not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8 CSV"
            ) from None
        if not first.strip():
            raise InputFileError(path, "empty file: expected a header row")
        if "\x00" in first:
            raise InputFileError(path, "a binary file, not CSV text (NUL bytes in the header)")
        reader = csv.reader(handle, delimiter=_sniff_delimiter(first))
        try:
            header = next(reader)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise InputFileError(path, f"not a readable CSV header: {shown(str(exc))}") from None
    except BaseException:
        handle.close()
        raise
    names = _header_names(path, header)

    def rows() -> Iterator[RawRow]:
        with handle:
            line = reader.line_num
            number = 0
            while True:
                try:
                    cells = next(reader)
                except StopIteration:
                    return
                except UnicodeDecodeError as exc:
                    raise InputFileError(
                        path,
                        RowProblem(
                            number + 1,
                            None,
                            f"not UTF-8 text ({exc.reason}); save it as UTF-8 CSV",
                            line + 1,
                        ),
                    ) from None
                except csv.Error as exc:
                    raise InputFileError(
                        path,
                        RowProblem(
                            number + 1, None, f"not readable CSV: {shown(str(exc))}", line + 1
                        ),
                    ) from None
                number += 1
                first_line = line + 1
                line = reader.line_num
                if not any(c.strip() for c in cells):
                    continue  # blank lines are not rows
                if number > MAX_ROWS:
                    raise _too_many_rows(path, number, first_line)
                if len(cells) != len(names):
                    raise InputFileError(
                        path,
                        RowProblem(
                            number,
                            None,
                            f"{len(cells)} fields where the header has {len(names)}",
                            first_line,
                        ),
                    )
                _no_value_under_blank(path, number, first_line, names, cells)
                yield RawRow(
                    number, first_line, {n: c for n, c in zip(names, cells, strict=True) if n}
                )

    return names, rows()


_OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def _check_workbook_file(path: Path) -> None:
    """Refuse, before openpyxl reads anything, a file that is not an .xlsx zip or that unpacks
    to more than :data:`MAX_XLSX_PART_BYTES` per part."""
    try:
        with path.open("rb") as fh:
            magic = fh.read(8)
    except OSError as exc:
        raise InputFileError(path, f"cannot read the file ({exc.strerror or exc})") from None
    if magic == _OLE2_MAGIC:
        raise InputFileError(
            path,
            "a password-protected workbook or an old binary .xls file, not .xlsx: save it "
            "unprotected as .xlsx, or as CSV",
        )
    try:
        with zipfile.ZipFile(path) as archive:
            parts = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise InputFileError(
            path, f"not a readable .xlsx workbook (not a zip archive: {shown(str(exc))})"
        ) from None
    for part in parts:
        if part.file_size > MAX_XLSX_PART_BYTES:
            raise InputFileError(
                path,
                f"part {shown(part.filename)} unpacks to {part.file_size:,} bytes; planner "
                f"reads workbooks whose parts unpack to at most {MAX_XLSX_PART_BYTES:,} bytes "
                "(save the sheet as CSV, or remove what is not prices)",
            )


def _cell_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, datetime):
        if value.time() == datetime.min.time() and value.tzinfo is None:
            return value.date().isoformat()
        return value.isoformat()
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _xlsx_rows(path: Path) -> tuple[list[str], Iterator[RawRow]]:
    """Header and lazily read rows (with the columns holding native numbers) of the first
    worksheet, read in openpyxl's streaming read-only mode."""
    _check_workbook_file(path)
    import openpyxl  # type: ignore[import-untyped]

    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many kinds for a damaged workbook
        raise InputFileError(
            path, f"not a readable .xlsx workbook: {shown(f'{type(exc).__name__}: {exc}')}"
        ) from None
    try:
        if not book.worksheets:
            raise InputFileError(path, "the workbook has no worksheet")
        sheet = book.worksheets[0]
        # Rows are streamed and counted as they come: the dimension a file states is not
        # trusted (a 5 KB file can claim A1:XFD1048576), and columns stop at the limit.
        cells = sheet.iter_rows(values_only=True, max_col=MAX_COLUMNS + 1, max_row=EXCEL_MAX_ROWS)
        header_row = 0
        header: list[str] = []
        for header_row, values in enumerate(_guarded(path, cells), start=1):
            header = [_cell_text(v).strip() for v in values]
            while header and not header[-1]:
                header.pop()
            if header:
                break
            if header_row > 100:
                break
    except BaseException:
        book.close()
        raise
    if not header:
        book.close()
        raise InputFileError(path, "the first worksheet has no header row")
    names = _header_names(path, header)

    def rows() -> Iterator[RawRow]:
        try:
            for line, values in enumerate(_guarded(path, cells, header_row), start=header_row + 1):
                if values.count(None) == len(values):
                    continue  # fast: a claimed dimension can mean a million empty rows
                number = line - header_row
                texts = [_cell_text(v) for v in values]
                if not any(t.strip() for t in texts):
                    continue
                if number > MAX_ROWS:
                    raise _too_many_rows(path, number, line)
                extra = [t for t in texts[len(names) :] if t.strip()]
                if extra:
                    raise InputFileError(
                        path,
                        RowProblem(
                            number,
                            None,
                            f"a value right of the header's last column: {shown(extra[0])}",
                            line,
                        ),
                    )
                _no_value_under_blank(path, number, line, names, texts)
                native = tuple(
                    n
                    for n, v in zip(names, values, strict=False)
                    if isinstance(v, int | float) and not isinstance(v, bool)
                )
                yield _NativeRow(
                    number,
                    line,
                    {n: t for n, t in zip(names, texts, strict=False) if n},
                    native,
                )
        finally:
            book.close()

    return names, rows()


@dataclass(frozen=True)
class _NativeRow(RawRow):
    """A workbook row, with the columns whose cells are numbers rather than text."""

    native: tuple[str, ...] = ()


def _guarded(
    path: Path, cells: Iterator[tuple[object, ...]], start: int = 0
) -> Iterator[tuple[object, ...]]:
    """openpyxl's rows, its parse errors (a damaged worksheet) as this file's error; ``start``:
    the worksheet rows already read."""
    count = start
    while True:
        try:
            values = next(cells)
        except StopIteration:
            return
        except Exception as exc:
            raise InputFileError(
                path,
                f"not a readable .xlsx worksheet after line {count}: "
                f"{shown(f'{type(exc).__name__}: {exc}')}",
            ) from None
        count += 1
        yield values


def read_sheet_rows(
    path: Path, options: SheetOptions | None = None
) -> tuple[list[str], Iterator[RawRow]]:
    """Header and rows of a user sheet: CSV, or the first worksheet of an XLSX workbook.

    Rows come lazily (a bad row is reported as soon as it is read), each checked by
    :func:`_check_cells`; at most :data:`MAX_ROWS` rows and :data:`MAX_COLUMNS` columns."""
    options = options or SheetOptions()
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".xlsx", ".xlsm"):
        hint = " (save it as .xlsx or CSV)" if suffix in (".xls", ".ods", ".numbers") else ""
        raise InputFileError(
            path,
            f"expected a .csv or .xlsx file, got {shown(suffix) if suffix else 'no suffix'}" + hint,
        )
    if not path.exists():
        raise InputFileError(path, "file not found")
    if not path.is_file():
        raise InputFileError(path, "not a file")
    if suffix == ".csv":
        names, raw_rows = _csv_rows(path)
    else:
        names, raw_rows = _xlsx_rows(path)

    def checked() -> Iterator[RawRow]:
        for raw in raw_rows:
            native = raw.native if isinstance(raw, _NativeRow) else ()
            yield _check_cells(path, raw, options, native)

    return names, checked()


def _name(column: object) -> str:
    return str(column).strip().lower().replace(" ", "_")


def _known_shapes(session: Session) -> Callable[[Provider, str], PricePoint | None]:
    """A lookup of instance shapes from the prices in force and the bundled snapshot."""
    shapes: dict[tuple[str, str], PricePoint] = {}
    for point in load_snapshot():
        shapes.setdefault((point.provider.value, point.instance_type), point)
    for entry in latest_entries(session):
        shapes[(entry.point.provider.value, entry.point.instance_type)] = entry.point

    def lookup(provider: Provider, instance_type: str) -> PricePoint | None:
        return shapes.get((provider.value, instance_type))

    return lookup


#: A price more than this many times the one in force for its key (or less than its inverse)
#: is refused unless forced: a misplaced separator or a per-GPU price typed as per instance.
MAX_PRICE_RATIO = 10.0
#: Below this an hourly price is a typo (no instance costs less than a hundredth of a cent).
MIN_USD_PER_HOUR = 0.0001


@dataclass(frozen=True)
class ImportResult:
    """What ``planner prices import`` did: a new version, or nothing (``imported`` False) when
    the same content is already imported and its prices are in force."""

    version: VersionInfo
    imported: bool


def _content_sha256(header: Sequence[str], rows: Sequence[RawRow]) -> str:
    """A digest of what a sheet says (its prices, not its bytes or notes): a re-saved workbook
    or the same rows as CSV are the same content."""
    digest = hashlib.sha256(b"planner user sheet v1\n")
    columns = sorted(n for n in set(header) if n and n not in IGNORED_COLUMNS)
    digest.update(("\x1f".join(columns) + "\n").encode())
    for raw in rows:
        cells = [raw.values.get(c, "").strip() for c in columns]
        digest.update(("\x1f".join(cells) + "\n").encode())
    return digest.hexdigest()


def _implausible(
    path: Path,
    raw: RawRow,
    point: PricePoint,
    in_force: Mapping[tuple[str, ...], PriceEntry],
    today: date,
) -> InputFileError | None:
    """Why a parsed price is implausible (a located error to raise unless forced), or None."""

    def fail(column: str, message: str) -> InputFileError:
        return InputFileError(
            path,
            RowProblem(raw.row, column, f"{message}; pass --force to import it anyway", raw.line),
        )

    price = point.usd_per_hour
    if price < MIN_USD_PER_HOUR:
        return fail("usd_per_hour", f"{price:g} $/h is below {MIN_USD_PER_HOUR} $/h")
    current = in_force.get(point.key())
    if current is not None:
        old = current.point.usd_per_hour
        ratio = price / old
        if ratio > MAX_PRICE_RATIO or ratio < 1 / MAX_PRICE_RATIO:
            return fail(
                "usd_per_hour",
                f"{price:,.4f} $/h is {ratio:.3g}x the price in force ({old:,.4f} $/h, version "
                f"{current.version_id} {current.source_kind}); a change of more than "
                f"{MAX_PRICE_RATIO:g}x is implausible (a misplaced decimal separator?)",
            )
    year = int(point.effective_date[:4])
    if year < 2000 or year > today.year + 10:
        return fail("effective_date", f"{point.effective_date} is implausible for a price")
    return None


def import_sheet(
    session: Session,
    path: Path,
    *,
    label: str | None = None,
    today: date | None = None,
    decimal_comma: bool = False,
    force: bool = False,
    source_ref: str | None = None,
) -> ImportResult:
    """Import a user's price sheet (CSV or XLSX) as a new ``user`` version.

    Columns as the snapshot's (:data:`pricing.snapshot.COLUMNS`); only ``provider``, ``region``,
    ``instance_type``, ``purchase_option`` and ``usd_per_hour`` are required. Defaults: GPU
    model, GPU count, memory, vCPUs and RAM from the price list's row of the same instance
    (required for an instance the list does not have), ``upfront_usd`` 0, ``currency`` USD,
    ``effective_date`` the import date, ``source`` "user sheet FILE". A bad row stops the import
    with its row and column, and nothing is stored.

    Numbers take a decimal point (``decimal_comma``: a decimal comma); see :func:`number_text`.
    A price below :data:`MIN_USD_PER_HOUR`, or more than :data:`MAX_PRICE_RATIO` times (or less
    than a tenth of) the price in force for its key, is refused unless ``force``. The same
    content imported again while its prices are still in force stores nothing
    (``imported=False``, the earlier version). ``source_ref`` records where the sheet came from
    (default: the file's absolute path).
    """
    today = today or datetime.now(UTC).date()
    header, row_iter = read_sheet_rows(path, SheetOptions(decimal_comma=decimal_comma))
    header = [n for n in header if n]
    check_header(path, header, required=USER_REQUIRED)
    defaults = {
        "effective_date": today.isoformat(),
        "source": f"user sheet {path.name}",
        "currency": "USD",
    }
    rows: list[RawRow] = []

    def remembered() -> Iterator[RawRow]:
        for raw in row_iter:
            rows.append(raw)
            yield raw

    points = parse_points(
        path,
        remembered(),
        defaults=defaults,
        aliases=gpu_aliases(),
        shapes=_known_shapes(session),
    )
    if not points:
        raise InputFileError(path, "no price rows under the header")
    sha = _content_sha256(header, rows)
    in_force: dict[tuple[str, ...], PriceEntry] = {
        e.point.key(): e for e in latest_entries(session)
    }
    unchanged = VERSIONS.unchanged_import(session, sha, [p.key() for p in points], in_force)
    if unchanged is not None:
        return ImportResult(unchanged, imported=False)
    if not force:
        for raw, point in zip(rows, points, strict=True):
            problem = _implausible(path, raw, point, in_force, today)
            if problem is not None:
                raise problem
    version = store_version(
        session,
        points,
        source_kind="user",
        label=label or path.name,
        source_ref=source_ref if source_ref is not None else str(path.resolve()),
        sha256=sha,
    )
    return ImportResult(version, imported=True)


def _refresh_label(provider: str, region: str | None) -> str:
    return f"{provider} live refresh" + (f" ({region})" if region else " (all regions)")


def record_refresh(
    session: Session, provider: str, points: Sequence[PricePoint], *, region: str | None = None
) -> VersionInfo:
    """Store a successful refresh of ``provider`` as a new version."""
    return store_version(
        session,
        points,
        source_kind=_provider_kind(provider),
        label=_refresh_label(provider, region),
        source_ref=f"pricing.loaders.{provider}.fetch(region={region!r})",
    )


def record_failed_refresh(
    session: Session, provider: str, error: BaseException | str, *, region: str | None = None
) -> VersionInfo:
    """Record a failed refresh: a ``failed`` version with the reason and no prices."""
    version = PriceSheetVersion(
        source_kind=_provider_kind(provider),
        label=_refresh_label(provider, region),
        source_ref=f"pricing.loaders.{provider}.fetch(region={region!r})",
        fetched_at=datetime.now(UTC),
        row_count=0,
        status=STATUS_FAILED,
        error=redact_text(error) if isinstance(error, str) else failure_reason(error),
    )
    session.add(version)
    session.flush()
    return version_info(version)


def failure_reason(exc: BaseException) -> str:
    """One line saying why a refresh failed (a loader's own reason where it gives one), without
    credentials (an SDK's message may name an endpoint URL with its password)."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and reason:
        return redact_text(reason)
    text = " ".join(str(exc).split())
    if isinstance(exc, PlannerError) and text:
        return redact_text(text)  # planner's (and the loaders') own messages say what happened
    return redact_text(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def _provider_kind(provider: str) -> SourceKind:
    name = provider.lower()
    if name == "aws":
        return "aws"
    if name == "gcp":
        return "gcp"
    if name == "azure":
        return "azure"
    raise UsageError(f"no live refresh for {provider!r}: expected one of aws, gcp, azure")


Fetch = Callable[..., list[PricePoint]]


class LoaderUnavailableError(PlannerError):
    """The provider's loader module is not part of this installation."""


def load_fetch(provider: str) -> Fetch:
    """``pricing.loaders.<provider>.fetch``, imported now (loaders are optional)."""
    kind = _provider_kind(provider)
    module_name = f"pricing.loaders.{kind}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name in (module_name, "pricing.loaders"):
            raise LoaderUnavailableError(
                f"the {kind} price loader is not available in this installation "
                f"(no module {module_name})"
            ) from exc
        raise
    fetch: Fetch = module.fetch
    return fetch


def last_good_version(session: Session, provider: str | None = None) -> VersionInfo | None:
    """The newest successful version of ``provider`` (or of any list source)."""
    kinds = [provider] if provider else list(LIST_KINDS)
    row = session.scalars(
        select(PriceSheetVersion)
        .where(
            PriceSheetVersion.source_kind.in_(kinds),
            PriceSheetVersion.status == STATUS_OK,
        )
        .order_by(PriceSheetVersion.id.desc())
        .limit(1)
    ).first()
    return version_info(row) if row is not None else None


def refresh(
    sessions: Callable[[], AbstractContextManager[Session]],
    provider: str,
    region: str | None = None,
    *,
    fetch: Fetch | None = None,
) -> VersionInfo:
    """Fetch ``provider``'s live prices and store them as a new version, in sessions of
    ``sessions`` (a store's ``session``).

    On any failure (the loader raises, returns nothing, or returns an invalid price) the
    failure is recorded as a ``failed`` version, the last good prices stay in force, and a
    :class:`RefreshError` names the provider and the reason. A loader that is not installed
    raises :class:`LoaderUnavailableError` (nothing recorded: nothing was tried).
    """
    kind = _provider_kind(provider)
    with sessions() as session:
        ensure_list_prices(session)
    try:
        points = list((fetch or load_fetch(kind))(region=region))
        if not points:
            raise PlannerError("the loader returned no prices")
        problems = [p for point in points for p in point_problems(point)]
        if problems:
            raise PlannerError(f"the loader returned an invalid price: {problems[0]}")
        wrong = [p for p in points if p.provider.value != kind]
        if wrong:
            raise PlannerError(f"the loader returned a {wrong[0].provider.value} price for {kind}")
        with sessions() as session:
            return record_refresh(session, kind, points, region=region)
    except LoaderUnavailableError:
        raise
    except Exception as exc:
        reason = failure_reason(exc)
        with sessions() as session:
            record_failed_refresh(session, kind, reason, region=region)
            kept = last_good_version(session, kind) or last_good_version(session)
        note = (
            f"Kept the last good prices: {kept.describe()}"
            if kept is not None
            else "No earlier prices to keep"
        )
        raise RefreshError(kind, reason, note) from exc


# -- reading -----------------------------------------------------------------------------------


def list_versions(session: Session) -> list[VersionInfo]:
    return VERSIONS.all_versions(session)


def get_version(session: Session, version_id: int) -> VersionInfo:
    # an id past the column's range is simply not there (SQLite would overflow on it)
    row = session.get(PriceSheetVersion, version_id) if 0 < version_id <= _MAX_INT else None
    if row is None:
        known = [v.id for v in list_versions(session)]
        raise NotFoundError(
            f"no price-sheet version {version_id} (versions: "
            f"{', '.join(map(str, known)) if known else 'none yet'})"
        )
    return version_info(row)


def version_points(session: Session, version_id: int) -> list[PricePoint]:
    get_version(session, version_id)
    rows = session.scalars(
        select(PricePointRow)
        .where(PricePointRow.version_id == version_id)
        .order_by(PricePointRow.id)
    )
    return [_to_point(r) for r in rows]


def check_filters(
    session: Session,
    *,
    provider: str | None = None,
    region: str | None = None,
    gpu: str | None = None,
    option: str | None = None,
) -> None:
    """Refuse (:class:`UsageError`, with the closest known names) a filter value that names
    nothing planner knows: a provider, a region no price has, a GPU that is neither in the
    catalog (name, alias or family) nor in any price, an unknown purchase option. A known value
    that matches no price is not an error: the listing is empty."""
    if provider is not None and provider.strip().lower() not in {p.value for p in Provider}:
        known_providers = [p.value for p in Provider]
        raise UsageError(
            f"--provider: unknown provider {shown(provider)}; known: "
            f"{closest(provider, known_providers)}"
        )
    option_filter(option)
    if region is not None:
        regions = sorted(
            set(
                session.scalars(
                    select(PricePointRow.region)
                    .join(PriceSheetVersion, PricePointRow.version_id == PriceSheetVersion.id)
                    .where(PriceSheetVersion.status == STATUS_OK)
                    .distinct()
                )
            )
        )
        if region not in regions:
            raise UsageError(
                f"--region: no price has region {shown(region)}; regions with prices (closest "
                f"first): {closest(region, regions) or 'none'}"
            )
    if gpu is not None and not gpu_known(session, gpu):
        stored = session.scalars(select(PricePointRow.gpu_model).distinct())
        names = sorted({*set(gpu_aliases().values()), *stored})
        raise UsageError(
            f"--gpu: unknown GPU {shown(gpu)}; known (closest first): {closest(gpu, names)}"
        )


def gpu_known(session: Session, query: str) -> bool:
    """Whether a GPU query names a catalog GPU (name, alias, family) or a GPU of any price."""
    q = query.strip().lower()
    if not q:
        return False
    catalog = gpu_aliases()
    if q in catalog or any(name.lower().startswith(q + "-") for name in catalog.values()):
        return True
    stored = session.scalars(select(PricePointRow.gpu_model).distinct())
    return any(gpu_matches(query, model) for model in stored)


def latest_entries(
    session: Session,
    provider: str | None = None,
    *,
    region: str | None = None,
    gpu: str | None = None,
    option: str | None = None,
    instance_type: str | None = None,
) -> list[PriceEntry]:
    """The prices in force with where each comes from; see the module's docstring."""
    query = (
        select(PricePointRow, PriceSheetVersion.source_kind)
        .join(PriceSheetVersion, PricePointRow.version_id == PriceSheetVersion.id)
        .where(PriceSheetVersion.status == STATUS_OK)
        .order_by(PriceSheetVersion.id.desc(), PricePointRow.id)
    )
    if provider:
        query = query.where(PricePointRow.provider == provider.lower())
    if region:
        query = query.where(PricePointRow.region == region)
    if instance_type:
        query = query.where(PricePointRow.instance_type == instance_type)
    options = option_filter(option)
    if options is not None:
        query = query.where(PricePointRow.purchase_option.in_([o.value for o in options]))
    newest_list: dict[tuple[str, ...], tuple[PricePoint, int]] = {}
    newest_user: dict[tuple[str, ...], tuple[PricePoint, int]] = {}
    for row, kind in session.execute(query):
        point = _to_point(row)
        if gpu and not gpu_matches(gpu, point.gpu_model):
            continue
        bucket = newest_user if kind == "user" else newest_list
        bucket.setdefault(point.key(), (point, row.version_id))
    entries = []
    for key, (point, version_id) in newest_user.items():
        listed = newest_list.get(key)
        entries.append(PriceEntry(point, version_id, "user", listed[0] if listed else None))
    kinds = {
        version_id: kind
        for version_id, kind in session.execute(
            select(PriceSheetVersion.id, PriceSheetVersion.source_kind)
        )
    }
    for key, (point, version_id) in newest_list.items():
        if key not in newest_user:
            entries.append(PriceEntry(point, version_id, kinds[version_id]))
    entries.sort(key=lambda e: sort_key(e.point))
    return entries


def latest_prices(
    session: Session,
    provider: str | None = None,
    *,
    region: str | None = None,
    gpu: str | None = None,
    option: str | None = None,
    instance_type: str | None = None,
) -> list[PricePoint]:
    """For each price key, the newest successful version's price; a user sheet's price of a
    key beats any list price of it. Filters: provider, region, GPU (name, alias or family
    prefix), purchase option (an option or a group: reserved, savings-plan, committed,
    commitments, all), instance type."""
    return [
        e.point
        for e in latest_entries(
            session,
            provider,
            region=region,
            gpu=gpu,
            option=option,
            instance_type=instance_type,
        )
    ]


# -- diff --------------------------------------------------------------------------------------


def _usable(version: VersionInfo) -> None:
    if version.status != STATUS_OK:
        raise UsageError(
            f"{version.describe()} is a failed refresh with no prices ({version.error}); "
            "diff successful versions"
        )


def diff(
    session: Session, old_version: int, new_version: int, *, scope: Scope = "all"
) -> SheetDiff:
    """What changed from ``old_version`` to ``new_version``: added, removed and changed prices
    (usd_per_hour or upfront), with old and new price and the % change.

    ``scope="covered"`` compares only the (provider, region) pairs the new version has, so a
    refresh of one provider or region does not list every other price as removed;
    ``scope="keys"`` only the prices the new version has (what a user sheet overrides or adds).
    """
    old_info, new_info = get_version(session, old_version), get_version(session, new_version)
    _usable(old_info)
    _usable(new_info)
    old_points = version_points(session, old_version)
    new_points = version_points(session, new_version)
    return compare_versions(old_info, new_info, old_points, new_points, scope=scope)


def diff_scope(old_version: int | None, new_version: int | None, scope: str | None) -> Scope | None:
    """Check a diff request before any work: two versions or none, and a known scope."""
    if (old_version is None) != (new_version is None):
        raise UsageError("give two versions (OLD NEW), or none for the latest two")
    if scope is None:
        return None
    if scope not in ("all", "covered", "keys"):
        raise UsageError(f"--scope {scope!r}: expected all, covered or keys")
    return cast(Scope, scope)


def diff_versions(
    session: Session,
    old_version: int | None = None,
    new_version: int | None = None,
    *,
    scope: str | None = None,
) -> SheetDiff:
    """``planner prices diff [OLD NEW] [--scope]``: two versions compared over ``scope``
    (default: every price of both), or with neither version given the pair and scope of
    :func:`default_diff_pair`."""
    chosen = diff_scope(old_version, new_version, scope)
    if old_version is None or new_version is None:
        old_version, new_version, default = default_diff_pair(session)
    else:
        default = "all"
    return diff(session, old_version, new_version, scope=chosen or default)


def default_diff_pair(session: Session) -> tuple[int, int, Scope]:
    """The versions ``planner prices diff`` compares by default: the newest successful version
    and the newest earlier successful one of the same kind (full comparison), else the one just
    before it, compared over what the newer one covers: its prices for a user sheet
    (``keys``), its providers and regions for a refresh or snapshot (``covered``)."""
    good = [v for v in list_versions(session) if v.status == STATUS_OK]
    if len(good) < 2:
        raise PlannerError(
            f"a diff needs two successful price-sheet versions; the store has {len(good)} "
            "(load prices with `planner prices refresh` or `planner prices import`)"
        )
    new = good[-1]
    for earlier in reversed(good[:-1]):
        if earlier.source_kind == new.source_kind:
            return earlier.id, new.id, "all"
    return good[-2].id, new.id, "keys" if new.source_kind == "user" else "covered"
