"""Actual GCP spend from a CSV of the Cloud Billing BigQuery export, and plan vs actual against
the example report and a real one built from the demo store. Payload shapes:
tests/fixtures/actuals/README.md."""

from __future__ import annotations

import csv
import math
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from planner.errors import InputFileError, PlannerError, UsageError
from planner.report.actuals import gcp_actuals, plan_vs_actual
from planner.report.actuals_common import SOURCE_COLUMNS, ActualsError
from planner.report.model import ACTUAL_COLUMNS, Report
from tests.report.conftest import report_from

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "actuals" / "gcp"
EXPORT = FIXTURES / "billing_export.csv"
JAN, FEB, MAR = date(2027, 1, 1), date(2027, 2, 1), date(2027, 3, 1)


def rows() -> list[dict[str, str]]:
    with EXPORT.open(newline="") as f:
        return list(csv.DictReader(f))


def write(path: Path, records: list[dict[str, str]], columns: list[str] | None = None) -> Path:
    columns = columns or list(records[0])
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)
    return path


def test_cost_plus_credits_per_invoice_month_without_tax() -> None:
    frame = gcp_actuals(EXPORT)
    assert list(frame.columns) == list(SOURCE_COLUMNS)
    assert list(frame["month"]) == [JAN, FEB, MAR]
    assert set(frame["provider"]) == {"gcp"} and set(frame["currency"]) == {"USD"}
    # by hand from the fixture (README): cost + credits, the tax row left out
    assert frame["actual_usd"].tolist() == pytest.approx([3163.09, 2915.50, 3252.95], abs=1e-9)


def test_only_the_services_asked_for() -> None:
    frame = gcp_actuals(EXPORT, services=["Compute Engine"])
    assert frame["actual_usd"].tolist() == pytest.approx([3150.75, 2904.50, 3239.75], abs=1e-9)


def test_underscore_headers_as_bigquery_flattens_them(tmp_path: Path) -> None:
    records = [{k.replace(".", "_"): v for k, v in r.items()} for r in rows()]
    frame = gcp_actuals(write(tmp_path / "flat.csv", records))
    assert frame["actual_usd"].tolist() == pytest.approx([3163.09, 2915.50, 3252.95], abs=1e-9)


def test_the_exports_own_conversion_rate_converts_another_currency() -> None:
    frame = gcp_actuals(FIXTURES / "billing_export_eur.csv")
    assert frame["actual_usd"].tolist() == pytest.approx([2300.0], abs=1e-9)
    assert frame["currency"].tolist() == ["EUR"]


def test_another_currency_without_a_rate_is_refused_or_converted_at_a_stated_one(
    tmp_path: Path,
) -> None:
    with (FIXTURES / "billing_export_eur.csv").open(newline="") as f:
        records = list(csv.DictReader(f))
    columns = [c for c in records[0] if c != "currency_conversion_rate"]
    path = write(tmp_path / "eur.csv", records, columns)
    with pytest.raises(ActualsError) as caught:
        gcp_actuals(path)
    message = str(caught.value)
    assert message.startswith("GCP billing export: eur.csv row 1")
    assert "'EUR'" in message and "exchange_rates" in message
    frame = gcp_actuals(path, exchange_rates={"EUR": 1.1})
    assert frame["actual_usd"].tolist() == pytest.approx([2116.0 * 1.1])


@pytest.mark.parametrize(
    ("column", "value", "row", "expected"),
    [
        ("cost", "12,50", 3, "'12,50' is not a number; expected the cost"),
        ("cost", "", 7, "'' is not a number"),
        ("invoice.month", "2027-01", 2, "'2027-01' is not a month; expected YYYYMM"),
        ("invoice.month", "202713", 5, "'202713' is not a month"),
        ("currency", "US Dollar", 4, "'US Dollar' is not valid; expected e.g. USD"),
        ("credits", "[{amount: -1}]", 1, "is not JSON; expected a JSON list of credits"),
        ("credits", '[{"name": "x"}]', 9, "a credit without an amount"),
        ("credits", '[{"name": "x", "amount": "n/a"}]', 9, "credit amount 'n/a' is not a number"),
        ("credits", '{"amount": -1}', 9, "expected a JSON list of credits"),
    ],
)
def test_a_bad_value_is_located_by_file_row_and_column(
    tmp_path: Path, column: str, value: str, row: int, expected: str
) -> None:
    records = rows()
    records[row - 1][column] = value
    path = write(tmp_path / "export.csv", records)
    with pytest.raises(InputFileError) as caught:
        gcp_actuals(path)
    error = caught.value
    assert error.path == str(path)
    assert error.problem.row == row and error.problem.column == column
    assert expected in str(error)
    assert str(error).startswith(f"{path}: row {row}, column {column!r}: ")


def test_a_missing_column_a_missing_file_and_an_empty_file(tmp_path: Path) -> None:
    records = rows()
    columns = [c for c in records[0] if c != "invoice.month"]
    with pytest.raises(InputFileError, match=r"column 'invoice\.month': missing column"):
        gcp_actuals(write(tmp_path / "no-month.csv", records, columns))
    with pytest.raises(InputFileError, match="no such file"):
        gcp_actuals(tmp_path / "absent.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(InputFileError, match="the file is empty"):
        gcp_actuals(tmp_path / "empty.csv")


# --- plan vs actual --------------------------------------------------------------------------


def test_plan_vs_actual_against_the_example_plan(report: Report) -> None:
    table = plan_vs_actual(report, gcp_actuals(EXPORT))
    assert list(table.columns) == list(ACTUAL_COLUMNS)
    assert list(table["month"]) == [JAN, FEB, MAR] and set(table["provider"]) == {"gcp"}
    for scenario, column in (("expected", "planned_usd"), ("low", "low_usd"), ("high", "high_usd")):
        plan = report.monthly_totals(scenario, "cash")
        assert table[column].tolist() == pytest.approx([plan[m] for m in (JAN, FEB, MAR)])
    assert (table["low_usd"] <= table["planned_usd"]).all()
    assert (table["planned_usd"] <= table["high_usd"]).all()
    actual = [3163.09, 2915.50, 3252.95]
    planned = table["planned_usd"].tolist()
    assert table["variance_usd"].tolist() == pytest.approx(
        [a - p for a, p in zip(actual, planned, strict=True)]
    )
    assert table["variance_pct"].tolist() == pytest.approx(
        [(a - p) / p for a, p in zip(actual, planned, strict=True)]
    )
    # January: 7 committed x 744 h x $0.444 + the $1,000 upfront + 297.6 h on demand x $0.7045
    assert planned[0] == pytest.approx(7 * 744 * 0.444 + 1000 + 0.4 * 744 * 0.7045)
    filled = report.with_actuals(table)
    assert filled.actuals is table


def test_months_outside_the_plan_are_left_out_and_amortized_view_on_request(
    report: Report,
) -> None:
    actual = pd.DataFrame(
        [
            (date(2026, 12, 1), "gcp", "USD", 100.0),
            (JAN, "gcp", "USD", 2000.0),
            (JAN, "gcp", "USD", 500.0),  # a second billing account: added up
        ],
        columns=list(SOURCE_COLUMNS),
    )
    table = plan_vs_actual(report, actual, view="amortized")
    assert table["month"].tolist() == [JAN]
    assert table["actual_usd"].tolist() == [2500.0]
    assert table["planned_usd"].tolist() == pytest.approx(
        [report.monthly_totals("expected", "amortized")[JAN]]
    )


def test_plan_vs_actual_refuses_a_frame_that_is_not_actual_spend(report: Report) -> None:
    with pytest.raises(UsageError, match="lacks column"):
        plan_vs_actual(report, pd.DataFrame({"month": [JAN]}))
    with pytest.raises(UsageError, match="view 'billed'"):
        plan_vs_actual(report, gcp_actuals(EXPORT), view="billed")


# --- a real report from the demo store ----------------------------------------------------------


@pytest.fixture(scope="session")
def demo_report(demo_store_url: str) -> Report:
    from planner.usecases.report import ReportRequest

    return report_from(demo_store_url, ReportRequest(1))


def test_plan_vs_actual_against_a_real_report(demo_report: Report) -> None:
    """The demo plan's own providers and months, with an actual 10% above the expected plan:
    every variance is +10% and every planned figure is the projection's."""
    expected = demo_report.projection[demo_report.projection["scenario"] == "expected"]
    planned = expected.groupby(["month", "provider"])["cash_usd"].sum()
    keys = planned.index.to_frame(index=False)
    actual = keys.assign(currency="USD", actual_usd=1.1 * planned.to_numpy())
    table = plan_vs_actual(demo_report, actual)
    assert len(table) == len(planned) > 0
    assert table["planned_usd"].tolist() == pytest.approx(planned.tolist())
    assert table["variance_pct"].tolist() == pytest.approx([0.1] * len(table))
    assert not any(math.isnan(v) for v in table["low_usd"])
    assert (table["low_usd"] <= table["high_usd"] + 1e-9).all()
    assert isinstance(demo_report.with_actuals(table).actuals, pd.DataFrame)


def test_errors_are_planner_errors() -> None:
    assert issubclass(ActualsError, PlannerError)


# --- bounds: no value a real export cannot hold, no read without a limit ----------------------


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        ("cost", "1e308", "cost 1e+308 USD is beyond the 1,000,000,000 USD"),
        ("cost", "-1e12", "cost -1,000,000,000,000.00 USD is beyond"),
        ("cost", "nan", "'nan' is not a number"),
        ("cost", "inf", "'inf' is not a number"),
        ("credits", '[{"amount": -1e300}]', "credits (summed) -1e+300 USD is beyond"),
        ("credits", '[{"amount": 5}]', "credit amount '5' is positive"),
        ("credits", "[" * 50_000 + "]" * 50_000, "100,000 characters of credits"),
        ("credits", "[" * 20_000 + "]" * 20_000, "JSON nested 20,000 deep, more than the 16"),
        ("credits", '[{"amount": -1, "x": ' + "[" * 20 + "]" * 20 + "}]", "nested 22 deep"),
        ("credits", '[{"amount": -1' + "0" * 400 + "}]", "is not a number"),
        ("invoice.month", "999912", "'999912' is not a month; expected YYYYMM from 200001"),
        ("invoice.month", "000001", "'000001' is not a month"),
    ],
)
def test_an_absurd_or_unbounded_value_is_located(
    tmp_path: Path, column: str, value: str, expected: str
) -> None:
    records = rows()
    records[2][column] = value
    path = write(tmp_path / "export.csv", records)
    with pytest.raises(InputFileError) as caught:
        gcp_actuals(path)
    error = caught.value
    assert (error.path, error.problem.row, error.problem.column) == (str(path), 3, column)
    assert expected in str(error), str(error)


def test_a_conversion_rate_out_of_range_and_a_large_foreign_cost(tmp_path: Path) -> None:
    with (FIXTURES / "billing_export_eur.csv").open(newline="") as f:
        records = list(csv.DictReader(f))
    records[0]["currency_conversion_rate"] = "1e-300"
    path = write(tmp_path / "eur.csv", records)
    with pytest.raises(InputFileError, match=r"row 1, column 'currency_conversion_rate': '1e-300'"):
        gcp_actuals(path)
    records[0]["currency_conversion_rate"] = "0.5"
    records[0]["cost"] = "800000000"  # 1.6e9 USD at 0.5 EUR per USD
    path = write(tmp_path / "eur.csv", records)
    with pytest.raises(InputFileError, match=r"800,000,000.00 EUR \(1,600,000,000.00 USD\)"):
        gcp_actuals(path)
    frame = gcp_actuals(path, max_amount_usd=2e9)  # a bill that large, stated
    assert frame["actual_usd"].iloc[0] > 1.6e9


def test_the_limit_can_be_raised_for_a_real_bill_that_large(tmp_path: Path) -> None:
    from planner.report.export import ActualSources

    records = rows()
    records[2]["cost"] = "2e9"
    path = write(tmp_path / "export.csv", records)
    with pytest.raises(InputFileError, match="beyond the 1,000,000,000 USD"):
        gcp_actuals(path)
    assert gcp_actuals(path, max_amount_usd=3e9)["actual_usd"].max() > 2e9
    raised = ActualSources(gcp_export=path, max_amount_usd=3e9)
    assert raised.max_amount_usd == 3e9
    assert not ActualSources(max_amount_usd=3e9)  # a limit alone is no source


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from planner.report import actuals_gcp

    monkeypatch.setattr(actuals_gcp, "MAX_FILE_BYTES", 1000)
    with pytest.raises(InputFileError, match="planner reads an export of at most"):
        gcp_actuals(EXPORT)


def test_a_first_row_longer_than_the_header_is_named_not_shifted(tmp_path: Path) -> None:
    path = tmp_path / "extra.csv"
    path.write_text("cost,currency,invoice.month\n1,USD,202701,5,6\n", encoding="utf-8")
    with pytest.raises(InputFileError) as caught:
        gcp_actuals(path)
    assert str(caught.value) == f"{path}: row 1, line 2: more fields than the header has columns"
    path.write_text("cost,currency,invoice.month\n1,USD,202701\n2,USD,202701,5\n")
    with pytest.raises(InputFileError, match="Expected 3 fields in line 3, saw 4"):
        gcp_actuals(path)
