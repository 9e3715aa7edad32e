"""The bundled price snapshot (``data/prices/gpu_prices_snapshot.csv``) and the row parser it
shares with user price sheets.

A sheet is one row per :class:`~pricing.model.PricePoint`, with the columns of
:data:`COLUMNS`. Every malformed value stops the read with the file, row, line and column and
what was expected there; nothing is guessed. An unknown price is a missing row, never a zero.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Protocol

from planner.errors import InputFileError, RowProblem
from planner.paths import data_dir
from pricing.model import PricePoint, Provider, PurchaseOption

SNAPSHOT_FILE = "gpu_prices_snapshot.csv"
HOURS_PER_YEAR = 8760  # 365 x 24: how AWS and Azure amortize a term

#: The columns of a price sheet, in the order the snapshot writes them.
COLUMNS: tuple[str, ...] = (
    "provider",
    "region",
    "instance_type",
    "gpu_model",
    "gpu_count",
    "gpu_memory_gb",
    "vcpus",
    "ram_gb",
    "purchase_option",
    "usd_per_hour",
    "upfront_usd",
    "payment",
    "plan_kind",
    "currency",
    "effective_date",
    "source",
)
#: Free-text columns a user sheet may carry; they are read past.
IGNORED_COLUMNS = ("notes", "note", "comment", "comments")
PAYMENTS = ("", "no-upfront", "partial-upfront", "all-upfront")
PLAN_KINDS = ("", "compute", "instance-family")
OPTION_ALIASES = {
    "ondemand": PurchaseOption.ON_DEMAND,
    "od": PurchaseOption.ON_DEMAND,
    "preemptible": PurchaseOption.SPOT,
    "low-priority": PurchaseOption.SPOT,
}

#: (provider, instance_type) -> a known point of that instance, to fill a sheet's blank shape.
ShapeLookup = Callable[[Provider, str], PricePoint | None]


def snapshot_path() -> Path:
    """The bundled snapshot: ``data/prices/gpu_prices_snapshot.csv`` (``$PLANNER_DATA_DIR``)."""
    return data_dir() / "prices" / SNAPSHOT_FILE


@dataclass(frozen=True)
class RawRow:
    """One data row as read: its 1-based number, its physical line (if any) and its cells."""

    row: int
    line: int | None
    values: Mapping[str, str]


def load_snapshot(path: Path | None = None) -> list[PricePoint]:
    """Every price of the bundled snapshot (or of ``path`` in the same layout).

    The snapshot is strict: every column present, every GPU a planner catalog name, every row
    with its source and date.
    """
    path = path or snapshot_path()
    header, rows = read_csv(path)
    check_header(path, header, required=COLUMNS)
    gpu_names = set(_catalog_gpus().values())
    points = parse_points(path, rows, defaults={}, gpu_names=gpu_names)
    return points


def read_csv(path: Path) -> tuple[list[str], list[RawRow]]:
    """The normalized header and the rows of a CSV file (UTF-8, optional BOM)."""
    if not path.is_file():
        raise InputFileError(path, "file not found")
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            try:
                header = next(reader)
            except StopIteration:
                raise InputFileError(path, "empty file: expected a header row") from None
            names = [_column_name(h) for h in header]
            rows: list[RawRow] = []
            line = reader.line_num
            for number, cells in enumerate(reader, start=1):
                first_line = line + 1
                line = reader.line_num
                if not any(c.strip() for c in cells):
                    continue  # blank lines are not rows
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
                rows.append(RawRow(number, first_line, dict(zip(names, cells, strict=True))))
    except UnicodeDecodeError as exc:
        raise InputFileError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except csv.Error as exc:
        raise InputFileError(path, f"not a readable CSV file: {exc}") from exc
    return names, rows


def _column_name(value: str) -> str:
    return value.strip().lower().replace(" ", "_")


def check_header(
    path: Path,
    header: Sequence[str],
    *,
    required: Iterable[str],
    columns: Sequence[str] = COLUMNS,
    ignored: Iterable[str] = IGNORED_COLUMNS,
) -> None:
    """Every required column present; no unknown (not in ``columns``) or repeated column;
    ``ignored`` ones (free text) read past."""
    seen: set[str] = set()
    ignored = set(ignored)
    for name in header:
        if name in ignored:
            continue
        if name not in columns:
            raise InputFileError(
                path,
                RowProblem(None, name, f"unknown column (the columns are: {', '.join(columns)})"),
            )
        if name in seen:
            raise InputFileError(path, RowProblem(None, name, "column given twice"))
        seen.add(name)
    missing = [c for c in required if c not in seen]
    if missing:
        raise InputFileError(
            path, f"missing column(s) {', '.join(repr(c) for c in missing)} in the header"
        )


def parse_points(
    path: Path,
    rows: Iterable[RawRow],
    *,
    defaults: Mapping[str, str],
    gpu_names: set[str] | None = None,
    aliases: Mapping[str, str] | None = None,
    shapes: ShapeLookup | None = None,
) -> list[PricePoint]:
    """Parse rows into points; a repeated key (same price twice) is an error naming both rows.

    ``gpu_names``: when given, ``gpu_model`` must be one of them exactly (the snapshot).
    ``aliases``: lower-cased GPU names and aliases -> catalog names (user sheets).
    ``shapes``: where a row leaves the instance's GPU model or count blank, take them (and
    blank memory, vCPUs, RAM) from this known price of the same instance.
    """
    points: list[PricePoint] = []
    first_row: dict[tuple[str, ...], int] = {}
    for raw in rows:
        point = parse_row(path, raw, defaults, gpu_names, aliases, shapes)
        key = point.key()
        if key in first_row:
            raise InputFileError(
                path,
                RowProblem(
                    raw.row,
                    None,
                    f"the same price as row {first_row[key]} (provider, region, instance type, "
                    "purchase option, payment and plan kind repeat)",
                    raw.line,
                ),
            )
        first_row[key] = raw.row
        points.append(point)
    return points


class _Row:
    """Reads the cells of one row, raising a located error for the first bad one."""

    def __init__(self, path: Path, raw: RawRow, defaults: Mapping[str, str]) -> None:
        self.path = path
        self.raw = raw
        self.defaults = defaults

    def fail(self, column: str | None, message: str) -> InputFileError:
        return InputFileError(self.path, RowProblem(self.raw.row, column, message, self.raw.line))

    def text(self, column: str) -> str:
        value = self.raw.values.get(column)
        value = value.strip() if value is not None else ""
        return value or self.defaults.get(column, "")

    def required(self, column: str) -> str:
        value = self.text(column)
        if not value:
            raise self.fail(column, "expected a value, got a blank")
        return value

    def number(self, column: str, *, blank: float | None = None) -> float | None:
        # No separators are guessed here: deleting commas read "1,09" as 109. User sheets
        # normalize their number text first (pricing.sheets.number_text, --decimal-comma).
        text = self.text(column).removeprefix("$").strip()
        if not text:
            return blank
        try:
            value = float(text)
        except ValueError:
            raise self.fail(column, f"expected a number, got {self.text(column)!r}") from None
        if not math.isfinite(value):
            raise self.fail(column, f"expected a finite number, got {self.text(column)!r}")
        return value

    def positive(self, column: str) -> float | None:
        value = self.number(column)
        if value is not None and value <= 0:
            raise self.fail(column, f"expected a positive number (blank if unknown), got {value:g}")
        return value

    def count(self, column: str) -> int | None:
        value = self.number(column)
        if value is None:
            return None
        if value != int(value) or value < 1:
            raise self.fail(column, f"expected a whole number of at least 1, got {value:g}")
        return int(value)

    def choice(self, column: str, allowed: Sequence[str]) -> str:
        value = self.text(column).lower().replace("_", "-").replace(" ", "-")
        if value not in allowed:
            shown = ", ".join(repr(a) if a else "blank" for a in allowed)
            raise self.fail(column, f"expected one of {shown}, got {self.text(column)!r}")
        return value


def parse_row(
    path: Path,
    raw: RawRow,
    defaults: Mapping[str, str],
    gpu_names: set[str] | None = None,
    aliases: Mapping[str, str] | None = None,
    shapes: ShapeLookup | None = None,
) -> PricePoint:
    """One :class:`PricePoint` from one row; see :func:`parse_points`."""
    r = _Row(path, raw, defaults)
    provider = Provider(r.choice("provider", [p.value for p in Provider]))
    region = r.required("region")
    instance_type = r.required("instance_type")
    option_text = r.text("purchase_option").lower().replace("_", "-").replace(" ", "-")
    option = OPTION_ALIASES.get(option_text)
    if option is None:
        option = PurchaseOption(r.choice("purchase_option", [o.value for o in PurchaseOption]))

    price = r.number("usd_per_hour")
    if price is None:
        raise r.fail("usd_per_hour", "expected a price, got a blank (leave unknown prices out)")
    if price <= 0:
        raise r.fail(
            "usd_per_hour",
            f"expected a positive price, got {price:g} (an unknown price is left out, never 0)",
        )
    upfront = r.number("upfront_usd", blank=0.0) or 0.0
    if upfront < 0:
        raise r.fail("upfront_usd", f"expected 0 or more, got {upfront:g}")
    payment = r.choice("payment", PAYMENTS)
    plan_kind = r.choice("plan_kind", PLAN_KINDS)
    _check_terms(r, option, price, upfront, payment, plan_kind)

    currency = (r.text("currency") or "USD").upper()
    if currency != "USD":
        raise r.fail("currency", f"prices must be in USD, got {r.text('currency')!r}")
    effective = iso_date(r, "effective_date")
    source = r.required("source")

    gpu_model = r.text("gpu_model")
    gpu_count = r.count("gpu_count")
    memory = r.positive("gpu_memory_gb")
    vcpus = r.count("vcpus")
    ram = r.positive("ram_gb")
    if shapes is not None and (not gpu_model or gpu_count is None):
        known = shapes(provider, instance_type)
        if known is not None:
            gpu_model = gpu_model or known.gpu_model
            gpu_count = gpu_count if gpu_count is not None else known.gpu_count
            memory = memory if memory is not None else known.gpu_memory_gb
            vcpus = vcpus if vcpus is not None else known.vcpus
            ram = ram if ram is not None else known.ram_gb
    if not gpu_model:
        raise r.fail(
            "gpu_model",
            f"expected a GPU model (blank is allowed only for an instance type already in the "
            f"price list; {instance_type!r} is not)",
        )
    if gpu_count is None:
        raise r.fail(
            "gpu_count",
            f"expected the number of GPUs (blank is allowed only for an instance type already "
            f"in the price list; {instance_type!r} is not)",
        )
    if aliases is not None:
        gpu_model = aliases.get(gpu_model.lower(), gpu_model)
    if gpu_names is not None and gpu_model not in gpu_names:
        raise r.fail(
            "gpu_model",
            f"expected a planner catalog GPU ({', '.join(sorted(gpu_names))}), got {gpu_model!r}",
        )
    return PricePoint(
        provider=provider,
        region=region,
        instance_type=instance_type,
        gpu_model=gpu_model,
        gpu_count=gpu_count,
        purchase_option=option,
        usd_per_hour=price,
        source=source,
        effective_date=effective,
        gpu_memory_gb=memory,
        vcpus=vcpus,
        ram_gb=ram,
        upfront_usd=upfront,
        payment=payment,
        plan_kind=plan_kind,
        currency=currency,
    )


def _check_terms(
    r: _Row, option: PurchaseOption, price: float, upfront: float, payment: str, plan_kind: str
) -> None:
    term = option.term_years
    if not term:
        for column, value in (("upfront_usd", upfront), ("payment", payment)):
            if value:
                raise r.fail(column, f"{option.value} has no term, so no upfront or payment")
    if plan_kind and not option.value.startswith("savings-plan"):
        raise r.fail("plan_kind", f"a plan kind applies to savings plans, not {option.value}")
    if payment == "no-upfront" and upfront:
        raise r.fail("upfront_usd", "no-upfront with an upfront amount")
    if payment in ("partial-upfront", "all-upfront") and not upfront:
        raise r.fail("upfront_usd", f"{payment} needs the upfront amount")
    if upfront and term:
        amortized = upfront / (term * HOURS_PER_YEAR)
        if payment == "all-upfront" and not math.isclose(price, amortized, rel_tol=0.01):
            raise r.fail(
                "usd_per_hour",
                f"all-upfront: the effective price is the upfront over the term "
                f"({upfront:g} / {term * HOURS_PER_YEAR} h = {amortized:.4f}), got {price:g}",
            )
        if price < amortized * 0.99:
            raise r.fail(
                "usd_per_hour",
                f"the effective price includes the amortized upfront ({amortized:.4f}/h), so it "
                f"cannot be {price:g}",
            )


class Cells(Protocol):
    """A sheet's row as the column parsers read it: a required cell, and an error naming the
    file, row and column."""

    def required(self, column: str) -> str: ...

    def fail(self, column: str | None, message: str) -> InputFileError: ...


def iso_date(r: Cells, column: str) -> str:
    """The cell as an ISO date (a spreadsheet's midnight timestamp accepted)."""
    text = r.required(column)
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        pass
    try:  # spreadsheets hand dates over as timestamps
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise r.fail(column, f"expected an ISO date (YYYY-MM-DD), got {text[:80]!r}") from None
    if stamp.time() != datetime.min.time():
        raise r.fail(column, f"expected a date without a time of day, got {text[:80]!r}")
    return stamp.date().isoformat()


def _catalog_gpus() -> dict[str, str]:
    """Lower-cased GPU names and aliases -> planner catalog names."""
    from planner.latency.catalog import load_catalog

    names: dict[str, str] = {}
    for gpu in load_catalog().gpus.entries:
        names[gpu.name.lower()] = gpu.name
        for alias in gpu.aliases:
            names.setdefault(alias.lower(), gpu.name)
    return names


def gpu_aliases() -> dict[str, str]:
    """Lower-cased GPU names and aliases of the planner catalog -> catalog names."""
    return _catalog_gpus()
