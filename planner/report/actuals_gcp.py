"""Monthly GCP spend from a CSV of the Cloud Billing export to BigQuery.

The standard usage cost export (table ``gcp_billing_export_v1_<BILLING_ACCOUNT_ID>``) has one
row per charge: ``billing_account_id``, ``service.description``, ``sku.description``,
``usage_start_time``, ``usage_end_time``, ``project.id``, ``location.region``, ``cost``,
``currency``, ``currency_conversion_rate``, ``credits`` (a repeated record of name, amount, type
...), ``invoice.month`` (YYYYMM), ``cost_type`` (regular, tax, adjustment, rounding error) and
more. BigQuery writes nested fields to CSV only flattened, so a header may read
``invoice.month`` or ``invoice_month``, and ``credits`` is the JSON of the list
(``TO_JSON_STRING(credits)``); both spellings are read.

A month's spend is ``sum(cost) + sum(credits.amount)`` (credits are negative) over the rows of
its ``invoice.month``, tax rows left out (the plan is pre-tax). A row in another currency is
converted with the export's own ``currency_conversion_rate`` (units of the currency per USD)
when the file has it, else at the caller's stated rate, else refused.

Bounds (each refusal names the file, the row, the column and the value): the file is at most
:data:`MAX_FILE_BYTES` (1 GiB, BigQuery's own largest CSV export file); a ``credits`` cell is at
most :data:`MAX_CREDITS_CHARS` characters of JSON nested at most :data:`MAX_JSON_DEPTH` deep, each
credit a negative (or zero) amount; ``invoice.month`` is 200001 to 210012; a conversion rate is
:data:`MIN_RATE` to :data:`MAX_RATE` units per USD; a counted row's cost and its credits are each
at most ``planner.report.actuals_common.MAX_AMOUNT_USD`` (1e9 USD, either sign) unless the
caller raises it (``max_amount_usd``; ``planner report --max-actual-usd``). NaN and infinities
are refused.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path

import pandas as pd

from planner.common.text import shown
from planner.errors import InputFileError, RowProblem
from planner.report.actuals_common import (
    MAX_AMOUNT_USD,
    ActualsError,
    add_cost,
    beyond_limit,
    in_usd,
    source_frame,
)

SOURCE = "GCP billing export"
PROVIDER = "gcp"
REQUIRED = ("cost", "currency", "invoice_month")
OPTIONAL = ("credits", "cost_type", "currency_conversion_rate", "service_description")
MAX_FILE_BYTES = 1 << 30  # BigQuery writes a CSV export in files of at most 1 GB
MAX_CREDITS_CHARS = 65_536  # a row's credits are a few entries of a few fields
MAX_JSON_DEPTH = 16  # a list of flat objects is 2 deep
MIN_RATE, MAX_RATE = 1e-4, 1e6  # units of a currency per USD (KWD about 0.3, IRR about 42,000)
FIRST_YEAR, LAST_YEAR = 2000, 2100


def _key(header: str) -> str:
    """``invoice.month`` and ``invoice_month`` name the same field."""
    return header.strip().lower().replace(".", "_")


def gcp_actuals(
    path: Path | str,
    *,
    services: Sequence[str] = (),
    exchange_rates: Mapping[str, float] | None = None,
    max_amount_usd: float | None = None,
) -> pd.DataFrame:
    """GCP spend per invoice month in the export at ``path`` (only the rows of ``services``,
    e.g. "Compute Engine", when given), in ``planner.report.actuals_common.SOURCE_COLUMNS``.

    Raises :class:`InputFileError` naming the file, the row and the column of a bad value and
    what was expected there (a counted row's cost or credits beyond ``max_amount_usd``, by
    default ``planner.report.actuals_common.MAX_AMOUNT_USD``, included), and :class:`ActualsError`
    for a currency it cannot convert.
    """
    path = Path(path)
    limit = MAX_AMOUNT_USD if max_amount_usd is None else max_amount_usd
    frame = _read(path)
    headers = {_key(c): c for c in frame.columns}
    for needed in REQUIRED:
        if needed not in headers:
            dotted = needed.replace("_", ".", 1) if needed == "invoice_month" else needed
            raise InputFileError(
                path,
                RowProblem(
                    None,
                    dotted,
                    "missing column; expected a Cloud Billing BigQuery export with at least "
                    "cost, currency and invoice.month (credits as JSON, cost_type optional)",
                ),
            )
    column = {k: headers[k] for k in (*REQUIRED, *OPTIONAL) if k in headers}
    if services and "service_description" not in column:
        raise InputFileError(
            path,
            RowProblem(None, "service.description", "missing column; needed to pick services"),
        )
    # every row is checked, whether it counts or not: a bad value anywhere is a broken export
    months = _months(path, frame, column["invoice_month"])
    cost = _numbers(path, frame, column["cost"], "the cost in the row's currency")
    credits = _credits(path, frame, column.get("credits"))
    currency = frame[column["currency"]].str.strip().str.upper()
    _check(path, frame, column["currency"], currency.str.fullmatch(r"[A-Z]{3}"), "e.g. USD")
    keep = pd.Series(True, index=frame.index)
    if services:
        keep &= frame[column["service_description"]].str.strip().isin(set(services))
    if "cost_type" in column:  # the plan is pre-tax
        keep &= frame[column["cost_type"]].str.strip().str.lower() != "tax"
    amount = cost + credits
    scale = pd.Series(1.0, index=frame.index, dtype="float64")  # USD per unit of the currency
    foreign = currency != "USD"
    rate_column = column.get("currency_conversion_rate")
    if foreign.any():
        rated = foreign & (frame[rate_column].str.strip() != "") if rate_column else foreign & False
        if rated.any() and rate_column is not None:
            rate = _numbers(path, frame[rated], rate_column, "units of the currency per USD")
            _check(
                path,
                frame[rated],
                rate_column,
                (rate >= MIN_RATE) & (rate <= MAX_RATE),
                f"a rate of {MIN_RATE:g} to {MAX_RATE:,.0f} units of the currency per USD",
            )
            scale[rated] = 1.0 / rate  # the export's own rate
        for code in sorted(set(currency[foreign & ~rated & keep])):
            at = foreign & ~rated & (currency == code)
            counted = at & keep
            first = int(str(counted[counted].index[0])) + 1
            where = f"{path.name} row {first} (no currency_conversion_rate)"
            scale[at] = in_usd(SOURCE, 1.0, code, exchange_rates, where)
        # rows that do not count, in a currency without a rate: judged as written
    _check_amounts(path, frame, column["cost"], "cost", cost, currency, scale, limit)
    if "credits" in column:
        _check_amounts(
            path, frame, column["credits"], "credits (summed)", credits, currency, scale, limit
        )
    months, currency, usd = months[keep], currency[keep], (amount * scale)[keep]
    totals: dict[date, tuple[float, set[str]]] = {}
    sums = pd.DataFrame({"month": months, "currency": currency, "usd": usd})
    for month, code, value in (
        sums.groupby(["month", "currency"])["usd"].sum().reset_index().itertuples(index=False)
    ):
        add_cost(totals, month, float(value), str(code))
    return source_frame(PROVIDER, [], totals)


def _check_amounts(
    path: Path,
    frame: pd.DataFrame,
    column: str,
    what: str,
    amount: pd.Series,
    currency: pd.Series,
    scale: pd.Series,
    limit: float,
) -> None:
    """Each counted row's ``amount`` (in its currency; times ``scale`` in USD) within the
    limit."""
    usd = amount * scale
    bad = ~(usd.abs() <= limit)  # NaN and infinities too
    if bad.any():
        index = bad[bad].index[0]
        why = beyond_limit(float(amount[index]), str(currency[index]), float(usd[index]), limit)
        raise InputFileError(path, RowProblem(int(str(index)) + 1, column, f"{what} {why}"))


def _read(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise InputFileError(path, "no such file")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InputFileError(path, f"cannot read it ({exc.strerror or exc})") from None
    if size > MAX_FILE_BYTES:
        raise InputFileError(
            path,
            f"the file is {size / (1 << 30):,.1f} GiB; planner reads an export of at most "
            f"{MAX_FILE_BYTES >> 30} GiB (BigQuery's largest CSV file): export the months "
            "wanted, or fewer columns",
        )
    try:
        with warnings.catch_warnings():
            # a first row longer than the header: an error, not columns shifted into an index
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(
                path,
                dtype=str,
                keep_default_na=False,
                encoding="utf-8-sig",
                skipinitialspace=False,
                index_col=False,
            )
    except pd.errors.ParserWarning:
        raise InputFileError(
            path, RowProblem(1, None, "more fields than the header has columns", 2)
        ) from None
    except pd.errors.EmptyDataError:
        raise InputFileError(
            path, "the file is empty; expected a CSV of the Cloud Billing BigQuery export"
        ) from None
    except pd.errors.ParserError as exc:
        raise InputFileError(path, f"not a readable CSV ({str(exc).strip()})") from None
    except UnicodeDecodeError:
        raise InputFileError(path, "not UTF-8 text; expected a CSV export") from None
    except OSError as exc:
        raise InputFileError(path, f"cannot read it ({exc.strerror or exc})") from None
    return frame.reset_index(drop=True)


def _first_bad(frame: pd.DataFrame, good: pd.Series) -> tuple[int, object]:
    """The 1-based data row of the first bad value (the header is line 1) and its index."""
    index = good[~good].index[0]
    return int(str(index)) + 1, index


def _check(path: Path, frame: pd.DataFrame, column: str, good: pd.Series, expected: str) -> None:
    good = good.fillna(False).astype(bool)
    if not good.all():
        row, index = _first_bad(frame, good)
        value = frame.at[index, column]
        raise InputFileError(
            path, RowProblem(row, column, f"{shown(value)} is not valid; expected {expected}")
        )


def _months(path: Path, frame: pd.DataFrame, column: str) -> pd.Series:
    text = frame[column].str.strip()
    good = text.str.fullmatch(r"\d{4}(0[1-9]|1[0-2])") & text.str[:4].map(
        lambda y: y.isdigit() and FIRST_YEAR <= int(y) <= LAST_YEAR
    )
    if not good.fillna(False).astype(bool).all():
        row, index = _first_bad(frame, good.fillna(False).astype(bool))
        raise InputFileError(
            path,
            RowProblem(
                row,
                column,
                f"{shown(frame.at[index, column])} is not a month; expected YYYYMM from "
                f"{FIRST_YEAR}01 to {LAST_YEAR}12, e.g. 202701",
            ),
        )
    return text.map(lambda t: date(int(t[:4]), int(t[4:]), 1))


def _numbers(path: Path, frame: pd.DataFrame, column: str, what: str) -> pd.Series:
    values = pd.to_numeric(frame[column].str.strip(), errors="coerce").astype("float64")
    good = values.map(math.isfinite)
    if not good.all():
        row, index = _first_bad(frame, good)
        raise InputFileError(
            path,
            RowProblem(
                row,
                column,
                f"{shown(frame.at[index, column])} is not a number; expected {what}",
            ),
        )
    return values


def _credits(path: Path, frame: pd.DataFrame, column: str | None) -> pd.Series:
    """Each row's credits (negative), summed from the JSON list BigQuery writes."""
    if column is None:
        return pd.Series(0.0, index=frame.index, dtype="float64")
    text = frame[column].str.strip()
    sums = {
        index: _credit_sum(path, int(str(index)) + 1, column, value)
        for index, value in text[~text.isin(["", "[]", "null"])].items()
    }
    return pd.Series(sums, index=frame.index, dtype="float64").fillna(0.0)


def _credit_sum(path: Path, row: int, column: str, text: str) -> float:
    expected = 'expected a JSON list of credits, e.g. [{"name": "...", "amount": -1.5}]'
    if len(text) > MAX_CREDITS_CHARS:
        raise InputFileError(
            path,
            RowProblem(
                row,
                column,
                f"{len(text):,} characters of credits, more than the {MAX_CREDITS_CHARS:,} "
                f"planner reads in one cell; {expected}",
            ),
        )
    depth = _json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise InputFileError(
            path,
            RowProblem(
                row,
                column,
                f"JSON nested {depth:,} deep, more than the {MAX_JSON_DEPTH} planner reads; "
                f"{expected}",
            ),
        )
    try:
        credits = json.loads(text)
    except RecursionError:  # not reached within MAX_JSON_DEPTH; kept as a last guard
        raise InputFileError(
            path, RowProblem(row, column, f"JSON nested too deep; {expected}")
        ) from None
    except json.JSONDecodeError:
        raise InputFileError(
            path, RowProblem(row, column, f"{shown(text)} is not JSON; {expected}")
        ) from None
    if not isinstance(credits, list):
        raise InputFileError(path, RowProblem(row, column, f"{shown(text)}: {expected}"))
    total = 0.0
    for credit in credits:
        amount = credit.get("amount") if isinstance(credit, dict) else None
        if amount is None:
            raise InputFileError(
                path, RowProblem(row, column, f"a credit without an amount; {expected}")
            )
        try:
            value = math.nan if isinstance(amount, bool) else float(amount)
        except (TypeError, ValueError, OverflowError):
            value = math.nan
        if not math.isfinite(value):
            raise InputFileError(
                path,
                RowProblem(
                    row, column, f"credit amount {shown(amount)} is not a number; {expected}"
                ),
            )
        if value > 0:
            raise InputFileError(
                path,
                RowProblem(
                    row,
                    column,
                    f"credit amount {shown(amount)} is positive; the export writes credits as "
                    "negative amounts (they lower the cost)",
                ),
            )
        total += value
    return total


def _json_depth(text: str) -> int:
    """How deep the brackets of JSON ``text`` nest (those inside strings not counted); cheap
    when there are few brackets, as in every real credits cell."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return text.count("[") + text.count("{")
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


__all__ = ["ActualsError", "gcp_actuals"]
